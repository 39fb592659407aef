// ONNX models written here by a tiny protobuf writer (encoding from protobuf.dev/programming-guides/encoding,
// field numbers from onnx/onnx.proto), parsed back: every data type through raw_data and through its typed
// field (packed and unpacked), Constant forms, subgraph naming, unknown fields of every wire type; then
// hand-made hostile files (external data, bad sizes, depth bombs, huge lengths) that must fail with a clear
// line.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/onnx.h"
#include "io/protobuf.h"

namespace sotto {
namespace {

// ------------------------------------------------------------------ protobuf writer
struct Pb {
  std::vector<uint8_t> b;

  Pb& varint(uint64_t v) {
    while (v >= 0x80) b.push_back(static_cast<uint8_t>(v | 0x80)), v >>= 7;
    b.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  Pb& tag(uint32_t field, int wire) { return varint(uint64_t{field} << 3 | static_cast<uint64_t>(wire)); }
  Pb& u(uint32_t field, uint64_t v) { return tag(field, 0).varint(v); }
  Pb& bytes(uint32_t field, const std::vector<uint8_t>& data) {
    tag(field, 2).varint(data.size());
    b.insert(b.end(), data.begin(), data.end());
    return *this;
  }
  Pb& str(uint32_t field, std::string_view s) {
    return bytes(field, std::vector<uint8_t>(s.begin(), s.end()));
  }
  Pb& msg(uint32_t field, const Pb& m) { return bytes(field, m.b); }
  Pb& fixed32(uint32_t field, uint32_t v) {
    tag(field, 5);
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Pb& fixed64(uint32_t field, uint64_t v) {
    tag(field, 1);
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
};

// One field of every wire type (a group with a varint inside included), for readers to skip.
Pb& unknown_fields(Pb& m) {
  m.u(900, 12345).fixed64(901, 0x0102030405060708).str(902, "ignored").fixed32(903, 7);
  m.tag(904, 3).u(1, 5).tag(904, 4);  // deprecated group: start, one varint, end
  return m;
}

Pb model_with_graph(const Pb& graph) {
  Pb m;
  m.u(1, 9).str(2, "sotto-test").str(3, "0.1");
  Pb opset;
  opset.str(1, "").u(2, 21);
  m.msg(8, opset).msg(7, graph);
  return m;
}

Pb constant_node(std::string_view output, const Pb& attribute, std::string_view name = "") {
  Pb n;
  n.str(2, output);
  if (!name.empty()) n.str(3, name);
  n.str(4, "Constant").msg(5, attribute);
  return n;
}

Pb tensor_attribute(const Pb& tensor) {
  Pb a;
  a.str(1, "value").u(20, 4).msg(5, tensor);
  return a;
}

// ------------------------------------------------------------------ one random tensor per data type
struct TypeCase {
  int32_t onnx_type;
  DType dtype;
  uint32_t width;  // bytes per element in sotto's buffer
  uint32_t field;  // the typed TensorProto field ONNX uses for it
  int wire;        // 0 varint, 5 fixed32, 1 fixed64
  int64_t lo, hi;  // value range (as stored in the typed field)
};

const TypeCase kTypes[] = {
    {1, DType::F32, 4, 4, 5, 0, 0},
    {11, DType::F64, 8, 10, 1, 0, 0},
    {7, DType::I64, 8, 7, 0, INT64_MIN, INT64_MAX},
    {13, DType::U64, 8, 11, 0, 0, 0},
    {12, DType::U32, 4, 11, 0, 0, UINT32_MAX},
    {6, DType::I32, 4, 5, 0, INT32_MIN, INT32_MAX},
    {5, DType::I16, 2, 5, 0, -32768, 32767},
    {3, DType::I8, 1, 5, 0, -128, 127},
    {4, DType::U16, 2, 5, 0, 0, 65535},
    {2, DType::U8, 1, 5, 0, 0, 255},
    {9, DType::Bool, 1, 5, 0, 0, 1},
    {10, DType::F16, 2, 5, 0, 0, 65535},
    {16, DType::BF16, 2, 5, 0, 0, 65535},
};

enum class Storage { Raw, Packed, Unpacked };

struct Built {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> expected;  // little-endian values in the sotto DType
  Pb tensor;
};

Built random_tensor(const TypeCase& tc, Storage storage, std::mt19937_64& rng, std::string name) {
  Built out{std::move(name), tc.dtype, {}, {}, {}};
  const int rank = static_cast<int>(rng() % 4);
  uint64_t n = 1;
  for (int i = 0; i < rank; ++i)
    out.shape.push_back(static_cast<int64_t>(1 + rng() % 5)), n *= out.shape.back();
  std::vector<uint64_t> values;  // the 64-bit pattern stored in the typed field
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t v;
    if (tc.onnx_type == 1) {
      float f = std::uniform_real_distribution<float>(-100, 100)(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      v = bits;
    } else if (tc.onnx_type == 11) {
      double d = std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
      std::memcpy(&v, &d, 8);
    } else if (tc.onnx_type == 13) {
      v = rng();
    } else {
      v = static_cast<uint64_t>(std::uniform_int_distribution<int64_t>(tc.lo, tc.hi)(rng));
    }
    values.push_back(v);
    for (uint32_t k = 0; k < tc.width; ++k) out.expected.push_back(static_cast<uint8_t>(v >> (8 * k)));
  }
  Pb& t = out.tensor;
  for (int64_t d : out.shape) t.u(1, static_cast<uint64_t>(d));  // dims unpacked here, packed below for raw
  t.u(2, static_cast<uint64_t>(tc.onnx_type)).str(8, out.name);
  if (storage == Storage::Raw) {
    t.bytes(9, out.expected);
  } else if (storage == Storage::Unpacked) {
    for (uint64_t v : values) {
      if (tc.wire == 5)
        t.fixed32(tc.field, static_cast<uint32_t>(v));
      else if (tc.wire == 1)
        t.fixed64(tc.field, v);
      else
        t.u(tc.field, v);
    }
  } else {
    Pb packed;
    for (uint64_t v : values) {
      if (tc.wire == 0) {
        packed.varint(v);
      } else {
        for (uint32_t k = 0; k < (tc.wire == 5 ? 4u : 8u); ++k)
          packed.b.push_back(static_cast<uint8_t>(v >> (8 * k)));
      }
    }
    // Split into two runs: a repeated packed field may appear more than once and the runs concatenate.
    if (tc.wire == 0 || values.size() < 2) {
      t.msg(tc.field, packed);
    } else {
      const size_t half = (values.size() / 2) * (tc.wire == 5 ? 4 : 8);
      t.bytes(tc.field, std::vector<uint8_t>(packed.b.begin(), packed.b.begin() + static_cast<long>(half)));
      t.bytes(tc.field, std::vector<uint8_t>(packed.b.begin() + static_cast<long>(half), packed.b.end()));
    }
  }
  unknown_fields(t);
  return out;
}

void expect_tensor(const OnnxModel& m, const Built& b) {
  SCOPED_TRACE(b.name);
  const OnnxTensor* t = m.find(b.name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, b.dtype);
  EXPECT_EQ(t->shape, b.shape);
  const auto bytes = t->bytes();
  ASSERT_EQ(bytes.size(), b.expected.size());
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), b.expected);
}

TEST(OnnxRoundTrip, EveryDataTypeInEveryStorage) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    Pb graph;
    graph.str(2, "main");
    std::vector<Built> built;
    for (const TypeCase& tc : kTypes) {
      for (Storage s : {Storage::Raw, Storage::Packed, Storage::Unpacked}) {
        built.push_back(random_tensor(tc, s, rng, cat("t", tc.onnx_type, "_", static_cast<int>(s))));
        graph.msg(5, built.back().tensor);
      }
    }
    unknown_fields(graph);
    Pb model = model_with_graph(graph);
    unknown_fields(model);
    auto parsed = parse_onnx(model.b);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    ASSERT_EQ(parsed->tensors.size(), built.size());
    for (const Built& b : built) expect_tensor(*parsed, b);
    EXPECT_EQ(parsed->ir_version, 9);
    EXPECT_EQ(parsed->producer_name, "sotto-test");
    EXPECT_EQ(parsed->graph_name, "main");
  }
}

TEST(OnnxRoundTrip, ConstantFormsAndSubgraphNames) {
  std::mt19937_64 rng(std::random_device{}());
  const float f = std::uniform_real_distribution<float>(-10, 10)(rng);
  const int64_t i = static_cast<int64_t>(rng());
  uint32_t f_bits;
  std::memcpy(&f_bits, &f, 4);

  Built weight = random_tensor(kTypes[0], Storage::Raw, rng, "w");
  Pb then_graph, else_graph, body0, body1;
  // The same value name in both branches, as Silero VAD does for its per-sample-rate weights.
  then_graph.str(2, "then").msg(1, constant_node("c", tensor_attribute(weight.tensor)));
  else_graph.str(2, "else").msg(1, constant_node("c", tensor_attribute(weight.tensor)));
  Pb value_float, value_floats, value_int, value_ints;
  value_float.str(1, "value_float").u(20, 1).fixed32(2, f_bits);
  value_floats.str(1, "value_floats").u(20, 6).fixed32(7, f_bits).fixed32(7, f_bits);  // unpacked
  value_int.str(1, "value_int").u(20, 2).u(3, static_cast<uint64_t>(i));
  Pb packed_ints;
  packed_ints.varint(static_cast<uint64_t>(i)).varint(7).varint(static_cast<uint64_t>(-3));
  value_ints.str(1, "value_ints").u(20, 7).msg(8, packed_ints);
  body0.msg(1, constant_node("vf", value_float)).msg(1, constant_node("vfs", value_floats));
  body1.msg(1, constant_node("vi", value_int)).msg(1, constant_node("vis", value_ints));

  Pb if_node, loop_node, then_attr, else_attr, bodies_attr;
  then_attr.str(1, "then_branch").u(20, 5).msg(6, then_graph);
  else_attr.str(1, "else_branch").u(20, 5).msg(6, else_graph);
  if_node.str(1, "cond").str(2, "out").str(3, "my_if").str(4, "If").msg(5, then_attr).msg(5, else_attr);
  // A node with no name and a GRAPHS attribute: named "<op_type>#<index>" and "[i]" per graph.
  bodies_attr.str(1, "bodies").u(20, 10).msg(11, body0).msg(11, body1);
  loop_node.str(4, "Custom").str(7, "com.example").msg(5, bodies_attr);
  Pb graph;
  graph.msg(1, if_node).msg(1, loop_node);
  const Pb file = model_with_graph(graph);  // the model points into these bytes: keep them alive
  auto parsed = parse_onnx(file.b);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const OnnxModel& m = *parsed;
  EXPECT_EQ(m.node_count, 2u);
  EXPECT_EQ(m.total_node_count, 8u);
  EXPECT_EQ(m.subgraph_count, 4u);
  // Every node listed, each before its subgraphs' nodes, with its inputs, outputs and scope.
  ASSERT_EQ(m.nodes.size(), 8u);
  EXPECT_EQ(m.nodes[0].name, "my_if");
  EXPECT_EQ(m.nodes[0].op_type, "If");
  EXPECT_EQ(m.nodes[0].inputs, std::vector<std::string>{"cond"});
  EXPECT_EQ(m.nodes[0].outputs, std::vector<std::string>{"out"});
  EXPECT_EQ(m.nodes[1].op_type, "Constant");
  EXPECT_EQ(m.nodes[1].scope, "my_if.then_branch");
  EXPECT_EQ(m.nodes[1].outputs, std::vector<std::string>{"c"});
  EXPECT_EQ(m.nodes[3].op_type, "Custom");
  EXPECT_EQ(m.nodes[3].domain, "com.example");
  EXPECT_EQ(m.nodes[7].scope, "Custom#1.bodies[1]");

  const OnnxTensor* c_then = m.find("my_if.then_branch/c");
  const OnnxTensor* c_else = m.find("my_if.else_branch/c");
  ASSERT_NE(c_then, nullptr);
  ASSERT_NE(c_else, nullptr);
  EXPECT_EQ(c_then->tensor_name, "w");
  EXPECT_EQ(c_then->scope, "my_if.then_branch");
  EXPECT_EQ(m.find("c"), nullptr);  // ambiguous
  EXPECT_EQ(m.find_in_scope("my_if.else_branch", "c"), c_else);
  expect_tensor(m, {"my_if.then_branch/c", weight.dtype, weight.shape, weight.expected, {}});

  auto read_f32 = [](const OnnxTensor* t, size_t k) {
    float v;
    std::memcpy(&v, t->bytes().data() + 4 * k, 4);
    return v;
  };
  auto read_i64 = [](const OnnxTensor* t, size_t k) {
    int64_t v;
    std::memcpy(&v, t->bytes().data() + 8 * k, 8);
    return v;
  };
  const OnnxTensor* vf = m.find("Custom#1.bodies[0]/vf");
  const OnnxTensor* vfs = m.find("Custom#1.bodies[0]/vfs");
  const OnnxTensor* vi = m.find("Custom#1.bodies[1]/vi");
  const OnnxTensor* vis = m.find("Custom#1.bodies[1]/vis");
  ASSERT_TRUE(vf && vfs && vi && vis);
  EXPECT_TRUE(vf->shape.empty());
  EXPECT_EQ(read_f32(vf, 0), f);
  EXPECT_EQ(vfs->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(read_f32(vfs, 1), f);
  EXPECT_TRUE(vi->shape.empty());
  EXPECT_EQ(read_i64(vi, 0), i);
  EXPECT_EQ(vis->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(read_i64(vis, 0), i);
  EXPECT_EQ(read_i64(vis, 2), -3);

  bool saw_custom = false;
  for (const auto& op : m.op_counts) saw_custom |= op.op_type == "com.example:Custom" && op.count == 1;
  EXPECT_TRUE(saw_custom);
}

TEST(OnnxRoundTrip, DuplicateNamesGetASuffix) {
  std::mt19937_64 rng(std::random_device{}());
  Built a = random_tensor(kTypes[0], Storage::Raw, rng, "dup");
  Built b = random_tensor(kTypes[0], Storage::Raw, rng, "dup");
  Pb graph;
  graph.msg(5, a.tensor).msg(5, b.tensor);
  const Pb file = model_with_graph(graph);  // the model points into these bytes: keep them alive
  auto parsed = parse_onnx(file.b);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_NE(parsed->find("dup"), nullptr);
  ASSERT_NE(parsed->find("dup#2"), nullptr);
  EXPECT_EQ(parsed->tensors[1].unique_name, "dup#2");
}

// ------------------------------------------------------------------ hostile and unsupported files
std::string parse_error(const Pb& model) {
  auto parsed = parse_onnx(model.b);
  return parsed.ok() ? "<parsed>" : parsed.message();
}

Pb graph_with_tensor(const Pb& tensor) {
  Pb g;
  g.msg(5, tensor);
  return g;
}

TEST(OnnxErrors, TensorProblemsNameTheTensor) {
  Pb external;
  external.u(1, 4).u(2, 1).str(8, "big").u(14, 1);
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(external))),
            "onnx: tensor 'big' keeps its data in an external file, which is not supported");

