// sotto_llm_path_diff: do the prompt path and the token-by-token path compute the same logits? Runs the ids
// once as one prompt and once as a prompt of the first SPLIT ids followed by the rest one token at a time,
// then prints the largest logit difference at the last position and both sides' two best tokens. A
// difference beyond float order (~1e-5 of the logits' scale) means the two paths compute different functions.
//
//   sotto_llm_path_diff MODEL.gguf ID,ID,... [--split K] [--threads T]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "io/file.h"
#include "io/gguf.h"
#include "models/llm/llama.h"

namespace {

std::vector<int32_t> parse_ids(std::string_view s) {
  std::vector<int32_t> ids;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    ids.push_back(std::atoi(std::string(s.substr(0, comma)).c_str()));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return ids;
}

void print_top2(const char* what, const std::vector<float>& logits) {
  size_t a = 0, b = 1;
  if (logits[b] > logits[a]) std::swap(a, b);
  for (size_t i = 2; i < logits.size(); ++i) {
    if (logits[i] > logits[a]) {
      b = a;
      a = i;
    } else if (logits[i] > logits[b]) {
      b = i;
    }
  }
  std::printf("%s: %zu (%.6f)  %zu (%.6f)  margin %.6f\n", what, a, static_cast<double>(logits[a]), b,
              static_cast<double>(logits[b]), static_cast<double>(logits[a] - logits[b]));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sotto_llm_path_diff MODEL.gguf ID,ID,... [--split K] [--threads T]\n");
    return 2;
  }
  const std::vector<int32_t> ids = parse_ids(argv[2]);
  int split = 1, threads = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--split") split = std::atoi(argv[i + 1]);
    if (std::string_view(argv[i]) == "--threads") threads = std::atoi(argv[i + 1]);
  }
  split = std::clamp(split, 1, static_cast<int>(ids.size()));
  auto file = sotto::MappedFile::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.message().c_str());
    return 1;
  }
  auto gguf = sotto::parse_gguf(file->bytes());
  if (!gguf.ok()) {
    std::fprintf(stderr, "%s\n", gguf.message().c_str());
    return 1;
  }
  auto weights = sotto::load_llama(*gguf);
  if (!weights.ok()) {
    std::fprintf(stderr, "%s\n", weights.message().c_str());
    return 1;
  }
  sotto::ThreadPool pool(threads);
  const int n_ctx = static_cast<int>(ids.size()) + 8;
  std::vector<float> whole, stepped;
  {
    auto ctx = sotto::make_llama_context(*weights, n_ctx);
    auto logits = sotto::forward(pool, *weights, *ctx, ids);
    if (!logits.ok()) return 1;
    whole.assign(logits->begin(), logits->end());
  }
  {
    auto ctx = sotto::make_llama_context(*weights, n_ctx);
    auto logits = sotto::forward(pool, *weights, *ctx, std::span<const int32_t>(ids.data(), split));
    for (size_t i = static_cast<size_t>(split); logits.ok() && i < ids.size(); ++i)
      logits = sotto::forward(pool, *weights, *ctx, std::span<const int32_t>(ids.data() + i, 1));
    if (!logits.ok()) return 1;
    stepped.assign(logits->begin(), logits->end());
  }
  float max_diff = 0.0f;
  for (size_t i = 0; i < whole.size(); ++i) max_diff = std::max(max_diff, std::fabs(whole[i] - stepped[i]));
  std::printf("max |logit difference| %.3g\n", static_cast<double>(max_diff));
  print_top2("as one prompt     ", whole);
  print_top2("token by token    ", stepped);
  return 0;
}
