// Checks (and lets JS time) this build's quantized dot kernels, quant_dot_rows(), on fresh random data:
//   - against a float64 reference built from ggml-format blocks decoded by dequantize_row_ref() (an
//     independent scalar path: no SIMD, no block-scale shortcuts), within a float-rounding bound;
//   - a tile of tokens against each token alone, and a row range cut into odd pieces against the whole range,
//     bit for bit: every (row, token) output must have the same float summation order whichever pass shape
//     (rows per pass, tokens per tile, remainder rows) computed it, or the model's greedy tokens could differ
//     between a prompt and a decode step.
// web/worker.js's kernelCheck op drives it: create, run (timed by JS), check, destroy. Its attentionCheck op
// runs sotto_attention_check: this build's attention kernel against the scalar reference, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/quantize_ref.h"
#include "core/thread_pool.h"
#include "cpu/attention.h"
#include "cpu/linear.h"
#include "cpu/quant_dot.h"
#include "models/llm/sampler.h"  // Rng

namespace sotto {
namespace {

// Roughly normal values (sum of 4 uniforms), never all zero, so scales and signs vary per block.
float random_value(Rng& rng) {
  float sum = 0;
  for (int i = 0; i < 4; ++i) sum += rng.next_unit() - 0.5f;
  return sum;
}

struct KernelCheck {
  DType type = DType::F32;
  int rows = 0, cols = 0, tokens = 0;
  size_t row_bytes = 0, xq_stride = 0;
  std::vector<uint8_t> weights, xq;
  std::vector<float> y;
};

}  // namespace
}  // namespace sotto

using sotto::KernelCheck;

