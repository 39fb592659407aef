// Moonshine base on the op layer against ONNX Runtime: the encoder output and the teacher-forced decoder logits
// on the first 3 s of beckett.wav (tests/data/moonshine_beckett_3s.bin, written by
// `python3 tools/moonshine/reference.py dump tests/fixtures/audio/beckett.wav tests/data/moonshine_beckett_3s.bin 3.0`
// with ONNX Runtime 1.32), the greedy tokens, the tokenizer, and bad model files. Whole-clip transcripts are
// compared live with onnxruntime-node in tests/web/moonshine.test.mjs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/file.h"
#include "models/asr/moonshine.h"
#include "moonshine_reference.h"
#include "nn/ops.h"
#include "nn/tensor.h"
#include "test_support.h"

// Under ThreadSanitizer the model's matrix products run ~10x slower: the forward-pass tests skip there (ASan
// and the native build run them; the thread pool itself is TSan-checked by the op tests).

namespace sotto {
namespace {

using testing::read_moonshine_reference;
using testing::source_path;
using Reference = testing::MoonshineReference;

struct Loaded {
  std::unique_ptr<ThreadPool> pool;
  asr::MoonshineModel model;
};

// A model directory's three files (relative to the source tree): the package's layout by default, or the
// hub's ONNX one (ext ".onnx", tokenizer.json); nullopt when one is missing.
struct ModelFiles {
  MappedFile enc, dec, tok;
};
std::optional<ModelFiles> open_model_files(const std::string& dir, const std::string& ext = ".ort",
                                           const char* tokenizer = "tokenizer.bin") {
  const std::string d = source_path(dir);
  auto enc = MappedFile::open(d + "encoder_model" + ext);
  auto dec = MappedFile::open(d + "decoder_model_merged" + ext);
  auto tok = MappedFile::open(d + tokenizer);
  if (!enc || !dec || !tok) return std::nullopt;
  return ModelFiles{std::move(enc).value(), std::move(dec).value(), std::move(tok).value()};
}

// Loads models/moonshine-base-en once for the suite (about a second); nullptr when absent.
Loaded* model() {
  static Loaded* loaded = []() -> Loaded* {
    const std::optional<ModelFiles> f = open_model_files("models/moonshine-base-en/");
    if (!f) return nullptr;
    auto* l = new Loaded;
    l->pool = std::make_unique<ThreadPool>(2);
    auto m =
        asr::load_moonshine(f->enc.bytes(), f->dec.bytes(), f->tok.bytes(), nn::Context::cpu(l->pool.get()));
    if (!m) {
      ADD_FAILURE() << m.message();
      return nullptr;
    }
    l->model = std::move(m).value();
    return l;
  }();
  return loaded;
}

#ifdef SOTTO_TEST_UNDER_TSAN
#define SKIP_UNDER_TSAN() GTEST_SKIP() << "skipped under ThreadSanitizer (the forward pass is too slow there)"
#else
#define SKIP_UNDER_TSAN() static_cast<void>(0)
#endif

#define NEED_MODEL()                                                                                     \
  SKIP_UNDER_TSAN();                                                                                     \
  Loaded* loaded = model();                                                                              \
  if (!loaded) GTEST_SKIP() << "models/moonshine-base-en absent (bash scripts/get-models.sh moonshine)"; \
  Reference ref;                                                                                         \
  ASSERT_TRUE(read_moonshine_reference(ref)) << "tests/data/moonshine_beckett_3s.bin unreadable";        \
  const asr::MoonshineWeights& w = loaded->model.weights;                                                \
  [[maybe_unused]] nn::Context& ctx = *loaded->model.ctx

// Encoder output within 1e-3 absolute of ONNX Runtime's (measured 1.5e-4; values are layer-normed, |x| up to
// ~7; the differences come from summation order in the convolutions and matrix products).
// max |ours - ORT| over the encoder output of the reference audio (-1 when the shape is wrong).
double encoder_diff(const asr::MoonshineWeights& w, nn::Context& ctx, const Reference& ref,
                    const char* what) {
  const nn::Tensor audio = ctx.from_floats({static_cast<int64_t>(ref.audio.size())}, ref.audio);
  const nn::Tensor enc = asr::moonshine_encode(w, audio);
  auto got = ctx.to_floats(enc);
  if (enc.dim(0) != ref.frames || enc.dim(1) != ref.d_model || !got.ok()) return -1;
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < ref.encoder.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs((*got)[i] - ref.encoder[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(ref.encoder[i])));
  }
  std::printf("[ info    ] encoder (%s): %u frames, max |ours - ORT| %.3g (values up to %.3g)\n", what,
              ref.frames, max_diff, max_abs);
  return max_diff;
}

TEST(Moonshine, EncoderMatchesOnnxRuntime) {
  NEED_MODEL();
  const double diff = encoder_diff(w, ctx, ref, "float products");
  EXPECT_GE(diff, 0);
  EXPECT_LT(diff, 1e-3);
}

// The products WebAssembly runs (MoonshineLoadOptions::int16_products: the encoder's and the cross K/V's in
// int16 x int8, x rounded to int16 per row), here through the op's portable kernel (the wasm kernel gives the
// same integers: nn_check). The encoder within 5e-3 of ONNX Runtime (measured 1.9e-3, values up to 6.75: each
// product's x keeps 1/65534 of its row's largest value, through 8 layers), the teacher-forced logits within
// the float path's 5e-3, the greedy tokens ONNX Runtime's.
TEST(Moonshine, Int16ProductsStayWithinTheirBound) {
  NEED_MODEL();
  const std::optional<ModelFiles> f = open_model_files("models/moonshine-base-en/");
  ASSERT_TRUE(f);
  asr::MoonshineLoadOptions int16;
  int16.int16_products = true;
  auto m = asr::load_moonshine(f->enc.bytes(), f->dec.bytes(), f->tok.bytes(),
                               nn::Context::cpu(loaded->pool.get()), int16);
  ASSERT_TRUE(m.ok()) << m.message();
  const asr::MoonshineWeights& w16 = m->weights;
  EXPECT_EQ(w.encoder[0].fc1.w.dtype(), DType::F32);  // the suite's model: float products natively
  EXPECT_EQ(w16.encoder[0].fc1.w.dtype(), DType::I16);
  EXPECT_EQ(w16.decoder[0].cross_k.w.dtype(), DType::I16);
  const double diff = encoder_diff(w16, ctx, ref, "int16 products");
  EXPECT_GE(diff, 0);
  EXPECT_LT(diff, 5e-3);
  const nn::Tensor encoded = ctx.from_floats({ref.frames, ref.d_model}, ref.encoder);
  asr::MoonshineDecoderState state = asr::moonshine_decoder_start(w16, encoded);
  auto logits = ctx.to_floats(asr::moonshine_decode(w16, state, ref.tokens, true));
  ASSERT_TRUE(logits.ok());
  double logit_diff = 0;
  for (size_t t = 0; t < ref.tokens.size(); ++t)
    for (int j = 0; j < 16; ++j)
      logit_diff = std::max(logit_diff,
                            static_cast<double>(std::fabs((*logits)[t * ref.vocab + ref.top_ids[t * 16 + j]] -
                                                          ref.top_values[t * 16 + j])));
  EXPECT_LT(logit_diff, 5e-3);
  auto r = asr::moonshine_transcribe(w16, ref.audio);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->tokens, std::vector<int32_t>(ref.tokens.begin() + 1, ref.tokens.end()));
}

