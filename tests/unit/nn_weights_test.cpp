// The weight source over GGUF, safetensors and ONNX (initializers, Constant nodes, external data): tensors come
// back with the file's values and shapes, and hostile files (missing tensor, wrong shape or dtype, truncated or
// escaping external data, unknown formats) fail with one line naming the file and the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "nn/ops.h"
#include "nn/weights.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::floats;

std::vector<uint8_t> float_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A minimal protobuf writer (encoding per protobuf.dev; field numbers from onnx/onnx.proto).
struct Pb {
  std::vector<uint8_t> b;
  Pb& varint(uint64_t v) {
    while (v >= 0x80) b.push_back(static_cast<uint8_t>(v | 0x80)), v >>= 7;
    b.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  Pb& u(uint32_t field, uint64_t v) { return varint(uint64_t{field} << 3).varint(v); }
  Pb& bytes(uint32_t field, const std::vector<uint8_t>& data) {
    varint(uint64_t{field} << 3 | 2).varint(data.size());
    b.insert(b.end(), data.begin(), data.end());
    return *this;
  }
  Pb& str(uint32_t field, std::string_view s) {
    return bytes(field, std::vector<uint8_t>(s.begin(), s.end()));
  }
  Pb& msg(uint32_t field, const Pb& m) { return bytes(field, m.b); }
};

// TensorProto: dims 1, data_type 2, name 8, raw_data 9, external_data 13 {key 1, value 2}, data_location 14.
Pb external_tensor(std::string_view name, std::string_view location, std::string_view offset,
                   std::string_view length) {
  Pb t;
  t.u(1, 2).u(1, 3).u(2, 1).str(8, name);
  auto entry = [&](std::string_view k, std::string_view v) {
    if (v.empty()) return;
    Pb e;
    e.str(1, k).str(2, v);
    t.msg(13, e);
  };
  entry("location", location);
  entry("offset", offset);
  entry("length", length);
  t.u(14, 1);
  return t;
}

std::vector<uint8_t> onnx_model(const Pb& initializer) {
  // GraphProto: node 1, name 2, initializer 5. A Constant node (op_type 4, output 2, attribute 5 {name 1, t 5,
  // type 20 = TENSOR}) holding "bias" [2] = {0.5, -1}.
  Pb bias;
  bias.u(1, 2).u(2, 1).str(8, "bias").bytes(9, float_bytes({0.5f, -1.0f}));
  Pb attr;
  attr.str(1, "value").u(20, 4).msg(5, bias);
  Pb node;
  node.str(2, "bias_out").str(4, "Constant").msg(5, attr);
  Pb graph;
  graph.msg(1, node).str(2, "main").msg(5, initializer);
  Pb model;
  model.u(1, 9).msg(7, graph);
  return model.b;
}

const std::vector<float> kW = {1, 2, 3, 4, 5, 6};

TEST(NnWeights, GgufTensorsComeBackOutermostFirst) {
  GgufWriter w;
  const int64_t ne[] = {3, 2};  // GGUF order: innermost first -> shape [2, 3]
  ASSERT_TRUE(w.add_tensor("w", DType::F32, ne, float_bytes(kW)).ok());
  const std::vector<uint8_t> file = w.finish();
  auto src = open_weights("tiny.gguf", file);
  ASSERT_TRUE(src.ok()) << src.message();
  auto ctx = Context::cpu();
  auto t = (*src)->load(*ctx, "w", {2, 3});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(floats(*t), kW);
  EXPECT_EQ((*src)->load(*ctx, "w", {3, 2}).message(),
            "tiny.gguf: tensor 'w' has shape [2,3], expected [3,2]");
  EXPECT_EQ((*src)->load(*ctx, "w", {2, 3}, {DType::F16}).message(),
            "tiny.gguf: tensor 'w' is f32, expected f16");
  EXPECT_EQ((*src)->load(*ctx, "nope", {2, 3}).message(), "tiny.gguf: tensor 'nope' is missing");
  EXPECT_EQ((*src)->scalar("w").message(), "tiny.gguf: tensor 'w' has shape [2,3], expected one value");
}

TEST(NnWeights, SafetensorsTensors) {
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"s":{"dtype":"F32","shape":[],"data_offsets":[24,28]}})";
  while ((header.size() + 8) % 8) header += ' ';
  std::vector<uint8_t> file(8);
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file.insert(file.end(), header.begin(), header.end());
  std::vector<uint8_t> data = float_bytes(kW), s = float_bytes({0.25f});
  file.insert(file.end(), data.begin(), data.end());
  file.insert(file.end(), s.begin(), s.end());
  auto src = open_weights("m.safetensors", file);
  ASSERT_TRUE(src.ok()) << src.message();
  auto ctx = Context::cpu();
  auto t = (*src)->load(*ctx, "a", {2, 3});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(floats(*t), kW);
  auto scalar = (*src)->scalar("s");
  ASSERT_TRUE(scalar.ok()) << scalar.message();
  EXPECT_EQ(*scalar, 0.25f);
}