extern "C" {

// type: a ggml type id. Returns null for a type without a kernel, a bad shape (cols must be a multiple of
// the weight type's block, everything positive and at most 2^24 elements per matrix) or no memory.
__attribute__((export_name("sotto_kernel_check_create"))) KernelCheck* sotto_kernel_check_create(
    uint32_t ggml_type, int32_t rows, int32_t cols, int32_t tokens, uint32_t seed) {
  using namespace sotto;
  const Result<DType> type = dtype_from_ggml(ggml_type);
  if (!type.ok() || !linear_supported(*type) || !dtype_can_quantize(*type)) return nullptr;
  const int64_t block = dtype_info(*type).block_elems;
  if (rows <= 0 || cols <= 0 || tokens <= 0 || tokens > 64 || cols % block != 0 ||
      static_cast<int64_t>(rows) * cols > (int64_t{1} << 24))
    return nullptr;
  auto* c = new KernelCheck;
  c->type = *type;
  c->rows = rows;
  c->cols = cols;
  c->tokens = tokens;
  c->row_bytes = static_cast<size_t>(cols / block) * dtype_info(*type).block_bytes;
  c->xq_stride = activation_bytes(*type, cols);
  c->weights.resize(c->row_bytes * static_cast<size_t>(rows));
  c->xq.resize(c->xq_stride * static_cast<size_t>(tokens));
  c->y.resize(static_cast<size_t>(rows) * tokens);
  Rng rng(seed);
  std::vector<float> values(static_cast<size_t>(cols));
  // Every 5th row and every 3rd token 2^-14 times smaller: their f16 block scales (~1e-6) are subnormal, which
  // the kernels' own f16 -> f32 conversions (f16, f16x4) must decode exactly as the reference does.
  constexpr float kSubnormalScales = 0x1p-14f;
  for (int r = 0; r < rows; ++r) {
    const float size = r % 5 == 2 ? kSubnormalScales : 1.0f;
    for (float& v : values) v = random_value(rng) * size;
    quantize_row_ref(*type, values.data(), c->weights.data() + c->row_bytes * static_cast<size_t>(r), cols);
  }
  for (int t = 0; t < tokens; ++t) {
    const float size = t % 3 == 1 ? 4.0f * kSubnormalScales : 4.0f;
    for (float& v : values) v = random_value(rng) * size;
    quantize_activations(*type, values.data(), cols, c->xq.data() + c->xq_stride * static_cast<size_t>(t));
  }
  return c;
}

// One call of the kernel over every row and token, on the calling thread (what JS times).
__attribute__((export_name("sotto_kernel_check_run"))) void sotto_kernel_check_run(KernelCheck* c) {
  sotto::quant_dot_rows(c->type)(c->weights.data(), c->cols, c->xq.data(), c->tokens, c->xq_stride,
                                 c->y.data(), c->rows, 0, c->rows);
}

// out (5 f64): [largest |kernel - reference| / bound, over all outputs of the row kernel and of the prompt tile
// kernel where there is one (passes when <= 1), tile equals each
// token alone (1/0), odd row pieces equal the whole range (1/0), the bound's relative size, a digest of the row
// kernel's output bits (FNV-1a, 32 bits): the same seed in two builds gives the same digest exactly when every
// output has the same bits].
__attribute__((export_name("sotto_kernel_check_verify"))) void sotto_kernel_check_verify(KernelCheck* c,
                                                                                         double* out) {
  using namespace sotto;
  const QuantDotRowsFn fn = quant_dot_rows(c->type);
  const size_t n_out = c->y.size();
  std::vector<float> whole(n_out), single(n_out), pieces(n_out);
  fn(c->weights.data(), c->cols, c->xq.data(), c->tokens, c->xq_stride, whole.data(), c->rows, 0, c->rows);
  for (int t = 0; t < c->tokens; ++t)
    fn(c->weights.data(), c->cols, c->xq.data() + c->xq_stride * static_cast<size_t>(t), 1, c->xq_stride,
       single.data() + static_cast<size_t>(t) * c->rows, c->rows, 0, c->rows);
  // Pieces of 1, 5, 3, 6, ... rows: they start off every multiple of the kernels' rows per pass.
  for (int begin = 0, step = 1; begin < c->rows; begin += step, step = step % 7 + 4) {
    const int end = begin + step < c->rows ? begin + step : c->rows;
    fn(c->weights.data(), c->cols, c->xq.data(), c->tokens, c->xq_stride, pieces.data(), c->rows, begin, end);
  }
  out[1] = std::memcmp(whole.data(), single.data(), n_out * sizeof(float)) == 0 ? 1 : 0;
  out[2] = std::memcmp(whole.data(), pieces.data(), n_out * sizeof(float)) == 0 ? 1 : 0;
  // The prompt tile kernel, where this build has one for the type (linear() takes it from 8 tokens on): its
  // float order is ggml's scalar one, not the row kernels', so it is held to the reference bound below, not
  // to their bits.
  const DType act = activation_type(c->type);
  std::vector<float> tiled;
  if (const QuantDotTileFn tile_fn = quant_dot_tile(c->type)) {
    tiled.resize(n_out);
    std::vector<TileVec> tile(tile_vecs(act, c->cols));
    for (int t0 = 0; t0 < c->tokens; t0 += kTileTokens) {
      const int n = std::min(kTileTokens, c->tokens - t0);
      tile_prepare(act, c->xq.data() + c->xq_stride * static_cast<size_t>(t0), c->xq_stride, n, c->cols,
                   tile.data());
      tile_fn(c->weights.data(), c->cols, tile.data(), n, tiled.data() + static_cast<size_t>(t0) * c->rows,
              c->rows, 0, c->rows);
    }
  }

  // Reference: the weights and the quantized activations decoded by the scalar reference, dotted in f64.
  // Each per-block term of the kernel is an exact integer times d_w * d_x (one rounding), added into f32
  // lanes (one or two roundings per block) that are then summed (depth <= log2 of the lane count), so every output is
  // within (2 n_blocks + 8) * 2^-24 * sum |w_i x_i| of the exact value; the bound doubles that.
  const int64_t n_blocks = c->cols / dtype_info(c->type).block_elems;
  const double bound_factor = 2.0 * static_cast<double>(2 * n_blocks + 8) * 0x1p-24;
  std::vector<float> w(static_cast<size_t>(c->cols)), x(static_cast<size_t>(c->cols) * c->tokens);
  for (int t = 0; t < c->tokens; ++t)
    dequantize_row_ref(act, c->xq.data() + c->xq_stride * static_cast<size_t>(t),
                       x.data() + static_cast<size_t>(t) * c->cols, c->cols);
  double worst = 0;
  for (int r = 0; r < c->rows; ++r) {
    dequantize_row_ref(c->type, c->weights.data() + c->row_bytes * static_cast<size_t>(r), w.data(), c->cols);
    for (int t = 0; t < c->tokens; ++t) {
      const float* xt = x.data() + static_cast<size_t>(t) * c->cols;
      double exact = 0, magnitude = 0;
      for (int i = 0; i < c->cols; ++i) {
        const double p = static_cast<double>(w[i]) * xt[i];
        exact += p;
        magnitude += std::fabs(p);
      }
      const double bound = bound_factor * magnitude + 1e-30;
      const size_t i = static_cast<size_t>(t) * c->rows + r;
      for (const std::vector<float>* got : {&whole, &tiled}) {
        if (got->empty()) continue;
        const double err = std::fabs(static_cast<double>((*got)[i]) - exact);
        if (!(err / bound <= worst)) worst = err / bound;  // NaN propagates as a failure
      }
    }
  }
  out[0] = worst;
  out[3] = bound_factor;
  uint32_t digest = 2166136261u;
  for (const float v : whole) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int k = 0; k < 4; ++k) digest = (digest ^ ((bits >> (8 * k)) & 0xffu)) * 16777619u;
  }
  out[4] = digest;
}

