// The op harness's sampling checks (models/llm/gpu/op_check.h): Ops::sample against sotto::Sampler itself, on fresh
// random logits, several vocabulary sizes and parameter sets, each trial with its own seed. The GPU must pick
// the Sampler's token from the same logits and the same draw u (the first draw of Rng(seed), which is what a
// Sampler seeded so draws first).
//
// Exact equality is not guaranteed everywhere: the GPU's exp (and its division, for the temperature and the
// repetition penalty) may differ from libm in the last bits, and the CPU's double sums are float-float pairs
// there. So a trial counts only when no decision of the chain lies within kMargin of its boundary: the
// draw u against every cumulative probability walked, top-p's running sum against top_p, min-p's threshold
// against the logits it cuts, and neighbouring penalized logits (their order). Trials near a boundary are
// counted and reported; a mismatch elsewhere fails the check.
#include <algorithm>
#include <cmath>

#include "gpu/ops.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/gpu/sample_state.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

namespace {

// ~10 ulps of a probability near 1: several times the error of f32 exp and of a float-float sum.
constexpr double kMargin = 1e-5;

struct SamplingCase {
  const char* name;
  SamplerParams params;
};

std::vector<SamplingCase> sampling_cases() {
  SamplerParams defaults;  // top_k 40, top_p 0.95, min_p 0.05: the filters a sampled run gets by default
  defaults.temperature = 0.8f;
  SamplerParams top_k_only = defaults;
  top_k_only.temperature = 1.5f;
  top_k_only.top_k = 128;
  top_k_only.top_p = 1.0f;
  top_k_only.min_p = 0.0f;
  SamplerParams penalized = defaults;
  penalized.temperature = 0.7f;
  penalized.top_k = 64;
  penalized.top_p = 0.5f;
  penalized.min_p = 0.1f;
  penalized.repeat_penalty = 1.3f;
  penalized.repeat_last_n = 48;
  SamplerParams greedy_penalized = defaults;
  greedy_penalized.greedy = true;
  greedy_penalized.repeat_penalty = 1.5f;
  SamplerParams top_p_only = defaults;
  top_p_only.temperature = 1.0f;
  top_p_only.top_k = 100;
  top_p_only.top_p = 0.9f;
  top_p_only.min_p = 0.0f;
  return {{"temp 0.8 top_k 40 top_p 0.95 min_p 0.05", defaults},
          {"temp 1.5 top_k 128", top_k_only},
          {"temp 0.7 top_k 64 top_p 0.5 min_p 0.1 penalty 1.3/48", penalized},
          {"greedy penalty 1.5/64", greedy_penalized},
          {"temp 1 top_k 100 top_p 0.9", top_p_only}};
}

}  // namespace

double sampling_boundary_distance(std::span<const float> logits_in, std::span<const int32_t> history,
                                  const SamplerParams& sp, float u) {
  std::vector<float> logits(logits_in.begin(), logits_in.end());
  const int64_t n = static_cast<int64_t>(logits.size());
  std::vector<bool> penalized(logits.size(), false);
  double dist = 1e30;
  if (sp.repeat_penalty != 1.0f && sp.repeat_last_n > 0) {  // the CPU's penalty, on the last repeat_last_n
    const size_t n_recent = std::min(history.size(), static_cast<size_t>(sp.repeat_last_n));
    std::vector<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(n_recent), history.end());
    std::sort(seen.begin(), seen.end(), [](int32_t a, int32_t b) { return a < b; });
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n) continue;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / sp.repeat_penalty : l * sp.repeat_penalty;
      penalized[static_cast<size_t>(id)] = true;
    }
  }
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  const bool greedy = sp.greedy || sp.temperature <= 0.0f;
  size_t keep = greedy ? 1 : (sp.top_k > 0 && sp.top_k < n ? static_cast<size_t>(sp.top_k) : order.size());
  // The order of the kept candidates and the cut after them, where a penalized logit (a division on the GPU
  // too) may round differently. Equal logits treated alike stay equal on both sides (ties go by id).
  for (size_t i = 0; i + 1 < std::min(keep + 1, order.size()); ++i) {
    const size_t a = static_cast<size_t>(order[i]), b = static_cast<size_t>(order[i + 1]);
    if (penalized[a] == penalized[b] && logits_in[a] == logits_in[b]) continue;
    if (penalized[a] || penalized[b]) dist = std::min(dist, static_cast<double>(logits[a]) - logits[b]);
  }
  if (greedy) return dist;
  auto probs = [&](float temperature) {
    std::vector<float> p(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) {
      p[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
      sum += p[i];
    }
    for (float& x : p) x = static_cast<float>(x / sum);
    return p;
  };
  if (sp.top_p < 1.0f) {
    const std::vector<float> p = probs(1.0f);
    double cumulative = 0;
    size_t cut = 0;
    while (cut < keep) {
      cumulative += p[cut++];
      dist = std::min(dist, std::fabs(cumulative - sp.top_p));
      if (cumulative >= sp.top_p) break;
    }
    keep = std::max<size_t>(cut, 1);
  }
  if (sp.min_p > 0.0f) {
    const float threshold = logits[order[0]] + std::log(sp.min_p);
    size_t cut = 1;
    for (; cut < keep; ++cut) {
      dist = std::min(dist, std::fabs(static_cast<double>(logits[order[cut]]) - threshold));
      if (logits[order[cut]] < threshold) break;
    }
    keep = cut;
  }
  const std::vector<float> p = probs(sp.temperature);
  float cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += p[i];
    dist = std::min(dist, std::fabs(static_cast<double>(cumulative) - u));
    if (u < cumulative) break;
  }
  return dist;
}

