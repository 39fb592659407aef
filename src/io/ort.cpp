// ONNX Runtime .ort flatbuffer reader (the layout and field slots are in ort.h).
#include "io/ort.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/onnx.h"

namespace sotto {

namespace {

// Checked flatbuffer access over the whole file. Positions are byte offsets into the file.
class Flatbuffer {
 public:
  explicit Flatbuffer(std::span<const uint8_t> bytes) : b_(bytes) {
    // Names and list items a file can make us copy: a few times its size, so that many entries pointing at
    // one long string (legal in a flatbuffer) cannot make the reader allocate without bound.
    copy_budget_ = 4 * static_cast<uint64_t>(bytes.size()) + (1u << 20);
  }

  uint64_t size() const { return b_.size(); }

  Result<uint32_t> u32(uint64_t pos, std::string_view what) const {
    if (pos > b_.size() || b_.size() - pos < 4)
      return error("ort: ", what, " at byte ", pos, " needs 4 bytes but the file ends at byte ", b_.size());
    uint32_t v;
    std::memcpy(&v, b_.data() + pos, 4);
    return v;
  }
  template <class T>
  Result<T> scalar_at(uint64_t pos, std::string_view what) const {
    if (pos > b_.size() || b_.size() - pos < sizeof(T))
      return error("ort: ", what, " at byte ", pos, " needs ", sizeof(T), " bytes but the file ends at byte ",
                   b_.size());
    T v;
    std::memcpy(&v, b_.data() + pos, sizeof(T));
    return v;
  }

  struct Table {
    uint64_t pos = 0;
    uint64_t vtable = 0;
    uint16_t vtable_bytes = 0;
  };

  Result<Table> table(uint64_t pos, std::string_view what) const {
    SOTTO_ASSIGN(int32_t soffset, scalar_at<int32_t>(pos, what));
    const int64_t vt = static_cast<int64_t>(pos) - soffset;
    if (vt < 0 || static_cast<uint64_t>(vt) + 4 > b_.size())
      return error("ort: ", what, " at byte ", pos, " has its field table at byte ", vt,
                   ", outside the file (", b_.size(), " bytes)");
    SOTTO_ASSIGN(uint16_t vt_bytes, scalar_at<uint16_t>(static_cast<uint64_t>(vt), what));
    if (vt_bytes < 4 || (vt_bytes & 1) || static_cast<uint64_t>(vt) + vt_bytes > b_.size())
      return error("ort: ", what, " at byte ", pos, " has a field table of ", vt_bytes, " bytes at byte ", vt,
                   " that does not fit the file");
    return Table{pos, static_cast<uint64_t>(vt), vt_bytes};
  }

  // The position of field `slot` of `t`, or 0 when the field is absent.
  Result<uint64_t> field(const Table& t, int slot, std::string_view what) const {
    const uint64_t entry = 4 + 2 * static_cast<uint64_t>(slot);
    if (entry + 2 > t.vtable_bytes) return uint64_t{0};
    SOTTO_ASSIGN(uint16_t off, scalar_at<uint16_t>(t.vtable + entry, what));
    if (off == 0) return uint64_t{0};
    return t.pos + off;
  }

  template <class T>
  Result<T> scalar(const Table& t, int slot, T fallback, std::string_view what) const {
    SOTTO_ASSIGN(uint64_t at, field(t, slot, what));
    if (at == 0) return fallback;
    return scalar_at<T>(at, what);
  }

  // Follows the uint32 offset stored at `at` (forward from `at`); 0 when the field is absent.
  Result<uint64_t> follow(uint64_t at, std::string_view what) const {
    SOTTO_ASSIGN(uint32_t rel, u32(at, what));
    const uint64_t target = at + rel;
    if (rel == 0 || target >= b_.size())
      return error("ort: ", what, " at byte ", at, " points to byte ", target, ", past the end of the file (",
                   b_.size(), " bytes)");
    return target;
  }

  Result<std::string> string(const Table& t, int slot, std::string_view what) {
    SOTTO_ASSIGN(uint64_t at, field(t, slot, what));
    if (at == 0) return std::string();
    SOTTO_ASSIGN(uint64_t s, follow(at, what));
    return string_at(s, what);
  }

  Result<std::string> string_at(uint64_t s, std::string_view what) {
    SOTTO_ASSIGN(uint32_t n, u32(s, what));
    if (n > b_.size() - s - 4)
      return error("ort: ", what, " at byte ", s, " claims ", n, " bytes but the file ends at byte ",
                   b_.size());
    SOTTO_TRY(spend(n, what));
    return std::string(reinterpret_cast<const char*>(b_.data() + s + 4), n);
  }

  struct Vector {
    uint64_t items = 0;  // position of the first item
    uint32_t count = 0;
  };

