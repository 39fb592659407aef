// Parakeet TDT (models/asr/parakeet.h) against transformers' ParakeetForTDT on a random-weight model of the
// same architecture (tests/data/parakeet/tdt_ci, made by tools/parakeet_make_test_model.py): encoder output
// on transformers' own mel, the greedy TDT tokens / frames / durations on every clip, and the whole pipeline
// from audio through our mel. The loop's bookkeeping is replayed on the first steps of a real v2 decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "audio/mel.h"
#include "core/thread_pool.h"
#include "io/file.h"
#include "io/json.h"
#include "models/asr/parakeet.h"
#include "models/asr/parakeet_vocab.h"
#include "nn/weights.h"

#include "test_support.h"

namespace sotto {
namespace {

const std::string kModelDir = std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/tdt_ci";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Reference {
  MappedFile file;
  std::unique_ptr<nn::WeightSource> source;
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu();

  std::vector<float> get(const std::string& name, nn::Shape* shape = nullptr) {
    auto t = source->load_any(*ctx, name);
    EXPECT_TRUE(t.ok()) << t.message();
    if (!t.ok()) return {};
    if (shape) *shape = t->shape();
    auto v = ctx->to_floats(*t);
    return v.ok() ? *v : std::vector<float>{};
  }
  std::vector<int32_t> ints(const std::string& name) {
    std::vector<int32_t> out;
    for (float v : get(name)) out.push_back(static_cast<int32_t>(v));
    return out;
  }
};

Reference open_reference() {
  Reference r;
  auto file = MappedFile::open(kModelDir + "/reference.safetensors");
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return r;
  r.file = std::move(*file);
  auto source = nn::open_weights("reference.safetensors", r.file.bytes());
  EXPECT_TRUE(source.ok()) << source.message();
  if (source.ok()) r.source = std::move(*source);
  return r;
}

constexpr int kClips = 3;

// Encoder output within 1e-5 of transformers' (values O(1) after the final LayerNorm; measured 1.3e-6); the
// same tokens, frames and durations from that encoder output; the same tokens from audio through our mel.
TEST(Parakeet, MatchesTransformersOnTheSmallModel) {
  auto model = asr::ParakeetModel::open(kModelDir, 2);
  ASSERT_TRUE(model.ok()) << model.message();
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  for (int i = 0; i < kClips; ++i) {
    const std::string clip = "clip" + std::to_string(i);
    nn::Shape mel_shape, enc_shape;
    const std::vector<float> mel = ref.get(clip + ".mel", &mel_shape);
    const std::vector<float> want_enc = ref.get(clip + ".encoder", &enc_shape);
    const nn::Tensor enc = (*model)->encode(mel, mel_shape[1]);
    ASSERT_EQ(enc.shape(), enc_shape) << clip;
    auto got_enc = enc.ctx().to_floats(enc);
    ASSERT_TRUE(got_enc.ok());
    const double enc_err = testing::max_abs_diff(*got_enc, want_enc);
    EXPECT_LE(enc_err, 1e-5) << clip;

    const asr::TdtResult r = (*model)->decode(enc);
    EXPECT_EQ(r.tokens, ref.ints(clip + ".tokens")) << clip;
    EXPECT_EQ(r.frames, ref.ints(clip + ".frames")) << clip;
    EXPECT_EQ(r.durations, ref.ints(clip + ".durations")) << clip;

    // Our mel against transformers' ParakeetFeatureExtractor (float32 torch STFT), then the whole pipeline.
    const std::vector<float> audio = ref.get(clip + ".audio");
    const audio::MelFeatures ours = audio::nemo_log_mel(audio);
    const double mel_err = testing::max_abs_diff(ours.data, mel);
    EXPECT_LE(mel_err, 4e-4) << clip;
    auto full = (*model)->transcribe(audio);
    ASSERT_TRUE(full.ok()) << full.message();
    EXPECT_EQ(full->tokens, ref.ints(clip + ".tokens")) << clip;
    std::printf("  %s: encoder max |diff| %.2e, mel max |diff| %.2e, %zu tokens\n", clip.c_str(), enc_err,
                mel_err, r.tokens.size());
  }
}

// The relative positions' table is kept for the longest clip so far and a shorter clip reads its middle rows:
// each clip's encoder output is a fresh model's bit for bit, whatever came before it.
TEST(Parakeet, ShorterClipAfterALongerOneGivesAFreshModelsEncoder) {
  auto model = asr::ParakeetModel::open(kModelDir, 2);
  ASSERT_TRUE(model.ok()) << model.message();
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  for (int i : {1, 0, 2, 1}) {  // 20, 11, 7, 20 encoder frames
    const std::string clip = "clip" + std::to_string(i);
    nn::Shape mel_shape;
    const std::vector<float> mel = ref.get(clip + ".mel", &mel_shape);
    auto fresh = asr::ParakeetModel::open(kModelDir, 2);
    ASSERT_TRUE(fresh.ok()) << fresh.message();
    const nn::Tensor a = (*model)->encode(mel, mel_shape[1]), b = (*fresh)->encode(mel, mel_shape[1]);
    ASSERT_EQ(a.shape(), b.shape()) << clip;
    EXPECT_EQ(std::memcmp(a.f32(), b.f32(), static_cast<size_t>(a.elements()) * 4), 0) << clip;
  }
}

// On the caller's pool (the C API's handle passes its own; on the web the one whose helpers JS started): the ops
// run on that pool, not on one of the model's own, and every clip gives the reference tokens.
TEST(Parakeet, RunsOnTheCallersPool) {
  auto weights = MappedFile::open(kModelDir + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.message();
  ThreadPool pool(2);
  auto model = asr::ParakeetModel::load(read_text(kModelDir + "/config.json"), weights->bytes(),
                                        "model.safetensors", pool);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ((*model)->context().pool(), &pool);
  (*model)->use_packed_matrices();
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  for (int i = 0; i < kClips; ++i) {
    const std::string clip = "clip" + std::to_string(i);
    auto r = (*model)->transcribe(ref.get(clip + ".audio"));
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->tokens, ref.ints(clip + ".tokens")) << clip;
  }
}

// The model's encoder on every reference clip's mel within `tolerance` of transformers' float32, and the same
// tokens from it; `what` names the variant in the printed differences.
void expect_reference_tokens(asr::ParakeetModel& model, double tolerance, const char* what) {
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  for (int i = 0; i < kClips; ++i) {
    const std::string clip = "clip" + std::to_string(i);
    nn::Shape mel_shape;
    const std::vector<float> mel = ref.get(clip + ".mel", &mel_shape);
    const nn::Tensor enc = model.encode(mel, mel_shape[1]);
    auto got = enc.ctx().to_floats(enc);
    ASSERT_TRUE(got.ok());
    const double err = testing::max_abs_diff(*got, ref.get(clip + ".encoder"));
    EXPECT_LE(err, tolerance) << clip << " " << what;
    EXPECT_EQ(model.decode(enc).tokens, ref.ints(clip + ".tokens")) << clip << " " << what;
    std::printf("  %s: %s, encoder max |diff| %.2e\n", clip.c_str(), what, err);
  }
}

// Float16 matrices: the encoder within 5e-3 of transformers' float32 (measured below) and the same tokens.
TEST(Parakeet, HalfMatricesKeepEveryToken) {
  auto model = asr::ParakeetModel::open(kModelDir, 1);
  ASSERT_TRUE(model.ok()) << model.message();
  (*model)->use_half_matrices();
  expect_reference_tokens(**model, 5e-3, "float16 matrices");
}

// Split-bf16 products on AMX tiles: the encoder within 1e-4 of transformers' float32 (measured 2.4e-5 on a
// Sapphire Rapids; plain float32 is within ~2e-6, plain bf16 products ~1e-2) and the same tokens. Skips on
// CPUs without AMX-BF16.
TEST(Parakeet, Bf16x3ProductsKeepEveryToken) {
  auto model = asr::ParakeetModel::open(kModelDir, 2);
  ASSERT_TRUE(model.ok()) << model.message();
  if (!(*model)->use_bf16x3_products()) GTEST_SKIP() << "this CPU (or OS) has no AMX-BF16";
  expect_reference_tokens(**model, 1e-4, "split-bf16 products");
}

// Pre-packed matrices (the CPU path the CLI and the bench take): the encoder bit-identical to the unpacked
// model's on every clip (the products sum in the same order), so also within transformers' tolerance above,
// and the same tokens as transformers.
TEST(Parakeet, PackedMatricesGiveTheSameEncoderBitForBit) {
  auto plain = asr::ParakeetModel::open(kModelDir, 2);
  auto packed = asr::ParakeetModel::open(kModelDir, 2);
  ASSERT_TRUE(plain.ok() && packed.ok()) << plain.message() << packed.message();
  (*packed)->use_packed_matrices();
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  for (int i = 0; i < kClips; ++i) {
    const std::string clip = "clip" + std::to_string(i);
    nn::Shape mel_shape;
    const std::vector<float> mel = ref.get(clip + ".mel", &mel_shape);
    const nn::Tensor a = (*plain)->encode(mel, mel_shape[1]), b = (*packed)->encode(mel, mel_shape[1]);
    ASSERT_EQ(a.shape(), b.shape()) << clip;
    EXPECT_EQ(std::memcmp(a.f32(), b.f32(), static_cast<size_t>(a.elements()) * 4), 0) << clip;
    EXPECT_EQ((*packed)->decode(b).tokens, ref.ints(clip + ".tokens")) << clip;
  }
}

// The C API the web page uses (sotto_asr_load_parakeet): the reference tokens in its JSON, and a config that
// is not Parakeet's or a null buffer refused with one line.
TEST(Parakeet, CApiLoadsAndTranscribes) {
  auto config = MappedFile::open(kModelDir + "/config.json");
  auto weights = MappedFile::open(kModelDir + "/model.safetensors");
  ASSERT_TRUE(config.ok() && weights.ok());
  SottoAsr* asr = sotto_asr_create(1);
  EXPECT_NE(
      sotto_asr_load_parakeet(asr, nullptr, 0, weights->bytes().data(), weights->bytes().size(), nullptr, 0),
      0);
  const std::string not_parakeet = R"({"model_type": "moonshine"})";
  EXPECT_NE(
      sotto_asr_load_parakeet(asr, reinterpret_cast<const uint8_t*>(not_parakeet.data()), not_parakeet.size(),
                              weights->bytes().data(), weights->bytes().size(), nullptr, 0),
      0);
  EXPECT_NE(std::string(sotto_asr_last_error(asr)).find("parakeet_tdt"), std::string::npos)
      << sotto_asr_last_error(asr);
  ASSERT_EQ(sotto_asr_load_parakeet(asr, config->bytes().data(), config->bytes().size(),
                                    weights->bytes().data(), weights->bytes().size(), nullptr, 0),
            0)
      << sotto_asr_last_error(asr);
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  const std::vector<float> audio = ref.get("clip2.audio");
  size_t n = 0;
  const char* json = sotto_asr_transcribe_json(asr, audio.data(), audio.size(), &n);
  ASSERT_TRUE(json) << sotto_asr_last_error(asr);
  std::string want = "\"tokens\": [";
  const std::vector<int32_t> tokens = ref.ints("clip2.tokens");
  for (size_t i = 0; i < tokens.size(); ++i) want += (i ? ", " : "") + std::to_string(tokens[i]);
  EXPECT_NE(std::string(json, n).find(want + "]"), std::string::npos) << json;
  sotto_asr_destroy(asr);
}

// The loop's bookkeeping replayed on a real v2 decode's first 50 steps (frame, argmax token, duration): the
// frames it visits, the tokens it emits and their timestamps are the decode's.
TEST(Parakeet, GreedyLoopFollowsARealV2Decode) {
  std::ifstream in(std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/v2_decode_steps.txt");
  ASSERT_TRUE(in.good());
  struct Step {
    int64_t t;
    int32_t token, duration;
  };
  std::vector<Step> steps;
  std::vector<int32_t> want_tokens, want_frames;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "step") {
      Step s{};
      ls >> s.t >> s.token >> s.duration;
      steps.push_back(s);
    } else if (kind == "token") {
      int32_t tok = 0, frame = 0;
      ls >> tok >> frame;
      want_tokens.push_back(tok);
      want_frames.push_back(frame);
    }
  }
  ASSERT_EQ(steps.size(), 50u);
  size_t next = 0;
  int advances = 0;
  const int64_t end = steps.back().t + steps.back().duration;
  const asr::TdtResult r = asr::tdt_greedy(
      end, 1024, 10,
      [&](int64_t t) {
        EXPECT_LT(next, steps.size());
        if (next >= steps.size()) return asr::TdtStep{1024, 1};
        EXPECT_EQ(t, steps[next].t) << "step " << next;
        const Step& s = steps[next++];
        return asr::TdtStep{s.token, s.duration};
      },
      [&](int32_t) { ++advances; });
  EXPECT_EQ(next, steps.size());
  EXPECT_EQ(r.tokens, want_tokens);
  EXPECT_EQ(r.frames, want_frames);
  EXPECT_EQ(advances, static_cast<int>(want_tokens.size()));
}

