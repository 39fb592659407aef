// ONNX reader: walks ModelProto -> GraphProto -> nodes -> attributes -> subgraphs, collecting initializers
// and Constant-node tensors with their scope-qualified names (rule in onnx.h). Field numbers from
// onnx/onnx.proto.
#include "io/onnx.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "io/onnx_internal.h"

namespace sotto {

using pb::Field;
using pb::Reader;
using pb::WireType;
using namespace onnx_detail;

namespace {

std::string join_scope(const std::string& scope, std::string_view step) {
  return scope.empty() ? std::string(step) : cat(scope, '/', step);
}

class Parser {
 public:
  Parser(std::span<const uint8_t> file, OnnxModel& model, const OnnxReadExternal* read_external)
      : file_(file), model_(model), read_external_(read_external) {}

  Status model(Reader r) {
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      switch (f.number) {
        case 1: {
          SOTTO_ASSIGN(model_.ir_version, signed_varint(r, f, "ir_version"));
          break;
        }
        case 2: {
          SOTTO_ASSIGN(model_.producer_name, str(r, f));
          break;
        }
        case 3: {
          SOTTO_ASSIGN(model_.producer_version, str(r, f));
          break;
        }
        case 4: {
          SOTTO_ASSIGN(model_.domain, str(r, f));
          break;
        }
        case 5: {
          SOTTO_ASSIGN(model_.model_version, signed_varint(r, f, "model_version"));
          break;
        }
        case 6: {
          SOTTO_ASSIGN(model_.doc_string, str(r, f));
          break;
        }
        case 7: {
          if (saw_graph_) return r.fail(f, "graph", "a second main graph");
          saw_graph_ = true;
          SOTTO_ASSIGN(Reader g, r.message(f, "GraphProto"));
          SOTTO_TRY(graph(g, "", 1));
          break;
        }
        case 8: {
          SOTTO_ASSIGN(Reader o, r.message(f, "OperatorSetIdProto"));
          OnnxOpset opset;
          while (!o.at_end()) {
            SOTTO_ASSIGN(Field of, o.next_field());
            if (of.number == 1) {
              SOTTO_ASSIGN(opset.domain, str(o, of));
            } else if (of.number == 2) {
              SOTTO_ASSIGN(opset.version, signed_varint(o, of, "version"));
            } else {
              SOTTO_TRY(o.skip(of, 2));
            }
          }
          model_.opset_imports.push_back(std::move(opset));
          break;
        }
        case 14: {
          SOTTO_ASSIGN(Reader e, r.message(f, "StringStringEntryProto"));
          std::pair<std::string, std::string> kv;
          while (!e.at_end()) {
            SOTTO_ASSIGN(Field ef, e.next_field());
            if (ef.number == 1) {
              SOTTO_ASSIGN(kv.first, str(e, ef));
            } else if (ef.number == 2) {
              SOTTO_ASSIGN(kv.second, str(e, ef));
            } else {
              SOTTO_TRY(e.skip(ef, 2));
            }
          }
          model_.metadata_props.push_back(std::move(kv));
          break;
        }
        default:
          SOTTO_TRY(r.skip(f, 1));
          break;  // training_info, functions, ...: not weights we read
      }
    }
    if (!saw_graph_) return error("onnx: the file has no graph (ModelProto field 7)");
    for (auto& [op, n] : op_counts_) model_.op_counts.push_back({op, n});
    return {};
  }

 private:
  static Result<std::string> str(Reader& r, const Field& f) {
    SOTTO_ASSIGN(std::string_view s, r.string(f));
    return std::string(s);
  }
  static Result<int64_t> signed_varint(Reader& r, const Field& f, std::string_view what) {
    SOTTO_TRY(r.expect(f, what, WireType::Varint));
    SOTTO_ASSIGN(uint64_t v, r.varint(f));
    return static_cast<int64_t>(v);
  }
  static Status check_depth(const Reader& r, int depth) {
    if (depth <= pb::kMaxMessageDepth) return {};
    return error("onnx: ", r.message_name(), " at byte ", r.offset(), " is nested more than ",
                 pb::kMaxMessageDepth, " messages deep");
  }

