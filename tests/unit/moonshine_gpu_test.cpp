// Moonshine base on the op layer's GPU backend (SwiftShader in CI; skipped with the reason where this machine has
// no WebGPU or the model is absent): the same forward pass as the CPU's (models/asr/moonshine.cpp) on a WebGPU
// context, against ONNX Runtime's encoder output and greedy tokens on the first 3 s of beckett.wav
// (tests/data/moonshine_beckett_3s.bin, see moonshine_test.cpp) and against our CPU backend. On a CPU adapter
// (SwiftShader, as in CI) only the short-clip encoder check runs: the whole-clip checks take ~4 minutes there
// (a workgroup barrier costs far more on a CPU, and the int8 head is 32,768 workgroups per token); set
// SOTTO_SLOW_GPU_TESTS=1 to run them anyway. On a real GPU they all run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/clock.h"
#include "core/thread_pool.h"
#include "gpu_test_support.h"
#include "io/file.h"
#include "models/asr/moonshine.h"
#include "moonshine_reference.h"
#include "nn/fused.h"
#include "nn/gpu_recorder.h"
#include "nn/ops.h"
#include "nn/tensor.h"

namespace sotto {
namespace {

// The encoder's dispatches on 0.25 s (9 frames) and 10 s (413 frames) of audio: 128 and 187 with the products
// split over K, the layer norms, the stem's activations, ropes, GELUs, residual adds and transposes as kernels
// of their own, and the 10 s clip's attention in key blocks combined by another dispatch (now one tiled
// dispatch a layer).
constexpr uint64_t kEncoderDispatches9Frames = 52, kEncoderDispatches10s = 52;

using testing::read_moonshine_reference;
using testing::source_path;
using Reference = testing::MoonshineReference;

struct Loaded {
  std::unique_ptr<ThreadPool> pool;
  asr::MoonshineModel cpu, gpu;
};

// The model on both backends, loaded once for the suite; nullptr (with *why set) when the model or the GPU is
// absent.
Loaded* models(std::string* why) {
  static std::string reason;
  static Loaded* loaded = []() -> Loaded* {
    gpu::Device* device = testing::open_test_device();
    if (!device) {
      reason = testing::gpu_skip_reason();
      return nullptr;
    }
    const std::string dir = source_path("models/moonshine-base-en/");
    auto enc = MappedFile::open(dir + "encoder_model.ort");
    auto dec = MappedFile::open(dir + "decoder_model_merged.ort");
    auto tok = MappedFile::open(dir + "tokenizer.bin");
    if (!enc || !dec || !tok) {
      reason = "models/moonshine-base-en absent (bash scripts/get-models.sh moonshine)";
      return nullptr;
    }
    auto* l = new Loaded;
    l->pool = std::make_unique<ThreadPool>(2);
    auto c = asr::load_moonshine(enc->bytes(), dec->bytes(), tok->bytes(), nn::Context::cpu(l->pool.get()));
    auto g = asr::load_moonshine(enc->bytes(), dec->bytes(), tok->bytes(), nn::Context::webgpu(*device));
    if (!c || !g) {
      ADD_FAILURE() << (c ? g.message() : c.message());
      reason = "the model did not load";
      return nullptr;
    }
    l->cpu = std::move(c).value();
    l->gpu = std::move(g).value();
    return l;
  }();
  *why = reason;
  return loaded;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

#define NEED_MODELS()                                                                             \
  std::string why;                                                                                \
  Loaded* loaded = models(&why);                                                                  \
  if (!loaded) GTEST_SKIP() << why;                                                               \
  Reference ref;                                                                                  \
  ASSERT_TRUE(read_moonshine_reference(ref)) << "tests/data/moonshine_beckett_3s.bin unreadable"; \
  [[maybe_unused]] nn::Context& gctx = *loaded->gpu.ctx;                                          \
  [[maybe_unused]] nn::Context& cctx = *loaded->cpu.ctx

bool slow_checks_skipped() {
  const gpu::Device* device = testing::open_test_device();
  return device && device->info().cpu() && !std::getenv("SOTTO_SLOW_GPU_TESTS");
}

#define SKIP_SLOW_ON_CPU_ADAPTER()                                                                    \
  if (slow_checks_skipped())                                                                          \
  GTEST_SKIP()                                                                                        \
      << "a CPU adapter (SwiftShader) needs minutes for the whole clip; SOTTO_SLOW_GPU_TESTS=1 runs " \
         "it"

// The encoder on 0.25 s of the clip (9 frames: every op of the encoder, fast enough for SwiftShader) within
// 1e-3 of our CPU backend's (which moonshine_test.cpp holds to 1e-3 of ONNX Runtime; measured 2.7e-4 here):
// f32 everywhere, only the summation orders differ, on layer-normed values up to ~7.
TEST(MoonshineGpu, EncoderOnAShortClipMatchesTheCpu) {
  NEED_MODELS();
  const std::vector<float> audio(ref.audio.begin(), ref.audio.begin() + 4000);
  auto encode = [&](nn::Context& ctx, const asr::MoonshineModel& m) {
    const nn::Tensor enc = asr::moonshine_encode(m.weights, ctx.from_floats({4000}, audio));
    EXPECT_EQ(enc.dim(0), 9);
    auto got = ctx.to_floats(enc);
    EXPECT_TRUE(got.ok()) << got.message();
    return got.ok() ? *got : std::vector<float>();
  };
  const uint64_t before = gctx.gpu()->dispatches_run();
  const std::vector<float> gpu = encode(gctx, loaded->gpu);
  const uint64_t dispatches = gctx.gpu()->dispatches_run() - before;
  const std::vector<float> cpu = encode(cctx, loaded->cpu);
  ASSERT_EQ(gpu.size(), cpu.size());
  const double diff = max_abs_diff(gpu, cpu);
  std::printf("[ info    ] gpu encoder, 0.25 s: max |gpu - cpu| %.3g, %llu dispatches\n", diff,
              static_cast<unsigned long long>(dispatches));
  EXPECT_LT(diff, 1e-3);
  // Each dispatch is a dependent ~12 us at least on an H100: per layer the stacked q / k / v product with the
  // norm and rope inside (rows this few take the one-output-per-thread kernel, which computes each rotated
  // output's pair too), the attention reading q, k and v in place, o with the residual add, the FFN's 2
  // products with norm, GELU and residual add inside; the stem's convs with their activations.
  EXPECT_EQ(dispatches, kEncoderDispatches9Frames);
}

// The encoder and the decoder's cross K / V products on 10 s of audio (the 3 s clip repeated), in dispatches:
// products of 413 rows take one each (32 x 32 blocks with K sliced in the workgroup, the layer norm as they
// load x, rope, tanh, GELU and residual adds in their stores) where split-K and the separate kernels took two
// to four; each layer's q, k and v are one product that the tiled attention reads in place, and the 16 cross
// K / V products of the decoder's start one product. The encoder within 1e-3 of the CPU's, as on 3 s (this
// length is where those kernels run: the 3 s clip's 123 rows split K); measured 6.8e-4 on SwiftShader, the same
// with SOTTO_GPU_LINEAR_KERNEL=64 (split-K, rope apart).
TEST(MoonshineGpu, TenSecondsOfAudioTakeTheirDispatchCountAndMatchTheCpu) {
  NEED_MODELS();
  SKIP_SLOW_ON_CPU_ADAPTER();
  std::vector<float> audio;
  while (audio.size() < 159414) audio.insert(audio.end(), ref.audio.begin(), ref.audio.end());
  audio.resize(159414);
  const int64_t samples = static_cast<int64_t>(audio.size());
  uint64_t before = gctx.gpu()->dispatches_run();
  const nn::Tensor enc = asr::moonshine_encode(loaded->gpu.weights, gctx.from_floats({samples}, audio));
  ASSERT_TRUE(gctx.to_floats(nn::slice(enc, 0, 0, 1)).ok());
  const uint64_t encoder = gctx.gpu()->dispatches_run() - before - 1;  // less the slice
  before = gctx.gpu()->dispatches_run();
  const asr::MoonshineDecoderState s = asr::moonshine_decoder_start(loaded->gpu.weights, enc, 8);
  ASSERT_TRUE(gctx.to_floats(nn::slice(s.cross_v.back(), 0, 0, 1)).ok());
  const uint64_t start = gctx.gpu()->dispatches_run() - before - 1;
  auto gpu = gctx.to_floats(enc);
  auto cpu = cctx.to_floats(asr::moonshine_encode(loaded->cpu.weights, cctx.from_floats({samples}, audio)));
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  ASSERT_EQ(gpu->size(), cpu->size());
  const double diff = max_abs_diff(*gpu, *cpu);
  std::printf(
      "[ info    ] 10 s: %lld frames, encoder %llu dispatches, decoder start %llu, max |gpu - cpu| %.3g\n",
      static_cast<long long>(enc.dim(0)), static_cast<unsigned long long>(encoder),
      static_cast<unsigned long long>(start), diff);
  EXPECT_EQ(enc.dim(0), 413);
  EXPECT_EQ(encoder, kEncoderDispatches10s);
  EXPECT_EQ(start, 1u);  // the 8 layers' cross K and V in one product (MoonshineWeights::cross_kv)
  EXPECT_LT(diff, 1e-3);
}

// The encoder on the GPU within 1e-3 of ONNX Runtime's output (the CPU backend's bound: values are layer-normed,
// |x| up to ~7; measured 7e-5 on SwiftShader) and of our CPU backend's (measured 1.4e-4).
TEST(MoonshineGpu, EncoderMatchesCpuAndOnnxRuntime) {
  NEED_MODELS();
  SKIP_SLOW_ON_CPU_ADAPTER();
  auto encode = [&](nn::Context& ctx, const asr::MoonshineModel& m) {
    const nn::Tensor audio = ctx.from_floats({static_cast<int64_t>(ref.audio.size())}, ref.audio);
    const nn::Tensor enc = asr::moonshine_encode(m.weights, audio);
    EXPECT_EQ(enc.dim(0), ref.frames);
    auto got = ctx.to_floats(enc);
    EXPECT_TRUE(got.ok()) << got.message();
    return got.ok() ? *got : std::vector<float>();
  };
  const std::vector<float> gpu = encode(gctx, loaded->gpu), cpu = encode(cctx, loaded->cpu);
  ASSERT_EQ(gpu.size(), ref.encoder.size());
  const double vs_ort = max_abs_diff(gpu, ref.encoder), vs_cpu = max_abs_diff(gpu, cpu);
  std::printf("[ info    ] gpu encoder: %u frames, max |gpu - ORT| %.3g, max |gpu - cpu| %.3g\n", ref.frames,
              vs_ort, vs_cpu);
  EXPECT_LT(vs_ort, 1e-3);
  EXPECT_LT(vs_cpu, 1e-3);
}

// The fused GPU decoder step (nn/fused.h: stacked q/k/v with norm, rope and the KV-cache append in place, norms,
// biases, gates and residual adds inside the int8 products) against the CPU's op-by-op step, three tokens fed one
// at a time over a 0.25 s encoder output: every logit within 1e-2 (logits range about +-30; the two backends'
// encoder outputs already differ by ~3e-4, and the CPU's int8 products round x to int16 per row, ~2e-3 from
// ORT's float logits on their own; measured 4.1e-3 on SwiftShader, 5e-4 before that rounding) and the same
// argmax; and the step's dispatch count (6 a layer). ~35 s on SwiftShader (the 32,768-row head), so a real GPU's
// check, like the whole-clip ones.
TEST(MoonshineGpu, FusedDecoderStepMatchesTheCpu) {
  NEED_MODELS();
  SKIP_SLOW_ON_CPU_ADAPTER();
  const std::vector<float> audio(ref.audio.begin(), ref.audio.begin() + 4000);
  const nn::Tensor genc = asr::moonshine_encode(loaded->gpu.weights, gctx.from_floats({4000}, audio));
  const nn::Tensor cenc = asr::moonshine_encode(loaded->cpu.weights, cctx.from_floats({4000}, audio));
  asr::MoonshineDecoderState gs = asr::moonshine_decoder_start(loaded->gpu.weights, genc, 4);
  asr::MoonshineDecoderState cs = asr::moonshine_decoder_start(loaded->cpu.weights, cenc, 4);
  EXPECT_EQ(gs.capacity, 4) << "the GPU state should take the fused step";
  EXPECT_EQ(cs.capacity, 0) << "the CPU keeps its op-by-op step";
  // The encoder and the cross keys and values run first: the dispatch counts below are the steps' own.
  ASSERT_TRUE(gctx.to_floats(nn::slice(gs.cross_v.back(), 0, 0, 1)).ok());
  for (int32_t token : {1, 18274, 1898}) {
    const uint64_t before = gctx.gpu()->dispatches_run();
    auto g = gctx.to_floats(asr::moonshine_decode(loaded->gpu.weights, gs, {&token, 1}));
    ASSERT_TRUE(g.ok()) << g.message();
    // The step's dispatches (its time on a GPU: each is a dependent ~7 us at least): per layer the self-
    // attention with its q/k/v product, o, the cross-attention with its q product, cross o, up, down; then the
    // final norm and the head, and here the embedding row's lookup and dequantization (the greedy loop's own
    // step, also 2 dispatches, writes it instead). 52 (68 with the attentions apart from their products).
    const uint64_t dispatches = gctx.gpu()->dispatches_run() - before;
    std::printf("[ info    ] fused gpu step: %llu dispatches\n", static_cast<unsigned long long>(dispatches));
    EXPECT_EQ(dispatches, 6 * loaded->gpu.weights.decoder.size() + 4);
    auto c = cctx.to_floats(asr::moonshine_decode(loaded->cpu.weights, cs, {&token, 1}));
    ASSERT_TRUE(c.ok()) << c.message();
    ASSERT_EQ(g->size(), c->size());
    const double diff = max_abs_diff(*g, *c);
    std::printf("[ info    ] fused gpu step after token %d: max |gpu - cpu| logit %.3g\n", token, diff);
    EXPECT_LT(diff, 1e-2);
    EXPECT_EQ(std::max_element(g->begin(), g->end()) - g->begin(),
              std::max_element(c->begin(), c->end()) - c->begin());
  }
}

// Greedy decoding on the GPU (the self-attention cache grown with concat, cross-attention over the encoder
// output, int8 matrices read as int8) gives ONNX Runtime's tokens and the CPU's.
TEST(MoonshineGpu, GreedyTranscriptIsOnnxRuntimesAndTheCpus) {
  NEED_MODELS();
  SKIP_SLOW_ON_CPU_ADAPTER();
  auto g = asr::moonshine_transcribe(loaded->gpu.weights, ref.audio);
  ASSERT_TRUE(g.ok()) << g.message();
  auto c = asr::moonshine_transcribe(loaded->cpu.weights, ref.audio);
  ASSERT_TRUE(c.ok()) << c.message();
  const std::vector<int32_t> expected(ref.tokens.begin() + 1, ref.tokens.end());
  EXPECT_EQ(g->tokens, expected);
  EXPECT_EQ(g->tokens, c->tokens);
  EXPECT_EQ(loaded->gpu.tokenizer.decode(g->tokens), "Ever tried, ever failed.");
  EXPECT_TRUE(gctx.gpu()->status().ok()) << gctx.gpu()->status().message();
}

// The greedy loop kept on the GPU (steps in batches, the state and tokens in a GPU buffer, steps after EOS
// no-ops) gives the one-step-in-flight loop's tokens, ending at EOS (ONNX Runtime's tokens) and at a cap of
// 3 tokens (the loop's other end). On a real GPU it also prints both loops' decode times on this clip (medians
// of 5, alternating), the comparison the batched loop is for.
TEST(MoonshineGpu, BatchedLoopGivesTheOneStepLoopsTokens) {
  NEED_MODELS();
  SKIP_SLOW_ON_CPU_ADAPTER();
  const asr::MoonshineWeights& w = loaded->gpu.weights;
  const nn::Tensor enc =
      asr::moonshine_encode(w, gctx.from_floats({static_cast<int64_t>(ref.audio.size())}, ref.audio));
  ASSERT_TRUE(gctx.to_floats(nn::slice(enc, 0, 0, 1)).ok());
  const int repeats = testing::open_test_device()->info().cpu() ? 1 : 5;
  for (size_t max_tokens : {size_t{3}, size_t{40}}) {
    std::vector<int32_t> got[2];
    std::vector<double> ms[2];
    for (int r = 0; r < (max_tokens == 3 ? 1 : repeats); ++r)
      for (int loop = 0; loop < 2; ++loop) {
        asr::MoonshineDecoderState s =
            asr::moonshine_decoder_start(w, enc, static_cast<int64_t>(max_tokens) + 1);
        ASSERT_TRUE(gctx.to_floats(nn::slice(s.cross_v.back(), 0, 0, 1)).ok());
        const double t0 = now_ms();
        auto tokens = asr::moonshine_greedy_gpu(
            w, s, max_tokens,
            loop == 0 ? asr::MoonshineGpuLoop::Batched : asr::MoonshineGpuLoop::OneStepInFlight);
        ms[loop].push_back(now_ms() - t0);
        ASSERT_TRUE(tokens.ok()) << tokens.message();
        if (r > 0) EXPECT_EQ(*tokens, got[loop]);
        got[loop] = *tokens;
      }
    EXPECT_EQ(got[0], got[1]) << "cap " << max_tokens;
    if (max_tokens == 3) EXPECT_EQ(got[0].size(), 3u);
    if (max_tokens == 40) {
      EXPECT_EQ(got[0], std::vector<int32_t>(ref.tokens.begin() + 1, ref.tokens.end()));
      for (auto& v : ms) std::sort(v.begin(), v.end());
      std::printf(
          "[ info    ] %zu tokens: batched loop %.2f ms, one step in flight %.2f ms (medians of %d)\n",
          got[0].size(), ms[0][ms[0].size() / 2], ms[1][ms[1].size() / 2], repeats);
    }
  }
  EXPECT_TRUE(gctx.gpu()->status().ok()) << gctx.gpu()->status().message();
}

// The decoder step as one persistent dispatch (models/asr/moonshine_gpu_step.h; natively where the adapter has
// the workgroup memory: one workgroup on SwiftShader, so no barrier waits there) against the separate fused
// dispatches on the same model, two steps on 0.25 s of beckett.wav: logits within 1e-3 (the two sum the int8
// rows, the attention chunks and the norm's terms in other orders; measured 6.7e-6 on SwiftShader, logits up to
// ~20) and the same argmax, two dispatches a step before the head (the kernel, the cache append).
// The step kernel's tests: the GPU model, and 0.25 s of the clip and its encoder output.
#define NEED_STEP_KERNEL()                                                                                 \
  NEED_MODELS();                                                                                           \
  const asr::MoonshineWeights& w = loaded->gpu.weights;                                                    \
  if (!w.step_kernel)                                                                                      \
    GTEST_SKIP() << "the step kernel does not run here (not native Dawn, or too little workgroup memory)"; \
  const std::vector<float> audio(ref.audio.begin(), ref.audio.begin() + 4000);                             \
  const nn::Tensor enc = asr::moonshine_encode(w, gctx.from_floats({4000}, audio))

TEST(MoonshineGpu, StepKernelGivesTheFusedStepsLogits) {
  NEED_STEP_KERNEL();
  asr::MoonshineDecoderState ks = asr::moonshine_decoder_start(w, enc, 4);
  ASSERT_TRUE(ks.step.act.defined()) << "the state should have the step kernel's buffers";
  w.step_kernel->gave_up = true;  // a state for the separate dispatches, on the same model
  asr::MoonshineDecoderState fs = asr::moonshine_decoder_start(w, enc, 4);
  w.step_kernel->gave_up = false;
  ASSERT_FALSE(fs.step.act.defined());
  const nn::Tensor log = gctx.zeros({6}, DType::I32);
  nn::Int8LinearFused head;
  head.w = w.embedding.w;
  head.scale = {w.embedding.scale, 1, 1, 1};
  head.offset = {w.embedding.offset, 0, 0, 0};
  for (int32_t token : {1, 18274}) {
    const nn::Tensor id = gctx.from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&token), 4});
    const nn::Tensor x = asr::moonshine_embed(w, id);
    ASSERT_TRUE(gctx.to_floats(x).ok());
    const uint64_t before = gctx.gpu()->dispatches_run();
    const nn::Tensor row = asr::moonshine_step_kernel(w, ks, x, log);
    ASSERT_TRUE(gctx.to_floats(row).ok());
    EXPECT_EQ(gctx.gpu()->dispatches_run() - before, 2u);
    auto k = gctx.to_floats(nn::linear_int8_fused(row, head));
    ASSERT_TRUE(k.ok()) << k.message();
    auto f = gctx.to_floats(asr::moonshine_decode(w, fs, {&token, 1}));
    ASSERT_TRUE(f.ok()) << f.message();
    ASSERT_EQ(k->size(), f->size());
    const double diff = max_abs_diff(*k, *f);
    std::printf("[ info    ] step kernel (grid %u) after token %d: max |kernel - fused| logit %.3g\n",
                w.step_kernel->grid, token, diff);
    EXPECT_LT(diff, 1e-3);
    EXPECT_EQ(std::max_element(k->begin(), k->end()) - k->begin(),
              std::max_element(f->begin(), f->end()) - f->begin());
  }
  EXPECT_TRUE(gctx.gpu()->status().ok()) << gctx.gpu()->status().message();
}

