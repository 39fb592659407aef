// A whole file's bytes, read-only. Natively the file is mmap'd (zero copy; the OS pages weights in as they are
// touched). On the web the JS side streams the file into one buffer in wasm memory and wraps it with
// MappedFile::borrow(), so there is never a second full copy.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"

namespace sotto {

// Platform hook: releases a mapping made by MappedFile::open (native only).
void unmap_file(const uint8_t* data, uint64_t size);

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Native only: maps `path` read-only. Errors name the path and the OS reason.
  static Result<MappedFile> open(const std::string& path);
  // Wraps bytes owned by someone else (the caller keeps them alive).
  static MappedFile borrow(std::span<const uint8_t> bytes);

  std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool owned_ = false;  // true when we must munmap
  std::string path_;
};

}  // namespace sotto