  // GraphProto: node 1, name 2, initializer 5, input 11, output 12, sparse_initializer 15.
  Status graph(Reader r, const std::string& scope, int depth) {
    SOTTO_TRY(check_depth(r, depth));
    const bool is_main = scope.empty();
    uint64_t node_index = 0;
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      switch (f.number) {
        case 1: {
          SOTTO_ASSIGN(Reader n, r.message(f, "NodeProto"));
          SOTTO_TRY(node(n, scope, node_index++, depth + 1));
          if (is_main) model_.node_count++;
          model_.total_node_count++;
          break;
        }
        case 2:
          if (is_main) {
            SOTTO_ASSIGN(model_.graph_name, str(r, f));
          } else {
            SOTTO_TRY(r.skip(f, depth));
          }
          break;
        case 5: {
          SOTTO_ASSIGN(Reader t, r.message(f, "TensorProto"));
          SOTTO_ASSIGN(TensorProtoView view, read_tensor_proto(t, depth + 1));
          SOTTO_TRY(add_tensor(view, scope, view.name, OnnxTensorSource::Initializer));
          break;
        }
        case 11:
        case 12: {
          if (!is_main) {
            SOTTO_TRY(r.skip(f, depth));
            break;
          }
          SOTTO_ASSIGN(Reader v, r.message(f, "ValueInfoProto"));
          SOTTO_ASSIGN(OnnxValueInfo info, value_info(v, depth + 1));
          (f.number == 11 ? model_.inputs : model_.outputs).push_back(std::move(info));
          break;
        }
        case 15:
          SOTTO_TRY(r.skip(f, depth));
          model_.unsupported.push_back(
              {join_scope(scope, cat("sparse_initializer@", f.tag_offset)), 0, "sparse initializer"});
          break;
        default:
          SOTTO_TRY(r.skip(f, depth));
          break;
      }
    }
    return {};
  }

  // NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7. Attributes are read after the whole
  // node, since protobuf does not promise op_type comes before them.
  Status node(Reader r, const std::string& scope, uint64_t index, int depth) {
    SOTTO_TRY(check_depth(r, depth));
    std::string_view name, op_type, domain, output0;
    bool has_output = false;
    std::vector<Reader> attributes;
    OnnxNode listed;
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      switch (f.number) {
        case 1: {
          SOTTO_ASSIGN(std::string_view in, r.string(f));
          listed.inputs.emplace_back(in);
          break;
        }
        case 2: {
          SOTTO_ASSIGN(std::string_view out, r.string(f));
          if (!has_output) output0 = out, has_output = true;
          listed.outputs.emplace_back(out);
          break;
        }
        case 3: {
          SOTTO_ASSIGN(name, r.string(f));
          break;
        }
        case 4: {
          SOTTO_ASSIGN(op_type, r.string(f));
          break;
        }
        case 7: {
          SOTTO_ASSIGN(domain, r.string(f));
          break;
        }
        case 5: {
          SOTTO_ASSIGN(Reader a, r.message(f, "AttributeProto"));
          attributes.push_back(a);
          break;
        }
        default:
          SOTTO_TRY(r.skip(f, depth));
          break;
      }
    }
    const bool default_domain = domain.empty() || domain == "ai.onnx";
    op_counts_[default_domain ? std::string(op_type) : cat(domain, ':', op_type)]++;
    NodeInfo info{name.empty() ? cat(op_type, '#', index) : std::string(name), output0,
                  default_domain && op_type == "Constant"};
    listed.name = name;
    listed.op_type = op_type;
    listed.domain = domain;
    listed.scope = scope;
    model_.nodes.push_back(std::move(listed));  // before its subgraphs' nodes
    for (Reader& a : attributes) SOTTO_TRY(attribute(a, scope, info, depth + 1));
    return {};
  }

  struct NodeInfo {
    std::string label;  // name, or "<op_type>#<index>"
    std::string_view output0;
    bool is_constant;
  };

  // AttributeProto: name 1, f 2, i 3, s 4, t 5, g 6, floats 7, ints 8, strings 9, graphs 11,
  // sparse_tensor 22.
  Status attribute(Reader r, const std::string& scope, const NodeInfo& node, int depth) {
    SOTTO_TRY(check_depth(r, depth));
    const uint64_t attribute_offset = r.offset();
    std::string_view name;
    std::optional<Reader> tensor, graph_value;
    std::vector<Reader> graphs;
    bool has_float = false, has_int = false, has_other = false;
    uint32_t f32_bits = 0;
    uint64_t i64 = 0;
    std::vector<std::span<const uint8_t>> floats, ints;
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      switch (f.number) {
        case 1: {
          SOTTO_ASSIGN(name, r.string(f));
          break;
        }
        case 2: {
          SOTTO_ASSIGN(f32_bits, r.fixed32(f));
          has_float = true;
          break;
        }
        case 3: {
          SOTTO_ASSIGN(i64, r.varint(f));
          has_int = true;
          break;
        }
        case 5: {
          SOTTO_ASSIGN(tensor, r.message(f, "TensorProto"));
          break;
        }
        case 6: {  // a repeated singular field: the last one wins, as in protobuf
          SOTTO_ASSIGN(graph_value, r.message(f, "GraphProto"));
          break;
        }
        case 11: {
          SOTTO_ASSIGN(Reader g, r.message(f, "GraphProto"));
          graphs.push_back(g);
          break;
        }
        case 7: {
          SOTTO_TRY(r.expect(f, "floats", WireType::Fixed32, WireType::Len));
          SOTTO_ASSIGN(auto part, r.packed_or_single(f));
          floats.push_back(part);
          break;
        }
        case 8: {
          SOTTO_TRY(r.expect(f, "ints", WireType::Varint, WireType::Len));
          SOTTO_ASSIGN(auto part, r.packed_or_single(f));
          ints.push_back(part);
          break;
        }
        case 4:
        case 9:
        case 22:
          has_other = true;
          SOTTO_TRY(r.skip(f, depth));
          break;
        default:
          SOTTO_TRY(r.skip(f, depth));
          break;
      }
    }
    const std::string attr_name(name);
    if (graph_value) {
      model_.subgraph_count++;
      SOTTO_TRY(graph(*graph_value, join_scope(scope, cat(node.label, '.', attr_name)), depth + 1));
    }
    for (size_t i = 0; i < graphs.size(); ++i) {
      model_.subgraph_count++;
      SOTTO_TRY(graph(graphs[i], join_scope(scope, cat(node.label, '.', attr_name, '[', i, ']')), depth + 1));
    }
    if (!node.is_constant) return {};

    // Constant: exactly one of value / value_float(s) / value_int(s) / value_string(s) / sparse_value.
    const std::string value_name = std::string(node.output0);
    if (name == "value" && tensor) {
      SOTTO_ASSIGN(TensorProtoView view, read_tensor_proto(*tensor, depth + 1));
      return add_tensor(view, scope, value_name.empty() ? view.name : value_name, OnnxTensorSource::Constant);
    }
    // The list forms are rebuilt as TensorProto views so they share one checked decoder.
    TensorProtoView view;
    view.offset = attribute_offset;
    if (name == "value_float" && has_float) {
      view.data_type = static_cast<int32_t>(OnnxDataType::Float);
      view.float_data.push_back(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&f32_bits), 4));
    } else if (name == "value_int" && has_int) {
      view.data_type = static_cast<int32_t>(OnnxDataType::Int64);
      return add_int_scalar(view, scope, value_name, static_cast<int64_t>(i64));
    } else if (name == "value_floats") {
      view.data_type = static_cast<int32_t>(OnnxDataType::Float);
      view.float_data = floats;
      uint64_t bytes = 0;
      for (auto p : floats) bytes += p.size();
      view.dims.push_back(static_cast<int64_t>(bytes / 4));
    } else if (name == "value_ints") {
      view.data_type = static_cast<int32_t>(OnnxDataType::Int64);
      view.int64_data = ints;
      uint64_t count = 0;
      for (auto p : ints) count += pb::count_packed_varints(p).value_or(0);
      view.dims.push_back(static_cast<int64_t>(count));
    } else {
      if (has_other || name == "sparse_value" || name == "value_string" || name == "value_strings")
        model_.unsupported.push_back({join_scope(scope, value_name), 0,
                                      cat("Constant attribute ", quoted(attr_name), " is not read")});
      return {};
    }
    return add_tensor(view, scope, value_name, OnnxTensorSource::Constant);
  }

  // value_int holds an already-decoded int64: store it directly rather than re-encoding a varint.
  Status add_int_scalar(const TensorProtoView& view, const std::string& scope, const std::string& value_name,
                        int64_t v) {
    OnnxTensor t;
    t.name = value_name;
    t.scope = scope;
    t.unique_name = join_scope(scope, value_name);
    t.source = OnnxTensorSource::Constant;
    t.onnx_data_type = view.data_type;
    t.dtype = DType::I64;
    t.n_elements = 1;
    t.n_bytes = 8;
    t.from_file = false;
    t.file_offset = view.offset;
    t.decoded.resize(8);
    std::memcpy(t.decoded.data(), &v, 8);
    model_.tensors.push_back(std::move(t));
    return {};
  }

  Status add_tensor(const TensorProtoView& view, const std::string& scope, const std::string& name,
                    OnnxTensorSource source) {
    OnnxTensor t;
    t.name = name;
    t.scope = scope;
    t.unique_name = join_scope(scope, name);
    t.source = source;
    if (!view.external && !onnx_data_type_supported(view.data_type)) {
      model_.unsupported.push_back({t.unique_name, view.data_type,
                                    cat("data type ", view.data_type, " (",
                                        onnx_data_type_name(view.data_type), ") has no sotto dtype")});
      return {};
    }
    SOTTO_TRY(build_tensor(view, file_, t, read_external_));
    if (source == OnnxTensorSource::Constant && t.tensor_name.empty()) t.tensor_name = name;
    model_.tensors.push_back(std::move(t));
    return {};
  }

  // ValueInfoProto { name 1, type 2 { tensor_type 1 { elem_type 1, shape 2 { dim 1 { value 1, param 2 }}}}}
  Result<OnnxValueInfo> value_info(Reader r, int depth) {
    SOTTO_TRY(check_depth(r, depth));
    OnnxValueInfo info;
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      if (f.number == 1) {
        SOTTO_ASSIGN(info.name, str(r, f));
      } else if (f.number == 2) {
        SOTTO_ASSIGN(Reader type, r.message(f, "TypeProto"));
        while (!type.at_end()) {
          SOTTO_ASSIGN(Field tf, type.next_field());
          if (tf.number != 1) {
            SOTTO_TRY(type.skip(tf, depth + 1));
            continue;
          }
          SOTTO_ASSIGN(Reader tensor_type, type.message(tf, "TypeProto.Tensor"));
          SOTTO_TRY(tensor_type_info(tensor_type, info, depth + 2));
        }
      } else {
        SOTTO_TRY(r.skip(f, depth));
      }
    }
    return info;
  }

  Status tensor_type_info(Reader r, OnnxValueInfo& info, int depth) {
    while (!r.at_end()) {
      SOTTO_ASSIGN(Field f, r.next_field());
      if (f.number == 1) {
        SOTTO_ASSIGN(int64_t t, signed_varint(r, f, "elem_type"));
        info.elem_type = static_cast<int32_t>(t);
      } else if (f.number == 2) {
        info.has_shape = true;
        info.dims.clear();
        SOTTO_ASSIGN(Reader shape, r.message(f, "TensorShapeProto"));
        while (!shape.at_end()) {
          SOTTO_ASSIGN(Field sf, shape.next_field());
          if (sf.number != 1) {
            SOTTO_TRY(shape.skip(sf, depth + 1));
            continue;
          }
          SOTTO_ASSIGN(Reader dim, shape.message(sf, "TensorShapeProto.Dimension"));
          OnnxDim d;
          while (!dim.at_end()) {
            SOTTO_ASSIGN(Field df, dim.next_field());
            if (df.number == 1) {
              SOTTO_ASSIGN(d.value, signed_varint(dim, df, "dim_value"));
            } else if (df.number == 2) {
              SOTTO_ASSIGN(d.param, str(dim, df));
            } else {
              SOTTO_TRY(dim.skip(df, depth + 2));
            }
          }
          info.dims.push_back(std::move(d));
        }
      } else {
        SOTTO_TRY(r.skip(f, depth));
      }
    }
    return {};
  }

  std::span<const uint8_t> file_;
  OnnxModel& model_;
  const OnnxReadExternal* read_external_ = nullptr;
  bool saw_graph_ = false;
  std::map<std::string, uint64_t> op_counts_;
};