// Duration 0 keeps the loop on a frame; the 10th symbol there moves it on; a blank with duration 0 moves one.
TEST(Parakeet, GreedyLoopStaysAtMostMaxSymbolsOnAFrame) {
  int calls = 0;
  const asr::TdtResult r = asr::tdt_greedy(
      3, 7, 10, [&](int64_t t) { return ++calls, t == 1 ? asr::TdtStep{7, 0} : asr::TdtStep{3, 0}; },
      [](int32_t) {});
  // Frame 0: ten symbols then forced on; frame 1: blank with duration 0 -> 1; frame 2: ten more.
  EXPECT_EQ(r.tokens.size(), 20u);
  EXPECT_EQ(calls, 21);
  EXPECT_EQ(r.frames.front(), 0);
  EXPECT_EQ(r.frames.back(), 2);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

Result<std::unique_ptr<asr::ParakeetModel>> load_with_config(const std::string& config) {
  auto weights = MappedFile::open(kModelDir + "/model.safetensors");
  if (!weights.ok()) return weights.status();
  return asr::ParakeetModel::load(config, weights->bytes(), "model.safetensors", 1);
}

TEST(Parakeet, ConfigThatDoesNotMatchTheTensorsIsAOneLineError) {
  const std::string config = read_text(kModelDir + "/config.json");
  ASSERT_FALSE(config.empty());
  ASSERT_TRUE(load_with_config(config).ok());

  auto wider = load_with_config(replace(config, "\"hidden_size\": 64", "\"hidden_size\": 96"));
  ASSERT_FALSE(wider.ok());
  EXPECT_NE(wider.message().find("has shape"), std::string::npos) << wider.message();

  auto deeper = load_with_config(replace(config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3"));
  ASSERT_FALSE(deeper.ok());
  EXPECT_NE(deeper.message().find("encoder.layers.2"), std::string::npos) << deeper.message();

  auto vocab = load_with_config(replace(replace(config, "\"vocab_size\": 49", "\"vocab_size\": 50"),
                                        "\"blank_token_id\": 48", "\"blank_token_id\": 49"));
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.message().find("vocab_size 50"), std::string::npos) << vocab.message();

  auto blank = load_with_config(replace(config, "\"blank_token_id\": 48", "\"blank_token_id\": 3"));
  ASSERT_FALSE(blank.ok());
  EXPECT_NE(blank.message().find("blank_token_id"), std::string::npos) << blank.message();

  auto biases = load_with_config(replace(config, "\"attention_bias\": false", "\"attention_bias\": true"));
  ASSERT_FALSE(biases.ok());
  EXPECT_NE(biases.message().find("linear1.bias"), std::string::npos) << biases.message();

  auto ctc = load_with_config(replace(config, "\"parakeet_tdt\"", "\"parakeet_ctc\""));
  ASSERT_FALSE(ctc.ok());
  EXPECT_NE(ctc.message().find("parakeet_tdt"), std::string::npos) << ctc.message();

  EXPECT_FALSE(load_with_config("{\"model_type\": ").ok());
  for (const auto* r : {&wider, &deeper, &vocab, &blank, &biases, &ctc})
    EXPECT_EQ(r->message().find('\n'), std::string::npos);
}

TEST(Parakeet, DirectoryIsRecognisedByItsConfig) {
  EXPECT_TRUE(asr::is_parakeet_dir(kModelDir));
  EXPECT_FALSE(asr::is_parakeet_dir(std::string(SOTTO_SOURCE_DIR) + "/tests/data"));
  EXPECT_FALSE(asr::is_parakeet_dir(kModelDir + "/missing"));
}

TEST(Parakeet, SilentShortAndNonFiniteAudio) {
  auto model = asr::ParakeetModel::open(kModelDir, 1);
  ASSERT_TRUE(model.ok()) << model.message();
  auto silent = (*model)->transcribe(std::vector<float>(16000, 0.0f));
  ASSERT_TRUE(silent.ok()) << silent.message();
  EXPECT_LE(silent->tokens.size(), 13u * 10u);  // bounded: at most max_symbols per encoder frame

  auto empty = (*model)->transcribe(std::vector<float>{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->tokens.empty());
  auto tiny = (*model)->transcribe(std::vector<float>(100, 0.1f));
  ASSERT_TRUE(tiny.ok());
  EXPECT_TRUE(tiny->tokens.empty());
  for (size_t n : {160, 161, 1279, 1281}) {  // one mel frame .. just past one encoder frame
    auto short_clip = (*model)->transcribe(std::vector<float>(n, 0.05f));
    ASSERT_TRUE(short_clip.ok()) << n;
    EXPECT_LE(short_clip->tokens.size(), 2u * 10u) << n;
  }

  std::vector<float> bad(16000, 0.1f);
  bad[1234] = NAN;
  auto nan = (*model)->transcribe(bad);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.message().find("1234"), std::string::npos) << nan.message();
}

// Audio longer than one chunk is decoded chunk by chunk with frames in whole-clip units; the cut falls in the
// silence between two copies of a clip.
TEST(Parakeet, LongAudioIsCutInSilenceWithClipFrames) {
  auto model = asr::ParakeetModel::open(kModelDir, 1);
  ASSERT_TRUE(model.ok()) << model.message();
  Reference ref = open_reference();
  ASSERT_TRUE(ref.source);
  const std::vector<float> audio = ref.get("clip1.audio");
  std::vector<float> first = audio;
  first.resize((audio.size() / 1280 + 13) * 1280, 0.0f);  // ~1 s of silence, whole encoder frames
  const int32_t offset = static_cast<int32_t>(first.size() / 1280);
  std::vector<float> twice = first;
  twice.insert(twice.end(), audio.begin(), audio.end());
  // A chunk limit 3 frames into the second copy: the cut moves back to the latest boundary whose 80 ms around
  // it are silent, offset - 1 (the one at offset straddles the second copy's start).
  auto r = (*model)->transcribe(twice, static_cast<double>(offset + 3) * 0.08);
  ASSERT_TRUE(r.ok()) << r.message();
  const size_t cut = static_cast<size_t>(offset - 1) * 1280;
  auto head =
      (*model)->transcribe(std::vector<float>(twice.begin(), twice.begin() + static_cast<int64_t>(cut)));
  auto tail =
      (*model)->transcribe(std::vector<float>(twice.begin() + static_cast<int64_t>(cut), twice.end()));
  ASSERT_TRUE(head.ok() && tail.ok());
  ASSERT_EQ(r->tokens.size(), head->tokens.size() + tail->tokens.size());
  for (size_t i = 0; i < tail->tokens.size(); ++i) {
    EXPECT_EQ(r->tokens[head->tokens.size() + i], tail->tokens[i]);
    EXPECT_EQ(r->frames[head->tokens.size() + i], tail->frames[i] + offset - 1);
  }
}

// v3's SentencePiece model (tests/fixtures/asr/tokenizer.model): 8192 pieces, so a v2-sized model (1024
// tokens + blank) is refused with one line; pieces join into text with U+2581 as the space.
TEST(Parakeet, SentencePieceVocabularyAndItsSizeCheck) {
  const std::string path = std::string(SOTTO_FIXTURES_DIR) + "/asr/tokenizer.model";
  auto file = MappedFile::open(path);
  if (!file.ok()) GTEST_SKIP() << "fixture absent: " << path;
  auto vocab = asr::parse_sentencepiece_vocab(file->bytes());
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  EXPECT_EQ(vocab->pieces.size(), 8192u);
  EXPECT_EQ(vocab->pieces[0], "<unk>");
  EXPECT_TRUE(asr::check_vocab_size(*vocab, 8193, "tokenizer.model").ok());
  const Status wrong = asr::check_vocab_size(*vocab, 1025, "tokenizer.model");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("8192 pieces"), std::string::npos) << wrong.message();

  int32_t hello = -1, world = -1;
  for (size_t i = 0; i < vocab->pieces.size(); ++i) {
    if (vocab->pieces[i] == "\xE2\x96\x81the") hello = static_cast<int32_t>(i);
    if (vocab->pieces[i] == "s") world = static_cast<int32_t>(i);
  }
  ASSERT_GE(hello, 0);
  ASSERT_GE(world, 0);
  const int32_t ids[] = {hello, world, hello, 99999};
  EXPECT_EQ(asr::detokenize(*vocab, ids), "thes the");

  const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff};
  EXPECT_FALSE(asr::parse_sentencepiece_vocab(garbage).ok());
  EXPECT_FALSE(asr::parse_sentencepiece_vocab({}).ok());
}