  // A vector field of items of `item_bytes` each; an absent field is an empty vector.
  Result<Vector> vector(const Table& t, int slot, uint32_t item_bytes, std::string_view what) {
    SOTTO_ASSIGN(uint64_t at, field(t, slot, what));
    if (at == 0) return Vector{};
    SOTTO_ASSIGN(uint64_t v, follow(at, what));
    SOTTO_ASSIGN(uint32_t n, u32(v, what));
    if (static_cast<uint64_t>(n) * item_bytes > b_.size() - v - 4)
      return error("ort: ", what, " at byte ", v, " claims ", n, " items of ", item_bytes,
                   " bytes but the file ends at byte ", b_.size());
    // Byte vectors (raw data) are viewed in place; lists of offsets or numbers become entries we allocate.
    if (item_bytes > 1) SOTTO_TRY(spend(static_cast<uint64_t>(n) * 8, what));
    return Vector{v + 4, n};
  }

  Result<std::vector<std::string>> strings(const Table& t, int slot, std::string_view what) {
    SOTTO_ASSIGN(Vector v, vector(t, slot, 4, what));
    std::vector<std::string> out;
    out.reserve(v.count);
    for (uint32_t i = 0; i < v.count; ++i) {
      SOTTO_ASSIGN(uint64_t s, follow(v.items + 4ull * i, what));
      SOTTO_ASSIGN(std::string str, string_at(s, what));
      out.push_back(std::move(str));
    }
    return out;
  }

  std::span<const uint8_t> bytes() const { return b_; }

 private:
  Status spend(uint64_t n, std::string_view what) {
    if (n > copy_budget_)
      return error("ort: ", what, ": the file's names and lists add up to more than its size allows (",
                   b_.size(), " bytes); shared or looping offsets?");
    copy_budget_ -= n;
    return {};
  }

  std::span<const uint8_t> b_;
  uint64_t copy_budget_ = 0;
};

struct Parser {
  Flatbuffer fb;
  OrtModel& model;

  Status tensor(uint64_t pos, const std::string& scope) {
    SOTTO_ASSIGN(Flatbuffer::Table t, fb.table(pos, "initializer"));
    SOTTO_ASSIGN(std::string name, fb.string(t, 0, "initializer name"));
    const std::string where = cat("initializer ", quoted(name));
    SOTTO_ASSIGN(Flatbuffer::Vector dims, fb.vector(t, 2, 8, where + " dims"));
    if (dims.count > 64) return error("ort: ", where, " has ", dims.count, " dims (at most 64)");
    SOTTO_ASSIGN(int32_t data_type, fb.scalar<int32_t>(t, 3, 0, where + " data_type"));
    SOTTO_ASSIGN(int64_t external, fb.scalar<int64_t>(t, 6, -1, where + " external_data_offset"));
    SOTTO_ASSIGN(Flatbuffer::Vector raw, fb.vector(t, 4, 1, where + " raw_data"));

    OrtTensor out;
    out.name = name;
    out.scope = scope;
    out.data_type = data_type;
    uint64_t n = 1;
    for (uint32_t i = 0; i < dims.count; ++i) {
      SOTTO_ASSIGN(int64_t d, fb.scalar_at<int64_t>(dims.items + 8ull * i, where + " dims"));
      if (d < 0) return error("ort: ", where, " has a negative dimension (", d, ")");
      if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
        return error("ort: ", where, " has more elements than 64 bits can count");
      n *= static_cast<uint64_t>(d);
      out.shape.push_back(d);
    }
    out.n_elements = n;

    if (external >= 0) {
      model.unsupported.push_back({name, "its data is in an external file"});
      return {};
    }
    auto dtype = dtype_from_onnx(data_type);
    if (!dtype) {
      model.unsupported.push_back({name, cat("data type ", onnx_data_type_name(data_type))});
      return {};
    }
    out.dtype = *dtype;
    const auto expected = dtype_bytes(out.dtype, n);
    if (!expected || *expected != raw.count)
      return error("ort: ", where, " of shape ", n, " elements (", onnx_data_type_name(data_type), ") has ",
                   raw.count, " bytes of raw data, expected ", expected ? *expected : 0);
    out.n_bytes = raw.count;
    out.file_offset = raw.items;
    out.data = fb.bytes().data() + raw.items;
    model.tensors.push_back(std::move(out));
    return {};
  }