  Pb entries_only;  // external_data entries {key "location", value "w.bin"} without data_location
  Pb location;
  location.str(1, "location").str(2, "w.bin");
  entries_only.u(1, 4).u(2, 1).str(8, "elsewhere").msg(13, location);
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(entries_only))),
            "onnx: tensor 'elsewhere' keeps its data in an external file, which is not supported");

  Pb varint_floats;  // float_data must be fixed32 (or packed), not varints
  varint_floats.u(2, 1).str(8, "vf").u(4, 5);
  EXPECT_NE(parse_error(model_with_graph(graph_with_tensor(varint_floats))).find("expected fixed32"),
            std::string::npos);

  Pb short_raw;
  short_raw.u(1, 4).u(2, 1).str(8, "short").bytes(9, {1, 2, 3});
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(short_raw))),
            "onnx: tensor 'short' has 3 bytes of raw_data but its dims and type (float32) need 16");

  Pb negative;
  negative.u(1, static_cast<uint64_t>(-2)).u(2, 1).str(8, "neg");
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(negative))),
            "onnx: tensor 'neg' has negative dim -2 at index 0");

  Pb overflow;  // 2^40 * 2^40 elements
  overflow.u(1, 1ull << 40).u(1, 1ull << 40).u(2, 1).str(8, "huge");
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(overflow))),
            "onnx: tensor 'huge' has dims whose product overflows 64 bits");

  Pb count;  // dims say 5 values, float_data has 2
  count.u(1, 5).u(2, 1).str(8, "few").fixed32(4, 0x3f800000).fixed32(4, 0x40000000);
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(count))),
            "onnx: tensor 'few' has 2 values in float_data but its dims hold 5");

  Pb range;
  range.u(1, 1).u(2, 3).str(8, "i8").u(5, 300);
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(range))),
            "onnx: tensor 'i8' int32_data[0] = 300 does not fit its type");

  Pb wrong_field;  // int64 values in float_data
  wrong_field.u(2, 7).str(8, "mixed").fixed32(4, 1);
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(wrong_field))),
            "onnx: tensor 'mixed' of type int64 stores values in a typed field meant for another type");

  Pb no_data;
  no_data.u(1, 3).u(2, 1).str(8, "empty");
  EXPECT_EQ(parse_error(model_with_graph(graph_with_tensor(no_data))),
            "onnx: tensor 'empty' has no data (its dims hold 3 values)");
}