// A grid too wide to be resident at once (4,096 workgroups: SwiftShader runs them a few at a time, a GPU at most a
// few per compute unit) makes a barrier give up: the greedy loop ends with the failure mark, the utterance is
// decoded again by the separate dispatches (the CPU's tokens: on 0.25 s of audio, EOS at once), and the model
// stops using the kernel. At most one token, so that SwiftShader's separate step stays short.
TEST(MoonshineGpu, StepKernelFallsBackWhenAGridBarrierGivesUp) {
  NEED_STEP_KERNEL();
  const uint32_t grid = w.step_kernel->grid;
  w.step_kernel->grid = 4096;
  asr::MoonshineDecoderState s = asr::moonshine_decoder_start(w, enc, 2);
  ASSERT_TRUE(s.step.act.defined());
  auto tokens = asr::moonshine_greedy_gpu(w, s, 1);
  const bool gave_up = w.step_kernel->gave_up;
  w.step_kernel->grid = grid;
  w.step_kernel->gave_up = false;
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  EXPECT_TRUE(gave_up) << "a barrier should have given up with 4,096 workgroups";
  auto cpu = asr::moonshine_transcribe(loaded->cpu.weights, audio);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  cpu->tokens.resize(std::min<size_t>(cpu->tokens.size(), 1));
  EXPECT_EQ(*tokens, cpu->tokens);
  EXPECT_TRUE(gctx.gpu()->status().ok()) << gctx.gpu()->status().message();
}

}  // namespace
}  // namespace sotto
