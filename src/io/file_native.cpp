// MappedFile, native: mmap the whole file read-only.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/file.h"

namespace sotto {

void unmap_file(const uint8_t* data, uint64_t size) {
  munmap(const_cast<uint8_t*>(data), size);
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(path, ": cannot open: ", std::strerror(errno));
  struct stat st{};
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
