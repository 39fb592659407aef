// sotto info FILE [--json]: what is in a model or audio file. Text for people (format, metadata table, tensor
// table with totals) or one JSON object:
//   see describe_json() in io/describe.h
#include <cstdio>
#include <string>

#include "commands.h"
#include "io/describe.h"
#include "io/file.h"

namespace sotto::cli {

namespace {

void print(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

std::string shape_text(const TensorInfo& t, std::string_view open, std::string_view sep,
                       std::string_view close) {
  std::string out(open);
  for (size_t i = 0; i < t.shape.size(); ++i) out += cat(i ? sep : "", t.shape[i]);
  return out.append(close);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// A name or value from the file as the table shows it: as it is when it holds only printable text, else
// quoted with its control bytes and invalid UTF-8 escaped (core/error.h quoted()), so a corrupted key shows in
// full on its line.
std::string shown(std::string_view s) {
  const std::string q = quoted(s);
  return q.size() == s.size() + 2 && q.compare(1, s.size(), s) == 0 ? std::string(s) : q;
}

void print_text(const std::string& path, const FileDescription& input, uint64_t tensor_bytes) {
  FileDescription d = input;
  for (auto& m : d.metadata) {
    m.key = shown(m.key);
    m.text = shown(m.text);
  }
  for (auto& t : d.tensors) t.name = shown(t.name);
  print(cat(path, ": ", d.format, "\n"));
  if (!d.metadata.empty()) {
    size_t key_width = 3, type_width = 4;
    for (const auto& m : d.metadata) {
      key_width = std::max(key_width, m.key.size());
      type_width = std::max(type_width, m.type.size());
    }
    print(cat("\nmetadata (", d.metadata.size(), " keys)\n"));
    print(cat("  ", pad("key", key_width), "  ", pad("type", type_width), "  value\n"));
    for (const auto& m : d.metadata)
      print(cat("  ", pad(m.key, key_width), "  ", pad(m.type, type_width), "  ", m.text, "\n"));
  }
  if (!d.tensors.empty()) {
    size_t name_width = 4, shape_width = 5;
    for (const auto& t : d.tensors) {
      name_width = std::max(name_width, t.name.size());
      shape_width = std::max(shape_width, shape_text(t, "[", ", ", "]").size());
    }
    print(cat("\ntensors (", d.tensors.size(), ")\n"));
    print(cat("  ", pad("name", name_width), "  ", pad("dtype", 6), "  ", pad("shape", shape_width),
              "  bytes\n"));
    for (const auto& t : d.tensors)
      print(cat("  ", pad(t.name, name_width), "  ", pad(std::string(dtype_name(t.dtype)), 6), "  ",
                pad(shape_text(t, "[", ", ", "]"), shape_width), "  ", t.bytes, "\n"));
    uint64_t elements = 0;
    for (const auto& t : d.tensors) elements += t.elements();
    print(
        cat("\ntotal: ", d.tensors.size(), " tensors, ", elements, " elements, ", tensor_bytes, " bytes\n"));
  }
}

}  // namespace

int run_info(std::span<char* const> args) {
  std::string path;
  bool json = false;
  for (std::string_view a : args) {
    if (a == "--json") {
      json = true;
    } else if (a.starts_with("-") && a != "-") {
      return usage_error(cat("info: unknown option '", a, "'"));
    } else if (path.empty()) {
      path = std::string(a);
    } else {
      return usage_error("info: more than one FILE given");
    }
  }
  if (path.empty()) return usage_error("info: no FILE given");
  auto file = MappedFile::open(path);
  if (!file) return fail(file.message());
  auto described = describe_file(file->bytes());
  if (!described) return fail(cat(path, ": ", described.message()));
  uint64_t tensor_bytes = 0;
  for (const auto& t : described->tensors) tensor_bytes += t.bytes;
  if (json) {
    print(describe_json(*described, path) + "\n");
  } else {
    print_text(path, *described, tensor_bytes);
  }
  return kExitOk;
}

}  // namespace sotto::cli
