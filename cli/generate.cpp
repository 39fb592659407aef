// sotto generate / chat / bench llm: the language model from a GGUF file, on the CPU or (--backend webgpu)
// the GPU. generate and chat go through the C API (api/sotto.h), as the web engine does, so both print what
// the page computes; bench llm measures the forward pass itself (bench --backend webgpu: cli/gpu.cpp).
//
//   generate -m FILE (-p PROMPT | --prompt-ids 1,2,3) [-n N] [--greedy | --temp T --top-k K --top-p P
//            --min-p P --repeat-penalty R --seed S] [--stop STR] [--ctx N] [--threads T] [--top-logprobs N]
//            [--json] [--backend cpu|webgpu [--attention f16|f32]]
//   chat [-m FILE] [--system TEXT] [--greedy | --temp T --seed S] [-n N] [--ctx N] [--threads T]
//        [--backend cpu|webgpu [--attention f16|f32]]
//   bench llm -m FILE [--threads T] [--repeats R] [--json] [--backend cpu|webgpu]
//
// Greedy is the default on both backends (SamplerParams); --temp T > 0 samples, on the GPU with the CPU
// Sampler's chain and draws.
//
// --prompt-ids feeds token ids straight to the model (BOS included if wanted), so the model can be checked
// against llama.cpp independently of the tokenizer. --json prints one object:
//   {"prompt", "prompt_ids", "ids" (generated only), "text", "stop", "prefill_ms", "decode_tokens_per_s",
//    "top_logprobs" (first step, with --top-logprobs)}
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/clock.h"
#include "api/sotto.h"
#include "commands.h"
#include "io/describe.h"
#include "io/file.h"
#include "io/gguf.h"
#include "llm_turn.h"
#include "models/llm/generate.h"
#include "models/llm/llama.h"
#include "options.h"
#include "text/tokenizer.h"

