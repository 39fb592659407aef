// nn::conv1d_integer_dynamic_quantized_bias (see nn/ops.h): ONNX Runtime's quantize_dynamic puts a conv's float
// bias into the int32 accumulator as floor(b / (x_scale * w_scale)) steps (Div, Floor, Cast int32, Add before the
// output scale), so the bias it adds is b rounded DOWN to a multiple of the output scale. Each such conv is up to
// one output step off a float bias; the next layer's dynamic quantization turns that into whole steps (Kokoro's
// decoder: 1.8 % relative RMS with a float bias, bit-exact with this one).
//
// Kokoro's decoder and generator spend most of their time here, so the stride-1 (any dilation) and dilation-1
// (any stride) convs skip the unrolled-input copy: x is quantized once, straight into int16 rows of time
// ([T, Cin], zero point subtracted, padding rows 0), and the weight is kept as [Cout, K, Cin]. Then the K
// taps of output t read rows t*stride .. t*stride + K - 1 of that array: one contiguous run of K*Cin values,
// so the product is one igemm_nt whose B rows overlap (ldb = stride * Cin). A dilation d > 1 splits the
// outputs by t mod d into d such products over every d-th row. The int32 sums are scaled into the output in
// one pass. Exact integer arithmetic: the same values as ref::conv1d_integer_dynamic.
//
// On a CPU with AMX-INT8 (Sapphire Rapids and later) a stride-1 conv instead lays the input out once as quads
// of channels and runs every tap and dilation as strided tile loads of it (conv_integer_amx_avx2.cpp): about
// 2x the VNNI product's multiply-adds per second, Kokoro's pass 0.84x the time (bench/results/
// 2026-12-06-kokoro-native-amx.md). Otherwise, with AVX-512 VNNI, a stride-1 conv reads the same quads with 16
// steps of time in each vector and one output channel's 4 weights broadcast (cpu::iconv_u8s8_quads_vnni: no lane
// sums; Kokoro's paragraph 0.87x the time of the product over rows of time on a Zen 5, bench/results/
// 2026-12-07-kokoro-zen5.md); other strides take VNNI over rows of time, and CPUs without it the int16 product.
//
// Without VNNI (wasm; AVX2 natively) a stride-1 conv over an even Cin keeps those rows pair-major instead
// ([Cin / 2][rows][2]: two channels' steps interleaved), so the product runs with time in the vector lanes
// (cpu::iconv_pairs: each accumulator is L outputs, no lane sums; wasm, Kokoro's generator 0.84x the CPU time
// of the dot-product form over rows of time, bench/results/2026-12-05-kokoro-wasm.md).
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace cpu {
// conv_integer_avx2.cpp: the same as the portable loops below, 8 lanes at a time, and the VNNI products (rows
// of time against rows of weights; stride 1: 16 steps of time a vector, on the input quads).
void min_max_avx2(const float* x, int64_t n, float& lo, float& hi);
void quantize_i16_avx2(const float* x, int64_t n, float scale, int32_t zero_point, int16_t* out);
void igemm_u8s8_nt_vnni(int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda, const uint8_t* B,
                        int64_t ldb, int32_t* C, int64_t ldc);
void time_rows_u8_avx2(const int16_t* xq, int64_t cin, int64_t length, int64_t padding, int32_t zp,
                       uint8_t* xt);
void iconv_u8s8_quads_vnni(int64_t M, int64_t t_begin, int64_t t_end, int64_t kernel, int64_t dilation,
                           int64_t quads, const uint32_t* w, const uint8_t* q, int64_t qs, int32_t* acc,
                           int64_t ldc);
// conv_integer_amx_avx2.cpp: the input quads (read by the AMX and the VNNI stride-1 products) and the product
// on AMX tiles.
void input_quads_avx2(const int16_t* xq, int64_t cin, int64_t c4_begin, int64_t c4_end, int64_t length,
                      int64_t padding, int32_t zp, int64_t qs, uint8_t* q);
void iconv_u8s8_amx(int64_t M, int64_t t_begin, int64_t t_end, int64_t kernel, int64_t dilation, int64_t cin,
                    const int8_t* w, const uint8_t* q, int64_t qs, int32_t* acc, int64_t ldc);
// conv_integer_wasm.cpp: the same loops in SIMD128.
void min_max_wasm(const float* x, int64_t n, float& lo, float& hi);
void quantize_i16_wasm(const float* x, int64_t n, float scale, int32_t zero_point, int16_t* out);
void time_rows_i16_wasm(const int16_t* xq, int64_t cin, int64_t length, int64_t padding, int16_t* xt);

namespace {
std::atomic<bool> g_allow_vnni{true};
std::atomic<bool> g_allow_amx{true};
}  // namespace

// Tests: turn the VNNI product off (false) to check the int16 one on a CPU that has VNNI.
void conv_integer_allow_vnni(bool allow) {
  g_allow_vnni.store(allow, std::memory_order_relaxed);
}

// Tests and benchmarks: turn the AMX product off (false) to check or time the VNNI one on a CPU that has AMX.
void conv_integer_allow_amx(bool allow) {
  g_allow_amx.store(allow, std::memory_order_relaxed);
}

bool conv_integer_use_amx() {
#if defined(__x86_64__) && !defined(__wasm__)
  static const bool env_off = std::getenv("SOTTO_NO_AMX") != nullptr;  // benchmarks: time the VNNI product
  return g_allow_amx.load(std::memory_order_relaxed) && !env_off && cpu_features().amx_int8;
#else
  return false;
#endif
}

bool conv_integer_use_vnni() {
#if defined(__x86_64__) && !defined(__wasm__)
  return g_allow_vnni.load(std::memory_order_relaxed) && cpu_use_avx2() && cpu_features().avx512_vnni;
#else
  return false;
#endif
}

// DynamicQuantizeLinear's range (min over x and 0, max over x and 0).
void min_max(const float* x, int64_t n, float& lo, float& hi) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return min_max_avx2(x, n, lo, hi);
#endif
#if defined(__wasm_simd128__)
  return min_max_wasm(x, n, lo, hi);
#endif
  lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
}

// out[i] = quantize_u8(x[i]) - zero_point (ONNX Runtime's q = saturate(round_half_even(x / scale) + zp)).
void quantize_i16(const float* x, int64_t n, const QuantParams& q, int16_t* out) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return quantize_i16_avx2(x, n, q.scale, q.zero_point, out);
#endif
#if defined(__wasm_simd128__)
  return quantize_i16_wasm(x, n, q.scale, q.zero_point, out);
