// Parakeet's (FastConformer's) ops on the op layer's GPU backend against their CPU references on fresh random
// inputs of odd sizes (glu, permute, conv2d incl. depthwise and strided, Transformer-XL relative-position
// attention split over key blocks), then the whole model on a WebGPU context against our CPU backend on the
// small CI model (tests/data/parakeet/tdt_ci): the encoder output and the greedy TDT tokens, frames and
// durations. SwiftShader in CI; skipped with the reason where this machine has no WebGPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/clock.h"
#include "audio/mel.h"
#include "gpu/device.h"
#include "gpu_test_support.h"
#include "io/file.h"
#include "models/asr/parakeet.h"
#include "nn/fused.h"
#include "nn/gpu_ops.h"
#include "nn/weights.h"
#include "nn_test_support.h"
#include "test_support.h"

namespace sotto::nn {
namespace {

using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_tensor;

using testing::download;
using testing::upload;

TEST(ParakeetGpu, ConformerOpsMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 2; ++rep) {
    // GLU over the last and a middle axis: one exp and a division per output in f32, against double.
    const Tensor g = rand_tensor(*cpu, {rand_int(1, 9), 2 * rand_int(1, 40), rand_int(1, 5)}, -4.0f, 4.0f);
    for (int axis : {1, -1})
      if (g.dim(axis) % 2 == 0)
        expect_close(download(*cpu, *gpu, glu(upload(*gpu, g), axis)), ref::glu(g, axis), 1e-6f, 1e-5f,
                     "gpu glu");
    // The conv module's GLU, depthwise conv (odd K, 'same' padding) and SiLU in one kernel, time-major, with and
    // without a bias, against the reference's five ops: K products of gated values in [-4, 4] summed in f32
    // (another order than the reference's), then SiLU: 1e-5.
    for (const bool bias : {true, false}) {
      const int64_t t = rand_int(1, 40), c = rand_int(1, 70), k = 2 * rand_int(0, 5) + 1;
      const Tensor xc = rand_tensor(*cpu, {t, 2 * c}, -4.0f, 4.0f), wc = rand_tensor(*cpu, {c, 1, k}),
                   bc = bias ? rand_tensor(*cpu, {c}) : Tensor();
      expect_close(download(*cpu, *gpu,
                            glu_depthwise_conv1d_silu(upload(*gpu, xc), upload(*gpu, wc),
                                                      bias ? upload(*gpu, bc) : Tensor())),
                   ref::glu_depthwise_conv1d_silu(xc, wc, bc), 1e-5f, 1e-5f, "gpu glu depthwise conv silu");
    }
    // Permute (a copy: exact), rank 3 and 4.
    const Tensor x3 = rand_tensor(*cpu, {rand_int(1, 7), rand_int(1, 9), rand_int(1, 11)});
    const int o3[] = {1, 0, 2}, o3b[] = {2, 0, 1};
    expect_close(download(*cpu, *gpu, permute(upload(*gpu, x3), o3)), permute(x3, o3), 0, 0, "gpu permute");
    expect_close(download(*cpu, *gpu, permute(upload(*gpu, x3), o3b)), permute(x3, o3b), 0, 0, "gpu permute");
    const Tensor x4 = rand_tensor(*cpu, {rand_int(1, 4), rand_int(1, 5), rand_int(1, 6), rand_int(1, 3)});
    const int o4[] = {3, 1, 0, 2};
    expect_close(download(*cpu, *gpu, permute(upload(*gpu, x4), o4)), permute(x4, o4), 0, 0, "gpu permute 4");

    // conv2d: a full conv (Parakeet's first, one input channel, 3 x 3 stride 2 pad 1), depthwise (groups =
    // channels) and a grouped 1 x 1 with an odd stride and dilation; f32 sums of up to ~150 terms: 1e-5.
    const int64_t cin = rand_int(1, 3), h = rand_int(3, 30), w = rand_int(3, 25);
    const Tensor x = rand_tensor(*cpu, {cin, h, w});
    const Tensor wf = rand_tensor(*cpu, {rand_int(1, 9), cin, 3, 3}), bf = rand_tensor(*cpu, {wf.dim(0)});
    const Conv2dOptions s2{.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    expect_close(download(*cpu, *gpu, conv2d(upload(*gpu, x), upload(*gpu, wf), upload(*gpu, bf), s2)),
                 ref::conv2d(x, wf, bf, s2), 1e-5f, 1e-5f, "gpu conv2d");
    const int64_t ch = 2 * rand_int(1, 6);
    const Tensor xd = rand_tensor(*cpu, {ch, h, w}), wd = rand_tensor(*cpu, {ch, 1, 3, 3});
    Conv2dOptions dw = s2;
    dw.groups = static_cast<int>(ch);
    expect_close(download(*cpu, *gpu, conv2d(upload(*gpu, xd), upload(*gpu, wd), {}, dw)),
                 ref::conv2d(xd, wd, {}, dw), 1e-5f, 1e-5f, "gpu conv2d depthwise");
    const Tensor wg = rand_tensor(*cpu, {ch, 2, 1, 2}), bg = rand_tensor(*cpu, {ch});
    const Conv2dOptions og{.stride_h = 1,
                           .stride_w = 3,
                           .pad_h = 0,
                           .pad_w = 2,
                           .dilation_w = 2,
                           .groups = static_cast<int>(ch / 2)};
    expect_close(download(*cpu, *gpu, conv2d(upload(*gpu, xd), upload(*gpu, wg), upload(*gpu, bg), og)),
                 ref::conv2d(xd, wg, bg, og), 1e-5f, 1e-5f, "gpu conv2d grouped");
    // Pointwise (1 x 1, one group: the tiled linear between transposes), channels across a 64-wide tile.
    const int64_t pin = rand_int(1, 80), pout = rand_int(1, 80);
    const Tensor xp = rand_tensor(*cpu, {pin, h, w}), wp = rand_tensor(*cpu, {pout, pin, 1, 1});
    const Tensor bp = rand_tensor(*cpu, {pout});
    for (const Tensor* bias : {&bp, static_cast<const Tensor*>(nullptr)}) {
      const Tensor gb = bias ? upload(*gpu, *bias) : Tensor();
      expect_close(download(*cpu, *gpu, conv2d(upload(*gpu, xp), upload(*gpu, wp), gb, {})),
                   ref::conv2d(xp, wp, bias ? *bias : Tensor(), {}), 1e-5f, 1e-5f, "gpu conv2d pointwise");
    }

    // Relative-position attention: short (one key block) and long (blocks of 16..64 keys combined); head
    // dims that are multiples of 4 (the vec4 kernel) and that are not (the scalar one).
    for (int64_t t : {rand_int(1, 20), rand_int(70, 200)})
      for (int64_t d : {4 * rand_int(1, 10), 4 * rand_int(0, 9) + rand_int(1, 3)}) {
        const int heads = static_cast<int>(rand_int(1, 4));
        const int64_t c = heads * d;
        const Tensor q = rand_tensor(*cpu, {t, c}), k = rand_tensor(*cpu, {t, c}),
                     v = rand_tensor(*cpu, {t, c});
        const Tensor p = rand_tensor(*cpu, {2 * t - 1, c});
        const Tensor u = rand_tensor(*cpu, {heads, d}), bv = rand_tensor(*cpu, {heads, d});
        const AttentionOptions o{.n_heads = heads};
        expect_close(download(*cpu, *gpu,
                              attention_rel_pos(upload(*gpu, q), upload(*gpu, k), upload(*gpu, v),
                                                upload(*gpu, p), upload(*gpu, u), upload(*gpu, bv), o)),
                     ref::attention_rel_pos(q, k, v, p, u, bv, o), 1e-5f, 1e-5f, "gpu attention_rel_pos");
      }
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The CI model on the GPU against the same model on the CPU, on transformers' mel of its reference clips: the
// encoder within 1e-4 (values O(1) after the final LayerNorm; f32 sums in another order over 2 small blocks)
// and the same tokens, frames and durations.
TEST(ParakeetGpu, SmallModelMatchesTheCpu) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  const std::string dir = std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/tdt_ci";
  auto weights = MappedFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.message();
  const std::string config = read_text(dir + "/config.json");
  auto on_cpu = asr::ParakeetModel::load(config, weights->bytes());
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.message();
  auto on_gpu = asr::ParakeetModel::load_on(Context::webgpu(*device), config, weights->bytes());
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.message();
  auto ref_file = MappedFile::open(dir + "/reference.safetensors");
  ASSERT_TRUE(ref_file.ok()) << ref_file.message();
  auto ref = open_weights("reference.safetensors", ref_file->bytes());
  ASSERT_TRUE(ref.ok()) << ref.message();
  auto cpu = Context::cpu();
  for (int i = 0; i < 3; ++i) {
    const std::string clip = "clip" + std::to_string(i);
    auto mel_t = (*ref)->load_any(*cpu, clip + ".mel");
    ASSERT_TRUE(mel_t.ok()) << mel_t.message();
    const std::vector<float> mel = floats(*mel_t);
    const Tensor want = (*on_cpu)->encode(mel, mel_t->dim(1));
    const Tensor got = (*on_gpu)->encode(mel, mel_t->dim(1));
    ASSERT_EQ(got.shape(), want.shape()) << clip;
    auto got_v = got.ctx().to_floats(got);
    ASSERT_TRUE(got_v.ok()) << got_v.message();
    const double err = sotto::testing::max_abs_diff(*got_v, floats(want));
    EXPECT_LE(err, 1e-4) << clip;
    const asr::TdtResult a = (*on_cpu)->decode(want), b = (*on_gpu)->decode(got);
    EXPECT_EQ(b.tokens, a.tokens) << clip;
    EXPECT_EQ(b.frames, a.frames) << clip;
    EXPECT_EQ(b.durations, a.durations) << clip;
    std::printf("  %s: GPU encoder max |diff| %.2e against the CPU, %zu tokens\n", clip.c_str(), err,
                a.tokens.size());
  }
}

// The GPU's TDT loop (nn/gpu_tdt.cpp) against asr::tdt_greedy on the CPU, the reference, with one small random
// decoder (CPU ops for the joint and the prediction net): the joint's bias favours duration 0, so tokens on one
// frame hit the max-symbols rule, and durations 2 and 4 skip frames; 1 frame, and enough frames for several
// batches of steps.
TEST(ParakeetGpu, TdtLoopMatchesTheHostLoop) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const int64_t H = rand_int(20, 70), V = rand_int(8, 40);
  const std::vector<int> durations = {0, 1, 2, 4};
  const int32_t blank = static_cast<int32_t>(V - 1);
  const int max_symbols = 2;
  const int64_t R = V + static_cast<int64_t>(durations.size());
  const Tensor embedding = rand_tensor(*cpu, {V, H}), proj_w = rand_tensor(*cpu, {H, H}, -0.3f, 0.3f),
               proj_b = rand_tensor(*cpu, {H}, -0.2f, 0.2f);
  Tensor joint_w = rand_tensor(*cpu, {R, H}, -0.5f, 0.5f), joint_b = rand_tensor(*cpu, {R});
  // The duration rows small beside a bias that prefers 0 and 4, so that both come often, chosen by the input.
  for (int64_t r = V; r < R; ++r) {
    for (int64_t k = 0; k < H; ++k) joint_w.f32()[r * H + k] *= 0.02f;
    joint_b.f32()[r] = r == V || r == V + 3 ? 0.5f : 0.0f;
  }
  joint_b.f32()[blank] -= 1.0f;  // and tokens more often than blank
  std::vector<LstmWeights> lstm(2);
  for (LstmWeights& l : lstm) {
    l.w_ih = rand_tensor(*cpu, {4 * H, H}, -0.3f, 0.3f);
    l.w_hh = rand_tensor(*cpu, {4 * H, H}, -0.3f, 0.3f);
    l.b = rand_tensor(*cpu, {4 * H});
  }
  std::vector<LstmWeights> lstm_gpu;
  for (const LstmWeights& l : lstm) {
    LstmWeights& on = lstm_gpu.emplace_back();
    on.w_ih = upload(*gpu, l.w_ih);
    on.w_hh = upload(*gpu, l.w_hh);
    on.b = upload(*gpu, l.b);
  }
  const Tensor g_embedding = upload(*gpu, embedding), g_proj_w = upload(*gpu, proj_w),
               g_proj_b = upload(*gpu, proj_b), g_joint_w = upload(*gpu, joint_w),
               g_joint_b = upload(*gpu, joint_b);
  size_t zero_duration_tokens = 0, skips = 0;
  // 1 frame, then longer inputs until both a zero-duration token and a skip of 4 frames have occurred (one
  // input gives both ~90 % of the time).
  for (int attempt = 0; attempt < 6 && (attempt < 2 || zero_duration_tokens == 0 || skips == 0); ++attempt) {
    const int64_t frames = attempt == 0 ? 1 : rand_int(40, 60);
    const Tensor enc = rand_tensor(*cpu, {frames, H}, -3.0f, 3.0f);  // wide: each frame's choice its own
    // The reference: the host loop over CPU ops.
    std::vector<Tensor> h(2, cpu->zeros({H})), c(2, cpu->zeros({H}));
    Tensor g;
    auto advance = [&](int32_t token) {
      Tensor y = cpu->from_floats(
          {1, H}, std::span<const float>(embedding.f32() + token * H, static_cast<size_t>(H)));
      for (size_t i = 0; i < lstm.size(); ++i) {
        Tensor ho, co;
        y = nn::lstm(y, lstm[i], false, h[i], c[i], &ho, &co);
        h[i] = ho.reshape({H});
        c[i] = co.reshape({H});
      }
      g = nn::linear(y, proj_w, proj_b).reshape({H});
    };
    advance(blank);
    auto step = [&](int64_t t) {
      const Tensor row =
          cpu->from_floats({H}, std::span<const float>(enc.f32() + t * H, static_cast<size_t>(H)));
      const Tensor out = nn::linear(nn::relu(nn::add(row, g)).reshape({1, H}), joint_w, joint_b);
      const float* l = out.f32();
      const int64_t tok = std::max_element(l, l + V) - l;
      const int64_t dur = std::max_element(l + V, l + R) - (l + V);
      return asr::TdtStep{static_cast<int32_t>(tok), durations[static_cast<size_t>(dur)]};
    };
    const asr::TdtResult want = asr::tdt_greedy(frames, blank, max_symbols, step, advance);
    auto got = gpu_ops::tdt_greedy(upload(*gpu, enc), {.embedding = g_embedding,
                                                       .lstm = lstm_gpu,
                                                       .proj_w = g_proj_w,
                                                       .proj_b = g_proj_b,
                                                       .joint_w = g_joint_w,
                                                       .joint_b = g_joint_b,
                                                       .blank_id = blank,
                                                       .vocab_size = V,
                                                       .durations = durations,
                                                       .max_symbols_per_step = max_symbols});
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(got->tokens, want.tokens) << frames << " frames";
    EXPECT_EQ(got->frames, want.frames) << frames << " frames";
    EXPECT_EQ(got->durations, want.durations) << frames << " frames";
    zero_duration_tokens += static_cast<size_t>(std::count(want.durations.begin(), want.durations.end(), 0));
    skips += static_cast<size_t>(std::count(want.durations.begin(), want.durations.end(), 4));
    std::printf("  %lld frames: %zu tokens, durations of the last ones %s\n", static_cast<long long>(frames),
                want.tokens.size(),
                want.durations.empty() ? "-" : std::to_string(want.durations.back()).c_str());
  }
  EXPECT_GT(zero_duration_tokens, 0u) << "the case meant to reach the max-symbols rule did not";
  EXPECT_GT(skips, 0u) << "the case meant to skip frames did not";
}

// Timing on a real GPU (bench/parakeet_gpu.sh; skipped unless SOTTO_PARAKEET_GPU_DIR names a model directory,
// e.g. tools/parakeet_random_weights.py --size v2): a 6 s clip (a chirp with noise) through the whole model on
// the GPU, the encoder's output against the CPU backend's (SOTTO_PARAKEET_GPU_THREADS threads) and the same
// tokens; prints the median encoder and whole-transcription milliseconds of 10 runs after a warm-up.
TEST(ParakeetGpu, FullModelTiming) {
  const char* dir = std::getenv("SOTTO_PARAKEET_GPU_DIR");
  if (!dir) GTEST_SKIP() << "set SOTTO_PARAKEET_GPU_DIR to a Parakeet directory to time it on the GPU";
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto weights = MappedFile::open(std::string(dir) + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.message();
  const std::string config = read_text(std::string(dir) + "/config.json");
  const char* threads = std::getenv("SOTTO_PARAKEET_GPU_THREADS");
  auto on_cpu = asr::ParakeetModel::load(config, weights->bytes(), "model.safetensors",
                                         threads ? std::atoi(threads) : 2);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.message();
  auto on_gpu = asr::ParakeetModel::load_on(Context::webgpu(*device), config, weights->bytes());
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.message();
  std::vector<float> audio(6 * 16000);
  for (size_t i = 0; i < audio.size(); ++i) {
    const double t = static_cast<double>(i) / 16000.0;
    audio[i] = static_cast<float>(0.3 * std::sin(2 * 3.14159265358979 * (200 + 150 * t) * t) +
                                  0.05 * (static_cast<double>(rand_int(0, 1000)) / 1000.0 - 0.5));
  }
  const audio::MelFeatures mel = audio::nemo_log_mel(audio);
  const double c0 = now_ms();
  const Tensor want = (*on_cpu)->encode(mel.data, mel.n_frames);
  const asr::TdtResult cpu_tokens = (*on_cpu)->decode(want);
  const double cpu_ms = now_ms() - c0;
  std::vector<double> enc_ms, all_ms;
  double err = 0;
  asr::TdtResult gpu_tokens;
  for (int run = 0; run < 11; ++run) {
    const double t0 = now_ms();
    const Tensor got = (*on_gpu)->encode(mel.data, mel.n_frames);
    auto got_v = got.ctx().to_floats(got);
    ASSERT_TRUE(got_v.ok()) << got_v.message();
    const double t1 = now_ms();
    auto r = (*on_gpu)->transcribe(audio);
    ASSERT_TRUE(r.ok()) << r.message();
    const double t2 = now_ms();
    if (run == 0) {
      err = sotto::testing::max_abs_diff(*got_v, floats(want));
      gpu_tokens = *r;
      continue;  // the first run compiles the pipelines
    }
    enc_ms.push_back(t1 - t0);
    all_ms.push_back(t2 - t1);
  }
  std::sort(enc_ms.begin(), enc_ms.end());
  std::sort(all_ms.begin(), all_ms.end());
  EXPECT_LE(err, 1e-3);
  EXPECT_EQ(gpu_tokens.tokens, cpu_tokens.tokens);
  std::printf(
      "  parakeet 6 s clip, %lld encoder frames, %zu tokens: GPU encoder median %.2f ms (min %.2f), "
      "whole transcription (mel, encoder, TDT loop) median %.2f ms (min %.2f); CPU encoder + decode "
      "%.1f ms; GPU vs CPU encoder max |diff| %.2e\n",
      static_cast<long long>(want.dim(0)), cpu_tokens.tokens.size(), enc_ms[enc_ms.size() / 2], enc_ms[0],
      all_ms[all_ms.size() / 2], all_ms[0], cpu_ms, err);
}

}  // namespace
}  // namespace sotto::nn