namespace sotto::cli {

namespace {

void print(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// "1,403,407" or the JSON array "[1, 403, 407]" (as `sotto tokenize` prints).
std::optional<std::vector<int32_t>> parse_ids(std::string_view s) {
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  std::string compact;
  for (char c : s)
    if (c != ' ') compact.push_back(c);
  s = compact;
  std::vector<int32_t> ids;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    auto v = parse_whole("", "", s.substr(0, comma), 0, 2147483647);
    if (!v) return std::nullopt;
    ids.push_back(static_cast<int32_t>(*v));
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  }
  return ids;
}

// The options generate and chat share, parsed in one place so both take the same names and ranges.
struct LlmOptions {
  std::string model_path;
  int threads = 0;
  int n_ctx = 0;
  GenerateOptions generation;
  std::vector<std::string_view> filters_given;  // sampling filters named on the command line
};

// Takes option `a` (its value from `args`) when it is one of the shared ones: true when taken. min_tokens is
// -n's lower end (generate may write 0 tokens; a chat reply at least 1).
Result<bool> take_llm_option(std::string_view a, ArgCursor& args, LlmOptions& o, int min_tokens) {
  SamplerParams& p = o.generation.sampling;
  if (a == "-m" || a == "--model") {
    SOTTO_ASSIGN(const std::string_view v, args.value(a));
    o.model_path = std::string(v);
  } else if (a == "-n" || a == "--n-predict") {
    SOTTO_ASSIGN(const int64_t v, args.whole(a, min_tokens, 1000000));
    o.generation.max_new_tokens = static_cast<int>(v);
  } else if (a == "--threads") {
    SOTTO_ASSIGN(const int64_t v, args.whole(a, 1, 256));
    o.threads = static_cast<int>(v);
  } else if (a == "--ctx") {
    SOTTO_ASSIGN(const int64_t v, args.whole(a, 1, 1 << 20));
    o.n_ctx = static_cast<int>(v);
  } else if (a == "--greedy") {
    p.greedy = true;
  } else if (a == "--temp") {
    SOTTO_ASSIGN(const double v, args.number(a, 0, 100));
    p.temperature = static_cast<float>(v);
  } else if (a == "--top-k") {
    SOTTO_ASSIGN(const int64_t v, args.whole(a, 0, 1000000));  // 0: off
    p.top_k = static_cast<int>(v);
    o.filters_given.push_back(a);
  } else if (a == "--top-p") {
    SOTTO_ASSIGN(const double v, args.number(a, 0, 1));  // 1: off
    p.top_p = static_cast<float>(v);
    o.filters_given.push_back(a);
  } else if (a == "--min-p") {
    SOTTO_ASSIGN(const double v, args.number(a, 0, 1));  // 0: off
    p.min_p = static_cast<float>(v);
    o.filters_given.push_back(a);
  } else if (a == "--repeat-penalty") {
    SOTTO_ASSIGN(const double v, args.number(a, 0, 100, true));  // 1: off
    p.repeat_penalty = static_cast<float>(v);
  } else if (a == "--seed") {
    SOTTO_ASSIGN(p.seed, args.seed(a));
  } else if (a == "--stop") {
    SOTTO_ASSIGN(const std::string_view v, args.value(a));
    o.generation.stop_strings.emplace_back(v);
  } else {
    return false;
  }
  return true;
}

// Filters without a temperature change nothing (greedy is the default): say so rather than ignore them.
void note_unused_filters(std::string_view command, const LlmOptions& o) {
  const SamplerParams& p = o.generation.sampling;
  if (o.filters_given.empty() || (!p.greedy && p.temperature > 0.0f)) return;
  std::fprintf(stderr,
               "sotto: %.*s: note: %.*s applies only when sampling (--temp T > 0); decoding is greedy\n",
               static_cast<int>(command.size()), command.data(), static_cast<int>(o.filters_given[0].size()),
               o.filters_given[0].data());
}

// The model file and its weights (bench llm measures the forward pass itself, not the C API); the mapping
// must outlive the parsed views.
struct LoadedModel {
  MappedFile file;
  GgufFile gguf;
  LlamaWeights weights;
};

Result<LoadedModel> load_model(const std::string& path) {
  LoadedModel m;
  SOTTO_ASSIGN(m.file, MappedFile::open(path));
  auto gguf = parse_gguf(m.file.bytes());
  if (!gguf) return error(path, ": ", gguf.message());
  m.gguf = std::move(gguf).value();
  auto weights = load_llama(m.gguf);
  if (!weights) return error(path, ": ", weights.message());
  m.weights = std::move(weights).value();
  return m;
}

// The tokens do not depend on the thread count (threads split rows and heads, never a sum), so use the
// cores, up to 8: past that, decoding is limited by memory bandwidth.
int default_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

// --backend cpu|webgpu anywhere in args: true for webgpu; the option is removed from `rest`.
Result<bool> take_backend(std::span<char* const> args, std::vector<char*>& rest) {
  bool webgpu = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::string_view(args[i]) != "--backend") {
      rest.push_back(args[i]);
      continue;
    }
    const std::string_view v = i + 1 < args.size() ? std::string_view(args[++i]) : std::string_view();
    if (v != "cpu" && v != "webgpu") return error("--backend must be cpu or webgpu, not '", v, "'");
    webgpu = v == "webgpu";
  }
  return webgpu;
}

// --attention f16|f32 in `rest` (removed from it): the GPU backend's options (sotto_llm_set_gpu_options);
// only with --backend webgpu.
Result<int32_t> take_gpu_options(std::vector<char*>& rest, bool webgpu) {
  int32_t options = 0;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (std::string_view(rest[i]) != "--attention") continue;
    const std::string_view v = i + 1 < rest.size() ? std::string_view(rest[i + 1]) : std::string_view();
    if (v != "f16" && v != "f32") return error("--attention must be f16 or f32, not '", v, "'");
    if (!webgpu) return error("--attention is an option of --backend webgpu");
    options = v == "f32" ? SOTTO_GPU_ATTENTION_F32 : 0;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i),
               rest.begin() + static_cast<std::ptrdiff_t>(i) + 2);
    --i;
  }
  return options;
}

using LlmHandle = std::unique_ptr<SottoLlm, void (*)(SottoLlm*)>;