#endif
  const float zp = static_cast<float>(q.zero_point);
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::clamp(__builtin_roundevenf(x[i] / q.scale) + zp, 0.0f, 255.0f);
    out[i] = static_cast<int16_t>(static_cast<int32_t>(v) - q.zero_point);
  }
}
}  // namespace cpu

namespace {

constexpr uint32_t kDerivedInt16TapMajor = 5;     // a conv weight [Cout, Cin, K] as int16 [Cout, K, Cin] - zp
constexpr uint32_t kDerivedInt8TapMajor = 6;      // the same as int8 (when every w - zp fits), for VNNI
constexpr uint32_t kDerivedRowSums = 7;           // int32 [Cout]: sum of each row of the int8 layout
constexpr uint32_t kDerivedTapPairs = 12;         // int16 [Cout, leaves]: tap_pair_weights
constexpr uint32_t kDerivedTapPairsWrapped = 13;  // the same at tap_pair_depth_wrapped's depth
#if defined(__x86_64__) && !defined(__wasm__)
// The int8 weights as AMX's tile loads read them (conv_integer_amx_avx2.cpp), Cin rounded up to 64 by zeros.
constexpr uint32_t kDerivedInt8AmxTiles = 15;
// The int8 weights as words of 4 input channels [Cout][K][Cin / 4 rounded up] (iconv_u8s8_quads_vnni).
constexpr uint32_t kDerivedInt8VnniQuads = 16;
#endif

int64_t out_length(int64_t length, const Conv1dOptions& o, int64_t kernel) {
  const int64_t pad_end = o.padding_end < 0 ? o.padding : o.padding_end;
  return (length + o.padding + pad_end - o.dilation * (kernel - 1) - 1) / o.stride + 1;
}

// The bias as the graph adds it: floor(b / step) * step.
std::vector<float> floored_bias(const Tensor& b, float step) {
  std::vector<float> out(static_cast<size_t>(b.defined() ? b.elements() : 0));
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::floor(b.f32()[i] / step) * step;
  return out;
}

// Scratch from the context's storage pool: a repeated pass reuses the same buffers (the rows of a generator conv
// are MBs, and fresh pages cost more to fault in than the product takes). `keep` holds it for the call.
template <class T>
T* scratch(Context& ctx, Tensor& keep, int64_t n, DType dtype) {
  keep = ctx.empty({std::max<int64_t>(n, 1)}, dtype);
  return keep.data<T>();
}

int32_t weight_at(const Tensor& w, int64_t i) {
  const uint8_t raw = w.data<uint8_t>()[i];
  return (w.dtype() == DType::I8 ? static_cast<int8_t>(raw) : static_cast<int32_t>(raw)) -
         w.quant().zero_point;
}

// The weight [Cout, Cin, K] as [Cout, K, Cin] of T with its zero point subtracted; false when a value does
// not fit T.
template <class T>
bool tap_major(const Tensor& w, T* out) {
  const int64_t cout = w.dim(0), cin = w.dim(1), kernel = w.dim(2);
  for (int64_t oc = 0; oc < cout; ++oc)
    for (int64_t i = 0; i < cin; ++i)
      for (int64_t k = 0; k < kernel; ++k) {
        const int32_t v = weight_at(w, (oc * cin + i) * kernel + k);
        if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
        out[(oc * kernel + k) * cin + i] = static_cast<T>(v);
      }
  return true;
}

// Quantized x [Cin, T] (zero point subtracted) scattered into rows of time: padded row P holds x[:, P - pad]
// (+ add), other rows `fill`.
template <class T>
void time_rows(const int16_t* xq, int64_t cin, int64_t length, int64_t padding, int64_t n_rows, T fill,
               int32_t add, T* xt) {
  std::fill(xt, xt + n_rows * cin, fill);
  // Tiles of 16 channels x 64 steps: 16 sequential read streams, 16 adjacent writes per step.
  constexpr int64_t kSteps = 64, kChannels = 16;
  for (int64_t t0 = 0; t0 < length; t0 += kSteps) {
    const int64_t t1 = std::min(length, t0 + kSteps);
    for (int64_t i0 = 0; i0 < cin; i0 += kChannels) {
      const int64_t i1 = std::min(cin, i0 + kChannels);
      for (int64_t t = t0; t < t1; ++t) {
        T* dst = xt + (padding + t) * cin;
        for (int64_t i = i0; i < i1; ++i) dst[i] = static_cast<T>(xq[i * length + t] + add);
      }
    }
  }
}

// Exact tap pairs (Winograd's F(2,2) on integers) for a stride-1 product over rows of time G: y[u] =
// sum_k W_k . G[u + k] (K taps of Cin). For the outputs u = 2q, 2q + 1 and the taps 2j, 2j + 1 (a zero tap
// W_K when K is odd), with a = G[u+2j], b = G[u+2j+1], c = G[u+2j+2]:
//   W_2j a + W_2j+1 b = W_2j (a - b) + (W_2j + W_2j+1) b,   W_2j b + W_2j+1 c = (W_2j + W_2j+1) b - W_2j+1 (b - c)
// so three products of ceil(K/2), ceil(K/2) and floor(K/2) taps over Q = ceil(n/2) outputs give both
// outputs. Each reads rows of E[w] = G[2w] - G[2w+1], O[w] = G[2w+1] or F[w] = G[2w+1] - G[2w+2]: again a
// stride-1 product over rows of time, so the same split applies to each (depth 2: 26 of 44 multiply-adds
// for Kokoro's k=11 convs, 17 of 28 for k=7, 7 of 12 for k=3; depth 3, where the sums stay in range: 43 of
// 88 for k=11 and 25 of 56 for k=7 at 128 channels, the generator's last stage; the int16 product already
// runs near the multiply-add instruction's rate, so fewer multiply-adds is what remains). Rows past G's end read
// as zero: they meet only a zero tap or an output past n. Integers throughout: at depth d values and weights
// are within 255 * 2^d (int16), and sums within 2 taps Cin (255 * 2^d)^2, which tap_pair_depth keeps under
// 2^31, so the result is the direct product's, exactly.
//
// On pair-major rows (conv_pairs, split_plan) the split goes on until one tap is left (depth 4 for k=11: 35 of
// 88 multiply-adds instead of depth 3's 43, and 256 channels' k=11 from depth 2) without that bound: the int16
// values stay exact (within 255 * 2^4), and every later step is an add, subtract or multiply in int32 that the
// vector kernel and the recombination do modulo 2^32 (clang's vector adds wrap; the scalar edges add as
// uint32), while the true result, the direct product's, is within K Cin 255^2 < 2^31: so the result is exact
// even where a partial sum would pass 2^31. (The bound above is loose: a leaf pairs a sum of 2^a taps with a
// value that is a difference of b levels, a + b <= d, so its terms are within 255^2 2^d; Kokoro's sums never
// wrap, but nothing relies on that.)
constexpr int kMaxTapPairDepth = 4;

int tap_pair_depth_wrapped(int64_t kernel) {
  int depth = 0;
  for (int64_t taps = kernel; taps >= 2 && depth < kMaxTapPairDepth; taps = (taps + 1) / 2) ++depth;
  return depth;
}

int tap_pair_depth(int64_t kernel, int64_t cin) {
  int depth = 0;
  for (int d = 1; d <= 3 && kernel >= 2; ++d) {
    const int64_t taps = (kernel + (int64_t{1} << d) - 1) >> d, bound = int64_t{255} << d;
    if (2 * taps * cin * bound * bound < (int64_t{1} << 31)) depth = d;
  }
  return depth;
}

// The leaf weight blocks of the split, depth first (A1's, A2's, A3's), of one weight row w [taps, Cin],
// written at out (advanced past them). level[d] is scratch for the blocks made at depth d (3 ceil(K/2) Cin).
void tap_pair_leaves(const int32_t* w, int64_t taps, int64_t cin, int depth, std::vector<int32_t>* level,
                     int16_t*& out) {
  if (depth == 0 || taps < 2) {
    for (int64_t i = 0; i < taps * cin; ++i) *out++ = static_cast<int16_t>(w[i]);
    return;
  }
  const int64_t p1 = (taps + 1) / 2, p0 = taps / 2;
  int32_t* a1 = level[depth].data();
  int32_t *a2 = a1 + p1 * cin, *a3 = a2 + p1 * cin;
  for (int64_t j = 0; j < p1; ++j) {
    const int32_t* even = w + 2 * j * cin;
    const int32_t* odd = 2 * j + 1 < taps ? even + cin : nullptr;
    for (int64_t i = 0; i < cin; ++i) {
      a1[j * cin + i] = even[i];
      a2[j * cin + i] = even[i] + (odd ? odd[i] : 0);
      if (odd) a3[j * cin + i] = odd[i];
    }
  }
  tap_pair_leaves(a1, p1, cin, depth - 1, level, out);
  tap_pair_leaves(a2, p1, cin, depth - 1, level, out);
  tap_pair_leaves(a3, p0, cin, depth - 1, level, out);
}

int64_t tap_pair_length(int64_t taps, int64_t cin, int depth) {  // of a row of leaves
  if (depth == 0 || taps < 2) return taps * cin;
  return 2 * tap_pair_length((taps + 1) / 2, cin, depth - 1) + tap_pair_length(taps / 2, cin, depth - 1);
}

Tensor tap_pair_weights(const Tensor& wk, int64_t kernel, int depth) {  // wk: int16 [Cout, K, Cin]
  const int64_t cout = wk.dim(0), cin = wk.dim(2), length = tap_pair_length(kernel, cin, depth);
  Tensor t = wk.ctx().empty({cout, length}, DType::I16);
  std::vector<int32_t> w(static_cast<size_t>(kernel * cin));
  std::vector<int32_t> level[kMaxTapPairDepth + 1];
  for (int d = 1; d <= depth; ++d) level[d].resize(static_cast<size_t>(3 * ((kernel + 1) / 2) * cin));
  for (int64_t oc = 0; oc < cout; ++oc) {
    const int16_t* src = wk.data<int16_t>() + oc * kernel * cin;
    std::copy(src, src + kernel * cin, w.begin());
    int16_t* out = t.data<int16_t>() + oc * length;
    tap_pair_leaves(w.data(), kernel, cin, depth, level, out);
  }
  return t;
}

// out = a - b over n int16 (never overflows: |a|, |b| <= 1020 at depth 3). Pointer-width indexes and no aliasing, so
// it vectorises (64-bit indexes on wasm32 and possible overlap kept it scalar: 4 % of the generator).
void difference_row(const int16_t* __restrict a, const int16_t* __restrict b, int16_t* __restrict out,
                    std::ptrdiff_t n) {
  for (std::ptrdiff_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(a[i] - b[i]);
}

// acc [Cout, n] (row stride ldc) = the stride-1 product of `taps` taps over rows G [g_rows, Cin] (rows past
// g_rows read as zero), with a's leaves of the split at this depth (row stride lda).
void tap_pair_product(Context& ctx, const int16_t* a, int64_t lda, int64_t cout, int64_t cin, int64_t taps,
                      int depth, const int16_t* g, int64_t g_rows, int64_t n, int32_t* acc, int64_t ldc) {
  if (depth == 0 || taps < 2) {  // a leaf: G holds n + taps - 1 rows here
    cpu::igemm_nt(ctx, cout, n, taps * cin, a, lda, g, cin, acc, ldc);
    return;
  }
  const int64_t p1 = (taps + 1) / 2, p0 = taps / 2, q = (n + 1) / 2, rows1 = q + p1 - 1, rows0 = q + p0 - 1;
  const int64_t len1 = tap_pair_length(p1, cin, depth - 1);
  Tensor ke, ko, kf, ks, kz;
  int16_t* e = scratch<int16_t>(ctx, ke, rows1 * cin, DType::I16);
  int16_t* o = scratch<int16_t>(ctx, ko, rows1 * cin, DType::I16);
  int16_t* f = scratch<int16_t>(ctx, kf, rows0 * cin, DType::I16);
  int16_t* zero = scratch<int16_t>(ctx, kz, cin, DType::I16);
  std::fill(zero, zero + cin, int16_t{0});
  auto row = [&](int64_t r) { return r < g_rows ? g + r * cin : zero; };
  // These passes and the recombination below are memory-bound and outside the product: split over the
  // threads too, or they leave a second thread idle for a tenth of the generator.
  cpu::parallel_for(ctx, rows1, 3 * cin, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int16_t *g0 = row(2 * w), *g1 = row(2 * w + 1), *g2 = row(2 * w + 2);
      int16_t *ew = e + w * cin, *ow = o + w * cin, *fw = f + w * cin;
      difference_row(g0, g1, ew, cin);
      std::memcpy(ow, g1, static_cast<size_t>(cin) * sizeof(int16_t));
      if (w < rows0) difference_row(g1, g2, fw, cin);
    }
  });
  int32_t* s = scratch<int32_t>(ctx, ks, 3 * cout * q, DType::I32);
  int32_t *s1 = s, *s2 = s + cout * q, *s3 = s + 2 * cout * q;
  tap_pair_product(ctx, a, lda, cout, cin, p1, depth - 1, e, rows1, q, s1, q);
  tap_pair_product(ctx, a + len1, lda, cout, cin, p1, depth - 1, o, rows1, q, s2, q);
  tap_pair_product(ctx, a + 2 * len1, lda, cout, cin, p0, depth - 1, f, rows0, q, s3, q);
  cpu::parallel_for(ctx, cout, n, [&](int64_t begin, int64_t end) {
    for (int64_t oc = begin; oc < end; ++oc) {
      int32_t* y = acc + oc * ldc;
      const int32_t *r1 = s1 + oc * q, *r2 = s2 + oc * q, *r3 = s3 + oc * q;
      for (int64_t u = 0; u < n / 2; ++u) y[2 * u] = r1[u] + r2[u], y[2 * u + 1] = r2[u] - r3[u];
      if (n % 2) y[n - 1] = r1[q - 1] + r2[q - 1];
    }
  });
}

