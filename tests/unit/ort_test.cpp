// The .ort reader: the real Moonshine files (counts from ONNX Runtime's own Python flatbuffer bindings, see
// tools/moonshine/ort_dump.py), and hand-built hostile files (truncated at every byte, offsets pointing
// outside, huge dims, looping subgraphs): one-line errors, never a crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/describe.h"
#include "io/ort.h"
#include "nn/weights.h"
#include "test_support.h"

namespace sotto {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  std::fseek(f, 0, SEEK_END);
  out.resize(static_cast<size_t>(std::ftell(f)));
  std::fseek(f, 0, SEEK_SET);
  if (std::fread(out.data(), 1, out.size(), f) != out.size()) out.clear();
  std::fclose(f);
  return out;
}

std::string moonshine_path(const char* file) {
  return std::string(SOTTO_SOURCE_DIR) + "/models/moonshine-base-en/" + file;
}

TEST(Ort, ReadsMoonshineEncoderTensorsAndNodes) {
  const auto bytes = read_file(moonshine_path("encoder_model.ort"));
  if (bytes.empty()) GTEST_SKIP() << "models/moonshine-base-en absent (bash scripts/get-models.sh moonshine)";
  auto model = parse_ort(bytes);
  ASSERT_TRUE(model.ok()) << model.status().message();
  // ONNX Runtime's bindings count 216 initializers and 877 nodes, no subgraph.
  EXPECT_EQ(model->tensors.size(), 216u);
  EXPECT_EQ(model->nodes.size(), 877u);
  EXPECT_EQ(model->subgraph_count, 0u);
  EXPECT_EQ(model->ort_version, "6");
  EXPECT_EQ(model->producer_name, "pytorch");
  ASSERT_EQ(model->inputs.size(), 1u);
  EXPECT_EQ(model->inputs[0], "input_values");
  const OrtTensor* conv1 = model->find("conv1.weight_quantized");
  ASSERT_NE(conv1, nullptr);
  EXPECT_EQ(conv1->dtype, DType::I8);
  EXPECT_EQ(conv1->shape, (std::vector<int64_t>{416, 1, 127}));
  EXPECT_EQ(conv1->n_bytes, 416u * 127u);
  const OrtTensor* scale = model->find("onnx::MatMul_2230_scale");
  ASSERT_NE(scale, nullptr);
  float s;
  std::memcpy(&s, scale->data, 4);
  EXPECT_FLOAT_EQ(s, 0.009482159279286861f);
  EXPECT_EQ(model->nodes[0].op_type, "Unsqueeze");
  EXPECT_EQ(model->nodes[1].op_type, "Cast");  // the first weight's dequantization
}

TEST(Ort, ReadsMoonshineDecoderSubgraphs) {
  const auto bytes = read_file(moonshine_path("decoder_model_merged.ort"));
  if (bytes.empty()) GTEST_SKIP() << "models/moonshine-base-en absent (bash scripts/get-models.sh moonshine)";
  auto model = parse_ort(bytes);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model->tensors.size(), 326u);
  EXPECT_EQ(model->nodes.size(), 2698u);
  EXPECT_EQ(model->subgraph_count, 2u);
  size_t in_branch = 0;
  for (const OrtNode& n : model->nodes) in_branch += n.scope.ends_with(".then_branch");
  EXPECT_GT(in_branch, 0u);
  const OrtTensor* emb = model->find("model.decoder.embed_tokens.weight_merged_0_quantized");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{32768, 416}));
}

// Files ONNX Runtime itself wrote (tools/moonshine/make_tiny_ort.py, a session saving its unoptimised graph):
// the exporters' int8 dequantization chain and an If node whose branches hold initializers.
TEST(Ort, ReadsFilesOnnxRuntimeWrote) {
  const auto int8 = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/ort/int8_matmul.ort");
  ASSERT_FALSE(int8.empty());
  auto m = parse_ort(int8);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const OrtTensor* q = m->find("w_quantized");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::I8);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(static_cast<int8_t>(q->data[i]), i - 6);
  const OrtTensor* offset = m->find("w_zero_point");
  ASSERT_NE(offset, nullptr);
  float v;
  std::memcpy(&v, offset->data, 4);
  EXPECT_EQ(v, 0.25f);
  ASSERT_EQ(m->nodes.size(), 4u);
  EXPECT_EQ(m->nodes[3].op_type, "MatMul");
  EXPECT_EQ(m->nodes[3].inputs, (std::vector<std::string>{"x", "w_add"}));
  EXPECT_EQ(m->nodes[3].name, "/proj/MatMul");

  const auto branches = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/ort/if_branches.ort");
  ASSERT_FALSE(branches.empty());
  auto b = parse_ort(branches);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->subgraph_count, 2u);
  const OrtTensor* then_bias = b->find("then_bias");
  ASSERT_NE(then_bias, nullptr);
  EXPECT_EQ(then_bias->scope, "optimum::if.then_branch");
  std::memcpy(&v, then_bias->data, 4);
  EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(b->find("else_bias")->scope, "optimum::if.else_branch");
  EXPECT_EQ(b->inputs, (std::vector<std::string>{"cond", "x"}));
}

