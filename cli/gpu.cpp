// sotto bench llm --backend webgpu: the language model on the GPU (models/llm/gpu/llm_gpu.h) through Dawn. (generate and
// chat run on the GPU through the C API: cli/generate.cpp.)
//
//   bench llm --backend webgpu -m FILE [--repeats R] [--timings] [--json] [--fusion on|off|auto|layers]
//                                      [--fused-grid N] [--fusion-check TOKENS] [--attention f16|f32]
//                                      [--depth N] [--fusion-head apart|fused]
//                                      [--fusion-copy WORDS]
//                                      [--layers-per-dispatch N]
//
// --attention f32: attention sums the values in f32 (models/llm/gpu/llm_gpu.h AttentionSum; not the CPU's bits).
// --depth N: decode after a prompt of N tokens (default 16), to see how decoding slows as the context grows.
//
// Prefill runs through the prompt plan and, for comparison, token by token through the decode plan (the two
// runs' logits are printed side by side). --timings adds each op's GPU time from timestamp queries (when the
// adapter has them) and the large matrix x vector ops' GB/s next to a measured buffer-copy bandwidth.
// sotto gpu-check runs the op harness (models/llm/gpu/op_check.h) on this machine's GPU, once for each kernel path it
// can take (packed dot or not, subgroup reductions or not, f16 casts or not).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "api/clock.h"
#include "commands.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu_bandwidth.h"
#include "io/describe.h"
#include "io/file.h"
#include "io/gguf.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/llama.h"
#include "models/llm/sampler.h"

