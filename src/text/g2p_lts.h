// Letter-to-sound for words in no lexicon: our own models, trained on misaki's lexicon and carried at the end
// of each g2p-en-*.bin lexicon file. Two kinds are read:
//  - a joint-sequence model (tools/g2p_jsm_train.py, data/g2p/jsm-en-*.bin, "SOTTOJSM"): each letter joined
//    with zero, one or two phonemes (a "graphone"; a stress mark rides with its vowel), an n-gram model over a
//    word's graphones, and a beam search for the most likely graphone sequence of the word's letters (read
//    from the last letter to the first in the shipped models: English stress follows the word's end), its
//    final hypotheses then reranked with a stress-pattern table (file version 3);
//  - the older context tables (tools/g2p_lts_train.py, "SOTTOLTS"): each letter's phonemes are those of the
//    widest letter context around it seen in training.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto::g2p {

class LetterToSound {
 public:
  // Reads the model (copied); an empty span gives a model that knows nothing (every word comes out empty).
  static Result<LetterToSound> load(std::span<const uint8_t> bytes, std::string_view name);

  // Phoneme bytes (see g2p_lexicon.h) for a word of ASCII letters (case ignored, other characters skipped),
  // with one primary stress. Time and memory are linear in the word's length (the beam is bounded).
  std::string read(std::string_view word) const;

  bool empty() const { return outputs_.empty() && graphones_.empty(); }
  bool joint_sequence() const { return !graphones_.empty(); }

 private:
  // Context tables.
  struct Level {
    int left = 0, right = 0;
    size_t offset = 0, n_records = 0;  // into records_: n_records of (left + 1 + right) letters + u16 index
  };
  static Result<LetterToSound> load_tables(std::span<const uint8_t> bytes, std::string_view name);
  int find(const Level& level, std::string_view context) const;
  std::string read_tables(std::string_view letters) const;

  std::vector<std::string> outputs_;  // phoneme bytes
  std::vector<Level> levels_;         // narrowest first
  std::vector<uint8_t> records_;

  // Joint-sequence model: an n-gram trie over graphones, node 0 the empty history.
  struct Node {
    uint32_t first_child = 0;  // children are nodes [first_child, first_child + n_children), by graphone
    uint16_t graphone = 0, n_children = 0;
    uint8_t cost = 0, backoff = 0;  // -ln P(graphone | parent's history), -ln backoff weight; tenths of a nat
  };
  static Result<LetterToSound> load_jsm(std::span<const uint8_t> bytes, std::string_view name);
  Result<size_t> load_stress(std::span<const uint8_t> bytes, size_t pos, std::string_view name);
  int64_t child(uint32_t node, uint16_t graphone) const;
  std::string read_jsm(std::string_view word) const;
  int64_t stress_cost(std::string_view letters, std::string_view phonemes) const;

  int order_ = 0, beam_ = 0;
  bool right_to_left_ = false;
  std::vector<std::string> graphones_;            // phoneme bytes; 0 ends a word, 1 starts one
  std::vector<std::vector<uint16_t>> by_letter_;  // 'a'..'z': the graphones of that letter
  std::vector<Node> nodes_;

  // The reranker (file version 3): the search's final hypotheses, each with its choice of primary stress,
  // scored again by w_model * n-gram cost + w_stress * stress-pattern cost + w_fix (stress not written as
  // one primary). The stress-pattern model is a trie over the word's letters from the last; a pattern is one
  // byte a vowel (0 none, 1 primary, 2 secondary), last vowel first.
  struct StressNode {
    uint32_t first_child = 0, first_entry = 0;
    uint16_t n_children = 0, n_entries = 0;
    uint8_t letter = 0, backoff = 0;
  };
  int w_model_ = 1, w_stress_ = 0, w_fix_ = 0;
  std::vector<std::string> patterns_;  // sorted by (length, bytes)
  std::vector<StressNode> stress_nodes_;
  std::vector<uint16_t> entry_pattern_;  // per node, sorted
  std::vector<uint8_t> entry_cost_;
};

}  // namespace sotto::g2p
