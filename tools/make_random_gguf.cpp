// sotto_make_random_gguf: writes benchmark model files with the exact tensor shapes, tensor types and
// metadata of Qwen2.5-0.5B-Instruct (arch qwen2) but seeded random weights, so speed can be measured against
// llama.cpp on a realistic model without downloading one. The tokenizer metadata is copied from the shared
// fixture ggml-vocab-qwen2.gguf (the real Qwen2 vocabulary, merges and ChatML template).
//
//   sotto_make_random_gguf [--type q4_0|q8_0|q4_k_m|all] [--out DIR] [--seed N] [--threads T] [--vocab FILE]
//
// Writes DIR/qwen2.5-0.5b-random-<type>.gguf (DIR defaults to build/models). The same seed gives the same
// bytes whatever the thread count: every row of every tensor has its own generator, seeded from
// (seed, tensor name, row).
//
// Tensor types follow llama-quantize's choices (llama_tensor_get_type in llama.cpp's src/llama-quant.cpp):
//   - the tied token_embd is quantized as the output table; 896 is not a multiple of the block of the file's
//     type for K-quants (256), and Q6_K would be chosen otherwise, which also cannot hold 896-wide rows, so it
//     is Q8_0 in every variant;
//   - Q4_K_M: attn_v and ffn_down get Q6_K on the layers use_more_bits() picks, others Q4_K; then every
//     tensor whose rows (ne0) are not a multiple of 256 falls back: Q4_K -> Q5_0, Q6_K -> Q8_0. Only
//     ffn_down (ne0 = 4864 = 19 x 256) keeps K-quants;
//   - Q4_0 / Q8_0: every other 2-D weight in the file's type; 1-D norms and biases stay F32.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/quantize_ref.h"
#include "io/file.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace {

using namespace sotto;

// Qwen2.5-0.5B-Instruct's hyperparameters (its config.json / GGUF metadata).
constexpr int64_t kVocab = 151936;
constexpr int64_t kEmbd = 896;
constexpr int kLayers = 24;
constexpr int64_t kHeads = 14;
constexpr int64_t kHeadsKv = 2;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kFfn = 4864;
constexpr uint32_t kContext = 32768;
constexpr float kRopeBase = 1000000.0f;
constexpr float kRmsEps = 1e-6f;
constexpr uint32_t kImEndId = 151645;  // <|im_end|>: the instruct model's end of turn

// Weight scale of a trained model of this size: keeps activations in a sane range through 24 layers.
constexpr float kWeightStd = 0.02f;

enum class Variant { Q4_0, Q8_0, Q4_K_M };

struct VariantInfo {
  Variant variant;
  std::string_view name;
  uint32_t file_type;  // general.file_type: LLAMA_FTYPE_MOSTLY_Q4_0 = 2, Q8_0 = 7, Q4_K_M = 15
};
constexpr VariantInfo kVariants[] = {
    {Variant::Q4_0, "q4_0", 2},
    {Variant::Q8_0, "q8_0", 7},
    {Variant::Q4_K_M, "q4_k_m", 15},
};

// llama.cpp's use_more_bits(): the first and last eighth of the layers and every third one in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama-quantize's fallback for rows that are not a whole number of 256-element super-blocks.
DType fallback_for_width(DType t, int64_t ne0) {
  if (ne0 % 256 == 0) return t;
  if (t == DType::Q4_K) return DType::Q5_0;
  if (t == DType::Q6_K) return DType::Q8_0;
  return t;
}

// Type of a 2-D weight; `kind` is the tensor name without "blk.N." and ".weight".
DType weight_type(Variant v, std::string_view kind, int i_layer, int64_t ne0) {
  if (kind == "token_embd") return DType::Q8_0;  // tied output table, see the file comment
  switch (v) {
    case Variant::Q4_0:
      return DType::Q4_0;
    case Variant::Q8_0:
      return DType::Q8_0;
    case Variant::Q4_K_M: {
      DType t = DType::Q4_K;
      if ((kind == "attn_v" || kind == "ffn_down") && use_more_bits(i_layer, kLayers)) t = DType::Q6_K;
      return fallback_for_width(t, ne0);
    }
  }
  return DType::F32;
}

// splitmix64: seeds each row's generator; also a fine generator by itself for this purpose.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// Approximately normal values with mean `mean` and standard deviation `std`: the sum of four 16-bit uniforms
// (Irwin-Hall), which is cheap and bounded (|z| <= 3.46) so no weight is an outlier.
void fill_normalish(uint64_t row_seed, float mean, float std_dev, float* out, int64_t n) {
  uint64_t state = row_seed;
  const float scale = std_dev * std::sqrt(3.0f) / 65536.0f;  // the sum of 4 U(0,1) has variance 1/3
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(state);
    const float sum =
        static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
    out[i] = mean + (sum - 2.0f * 65535.0f) * scale;
  }
}

