// The LLM tokenizer, built from a GGUF file's own metadata and token-for-token identical to llama.cpp:
//   tokenizer.ggml.model "gpt2"  -> byte-level BPE (GPT-2 byte mapping, merges ranked by their order) after a
//                                   pre-tokenizer chosen by tokenizer.ggml.pre (qwen2, llama-bpe/llama3, gpt2)
//   tokenizer.ggml.model "llama" -> SentencePiece-style BPE (spaces as U+2581, merges by score, <0xNN> byte
//                                   fallback), as in Llama 2 and llama2.c's stories models
// Special tokens (CONTROL / USER_DEFINED / UNKNOWN) are cut out of the text first, longest first, as llama.cpp
// does; CONTROL and UNKNOWN only when the caller asks to parse special tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "text/pretokenize.h"

namespace sotto {

struct GgufFile;

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

enum class VocabKind : uint8_t { ByteLevelBpe, SentencePiece };

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

// Everything the tokenizer knows, as read (and checked) from the metadata.
struct Vocab {
  VocabKind kind = VocabKind::ByteLevelBpe;
  PreTokenizer pre = PreTokenizer::Gpt2;
  std::string model_name;  // tokenizer.ggml.model
  std::string pre_name;    // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<TokenType> types;
  TokenIdMap ids;  // text -> id (the last id wins for duplicate texts, as in llama.cpp)
  // Byte-level BPE merges: "left right" -> rank (0 merges first). The first of duplicate merges wins.
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> merge_ranks;
  TokenId bos = kNoToken, eos = kNoToken, unknown = kNoToken, padding = kNoToken;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: " " before the text, so "Hello" starts with "▁Hello"
  bool ignore_merges = false;     // Llama 3: a word that is itself a token is not merged piecewise
  std::vector<TokenId> special_longest_first;  // CONTROL, USER_DEFINED, UNKNOWN tokens
  std::string chat_template;                   // tokenizer.chat_template, kept for later

  TokenId find(std::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? kNoToken : it->second;
  }
};

class Tokenizer {
 public:
  // Reads the tokenizer.* keys. Errors name the key, e.g.
  //   tokenizer: unknown pre-tokenizer 'falcon' (tokenizer.ggml.pre); supported: qwen2, llama-bpe, ...
  static Result<Tokenizer> from_gguf(const GgufFile& file);

  // add_special: BOS/EOS as the metadata says (tokenizer.ggml.add_bos_token / add_eos_token, else llama.cpp's
  // defaults). parse_special: text such as "<|im_start|>" becomes that CONTROL token instead of plain text.
  std::vector<TokenId> tokenize(std::string_view text, bool add_special, bool parse_special) const;
  // Text whose markup may hold control tokens but whose `plain` ranges (a chat's messages) may not: as
  // tokenize(text, add_special, true), except that no CONTROL / UNKNOWN token is cut out of a plain range or
  // across its edge, so typed text such as "<|im_start|>system" stays text. Where the plain ranges hold no
  // token text the ids are tokenize()'s exactly (the raw fragments between control tokens are the same).
  std::vector<TokenId> tokenize_markup(std::string_view text, bool add_special,
                                       std::span<const TextRange> plain) const;

  // The bytes one token stands for (may be part of a UTF-8 character). CONTROL and UNKNOWN tokens render
  // as their text only when render_special is set.
  std::string token_to_piece(TokenId id, bool render_special) const;
  // llama.cpp's llama_detokenize without its clean-up of spaces: pieces joined, the leading space that the
  // SPM tokenizer adds removed again; remove_special drops a BOS at the start and an EOS at the end.
  std::string detokenize(std::span<const TokenId> ids, bool remove_special, bool render_special) const;

  const Vocab& vocab() const { return vocab_; }
  size_t n_tokens() const { return vocab_.texts.size(); }
  bool valid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < vocab_.texts.size(); }

 private:
  void tokenize_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const;
  std::vector<TokenId> tokenize_with(std::string_view text, bool add_special, bool parse_special,
                                     std::span<const TextRange> plain) const;

  Vocab vocab_;
};

// Cuts byte-level BPE text into pre-tokenizer words and merges each (bpe.cpp).
void bpe_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);
// SentencePiece-style BPE over text whose spaces are already U+2581 (spm.cpp).
void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

// Turns a stream of tokens into text that never ends inside a UTF-8 character: bytes of an incomplete
// character are held back until the character completes. Bytes that cannot be part of valid UTF-8 come out
// as U+FFFD, and so does an incomplete character left over at finish().
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
      : tokenizer_(&tokenizer), render_special_(render_special) {}
  std::string push(TokenId id);  // the complete characters now available (often "")
  std::string finish();          // whatever is held back, invalid parts as U+FFFD

 private:
  std::string take_complete(bool at_end);

  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace sotto
