// Format sniffing, the shared JSON quoting, and the GGUF / safetensors halves of `sotto info`.
#include "io/describe.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "io/gguf.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace sotto {

namespace {

constexpr size_t kMaxJsonArrayItems = 16;
constexpr size_t kMaxTextChars = 120;

bool starts_with(std::span<const uint8_t> bytes, std::string_view prefix, size_t at = 0) {
  return bytes.size() >= at + prefix.size() &&
         std::memcmp(bytes.data() + at, prefix.data(), prefix.size()) == 0;
}

constexpr char kHex[] = "0123456789abcdef";

// One line for people: control characters shown as escapes, invalid UTF-8 as U+FFFD, cut at `max_chars`
// code points with "..." appended.
std::string human_text(std::string_view s, size_t max_chars = kMaxTextChars) {
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) {
    if (chars >= max_chars) {
      out += "...";
      break;
    }
    auto c = static_cast<uint8_t>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else if (size_t n = utf8_sequence_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\xEF\xBF\xBD";
    }
    ++i;
  }
  return out;
}

std::string cut_text(std::string s) {
  return s.size() > kMaxTextChars + 3 ? human_text(s) : s;
}

std::string float_text(double v, bool is_f32) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  auto r = is_f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                  : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// JSON has no NaN or infinity; they become null.
std::string float_json(double v, bool is_f32) {
  return std::isfinite(v) ? float_text(v, is_f32) : "null";
}

// A scalar element of type t at p, as JSON text (which is also fine for people).
std::string gguf_scalar_json(const GgufValue& v, uint64_t index, bool in_array) {
  GgufType t = in_array ? v.array_type : v.type;
  if (t == GgufType::F32 || t == GgufType::F64)
    return float_json(in_array ? v.array_f64(index) : v.as_f64(), t == GgufType::F32);
  if (t == GgufType::Bool) return (in_array ? v.array_i64(index) : v.as_i64()) != 0 ? "true" : "false";
  if (t == GgufType::U64) {
    GgufValue element = v;
    if (in_array) {
      element.type = GgufType::U64;
      element.raw = v.raw.subspan(static_cast<size_t>(index * 8), 8);
    }
    return cat(element.as_u64());
  }
  return cat(in_array ? v.array_i64(index) : v.as_i64());
}

MetadataEntry describe_gguf_value(const GgufKeyValue& kv) {
  const GgufValue& v = kv.value;
  MetadataEntry e;
  e.key = std::string(kv.key);
  e.type = v.type_name();
  if (v.type == GgufType::String) {
    e.json = json_quote(v.str);
    e.text = human_text(v.str);
  } else if (v.type != GgufType::Array) {
    e.json = gguf_scalar_json(v, 0, false);
    e.text = (v.type == GgufType::F32 || v.type == GgufType::F64)
                 ? float_text(v.as_f64(), v.type == GgufType::F32)
                 : e.json;
  } else {
    // Arrays of up to 16 elements are plain JSON arrays; longer ones become {"count": n, "first": [16
    // elements]}.
    uint64_t shown = std::min<uint64_t>(v.array_count, kMaxJsonArrayItems);
    std::string items;
    std::string text_items;
    for (uint64_t i = 0; i < shown; ++i) {
      bool is_string = v.array_type == GgufType::String;
      std::string element = is_string ? json_quote(v.array_strings[i]) : gguf_scalar_json(v, i, true);
      items += cat(i > 0 ? "," : "", element);
      if (text_items.size() <= kMaxTextChars)  // the text is cut anyway; don't build more of it
        text_items +=
            cat(i > 0 ? ", " : "", is_string ? json_quote(human_text(v.array_strings[i], 24)) : element);
    }
    e.json = v.array_count > shown ? cat("{\"count\":", v.array_count, ",\"first\":[", items, "]}")
                                   : cat("[", items, "]");
    e.text = cut_text(cat("[", v.array_count, " ", gguf_type_name(v.array_type), "] ", text_items,
                          v.array_count > shown ? ", ..." : ""));
  }
  return e;
}