// Attention (cpu/attention.h) on fresh random q, K and V: attention_f16 as the model runs it (this build's
// kernel, on one thread) against attention_f16_ref, bit for bit, for n_query tokens after pos0 cached
// positions. out (3 f64): [outputs that differ in any bit, largest |difference|, 1 if the relaxed build's
// fused multiply-add kernel ran]. Returns 0, or -1 for a bad shape (head_dim_v <= 256, at most 2^22 cache
// values).
__attribute__((export_name("sotto_attention_check"))) int32_t
sotto_attention_check(int32_t n_query, int32_t pos0, int32_t n_head, int32_t n_head_kv, int32_t head_dim_k,
                      int32_t head_dim_v, uint32_t seed, double* out) {
  using namespace sotto;
  if (n_query < 1 || pos0 < 0 || n_head < 1 || n_head_kv < 1 || n_head % n_head_kv != 0 || head_dim_k < 1 ||
      head_dim_v < 1 || head_dim_v > 256 ||
      static_cast<int64_t>(pos0 + n_query) * n_head_kv * (head_dim_k + head_dim_v) > (int64_t{1} << 22))
    return -1;
  Rng rng(seed);
  const int k_row = n_head_kv * head_dim_k, v_row = n_head_kv * head_dim_v, n_pos = pos0 + n_query;
  std::vector<float> q(static_cast<size_t>(n_query) * n_head * head_dim_k);
  std::vector<uint16_t> k(static_cast<size_t>(n_pos) * k_row), v(static_cast<size_t>(n_pos) * v_row);
  for (float& x : q) x = random_value(rng) * 2.0f;  // scores of a few units: softmax neither flat nor one-hot
  for (uint16_t& x : k) x = f32_to_f16(random_value(rng) * 2.0f);
  for (uint16_t& x : v) x = f32_to_f16(random_value(rng) * 2.0f);
  std::vector<float> got(static_cast<size_t>(n_query) * n_head * head_dim_v), want(got.size());
  AttentionArgs args{.q = q.data(),
                     .k = k.data(),
                     .v = v.data(),
                     .k_row = k_row,
                     .v_row = v_row,
                     .n_query = n_query,
                     .pos0 = pos0,
                     .n_head = n_head,
                     .n_head_kv = n_head_kv,
                     .head_dim_k = head_dim_k,
                     .head_dim_v = head_dim_v,
                     .scale = 1.0f / std::sqrt(static_cast<float>(head_dim_k)),
                     .out = got.data()};
  ThreadPool pool(1);
  attention_f16(pool, args);
  args.out = want.data();
  attention_f16_ref(args);
  double differ = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) differ += 1;
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  out[0] = differ;
  out[1] = worst;
  out[2] = attention_relaxed_madd_fused() ? 1 : 0;
  return 0;
}

__attribute__((export_name("sotto_kernel_check_destroy"))) void sotto_kernel_check_destroy(KernelCheck* c) {
  delete c;
}

}  // extern "C"