// nn::open_weights reads .ort files through this reader: tensors by name (a branch's as "<scope>/<name>"),
// shapes and dtypes checked by load().
TEST(Ort, WeightSourceLoadsOrtTensors) {
  const auto bytes = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/ort/int8_matmul.ort");
  ASSERT_FALSE(bytes.empty());
  auto source = nn::open_weights("int8_matmul.ort", bytes);
  ASSERT_TRUE(source.ok()) << source.message();
  auto ctx = nn::Context::cpu();
  auto q = (*source)->load(*ctx, "w_quantized", {3, 4}, {DType::I8});
  ASSERT_TRUE(q.ok()) << q.message();
  auto values = ctx->to_floats(*q);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ((*values)[0], -6.0f);
  auto scale = (*source)->scalar("w_scale");
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ(*scale, 0.5f);
  auto wrong = (*source)->load(*ctx, "w_quantized", {4, 3}, {DType::I8});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("int8_matmul.ort"), std::string::npos) << wrong.message();

  const auto branches = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/ort/if_branches.ort");
  auto b = nn::open_weights("if_branches.ort", branches);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_NE((*b)->find("optimum::if.then_branch/then_bias"), nullptr);
}

// `sotto info` on an .ort file: the format, op counts and the tensor table.
TEST(Ort, DescribesOrtFiles) {
  const auto bytes = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/ort/int8_matmul.ort");
  ASSERT_EQ(detect_format(bytes), FileFormat::Ort);
  auto d = describe_file(bytes);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->format, "ort v6");
  ASSERT_EQ(d->tensors.size(), 3u);
  bool found = false;
  for (const TensorInfo& t : d->tensors)
    if (t.name == "w_quantized") {
      found = true;
      EXPECT_EQ(t.dtype, DType::I8);
      EXPECT_EQ(t.bytes, 12u);
    }
  EXPECT_TRUE(found);
  const std::string json = describe_json(*d, "int8_matmul.ort");
  EXPECT_NE(json.find("\"MatMul\":1"), std::string::npos) << json;
}

// A minimal flatbuffer writer: objects are laid out in call order, and a reference to a later object is
// patched once it exists (flatbuffer offsets point forward).
struct FbWriter {
  std::vector<uint8_t> b;