TEST(NnWeights, OnnxExternalDataAndConstants) {
  const std::vector<uint8_t> file = onnx_model(external_tensor("w", "model.onnx_data", "8", "24"));
  std::vector<uint8_t> data(8, 0xee);  // 8 bytes of something else first: the offset must be honoured
  const std::vector<uint8_t> wb = float_bytes(kW);
  data.insert(data.end(), wb.begin(), wb.end());
  int reads = 0;
  auto src = open_weights("model.onnx", file, [&](std::string_view name) -> Result<std::span<const uint8_t>> {
    ++reads;
    if (name != "model.onnx_data") return error("no file '", name, "'");
    return std::span<const uint8_t>(data);
  });
  ASSERT_TRUE(src.ok()) << src.message();
  EXPECT_EQ(reads, 1);
  auto ctx = Context::cpu();
  auto t = (*src)->load(*ctx, "w", {2, 3});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(floats(*t), kW);
  auto bias = (*src)->load(*ctx, "bias_out", {2});  // a Constant node's output
  ASSERT_TRUE(bias.ok()) << bias.message();
  EXPECT_EQ(floats(*bias), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_NE((*src)->find("bias"), nullptr);  // also by its TensorProto name
}

TEST(NnWeights, HostileOnnxExternalData) {
  const std::vector<uint8_t> data = float_bytes({1, 2, 3, 4, 5});  // 20 bytes
  const ReadSibling read = [&](std::string_view name) -> Result<std::span<const uint8_t>> {
    if (name != "model.onnx_data") return error("no file '", name, "'");
    return std::span<const uint8_t>(data);
  };
  auto fails = [&](const Pb& tensor, const ReadSibling& r) {
    auto src = open_weights("model.onnx", onnx_model(tensor), r);
    EXPECT_FALSE(src.ok());
    return src.ok() ? std::string() : src.message();
  };
  EXPECT_EQ(fails(external_tensor("w", "model.onnx_data", "0", ""), read),
            "model.onnx: onnx: tensor 'w' ends at byte 24 of 'model.onnx_data', past its end (20 bytes)");
  EXPECT_EQ(
      fails(external_tensor("w", "model.onnx_data", "99999999999", ""), read),
      "model.onnx: onnx: tensor 'w' ends at byte 100000000023 of 'model.onnx_data', past its end (20 bytes)");
  EXPECT_EQ(
      fails(external_tensor("w", "model.onnx_data", "0", "16"), read),
      "model.onnx: onnx: tensor 'w' has 16 bytes of external data in 'model.onnx_data' but its dims and type "
      "(float32) need 24");
  EXPECT_EQ(fails(external_tensor("w", "../secret", "0", ""), read),
            "model.onnx: onnx: tensor 'w' has external data at '../secret', outside the model's directory");
  EXPECT_EQ(fails(external_tensor("w", "/etc/passwd", "0", ""), read),
            "model.onnx: onnx: tensor 'w' has external data at '/etc/passwd', outside the model's directory");
  EXPECT_EQ(fails(external_tensor("w", "other.bin", "0", ""), read),
            "model.onnx: onnx: tensor 'w': cannot read external data 'other.bin': no file 'other.bin'");
  EXPECT_EQ(fails(external_tensor("w", "model.onnx_data", "x1", ""), read),
            "model.onnx: onnx: tensor 'w' has external data offset 'x1', not a number");
  EXPECT_EQ(fails(external_tensor("w", "", "0", ""), read),
            "model.onnx: onnx: tensor 'w' has external data without a 'location' entry");
  EXPECT_EQ(fails(external_tensor("w", "model.onnx_data", "0", ""), nullptr),
            "model.onnx: onnx: tensor 'w' keeps its data in an external file, which is not supported");
}

TEST(NnWeights, UnknownFormatsFailInOneLine) {
  std::vector<uint8_t> ort = {0x10, 0, 0, 0, 'O', 'R', 'T', 'M', 0, 0, 0, 0};
  auto a = open_weights("encoder_model.ort", ort);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(
      a.message(),
      "encoder_model.ort: ort: root table at byte 0 points to byte 16, past the end of the file (12 bytes)");
  const std::vector<uint8_t> junk = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  auto b = open_weights("junk.bin", junk);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.message(), "junk.bin: not a GGUF, safetensors, ONNX or .ort file");
  // An ONNX file cut short names where the protobuf ends.
  const std::vector<uint8_t> whole = onnx_model(external_tensor("w", "model.onnx_data", "0", ""));
  auto c = open_weights("cut.onnx", std::span<const uint8_t>(whole.data(), whole.size() - 5));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message().rfind("cut.onnx: onnx: ", 0), 0u) << c.message();
}

TEST(NnWeights, FoldedBatchNormEqualsConvThenBatchNorm) {
  auto ctx = Context::cpu();
  const int64_t cin = 3, cout = 5, t = 17;
  const Tensor x = testing::rand_tensor(*ctx, {cin, t}), w = testing::rand_tensor(*ctx, {cout, cin, 3});
  const Tensor b = testing::rand_tensor(*ctx, {cout}), gamma = testing::rand_tensor(*ctx, {cout});
  const Tensor beta = testing::rand_tensor(*ctx, {cout}), mean = testing::rand_tensor(*ctx, {cout});
  const Tensor var = testing::rand_tensor(*ctx, {cout}, 0.1f, 2.0f);
  const float eps = 1e-5f;
  // Batch norm after the conv, per channel, written with broadcast ops on [C, 1] columns.
  const Tensor y = conv1d(x, w, b, {.padding = 1});
  const Tensor sd = activation(scale(var, 1.0f, eps), Act::Sqrt);
  const Tensor bn =
      add(mul(div(sub(y, mean.reshape({cout, 1})), sd.reshape({cout, 1})), gamma.reshape({cout, 1})),
          beta.reshape({cout, 1}));
  Tensor fw = w, fb = b;
  fold_batch_norm(*ctx, fw, fb, gamma, beta, mean, var, eps);
  testing::expect_close(conv1d(x, fw, fb, {.padding = 1}), bn, 1e-5f, 1e-5f, "folded batch norm");
  EXPECT_EQ(floats(w), floats(w));  // the originals are untouched (fold makes new tensors)
}

}  // namespace
}  // namespace sotto::nn