Status check_sampling_ops(Ops& ops, uint64_t seed, std::vector<OpCheck>& out) {
  Rng rng(seed ^ 0x5a3d1e);
  for (uint32_t n : {17u, 3000u}) {
    SOTTO_ASSIGN(BufferHandle logits_buf, ops.buffer(n * 4ull, "logits"));
    SOTTO_ASSIGN(BufferHandle state_buf, ops.buffer(Ops::kSampleStateBytes, "sampling state"));
    SOTTO_ASSIGN(BufferHandle cand_buf, ops.buffer(Ops::sample_candidates_bytes(n), "candidates"));
    SOTTO_ASSIGN(BufferHandle tok_buf, ops.buffer(16, "tok"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.sample(plan, logits_buf, n, state_buf, cand_buf, tok_buf));
    for (SamplingCase c : sampling_cases()) {
      if (n < 100 && c.params.top_k >= 100) c.params.top_k = 0;  // off: all 17 kept, as the CPU sorts them
      constexpr int kTrials = 6;
      int mismatches = 0, near_boundary = 0;
      for (int t = 0; t < kTrials; ++t) {
        // Logits spread from flat (scale 1) to peaked (scale 12), some tied; a history with repeats and an id
        // outside the vocabulary.
        const float scale = 1.0f + 11.0f * static_cast<float>(t) / (kTrials - 1);
        std::vector<float> logits(n);
        for (float& l : logits) l = (rng.next_unit() * 2.0f - 1.0f) * scale;
        logits[rng.next_u64() % n] = logits[rng.next_u64() % n];
        std::vector<int32_t> history;
        for (int i = 0; i < 80; ++i) history.push_back(static_cast<int32_t>(rng.next_u64() % n));
        // The best few too, so that the penalty changes what is drawn.
        std::vector<int32_t> ids(n);
        for (uint32_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
        std::partial_sort(ids.begin(), ids.begin() + 4, ids.end(),
                          [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
        history.insert(history.end(), ids.begin(), ids.begin() + 4);
        history.push_back(static_cast<int32_t>(n) + 5);
        history.push_back(history[3]);
        SamplerParams sp = c.params;
        sp.seed = rng.next_u64();
        Sampler sampler(sp);
        const float u = (sp.greedy || sp.temperature <= 0.0f) ? 0.0f : Rng(sp.seed).next_unit();
        const int32_t want = sampler.sample(logits, history);

        SOTTO_ASSIGN(std::vector<uint32_t> state, sample_state(sp, n, u, history));
        SOTTO_TRY(ops.device().write_buffer(logits_buf, 0, logits.data(), n * 4ull));
        SOTTO_TRY(ops.device().write_buffer(state_buf, 0, state.data(), state.size() * 4));
        SOTTO_TRY(ops.device().run(plan));
        int32_t got = -1;
        SOTTO_TRY(ops.read(tok_buf, 0, &got, 4));
        const double dist = sampling_boundary_distance(logits, history, sp, u);
        if (dist < kMargin)
          ++near_boundary;
        else if (got != want)
          ++mismatches;
      }
      out.push_back({"sample",
                     cat("n ", n, " ", c.name, " (", kTrials, " draws, ", near_boundary, " near a boundary)"),
                     static_cast<double>(mismatches), 0, mismatches == 0});
    }
    for (BufferHandle b : {logits_buf, state_buf, cand_buf, tok_buf}) ops.device().destroy_buffer(b);
  }
  return {};
}

}  // namespace sotto::gpu
