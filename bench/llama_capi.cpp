// llama.cpp's own speed through its C API: the peer `bench/llm_native.mjs` and `bench/llm_depth.mjs` measure
// sotto against. It links node-llama-cpp's prebuilt CPU libraries (the same binaries node-llama-cpp runs), so
// the figure carries no JavaScript per-token cost. Built by bench/build_llama_capi.sh; never part of the
// product build.
//
//   llama_capi -m FILE [--threads T] [--repeats R] [--depth N] [--turn K] [--backends DIR] [--no-prefill]
//              [--json]
//
// Measures what `sotto bench llm` measures, the same way: prefill of 64 and 256 tokens into an empty cache,
// then decode of 64 tokens (llama_decode one token at a time, argmax over the logits) after a prompt of
// --depth tokens (default 16), median of --repeats after one untimed warm-up. With --turn K it also times a
// K-token prompt appended at --depth (the next chat turn at that depth). Deep runs prefill to the depth once
// and cut the cache back to it (llama_memory_seq_rm) before every timed repeat, as sotto's bench does.
// --no-prefill skips the 64/256-token prefills; turn_cpu_ms and decode_cpu_ms_per_token are the process's CPU
// time (with more than one thread it counts the spinning of ggml's barriers too).
// Context: F16 K/V cache, flash attention auto, batch 512 (llama.cpp's defaults).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time of the whole process (every thread, spinning included), in milliseconds.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int usage(const char* why) {
  std::fprintf(stderr,
               "llama_capi: %s\nusage: llama_capi -m FILE [--threads T] [--repeats R] [--depth N] [--turn K] "
               "[--backends DIR] [--no-prefill] [--json]\n",
               why);
  return 2;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR || std::getenv("LLAMA_CAPI_VERBOSE")) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, backends;
  int threads = 2, repeats = 5, depth = 16, turn = 0;
  bool json = false, no_prefill = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto whole = [&](int lo, int hi, int& out) {
      const char* v = value();
      if (!v) return false;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < lo || n > hi) return false;
      out = static_cast<int>(n);
      return true;
    };
    if (a == "-m") {
      const char* v = value();
      if (!v) return usage("-m needs a file");
      model_path = v;
    } else if (a == "--backends") {
      const char* v = value();
      if (!v) return usage("--backends needs a directory");
      backends = v;
    } else if (a == "--threads") {
      if (!whole(1, 256, threads)) return usage("--threads must be 1..256");
    } else if (a == "--repeats") {
      if (!whole(1, 1000, repeats)) return usage("--repeats must be 1..1000");
    } else if (a == "--depth") {
      if (!whole(1, 32768, depth)) return usage("--depth must be 1..32768");
    } else if (a == "--turn") {
      if (!whole(0, 4096, turn)) return usage("--turn must be 0..4096");
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-prefill") {
      no_prefill = true;
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (model_path.empty()) return usage("no model given (-m FILE)");

  llama_log_set(quiet_log, nullptr);
  // The prebuilt libggml picks its CPU variant (haswell, icelake, ...) from the libraries in this directory.
#ifdef LLAMA_CAPI_BACKENDS
  if (backends.empty()) backends = LLAMA_CAPI_BACKENDS;
#endif
  if (!backends.empty())
    ggml_backend_load_all_from_path(backends.c_str());
  else
    ggml_backend_load_all();
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llama_capi: cannot load '%s'\n", model_path.c_str());
    return 1;
  }
  const int n_decode = 64;
  const int n_prompt = std::max(256, depth + turn);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_prompt + n_decode + 64);
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama_capi: cannot make a context of %u positions\n", cp.n_ctx);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  llama_memory_t mem = llama_get_memory(ctx);

  // Fixed pseudo-random ordinary ids (xorshift), not all the same so attention is not degenerate.
  std::vector<llama_token> prompt(static_cast<size_t>(n_prompt));
  uint64_t s = 42;
  for (llama_token& id : prompt) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    id = static_cast<llama_token>(s % static_cast<uint64_t>(n_vocab));
  }
  // Appends tokens [from, from + n) of the prompt at the cache's end, in batches of 512.
  auto feed = [&](int from, int n) {
    for (int at = from; at < from + n; at += 512) {
      const int k = std::min(512, from + n - at);
      if (llama_decode(ctx, llama_batch_get_one(prompt.data() + at, k)) != 0) {
        std::fprintf(stderr, "llama_capi: llama_decode failed\n");
        std::exit(1);
      }
    }
  };
  auto argmax = [&]() {
    const float* logits = llama_get_logits_ith(ctx, -1);
    return static_cast<llama_token>(std::max_element(logits, logits + n_vocab) - logits);
  };
  auto fresh = [&](int n) {
    llama_memory_clear(mem, true);
    feed(0, n);
  };

  fresh(16);  // warm-up: pages mapped, threads started
  double prefill_ms[2] = {0, 0};
  const int prefill_tokens[2] = {64, 256};
  for (int p = 0; p < (no_prefill ? 0 : 2); ++p) {
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      llama_memory_clear(mem, true);
      const double t0 = now_ms();
      feed(0, prefill_tokens[p]);
      argmax();
      ms.push_back(now_ms() - t0);
    }
    prefill_ms[p] = median(ms);
  }

  fresh(depth);
  const llama_token first = argmax();
  double turn_ms = 0, turn_cpu_ms = 0;
  if (turn > 0) {
    std::vector<double> ms, cpu;
    for (int r = 0; r < repeats; ++r) {
      llama_memory_seq_rm(mem, 0, depth, -1);
      const double t0 = now_ms(), c0 = process_cpu_ms();
      feed(depth, turn);
      argmax();
      ms.push_back(now_ms() - t0);
      cpu.push_back(process_cpu_ms() - c0);
    }
    turn_ms = median(ms);
    turn_cpu_ms = median(cpu);
  }
  std::vector<double> decode_ms, decode_cpu;
  for (int r = 0; r < repeats; ++r) {
    llama_memory_seq_rm(mem, 0, depth, -1);
    llama_token id = first;
    const double t0 = now_ms(), c0 = process_cpu_ms();
    for (int i = 0; i < n_decode; ++i) {
      if (llama_decode(ctx, llama_batch_get_one(&id, 1)) != 0) {
        std::fprintf(stderr, "llama_capi: llama_decode failed at step %d\n", i);
        return 1;
      }
      id = argmax();
    }
    decode_ms.push_back((now_ms() - t0) / n_decode);
    decode_cpu.push_back((process_cpu_ms() - c0) / n_decode);
  }
  const double ms_per_token = median(decode_ms);
  if (json) {
    std::printf(
        "{\"model\":\"%s\",\"threads\":%d,\"repeats\":%d,\"prefill_64_ms\":%.4f,\"prefill_256_ms\":%.4f,"
        "\"decode_after\":%d,\"decode_ms_per_token\":%.5f,\"decode_tokens_per_s\":%.3f,\"turn\":%d,"
        "\"turn_ms\":%.4f,\"turn_cpu_ms\":%.4f,\"decode_cpu_ms_per_token\":%.5f}\n",
        model_path.c_str(), threads, repeats, prefill_ms[0], prefill_ms[1], depth, ms_per_token,
        1000.0 / ms_per_token, turn, turn_ms, turn_cpu_ms, median(decode_cpu));
  } else {
    std::printf("%s: llama.cpp C API, %d threads, median of %d\n", model_path.c_str(), threads, repeats);
    for (int p = 0; p < 2; ++p)
      std::printf("  prefill %3d tokens: %9.2f ms  (%.1f tokens/s)\n", prefill_tokens[p], prefill_ms[p],
                  1000.0 * prefill_tokens[p] / prefill_ms[p]);
    if (turn > 0) std::printf("  prefill %d tokens at %d: %.2f ms\n", turn, depth, turn_ms);
    std::printf("  decode %d tokens after %d: %.1f tokens/s\n", n_decode, depth, 1000.0 / ms_per_token);
  }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