// Teacher forcing on ONNX Runtime's own encoder output and greedy tokens: every step's 16 largest logits within
// 5e-3 and the same argmax. Logits range about +-30; measured 2.0e-3, all of it from the int8 products' x
// rounded to int16 per row (nn::linear_int8_affine; 8e-6 when x stayed float, 3.5e-3 with 14 bits).
TEST(Moonshine, TeacherForcedLogitsMatchOnnxRuntime) {
  NEED_MODEL();
  const nn::Tensor enc = ctx.from_floats({ref.frames, ref.d_model}, ref.encoder);
  asr::MoonshineDecoderState state = asr::moonshine_decoder_start(w, enc);
  const nn::Tensor logits = asr::moonshine_decode(w, state, ref.tokens, true);
  ASSERT_EQ(logits.dim(0), static_cast<int64_t>(ref.tokens.size()));
  ASSERT_EQ(logits.dim(1), ref.vocab);
  // The decoder's matrices and the head are read as int8 (nn::linear_int8_affine), as the file stores them.
  EXPECT_EQ(w.decoder[0].up.w.dtype(), DType::I8);
  EXPECT_EQ(w.embedding.w.dtype(), DType::I8);
  auto got = ctx.to_floats(logits);
  ASSERT_TRUE(got.ok());
  double max_diff = 0;
  for (size_t t = 0; t < ref.tokens.size(); ++t) {
    const float* row = got->data() + t * ref.vocab;
    for (int j = 0; j < 16; ++j)
      max_diff =
          std::max(max_diff,
                   static_cast<double>(std::fabs(row[ref.top_ids[t * 16 + j]] - ref.top_values[t * 16 + j])));
    int32_t best = 0;
    for (uint32_t v = 1; v < ref.vocab; ++v)
      if (row[v] > row[best]) best = static_cast<int32_t>(v);
    EXPECT_EQ(best, ref.top_ids[t * 16]) << "step " << t;
  }
  std::printf("[ info    ] teacher-forced logits: %zu steps, max |ours - ORT| %.3g over each step's top 16\n",
              ref.tokens.size(), max_diff);
  EXPECT_LT(max_diff, 5e-3);
}