TEST(OnnxErrors, UnsupportedTypesAreListedNotFatal) {
  Pb strings, zero;
  strings.u(1, 1).u(2, 8).str(8, "labels").str(6, "hello");
  zero.u(1, 0).u(2, 1).str(8, "nothing");  // a 0-element tensor is valid and has no bytes
  Pb graph;
  graph.msg(5, strings).msg(5, zero);
  const Pb file = model_with_graph(graph);  // the model points into these bytes: keep them alive
  auto parsed = parse_onnx(file.b);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_EQ(parsed->unsupported.size(), 1u);
  EXPECT_EQ(parsed->unsupported[0].unique_name, "labels");
  EXPECT_EQ(parsed->unsupported[0].onnx_data_type, 8);
  ASSERT_EQ(parsed->tensors.size(), 1u);
  EXPECT_EQ(parsed->tensors[0].n_bytes, 0u);
}

TEST(OnnxErrors, DepthBombFailsFast) {
  // If nodes nested 200 deep: each level is graph -> node -> attribute -> graph.
  Pb graph;
  graph.str(2, "leaf");
  for (int level = 0; level < 200; ++level) {
    Pb attr, node, outer;
    attr.str(1, "then_branch").msg(6, graph);
    node.str(4, "If").msg(5, attr);
    outer.msg(1, node);
    graph = outer;
  }
  const std::string message = parse_error(model_with_graph(graph));
  EXPECT_NE(message.find("nested more than 64"), std::string::npos) << message;

  // Groups nested 1000 deep inside an unknown field.
  Pb groups;
  for (int i = 0; i < 1000; ++i) groups.tag(77, 3);
  for (int i = 0; i < 1000; ++i) groups.tag(77, 4);
  Pb model = model_with_graph(Pb{});
  model.b.insert(model.b.end(), groups.b.begin(), groups.b.end());
  EXPECT_NE(parse_error(model).find("groups nested more than 64 deep"), std::string::npos)
      << parse_error(model);
}