// Sorts the lookup index and renames colliding unique names "#2", "#3", ... (files that break ONNX's SSA
// rule).
Status index_unique_names(OnnxModel& m) {
  m.by_unique_name.resize(m.tensors.size());
  for (uint32_t i = 0; i < m.tensors.size(); ++i) m.by_unique_name[i] = i;
  for (int round = 0; round < 4; ++round) {
    // std::sort with the index as tie-break (std::stable_sort trips clang's deprecation of
    // get_temporary_buffer).
    std::sort(m.by_unique_name.begin(), m.by_unique_name.end(), [&](uint32_t a, uint32_t b) {
      const int c = m.tensors[a].unique_name.compare(m.tensors[b].unique_name);
      return c != 0 ? c < 0 : a < b;
    });
    bool renamed = false;
    for (size_t i = 1, run = 1; i < m.by_unique_name.size(); ++i) {
      OnnxTensor& t = m.tensors[m.by_unique_name[i]];
      if (t.unique_name == m.tensors[m.by_unique_name[i - 1]].unique_name) {
        ++run;
        t.unique_name = cat(t.unique_name, '#', run);
        renamed = true;
      } else {
        run = 1;
      }
    }
    if (!renamed) return {};
  }
  return error("onnx: tensor names still collide after renaming duplicates");
}

}  // namespace