// The cache path (one token at a time) gives the teacher-forced logits, within 5e-3 (measured 2.8e-3: the rows'
// int16 roundings of x differ between the paths' slightly different float sums).
TEST(Moonshine, CachedDecodingMatchesTeacherForcing) {
  NEED_MODEL();
  const nn::Tensor enc = ctx.from_floats({ref.frames, ref.d_model}, ref.encoder);
  asr::MoonshineDecoderState all = asr::moonshine_decoder_start(w, enc);
  auto forced = ctx.to_floats(asr::moonshine_decode(w, all, ref.tokens, true));
  ASSERT_TRUE(forced.ok());
  asr::MoonshineDecoderState step = asr::moonshine_decoder_start(w, enc);
  for (size_t t = 0; t < ref.tokens.size(); ++t) {
    auto row = ctx.to_floats(asr::moonshine_decode(w, step, {&ref.tokens[t], 1}));
    ASSERT_TRUE(row.ok());
    double diff = 0;
    for (uint32_t v = 0; v < ref.vocab; ++v)
      diff = std::max(diff, static_cast<double>(std::fabs((*row)[v] - (*forced)[t * ref.vocab + v])));
    EXPECT_LT(diff, 5e-3) << "step " << t;
  }
}

TEST(Moonshine, GreedyTranscriptIsOnnxRuntimes) {
  NEED_MODEL();
  auto r = asr::moonshine_transcribe(w, ref.audio);
  ASSERT_TRUE(r.ok()) << r.message();
  const std::vector<int32_t> expected(ref.tokens.begin() + 1, ref.tokens.end());
  EXPECT_EQ(r->tokens, expected);
  EXPECT_EQ(loaded->model.tokenizer.decode(r->tokens), "Ever tried, ever failed.");
}

TEST(Moonshine, BadAudioIsAnError) {
  NEED_MODEL();
  EXPECT_FALSE(asr::moonshine_transcribe(w, {}).ok());
  std::vector<float> nan_audio(16000, 0.0f);
  nan_audio[100] = std::nanf("");
  auto r = asr::moonshine_transcribe(w, nan_audio);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("NaN"), std::string::npos);
  // Shorter than the conv stem's window: padded, still a (short) result.
  std::vector<float> tiny(100, 0.0f);
  EXPECT_TRUE(asr::moonshine_transcribe(w, tiny).ok());
}

TEST(Moonshine, TokenizerDecodesPiecesBytesAndSpaces) {
  // Entries: <unk> <s> </s> "▁Hi" "," "▁th" "ere" and the raw byte 0xC3, then 0xA9 ("é" split in two bytes).
  std::vector<uint8_t> bin;
  auto add = [&](std::string s) {
    bin.push_back(static_cast<uint8_t>(s.size()));
    bin.insert(bin.end(), s.begin(), s.end());
  };
  for (const char* s :
       {"<unk>", "<s>", "</s>", "\xe2\x96\x81Hi", ",", "\xe2\x96\x81th", "ere", "\xc3", "\xa9"})
    add(s);
  auto tok = asr::MoonshineTokenizer::parse(bin);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::vector<int32_t> ids = {1, 3, 4, 5, 6, 7, 8, 2, 40000, -1};
  EXPECT_EQ(tok->decode(ids), "Hi, there\xc3\xa9");
  bin.push_back(200);  // an entry claiming 200 bytes at the very end
  auto bad = asr::MoonshineTokenizer::parse(bin);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("claims 200 bytes"), std::string::npos);
}