TEST(OnnxErrors, WireFormatDamage) {
  Pb graph;
  graph.str(2, "g");
  Pb model = model_with_graph(graph);

  Pb long_length = model;  // a string field claiming 2^62 bytes
  long_length.tag(2, 2).varint(1ull << 62);
  EXPECT_NE(parse_error(long_length).find("runs past the end"), std::string::npos)
      << parse_error(long_length);

  Pb long_varint = model;  // 11-byte varint
  long_varint.tag(1, 0);
  for (int i = 0; i < 10; ++i) long_varint.b.push_back(0x80);
  long_varint.b.push_back(0x01);
  EXPECT_NE(parse_error(long_varint).find("longer than 10 bytes"), std::string::npos)
      << parse_error(long_varint);

  Pb overflow_varint = model;  // 10 bytes whose last carries more than bit 63
  overflow_varint.tag(1, 0);
  for (int i = 0; i < 9; ++i) overflow_varint.b.push_back(0xff);
  overflow_varint.b.push_back(0x02);
  EXPECT_NE(parse_error(overflow_varint).find("over 64 bits"), std::string::npos);

  Pb bad_wire = model;
  bad_wire.tag(5, 7);
  EXPECT_NE(parse_error(bad_wire).find("invalid wire type 7"), std::string::npos);

  Pb field_zero = model;
  field_zero.b.push_back(0x00);
  EXPECT_NE(parse_error(field_zero).find("invalid field number 0"), std::string::npos);

  Pb stray_end = model;
  stray_end.tag(9, 4);
  EXPECT_NE(parse_error(stray_end).find("never started"), std::string::npos);

  EXPECT_EQ(parse_error(Pb{}), "onnx: the file has no graph (ModelProto field 7)");

  // A huge packed dims run: more than 64 dims is refused before anything is stored.
  Pb dims;
  for (int i = 0; i < 100000; ++i) dims.varint(1);
  Pb tensor;
  tensor.msg(1, dims).u(2, 1).str(8, "many_dims");
  EXPECT_NE(parse_error(model_with_graph(graph_with_tensor(tensor))).find("more than 64 dims"),
            std::string::npos);
}

TEST(OnnxProtobuf, VarintLimits) {
  // Encodings from the protobuf encoding guide: 150 = 96 01; 2^64-1 = ff x9 01.
  std::vector<uint8_t> v150 = {0x96, 0x01};
  size_t pos = 0;
  EXPECT_EQ(pb::decode_varint(v150, pos), 150u);
  EXPECT_EQ(pos, 2u);
  std::vector<uint8_t> vmax(9, 0xff);
  vmax.push_back(0x01);
  pos = 0;
  EXPECT_EQ(pb::decode_varint(vmax, pos), UINT64_MAX);
  vmax.back() = 0x02;
  pos = 0;
  EXPECT_FALSE(pb::decode_varint(vmax, pos).has_value());
  std::vector<uint8_t> cut = {0x80, 0x80};
  pos = 0;
  EXPECT_FALSE(pb::decode_varint(cut, pos).has_value());
  EXPECT_FALSE(pb::count_packed_varints(cut).has_value());
  EXPECT_EQ(pb::count_packed_varints(v150), 1u);
}

}  // namespace
}  // namespace sotto
