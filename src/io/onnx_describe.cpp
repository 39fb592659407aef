// The ONNX half of `sotto info`: model metadata (producer, opsets, graph inputs/outputs, op counts) and the
// tensor table of initializers and Constant tensors, subgraphs included, under their unique names (onnx.h).
#include <algorithm>

#include "io/describe.h"
#include "io/onnx.h"

namespace sotto {

namespace {

constexpr size_t kMaxJsonArrayItems = 16;
constexpr size_t kMaxTextChars = 120;

// One line for people: control characters become spaces, and long text is cut with "...".
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, std::min(s.size(), kMaxTextChars)))
    out.push_back(static_cast<uint8_t>(c) < 0x20 ? ' ' : c);
  if (s.size() > kMaxTextChars) out += "...";
  return out;
}

MetadataEntry string_entry(std::string key, std::string_view value) {
  return {std::move(key), "string", json_quote(value), one_line(value)};
}

MetadataEntry int_entry(std::string key, int64_t value) {
  return {std::move(key), "int64", cat(value), cat(value)};
}

// JSON array of the first 16 items, or {"count": n, "first": [...]} when there are more.
std::string json_list(const std::vector<std::string>& items) {
  std::string body;
  const size_t shown = std::min(items.size(), kMaxJsonArrayItems);
  for (size_t i = 0; i < shown; ++i) body += cat(i > 0 ? "," : "", items[i]);
  if (items.size() > shown) return cat("{\"count\":", items.size(), ",\"first\":[", body, "]}");
  return cat("[", body, "]");
}

// "input: float32 [?, ?]" / JSON {"name":..,"elem_type":..,"dims":[..]} where a symbolic dim is its name and
// an unknown one is null.
std::pair<std::string, std::string> value_info_json_and_text(const OnnxValueInfo& v) {
  std::string dims_json, dims_text;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    const OnnxDim& d = v.dims[i];
    const std::string sep = i > 0 ? "," : "";
    if (d.value >= 0) {
      dims_json += cat(sep, d.value);
      dims_text += cat(i > 0 ? ", " : "", d.value);
    } else if (!d.param.empty()) {
      dims_json += cat(sep, json_quote(d.param));
      dims_text += cat(i > 0 ? ", " : "", d.param);
    } else {
      dims_json += cat(sep, "null");
      dims_text += cat(i > 0 ? ", " : "", "?");
    }
  }
  const std::string type = onnx_data_type_name(v.elem_type);
  std::string json = cat("{\"name\":", json_quote(v.name), ",\"elem_type\":", json_quote(type),
                         ",\"dims\":", v.has_shape ? cat("[", dims_json, "]") : "null", "}");
  std::string text = cat(v.name, ": ", type, v.has_shape ? cat(" [", dims_text, "]") : " (no shape)");
  return {std::move(json), std::move(text)};
}

MetadataEntry value_infos_entry(std::string key, const std::vector<OnnxValueInfo>& infos) {
  std::vector<std::string> items;
  std::string text;
  for (const OnnxValueInfo& v : infos) {
    auto [json, t] = value_info_json_and_text(v);
    items.push_back(std::move(json));
    text += cat(text.empty() ? "" : "; ", t);
  }
  return {std::move(key), "array[value_info]", json_list(items), one_line(text)};
}

}  // namespace

Result<FileDescription> describe_onnx(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(OnnxModel model, parse_onnx(bytes));
  FileDescription d;
  d.format = "onnx";
  auto& m = d.metadata;
  m.push_back(int_entry("onnx.ir_version", model.ir_version));
  m.push_back(string_entry("onnx.producer_name", model.producer_name));
  m.push_back(string_entry("onnx.producer_version", model.producer_version));
  if (!model.domain.empty()) m.push_back(string_entry("onnx.domain", model.domain));
  if (model.model_version != 0) m.push_back(int_entry("onnx.model_version", model.model_version));
  if (!model.doc_string.empty()) m.push_back(string_entry("onnx.doc_string", model.doc_string));

  std::vector<std::string> opsets;
  std::string opsets_text;
  for (const OnnxOpset& o : model.opset_imports) {
    const std::string domain = o.domain.empty() ? "ai.onnx" : o.domain;
    opsets.push_back(cat("{\"domain\":", json_quote(domain), ",\"version\":", o.version, "}"));
    opsets_text += cat(opsets_text.empty() ? "" : ", ", domain, " ", o.version);
  }
  m.push_back({"onnx.opset_import", "array[opset]", json_list(opsets), one_line(opsets_text)});

  m.push_back(string_entry("onnx.graph.name", model.graph_name));
  m.push_back(value_infos_entry("onnx.graph.inputs", model.inputs));
  m.push_back(value_infos_entry("onnx.graph.outputs", model.outputs));
  m.push_back(int_entry("onnx.graph.node_count", static_cast<int64_t>(model.node_count)));
  m.push_back(int_entry("onnx.node_count_with_subgraphs", static_cast<int64_t>(model.total_node_count)));
  m.push_back(int_entry("onnx.subgraph_count", static_cast<int64_t>(model.subgraph_count)));

  // Op types by count, most used first, as one JSON object (every op type: there are rarely more than ~50).
  std::vector<OnnxOpCount> ops = model.op_counts;
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.count != b.count ? a.count > b.count : a.op_type < b.op_type;
  });
  std::string ops_json, ops_text;
  for (const OnnxOpCount& op : ops) {
    ops_json += cat(ops_json.empty() ? "" : ",", json_quote(op.op_type), ":", op.count);
    ops_text += cat(ops_text.empty() ? "" : ", ", op.op_type, " ", op.count);
  }
  m.push_back({"onnx.op_types", "object[count]", cat("{", ops_json, "}"), one_line(ops_text)});

  for (const auto& [key, value] : model.metadata_props)
    m.push_back(string_entry(cat("onnx.metadata.", key), value));

  if (!model.unsupported.empty()) {
    std::vector<std::string> items;
    std::string text;
    for (const OnnxUnsupportedTensor& u : model.unsupported) {
      items.push_back(cat("{\"name\":", json_quote(u.unique_name), ",\"data_type\":", u.onnx_data_type,
                          ",\"reason\":", json_quote(u.reason), "}"));
      text += cat(text.empty() ? "" : "; ", u.unique_name, ": ", u.reason);
    }
    m.push_back({"onnx.unsupported_tensors", "array[tensor]", json_list(items), one_line(text)});
  }

  // Tensors decoded from typed fields live in the OnnxModel, which ends here: their TensorInfo has no data
  // pointer, and its offset is the TensorProto's (raw_data tensors point at their bytes in the file).
  d.tensors.reserve(model.tensors.size());
  for (const OnnxTensor& t : model.tensors) {
    TensorInfo info;
    info.name = t.unique_name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    info.offset = t.file_offset;
    info.bytes = t.n_bytes;
    info.data = t.from_file ? t.file_data : nullptr;
    d.tensors.push_back(std::move(info));
  }
  return d;
}

}  // namespace sotto