  void align(size_t n) {
    while (b.size() % n) b.push_back(0);
  }
  template <class T>
  void put(size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
  }
  template <class T>
  size_t push(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    put(at, v);
    return at;
  }
  // A table with `sizes[i]` bytes for slot i (0: absent). Returns the table's position and each slot's.
  std::pair<size_t, std::vector<size_t>> table(const std::vector<int>& sizes) {
    align(4);
    const size_t vt = b.size();
    uint16_t table_bytes = 4;
    std::vector<uint16_t> offs;
    for (int s : sizes) {
      offs.push_back(s ? table_bytes : 0);
      table_bytes = static_cast<uint16_t>(table_bytes + s);
    }
    push<uint16_t>(static_cast<uint16_t>(4 + 2 * sizes.size()));
    push<uint16_t>(table_bytes);
    for (uint16_t o : offs) push<uint16_t>(o);
    align(4);
    const size_t t = push<int32_t>(static_cast<int32_t>(b.size() - vt));
    b.resize(t + table_bytes);
    std::vector<size_t> at;
    for (uint16_t o : offs) at.push_back(o ? t + o : 0);
    return {t, at};
  }
  void ref(size_t field, size_t target) { put<uint32_t>(field, static_cast<uint32_t>(target - field)); }
  size_t string(const std::string& s) {
    align(4);
    const size_t at = push<uint32_t>(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    b.push_back(0);
    return at;
  }
  // A vector of n 4-byte slots (offsets to fill with ref()).
  size_t vector4(uint32_t n) {
    align(4);
    const size_t at = push<uint32_t>(n);
    b.resize(b.size() + 4 * n);
    return at;
  }
};

// session -> model -> graph { one F32 initializer "w" [2, 3], one node "Relu" with an If-like graph attribute
// holding one initializer "sub" }.
std::vector<uint8_t> tiny_ort(int64_t dim0 = 2) {
  FbWriter w;
  w.push<uint32_t>(0);
  w.b.insert(w.b.end(), {'O', 'R', 'T', 'M'});
  auto [session, sf] = w.table({4, 4});
  w.ref(0, session);
  w.ref(sf[0], w.string("6"));
  auto [model, mf] = w.table({8, 0, 4, 0, 0, 0, 0, 4});
  w.ref(sf[1], model);
  w.put<int64_t>(mf[0], 10);
  w.ref(mf[2], w.string("test"));
  auto [graph, gf] = w.table({4, 0, 4, 0, 0, 4, 4});
  w.ref(mf[7], graph);
  size_t inits = w.vector4(1);
  w.ref(gf[0], inits);
  auto [tensor, tf] = w.table({4, 0, 4, 4, 4});
  w.ref(inits + 4, tensor);
  w.ref(tf[0], w.string("w"));
  w.align(4);
  size_t dims = w.push<uint32_t>(2);
  w.push<int64_t>(dim0);
  w.push<int64_t>(3);
  w.ref(tf[2], dims);
  w.put<int32_t>(tf[3], 1);
  size_t raw = w.push<uint32_t>(24);
  for (int i = 0; i < 6; ++i) w.push<float>(static_cast<float>(i));
  w.ref(tf[4], raw);
  size_t inputs = w.vector4(1);
  w.ref(gf[5], inputs);
  w.ref(inputs + 4, w.string("x"));
  size_t outputs = w.vector4(1);
  w.ref(gf[6], outputs);
  w.ref(outputs + 4, w.string("y"));
  size_t nodes = w.vector4(1);
  w.ref(gf[2], nodes);
  auto [node, nf] = w.table({4, 0, 0, 0, 0, 4, 0, 0, 4, 4, 4});
  w.ref(nodes + 4, node);
  w.ref(nf[0], w.string("n0"));
  w.ref(nf[5], w.string("Relu"));
  size_t nin = w.vector4(1);
  w.ref(nf[8], nin);
  w.ref(nin + 4, w.string("x"));
  size_t nout = w.vector4(1);
  w.ref(nf[9], nout);
  w.ref(nout + 4, w.string("y"));
  size_t attrs = w.vector4(1);
  w.ref(nf[10], attrs);
  auto [attr, af] = w.table({4, 0, 4, 0, 0, 0, 0, 4});
  w.ref(attrs + 4, attr);
  w.ref(af[0], w.string("body"));
  w.put<int32_t>(af[2], 5);
  auto [sub, subf] = w.table({4});
  w.ref(af[7], sub);
  size_t sub_inits = w.vector4(1);
  w.ref(subf[0], sub_inits);
  auto [st, stf] = w.table({4, 0, 0, 4, 4});
  w.ref(sub_inits + 4, st);
  w.ref(stf[0], w.string("sub"));
  w.put<int32_t>(stf[3], 3);  // int8 scalar
  size_t sraw = w.push<uint32_t>(1);
  w.push<uint8_t>(0xfe);
  w.ref(stf[4], sraw);
  return w.b;
}

TEST(Ort, ReadsAHandBuiltFile) {
  const auto bytes = tiny_ort();
  auto model = parse_ort(bytes);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_EQ(model->tensors.size(), 2u);
  EXPECT_EQ(model->tensors[0].name, "w");
  EXPECT_EQ(model->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  float v[6];
  std::memcpy(v, model->tensors[0].data, 24);
  EXPECT_EQ(v[5], 5.0f);
  EXPECT_EQ(model->tensors[1].name, "sub");
  EXPECT_EQ(model->tensors[1].scope, "n0.body");
  EXPECT_EQ(model->tensors[1].dtype, DType::I8);
  EXPECT_EQ(model->subgraph_count, 1u);
  ASSERT_EQ(model->nodes.size(), 1u);
  EXPECT_EQ(model->nodes[0].op_type, "Relu");
  EXPECT_EQ(model->nodes[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(model->ir_version, 10);
  EXPECT_EQ(model->producer_name, "test");
}

TEST(Ort, TruncatedAtEveryByteFailsWithOneLine) {
  const auto bytes = tiny_ort();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto model = parse_ort(std::span<const uint8_t>(bytes.data(), n));
    // Cutting only trailing padding may still parse; anything else must fail cleanly.
    if (!model.ok()) {
      EXPECT_EQ(model.status().message().find('\n'), std::string::npos);
      EXPECT_EQ(model.status().message().rfind("ort: ", 0), 0u) << model.status().message();
    }
  }
  EXPECT_FALSE(parse_ort(std::span<const uint8_t>(bytes.data(), bytes.size() - 2)).ok());
}

TEST(Ort, RawDataThatDisagreesWithDimsIsAnError) {
  const auto bytes = tiny_ort(3);  // 3 x 3 floats claimed, 6 stored
  auto model = parse_ort(bytes);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("initializer 'w'"), std::string::npos) << model.status().message();
  // Dims whose product overflows 64 bits.
  auto huge = tiny_ort(int64_t{1} << 62);
  EXPECT_FALSE(parse_ort(huge).ok());
  auto negative = tiny_ort(-1);
  EXPECT_FALSE(parse_ort(negative).ok());
}

TEST(Ort, RandomCorruptionNeverCrashes) {
  std::mt19937_64 rng(sotto::testing::test_seed());
  const auto good = tiny_ort();
  for (int round = 0; round < 4000; ++round) {
    auto bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = 8 + rng() % (bytes.size() - 8);  // keep the identifier so the parser runs
      bytes[at] = static_cast<uint8_t>(rng() % 3 == 0 ? 0xff : rng());
    }
    auto model = parse_ort(bytes);
    if (!model.ok())
      EXPECT_EQ(model.status().message().find('\n'), std::string::npos) << model.status().message();
  }
}

TEST(Ort, NotAnOrtFile) {
  const std::vector<uint8_t> gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  auto model = parse_ort(gguf);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("ORTM"), std::string::npos);
  EXPECT_FALSE(is_ort(std::span<const uint8_t>()));
}

}  // namespace
}  // namespace sotto
