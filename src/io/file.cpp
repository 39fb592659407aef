// MappedFile: ownership and borrowing, the same on every platform. Mapping itself is in file_native.cpp.
#include "io/file.h"

namespace sotto {

MappedFile::MappedFile(MappedFile&& o) noexcept {
  *this = std::move(o);
}

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
  if (owned_ && data_ && size_ > 0) unmap_file(data_, size_);
  data_ = nullptr;
  owned_ = false;
}

MappedFile MappedFile::borrow(std::span<const uint8_t> bytes) {
  MappedFile f;
  f.data_ = bytes.data();
  f.size_ = bytes.size();
  return f;
}

}  // namespace sotto