const OnnxTensor* OnnxModel::find(std::string_view name) const {
  auto it = std::lower_bound(by_unique_name.begin(), by_unique_name.end(), name,
                             [&](uint32_t i, std::string_view n) { return tensors[i].unique_name < n; });
  if (it != by_unique_name.end() && tensors[*it].unique_name == name) return &tensors[*it];
  for (auto field : {&OnnxTensor::name, &OnnxTensor::tensor_name}) {
    const OnnxTensor* found = nullptr;
    int hits = 0;
    for (const OnnxTensor& t : tensors)
      if (t.*field == name) found = &t, ++hits;
    if (hits == 1) return found;
    if (hits > 1) return nullptr;  // ambiguous: the caller must qualify it
  }
  return nullptr;
}

std::vector<const OnnxTensor*> OnnxModel::find_all(std::string_view name) const {
  std::vector<const OnnxTensor*> out;
  for (const OnnxTensor& t : tensors)
    if (t.unique_name == name || t.name == name || t.tensor_name == name) out.push_back(&t);
  return out;
}

const OnnxTensor* OnnxModel::find_in_scope(std::string_view scope, std::string_view name) const {
  for (const OnnxTensor& t : tensors)
    if (t.scope == scope && (t.name == name || t.tensor_name == name)) return &t;
  return nullptr;
}

Result<OnnxModel> parse_onnx(std::span<const uint8_t> file) {
  return parse_onnx(file, nullptr);
}

Result<OnnxModel> parse_onnx(std::span<const uint8_t> file, const OnnxReadExternal& read_external) {
  OnnxModel model;
  Parser parser(file, model, read_external ? &read_external : nullptr);
  SOTTO_TRY(parser.model(Reader(file, 0, "onnx", "ModelProto")));
  SOTTO_TRY(index_unique_names(model));
  return model;
}

}  // namespace sotto
