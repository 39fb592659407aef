// Moonshine's encoder op by op: the body of asr::moonshine_encode with a timer around each op, on 10 s of
// synthetic audio (the encoder's cost depends only on the length), one thread. Times are the thread's CPU time
// (other jobs' load counts less than in wall time), best of 5 passes. Not part of the CMake build:
//   cmake --build --preset release --target sotto
//   clang++-19 -O2 -std=c++20 -Isrc bench/moonshine_encoder_profile.cpp build/lib/libsotto.a -lpthread \
//       -o build/moonshine_encoder_profile && build/moonshine_encoder_profile   # needs models/moonshine-base-en
#include <time.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "models/asr/moonshine.h"
#include "nn/ops.h"

using sotto::nn::Tensor;

namespace {

std::map<std::string, double> g_ms;

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

template <class F>
Tensor timed(const char* name, F f) {
  const double t0 = cpu_ms();
  Tensor r = f();
  g_ms[name] += cpu_ms() - t0;
  return r;
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

}  // namespace

int main() {
  namespace nn = sotto::nn;
  const std::string dir = "models/moonshine-base-en/";
  const auto enc = slurp(dir + "encoder_model.ort"), dec = slurp(dir + "decoder_model_merged.ort"),
             tok = slurp(dir + "tokenizer.bin");
  auto m = sotto::asr::load_moonshine(enc, dec, tok, nn::Context::cpu(nullptr));
  if (!m.ok()) {
    std::printf("%s\n", m.status().message().c_str());
    return 1;
  }
  const sotto::asr::MoonshineWeights& w = m->weights;
  const sotto::asr::MoonshineConfig& c = w.config;
  std::vector<float> samples(159414);  // beckett.wav's length
  for (size_t i = 0; i < samples.size(); ++i)
    samples[i] = 0.1f * std::sin(static_cast<float>(i) * 0.05f) * static_cast<float>((i * 7919) % 13) / 13.0f;
  std::map<std::string, double> best;
  for (int rep = 0; rep < 5; ++rep) {
    g_ms.clear();
    const double t0 = cpu_ms();
    Tensor x = m->ctx->from_floats({1, static_cast<int64_t>(samples.size())}, samples);
    x = timed("conv1", [&] { return nn::conv1d(x, w.conv1, {}, {.stride = 64}); });
    x = timed("gelu/tanh", [&] { return nn::tanh(x); });
    x = timed("norms/rope/add/transpose",
              [&] { return nn::group_norm(x, 1, w.group_norm_gamma, w.group_norm_beta, c.norm_eps); });
    x = timed("conv2", [&] { return nn::conv1d(x, w.conv2, w.conv2_b, {.stride = 3}); });
    x = timed("gelu/tanh", [&] { return nn::gelu(x); });
    x = timed("conv3", [&] { return nn::conv1d(x, w.conv3, w.conv3_b, {.stride = 2}); });
    x = timed("gelu/tanh", [&] { return nn::gelu(x); });
    x = timed("norms/rope/add/transpose", [&] { return nn::transpose(x); });
    for (const auto& l : w.encoder) {
      Tensor h =
          timed("norms/rope/add/transpose", [&] { return nn::layer_norm(x, l.attn_norm, {}, c.norm_eps); });
      Tensor q = timed("linear q/k/v/o", [&] { return sotto::asr::moonshine_encoder_linear(w, h, l.q); });
      q = timed("norms/rope/add/transpose",
                [&] { return nn::rope(q, c.n_heads, c.rotary_dim, c.rope_base, 0, true); });
      Tensor k = timed("linear q/k/v/o", [&] { return sotto::asr::moonshine_encoder_linear(w, h, l.k); });
      k = timed("norms/rope/add/transpose",
                [&] { return nn::rope(k, c.n_heads, c.rotary_dim, c.rope_base, 0, true); });
      Tensor v = timed("linear q/k/v/o", [&] { return sotto::asr::moonshine_encoder_linear(w, h, l.v); });
      Tensor a = timed("attention", [&] { return nn::attention(q, k, v, {.n_heads = c.n_heads}); });
      a = timed("linear q/k/v/o", [&] { return sotto::asr::moonshine_encoder_linear(w, a, l.o); });
      x = timed("norms/rope/add/transpose", [&] { return nn::add(x, a); });
      h = timed("norms/rope/add/transpose", [&] { return nn::layer_norm(x, l.mlp_norm, {}, c.norm_eps); });
      h = timed("fc1", [&] { return sotto::asr::moonshine_encoder_linear(w, h, l.fc1, l.fc1_b); });
      h = timed("gelu/tanh", [&] { return nn::gelu(h); });
      h = timed("fc2", [&] { return sotto::asr::moonshine_encoder_linear(w, h, l.fc2, l.fc2_b); });
      x = timed("norms/rope/add/transpose", [&] { return nn::add(x, h); });
    }
    x = timed("norms/rope/add/transpose", [&] { return nn::layer_norm(x, w.encoder_norm, {}, c.norm_eps); });
    g_ms["encoder"] = cpu_ms() - t0;
    for (const auto& [name, ms] : g_ms)
      if (!best.count(name) || ms < best[name]) best[name] = ms;
  }
  for (const auto& [name, ms] : best)
    std::printf("| %s | %.1f | %.0f%% |\n", name.c_str(), ms, 100 * ms / best["encoder"]);
}
