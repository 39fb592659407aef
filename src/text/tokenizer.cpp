#include "text/tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "io/gguf.h"
#include "text/unicode.h"

namespace sotto {

namespace {

constexpr std::string_view kSpmSpace = "▁";  // U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's space

struct PreTokenizerName {
  std::string_view name;
  PreTokenizer kind;
};
// tokenizer.ggml.pre values that llama.cpp maps to one of the three scanners we implement.
constexpr PreTokenizerName kPreTokenizers[] = {
    {"qwen2", PreTokenizer::Qwen2},      {"deepseek-r1-qwen", PreTokenizer::Qwen2},
    {"megrez", PreTokenizer::Qwen2},     {"stablelm2", PreTokenizer::Qwen2},
    {"llama3", PreTokenizer::Llama3},    {"llama-v3", PreTokenizer::Llama3},
    {"llama-bpe", PreTokenizer::Llama3}, {"falcon3", PreTokenizer::Llama3},
    {"pixtral", PreTokenizer::Llama3},   {"gpt-2", PreTokenizer::Gpt2},
};

std::string supported_pre_names() {
  std::string out;
  for (const auto& p : kPreTokenizers) out += cat(out.empty() ? "" : ", ", p.name);
  return out;
}

bool has(const GgufFile& file, std::string_view key) {
  return file.find(key) != nullptr;
}

// An optional special-token id: kept as `id` (llama.cpp's default) when the key is absent.
Status read_token_id(const GgufFile& file, std::string_view key, size_t n_tokens, TokenId& id) {
  if (id >= 0 && static_cast<size_t>(id) >= n_tokens) id = kNoToken;  // a default outside a tiny vocab
  const GgufKeyValue* kv = file.find(key);
  if (!kv) return {};
  if (!kv->value.is_integer())
    return error("tokenizer: ", key, " is a ", kv->value.type_name(), ", expected an integer");
  const int64_t value = kv->value.as_i64();
  // Converters write -1 (often as u32 0xFFFFFFFF) for "no such token".
  if (value == -1 || value == 0xFFFFFFFF) {
    id = kNoToken;
    return {};
  }
  if (value < 0 || static_cast<uint64_t>(value) >= n_tokens)
    return error("tokenizer: ", key, " = ", value, " is outside the vocabulary (", n_tokens, " tokens)");
  id = static_cast<TokenId>(value);
  return {};
}

Status read_bool(const GgufFile& file, std::string_view key, bool& value) {
  if (!has(file, key)) return {};
  SOTTO_ASSIGN(value, file.get_bool(key));
  return {};
}

Status read_model_kind(const GgufFile& file, Vocab& v) {
  SOTTO_ASSIGN(const std::string_view model, file.get_string("tokenizer.ggml.model"));
  v.model_name = model;
  if (model == "llama") {
    v.kind = VocabKind::SentencePiece;
    v.bos = 1, v.eos = 2, v.unknown = 0;  // llama.cpp's defaults for SPM vocabularies
    v.add_bos = true;
    v.add_space_prefix = true;
    return {};
  }
  if (model != "gpt2")
    return error("tokenizer: unsupported tokenizer model '", model,
                 "' (tokenizer.ggml.model); supported: gpt2 (byte-level BPE), llama (SentencePiece BPE)");
  v.kind = VocabKind::ByteLevelBpe;
  v.bos = 11, v.eos = 11;  // llama.cpp's (odd) defaults for BPE vocabularies without bos/eos keys
  if (has(file, "tokenizer.ggml.pre")) {
    SOTTO_ASSIGN(const std::string_view pre, file.get_string("tokenizer.ggml.pre"));
    v.pre_name = pre;
  }
  for (const auto& p : kPreTokenizers) {
    if (p.name != v.pre_name) continue;
    v.pre = p.kind;
    if (p.kind == PreTokenizer::Llama3) v.ignore_merges = v.add_bos = true;
    return {};
  }
  return error("tokenizer: unknown pre-tokenizer '", v.pre_name.empty() ? "default" : v.pre_name,
               "' (tokenizer.ggml.pre); supported: ", supported_pre_names());
}

Status read_tokens(const GgufFile& file, Vocab& v) {
  SOTTO_ASSIGN(const auto texts, file.get_string_array("tokenizer.ggml.tokens"));
  if (texts.empty()) return error("tokenizer: tokenizer.ggml.tokens is empty");
  if (texts.size() > static_cast<size_t>(std::numeric_limits<TokenId>::max()))
    return error("tokenizer: ", texts.size(), " tokens is more than token ids can number");
  const size_t n = texts.size();
  v.scores.assign(n, 0.0f);
  v.types.assign(n, TokenType::Normal);
  if (has(file, "tokenizer.ggml.scores")) {
    SOTTO_ASSIGN(v.scores, file.get_float_array("tokenizer.ggml.scores"));
    if (v.scores.size() != n)
      return error("tokenizer: tokenizer.ggml.scores has ", v.scores.size(), " entries for ", n, " tokens");
  }
  if (has(file, "tokenizer.ggml.token_type")) {
    SOTTO_ASSIGN(const std::vector<int64_t> types, file.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != n)
      return error("tokenizer: tokenizer.ggml.token_type has ", types.size(), " entries for ", n, " tokens");
    for (size_t i = 0; i < n; ++i)
      v.types[i] = types[i] >= 1 && types[i] <= 6 ? static_cast<TokenType>(types[i]) : TokenType::Undefined;
  }
  v.texts.reserve(n);
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens so that every token has a findable text.
    v.texts.emplace_back(texts[i].empty() ? cat("[EMPTY_", i, "]") : std::string(texts[i]));
    v.ids.insert_or_assign(v.texts.back(), static_cast<TokenId>(i));
  }
  return {};
}

Status read_merges(const GgufFile& file, Vocab& v) {
  if (!has(file, "tokenizer.ggml.merges"))
    return error("tokenizer: tokenizer.ggml.merges is missing (needed by gpt2 vocabularies)");
  SOTTO_ASSIGN(const auto merges, file.get_string_array("tokenizer.ggml.merges"));
  if (merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return error("tokenizer: ", merges.size(), " merges is more than ranks can number");
  v.merge_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // "left right", split at the first space after the first byte (a token may itself start with a space).
    const std::string_view merge = merges[i];
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos)
      return error("tokenizer: merge ", i, " ('", merge, "') is not two tokens separated by a space");
    v.merge_ranks.try_emplace(std::string(merge), static_cast<int32_t>(i));
  }
  return {};
}