// A C API handle with the model of `file` (which must outlive it) on the CPU or the GPU.
Result<LlmHandle> open_llm(const MappedFile& file, const std::string& path, int n_ctx, int threads,
                           bool webgpu, int32_t gpu_options) {
  LlmHandle llm(sotto_llm_create(threads), sotto_llm_destroy);
  if (!llm) return error("llm: out of memory");
  if (sotto_llm_set_gpu_options(llm.get(), gpu_options) != SOTTO_OK)
    return error(path, ": ", sotto_llm_last_error(llm.get()));
  if (sotto_llm_load_on(llm.get(), file.bytes().data(), file.bytes().size(), n_ctx,
                        webgpu ? SOTTO_BACKEND_WEBGPU : SOTTO_BACKEND_CPU) != SOTTO_OK)
    return error(path, ": ", sotto_llm_last_error(llm.get()));
  return llm;
}

Result<std::vector<int32_t>> tokenize(SottoLlm* llm, std::string_view text, bool add_special,
                                      bool parse_special) {
  std::vector<int32_t> ids(text.size() + 8);
  for (;;) {
    const int32_t n = sotto_llm_tokenize(llm, text.data(), text.size(), add_special, parse_special,
                                         ids.data(), static_cast<int32_t>(ids.size()));
    if (n < 0) return error(sotto_llm_last_error(llm));
    const bool fits = static_cast<size_t>(n) <= ids.size();
    ids.resize(static_cast<size_t>(n));
    if (fits) return ids;
  }
}

// Ctrl-C in a chat: during a reply it stops the reply (the loop below checks the flag after each token) and
// the conversation goes on; at the prompt it ends the chat, as llama.cpp's CLI does. Only the flag is touched
// in the handler (and, at the prompt, write and _exit, which are async-signal-safe).
volatile std::sig_atomic_t g_replying = 0;
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) {
  if (g_replying) {
    g_interrupted = 1;
    return;
  }
  const char newline = '\n';
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, &newline, 1);
  _exit(130);  // 128 + SIGINT, as a shell reports it
}

void install_interrupt_handler() {
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes carry on; the reply loop looks at the flag
  sigaction(SIGINT, &action, nullptr);
}

// Standard input line by line, through read(2) rather than stdio: Ctrl-C at the prompt must reach the handler
// while the read blocks, and ThreadSanitizer holds a signal back until the next call it intercepts, which
// glibc's stdio-internal reads are not.
class StdinLines {
 public:
  // The next line without its newline; false at the end of input (a last unterminated line is still given).
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      for (; begin_ < end_; ++begin_) {
        if (buf_[begin_] == '\n') {
          ++begin_;
          return true;
        }
        line.push_back(buf_[begin_]);
      }
      const ssize_t n = read(STDIN_FILENO, buf_, sizeof buf_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return !line.empty();
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
  }

 private:
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

// One generation through the C API: begin, then steps until done, printing the text as it comes. With
// `interrupted` (chat), Ctrl-C stops it after the current token and sets *interrupted.
Status write_reply(SottoLlm* llm, std::span<const int32_t> ids, const GenerateOptions& options,
                   bool keep_cache, bool stream, bool* interrupted = nullptr) {
  std::string stops;
  for (const std::string& s : options.stop_strings) stops += s + '\0';
  const SamplerParams& p = options.sampling;
  const SottoSampling sampling{
      p.greedy ? 1 : 0, p.temperature,          p.top_k, p.top_p, p.min_p, p.repeat_penalty,
      p.repeat_last_n,  options.max_new_tokens, p.seed};
  if (sotto_llm_begin(llm, ids.data(), ids.size(), &sampling, stops.data(), stops.size(),
                      keep_cache ? 1 : 0) != SOTTO_OK)
    return error(sotto_llm_last_error(llm));
  if (interrupted) {
    g_interrupted = 0;
    g_replying = 1;
  }
  Status status;
  for (SottoStep step{}; !step.done;) {
    if (interrupted && g_interrupted) {  // the last token stays the conversation's (sotto_llm_begin)
      *interrupted = true;
      break;
    }
    if (sotto_llm_step(llm, &step) != SOTTO_OK) {
      status = error(sotto_llm_last_error(llm));
      break;
    }
    if (stream) print(std::string_view(step.text, step.text_bytes));
  }
  g_replying = 0;
  return status;
}

// A string field of a flat JSON object made by the C API (its values are json_quote()d), unescaped only
// for what chat prints (the format's name).
std::string json_field(std::string_view json, std::string_view key) {
  const std::string pattern = cat("\"", key, "\":\"");
  const size_t at = json.find(pattern);
  if (at == std::string_view::npos) return "";
  const size_t start = at + pattern.size();
  const size_t end = json.find('"', start);
  return std::string(json.substr(start, end == std::string_view::npos ? 0 : end - start));
}

}  // namespace