// ---- The same on pair-major rows (cpu::iconv_pairs: time in the vector lanes, no lane sums): G2[(p * ld + r) * 2
// + h] = G[r][2p + h] for the P = Cin / 2 channel pairs, ld rows per pair; rows at or past g_rows read as zero.
typedef int16_t I16x8 __attribute__((vector_size(16)));

// Row pairs r of one channel pair (ld rows) as 32-bit words: w < n_even: e[w] = r[2w] - r[2w+1], o[w] = r[2w+1],
// f[w] = r[2w+1] - r[2w+2] for w < n_f. Four words per vector where all eight or nine rows are real.
void pair_differences(const int16_t* g, int64_t g_rows, int64_t n_even, int64_t n_f, int16_t* e, int16_t* o,
                      int16_t* f) {
  auto at = [&](int64_t r, int h) -> int16_t { return r < g_rows ? g[r * 2 + h] : int16_t{0}; };
  int64_t w = 0;
  for (; w + 4 <= n_f && 2 * w + 9 < g_rows; w += 4) {
    I16x8 a, b, a2, b2;  // rows 2w..2w+3, 2w+4..2w+7, and the same shifted by one pair of rows
    std::memcpy(&a, g + 4 * w, 16);
    std::memcpy(&b, g + 4 * w + 8, 16);
    std::memcpy(&a2, g + 4 * w + 4, 16);
    std::memcpy(&b2, g + 4 * w + 12, 16);
    const I16x8 even = __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13);
    const I16x8 odd = __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15);
    const I16x8 next = __builtin_shufflevector(a2, b2, 0, 1, 4, 5, 8, 9, 12, 13);
    const I16x8 ev = even - odd, fv = odd - next;
    std::memcpy(e + 2 * w, &ev, 16);
    std::memcpy(o + 2 * w, &odd, 16);
    std::memcpy(f + 2 * w, &fv, 16);
  }
  for (; w < n_even; ++w)
    for (int h = 0; h < 2; ++h) {
      e[2 * w + h] = static_cast<int16_t>(at(2 * w, h) - at(2 * w + 1, h));
      o[2 * w + h] = at(2 * w + 1, h);
      if (w < n_f) f[2 * w + h] = static_cast<int16_t>(at(2 * w + 1, h) - at(2 * w + 2, h));
    }
}