// llama.cpp recognises some tokens by their text and makes them CONTROL even when the file says NORMAL
// (Qwen2's vocabulary, for one, has "</s>" as a normal token): end-of-generation tokens always, and the first
// fill-in-the-middle token of each kind unless the metadata names one. We do the same so that parsing
// special tokens gives the same ids.
void adopt_llama_cpp_token_types(const GgufFile& file, Vocab& v) {
  const auto make_control = [&](std::string_view text) {
    if (TokenId id = v.find(text); id != kNoToken) v.types[id] = TokenType::Control;
  };
  constexpr std::string_view kEndOfGeneration[] = {"<|eot_id|>",
                                                   "<|im_end|>",
                                                   "<|end|>",
                                                   "<|return|>",
                                                   "<|call|>",
                                                   "<|flush|>",
                                                   "<|calls|>",
                                                   "<end_of_turn>",
                                                   "<|endoftext|>",
                                                   "</s>",
                                                   "<|eom_id|>",
                                                   "<EOT>",
                                                   "_<EOT>",
                                                   "[EOT]",
                                                   "[EOS]",
                                                   "<|end_of_text|>",
                                                   "<end_of_utterance>",
                                                   "<eos>",
                                                   "<turn|>",
                                                   "<|tool_response>",
                                                   "<｜end▁of▁sentence｜>",
                                                   "[e~["};
  const TokenType s_type = v.find("</s>") != kNoToken ? v.types[v.find("</s>")] : TokenType::Normal;
  for (std::string_view text : kEndOfGeneration) make_control(text);
  // Gemma 4 keeps "</s>" a normal token when it also has "<|tool_response>".
  if (v.find("<|tool_response>") != kNoToken && v.find("</s>") != kNoToken)
    v.types[v.find("</s>")] = s_type == TokenType::Control ? TokenType::Normal : s_type;

  struct FimKind {
    std::string_view key, old_key;
    std::initializer_list<std::string_view> texts;
  };
  const FimKind kFim[] = {
      {"tokenizer.ggml.fim_pre_token_id",
       "tokenizer.ggml.prefix_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>"}},
      {"tokenizer.ggml.fim_suf_token_id",
       "tokenizer.ggml.suffix_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>"}},
      {"tokenizer.ggml.fim_mid_token_id",
       "tokenizer.ggml.middle_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>"}},
      {"tokenizer.ggml.fim_pad_token_id", "", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {"tokenizer.ggml.fim_rep_token_id",
       "",
       {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {"tokenizer.ggml.fim_sep_token_id", "", {"<|file_sep|>"}},
  };
  for (const FimKind& fim : kFim) {
    if (has(file, fim.key) || (!fim.old_key.empty() && has(file, fim.old_key))) continue;
    for (std::string_view text : fim.texts) {
      if (v.find(text) == kNoToken) continue;
      make_control(text);
      break;
    }
  }
  // gpt-oss: always rendered, so user-defined.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (TokenId id = v.find(text); id != kNoToken) v.types[id] = TokenType::UserDefined;
}

void find_special_tokens(Vocab& v) {
  for (size_t i = 0; i < v.texts.size(); ++i) {
    const TokenType t = v.types[i];
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
      v.special_longest_first.push_back(static_cast<TokenId>(i));
  }
  // Longest first, so "<|im_start|>" is cut before a shorter token inside it; ties by id (llama.cpp's order
  // among equal lengths is unspecified).
  std::sort(v.special_longest_first.begin(), v.special_longest_first.end(), [&](TokenId a, TokenId b) {
    const size_t la = v.texts[a].size(), lb = v.texts[b].size();
    return la != lb ? la > lb : a < b;
  });
}

// A piece of the input: raw text still to tokenize, or a special token already found in it.
struct Fragment {
  TokenId token = kNoToken;  // kNoToken for raw text
  size_t begin = 0, end = 0;
};

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  Tokenizer t;
  Vocab& v = t.vocab_;
  SOTTO_TRY(read_model_kind(file, v));
  SOTTO_TRY(read_tokens(file, v));
  if (v.kind == VocabKind::ByteLevelBpe) SOTTO_TRY(read_merges(file, v));
  const size_t n = v.texts.size();
  SOTTO_TRY(read_token_id(file, "tokenizer.ggml.bos_token_id", n, v.bos));
  SOTTO_TRY(read_token_id(file, "tokenizer.ggml.eos_token_id", n, v.eos));
  SOTTO_TRY(read_token_id(file, "tokenizer.ggml.unknown_token_id", n, v.unknown));
  SOTTO_TRY(read_token_id(file, "tokenizer.ggml.padding_token_id", n, v.padding));
  SOTTO_TRY(read_bool(file, "tokenizer.ggml.add_bos_token", v.add_bos));
  SOTTO_TRY(read_bool(file, "tokenizer.ggml.add_eos_token", v.add_eos));
  SOTTO_TRY(read_bool(file, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  if (v.add_bos && v.bos == kNoToken)
    return error("tokenizer: add_bos_token is set but there is no BOS token");
  if (v.add_eos && v.eos == kNoToken)
    return error("tokenizer: add_eos_token is set but there is no EOS token");
  if (has(file, "tokenizer.chat_template")) {
    SOTTO_ASSIGN(const std::string_view chat_template, file.get_string("tokenizer.chat_template"));
    v.chat_template = chat_template;
  }
  adopt_llama_cpp_token_types(file, v);
  find_special_tokens(v);
  return t;
}

std::vector<TokenId> Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return tokenize_with(text, add_special, parse_special, {});
}

std::vector<TokenId> Tokenizer::tokenize_markup(std::string_view text, bool add_special,
                                                std::span<const TextRange> plain) const {
  return tokenize_with(text, add_special, true, plain);
}

std::vector<TokenId> Tokenizer::tokenize_with(std::string_view text, bool add_special, bool parse_special,
                                              std::span<const TextRange> plain) const {
  const Vocab& v = vocab_;
  // A match of a CONTROL / UNKNOWN token may not touch a plain range (USER_DEFINED ones are text anyway).
  auto in_plain = [&](size_t begin, size_t end) {
    for (const TextRange& r : plain)
      if (begin < r.end && r.begin < end) return true;
    return false;
  };
  // Cut special tokens out first, longest first; each cut splits a raw fragment into left, token, right.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId special : v.special_longest_first) {
    // USER_DEFINED tokens are always matched, as in Hugging Face tokenizers; CONTROL/UNKNOWN only on request.
    if (!parse_special && v.types[special] != TokenType::UserDefined) continue;
    const std::string_view needle = v.texts[special];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      const bool typed_text_stays_text = v.types[special] != TokenType::UserDefined && !plain.empty();
      size_t at = f.begin, search = f.begin;
      while (search < f.end) {
        const size_t match = text.substr(0, f.end).find(needle, search);
        if (match == std::string_view::npos) break;
        if (typed_text_stays_text && in_plain(match, match + needle.size())) {
          search = match + 1;
          continue;
        }
        if (match > at) next.push_back({kNoToken, at, match});
        next.push_back({special, match, match + needle.size()});
        at = search = match + needle.size();
      }
      if (at < f.end) next.push_back({kNoToken, at, f.end});
    }
    fragments.swap(next);
  }

  std::vector<TokenId> out;
  if (add_special && v.add_bos) out.push_back(v.bos);
  bool after_special = true;  // SPM puts its space prefix at the start and after every special token
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
    } else {
      tokenize_text(text.substr(f.begin, f.end - f.begin), after_special, out);
      after_special = false;
    }
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