int run_generate(std::span<char* const> all_args) {
  std::vector<char*> rest;
  auto webgpu = take_backend(all_args, rest);
  if (!webgpu) return usage_error(cat("generate: ", webgpu.message()));
  auto gpu_options = take_gpu_options(rest, *webgpu);
  if (!gpu_options) return usage_error(cat("generate: ", gpu_options.message()));
  std::string prompt;
  std::optional<std::vector<int32_t>> prompt_ids;
  LlmOptions o;
  o.threads = default_threads();
  o.generation.now_ms = now_ms;
  int top_logprobs = 0;
  bool json = false, have_prompt = false;
  for (ArgCursor args("generate", rest); !args.done();) {
    const std::string_view a = args.next();
    auto shared = take_llm_option(a, args, o, 0);
    if (!shared) return usage_error(shared.message());
    if (*shared) continue;
    if (a == "-p" || a == "--prompt") {
      auto v = args.value(a);
      if (!v) return usage_error(v.message());
      prompt = std::string(*v);
      have_prompt = true;
    } else if (a == "--prompt-ids") {
      auto v = args.value(a);
      if (!v || !(prompt_ids = parse_ids(*v)))
        return usage_error("generate: --prompt-ids needs ids like 1,403,407 or [1,403,407]");
    } else if (a == "--json") {
      json = true;
    } else if (a == "--top-logprobs") {
      auto v = args.whole(a, 0, 1000);
      if (!v) return usage_error(v.message());
      top_logprobs = static_cast<int>(*v);
    } else {
      return usage_error(cat("generate: unknown option '", a, "'"));
    }
  }
  const std::string& model_path = o.model_path;
  const GenerateOptions& options = o.generation;
  const int threads = o.threads, n_ctx = o.n_ctx;
  if (model_path.empty()) return usage_error("generate: no model given (-m FILE)");
  if (!have_prompt && !prompt_ids)
    return usage_error("generate: no prompt given (-p PROMPT or --prompt-ids)");
  note_unused_filters("generate", o);

  // Through the C API (api/sotto.h), as the web engine does: both print the same JSON by construction.
  auto file = MappedFile::open(model_path);
  if (!file) return fail(file.message());
  auto llm = open_llm(*file, model_path, n_ctx, threads, *webgpu, *gpu_options);
  if (!llm) return fail(llm.message());
  std::vector<int32_t> ids;
  if (prompt_ids) {
    ids = *prompt_ids;
  } else {
    auto tokens = tokenize(llm->get(), prompt, true, false);
    if (!tokens) return fail(cat(model_path, ": ", tokens.message()));
    ids = std::move(tokens).value();
  }
  if (ids.empty()) return fail("llm: empty prompt (no tokens to start from)");
  SottoLlm* h = llm->get();
  if (top_logprobs > 0 && !sotto_llm_top_logprobs(h, ids.data(), ids.size(), top_logprobs, nullptr))
    return fail(sotto_llm_last_error(h));
  if (auto s = write_reply(h, ids, options, false, !json); !s) return fail(s.message());
  if (json) {
    size_t bytes = 0;
    const char* text = sotto_llm_result_json(h, prompt.data(), prompt.size(), &bytes);
    print(cat(std::string_view(text, bytes), "\n"));
  } else {
    SottoTimings t;
    sotto_llm_timings(h, &t);
    print("\n");
    std::fprintf(stderr, "prompt: %d tokens in %.1f ms; wrote %d tokens, %.1f tokens/s%s\n", t.n_prompt,
                 t.prefill_ms, t.n_generated, t.decode_tokens_per_s,
                 !*webgpu                                   ? ""
                 : (*gpu_options & SOTTO_GPU_ATTENTION_F32) ? " (webgpu, attention summing in f32)"
                                                            : " (webgpu, attention summing in f16)");
  }
  return kExitOk;
}

