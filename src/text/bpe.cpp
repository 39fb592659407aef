// Byte-level BPE (GPT-2 style): text -> code points -> pre-tokenizer words -> each word's UTF-8 bytes written
// as GPT-2 characters -> merges applied lowest rank first -> tokens. The merge loop is llama.cpp's: a
// priority queue of adjacent pairs keyed (rank, left position), stale entries skipped when popped, so a word
// of n characters costs O(n log n).
#include <algorithm>
#include <queue>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace sotto {

namespace {

struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t begin = 0;  // byte range in the encoded word; size 0 once merged into its left neighbour
  uint32_t size = 0;
};

struct Pair {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t size;  // bytes of left + right when queued; a different sum later means the pair is stale
};

struct LaterPair {  // priority_queue pops the "largest": make that the lowest rank, then the leftmost
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class WordMerger {
 public:
  explicit WordMerger(const Vocab& vocab) : vocab_(vocab) {}

  void merge_word(std::string_view word, std::vector<TokenId>& out) {
    word_ = word;
    symbols_.clear();
    queue_ = {};
    if (vocab_.ignore_merges) {
      if (TokenId id = vocab_.find(word); id != kNoToken) {
        out.push_back(id);
        return;
      }
    }
    for (uint32_t at = 0; at < word.size();) {
      const uint32_t len = static_cast<uint32_t>(
          std::min<size_t>(utf8_sequence_length(static_cast<uint8_t>(word[at])), word.size() - at));
      const int32_t index = static_cast<int32_t>(symbols_.size());
      symbols_.push_back({index - 1, at + len < word.size() ? index + 1 : -1, at, len});
      at += len;
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) queue_pair(i - 1, i);

    while (!queue_.empty()) {
      const Pair pair = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[pair.left];
      Symbol& right = symbols_[pair.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = pair.left;
      queue_pair(left.prev, pair.left);
      queue_pair(pair.left, left.next);
    }

    for (const Symbol& s : symbols_) {
      if (s.size == 0) continue;
      const std::string_view text = word_.substr(s.begin, s.size);
      if (TokenId id = vocab_.find(text); id != kNoToken) {
        out.push_back(id);
        continue;
      }
      // Not a token (a merge whose result is missing from the vocabulary): llama.cpp looks each byte up as
      // a one-byte token and drops the bytes that are not one.
      for (char byte : text)
        if (TokenId id = vocab_.find(std::string_view(&byte, 1)); id != kNoToken) out.push_back(id);
    }
  }

 private:
  void queue_pair(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    key_.assign(word_.substr(l.begin, l.size));
    key_.push_back(' ');
    key_.append(word_.substr(r.begin, r.size));
    auto it = vocab_.merge_ranks.find(std::string_view(key_));
    if (it == vocab_.merge_ranks.end()) return;
    queue_.push({it->second, left, right, l.size + r.size});
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::string key_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Pair, std::vector<Pair>, LaterPair> queue_;
};

}  // namespace

void bpe_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  const std::vector<uint32_t> cpts = decode_utf8_lenient(text);
  const std::vector<size_t> word_lengths = split_words(cpts, vocab.pre);
  WordMerger merger(vocab);
  std::string utf8, encoded;
  size_t start = 0;
  for (size_t length : word_lengths) {
    utf8.clear();
    for (size_t i = start; i < start + length; ++i) append_utf8(utf8, cpts[i]);
    start += length;
    encoded.clear();
    for (char byte : utf8) encoded.append(byte_to_gpt2_char(static_cast<uint8_t>(byte)));
    merger.merge_word(encoded, out);
  }
}

}  // namespace sotto
