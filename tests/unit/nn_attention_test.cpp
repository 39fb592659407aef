// Op checks, attention / rotary / spectra / lookup: the CPU path against nn::ref on fresh random inputs of odd
// sizes, and against compositions of other ops (attention = softmax(q k^T / sqrt d) v) and known transforms
// (an STFT of a cosine on a bin, istft(stft(x)) = x).
#include <cmath>

#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::Backends;
using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_tensor;

TEST(NnAttention, MatchesReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int kv_heads = static_cast<int>(rand_int(1, 3)),
              heads = kv_heads * static_cast<int>(rand_int(1, 3));
    // Both paths: a few query rows (a decoder step, keys and values read in place) and many (products).
    for (const int64_t tq : {rand_int(1, 5), rand_int(6, 30)}) {
      const int64_t d = rand_int(1, 40), tk = tq + rand_int(0, 20);
      const Tensor q = rand_tensor(ctx, {tq, heads * d}), k = rand_tensor(ctx, {tk, kv_heads * d});
      const Tensor v = rand_tensor(ctx, {tk, kv_heads * d});
      for (bool causal : {false, true}) {
        const AttentionOptions o{.n_heads = heads, .n_kv_heads = kv_heads, .causal = causal};
        expect_close(attention(q, k, v, o), ref::attention(q, k, v, o), 1e-5f, 1e-5f,
                     std::string(causal ? "causal " : "full ") + std::to_string(tq) + " rows " + where);
      }
    }
  });
}

TEST(NnAttention, EqualsItsComposition) {
  // One head, no mask: softmax(q k^T / sqrt d) v through matmul / softmax / scale.
  auto ctx = Context::cpu();
  const int64_t d = 7, tq = 5, tk = 9;
  const Tensor q = rand_tensor(*ctx, {tq, d}), k = rand_tensor(*ctx, {tk, d}), v = rand_tensor(*ctx, {tk, d});
  const Tensor p = softmax(scale(matmul(q, transpose(k)), 1.0f / std::sqrt(7.0f)), -1);
  expect_close(attention(q, k, v, {.n_heads = 1}), matmul(p, v), 1e-6f, 1e-5f, "attention vs composition");
  // Causal with one query and a cache: the query is the last position, so it sees every key (no masking).
  const Tensor q1 = slice(q, 0, 0, 1);
  expect_close(attention(q1, k, v, {.n_heads = 1, .causal = true}), attention(q1, k, v, {.n_heads = 1}), 0, 0,
               "causal last position");
}

TEST(NnAttention, RelativePositionMatchesReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int heads = static_cast<int>(rand_int(1, 4));
    const int64_t d = rand_int(1, 24), t = rand_int(1, 30);
    const Tensor q = rand_tensor(ctx, {t, heads * d}), k = rand_tensor(ctx, {t, heads * d});
    const Tensor v = rand_tensor(ctx, {t, heads * d}), p = rand_tensor(ctx, {2 * t - 1, heads * d});
    const Tensor u = rand_tensor(ctx, {heads, d}), bv = rand_tensor(ctx, {heads, d});
    const AttentionOptions o{.n_heads = heads};
    expect_close(attention_rel_pos(q, k, v, p, u, bv, o), ref::attention_rel_pos(q, k, v, p, u, bv, o), 1e-5f,
                 1e-5f, "rel_pos " + where);
  });
  // With zero position embeddings and zero biases it is plain attention.
  auto ctx = Context::cpu();
  const Tensor q = rand_tensor(*ctx, {6, 8}), k = rand_tensor(*ctx, {6, 8}), v = rand_tensor(*ctx, {6, 8});
  expect_close(
      attention_rel_pos(q, k, v, ctx->zeros({11, 8}), ctx->zeros({2, 4}), ctx->zeros({2, 4}), {.n_heads = 2}),
      attention(q, k, v, {.n_heads = 2}), 1e-6f, 1e-5f, "rel_pos with zero positions");
}

TEST(NnAttention, RopeMatchesReferenceAndPreservesNorms) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int heads = static_cast<int>(rand_int(1, 4));
    const int64_t head_dim = 2 * rand_int(1, 16), t = rand_int(1, 20);
    const int rotary = static_cast<int>(2 * rand_int(1, head_dim / 2));
    const Tensor x = rand_tensor(ctx, {t, heads * head_dim});
    for (bool interleaved : {false, true})
      expect_close(rope(x, heads, rotary, 10000.0f, 1234, interleaved),
                   ref::rope(x, heads, rotary, 10000.0f, 1234, interleaved), 2e-6f, 1e-5f, "rope " + where);
  });
  // By hand: position 1, one pair, base irrelevant for i = 0: (1, 0) rotates to (cos 1, sin 1).
  auto ctx = Context::cpu();
  const float v[] = {1, 0};
  const std::vector<float> y = floats(rope(ctx->from_floats({1, 2}, v), 1, 2, 10000.0f, 1, false));
  EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(y[1], std::sin(1.0), 1e-6);
}

