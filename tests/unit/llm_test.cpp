// The language model as a user meets it: the stories260K fixtures (F32, Q8_0, Q4_0) write llama.cpp's exact
// greedy tokens (recorded by tools/llama_reference.mjs in tests/data/llm_reference.json), with any thread
// count, prompt as one batch or token by token, in one call or two; broken model files and prompts give one
// clear line; the sampler is deterministic per seed and its filters do what they say.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quantize_ref.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/json.h"
#include "llm_reference.h"
#include "models/llm/chat_template.h"
#include "models/llm/generate.h"
#include "models/llm/llama.h"
#include "models/llm/sampler.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::LlmReference;

// A model file held in memory with its parsed header and weights.
struct Model {
  std::vector<uint8_t> bytes;
  GgufFile gguf;
  LlamaWeights weights;
};

std::unique_ptr<Model> load_model_bytes(std::vector<uint8_t> bytes, std::string* error_message = nullptr) {
  auto m = std::make_unique<Model>();
  m->bytes = std::move(bytes);
  auto gguf = parse_gguf(m->bytes);
  if (!gguf) {
    if (error_message) *error_message = gguf.message();
    return nullptr;
  }
  m->gguf = std::move(gguf).value();
  auto w = load_llama(m->gguf);
  if (!w) {
    if (error_message) *error_message = w.message();
    return nullptr;
  }
  m->weights = std::move(w).value();
  return m;
}

std::vector<int32_t> greedy(ThreadPool& pool, const LlamaWeights& w, std::span<const int32_t> prompt, int n) {
  auto ctx = make_llama_context(w, 256);
  EXPECT_TRUE(ctx.ok()) << ctx.message();
  GenerateOptions options;
  options.max_new_tokens = n;
  options.sampling.greedy = true;
  auto r = generate(pool, w, *ctx, nullptr, prompt, {}, options);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? r->ids : std::vector<int32_t>{};
}

class StoriesFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(StoriesFixture, GreedyTokensMatchLlamaCpp) {
  const std::string file = GetParam();
  auto refs = testing::load_llm_reference(file);
  ASSERT_EQ(refs.size(), 4u) << "tests/data/llm_reference.json lacks " << file;
  auto model = load_model_bytes(testing::read_fixture("llm/" + file));
  ASSERT_TRUE(model);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const LlmReference& ref : refs) {
      EXPECT_EQ(greedy(pool, model->weights, ref.prompt_ids, static_cast<int>(ref.ids.size())), ref.ids)
          << file << " \"" << ref.prompt << "\", " << threads << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Llm, StoriesFixture,
                         ::testing::Values("stories260K.gguf", "stories260K-q8_0.gguf",
                                           "stories260K-q4_0.gguf"));

TEST(Llm, BatchPrefillEqualsTokenByTokenAndTurnsContinueTheCache) {
  auto model = load_model_bytes(testing::read_fixture("llm/stories260K-q8_0.gguf"));
  ASSERT_TRUE(model);
  const LlamaWeights& w = model->weights;
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433, 426};
  auto batch = make_llama_context(w, 64);
  auto single = make_llama_context(w, 64);
  ASSERT_TRUE(batch.ok() && single.ok());
  auto batch_logits = forward(pool, w, *batch, prompt);
  ASSERT_TRUE(batch_logits.ok()) << batch_logits.message();
  std::vector<float> expected(batch_logits->begin(), batch_logits->end());
  std::span<const float> last;
  for (int32_t id : prompt) {
    auto l = forward(pool, w, *single, std::span<const int32_t>(&id, 1));
    ASSERT_TRUE(l.ok());
    last = *l;
  }
  float max_diff = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(expected[i] - last[i]));
  EXPECT_LT(max_diff, 1e-3f);  // same arithmetic per row; only the kernels' tiling may differ
  EXPECT_EQ(argmax(expected), argmax(last));

  // Two turns on one cache (the second starting with the token the first left unprocessed) = one turn.
  const auto whole = greedy(pool, w, prompt, 20);
  auto ctx = make_llama_context(w, 64);
  GenerateOptions options;
  options.sampling.greedy = true;
  options.max_new_tokens = 8;
  auto first = generate(pool, w, *ctx, nullptr, prompt, {}, options);
  ASSERT_TRUE(first.ok());
  const int32_t carry = first->unprocessed;
  ASSERT_NE(carry, kNoToken);
  options.max_new_tokens = 12;
  auto second = generate(pool, w, *ctx, nullptr, std::span<const int32_t>(&carry, 1), {}, options);
  ASSERT_TRUE(second.ok());
  std::vector<int32_t> joined = first->ids;
  joined.insert(joined.end(), second->ids.begin(), second->ids.end());
  EXPECT_EQ(joined, whole);
}