// A split's outputs from its three products: y[2u] = r1[u] + r2[u], y[2u + 1] = r2[u] - r3[u] (u < n / 2), and
// y[n - 1] = r1 + r2 at the last u when n is odd, modulo 2^32. Four u per step, the two results interleaved
// in registers (the scalar loop was a third of the split's own time in wasm).
void recombine(const int32_t* __restrict r1, const int32_t* __restrict r2, const int32_t* __restrict r3,
               int64_t n, int32_t* __restrict y) {
  typedef int32_t I32x4 __attribute__((vector_size(16)));
  const std::ptrdiff_t half = n / 2;
  std::ptrdiff_t u = 0;
  for (; u + 4 <= half; u += 4) {
    I32x4 a, b, c;
    std::memcpy(&a, r1 + u, 16);
    std::memcpy(&b, r2 + u, 16);
    std::memcpy(&c, r3 + u, 16);
    const I32x4 even = a + b, odd = b - c;
    const I32x4 lo = __builtin_shufflevector(even, odd, 0, 4, 1, 5);
    const I32x4 hi = __builtin_shufflevector(even, odd, 2, 6, 3, 7);
    std::memcpy(y + 2 * u, &lo, 16);
    std::memcpy(y + 2 * u + 4, &hi, 16);
  }
  auto add = [](int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  };
  auto sub = [](int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
  };
  for (; u < half; ++u) y[2 * u] = add(r1[u], r2[u]), y[2 * u + 1] = sub(r2[u], r3[u]);
  if (n % 2) y[n - 1] = add(r1[half], r2[half]);
}

// The split on pair-major rows as a plan, run in two passes over the threads. Each node of the split used to be
// pool jobs of its own (its difference rows, its recombination, each leaf's product: ~160 hand-offs for one k=11
// conv over a streamed window), and on 2 wasm threads the hand-offs (a sleeping helper's wake-up, the notify
// that wakes it) took as long as the arithmetic. A pair's difference rows depend on that pair's rows alone and
// an output channel's sums on its own weight rows alone, so one pass over channel pairs makes every node's rows
// and one pass over blocks of output channels runs every leaf's product and recombination for its rows: the
// same values (the same leaves and sums), two hand-offs.
struct SplitNode {
  const int16_t* a = nullptr;  // weights: the node's leaves, rows of lda
  int64_t lda = 0;
  int64_t taps = 0, n = 0;  // taps of the node's product, its outputs
  int depth = 0;            // 0: a leaf (one iconv_pairs)
  int level = 0;            // distance from the root
  const int16_t* g =
      nullptr;  // input rows, pair-major: ld rows per pair, g_rows real (the rest read as zero)
  int64_t ld = 0, g_rows = 0;
  int16_t *e = nullptr, *o = nullptr, *f = nullptr;  // internal: the children's rows, rows1 per pair
  int64_t rows1 = 0, rows0 = 0;
  int child[3] = {-1, -1, -1};
};

// int16 elements of the difference rows below a node of `taps` taps, split `depth` more times, n outputs.
int64_t split_rows_size(int64_t taps, int depth, int64_t n, int64_t cin) {
  if (depth == 0 || taps < 2) return 0;
  const int64_t p1 = (taps + 1) / 2, p0 = taps / 2, q = (n + 1) / 2;
  return 3 * (q + p1 - 1) * cin + 2 * split_rows_size(p1, depth - 1, q, cin) +
         split_rows_size(p0, depth - 1, q, cin);
}