// The default chat model: the best instruction-tuned model scripts/get-models.sh fetches (Qwen2.5-Coder-0.5B-
// Instruct; the Gemma 3 270M it also fetches is a base model). Looked for in ./models, then in the models/ of
// the repository the binary was built in (build/bin/sotto -> ../../models).
namespace {

constexpr const char* kDefaultChatModel = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

std::optional<std::string> find_default_chat_model() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> candidates = {fs::path("models") / kDefaultChatModel};
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path().parent_path() / "models" / kDefaultChatModel);
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return p.string();
  return std::nullopt;
}

}  // namespace

// chat: one line of stdin is one user turn; the reply streams to stdout. The KV cache holds the whole
// conversation, so each turn prefills only its own new tokens. When the conversation outgrows the context,
// the oldest turns are dropped (the system prompt stays: sotto_llm_begin) and the chat goes on; a reply that
// fills the context stops there and says so. A turn that fails (one line longer than the whole context) is
// reported and the chat goes on.
int run_chat(std::span<char* const> all_args) {
  std::vector<char*> rest;
  auto webgpu = take_backend(all_args, rest);
  if (!webgpu) return usage_error(cat("chat: ", webgpu.message()));
  auto gpu_options = take_gpu_options(rest, *webgpu);
  if (!gpu_options) return usage_error(cat("chat: ", gpu_options.message()));
  std::string system;
  bool have_system = false;
  LlmOptions o;
  o.threads = default_threads();
  o.n_ctx = 4096;
  o.generation.max_new_tokens = 512;
  for (ArgCursor args("chat", rest); !args.done();) {
    const std::string_view a = args.next();
    auto shared = take_llm_option(a, args, o, 1);
    if (!shared) return usage_error(shared.message());
    if (*shared) continue;
    if (a == "--system") {
      auto v = args.value(a);
      if (!v) return usage_error(v.message());
      system = std::string(*v);
      have_system = true;
    } else {
      return usage_error(cat("chat: unknown option '", a, "'"));
    }
  }
  std::string& model_path = o.model_path;
  const GenerateOptions& options = o.generation;
  const int threads = o.threads, n_ctx = o.n_ctx;
  note_unused_filters("chat", o);
  if (model_path.empty()) {
    const std::optional<std::string> found = find_default_chat_model();
    if (!found)
      return fail(cat("chat: no -m FILE given and the default model models/", kDefaultChatModel,
                      " is not there; fetch it with: bash scripts/get-models.sh"));
    model_path = *found;
    std::fprintf(stderr, "chat: model %s\n", model_path.c_str());
  }
  auto file = MappedFile::open(model_path);
  if (!file) return fail(file.message());
  // At most the model's training context: -n_ctx asks for min(n_ctx, training context).
  auto llm = open_llm(*file, model_path, -n_ctx, threads, *webgpu, *gpu_options);
  if (!llm) return fail(llm.message());
  SottoLlm* h = llm->get();
  size_t info_bytes = 0;
  const char* info_text = sotto_llm_info_json(h, &info_bytes);
  const std::string info(info_text ? info_text : "", info_text ? info_bytes : 0);
  if (!sotto_llm_format_turn(h, "", 0, "", 0, 1, 1, nullptr))  // chat needs the file's tokenizer
    return fail(cat(model_path, ": ", sotto_llm_last_error(h)));
  std::fprintf(stderr, "chat format: %s, context %d tokens%s; one line per turn, end with Ctrl-D\n",
               json_field(info, "chat_format").c_str(), sotto_llm_n_ctx(h),
               *webgpu ? cat(", webgpu (", json_field(info, "adapter"), ")").c_str() : "");

  install_interrupt_handler();
  bool first_turn = true;
  StdinLines input;
  std::string line;
  for (;;) {
    std::fputs("> ", stderr);
    if (!input.next(line)) break;
    if (line.empty()) continue;
    // A null system prompt is the model's own default (api/sotto.h). The typed line is plain text: only
    // the chat format's markup becomes control tokens.
    auto ids = tokenize_turn(h, have_system ? &system : nullptr, line, first_turn,
                             first_turn || sotto_llm_reply_closed(h));
    if (!ids) return fail(ids.message());
    bool interrupted = false;
    if (auto s = write_reply(h, *ids, options, !first_turn, true, &interrupted); !s) {
      std::fprintf(stderr, "sotto: %s\n", s.message().c_str());
      continue;
    }
    SottoTimings t;
    sotto_llm_timings(h, &t);
    print("\n");
    if (interrupted) std::fputs("[reply stopped by Ctrl-C; Ctrl-C at the prompt ends the chat]\n", stderr);
    SottoStep last{};
    if (!interrupted && sotto_llm_step(h, &last) == SOTTO_OK && last.stop == SOTTO_STOP_CONTEXT_FULL)
      std::fputs("[the reply reached the end of the context; the next turn drops the oldest turns]\n",
                 stderr);
    std::fprintf(stderr,
                 "[%d new prompt tokens in %.0f ms, %d tokens at %.1f tokens/s, %d of %d positions used%s]\n",
                 t.n_prompt, t.prefill_ms, t.n_generated, t.decode_tokens_per_s, t.n_past, sotto_llm_n_ctx(h),
                 t.n_dropped ? cat(", ", t.n_dropped, " tokens of old turns dropped").c_str() : "");
    first_turn = false;
  }
  return kExitOk;
}