// What the first bytes look like, for the "unrecognized format" message.
std::string describe_first_bytes(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return "the file is empty";
  size_t n = std::min<size_t>(bytes.size(), 8);
  std::string hex, ascii;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) hex += ' ';
    hex.push_back(kHex[bytes[i] >> 4]);
    hex.push_back(kHex[bytes[i] & 15]);
    ascii.push_back(bytes[i] >= 0x20 && bytes[i] < 0x7f ? static_cast<char>(bytes[i]) : '.');
  }
  std::string guess;
  size_t probe = std::min<size_t>(bytes.size(), 512);
  bool text = true;
  for (size_t i = 0; i < probe; ++i)
    if (bytes[i] < 0x20 && bytes[i] != '\n' && bytes[i] != '\r' && bytes[i] != '\t') text = false;
  size_t first = 0;
  while (first < probe &&
         (bytes[first] == ' ' || bytes[first] == '\n' || bytes[first] == '\r' || bytes[first] == '\t'))
    ++first;
  if (starts_with(bytes, "OggS"))
    guess = "an Ogg container (audio)";
  else if (starts_with(bytes, "fLaC"))
    guess = "FLAC audio";
  else if (starts_with(bytes, "ID3"))
    guess = "MP3 audio";
  else if (starts_with(bytes, "RIFF"))
    guess = "a RIFF file that is not WAVE";
  else if (starts_with(bytes, "PK\x03\x04"))
    guess = "a zip archive (a PyTorch .pt/.bin checkpoint?)";
  else if (starts_with(bytes, "GGML") || starts_with(bytes, "ggjt") || starts_with(bytes, "ggml"))
    guess = "a pre-GGUF ggml model (convert it to GGUF)";
  else if (bytes[0] == 0x0a)
    guess = "a protobuf message that is not an ONNX model (a SentencePiece .model?)";
  else if (text && first < probe && (bytes[first] == '{' || bytes[first] == '['))
    guess = "JSON text";
  else if (text)
    guess = "text";
  else
    guess = "binary data";
  return cat("first bytes ", hex, " \"", ascii, "\", which look like ", guess);
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else if (size_t n = utf8_sequence_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\\ufffd";  // invalid UTF-8 byte: the output must stay valid JSON
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

FileFormat detect_format(std::span<const uint8_t> bytes) {
  if (starts_with(bytes, "GGUF")) return FileFormat::Gguf;
  if (starts_with(bytes, "RIFF") && starts_with(bytes, "WAVE", 8)) return FileFormat::Wav;
  if (starts_with(bytes, "ORTM", 4)) return FileFormat::Ort;  // ONNX Runtime's flatbuffer file identifier
  if (bytes.size() >= 9) {
    uint64_t header_bytes;
    std::memcpy(&header_bytes, bytes.data(), 8);
    if (header_bytes >= 2 && header_bytes <= bytes.size() - 8 && bytes[8] == '{')
      return FileFormat::Safetensors;
  }
  // ONNX has no magic. Exporters write ModelProto field 1 (ir_version, a varint: tag 0x08) first, a small
  // number; describe_onnx decides the rest.
  if (bytes.size() >= 3 && bytes[0] == 0x08 && bytes[1] >= 1 && bytes[1] < 0x80) return FileFormat::Onnx;
  return FileFormat::Unknown;
}

Result<FileDescription> describe_file(std::span<const uint8_t> bytes) {
  switch (detect_format(bytes)) {
    case FileFormat::Gguf:
      return describe_gguf(bytes);
    case FileFormat::Safetensors:
      return describe_safetensors(bytes);
    case FileFormat::Onnx:
      return describe_onnx(bytes);
    case FileFormat::Wav:
      return describe_wav(bytes);
    case FileFormat::Ort:
      return describe_ort(bytes);
    case FileFormat::Unknown:
      break;
  }
  return error("unrecognized format (not GGUF, safetensors, ONNX or WAV): ", describe_first_bytes(bytes));
}

Result<FileDescription> describe_gguf(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(GgufFile file, parse_gguf(bytes));
  FileDescription d;
  d.format = cat("gguf v", file.version);
  d.metadata.reserve(file.metadata.size());
  for (const auto& kv : file.metadata) d.metadata.push_back(describe_gguf_value(kv));
  d.tensors.reserve(file.tensors.size());
  for (const auto& t : file.tensors) d.tensors.push_back(t.info());
  return d;
}

Result<FileDescription> describe_safetensors(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(SafetensorsFile file, parse_safetensors(bytes));
  FileDescription d;
  d.format = "safetensors";
  for (const auto& [key, value] : file.metadata)
    d.metadata.push_back({key, "string", json_quote(value), human_text(value)});
  d.tensors = std::move(file.tensors);
  return d;
}

std::string describe_json(const FileDescription& d, std::string_view file_name) {
  std::string out =
      cat("{\"file\":", json_quote(file_name), ",\"format\":", json_quote(d.format), ",\"metadata\":[");
  for (size_t i = 0; i < d.metadata.size(); ++i) {
    const MetadataEntry& m = d.metadata[i];
    out += cat(i ? "," : "", "{\"key\":", json_quote(m.key), ",\"type\":", json_quote(m.type),
               ",\"value\":", m.json.empty() ? std::string("null") : m.json, ",\"text\":", json_quote(m.text),
               "}");
  }
  out += "],\"tensors\":[";
  uint64_t tensor_bytes = 0;
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const TensorInfo& t = d.tensors[i];
    tensor_bytes += t.bytes;
    out += cat(i ? "," : "", "{\"name\":", json_quote(t.name), ",\"dtype\":", json_quote(dtype_name(t.dtype)),
               ",\"shape\":[");
    for (size_t k = 0; k < t.shape.size(); ++k) out += cat(k ? "," : "", t.shape[k]);
    out += cat("],\"offset\":", t.offset, ",\"bytes\":", t.bytes, "}");
  }
  out += cat("],\"tensor_bytes\":", tensor_bytes, "}");
  return out;
}

}  // namespace sotto