// Appends the node and its subtree to `nodes` (rows from `bump`, advanced); returns the node's index. Levels'
// largest output counts go to level_q (a level's sums are reused by every node of that level in turn).
int split_plan(std::vector<SplitNode>& nodes, std::vector<int64_t>& level_q, const int16_t* a, int64_t lda,
               int64_t cin, int64_t taps, int depth, int level, int64_t n, const int16_t* g, int64_t ld,
               int64_t g_rows, int16_t*& bump) {
  const int index = static_cast<int>(nodes.size());
  nodes.push_back(
      {.a = a, .lda = lda, .taps = taps, .n = n, .level = level, .g = g, .ld = ld, .g_rows = g_rows});
  if (depth == 0 || taps < 2) return index;
  const int64_t p1 = (taps + 1) / 2, p0 = taps / 2, q = (n + 1) / 2, rows1 = q + p1 - 1, rows0 = q + p0 - 1;
  const int64_t len1 = tap_pair_length(p1, cin, depth - 1);
  int16_t *e = bump, *o = e + rows1 * cin, *f = o + rows1 * cin;
  bump = f + rows1 * cin;
  if (level_q.size() <= static_cast<size_t>(level)) level_q.resize(static_cast<size_t>(level) + 1, 0);
  level_q[static_cast<size_t>(level)] = std::max(level_q[static_cast<size_t>(level)], q);
  const int c0 = split_plan(nodes, level_q, a, lda, cin, p1, depth - 1, level + 1, q, e, rows1, rows1, bump);
  const int c1 =
      split_plan(nodes, level_q, a + len1, lda, cin, p1, depth - 1, level + 1, q, o, rows1, rows1, bump);
  const int c2 =
      split_plan(nodes, level_q, a + 2 * len1, lda, cin, p0, depth - 1, level + 1, q, f, rows1, rows0, bump);
  SplitNode& node = nodes[static_cast<size_t>(index)];
  node.depth = depth;
  node.e = e, node.o = o, node.f = f, node.rows1 = rows1, node.rows0 = rows0;
  node.child[0] = c0, node.child[1] = c1, node.child[2] = c2;
  return index;
}

// Pass 1 for channel pair p: the difference rows of every node below `index`.
void split_rows(const std::vector<SplitNode>& nodes, int index, int64_t p) {
  const SplitNode& node = nodes[static_cast<size_t>(index)];
  if (node.depth == 0) return;
  pair_differences(node.g + p * node.ld * 2, node.g_rows, node.rows1, node.rows0, node.e + p * node.rows1 * 2,
                   node.o + p * node.rows1 * 2, node.f + p * node.rows1 * 2);
  for (const int c : node.child) split_rows(nodes, c, p);
}

// Pass 2 for output channels [m0, m1): acc rows m0 .. m1 (stride ldc) = the node's product. sums[level]: the
// level's partial sums, [3][cout][level_q[level]] whatever the node's own q, so that threads at different
// products of a batch still write only their own rows.
void split_product(const std::vector<SplitNode>& nodes, int index, int64_t cout, int64_t pairs,
                   int32_t* const* sums, const int64_t* level_q, int64_t m0, int64_t m1, int32_t* acc,
                   int64_t ldc) {
  const SplitNode& node = nodes[static_cast<size_t>(index)];
  if (node.depth == 0) {
    cpu::iconv_pairs(m1 - m0, node.n, node.taps, pairs, node.a + m0 * node.lda, node.lda, node.g, node.ld,
                     acc + m0 * ldc, ldc);
    return;
  }
  const int64_t q = level_q[node.level];  // the row stride; the node's own outputs (n + 1) / 2 <= q
  int32_t* s = sums[node.level];
  int32_t *s1 = s, *s2 = s + cout * q, *s3 = s + 2 * cout * q;
  split_product(nodes, node.child[0], cout, pairs, sums, level_q, m0, m1, s1, q);
  split_product(nodes, node.child[1], cout, pairs, sums, level_q, m0, m1, s2, q);
  split_product(nodes, node.child[2], cout, pairs, sums, level_q, m0, m1, s3, q);
  for (int64_t oc = m0; oc < m1; ++oc)
    recombine(s1 + oc * q, s2 + oc * q, s3 + oc * q, node.n, acc + oc * ldc);
}

// Quantized x [Cin, T] (zero point subtracted) as pair-major rows (n_rows per pair): row padding + t of pair p
// holds (x[2p][t], x[2p + 1][t]), the others zero. Two channels' rows interleaved: eight steps per two vectors.
void pair_rows(const int16_t* xq, int64_t pairs, int64_t length, int64_t padding, int64_t n_rows,
               int16_t* g) {
  for (int64_t p = 0; p < pairs; ++p) {
    const int16_t *x0 = xq + 2 * p * length, *x1 = x0 + length;
    int16_t* out = g + p * n_rows * 2;
    std::fill(out, out + padding * 2, int16_t{0});
    std::fill(out + (padding + length) * 2, out + n_rows * 2, int16_t{0});
    out += padding * 2;
    int64_t t = 0;
    for (; t + 8 <= length; t += 8) {
      I16x8 a, b;
      std::memcpy(&a, x0 + t, 16);
      std::memcpy(&b, x1 + t, 16);
      const I16x8 lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
      const I16x8 hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
      std::memcpy(out + 2 * t, &lo, 16);
      std::memcpy(out + 2 * t + 8, &hi, 16);
    }
    for (; t < length; ++t) out[2 * t] = x0[t], out[2 * t + 1] = x1[t];
  }
}

// Difference rows a batch of the split may hold (int16 elements): a whole sentence's last generator stage
// (~23,000 outputs at 128 channels, ~12 rows per output and channel at depth 4) would otherwise need ~70 MB.
constexpr int64_t kSplitRowsBudget = int64_t{8} << 20;