namespace {

// CPU time of the whole process (every thread), in milliseconds.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

// bench llm: prefill of 64 and 256 tokens and decode of 64 tokens after a 16-token prompt (--depth N: after
// N), median of repeats, after one untimed warm-up pass (it maps the file's pages and starts the threads).
// --turn K also times a K-token prompt appended at the depth (the next chat turn). The prompt up to the depth
// is computed once; every timed repeat cuts the cache back to it (bench/llama_capi.cpp measures llama.cpp the
// same way). --no-prefill skips the 64/256-token prefills (reported as 0). --json prints
//   {"model", "threads", "repeats", "prefill_64_ms", "prefill_256_ms", "decode_after", "decode_ms_per_token",
//    "decode_tokens_per_s"} (the wasm CLI's keys), and with --turn also "turn", "turn_ms"; natively also
//   "turn_cpu_ms" and "decode_cpu_ms_per_token", the process's CPU time (medians), which on a loaded machine
//   says more than the wall clock at one thread (with more, it counts the helpers' spinning too).
int run_bench(std::span<char* const> all_args) {
  std::vector<char*> rest;
  auto webgpu = take_backend(all_args, rest);
  if (!webgpu) return usage_error(cat("bench: ", webgpu.message()));
  const std::span<char* const> args(rest);
  if (*webgpu && !args.empty() && std::string_view(args[0]) == "llm") return run_bench_gpu(args);
  if (args.empty() || std::string_view(args[0]) != "llm")
    return usage_error("bench: say what to measure: bench llm -m FILE [--threads T] [--repeats R] [--json]");
  std::string model_path;
  int threads = default_threads(), repeats = 5;
  int n_decode_prompt = 16;  // --depth
  int n_turn = 0;            // --turn
  bool json = false, no_prefill = false;
  for (ArgCursor cursor("bench llm", args.subspan(1)); !cursor.done();) {
    const std::string_view a = cursor.next();
    Result<int64_t> v = int64_t{0};
    if (a == "-m" || a == "--model") {
      auto path = cursor.value(a);
      if (!path) return usage_error(path.message());
      model_path = std::string(*path);
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-prefill") {
      no_prefill = true;
    } else if (a == "--threads") {
      if (!(v = cursor.whole(a, 1, 256))) return usage_error(v.message());
      threads = static_cast<int>(*v);
    } else if (a == "--repeats") {
      if (!(v = cursor.whole(a, 1, 1000))) return usage_error(v.message());
      repeats = static_cast<int>(*v);
    } else if (a == "--depth") {
      if (!(v = cursor.whole(a, 1, 16384))) return usage_error(v.message());
      n_decode_prompt = static_cast<int>(*v);
    } else if (a == "--turn") {
      if (!(v = cursor.whole(a, 0, 4096))) return usage_error(v.message());
      n_turn = static_cast<int>(*v);
    } else {
      return usage_error(cat("bench llm: unknown option '", a, "'"));
    }
  }
  if (model_path.empty()) return usage_error("bench llm: no model given (-m FILE)");
  auto model = load_model(model_path);
  if (!model) return fail(model.message());
  const LlamaWeights& w = model->weights;
  ThreadPool pool(threads);
  const int n_decode = 64;
  const int n_prompt = std::max(256, n_decode_prompt + n_turn);
  auto ctx = make_llama_context(w, n_prompt + n_decode + 1);
  if (!ctx) return fail(ctx.message());

  // Fixed pseudo-random prompt ids (not all the same token, so attention is not degenerate).
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  Rng rng(42);
  for (int32_t& id : prompt) id = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(w.hp.n_vocab));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto run_prompt = [&](int n) {
    ctx->kv.clear();
    return forward(pool, w, *ctx, std::span<const int32_t>(prompt.data(), static_cast<size_t>(n)));
  };
  if (auto warm_up = run_prompt(n_decode_prompt); !warm_up) return fail(warm_up.message());