struct TensorPlan {
  std::string name;
  DType dtype;
  std::vector<int64_t> ne;  // GGUF order
  float mean;
  float std_dev;
};

std::vector<TensorPlan> plan_tensors(Variant v) {
  std::vector<TensorPlan> plans;
  auto weight = [&](std::string name, std::string_view kind, int i_layer, int64_t ne0, int64_t ne1) {
    plans.push_back({std::move(name), weight_type(v, kind, i_layer, ne0), {ne0, ne1}, 0.0f, kWeightStd});
  };
  auto vec = [&](std::string name, int64_t n, float mean, float std_dev) {
    plans.push_back({std::move(name), DType::F32, {n}, mean, std_dev});
  };
  weight("token_embd.weight", "token_embd", 0, kEmbd, kVocab);
  const int64_t q_width = kHeads * kHeadDim, kv_width = kHeadsKv * kHeadDim;
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    vec(p + "attn_norm.weight", kEmbd, 1.0f, 0.05f);
    weight(p + "attn_q.weight", "attn_q", i, kEmbd, q_width);
    vec(p + "attn_q.bias", q_width, 0.0f, kWeightStd);
    weight(p + "attn_k.weight", "attn_k", i, kEmbd, kv_width);
    vec(p + "attn_k.bias", kv_width, 0.0f, kWeightStd);
    weight(p + "attn_v.weight", "attn_v", i, kEmbd, kv_width);
    vec(p + "attn_v.bias", kv_width, 0.0f, kWeightStd);
    weight(p + "attn_output.weight", "attn_output", i, q_width, kEmbd);
    vec(p + "ffn_norm.weight", kEmbd, 1.0f, 0.05f);
    weight(p + "ffn_gate.weight", "ffn_gate", i, kEmbd, kFfn);
    weight(p + "ffn_up.weight", "ffn_up", i, kEmbd, kFfn);
    weight(p + "ffn_down.weight", "ffn_down", i, kFfn, kEmbd);
  }
  vec("output_norm.weight", kEmbd, 1.0f, 0.05f);
  return plans;
}

// Random rows quantized to the plan's type; rows are split between threads.
std::vector<uint8_t> make_tensor_data(const TensorPlan& plan, uint64_t seed, int n_threads) {
  const int64_t cols = plan.ne[0];
  const int64_t rows = plan.ne.size() > 1 ? plan.ne[1] : 1;
  const uint64_t row_bytes = *dtype_bytes(plan.dtype, static_cast<uint64_t>(cols));
  std::vector<uint8_t> data(row_bytes * static_cast<uint64_t>(rows));
  const uint64_t name_hash = fnv1a(plan.name) ^ (seed * 0x9e3779b97f4a7c15ull);
  auto work = [&](int64_t row_begin, int64_t row_end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = row_begin; r < row_end; ++r) {
      uint64_t s = name_hash + static_cast<uint64_t>(r);
      fill_normalish(splitmix64(s), plan.mean, plan.std_dev, row.data(), cols);
      uint8_t* dst = data.data() + row_bytes * static_cast<uint64_t>(r);
      if (plan.dtype == DType::F32) {
        std::memcpy(dst, row.data(), row_bytes);
      } else {
        quantize_row_ref(plan.dtype, row.data(), dst, cols);
      }
    }
  };
  const int64_t n = std::min<int64_t>(n_threads, std::max<int64_t>(1, rows / 64));
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < n; ++t) threads.emplace_back(work, rows * t / n, rows * (t + 1) / n);
  work(0, rows / n);
  for (auto& th : threads) th.join();
  return data;
}