// tokenizer.json (the hub's layout): model.vocab {piece: id}, "<0xHH>" the byte HH.
TEST(Moonshine, TokenizerJsonDecodesLikeTokenizerBin) {
  const std::string json = R"({"added_tokens":[{"id":0,"content":"<unk>","special":true}],
    "model":{"type":"BPE","byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"</s>":2,"\u2581Hi":3,",":4,
    "\u2581th":5,"ere":6,"<0xC3>":7,"<0xA9>":8}}})";
  auto tok = asr::MoonshineTokenizer::parse({reinterpret_cast<const uint8_t*>(json.data()), json.size()});
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->size(), 9u);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 3, 4, 5, 6, 7, 8, 2, 40000, -1}), "Hi, there\xc3\xa9");
  auto fails = [](std::string s) {
    auto r = asr::MoonshineTokenizer::parse({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
    return r.ok() ? std::string("(parsed)") : r.message();
  };
  EXPECT_EQ(fails(R"({"model":{}})"), "tokenizer.json: no model.vocab object");
  EXPECT_EQ(fails(R"({"model":{"vocab":{"a":0,"b":4000000000}}})"),
            "tokenizer.json: model.vocab['b'] is not an id below 2");
  EXPECT_EQ(fails(R"({"model":{"vocab":{"a":0,"b":0,"c":2}}})"),
            "tokenizer.json: id 0 is given to two pieces");
  EXPECT_EQ(fails(R"({"model":{"vocab":{"a":0,"b":1}}})"),
            "tokenizer.json: 2 pieces, not a Moonshine tokenizer");
  EXPECT_NE(fails(R"({"model":{"vocab":{"a":0,)").find("tokenizer.json"), std::string::npos);
  // A duplicate key is named escaped: its "\n" must not break the one-line error (found by fuzz_tokenizer).
  EXPECT_EQ(fails(R"({"a\nb":1,"a\nb":2})"), "tokenizer.json: JSON at byte 19: duplicate key 'a\\nb'");
}

// The hub's layout written by tools/moonshine/ort_to_onnx.py (scripts/test.sh makes build/moonshine-onnx): the
// same weights read from protobuf as from the flatbuffer, so the same encoder output bit for bit, and
// tokenizer.json decoding every id as tokenizer.bin does. In CI the directory must exist.
TEST(Moonshine, OnnxLayoutIsTheSameModel) {
  NEED_MODEL();
  const std::string dir = "build/moonshine-onnx/";
  const std::optional<ModelFiles> f = open_model_files(dir, ".onnx", "tokenizer.json");
  if (!f) {
    if (std::getenv("CI")) FAIL() << dir << " is missing (scripts/test.sh makes it)";
    GTEST_SKIP() << "no " << dir << " (python3 tools/moonshine/ort_to_onnx.py models/moonshine-base-en "
                 << dir << ")";
  }
  auto m = asr::load_moonshine(f->enc.bytes(), f->dec.bytes(), f->tok.bytes(),
                               nn::Context::cpu(loaded->pool.get()));
  ASSERT_TRUE(m.ok()) << m.message();
  const nn::Tensor audio = ctx.from_floats({static_cast<int64_t>(ref.audio.size())}, ref.audio);
  const nn::Tensor a = asr::moonshine_encode(w, audio), b = asr::moonshine_encode(m->weights, audio);
  EXPECT_EQ(*ctx.to_floats(a), *ctx.to_floats(b));
  auto r = asr::moonshine_transcribe(m->weights, ref.audio);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(m->tokenizer.decode(r->tokens), "Ever tried, ever failed.");
  ASSERT_EQ(m->tokenizer.size(), loaded->model.tokenizer.size());
  for (int32_t id = 0; id < static_cast<int32_t>(m->tokenizer.size()); ++id) {
    const std::vector<int32_t> ids = {id};
    ASSERT_EQ(m->tokenizer.decode(ids), loaded->model.tokenizer.decode(ids)) << "id " << id;
  }
}

TEST(Moonshine, NotAMoonshineModelIsAnError) {
  const std::string dir = source_path("models/moonshine-base-en/");
  auto enc = MappedFile::open(dir + "encoder_model.ort");
  auto dec = MappedFile::open(dir + "decoder_model_merged.ort");
  if (!enc || !dec) GTEST_SKIP() << "models/moonshine-base-en absent";
  const std::vector<uint8_t> tok = {5, '<', 'u', 'n', 'k', '>', 3, '<', 's', '>', 4, '<', '/', 's', '>'};
  // Encoder and decoder swapped: the loader looks for the conv stem in the decoder's graph.
  auto swapped = asr::load_moonshine(dec->bytes(), enc->bytes(), tok, nn::Context::cpu());
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.message().find("no node writes '/conv1/Conv_output_0'"), std::string::npos)
      << swapped.message();
  const std::vector<uint8_t> junk(64, 7);
  asr::MoonshineLoadOptions named;
  named.encoder_name = "encoder_model.ort";
  auto not_ort = asr::load_moonshine(junk, dec->bytes(), tok, nn::Context::cpu(), named);
  ASSERT_FALSE(not_ort.ok());
  EXPECT_NE(not_ort.message().find("encoder_model.ort: ort: not an ONNX Runtime model"), std::string::npos)
      << not_ort.message();
  // Bytes that are neither format, unnamed: read as ONNX (the format that has no magic), and refused.
  auto neither = asr::load_moonshine(junk, dec->bytes(), tok, nn::Context::cpu());
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.message().rfind("encoder_model.onnx: onnx: ", 0), 0u) << neither.message();
}

}  // namespace
}  // namespace sotto
