// The ONNX reader on the real Silero VAD files, checked against tables made by the official `onnx` Python
// package (tools/onnx_reference.py -> tests/data/*.onnx.tensors.tsv): every tensor's name, scope, dtype,
// shape and the sha256 of its values. Then the same files cut short and corrupted, which must fail cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/describe.h"
#include "io/onnx.h"
#include "test_support.h"

namespace sotto {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string fixture(const char* name) {
  return std::string(SOTTO_FIXTURES_DIR) + "/vad/" + name;
}
std::string reference(const char* name) {
  return std::string(SOTTO_SOURCE_DIR) + "/tests/data/" + name;
}

using sotto::testing::sha256_hex;  // tests/unit/test_support.h

TEST(OnnxSha256, MatchesFips180Examples) {
  // FIPS 180-4 / NIST example values for "abc" and the empty message.
  const std::string abc = "abc";
  EXPECT_EQ(sha256_hex({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// ------------------------------------------------------------------ reference tables
struct ReferenceRow {
  std::string unique_name, tensor_name, dtype, shape;
  uint64_t n_elements = 0;
  std::string sha256_prefix;
  double sum = 0;
};

struct Reference {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<ReferenceRow> rows;
  std::string get(std::string_view key) const {
    for (auto& [k, v] : meta)
      if (k == key) return v;
    return "<missing>";
  }
};

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

Reference load_reference(const char* name) {
  Reference ref;
  std::ifstream in(reference(name));
  std::string line;
  while (std::getline(in, line)) {
    auto cells = split(line, '\t');
    if (line.starts_with("#")) {
      ref.meta.emplace_back(cells[0].substr(1), cells.size() > 1 ? cells[1] : "");
    } else if (cells.size() == 7) {
      ref.rows.push_back(
          {cells[0], cells[1], cells[2], cells[3], std::stoull(cells[4]), cells[5], std::stod(cells[6])});
    }
  }
  return ref;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? "," : "", shape[i]);
  return s;
}

double sum_values(const OnnxTensor& t) {
  double sum = 0;
  const auto bytes = t.bytes();
  for (uint64_t i = 0; i < t.n_elements; ++i) {
    if (t.dtype == DType::F32) {
      float v;
      std::memcpy(&v, bytes.data() + i * 4, 4);  // raw_data is unaligned: memcpy, never a float* cast
      sum += v;
    } else if (t.dtype == DType::I64) {
      int64_t v;
      std::memcpy(&v, bytes.data() + i * 8, 8);
      sum += static_cast<double>(v);
    }
  }
  return sum;
}

class OnnxSileroTable : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxSileroTable, EveryTensorMatchesTheOnnxPackage) {
  const std::string model_name = GetParam();
  const auto file = read_file(fixture(model_name.c_str()));
  ASSERT_EQ(file.size(), 2327524u);  // SOURCES.md
  const Reference ref = load_reference((model_name + ".tensors.tsv").c_str());
  ASSERT_GT(ref.rows.size(), 30u);

  auto model = parse_onnx(file);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(cat(model->ir_version), ref.get("ir_version"));
  EXPECT_EQ(model->producer_name, ref.get("producer_name"));
  EXPECT_EQ(model->graph_name, ref.get("graph_name"));
  EXPECT_EQ(cat(model->node_count), ref.get("node_count"));
  EXPECT_EQ(cat(model->total_node_count), ref.get("total_node_count"));
  EXPECT_EQ(cat(model->subgraph_count), ref.get("subgraph_count"));
  EXPECT_EQ(cat(model->tensors.size()), ref.get("tensor_count"));
  EXPECT_TRUE(model->unsupported.empty());

  for (const ReferenceRow& row : ref.rows) {
    SCOPED_TRACE(row.unique_name);
    const OnnxTensor* t = model->find(row.unique_name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->unique_name, row.unique_name);
    EXPECT_EQ(t->tensor_name, row.tensor_name);
    EXPECT_EQ(onnx_data_type_name(t->onnx_data_type), row.dtype);
    EXPECT_EQ(shape_text(t->shape), row.shape);
    EXPECT_EQ(t->n_elements, row.n_elements);
    EXPECT_EQ(sha256_hex(t->bytes()).substr(0, 16), row.sha256_prefix);
    EXPECT_NEAR(sum_values(*t), row.sum, 1e-6 * (1 + std::fabs(row.sum)));  // numpy sums pairwise: tiny drift
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxSileroTable,
                         ::testing::Values("silero_vad_v5.1.onnx", "silero_vad_v6.2.onnx"));

TEST(OnnxSilero, WeightsOfBothSampleRatesAreReachableByScope) {
  const auto file = read_file(fixture("silero_vad_v5.1.onnx"));
  auto model = parse_onnx(file);
  ASSERT_TRUE(model.ok()) << model.message();

  // The 16 kHz branch has a 256-point STFT (258 = 2 * 129 basis rows), the 8 kHz one a 128-point STFT.
  const OnnxTensor* w16 = model->find_in_scope("If_0.then_branch", "encoder.0.reparam_conv.weight");
  const OnnxTensor* w8 = model->find_in_scope("If_0.else_branch", "encoder.0.reparam_conv.weight");
  ASSERT_NE(w16, nullptr);
  ASSERT_NE(w8, nullptr);
  EXPECT_EQ(w16->shape, (std::vector<int64_t>{128, 129, 3}));
  EXPECT_EQ(w8->shape, (std::vector<int64_t>{128, 65, 3}));
  EXPECT_EQ(w16->source, OnnxTensorSource::Constant);
  EXPECT_EQ(w16->unique_name, "If_0.then_branch/If_0_then_branch__Inline_0__encoder.0.reparam_conv.weight");

  // The bare TensorProto name is in both branches: find() refuses to guess, find_all() lists both.
  EXPECT_EQ(model->find("encoder.0.reparam_conv.weight"), nullptr);
  EXPECT_EQ(model->find_all("encoder.0.reparam_conv.weight").size(), 2u);
  // The graph's own value name is unique, so it finds the tensor too.
  EXPECT_EQ(model->find("If_0_then_branch__Inline_0__encoder.0.reparam_conv.weight"), w16);

  // raw_data is used in place: the bytes lie inside the file.
  const auto bytes = w16->bytes();
  EXPECT_TRUE(w16->from_file);
  EXPECT_GE(bytes.data(), file.data());
  EXPECT_LE(bytes.data() + bytes.size(), file.data() + file.size());
  EXPECT_EQ(bytes.data(), file.data() + w16->file_offset);

  // Values printed by numpy (onnx.numpy_helper.to_array) for decoder.rnn.bias_ih in the 16 kHz branch.
  const OnnxTensor* bias = model->find_in_scope("If_0.then_branch", "decoder.rnn.bias_ih");
  ASSERT_NE(bias, nullptr);
  ASSERT_EQ(bias->shape, (std::vector<int64_t>{512}));
  const std::pair<int, float> expected[] = {{0, -0.1524425894021988f},
                                            {1, -0.12193526327610016f},
                                            {255, 0.163714200258255f},
                                            {511, -0.005572659429162741f}};
  for (auto [index, value] : expected) {
    float v;
    std::memcpy(&v, bias->bytes().data() + index * 4, 4);
    EXPECT_EQ(v, value) << "index " << index;
  }

  // The sample-rate switch: Constant_0 in the main graph is int64 16000.
  const OnnxTensor* sr = model->find("Constant_0_output");
  ASSERT_NE(sr, nullptr);
  EXPECT_EQ(sr->scope, "");
  EXPECT_EQ(sr->dtype, DType::I64);
  EXPECT_TRUE(sr->shape.empty());
}

TEST(OnnxSilero, MetadataMatchesSourcesMd) {
  const auto file = read_file(fixture("silero_vad_v6.2.onnx"));
  auto model = parse_onnx(file);
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_EQ(model->opset_imports.size(), 1u);
  EXPECT_EQ(model->opset_imports[0].domain, "");
  EXPECT_EQ(model->opset_imports[0].version, 16);
  // SOURCES.md: inputs input [1, N] float32, state [2, 1, 128] float32, sr int64 scalar; outputs output,
  // stateN.
  ASSERT_EQ(model->inputs.size(), 3u);
  EXPECT_EQ(model->inputs[0].name, "input");
  EXPECT_EQ(model->inputs[0].elem_type, 1);
  EXPECT_EQ(model->inputs[1].name, "state");
  ASSERT_EQ(model->inputs[1].dims.size(), 3u);
  EXPECT_EQ(model->inputs[1].dims[0].value, 2);
  EXPECT_EQ(model->inputs[1].dims[1].value, -1);  // the file leaves the batch dim unnamed
  EXPECT_EQ(model->inputs[1].dims[2].value, 128);
  EXPECT_EQ(model->inputs[2].name, "sr");
  EXPECT_EQ(model->inputs[2].elem_type, 7);
  EXPECT_TRUE(model->inputs[2].has_shape);
  EXPECT_TRUE(model->inputs[2].dims.empty());
  ASSERT_EQ(model->outputs.size(), 2u);
  EXPECT_EQ(model->outputs[0].name, "output");
  EXPECT_EQ(model->outputs[1].name, "stateN");
  uint64_t if_count = 0, constant_count = 0;
  for (const auto& op : model->op_counts) {
    if (op.op_type == "If") if_count = op.count;
    if (op.op_type == "Constant") constant_count = op.count;
  }
  // Counted with the onnx package over the main graph and every subgraph.
  EXPECT_EQ(if_count, 25u);
  EXPECT_EQ(constant_count, 341u);
}

TEST(OnnxSilero, DescribeListsMetadataAndEveryTensor) {
  const auto file = read_file(fixture("silero_vad_v5.1.onnx"));
  auto d = describe_onnx(file);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->format, "onnx");
  auto entry = [&](std::string_view key) -> const MetadataEntry* {
    for (const auto& e : d->metadata)
      if (e.key == key) return &e;
    return nullptr;
  };
  ASSERT_NE(entry("onnx.producer_name"), nullptr);
  EXPECT_EQ(entry("onnx.producer_name")->json, "\"spox\"");
  ASSERT_NE(entry("onnx.opset_import"), nullptr);
  EXPECT_EQ(entry("onnx.opset_import")->json, "[{\"domain\":\"ai.onnx\",\"version\":16}]");
  ASSERT_NE(entry("onnx.graph.inputs"), nullptr);
  EXPECT_EQ(entry("onnx.graph.inputs")->text,
            "input: float32 [?, ?]; state: float32 [2, ?, 128]; sr: int64 []");
  ASSERT_NE(entry("onnx.op_types"), nullptr);
  EXPECT_NE(entry("onnx.op_types")->json.find("\"If\":25"), std::string::npos);
  EXPECT_EQ(d->tensors.size(), 341u);  // tests/data/silero_vad_v5.1.onnx.tensors.tsv, #tensor_count
  for (const TensorInfo& t : d->tensors) {
    if (t.data == nullptr) continue;  // decoded from typed fields
    EXPECT_EQ(t.data, file.data() + t.offset) << t.name;
    EXPECT_LE(t.offset + t.bytes, file.size()) << t.name;
  }
}

// ------------------------------------------------------------------ files written by the onnx package
// tools/onnx_fuzz_seeds.py writes the same random arrays twice with onnx.helper: once as raw_data
// (numpy_helper.from_array) and once in the typed fields (helper.make_tensor: float16 and int8 in int32_data,
// uint32 in uint64_data, ...). Decoding the typed fields must give exactly the raw bytes.
TEST(OnnxPackageFiles, TypedFieldsDecodeToTheRawBytes) {
  const std::string dir = std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/onnx/";
  const auto raw_file = read_file(dir + "raw_types.onnx");
  const auto typed_file = read_file(dir + "typed_types.onnx");
  auto raw = parse_onnx(raw_file);
  auto typed = parse_onnx(typed_file);
  ASSERT_TRUE(raw.ok()) << raw.message();
  ASSERT_TRUE(typed.ok()) << typed.message();
  ASSERT_EQ(raw->tensors.size(), 12u);
  ASSERT_EQ(typed->tensors.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    const OnnxTensor* r = raw->find(cat("raw", i));
    const OnnxTensor* t = typed->find(cat("typed", i));
    ASSERT_TRUE(r && t) << i;
    SCOPED_TRACE(onnx_data_type_name(r->onnx_data_type));
    EXPECT_TRUE(r->from_file);
    EXPECT_FALSE(t->from_file);
    EXPECT_EQ(r->dtype, t->dtype);
    EXPECT_EQ(r->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t->shape, r->shape);
    const auto rb = r->bytes(), tb = t->bytes();
    EXPECT_EQ(std::vector<uint8_t>(rb.begin(), rb.end()), std::vector<uint8_t>(tb.begin(), tb.end()));
  }
  EXPECT_EQ(raw->inputs[0].dims[0].param, "batch");
  ASSERT_EQ(raw->metadata_props.size(), 1u);
  EXPECT_EQ(raw->metadata_props[0].second, "v");
}

TEST(OnnxPackageFiles, ConstantFormsAndIfBranches) {
  const auto file = read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/fuzz/corpus/onnx/constants_if.onnx");
  auto m = parse_onnx(file);
  ASSERT_TRUE(m.ok()) << m.message();
  for (const char* name : {"c0", "c1", "c2", "c3", "c4", "if0.then_branch/w", "if0.else_branch/w"})
    EXPECT_NE(m->find(name), nullptr) << name;
  EXPECT_EQ(m->find("c2")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(m->find("c4")->dtype, DType::I64);
  // value_string has no sotto dtype: listed, not fatal.
  ASSERT_EQ(m->unsupported.size(), 1u);
  EXPECT_EQ(m->unsupported[0].unique_name, "c5");
}

// ------------------------------------------------------------------ damaged files
// Every outcome must be an error or a valid parse; the sanitizer builds catch any out-of-bounds read.
void expect_clean(std::span<const uint8_t> bytes) {
  auto model = parse_onnx(bytes);
  if (!model.ok()) {
    EXPECT_TRUE(model.message().starts_with("onnx: ")) << model.message();
    EXPECT_EQ(model.message().find('\n'), std::string::npos);
    return;
  }
  for (const OnnxTensor& t : model->tensors) {
    const auto b = t.bytes();
    EXPECT_EQ(b.size(), t.n_bytes);
    if (t.from_file && !b.empty()) {
      EXPECT_GE(b.data(), bytes.data());
      EXPECT_LE(b.data() + b.size(), bytes.data() + bytes.size());
    }
  }
}

TEST(OnnxDamaged, TruncatedFilesFailCleanly) {
  const auto file = read_file(fixture("silero_vad_v5.1.onnx"));
  ASSERT_FALSE(file.empty());
  std::mt19937_64 rng(std::random_device{}());
  std::vector<size_t> cuts = {0, 1, 2, 3, 5, 8, 13, 64, 100, 1000, file.size() - 1, file.size() - 2};
  for (int i = 0; i < 300; ++i) cuts.push_back(rng() % file.size());
  for (size_t cut : cuts) {
    SCOPED_TRACE(cut);
    auto model = parse_onnx(std::span<const uint8_t>(file.data(), cut));
    // Cutting the top-level message short always leaves a field that runs past the end (or no graph).
    EXPECT_FALSE(model.ok());
    expect_clean(std::span<const uint8_t>(file.data(), cut));
  }
}

TEST(OnnxDamaged, FlippedAndInflatedBytesFailCleanly) {
  const auto original = read_file(fixture("silero_vad_v6.2.onnx"));
  ASSERT_FALSE(original.empty());
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  // Mutations aimed at the structure (most weight bytes are opaque floats): the first 64 KiB, where tags and
  // lengths are dense, and anywhere in the file.
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> bytes = original;
    const size_t span = trial % 2 ? bytes.size() : 65536;
    const size_t at = rng() % span;
    switch (trial % 4) {
      case 0:
        bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;  // one bit
      case 1:
        bytes[at] = static_cast<uint8_t>(rng());
        break;  // one byte
      case 2:   // a varint inflated to 10 bytes
        for (size_t i = at; i < std::min(at + 9, bytes.size()); ++i) bytes[i] = 0xff;
        break;
      case 3:
        bytes.insert(bytes.begin() + static_cast<long>(at), {0xff, 0xff, 0xff, 0x0f});
        break;  // length
    }
    expect_clean(bytes);
  }
}

}  // namespace
}  // namespace sotto