// The transformers layout's tokenizer.json for the same v3 vocabulary, written by transformers' converter
// (tools/parakeet_tokenizer_json.py): the same 8192 pieces at the same ids as tokenizer.model, the added
// <blank> not among them, and random sequences decoded to transformers' own text (decode.json).
TEST(Parakeet, TokenizerJsonIsTheSentencePieceVocabulary) {
  auto model = MappedFile::open(std::string(SOTTO_FIXTURES_DIR) + "/asr/tokenizer.model");
  if (!model.ok()) GTEST_SKIP() << "fixture absent: tests/fixtures/asr/tokenizer.model";
  auto json =
      MappedFile::open(std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/tokenizer_v3/tokenizer.json");
  auto cases =
      MappedFile::open(std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/tokenizer_v3/decode.json");
  ASSERT_TRUE(json.ok() && cases.ok());
  auto sp = asr::parse_parakeet_vocab(model->bytes(), "tokenizer.model");
  auto hf = asr::parse_parakeet_vocab(json->bytes(), "tokenizer.json");
  ASSERT_TRUE(sp.ok()) << sp.message();
  ASSERT_TRUE(hf.ok()) << hf.message();
  EXPECT_EQ(hf->pieces, sp->pieces);
  EXPECT_TRUE(asr::check_vocab_size(*hf, 8193, "tokenizer.json").ok());
  auto parsed = parse_json(
      std::string_view(reinterpret_cast<const char*>(cases->bytes().data()), cases->bytes().size()));
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  ASSERT_GE(parsed->items.size(), 50u);
  for (const JsonValue& c : parsed->items) {
    std::vector<int32_t> ids;
    for (const JsonValue& id : c.find("ids")->items) ids.push_back(static_cast<int32_t>(*id.as_u64()));
    EXPECT_EQ(asr::detokenize(*hf, ids), c.find("text")->text);
  }
  const std::string bad = R"({"model":{"vocab":{}}})";
  auto empty =
      asr::parse_parakeet_vocab({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, "t.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.message(), "t.json: no pieces in model.vocab");
}

}  // namespace
}  // namespace sotto