// A stride-1 conv over an even Cin, from x [Cin, T] quantized with q, on pair-major rows: the split's plan in
// tiles of each dilation residue's outputs, each batch of tiles in the two passes above (the first also
// quantizes x, interleaves it into pair-major rows and gathers the residues' rows), then the scaling.
Tensor conv_pairs(const Tensor& x, const QuantParams& q, const Tensor& wk, const Tensor& pairs_w, int depth,
                  int64_t cout, int64_t kernel, const Conv1dOptions& o, int64_t out_len,
                  const std::vector<float>& bias, float out_scale) {
  Context& ctx = x.ctx();
  const int64_t cin = x.dim(0), length = x.dim(1), pairs = cin / 2, d = o.dilation;
  const int64_t n_rows = std::max((out_len - 1) + (kernel - 1) * d + 1, o.padding + length);
  Tensor quantized, rows, gathered, tree, sums_t, acc_t;
  int16_t* xq = scratch<int16_t>(ctx, quantized, cin * length, DType::I16);
  int16_t* xt = scratch<int16_t>(ctx, rows, n_rows * cin, DType::I16);

  // Residue r's outputs t = r + d u read padded rows r + d (u + k): with d > 1 gathered, g_rows[r] per pair.
  const int64_t residues = std::min(d, out_len);
  std::vector<int64_t> res_n(static_cast<size_t>(residues)), res_rows(res_n.size()), res_at(res_n.size());
  int64_t gathered_size = 0;
  for (int64_t r = 0; r < residues; ++r) {
    res_n[static_cast<size_t>(r)] = (out_len - r + d - 1) / d;
    res_rows[static_cast<size_t>(r)] = d == 1 ? n_rows : res_n[static_cast<size_t>(r)] + kernel - 1;
    res_at[static_cast<size_t>(r)] = gathered_size;
    if (d > 1) gathered_size += pairs * res_rows[static_cast<size_t>(r)] * 2;
  }
  int16_t* gr = d > 1 ? scratch<int16_t>(ctx, gathered, gathered_size, DType::I16) : nullptr;
  auto residue_rows = [&](int64_t r) { return d == 1 ? xt : gr + res_at[static_cast<size_t>(r)]; };

  struct Job {
    int64_t r, u0, u1;
    int root = -1;
  };
  std::vector<Job> jobs;
  const int64_t tile = std::max<int64_t>(256, kSplitRowsBudget / (16 * cin));
  for (int64_t r = 0; r < residues; ++r)
    for (int64_t u0 = 0; u0 < res_n[static_cast<size_t>(r)]; u0 += tile)
      jobs.push_back({r, u0, std::min(res_n[static_cast<size_t>(r)], u0 + tile)});
  auto splits = [&](const Job& j) { return depth > 0 && j.u1 - j.u0 >= 4; };
  auto rows_size = [&](const Job& j) {
    return splits(j) ? split_rows_size(kernel, depth, j.u1 - j.u0, cin) : 0;
  };

  Tensor out = ctx.empty({cout, out_len});
  for (size_t first = 0; first < jobs.size();) {
    size_t last = first + 1;
    int64_t size = rows_size(jobs[first]);
    while (last < jobs.size() && size + rows_size(jobs[last]) <= kSplitRowsBudget)
      size += rows_size(jobs[last++]);

    int16_t* bump = scratch<int16_t>(ctx, tree, size, DType::I16);
    std::vector<SplitNode> nodes;
    std::vector<int64_t> level_q;
    int64_t max_n = 1, work = 0;
    for (size_t i = first; i < last; ++i) {
      Job& j = jobs[i];
      const int64_t n = j.u1 - j.u0;
      const int16_t* g = residue_rows(j.r) + j.u0 * 2;
      const int64_t ld = res_rows[static_cast<size_t>(j.r)];
      if (splits(j)) {
        j.root = split_plan(nodes, level_q, pairs_w.data<int16_t>(), pairs_w.dim(1), cin, kernel, depth, 0, n,
                            g, ld, n + kernel - 1, bump);
      } else {  // the direct product
        j.root = static_cast<int>(nodes.size());
        nodes.push_back({.a = wk.data<int16_t>(),
                         .lda = kernel * cin,
                         .taps = kernel,
                         .n = n,
                         .g = g,
                         .ld = ld,
                         .g_rows = n + kernel - 1});
      }
      max_n = std::max(max_n, n);
      work += n * kernel * cin;
    }
    std::vector<int32_t*> sums(level_q.size());
    int64_t sums_size = 0;
    for (const int64_t lq : level_q) sums_size += 3 * cout * lq;
    int32_t* s = scratch<int32_t>(ctx, sums_t, sums_size, DType::I32);
    for (size_t l = 0; l < level_q.size(); ++l) sums[l] = s, s += 3 * cout * level_q[l];
    int32_t* acc = scratch<int32_t>(ctx, acc_t, cout * max_n, DType::I32);

    cpu::parallel_for(ctx, pairs, 4 * length + 2 * size / pairs, [&](int64_t begin, int64_t end) {
      if (first == 0) {
        cpu::quantize_i16(x.f32() + 2 * begin * length, 2 * (end - begin) * length, q,
                          xq + 2 * begin * length);
        pair_rows(xq + 2 * begin * length, end - begin, length, o.padding, n_rows, xt + begin * n_rows * 2);
        for (int64_t r = 0; d > 1 && r < residues; ++r) {  // pair p's rows r, r + d, ... as 32-bit words
          const int64_t g_rows = res_rows[static_cast<size_t>(r)];
          int16_t* g = gr + res_at[static_cast<size_t>(r)];
          for (int64_t p = begin; p < end; ++p)
            for (int64_t v = 0; v < g_rows; ++v)
              std::memcpy(g + (p * g_rows + v) * 2, xt + (p * n_rows + r + d * v) * 2, 4);
        }
      }
      for (size_t i = first; i < last; ++i)
        for (int64_t p = begin; p < end; ++p) split_rows(nodes, jobs[i].root, p);
    });
    cpu::parallel_for(ctx, (cout + 3) / 4, 4 * work, [&](int64_t begin, int64_t end) {
      const int64_t m0 = 4 * begin, m1 = std::min(cout, 4 * end);
      for (size_t i = first; i < last; ++i) {
        const Job& j = jobs[i];
        const int64_t n = j.u1 - j.u0;
        split_product(nodes, j.root, cout, pairs, sums.data(), level_q.data(), m0, m1, acc, max_n);
        for (int64_t oc = m0; oc < m1; ++oc) {
          const float bo = bias.empty() ? 0.0f : bias[static_cast<size_t>(oc)];
          const int32_t* a = acc + oc * max_n;
          float* y = out.f32() + oc * out_len + j.r + d * j.u0;
          for (int64_t u = 0; u < n; ++u) y[u * d] = static_cast<float>(a[u]) * out_scale + bo;
        }
      }
    });
    first = last;
  }
  return out;
}

}  // namespace

namespace ref {
Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o) {
  if (!b.defined()) return ref::conv1d_integer_dynamic(x, w, {}, o);
  const float step = dynamic_quantize_linear(x).quant().scale * w.quant().scale;
  const std::vector<float> bias = floored_bias(b, step);
  return ref::conv1d_integer_dynamic(x, w, x.ctx().from_floats(b.shape(), bias), o);
}
}  // namespace ref