// Copies every tokenizer.* key of the vocabulary file, except the ones the instruct model sets itself.
Status copy_tokenizer(const GgufFile& vocab, GgufWriter& w) {
  for (const GgufKeyValue& kv : vocab.metadata) {
    const std::string_view key = kv.key;
    if (!key.starts_with("tokenizer.") || key == "tokenizer.ggml.eos_token_id") continue;
    const GgufValue& v = kv.value;
    switch (v.type) {
      case GgufType::String:
        w.add_string(key, v.str);
        break;
      case GgufType::U32:
        w.add_u32(key, static_cast<uint32_t>(v.as_u64()));
        break;
      case GgufType::I32:
        w.add_i32(key, static_cast<int32_t>(v.as_i64()));
        break;
      case GgufType::Bool:
        w.add_bool(key, v.as_u64() != 0);
        break;
      case GgufType::Array:
        if (v.array_type == GgufType::String) {
          std::vector<std::string> strings(v.array_strings.begin(), v.array_strings.end());
          w.add_string_array(key, strings);
        } else {
          w.add_array(key, v.array_type, v.array_count, v.raw);
        }
        break;
      default:
        return error("make_random_gguf: key '", key, "' has type ", v.type_name(), ", which is not copied");
    }
  }
  w.add_u32("tokenizer.ggml.eos_token_id", kImEndId);
  if (!vocab.find("tokenizer.ggml.add_bos_token")) w.add_bool("tokenizer.ggml.add_bos_token", false);
  return {};
}

Status write_variant(const VariantInfo& info, const GgufFile& vocab, const std::string& path, uint64_t seed,
                     int n_threads) {
  GgufWriter w;
  w.add_string("general.architecture", "qwen2");
  w.add_string("general.type", "model");
  w.add_string("general.name", cat("Qwen2.5 0.5B Instruct (random weights, seed ", seed, ")"));
  w.add_u32("qwen2.block_count", kLayers);
  w.add_u32("qwen2.context_length", kContext);
  w.add_u32("qwen2.embedding_length", static_cast<uint32_t>(kEmbd));
  w.add_u32("qwen2.feed_forward_length", static_cast<uint32_t>(kFfn));
  w.add_u32("qwen2.attention.head_count", static_cast<uint32_t>(kHeads));
  w.add_u32("qwen2.attention.head_count_kv", static_cast<uint32_t>(kHeadsKv));
  w.add_f32("qwen2.rope.freq_base", kRopeBase);
  w.add_f32("qwen2.attention.layer_norm_rms_epsilon", kRmsEps);
  w.add_u32("general.file_type", info.file_type);
  SOTTO_TRY(copy_tokenizer(vocab, w));
  w.add_u32("general.quantization_version", 2);

  for (const TensorPlan& plan : plan_tensors(info.variant)) {
    const std::vector<uint8_t> data = make_tensor_data(plan, seed, n_threads);
    SOTTO_TRY(w.add_tensor(plan.name, plan.dtype, plan.ne, data));
  }
  const std::vector<uint8_t> bytes = w.finish();
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return error("make_random_gguf: cannot create '", tmp, "'");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) return error("make_random_gguf: writing '", tmp, "' failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return error("make_random_gguf: cannot rename '", tmp, "' to '", path, "'");
  return {};
}

int usage(const char* message) {
  std::fprintf(
      stderr,
      "make_random_gguf: %s\nusage: sotto_make_random_gguf [--type q4_0|q8_0|q4_k_m|all] [--out DIR] "
      "[--seed N] [--threads T] [--vocab FILE]\n",
      message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string type = "all", out_dir = "build/models";
  std::string vocab_path = std::string(SOTTO_FIXTURES_DIR) + "/tokenizer/ggml-vocab-qwen2.gguf";
  uint64_t seed = 1;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) return usage("every option needs a value");
    const char* v = argv[++i];
    if (a == "--type") {
      type = v;
    } else if (a == "--out") {
      out_dir = v;
    } else if (a == "--vocab") {
      vocab_path = v;
    } else if (a == "--seed") {
      seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--threads") {
      n_threads = std::clamp(std::atoi(v), 1, 256);
    } else {
      return usage("unknown option");
    }
  }
  auto vocab_file = MappedFile::open(vocab_path);
  if (!vocab_file) return std::fprintf(stderr, "%s\n", vocab_file.message().c_str()), 1;
  auto vocab = parse_gguf(vocab_file->bytes());
  if (!vocab) return std::fprintf(stderr, "%s: %s\n", vocab_path.c_str(), vocab.message().c_str()), 1;
  if (std::system(("mkdir -p '" + out_dir + "'").c_str()) != 0)
    return usage("cannot create the --out directory");

  bool any = false;
  for (const VariantInfo& info : kVariants) {
    if (type != "all" && type != info.name) continue;
    any = true;
    const std::string path = cat(out_dir, "/qwen2.5-0.5b-random-", info.name, ".gguf");
    const auto t0 = std::chrono::steady_clock::now();
    if (Status s = write_variant(info, *vocab, path, seed, n_threads); !s) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s (%.1f s)\n", path.c_str(), seconds);
  }
  if (!any) return usage("--type must be q4_0, q8_0, q4_k_m or all");
  return 0;
}
