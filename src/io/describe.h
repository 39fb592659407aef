// What `sotto info` shows of any model or audio file: its format, its metadata and its tensor table.
// Each reader fills one of these from the file's bytes; the CLI (and the wasm API) render it as text or JSON.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace sotto {

struct MetadataEntry {
  std::string key;
  std::string type;  // the file's own type name: "u32", "string", "array[string]", "float32" ...
  std::string json;  // the value as JSON (long arrays cut to their first 16 elements plus a count)
  std::string text;  // the value for people, one line, cut to ~120 characters
};

struct FileDescription {
  std::string format;  // "gguf v3", "safetensors", "onnx", "wav"
  std::vector<MetadataEntry> metadata;
  std::vector<TensorInfo> tensors;
};

enum class FileFormat { Unknown, Gguf, Safetensors, Onnx, Wav, Ort };

// Sniffs the format from the first bytes (and, for ONNX, which has no magic, from a successful parse of the
// first protobuf field). Unknown when nothing fits.
FileFormat detect_format(std::span<const uint8_t> bytes);

// One entry point per format; describe_file() picks by detect_format() and says what it saw when it cannot.
Result<FileDescription> describe_gguf(std::span<const uint8_t> bytes);
Result<FileDescription> describe_safetensors(std::span<const uint8_t> bytes);
Result<FileDescription> describe_onnx(std::span<const uint8_t> bytes);
Result<FileDescription> describe_wav(std::span<const uint8_t> bytes);
Result<FileDescription> describe_ort(std::span<const uint8_t> bytes);  // io/ort_describe.cpp
Result<FileDescription> describe_file(std::span<const uint8_t> bytes);

// The description as one JSON object, the shape `sotto info --json` prints and the wasm API returns:
//   {"file", "format", "metadata": [{key, type, value, text}], "tensors": [{name, dtype, shape, offset, bytes}],
//    "tensor_bytes"}
std::string describe_json(const FileDescription& d, std::string_view file_name);

// JSON string escaping shared by every describe_* (quotes included in the output).
std::string json_quote(std::string_view s);

}  // namespace sotto