TEST(NnSpectral, StftMatchesReferenceAndKnownTransform) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int n_fft = static_cast<int>(rand_int(4, 40)), hop = static_cast<int>(rand_int(1, n_fft));
    const int64_t length = rand_int(n_fft + 1, 600), win = rand_int(2, n_fft);
    const Tensor x = rand_tensor(ctx, {length}), window = rand_tensor(ctx, {win}, 0.0f, 1.0f);
    for (bool center : {false, true})
      expect_close(stft(x, window, n_fft, hop, center), ref::stft(x, window, n_fft, hop, center), 2e-5f,
                   1e-5f, "stft " + where);
    const Tensor spec = rand_tensor(ctx, {2, n_fft / 2 + 1, rand_int(1, 30)});
    const Tensor hann = ctx.from_floats({n_fft}, [&] {
      std::vector<float> w(static_cast<size_t>(n_fft));
      for (int i = 0; i < n_fft; ++i)
        w[i] = static_cast<float>(0.5 - 0.5 * std::cos(6.283185307179586 * i / n_fft));
      return w;
    }());
    expect_close(istft(spec, hann, n_fft, hop, false), ref::istft(spec, hann, n_fft, hop, false), 5e-5f,
                 1e-4f, "istft " + where);
  });
  // A cosine on bin 2 of an 8-point rectangular-window STFT: X[2] = 4, every other bin 0.
  auto ctx = Context::cpu();
  std::vector<float> cosine(8), ones(8, 1.0f);
  for (int n = 0; n < 8; ++n) cosine[n] = static_cast<float>(std::cos(6.283185307179586 * 2 * n / 8));
  const std::vector<float> s =
      floats(stft(ctx->from_floats({8}, cosine), ctx->from_floats({8}, ones), 8, 8, false));  // [2, 5, 1]
  for (int f = 0; f < 5; ++f) {
    EXPECT_NEAR(s[f], f == 2 ? 4.0f : 0.0f, 1e-5f) << "real bin " << f;
    EXPECT_NEAR(s[5 + f], 0.0f, 1e-5f) << "imaginary bin " << f;
  }
}

TEST(NnSpectral, InverseStftRestoresTheSignal) {
  // torch.istft(torch.stft(x, center=True)) = x with a Hann window and hop n_fft / 4 (NOLA holds).
  auto ctx = Context::cpu();
  const int n_fft = 20, hop = 5;
  std::vector<float> hann(n_fft);
  for (int i = 0; i < n_fft; ++i)
    hann[i] = static_cast<float>(0.5 - 0.5 * std::cos(6.283185307179586 * i / n_fft));
  const Tensor window = ctx->from_floats({n_fft}, hann);
  const Tensor x = rand_tensor(*ctx, {hop * rand_int(8, 60)});
  const Tensor y = istft(stft(x, window, n_fft, hop, true), window, n_fft, hop, true);
  expect_close(y, x, 1e-5f, 1e-5f, "istft(stft(x))");
}

TEST(NnLookup, EmbeddingAndDurations) {
  auto ctx = Context::cpu();
  const float table[] = {0, 1, 10, 11, 20, 21};
  const int64_t ids[] = {2, 0, 2};
  const Tensor t = ctx->from_floats({3, 2}, table);
  const Tensor id = ctx->from_bytes({3}, DType::I64, {reinterpret_cast<const uint8_t*>(ids), sizeof ids});
  EXPECT_EQ(floats(embedding(t, id)), (std::vector<float>{20, 21, 0, 1, 20, 21}));
  const uint8_t q[] = {130, 126, 128, 129};
  const Tensor t8 = ctx->from_bytes({2, 2}, DType::U8, q).with_quant({0.5f, 128});
  const int64_t one[] = {1};
  EXPECT_EQ(
      floats(embedding(t8, ctx->from_bytes({1}, DType::I64, {reinterpret_cast<const uint8_t*>(one), 8}))),
      (std::vector<float>{0.0f, 0.5f}));
  const int32_t d[] = {2, 0, 1};
  const Tensor rep =
      repeat_by_durations(t, ctx->from_bytes({3}, DType::I32, {reinterpret_cast<const uint8_t*>(d), 12}));
  EXPECT_EQ(floats(rep), (std::vector<float>{0, 1, 0, 1, 20, 21}));
}

}  // namespace
}  // namespace sotto::nn
