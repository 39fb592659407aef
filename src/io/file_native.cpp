// MappedFile, native: mmap the whole file read-only.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/file.h"

namespace sotto {

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    this->~MappedFile();
    data_ = o.data_;
    size_ = o.size_;
    owned_ = o.owned_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
    o.owned_ = false;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (owned_ && data_ && size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  owned_ = false;
}

MappedFile MappedFile::borrow(std::span<const uint8_t> bytes) {
  MappedFile f;
  f.data_ = bytes.data();
  f.size_ = bytes.size();
  return f;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return error(path, ": cannot stat: ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(path, ": not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return error(path, ": cannot map ", f.size_, " bytes: ", std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
    f.owned_ = true;
  }
  ::close(fd);
  return f;
}

}  // namespace sotto