void Tokenizer::tokenize_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const {
  if (vocab_.kind == VocabKind::ByteLevelBpe) return bpe_tokenize(vocab_, text, out);
  std::string escaped;
  escaped.reserve(text.size() + 3);
  if (vocab_.add_space_prefix && after_special) escaped.append(kSpmSpace);
  for (char c : text) {
    if (c == ' ')
      escaped.append(kSpmSpace);
    else
      escaped.push_back(c);
  }
  spm_tokenize(vocab_, escaped, out);
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (!valid(id)) return {};
  const TokenType type = vocab_.types[id];
  const std::string& text = vocab_.texts[id];
  if (type == TokenType::Control || type == TokenType::Unknown) return render_special ? text : std::string();
  if (type == TokenType::UserDefined) return text;
  if (type == TokenType::Byte) {
    if (vocab_.kind == VocabKind::SentencePiece) {  // "<0xNN>"
      unsigned value = 0;
      for (size_t i = 3; i < text.size() && i < 5; ++i) {
        const char c = text[i];
        value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      }
      return std::string(1, static_cast<char>(value & 0xFF));
    }
  } else if (type != TokenType::Normal) {
    return {};  // UNUSED / undefined tokens render as nothing, as in llama.cpp
  }
  std::string piece;
  if (vocab_.kind == VocabKind::SentencePiece) {
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
        piece.push_back(' ');
        i += kSpmSpace.size();
      } else {
        piece.push_back(text[i++]);
      }
    }
    return piece;
  }
  // Byte-level BPE: every character stands for one byte.
  for (uint32_t cpt : decode_utf8_lenient(text)) {
    const int byte = gpt2_char_to_byte(cpt);
    if (byte >= 0)
      piece.push_back(static_cast<char>(byte));
    else
      append_utf8(piece, cpt);  // not a GPT-2 byte character: keep it as written
  }
  return piece;
}

std::string Tokenizer::detokenize(std::span<const TokenId> ids, bool remove_special,
                                  bool render_special) const {
  bool strip_space = vocab_.add_space_prefix;
  if (remove_special && vocab_.add_bos && !ids.empty() && ids.front() == vocab_.bos) {
    strip_space = false;  // llama.cpp keeps the space when it removes the BOS
    ids = ids.subspan(1);
  }
  if (remove_special && vocab_.add_eos && !ids.empty() && ids.back() == vocab_.eos)
    ids = ids.first(ids.size() - 1);
  std::string text;
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (strip_space && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
    strip_space = false;
    text += piece;
  }
  return text;
}

}  // namespace sotto