  double prefill_ms[2] = {0, 0};
  const int prefill_tokens[2] = {64, 256};
  for (int p = 0; p < (no_prefill ? 0 : 2); ++p) {
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      const double t0 = now_ms();
      auto logits = run_prompt(prefill_tokens[p]);
      if (!logits) return fail(logits.message());
      ms.push_back(now_ms() - t0);
    }
    prefill_ms[p] = median(ms);
  }
  auto at_depth = run_prompt(n_decode_prompt);
  if (!at_depth) return fail(at_depth.message());
  const int32_t first = argmax(*at_depth);
  double turn_ms = 0, turn_cpu_ms = 0;
  if (n_turn > 0) {
    std::vector<double> ms, cpu;
    for (int r = 0; r < repeats; ++r) {
      ctx->kv.n_past = n_decode_prompt;
      const double t0 = now_ms(), c0 = process_cpu_ms();
      auto logits =
          forward(pool, w, *ctx,
                  std::span<const int32_t>(prompt.data() + n_decode_prompt, static_cast<size_t>(n_turn)));
      if (!logits) return fail(logits.message());
      ms.push_back(now_ms() - t0);
      cpu.push_back(process_cpu_ms() - c0);
    }
    turn_ms = median(ms);
    turn_cpu_ms = median(cpu);
  }
  std::vector<double> decode_ms, decode_cpu;
  for (int r = 0; r < repeats; ++r) {
    ctx->kv.n_past = n_decode_prompt;
    int32_t id = first;
    const double t0 = now_ms(), c0 = process_cpu_ms();
    for (int i = 0; i < n_decode; ++i) {
      auto logits = forward(pool, w, *ctx, std::span<const int32_t>(&id, 1));
      if (!logits) return fail(logits.message());
      id = argmax(*logits);
    }
    decode_ms.push_back((now_ms() - t0) / n_decode);
    decode_cpu.push_back((process_cpu_ms() - c0) / n_decode);
  }
  const double ms_per_token = median(decode_ms);
  if (json) {
    print(cat("{\"model\":", json_quote(model_path), ",\"threads\":", threads, ",\"repeats\":", repeats,
              ",\"prefill_64_ms\":", prefill_ms[0], ",\"prefill_256_ms\":", prefill_ms[1],
              ",\"decode_after\":", n_decode_prompt, ",\"decode_ms_per_token\":", ms_per_token,
              ",\"decode_tokens_per_s\":", 1000.0 / ms_per_token,
              n_turn > 0
                  ? cat(",\"turn\":", n_turn, ",\"turn_ms\":", turn_ms, ",\"turn_cpu_ms\":", turn_cpu_ms)
                  : std::string(),
              ",\"decode_cpu_ms_per_token\":", median(decode_cpu), "}\n"));
    return kExitOk;
  }
  std::printf("%s: %s, %d layers, n_embd %d, %d threads, median of %d\n", model_path.c_str(),
              w.hp.arch.c_str(), w.hp.n_layer, w.hp.n_embd, threads, repeats);
  for (int p = 0; p < 2; ++p)
    std::printf("  prefill %3d tokens: %9.2f ms  (%.1f tokens/s)\n", prefill_tokens[p], prefill_ms[p],
                1000.0 * prefill_tokens[p] / prefill_ms[p]);
  if (n_turn > 0) std::printf("  prefill %d tokens at %d: %.2f ms\n", n_turn, n_decode_prompt, turn_ms);
  std::printf("  decode %d tokens after %d: %.1f tokens/s\n", n_decode, n_decode_prompt,
              1000.0 / ms_per_token);
  return kExitOk;
}

}  // namespace sotto::cli