TEST(Llm, BadPromptsFailWithOneLine) {
  auto model = load_model_bytes(testing::read_fixture("llm/stories260K.gguf"));
  ASSERT_TRUE(model);
  ThreadPool pool(1);
  auto ctx = make_llama_context(model->weights, 8);
  ASSERT_TRUE(ctx.ok());
  GenerateOptions options;
  auto empty = generate(pool, model->weights, *ctx, nullptr, {}, {}, options);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("empty prompt"), std::string::npos) << empty.message();
  const std::vector<int32_t> long_prompt(9, 300);
  auto too_long = generate(pool, model->weights, *ctx, nullptr, long_prompt, {}, options);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.message(),
            "llm: the prompt has 9 tokens but the context has room for only 8 more (8 positions, 0 used)");
  const std::vector<int32_t> bad_id = {1, 512};
  auto outside = forward(pool, model->weights, *ctx, bad_id);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.message(), "llm: token id 512 is outside the vocabulary (512)");
  EXPECT_EQ(ctx->kv.n_past, 0);  // a failed call leaves the cache as it was
}

// ---------------------------------------------------------------- broken and synthetic model files

struct TinySpec {
  std::string arch = "llama";
  std::string skip;        // tensor left out
  std::string misshape;    // tensor whose outer dimension is halved
  std::string wrong_type;  // matrix stored as i32
  bool tied_output = false;
};

// A random 1-layer model: n_embd 64, 4 heads of 16 (2 KV heads), FFN 96, vocab 40.
std::vector<uint8_t> tiny_model(const TinySpec& spec, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  GgufWriter w;
  w.add_string("general.architecture", spec.arch);
  const std::string p = spec.arch + ".";
  w.add_u32(p + "context_length", 128);
  w.add_u32(p + "embedding_length", 64);
  w.add_u32(p + "block_count", 1);
  w.add_u32(p + "feed_forward_length", 96);
  w.add_u32(p + "attention.head_count", 4);
  w.add_u32(p + "attention.head_count_kv", 2);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_f32(p + "rope.freq_base", 10000.0f);
  if (spec.arch == "gemma3") {  // layer 0 is local: il % 2 < 2 - 1
    w.add_u32(p + "attention.sliding_window", 4);
    w.add_u32(p + "attention.sliding_window_pattern", 2);
  }
  auto add = [&](const std::string& name, std::vector<int64_t> ne, DType dtype) {
    if (name == spec.skip) return;
    if (name == spec.misshape) ne.back() /= 2;
    if (name == spec.wrong_type) dtype = DType::I32;
    int64_t count = 1;
    for (int64_t d : ne) count *= d;
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = uniform(rng);
    std::vector<uint8_t> data(*dtype_bytes(dtype, static_cast<uint64_t>(count)));
    if (dtype == DType::I32) {
      std::memcpy(data.data(), values.data(), data.size());
    } else {
      quantize_row_ref(dtype, values.data(), data.data(), count);
    }
    ASSERT_TRUE(w.add_tensor(name, dtype, ne, data).ok());
  };
  add("token_embd.weight", {64, 40}, DType::Q8_0);
  add("blk.0.attn_norm.weight", {64}, DType::F32);
  add("blk.0.attn_q.weight", {64, 64}, DType::Q8_0);
  add("blk.0.attn_k.weight", {64, 32}, DType::Q4_0);
  add("blk.0.attn_v.weight", {64, 32}, DType::F16);
  if (spec.arch == "qwen2") {
    add("blk.0.attn_q.bias", {64}, DType::F32);
    add("blk.0.attn_k.bias", {32}, DType::F32);
    add("blk.0.attn_v.bias", {32}, DType::F32);
  }
  if (spec.arch == "qwen3" || spec.arch == "gemma3") {
    add("blk.0.attn_q_norm.weight", {16}, DType::F32);
    add("blk.0.attn_k_norm.weight", {16}, DType::F32);
  }
  add("blk.0.attn_output.weight", {64, 64}, DType::F32);
  add("blk.0.ffn_norm.weight", {64}, DType::F32);
  add("blk.0.ffn_gate.weight", {64, 96}, DType::Q8_0);
  add("blk.0.ffn_up.weight", {64, 96}, DType::Q8_0);
  add("blk.0.ffn_down.weight", {96, 64}, DType::F16);
  if (spec.arch == "gemma3") {
    add("blk.0.post_attention_norm.weight", {64}, DType::F32);
    add("blk.0.post_ffw_norm.weight", {64}, DType::F32);
  }
  add("output_norm.weight", {64}, DType::F32);
  if (!spec.tied_output) add("output.weight", {64, 40}, DType::Q8_0);
  return w.finish();
}

