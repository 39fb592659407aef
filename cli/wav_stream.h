// A float32 mono WAV file written as its audio is made (`sotto speak`, `sotto agent`): the sizes in the header
// are rewritten after every append, so the file is valid at every moment and a player can start on it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "core/error.h"

namespace sotto::cli {

class WavStream {
 public:
  ~WavStream() {
    if (file_) std::fclose(file_);
  }
  Status open(const std::string& path, uint32_t rate_hz) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) return error(path, ": cannot open for writing");
    path_ = path;
    rate_hz_ = rate_hz;
    return write_header();
  }
  Status append(std::span<const float> samples) {
    if (std::fseek(file_, 0, SEEK_END) != 0 ||
        std::fwrite(samples.data(), sizeof(float), samples.size(), file_) != samples.size())
      return error(path_, ": write failed");
    samples_ += samples.size();
    return write_header();
  }
  uint64_t samples() const { return samples_; }

 private:
  Status write_header() {
    const uint32_t data_bytes = static_cast<uint32_t>(samples_ * 4);
    uint8_t h[44];
    auto put32 = [&](int at, uint32_t v) {
      for (int k = 0; k < 4; ++k) h[at + k] = static_cast<uint8_t>(v >> (8 * k));
    };
    auto put16 = [&](int at, uint16_t v) {
      h[at] = static_cast<uint8_t>(v);
      h[at + 1] = static_cast<uint8_t>(v >> 8);
    };
    std::memcpy(h, "RIFF", 4);
    put32(4, 36 + data_bytes);
    std::memcpy(h + 8, "WAVEfmt ", 8);
    put32(16, 16);
    put16(20, 3);  // IEEE float
    put16(22, 1);
    put32(24, rate_hz_);
    put32(28, rate_hz_ * 4);
    put16(32, 4);
    put16(34, 32);
    std::memcpy(h + 36, "data", 4);
    put32(40, data_bytes);
    if (std::fseek(file_, 0, SEEK_SET) != 0 || std::fwrite(h, 1, sizeof h, file_) != sizeof h ||
        std::fflush(file_) != 0)
      return error(path_, ": write failed");
    return {};
  }

  std::FILE* file_ = nullptr;
  std::string path_;
  uint32_t rate_hz_ = 0;
  uint64_t samples_ = 0;
};

}  // namespace sotto::cli