namespace {
Tensor quantized_bias_conv(const Tensor& x0, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                           const ValueRange* x_range) {
  if (gpu_ops::on_gpu(x0))
    return gpu_ops::conv1d_integer_dynamic_quantized_bias(
        x0, w, b, o, x_range && x_range->gpu_partial.defined() ? &x_range->gpu_partial : nullptr);
  assert(x0.ctx().backend() == Backend::Cpu && (!b.defined() || (b.dtype() == DType::F32 && b.rank() == 1)));
  const Tensor x = cpu::as_f32(x0);
  NN_ASSERT(x.rank() == 2 && w.rank() == 3 && (w.dtype() == DType::I8 || w.dtype() == DType::U8));
  Context& ctx = x.ctx();
  const int64_t cin = x.dim(0), length = x.dim(1), cout = w.dim(0), kernel = w.dim(2);
  const int64_t d = o.dilation, s = o.stride;
  if (o.groups != 1 || (d != 1 && s != 1) || w.dim(1) != cin) {
    if (!b.defined()) return conv1d_integer_dynamic(x, w, {}, o);
    const float step = dynamic_quantize_linear(x).quant().scale * w.quant().scale;
    return conv1d_integer_dynamic(x, w, ctx.from_floats(b.shape(), floored_bias(b, step)), o);
  }
  const int64_t out_len = out_length(length, o, kernel);
  NN_ASSERT(out_len > 0);

  float lo = 0, hi = 0;
  if (x_range && x_range->known)
    lo = x_range->lo, hi = x_range->hi;
  else
    cpu::min_max(x.f32(), x.elements(), lo, hi);
  QuantParams q;
  q.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  q.zero_point = static_cast<int32_t>(std::nearbyint(std::clamp(0.0f - lo / q.scale, 0.0f, 255.0f)));
  const float out_scale = q.scale * w.quant().scale;
  const std::vector<float> bias = floored_bias(b, out_scale);

  const int64_t row = kernel * cin;
  const bool vnni = cpu::conv_integer_use_vnni();
  Tensor w8, sums8;
  if (vnni) {
    w8 = w.derived(kDerivedInt8TapMajor, [&] {
      Tensor t8 = w.ctx().empty({cout, kernel, cin}, DType::I8);
      return tap_major(w, t8.data<int8_t>()) ? t8 : w.ctx().empty({1}, DType::I8);
    });
    if (w8.elements() == cout * row)
      sums8 = w.derived(kDerivedRowSums, [&] {
        Tensor t = w.ctx().empty({cout}, DType::I32);
        for (int64_t oc = 0; oc < cout; ++oc) {
          int32_t sum = 0;
          for (int64_t j = 0; j < row; ++j) sum += w8.data<int8_t>()[oc * row + j];
          t.data<int32_t>()[oc] = sum;
        }
        return t;
      });
  }
  const bool use8 = sums8.defined();
  const Tensor wk = use8 ? Tensor{} : w.derived(kDerivedInt16TapMajor, [&] {
    Tensor t16 = w.ctx().empty({cout, kernel, cin}, DType::I16);
    tap_major(w, t16.data<int16_t>());  // |w - zp| <= 255 always fits
    return t16;
  });

  // The tap pairs on the int16 product of a stride-1 conv (the VNNI product's u8 rows cannot hold differences).
  const bool pm = !use8 && s == 1 && cin % 2 == 0;
  const int depth = pm ? tap_pair_depth_wrapped(kernel) : !use8 && s == 1 ? tap_pair_depth(kernel, cin) : 0;
  const Tensor pairs_w = depth > 0 ? w.derived(pm ? kDerivedTapPairsWrapped : kDerivedTapPairs,
                                               [&] { return tap_pair_weights(wk, kernel, depth); })
                                   : Tensor{};
  if (pm) return conv_pairs(x, q, wk, pairs_w, depth, cout, kernel, o, out_len, bias, out_scale);

  Tensor quantized, rows, gathered, sums;
  int16_t* xq = scratch<int16_t>(ctx, quantized, cin * length, DType::I16);
  cpu::parallel_for(ctx, cin, 4 * length, [&](int64_t begin, int64_t end) {
    cpu::quantize_i16(x.f32() + begin * length, (end - begin) * length, q, xq + begin * length);
  });
  const int64_t n_rows = std::max((out_len - 1) * s + (kernel - 1) * d + 1, o.padding + length);
  Tensor out = ctx.empty({cout, out_len});
  // Scales the int32 sums acc [Cout, n] into outputs r, r + step, ... of each channel.
  auto scale_out = [&](const int32_t* acc, int64_t n, int64_t r, int64_t step) {
    cpu::parallel_for(ctx, cout, n, [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc) {
        const float bo = bias.empty() ? 0.0f : bias[static_cast<size_t>(oc)];
        const int32_t minus = use8 ? q.zero_point * sums8.data<int32_t>()[oc] : 0;
        const int32_t* a = acc + oc * n;
        float* y = out.f32() + oc * out_len + r;
        for (int64_t u = 0; u < n; ++u) y[u * step] = static_cast<float>(a[u] - minus) * out_scale + bo;
      }
    });
  };
#if defined(__x86_64__) && !defined(__wasm__)
  // AMX: the input as quads of channels, every tap and dilation read in place (conv_integer_amx_avx2.cpp). Cin
  // is rounded up to the tile's 64 with zero weights (the decoder's 1,090 and 514 channels: 6 and 12 % more
  // multiply-adds, on a unit 2x as fast as VNNI).
  if (use8 && s == 1 && cout % 16 == 0 && cpu::conv_integer_use_amx()) {
    const int64_t cin64 = (cin + 63) / 64 * 64, qs = n_rows + 16;
    const Tensor wa = w.derived(kDerivedInt8AmxTiles, [&] {
      // [Cout / 16][K][Cin / 64] tiles of 16 output channels x 64 input channels (row r: channel 16 i + r).
      Tensor t = w.ctx().empty({cout / 16, kernel, cin64 / 64, 1024}, DType::I8);
      int8_t* tiles = t.data<int8_t>();
      std::memset(tiles, 0, static_cast<size_t>(t.elements()));
      for (int64_t oc = 0; oc < cout; ++oc)
        for (int64_t k = 0; k < kernel; ++k)
          for (int64_t c = 0; c < cin; c += 64)
            std::memcpy(tiles + (((oc / 16) * kernel + k) * (cin64 / 64) + c / 64) * 1024 + (oc % 16) * 64,
                        w8.data<int8_t>() + (oc * kernel + k) * cin + c,
                        static_cast<size_t>(std::min<int64_t>(64, cin - c)));
      return t;
    });
    uint8_t* quads = scratch<uint8_t>(ctx, rows, cin64 * qs, DType::U8);
    cpu::parallel_for(ctx, cin64 / 4, 4 * qs, [&](int64_t begin, int64_t end) {
      cpu::input_quads_avx2(xq, cin, begin, end, length, o.padding, q.zero_point, qs, quads);
    });
    int32_t* acc = scratch<int32_t>(ctx, sums, cout * out_len, DType::I32);
    cpu::parallel_for(ctx, (out_len + 15) / 16, 16 * cout * kernel * cin64, [&](int64_t begin, int64_t end) {
      cpu::iconv_u8s8_amx(cout, begin * 16, std::min(end * 16, out_len), kernel, d, cin64, wa.data<int8_t>(),
                          quads, qs, acc, out_len);
    });
    scale_out(acc, out_len, 0, 1);
    return out;
  }
  // VNNI at stride 1: the same input quads, 16 steps of time in each vector (conv_integer_avx2.cpp); Cin rounded
  // up to 4 with zero weights.
  if (use8 && s == 1) {
    const int64_t quads = (cin + 3) / 4, qs = n_rows + 16;
    const Tensor wq = w.derived(kDerivedInt8VnniQuads, [&] {
      Tensor t = w.ctx().empty({cout, kernel, quads}, DType::I32);
      auto* bytes = reinterpret_cast<uint8_t*>(t.data<int32_t>());
      std::memset(bytes, 0, static_cast<size_t>(t.elements()) * 4);
      for (int64_t r = 0; r < cout * kernel; ++r)
        std::memcpy(bytes + r * quads * 4, w8.data<int8_t>() + r * cin, static_cast<size_t>(cin));
      return t;
    });
    uint8_t* quad_rows = scratch<uint8_t>(ctx, rows, quads * 4 * qs, DType::U8);
    cpu::parallel_for(ctx, quads, 4 * qs, [&](int64_t begin, int64_t end) {
      cpu::input_quads_avx2(xq, cin, begin, end, length, o.padding, q.zero_point, qs, quad_rows);
    });
    int32_t* acc = scratch<int32_t>(ctx, sums, cout * out_len, DType::I32);
    const auto* wq_words = reinterpret_cast<const uint32_t*>(wq.data<int32_t>());
    cpu::parallel_for(ctx, (out_len + 63) / 64, 64 * cout * kernel * quads * 4,
                      [&](int64_t begin, int64_t end) {
                        cpu::iconv_u8s8_quads_vnni(cout, begin * 64, std::min(end * 64, out_len), kernel, d,
                                                   quads, wq_words, quad_rows, qs, acc, out_len);
                      });
    scale_out(acc, out_len, 0, 1);
    return out;
  }
#endif
  int16_t* xt16 = nullptr;
  uint8_t* xt8 = nullptr;
  if (use8) {  // uint8 as quantized, padding = the zero point; the zero point's share is taken off after
    xt8 = scratch<uint8_t>(ctx, rows, n_rows * cin, DType::U8);
#if defined(__x86_64__) && !defined(__wasm__)
    std::fill(xt8, xt8 + n_rows * cin, static_cast<uint8_t>(q.zero_point));
    cpu::time_rows_u8_avx2(xq, cin, length, o.padding, q.zero_point, xt8);  // VNNI implies AVX2
#else
    time_rows<uint8_t>(xq, cin, length, o.padding, n_rows, static_cast<uint8_t>(q.zero_point), q.zero_point,
                       xt8);
#endif
  } else {
    xt16 = scratch<int16_t>(ctx, rows, n_rows * cin, DType::I16);
#if defined(__wasm_simd128__)
    // Only the padding rows are zeroed: the transpose writes every row of x (a whole-buffer fill cost as much).
    std::fill(xt16, xt16 + o.padding * cin, int16_t{0});
    std::fill(xt16 + (o.padding + length) * cin, xt16 + n_rows * cin, int16_t{0});
    cpu::time_rows_i16_wasm(xq, cin, length, o.padding, xt16);
#else
    time_rows<int16_t>(xq, cin, length, o.padding, n_rows, 0, 0, xt16);
#endif
  }
  // acc [Cout, n] (row stride ldc) over outputs whose rows start every ldb_rows rows at `first` row.
  auto product = [&](int64_t n, int64_t first, int64_t ldb_rows, int32_t* acc, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
    if (use8) {
      const uint8_t* b = xt8 + first * cin;
      cpu::parallel_for(ctx, n, cout * row, [&](int64_t begin, int64_t end) {
        cpu::igemm_u8s8_nt_vnni(cout, end - begin, row, w8.data<int8_t>(), row, b + begin * ldb_rows * cin,
                                ldb_rows * cin, acc + begin, ldc);
      });
      return;
    }
#endif
    if (depth > 0 && ldb_rows == 1 && n >= 4)
      return tap_pair_product(ctx, pairs_w.data<int16_t>(), pairs_w.dim(1), cout, cin, kernel, depth,
                              xt16 + first * cin, n + kernel - 1, n, acc, ldc);
    cpu::igemm_nt(ctx, cout, n, row, wk.data<int16_t>(), row, xt16 + first * cin, ldb_rows * cin, acc, ldc);
  };
  if (d == 1) {
    int32_t* acc = scratch<int32_t>(ctx, sums, cout * out_len, DType::I32);
    product(out_len, 0, s, acc, out_len);
    scale_out(acc, out_len, 0, 1);
    return out;
  }
  // Dilated: outputs t = r + d u read padded rows r + d (u + k). Each residue's rows gathered, then one product.
  uint8_t* const rows8 = xt8;
  int16_t* const rows16 = xt16;
  const int64_t max_rows = (out_len + d - 1) / d + kernel - 1;  // residue 0 has the most outputs
  uint8_t* g8 = use8 ? scratch<uint8_t>(ctx, gathered, max_rows * cin, DType::U8) : nullptr;
  int16_t* g16 = use8 ? nullptr : scratch<int16_t>(ctx, gathered, max_rows * cin, DType::I16);
  int32_t* acc = scratch<int32_t>(ctx, sums, cout * ((out_len + d - 1) / d), DType::I32);
  for (int64_t r = 0; r < d && r < out_len; ++r) {
    const int64_t n_r = (out_len - r + d - 1) / d, g_rows = n_r + kernel - 1;
    for (int64_t v = 0; v < g_rows; ++v) {
      if (use8)
        std::memcpy(g8 + v * cin, rows8 + (r + d * v) * cin, static_cast<size_t>(cin));
      else
        std::memcpy(g16 + v * cin, rows16 + (r + d * v) * cin, static_cast<size_t>(cin) * 2);
    }
    xt8 = g8;
    xt16 = g16;
    product(n_r, 0, 1, acc, n_r);
    scale_out(acc, n_r, r, d);
  }
  return out;
}

}  // namespace

Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o) {
  return quantized_bias_conv(x, w, b, o, nullptr);
}

Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o, const ValueRange& x_range) {
  return quantized_bias_conv(x, w, b, o, &x_range);
}

}  // namespace sotto::nn