std::string load_error(const TinySpec& spec) {
  std::string message;
  auto m = load_model_bytes(tiny_model(spec), &message);
  return m ? "(loaded)" : message;
}

TEST(Llm, BrokenFilesSayWhatIsWrong) {
  TinySpec arch;
  arch.arch = "mamba";
  EXPECT_EQ(load_error(arch),
            "llm: unsupported architecture 'mamba' (supported: llama, qwen2, qwen3, gemma3)");
  TinySpec missing;
  missing.skip = "blk.0.ffn_up.weight";
  EXPECT_EQ(load_error(missing), "llm: missing tensor 'blk.0.ffn_up.weight'");
  TinySpec shape;
  shape.misshape = "blk.0.attn_q.weight";
  EXPECT_EQ(load_error(shape), "llm: tensor 'blk.0.attn_q.weight' has shape [64, 32], expected [64, 64]");
  TinySpec type;
  type.wrong_type = "blk.0.ffn_gate.weight";
  EXPECT_EQ(load_error(type),
            "llm: tensor 'blk.0.ffn_gate.weight' has type i32, which the CPU matrix kernels do not support");
  TinySpec qwen_without_bias;
  qwen_without_bias.arch = "qwen2";
  qwen_without_bias.skip = "blk.0.attn_k.bias";
  EXPECT_EQ(load_error(qwen_without_bias), "llm: missing tensor 'blk.0.attn_k.bias'");
  TinySpec gemma_without_post_norm;
  gemma_without_post_norm.arch = "gemma3";
  gemma_without_post_norm.skip = "blk.0.post_ffw_norm.weight";
  EXPECT_EQ(load_error(gemma_without_post_norm), "llm: missing tensor 'blk.0.post_ffw_norm.weight'");
  TinySpec norm_shape;
  norm_shape.misshape = "output_norm.weight";
  EXPECT_EQ(load_error(norm_shape), "llm: tensor 'output_norm.weight' has shape [32], expected [64]");
}

TEST(Llm, EveryArchitectureRunsWithMixedTypesAndTiedOutput) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3"}) {
    for (bool tied : {false, true}) {
      TinySpec spec;
      spec.arch = arch;
      spec.tied_output = tied;
      std::string message;
      auto model = load_model_bytes(tiny_model(spec), &message);
      ASSERT_TRUE(model) << arch << ": " << message;
      const LlamaHparams& hp = model->weights.hp;
      EXPECT_EQ(hp.rope_layout, std::string(arch) == "llama" ? RopeLayout::Adjacent : RopeLayout::Halves);
      EXPECT_EQ(model->weights.output.data == model->weights.token_embd.data, tied);
      if (std::string(arch) == "gemma3") {  // llama.cpp's gemma3 defaults and the file's window keys
        EXPECT_EQ(hp.ffn_activation, FfnActivation::Gelu);
        EXPECT_EQ(hp.embd_scale, std::sqrt(64.0f));
        EXPECT_EQ(hp.q_scale, 0.25f);  // 1 / sqrt(head_dim 16)
        EXPECT_EQ(hp.n_swa, 4);
        EXPECT_TRUE(hp.is_local(0));
        EXPECT_FALSE(hp.is_local(1));
        EXPECT_EQ(hp.rope_freq_base_swa, 10000.0f);
        EXPECT_EQ(model->weights.gelu_f16.size(), 65536u);
      }
      ThreadPool pool(2);
      auto ctx = make_llama_context(model->weights, 0);
      ASSERT_TRUE(ctx.ok());
      EXPECT_EQ(ctx->kv.n_ctx, 128);  // the training context by default
      const std::vector<int32_t> prompt = {3, 17, 5, 39, 0};
      auto logits = forward(pool, model->weights, *ctx, prompt);
      ASSERT_TRUE(logits.ok()) << logits.message();
      ASSERT_EQ(logits->size(), 40u);
      for (float l : *logits) ASSERT_TRUE(std::isfinite(l)) << arch;
    }
  }
}

// ---------------------------------------------------------------- chat formats