  Status node(uint64_t pos, const std::string& scope, uint64_t index, int depth) {
    SOTTO_ASSIGN(Flatbuffer::Table t, fb.table(pos, "node"));
    OrtNode n;
    SOTTO_ASSIGN(n.name, fb.string(t, 0, "node name"));
    SOTTO_ASSIGN(n.domain, fb.string(t, 2, "node domain"));
    SOTTO_ASSIGN(n.op_type, fb.string(t, 5, "node op_type"));
    const std::string where = cat("node ", quoted(n.name.empty() ? n.op_type : n.name));
    SOTTO_ASSIGN(n.inputs, fb.strings(t, 8, where + " inputs"));
    SOTTO_ASSIGN(n.outputs, fb.strings(t, 9, where + " outputs"));
    n.scope = scope;
    const std::string node_id = n.name.empty() ? cat(n.op_type, '#', index) : n.name;
    model.nodes.push_back(std::move(n));

    SOTTO_ASSIGN(Flatbuffer::Vector attrs, fb.vector(t, 10, 4, where + " attributes"));
    for (uint32_t i = 0; i < attrs.count; ++i) {
      SOTTO_ASSIGN(uint64_t ap, fb.follow(attrs.items + 4ull * i, where + " attribute"));
      SOTTO_ASSIGN(Flatbuffer::Table a, fb.table(ap, where + " attribute"));
      SOTTO_ASSIGN(std::string aname, fb.string(a, 0, where + " attribute name"));
      SOTTO_ASSIGN(uint64_t g, fb.field(a, 7, where + " attribute graph"));
      if (g != 0) {
        SOTTO_ASSIGN(uint64_t gp, fb.follow(g, where + " attribute graph"));
        const std::string sub = (scope.empty() ? "" : scope + "/") + node_id + "." + aname;
        SOTTO_TRY(graph(gp, sub, depth + 1));
      }
      SOTTO_ASSIGN(Flatbuffer::Vector gs, fb.vector(a, 12, 4, where + " attribute graphs"));
      for (uint32_t j = 0; j < gs.count; ++j) {
        SOTTO_ASSIGN(uint64_t gp, fb.follow(gs.items + 4ull * j, where + " attribute graphs"));
        const std::string sub = cat(scope.empty() ? "" : scope + "/", node_id, ".", aname, "[", j, "]");
        SOTTO_TRY(graph(gp, sub, depth + 1));
      }
    }
    return {};
  }

  Status graph(uint64_t pos, const std::string& scope, int depth) {
    if (depth > kOrtMaxGraphDepth)
      return error("ort: subgraphs nest more than ", kOrtMaxGraphDepth, " deep at byte ", pos);
    if (depth > 0) ++model.subgraph_count;
    SOTTO_ASSIGN(Flatbuffer::Table g, fb.table(pos, "graph"));
    SOTTO_ASSIGN(Flatbuffer::Vector inits, fb.vector(g, 0, 4, "graph initializers"));
    for (uint32_t i = 0; i < inits.count; ++i) {
      SOTTO_ASSIGN(uint64_t tp, fb.follow(inits.items + 4ull * i, "graph initializer"));
      SOTTO_TRY(tensor(tp, scope));
    }
    if (depth == 0) {
      SOTTO_ASSIGN(model.inputs, fb.strings(g, 5, "graph inputs"));
      SOTTO_ASSIGN(model.outputs, fb.strings(g, 6, "graph outputs"));
    }
    SOTTO_ASSIGN(Flatbuffer::Vector nodes, fb.vector(g, 2, 4, "graph nodes"));
    for (uint32_t i = 0; i < nodes.count; ++i) {
      SOTTO_ASSIGN(uint64_t np, fb.follow(nodes.items + 4ull * i, "graph node"));
      SOTTO_TRY(node(np, scope, i, depth));
    }
    return {};
  }
};

}  // namespace

bool is_ort(std::span<const uint8_t> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data() + 4, "ORTM", 4) == 0;
}

const OrtTensor* OrtModel::find(std::string_view name) const {
  for (const OrtTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<OrtModel> parse_ort(std::span<const uint8_t> file) {
  if (!is_ort(file)) return error("ort: not an ONNX Runtime model (no \"ORTM\" at bytes 4..7)");
  OrtModel model;
  Parser p{Flatbuffer(file), model};
  SOTTO_ASSIGN(uint64_t root, p.fb.follow(0, "root table"));
  SOTTO_ASSIGN(Flatbuffer::Table session, p.fb.table(root, "inference session"));
  SOTTO_ASSIGN(model.ort_version, p.fb.string(session, 0, "ort_version"));
  SOTTO_ASSIGN(uint64_t m_at, p.fb.field(session, 1, "model"));
  if (m_at == 0) return error("ort: the file holds no model (an inference session without its model table)");
  SOTTO_ASSIGN(uint64_t m_pos, p.fb.follow(m_at, "model"));
  SOTTO_ASSIGN(Flatbuffer::Table m, p.fb.table(m_pos, "model"));
  SOTTO_ASSIGN(model.ir_version, p.fb.scalar<int64_t>(m, 0, 0, "ir_version"));
  SOTTO_ASSIGN(model.producer_name, p.fb.string(m, 2, "producer_name"));
  SOTTO_ASSIGN(model.producer_version, p.fb.string(m, 3, "producer_version"));
  SOTTO_ASSIGN(uint64_t g_at, p.fb.field(m, 7, "graph"));
  if (g_at == 0) return error("ort: the model has no graph");
  SOTTO_ASSIGN(uint64_t g_pos, p.fb.follow(g_at, "graph"));
  SOTTO_TRY(p.graph(g_pos, "", 0));
  return model;
}

}  // namespace sotto