namespace sotto::cli {

namespace {

std::optional<double> number(std::string_view s) {
  std::string copy(s);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

struct GpuModel {
  MappedFile file;
  GgufFile gguf;
  LlamaWeights weights;
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<gpu::LlmGpu> llm;
};

Result<std::unique_ptr<GpuModel>> open_gpu_model(const std::string& path, int n_ctx, bool timestamps,
                                                 gpu::FusionOptions fusion = {},
                                                 gpu::AttentionSum attention_sum = gpu::AttentionSum::F16) {
  auto m = std::make_unique<GpuModel>();
  SOTTO_ASSIGN(m->file, MappedFile::open(path));
  auto gguf = parse_gguf(m->file.bytes());
  if (!gguf) return error(path, ": ", gguf.message());
  m->gguf = std::move(gguf).value();
  auto weights = load_llama(m->gguf);
  if (!weights) return error(path, ": ", weights.message());
  m->weights = std::move(weights).value();
  gpu::DeviceOptions options;
  options.request_timestamps = timestamps;
  SOTTO_ASSIGN(m->device, gpu::open_device(options));
  SOTTO_ASSIGN(m->llm, gpu::LlmGpu::create(*m->device, m->weights, n_ctx, 0, fusion, attention_sum));
  return m;
}

// Runs the prompt (all but the last token only submitted) and returns the first written token.
// The prompt through the prompt plan (or, `one_by_one`, through the decode plan a token at a time); its last
// token through the decode plan, whose argmax is read back.
Result<int32_t> run_prompt(gpu::LlmGpu& llm, std::span<const int32_t> prompt, bool one_by_one = false) {
  llm.reset();
  const auto head = prompt.first(prompt.size() - 1);
  if (one_by_one) {
    for (int32_t id : head) SOTTO_TRY(llm.submit(id));
  } else {
    SOTTO_TRY(llm.submit_prompt(head));
  }
  return llm.step(prompt.back());
}

}  // namespace

int run_gpu_check(std::span<char* const> args) {
  uint64_t seed = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    std::optional<double> v;
    if (a == "--seed" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 0 && *v <= 1e15) {
      seed = static_cast<uint64_t>(*v);
    } else {
      return usage_error(cat("gpu-check: bad or unknown option '", a, "'"));
    }
  }
  auto device = gpu::open_device(gpu::DeviceOptions{});
  if (!device) return fail(device.message());
  const gpu::AdapterInfo& info = (*device)->info();
  std::printf("%s\nfeatures: shader-f16 %s, subgroups %s, timestamps %s, dot4I8Packed %s\n",
              info.description.c_str(), info.shader_f16 ? "yes" : "no", info.subgroups ? "yes" : "no",
              info.timestamp_query ? "yes" : "no", info.packed_dot ? "yes" : "no");
  const gpu::AdapterLimits& l = info.limits;
  std::printf(
      "limits: storage binding %llu bytes, %u storage buffers per stage, %u bytes of workgroup memory, "
      "%u invocations per workgroup\n",
      static_cast<unsigned long long>(l.max_storage_buffer_binding_size),
      l.max_storage_buffers_per_shader_stage, l.max_compute_workgroup_storage_size,
      l.max_compute_invocations_per_workgroup);
  // Every kernel path this device can take: the packed dot or its fallback, the subgroup reductions or the
  // workgroup-memory trees, f16 casts or the integer f32 -> f16 rounding (Ops picks the first of each where
  // the device allows it).
  const gpu::KernelFeatures best = gpu::Ops(**device).features();
  if (!info.subgroups) std::printf("subgroup reductions: skipped (the adapter lacks subgroups)\n");
  std::printf("f16 casts: %s\n", best.f16          ? "round to nearest even: checked below"
                                 : info.shader_f16 ? "skipped (they do not round to nearest even here)"
                                                   : "skipped (the adapter lacks shader-f16)");
  bool all_passed = true;
  for (bool packed_dot : {true, false}) {
    for (bool subgroups : {true, false}) {
      if (subgroups && !best.subgroups) continue;
      for (bool f16 : {true, false}) {
        if (f16 && !best.f16) continue;
        gpu::OpCheckOptions o;
        o.seed = seed;
        o.packed_dot = packed_dot;
        o.subgroups = subgroups;
        o.f16 = f16;
        auto checks = gpu::run_op_checks(**device, o);
        if (!checks) return fail(checks.message());
        std::printf("== %s, %s, %s\n%s", packed_dot ? "dot4I8Packed" : "the fallback dot",
                    subgroups ? "subgroup reductions" : "workgroup-memory reductions",
                    f16 ? "f16 casts" : "integer f16 rounding", gpu::format_op_checks(*checks).c_str());
        for (const gpu::OpCheck& c : *checks) all_passed = all_passed && c.passed;
      }
    }
  }
  std::printf("%s\n", all_passed ? "all checks passed" : "SOME CHECKS FAILED");
  return all_passed ? kExitOk : kExitFailure;
}

int run_bench_gpu(std::span<char* const> args) {
  std::string model_path;
  int repeats = 5;
  bool json = false, timings = false;
  gpu::FusionOptions fusion;
  gpu::AttentionSum attention_sum = gpu::AttentionSum::F16;
  int n_decode_prompt = 16;  // --depth
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string_view a = args[i];
    std::optional<double> v;
    if ((a == "-m" || a == "--model") && i + 1 < args.size()) {
      model_path = args[++i];
    } else if (a == "--json") {
      json = true;
    } else if (a == "--timings") {
      timings = true;
    } else if (a == "--fusion" && i + 1 < args.size() &&
               (std::string_view(args[i + 1]) == "on" || std::string_view(args[i + 1]) == "off" ||
                std::string_view(args[i + 1]) == "auto" || std::string_view(args[i + 1]) == "layers")) {
      const std::string_view m = args[++i];
      fusion.mode = m == "on"       ? gpu::FusionOptions::Mode::On
                    : m == "off"    ? gpu::FusionOptions::Mode::Off
                    : m == "layers" ? gpu::FusionOptions::Mode::Layers
                                    : gpu::FusionOptions::Mode::Auto;
    } else if (a == "--fused-grid" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 1 &&
               *v <= 65535) {
      fusion.grid = static_cast<uint32_t>(*v);
    } else if (a == "--fusion-check" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 1 &&
               *v <= 256) {
      fusion.check_tokens = static_cast<int>(*v);
    } else if (a == "--fusion-head" && i + 1 < args.size() &&
               (std::string_view(args[i + 1]) == "apart" || std::string_view(args[i + 1]) == "fused")) {
      fusion.head_apart = std::string_view(args[++i]) == "apart";
    } else if (a == "--layers-per-dispatch" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 1 &&
               *v <= 4096) {
      fusion.layers_per_dispatch = static_cast<uint32_t>(*v);
    } else if (a == "--fusion-copy" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 0 &&
               *v <= 65536) {
      fusion.max_copy_words = static_cast<uint32_t>(*v);
    } else if (a == "--repeats" && i + 1 < args.size() && (v = number(args[++i])) && *v >= 1 && *v <= 1000) {
      repeats = static_cast<int>(*v);
    } else if (a == "--attention") {  // the same words and message as generate's take_gpu_options
      const std::string_view sum = i + 1 < args.size() ? std::string_view(args[++i]) : std::string_view();
      if (sum != "f16" && sum != "f32")
        return usage_error(cat("bench llm: --attention must be f16 or f32, not '", sum, "'"));
      attention_sum = sum == "f32" ? gpu::AttentionSum::F32 : gpu::AttentionSum::F16;
    } else if (a == "--depth" && i + 1 < args.size()) {  // the same message as the CPU bench's
      v = number(args[++i]);
      if (!v || *v < 1 || *v > 16384 || *v != std::floor(*v))
        return usage_error(
            cat("bench llm: --depth must be a whole number of tokens from 1 to 16384, not '", args[i], "'"));
      n_decode_prompt = static_cast<int>(*v);
    } else {
      return usage_error(cat("bench llm --backend webgpu: bad or unknown option '", a, "'"));
    }
  }
  if (model_path.empty()) return usage_error("bench llm: no model given (-m FILE)");
  const int n_decode = 64;
  auto model = open_gpu_model(model_path, std::max(256, n_decode_prompt) + n_decode + 1, timings, fusion,
                              attention_sum);
  if (!model) return fail(model.message());
  gpu::LlmGpu& llm = *(*model)->llm;
  const LlamaWeights& w = (*model)->weights;
  std::vector<int32_t> prompt(static_cast<size_t>(std::max(256, n_decode_prompt)));
  Rng rng(42);
  for (int32_t& id : prompt) id = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(w.hp.n_vocab));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (auto warm = run_prompt(llm, std::span<const int32_t>(prompt.data(), n_decode_prompt)); !warm)
    return fail(warm.message());
  double prefill_ms[2], one_by_one_ms[2];
  const int prefill_tokens[2] = {64, 256};
  // How far the prompt plan's logits after the prompt are from the token-by-token run's (identical on
  // SwiftShader; a GPU compiler may contract a multiply-add differently in the two kernels), and whether the
  // next token is the same.
  float max_logit_diff = 0.0f, max_logit = 0.0f;
  bool same_next = true;
  for (int p = 0; p < 2; ++p) {
    std::vector<float> logits[2];
    for (bool one_by_one : {false, true}) {
      std::vector<double> ms;
      for (int r = 0; r < repeats; ++r) {
        const double t0 = now_ms();
        auto first = run_prompt(
            llm, std::span<const int32_t>(prompt.data(), static_cast<size_t>(prefill_tokens[p])), one_by_one);
        if (!first) return fail(first.message());
        ms.push_back(now_ms() - t0);
      }
      (one_by_one ? one_by_one_ms : prefill_ms)[p] = median(ms);
      auto l = llm.logits();
      if (!l) return fail(l.message());
      logits[one_by_one ? 1 : 0] = std::move(l).value();
    }
    for (size_t k = 0; k < logits[0].size() && k < logits[1].size(); ++k) {
      max_logit_diff = std::max(max_logit_diff, std::fabs(logits[0][k] - logits[1][k]));
      max_logit = std::max(max_logit, std::fabs(logits[1][k]));
    }
    same_next = same_next && argmax(logits[0]) == argmax(logits[1]);
  }
  // Decoding as generation runs it (one 4-byte readback per token, each step submitted before the previous
  // id is read: LlmGpu::decode_greedy), with the fused plan (gpu/fusion.h) when it is on and with the
  // separate dispatches, and the separate dispatches waiting for each id too (what the step ahead saves); the
  // greedy tokens of all compared.
  const bool fused = llm.fused();
  std::vector<int32_t> written[3];
  double decode_ms_per_token[3] = {0, 0, 0};  // separate ahead, fused, separate waiting
  size_t decode_dispatches[2] = {0, 0};
  for (int f : {1, 0, 2}) {
    if (f == 1 && !fused) continue;
    llm.set_fused(f == 1);
    std::vector<double> decode_ms;
    for (int r = 0; r < repeats; ++r) {
      auto next = run_prompt(llm, std::span<const int32_t>(prompt.data(), n_decode_prompt));
      if (!next) return fail(next.message());
      written[f] = {*next};
      const double t0 = now_ms();
      if (auto s = llm.decode_greedy(n_decode, &written[f], f != 2); !s) return fail(s.message());
      decode_ms.push_back((now_ms() - t0) / n_decode);
    }
    decode_ms_per_token[f] = median(decode_ms);
    if (f < 2) decode_dispatches[f] = llm.dispatches_per_token();
  }
  // The CPU's part of a step: encoding and submitting it (64 greedy steps submitted without reading any, then
  // one read). When this is near the step's time, the GPU waits for the CPU.
  double submit_us[2] = {0, 0}, submitted_ms_per_token[2] = {0, 0};
  for (int f = fused ? 1 : 0; f >= 0; --f) {
    llm.set_fused(f == 1);
    std::vector<double> submit, total;
    for (int r = 0; r < repeats; ++r) {
      auto next = run_prompt(llm, std::span<const int32_t>(prompt.data(), n_decode_prompt));
      if (!next) return fail(next.message());
      const double t0 = now_ms();
      for (int i = 0; i < n_decode; ++i)
        if (auto s = llm.submit(-1); !s) return fail(s.message());
      const double t1 = now_ms();
      if (auto s = llm.start_finish(); !s) return fail(s.message());
      int32_t last = 0;
      if (llm.finish(&last) != gpu::DeviceStatus::Ok) return fail(llm.device().last_error());
      submit.push_back(1000.0 * (t1 - t0) / n_decode);
      total.push_back((now_ms() - t0) / n_decode);
    }
    submit_us[f] = median(submit);
    submitted_ms_per_token[f] = median(total);
  }
  llm.set_fused(fused);
  const double ms_per_token = decode_ms_per_token[fused ? 1 : 0];
  const gpu::AdapterInfo& info = (*model)->device->info();

  // Per op: its dispatches in every layer replayed back to back (wall clock over many replays, so the time
  // includes each dispatch's launch and barrier, as in a token; all layers', so that the weights do not stay
  // in the last-level cache from one replay to the next, as they do not in a token), the weight bytes they
  // read per second, and the copy bandwidth measured the same way (cli/gpu_bandwidth.h). Timestamp queries, where present, give the GPU time of one
  // whole token (Dawn quantizes single timestamps too coarsely for per-dispatch numbers).
  std::string timing_text, timing_json;
  if (timings) {
    gpu::Device& device = *(*model)->device;
    std::vector<std::pair<std::string, uint64_t>> per;
    if (auto s = llm.time_step(&per); !s) return fail(s.message());
    uint64_t gpu_ns = 0;
    for (const auto& entry : per) gpu_ns += entry.second;
    auto bandwidth = measure_bandwidth(device, false);
    if (!bandwidth) return fail(bandwidth.message());
    const double copy = bandwidth->copy_gbs;
    const auto& plan = llm.plan();
    const auto& names = llm.plan_names();
    const auto& weight_bytes = llm.weight_bytes_per_dispatch();
    timing_text = cat(
        "  copy bandwidth ", copy,
        " GB/s (read + write, 256 MiB buffers, the best compute-shader copy: ", bandwidth->copy_how,
        "; reads alone ", bandwidth->read_gbs, " GB/s; the copy command ", bandwidth->copy_command_gbs,
        " GB/s)",
        per.empty() ? std::string() : cat("; GPU time of one token (timestamps) ", gpu_ns / 1000.0, " us"),
        "\n  op (every layer's dispatches, replayed)   dispatches/token   us each   us/token   GB/s   % of "
        "copy\n");
    std::vector<std::string> seen;
    double sum_us = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      if (std::find(seen.begin(), seen.end(), names[i]) != seen.end()) continue;
      seen.push_back(names[i]);
      std::vector<gpu::Dispatch> op;  // all of the token's dispatches of this op, every layer's
      uint64_t bytes = 0;
      for (size_t k = i; k < plan.size(); ++k) {
        if (names[k] != names[i]) continue;
        op.push_back(plan[k]);
        bytes += weight_bytes[k];
      }
      auto replay_ms = time_replays(device, op);
      if (!replay_ms) return fail(replay_ms.message());
      const double us = *replay_ms * 1000.0;  // per token
      const double gbs = bytes > 0 ? static_cast<double>(bytes) / (us * 1000.0) : 0.0;
      sum_us += us;
      char line[256];
      std::snprintf(line, sizeof line, "  %-40s %4zu %10.2f %10.1f", names[i].c_str(), op.size(),
                    us / static_cast<double>(op.size()), us);
      timing_text += line;
      if (gbs > 0) {
        std::snprintf(line, sizeof line, " %7.1f %6.0f%%", gbs, 100.0 * gbs / copy);
        timing_text += line;
      }
      timing_text += "\n";
      timing_json += cat(timing_json.empty() ? "" : ",", "{\"op\":", json_quote(names[i]),
                         ",\"dispatches\":", op.size(), ",\"us_per_token\":", us, ",\"gb_per_s\":", gbs, "}");
    }
    timing_text += cat("  sum of the ops' replayed times: ", sum_us,
                       " us per token (the measured decode: ", 1000.0 * ms_per_token, " us)\n");
    timing_json = cat(",\"copy_gb_per_s\":", copy, ",\"read_gb_per_s\":", bandwidth->read_gbs,
                      ",\"gpu_us_per_token\":", gpu_ns / 1000.0, ",\"ops\":[", timing_json, "]");
  }
  if (json) {
    std::printf(
        "%s\n",
        cat("{\"model\":", json_quote(model_path), ",\"backend\":\"webgpu\",\"attention_sum\":",
            attention_sum == gpu::AttentionSum::F32 ? "\"f32\"" : "\"f16\"",
            ",\"decode_after\":", n_decode_prompt, ",\"adapter\":", json_quote(info.description),
            ",\"repeats\":", repeats, ",\"prefill_64_ms\":", prefill_ms[0],
            ",\"prefill_256_ms\":", prefill_ms[1], ",\"prefill_64_token_by_token_ms\":", one_by_one_ms[0],
            ",\"prefill_256_token_by_token_ms\":", one_by_one_ms[1], ",\"prompt_batch\":", llm.prompt_batch(),
            ",\"prompt_dispatches_per_batch\":", llm.prompt_dispatches(),
            ",\"decode_ms_per_token\":", ms_per_token, ",\"decode_tokens_per_s\":", 1000.0 / ms_per_token,
            ",\"dispatches_per_token\":", llm.dispatches_per_token(),
            ",\"fusion\":", json_quote(llm.fusion_status()), ",\"unfused_decode_tokens_per_s\":",
            1000.0 / decode_ms_per_token[0], ",\"unfused_dispatches_per_token\":", decode_dispatches[0],
            ",\"fused_tokens_equal\":", fused && written[0] == written[1] ? "true" : "false",
            ",\"waiting_decode_tokens_per_s\":", 1000.0 / decode_ms_per_token[2],
            ",\"waiting_tokens_equal\":", written[0] == written[2] ? "true" : "false",
            ",\"submit_us_per_step\":", submit_us[0], ",\"fused_submit_us_per_step\":", submit_us[1],
            timing_json, "}")
            .c_str());
    return kExitOk;
  }
  std::printf("%s: %s, %d layers, n_embd %d, webgpu on %s, median of %d, attention summing in %s\n",
              model_path.c_str(), w.hp.arch.c_str(), w.hp.n_layer, w.hp.n_embd, info.description.c_str(),
              repeats, attention_sum == gpu::AttentionSum::F32 ? "f32" : "f16 (the CPU's bits)");
  for (int p = 0; p < 2; ++p)
    std::printf(
        "  prefill %3d tokens: %9.2f ms  (%.1f tokens/s; prompt plan of %u tokens, %zu dispatches per run; "
        "token "
        "by token through the decode plan: %.2f ms, %.1f tokens/s)\n",
        prefill_tokens[p], prefill_ms[p], 1000.0 * prefill_tokens[p] / prefill_ms[p], llm.prompt_batch(),
        llm.prompt_dispatches(), one_by_one_ms[p], 1000.0 * prefill_tokens[p] / one_by_one_ms[p]);
  std::printf("  prompt plan vs token by token: logits within %g (max |logit| %g), %s next token\n",
              max_logit_diff, max_logit, same_next ? "the same" : "a DIFFERENT");
  std::printf("  fusion: %s\n", llm.fusion_status().c_str());
  if (fused)
    std::printf(
        "  decode %d tokens after %d, fused: %.1f tokens/s, %zu dispatches per token; %s greedy tokens as "
        "the separate dispatches%s\n",
        n_decode, n_decode_prompt, 1000.0 / decode_ms_per_token[1], decode_dispatches[1],
        written[0] == written[1] ? "the same" : "DIFFERENT",
        // The fused plan's f32 attention walks a head's keys on one workgroup; the separate plan's splits them
        // past a chunk of keys (gpu/ops.h AttentionGpuArgs::splits): other sums, so texts may part at near-ties.
        llm.attention_sum() == gpu::AttentionSum::F32 ? " (f32 attention: the fused plan's is not split)"
                                                      : "");
  std::printf(
      "  decode %d tokens after %d%s, each step submitted before the previous id is read: %.1f tokens/s, %zu "
      "dispatches per token\n",
      n_decode, n_decode_prompt, fused ? ", separate dispatches" : "", 1000.0 / decode_ms_per_token[0],
      decode_dispatches[0]);
  std::printf("  the same waiting for each id before the next step: %.1f tokens/s; %s greedy tokens\n",
              1000.0 / decode_ms_per_token[2], written[2] == written[0] ? "the same" : "DIFFERENT");
  for (int f = fused ? 1 : 0; f >= 0; --f)
    std::printf(
        "  %s: %d steps submitted, then one read: %.1f tokens/s; the CPU's encoding and submitting: %.1f us "
        "per step\n",
        f == 1 ? "fused" : "separate dispatches", n_decode, 1000.0 / submitted_ms_per_token[f], submit_us[f]);
  std::fputs(timing_text.c_str(), stdout);
  return kExitOk;
}

}  // namespace sotto::cli