// Expected strings: what Qwen2.5's and Llama 3's Jinja chat templates render for the same messages (written
// out from the templates' text), split at the points where the conversation's turns meet.
TEST(ChatTemplate, TurnsConcatenateToTheTemplatesRendering) {
  const std::string qwen_template =
      "{%- if messages[0]['role'] == 'system' %}...{%- else %}{{- '<|im_start|>system\\nYou are Qwen, "
      "created by "
      "Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}... '<|im_start|>' ...";
  EXPECT_EQ(detect_chat_format(qwen_template), ChatFormat::ChatMl);
  const std::string system = default_system_prompt(qwen_template);
  EXPECT_EQ(system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // Turn 1, the reply "Hello!" and its <|im_end|> (sampled by the model), turn 2.
  const std::string conversation = format_user_turn(ChatFormat::ChatMl, system, "Hi", true, true) + "Hello!" +
                                   "<|im_end|>" +
                                   format_user_turn(ChatFormat::ChatMl, system, "Bye", false, true);
  EXPECT_EQ(
      conversation,
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
      "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  // A reply cut off by the length limit is closed by the next turn.
  EXPECT_EQ(format_user_turn(ChatFormat::ChatMl, "", "Bye", false, false),
            "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");

  EXPECT_EQ(detect_chat_format("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"),
            ChatFormat::Llama3);
  EXPECT_EQ(format_user_turn(ChatFormat::Llama3, "", "Hi", true, true),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_"
            "header_id|>\n\n");
  // Gemma 3 (instruction-tuned) template: no system role, the system text opens the first user turn.
  EXPECT_EQ(detect_chat_format("{{ '<start_of_turn>' + role + '\\n' + ... }}"), ChatFormat::Gemma);
  EXPECT_EQ(format_user_turn(ChatFormat::Gemma, "Be brief.", "Hi", true, true) + "Hello!<end_of_turn>" +
                format_user_turn(ChatFormat::Gemma, "Be brief.", "Bye", false, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(format_user_turn(ChatFormat::Gemma, "", "Bye", false, false),
            "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(detect_chat_format(""), ChatFormat::Plain);
  EXPECT_EQ(format_user_turn(ChatFormat::Plain, "", "Once upon a time", true, true), "Once upon a time");
}

// ---------------------------------------------------------------- sampler

TEST(Sampler, SameSeedSameTokensAndFiltersNarrowTheChoice) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(300);
  for (float& l : logits) l = normal(rng);
  const int32_t best = argmax(logits);

  auto draw = [&](SamplerParams p, int n) {
    Sampler s(p);
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(s.sample(logits, {}));
    return ids;
  };
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  EXPECT_EQ(draw(p, 200), draw(p, 200));
  SamplerParams other = p;
  other.seed = 8;
  EXPECT_NE(draw(p, 200), draw(other, 200));

  // Each filter, set to its narrowest, leaves only the most likely token.
  for (int which = 0; which < 4; ++which) {
    SamplerParams narrow = p;
    if (which == 0) narrow.top_k = 1;
    if (which == 1) narrow.top_p = 1e-6f;
    if (which == 2) narrow.min_p = 1.0f;
    if (which == 3) narrow.greedy = true;
    for (int32_t id : draw(narrow, 50)) EXPECT_EQ(id, best) << "filter " << which;
  }
  // top_k = 5 never leaves the five largest logits.
  SamplerParams top5 = p;
  top5.top_k = 5;
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int32_t id : draw(top5, 500))
    EXPECT_NE(std::find(order.begin(), order.begin() + 5, id), order.begin() + 5);
}

TEST(Sampler, DrawsFollowTheSoftmaxAndPenaltyDiscouragesRepeats) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(0.5);
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 99;
  Sampler s(p);
  int counts[3] = {};
  const int n = 60000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits, {})];
  EXPECT_NEAR(counts[0] / double(n), std::exp(1.0) / z, 0.01);
  EXPECT_NEAR(counts[1] / double(n), std::exp(2.0) / z, 0.01);
  EXPECT_NEAR(counts[2] / double(n), std::exp(0.5) / z, 0.01);

  // logit 2.0 / 2.5 = 0.8 < 1.0: with token 1 just written, greedy picks token 0.
  SamplerParams penalty;
  penalty.greedy = true;
  penalty.repeat_penalty = 2.5f;
  Sampler g(penalty);
  const std::vector<int32_t> recent = {1};
  EXPECT_EQ(g.sample(logits, recent), 0);
  EXPECT_EQ(g.sample(logits, {}), 1);
}

}  // namespace
}  // namespace sotto
