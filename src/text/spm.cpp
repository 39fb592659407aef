// SentencePiece-style BPE as llama.cpp runs it for "llama" vocabularies: the text (spaces already U+2581) is
// cut into UTF-8 characters, then the adjacent pair whose concatenation is the highest-scoring token is
// merged, again and again (ties: leftmost first). A final symbol that is not a token becomes its bytes as
// <0xNN> tokens (byte fallback), or the unknown token when the vocabulary has no byte tokens.
#include <algorithm>
#include <queue>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace sotto {

namespace {

struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t begin = 0;
  uint32_t size = 0;  // 0 once merged into the left neighbour
};

struct Pair {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};

struct LowerPair {  // pops the highest score, then the leftmost
  bool operator()(const Pair& a, const Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

TokenId byte_token(const Vocab& vocab, uint8_t byte) {
  constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  if (TokenId id = vocab.find(std::string_view(name, 6)); id != kNoToken) return id;
  const char raw = static_cast<char>(byte);
  if (TokenId id = vocab.find(std::string_view(&raw, 1)); id != kNoToken) return id;
  return vocab.unknown;
}

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  std::vector<Symbol> symbols;
  for (uint32_t at = 0; at < text.size();) {
    const uint32_t len = static_cast<uint32_t>(
        std::min<size_t>(utf8_sequence_length(static_cast<uint8_t>(text[at])), text.size() - at));
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, at + len < text.size() ? index + 1 : -1, at, len});
    at += len;
  }

  std::priority_queue<Pair, std::vector<Pair>, LowerPair> queue;
  const auto queue_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    // Adjacent symbols are contiguous in the text, so their concatenation is one substring.
    const TokenId id = vocab.find(text.substr(l.begin, l.size + r.size));
    if (id == kNoToken) return;
    queue.push({vocab.scores[id], left, right, l.size + r.size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) queue_pair(i - 1, i);

  while (!queue.empty()) {
    const Pair pair = queue.top();
    queue.pop();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    queue_pair(left.prev, pair.left);
    queue_pair(pair.left, left.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.begin, s.size);
    if (TokenId id = vocab.find(piece); id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char byte : piece)
      if (TokenId id = byte_token(vocab, static_cast<uint8_t>(byte)); id != kNoToken) out.push_back(id);
  }
}

}  // namespace sotto
