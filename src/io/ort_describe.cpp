// The .ort half of `sotto info`: the format version, producer, graph inputs/outputs, node and op counts, and the
// tensor table (a subgraph's tensors as "<scope>/<name>", as nn::open_weights names them).
#include <algorithm>
#include <map>

#include "io/describe.h"
#include "io/ort.h"

namespace sotto {

namespace {

MetadataEntry text_entry(std::string key, std::string_view value) {
  return {std::move(key), "string", json_quote(value), std::string(value.substr(0, 120))};
}

MetadataEntry count_entry(std::string key, uint64_t value) {
  return {std::move(key), "int64", cat(value), cat(value)};
}

MetadataEntry names_entry(std::string key, const std::vector<std::string>& names) {
  std::string json, text;
  for (const std::string& n : names) {
    json += cat(json.empty() ? "" : ",", json_quote(n));
    text += cat(text.empty() ? "" : ", ", n);
  }
  return {std::move(key), "array[string]", cat("[", json, "]"), text.substr(0, 120)};
}

}  // namespace

Result<FileDescription> describe_ort(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(OrtModel model, parse_ort(bytes));
  FileDescription d;
  d.format = cat("ort v", model.ort_version);
  auto& m = d.metadata;
  m.push_back(count_entry("ort.ir_version", static_cast<uint64_t>(model.ir_version)));
  m.push_back(text_entry("ort.producer_name", model.producer_name));
  if (!model.producer_version.empty())
    m.push_back(text_entry("ort.producer_version", model.producer_version));
  m.push_back(names_entry("ort.graph.inputs", model.inputs));
  m.push_back(names_entry("ort.graph.outputs", model.outputs));
  m.push_back(count_entry("ort.node_count_with_subgraphs", model.nodes.size()));
  m.push_back(count_entry("ort.subgraph_count", model.subgraph_count));
  std::map<std::string, uint64_t> counts;
  for (const OrtNode& n : model.nodes) ++counts[n.domain.empty() ? n.op_type : n.domain + ":" + n.op_type];
  std::vector<std::pair<std::string, uint64_t>> ops(counts.begin(), counts.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string ops_json, ops_text;
  for (const auto& [op, n] : ops) {
    ops_json += cat(ops_json.empty() ? "" : ",", json_quote(op), ":", n);
    ops_text += cat(ops_text.empty() ? "" : ", ", op, " ", n);
  }
  m.push_back({"ort.op_types", "object[count]", cat("{", ops_json, "}"), ops_text.substr(0, 120)});
  for (const OrtUnsupportedTensor& u : model.unsupported)
    m.push_back(text_entry(cat("ort.unsupported.", u.name), u.reason));

  d.tensors.reserve(model.tensors.size());
  for (const OrtTensor& t : model.tensors) {
    TensorInfo info;
    info.name = t.scope.empty() ? t.name : t.scope + "/" + t.name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    info.offset = t.file_offset;
    info.bytes = t.n_bytes;
    info.data = t.data;
    d.tensors.push_back(std::move(info));
  }
  return d;
}

}  // namespace sotto
