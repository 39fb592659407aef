#include "text/g2p_lts.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "text/g2p_lexicon.h"
#include "text/g2p_words.h"

namespace sotto::g2p {

namespace {

// A little-endian cursor for the model files: a read past the end returns 0 and sets `bad`, which each
// loader checks once per section (where its message can name the section) instead of at every field. The
// bytes of a u16 / u32 are read in order (in `u8() | u8() << 8` the two calls are unsequenced).
struct Cursor {
  std::span<const uint8_t> b;
  size_t pos = 0;
  bool bad = false;

  size_t left() const { return b.size() - pos; }
  uint32_t u8() {
    if (bad || pos >= b.size()) return (bad = true), 0u;
    return b[pos++];
  }
  uint32_t u16() {
    const uint32_t lo = u8();
    return lo | (u8() << 8);
  }
  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | (u16() << 16);
  }
};

// One primary stress: of several primaries the first kept (the context tables) or the last (the
// joint-sequence model: where it writes two, the lexicon mostly has the secondary first, as in ˌæbəɹdˈOniən),
// the others made secondary; with none, the first secondary promoted, or a primary put before the first vowel.
void fix_stress(std::string& ps, bool keep_last) {
  size_t primaries = 0;
  if (keep_last) {
    for (size_t i = ps.size(); i-- > 0;)
      if (ps[i] == ph::kPrimary && primaries++ > 0) ps[i] = ph::kSecondary;
  } else {
    for (char& c : ps)
      if (c == ph::kPrimary && primaries++ > 0) c = ph::kSecondary;
  }
  if (primaries > 0) return;
  for (char& c : ps)
    if (c == ph::kSecondary) {
      c = ph::kPrimary;
      return;
    }
  for (size_t i = 0; i < ps.size(); ++i)
    if (is_vowel(ps[i])) {
      ps.insert(ps.begin() + static_cast<long>(i), ph::kPrimary);
      return;
    }
}

}  // namespace

Result<LetterToSound> LetterToSound::load_tables(std::span<const uint8_t> b, std::string_view name) {
  LetterToSound lts;
  if (b.size() < 12 || std::memcmp(b.data(), "SOTTOLTS", 8) != 0)
    return error("g2p: ", name, ": the letter-to-sound tables have no SOTTOLTS magic");
  Cursor in{b, 8};
  if (const uint32_t version = in.u32(); version != 1)
    return error("g2p: ", name, ": letter-to-sound tables of version ", version, ", expected 1");
  const uint32_t n_outputs = in.u32();
  if (n_outputs > 65536)
    return error("g2p: ", name, ": ", n_outputs, " letter-to-sound outputs (at most 65536)");
  for (uint32_t i = 0; i < n_outputs && !in.bad; ++i) {
    if (in.pos >= b.size() || in.left() - 1 < b[in.pos]) {
      in.bad = true;
      break;
    }
    std::string ps;
    if (!from_utf8(std::string_view(reinterpret_cast<const char*>(b.data() + in.pos + 1), b[in.pos]), ps))
      return error("g2p: ", name, ": letter-to-sound output ", i, " has a symbol sotto does not know");
    lts.outputs_.push_back(std::move(ps));
    in.pos += 1 + b[in.pos];
  }
  const uint32_t n_levels = in.u32();
  if (n_levels > 16) return error("g2p: ", name, ": ", n_levels, " letter-to-sound levels (at most 16)");
  for (uint32_t l = 0; l < n_levels && !in.bad; ++l) {
    if (in.left() < 2) {
      in.bad = true;
      break;
    }
    Level level;
    level.left = b[in.pos];
    level.right = b[in.pos + 1];
    in.pos += 2;
    level.n_records = in.u32();
    if (level.left > 8 || level.right > 8)
      return error("g2p: ", name, ": letter-to-sound level ", l, " is wider than 8 letters a side");
    const size_t width = static_cast<size_t>(level.left + 1 + level.right) + 2;
    if (in.bad || level.n_records > in.left() / width) {
      in.bad = true;
      break;
    }
    level.offset = lts.records_.size();
    lts.records_.insert(lts.records_.end(), b.begin() + static_cast<long>(in.pos),
                        b.begin() + static_cast<long>(in.pos + level.n_records * width));
    in.pos += level.n_records * width;
    lts.levels_.push_back(level);
  }
  if (in.bad) return error("g2p: ", name, ": the letter-to-sound tables end early");
  return lts;
}

// The output index stored for `context` at `level`, or -1: binary search over fixed-width records.
int LetterToSound::find(const Level& level, std::string_view context) const {
  const size_t width = context.size() + 2;
  size_t lo = 0, hi = level.n_records;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint8_t* rec = records_.data() + level.offset + mid * width;
    const int c = std::memcmp(rec, context.data(), context.size());
    if (c == 0) {
      const int i = rec[width - 2] | (rec[width - 1] << 8);
      return i < static_cast<int>(outputs_.size()) ? i : -1;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

std::string LetterToSound::read_tables(std::string_view word) const {
  std::string letters = "########";
  letters += word;
  const size_t n = word.size();
  letters += "########";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    // Widest context first; the narrowest level (the letter alone) holds every letter seen in training.
    for (size_t l = levels_.size(); l-- > 0;) {
      const Level& level = levels_[l];
      const std::string_view ctx(letters.data() + i + 8 - level.left,
                                 static_cast<size_t>(level.left + 1 + level.right));
      const int o = find(level, ctx);
      if (o < 0) continue;
      out += outputs_[static_cast<size_t>(o)];
      break;
    }
  }
  return out;
}

Result<LetterToSound> LetterToSound::load(std::span<const uint8_t> b, std::string_view name) {
  if (b.empty()) return LetterToSound{};
  if (b.size() >= 8 && std::memcmp(b.data(), "SOTTOJSM", 8) == 0) return load_jsm(b, name);
  return load_tables(b, name);
}

Result<LetterToSound> LetterToSound::load_jsm(std::span<const uint8_t> b, std::string_view name) {
  LetterToSound m;
  Cursor in{b, 8};
  const uint32_t version = in.u32();
  if (version < 1 || version > 3)
    return error("g2p: ", name, ": joint-sequence model of version ", version, ", expected 1 to 3");
  const uint32_t order = in.u32(), beam = in.u32();
  const uint32_t direction =
      version >= 2 ? in.u32() : 0;  // version 1 reads left to right; 3 adds the reranker
  const uint32_t n_graphones = in.u32();
  if (in.bad) return error("g2p: ", name, ": the joint-sequence model ends early");
  if (direction > 1) return error("g2p: ", name, ": joint-sequence model of direction ", direction);
  m.right_to_left_ = direction == 1;
  if (order < 1 || order > 12 || beam < 1 || beam > 256)
    return error("g2p: ", name, ": joint-sequence model of order ", order, " and beam ", beam,
                 " (at most 12 and 256)");
  if (n_graphones < 2 || n_graphones > 65535)
    return error("g2p: ", name, ": ", n_graphones, " graphones (2 to 65535)");
  m.order_ = static_cast<int>(order);
  m.beam_ = static_cast<int>(beam);
  m.by_letter_.resize(26);
  for (uint32_t i = 0; i < n_graphones && !in.bad; ++i) {
    const uint32_t letter = in.u8(), n = in.u8();
    if (in.bad || in.left() < n) {
      in.bad = true;
      break;
    }
    std::string ps;
    if (!from_utf8(std::string_view(reinterpret_cast<const char*>(b.data() + in.pos), n), ps))
      return error("g2p: ", name, ": graphone ", i, " has a symbol sotto does not know");
    in.pos += n;
    if (letter >= 'a' && letter <= 'z')
      m.by_letter_[letter - 'a'].push_back(static_cast<uint16_t>(i));
    else if (i > 1 || !ps.empty())
      return error("g2p: ", name, ": graphone ", i, " has no letter a-z");
    m.graphones_.push_back(std::move(ps));
  }
  // A letter's graphones are one run of indices (the trainer sorts them by letter): the search reads each
  // history's children of that letter as one run.
  for (const std::vector<uint16_t>& gs : m.by_letter_)
    if (!gs.empty() && gs.back() - gs.front() + 1u != gs.size())
      return error("g2p: ", name, ": the graphones of one letter are not together");
  const uint32_t n_nodes = in.u32();
  if (in.bad || n_nodes == 0 || in.left() / 6 < n_nodes || (version < 3 && in.left() != size_t{n_nodes} * 6))
    return error("g2p: ", name, ": the joint-sequence model's ", n_nodes, " n-grams do not fit its ",
                 in.left(), " bytes");
  m.nodes_.resize(n_nodes);
  uint64_t next_child = 1;
  for (uint32_t i = 0; i < n_nodes; ++i) {
    Node& node = m.nodes_[i];
    node.graphone = static_cast<uint16_t>(in.u16());
    node.cost = static_cast<uint8_t>(in.u8());
    node.backoff = static_cast<uint8_t>(in.u8());
    node.n_children = static_cast<uint16_t>(in.u16());
    node.first_child = static_cast<uint32_t>(next_child);
    next_child += node.n_children;
    // Breadth-first: children come after their parent, and all of them within the file.
    if (node.graphone >= n_graphones || next_child > n_nodes || (node.n_children && node.first_child <= i))
      return error("g2p: ", name, ": joint-sequence n-gram ", i, " is not one sotto can read");
  }
  // Children sorted by graphone (the binary search needs it).
  for (uint32_t i = 0; i < n_nodes; ++i) {
    const Node& node = m.nodes_[i];
    for (uint32_t c = node.first_child + 1; c < node.first_child + node.n_children; ++c)
      if (m.nodes_[c - 1].graphone >= m.nodes_[c].graphone)
        return error("g2p: ", name, ": joint-sequence n-gram ", i, "'s children are not sorted");
  }
  if (version >= 3) {
    SOTTO_ASSIGN(const size_t end, m.load_stress(b, in.pos, name));
    if (end != b.size())
      return error("g2p: ", name, ": ", b.size() - end, " bytes after the joint-sequence model's reranker");
  }
  return m;
}

// The reranker's section (tools/g2p_jsm_train.py's StressTable.blob); returns where it ends.
Result<size_t> LetterToSound::load_stress(std::span<const uint8_t> b, size_t start, std::string_view name) {
  Cursor in{b, start};
  const auto ends_early = [&] { return error("g2p: ", name, ": the stress reranker ends early"); };
  w_model_ = static_cast<int>(in.u16());
  w_stress_ = static_cast<int>(in.u16());
  w_fix_ = static_cast<int>(in.u16());
  const uint32_t n_patterns = in.u32();
  if (in.bad) return ends_early();
  if (n_patterns > 65535) return error("g2p: ", name, ": ", n_patterns, " stress patterns (at most 65535)");
  for (uint32_t i = 0; i < n_patterns && !in.bad; ++i) {
    const uint32_t n = in.u8();
    std::string pat;
    for (uint32_t k = 0; k < n && !in.bad; ++k) {
      const uint32_t mark = in.u8();
      if (mark > 2) return error("g2p: ", name, ": stress pattern ", i, " has a mark ", mark, " (0 to 2)");
      pat.push_back(static_cast<char>(mark));
    }
    const bool sorted = patterns_.empty() || patterns_.back().size() < pat.size() ||
                        (patterns_.back().size() == pat.size() && patterns_.back() < pat);
    if (!in.bad && !sorted) return error("g2p: ", name, ": stress pattern ", i, " is out of order");
    patterns_.push_back(std::move(pat));
  }
  const uint32_t n_nodes = in.u32();
  if (in.bad) return ends_early();
  if (n_nodes == 0 || in.left() / 6 < n_nodes)
    return error("g2p: ", name, ": ", n_nodes, " stress nodes do not fit the file");
  stress_nodes_.resize(n_nodes);
  uint64_t next_child = 1, next_entry = 0;
  for (uint32_t i = 0; i < n_nodes; ++i) {
    StressNode& node = stress_nodes_[i];
    node.letter = static_cast<uint8_t>(in.u8());
    node.backoff = static_cast<uint8_t>(in.u8());
    node.n_children = static_cast<uint16_t>(in.u16());
    node.n_entries = static_cast<uint16_t>(in.u16());
    node.first_child = static_cast<uint32_t>(next_child);
    node.first_entry = static_cast<uint32_t>(next_entry);
    next_child += node.n_children;
    next_entry += node.n_entries;
    // Breadth first (children after their parent), letters a-z but the root's.
    const bool letter_ok = i == 0 ? node.letter == 0 : node.letter >= 'a' && node.letter <= 'z';
    if (next_child > n_nodes || (node.n_children && node.first_child <= i) || !letter_ok)
      return error("g2p: ", name, ": stress node ", i, " is not one sotto can read");
  }
  if (in.bad || in.left() / 3 < next_entry) return ends_early();
  entry_pattern_.resize(next_entry);
  entry_cost_.resize(next_entry);
  for (uint64_t e = 0; e < next_entry; ++e) {
    entry_pattern_[e] = static_cast<uint16_t>(in.u16());
    entry_cost_[e] = static_cast<uint8_t>(in.u8());
    if (entry_pattern_[e] >= patterns_.size())
      return error("g2p: ", name, ": stress entry ", e, " names pattern ", entry_pattern_[e], " of ",
                   patterns_.size());
  }
  // Children sorted by letter and entries by pattern (both binary searched).
  for (const StressNode& node : stress_nodes_) {
    for (uint32_t c = node.first_child + 1; c < node.first_child + node.n_children; ++c)
      if (stress_nodes_[c - 1].letter >= stress_nodes_[c].letter)
        return error("g2p: ", name, ": a stress node's children are not sorted");
    for (uint32_t e = node.first_entry + 1; e < node.first_entry + node.n_entries; ++e)
      if (entry_pattern_[e - 1] >= entry_pattern_[e])
        return error("g2p: ", name, ": a stress node's patterns are not sorted");
  }
  if (in.bad) return ends_early();
  return in.pos;
}

// -ln P(the stress pattern of `phonemes` | the last letters of the word), tenths of a nat: the deepest suffix
// node that lists the pattern gives its cost, plus the backoff costs of the deeper ones (as the trainer sums).
int64_t LetterToSound::stress_cost(std::string_view letters, std::string_view phonemes) const {
  constexpr int kMaxSuffix = 32;
  constexpr int64_t kUniformVowelCost = 11;  // the trainer's UNIFORM_VOWEL_COST: 1/3 a vowel
  std::string pat;                           // last vowel first
  char mark = 0;
  for (char c : phonemes) {
    if (c == ph::kPrimary)
      mark = 1;
    else if (c == ph::kSecondary)
      mark = 2;
    else if (is_vowel(c))
      pat.push_back(mark), mark = 0;
  }
  std::reverse(pat.begin(), pat.end());
  const auto it = std::lower_bound(patterns_.begin(), patterns_.end(), pat,
                                   [](const std::string& a, const std::string& b) {
                                     return a.size() != b.size() ? a.size() < b.size() : a < b;
                                   });
  const int64_t index = it != patterns_.end() && *it == pat ? it - patterns_.begin() : -1;
  uint32_t chain[kMaxSuffix + 1] = {0};
  int depth = 1;
  for (size_t k = letters.size(); k-- > 0 && depth <= kMaxSuffix;) {
    const StressNode& node = stress_nodes_[chain[depth - 1]];
    const auto first = stress_nodes_.begin() + node.first_child;
    const auto last = first + node.n_children;
    const auto c = std::lower_bound(first, last, static_cast<uint8_t>(letters[k]),
                                    [](const StressNode& n, uint8_t l) { return n.letter < l; });
    if (c == last || c->letter != static_cast<uint8_t>(letters[k])) break;
    chain[depth++] = static_cast<uint32_t>(c - stress_nodes_.begin());
  }
  int64_t acc = 0;
  for (int d = depth; d-- > 0;) {
    const StressNode& node = stress_nodes_[chain[d]];
    if (index >= 0) {
      const auto first = entry_pattern_.begin() + node.first_entry;
      const auto last = first + node.n_entries;
      const auto e = std::lower_bound(first, last, static_cast<uint16_t>(index));
      if (e != last && *e == index) return acc + entry_cost_[static_cast<size_t>(e - entry_pattern_.begin())];
    }
    acc += node.backoff;
  }
  return acc + kUniformVowelCost * static_cast<int64_t>(pat.size());
}

// The node of `graphone` after `node`'s history, or -1: a binary search over its children.
int64_t LetterToSound::child(uint32_t node, uint16_t graphone) const {
  const Node& n = nodes_[node];
  uint32_t lo = n.first_child, hi = n.first_child + n.n_children;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    const uint16_t g = nodes_[mid].graphone;
    if (g == graphone) return mid;
    if (g < graphone)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

namespace {

constexpr int kMaxOrder = 12;

// A history: the trie nodes of its suffixes, shortest (the root) first; a suffix the model left out means
// every longer one is left out too.
struct History {
  uint32_t node[kMaxOrder];
  int n = 0;
};

}  // namespace

// The beam search of tools/g2p_jsm_train.py's Model.read, step for step: at each letter every hypothesis is
// extended by each graphone of the letter; candidates are ordered by (cost, rank of the hypothesis extended,
// graphone), the first of each history kept, beam_ of them. Costs are integers, so both find the same path.
std::string LetterToSound::read_jsm(std::string_view word) const {
  // A right-to-left model reads the last letter first; its path is then in the word's order backwards.
  std::string letters(word);
  if (right_to_left_) std::reverse(letters.begin(), letters.end());
  struct Hyp {
    int64_t cost;
    History h;
    uint32_t back;  // into `trail`: the hypothesis's last graphone and where the one before it is
  };
  struct Step {
    uint16_t graphone;
    uint32_t prev;
  };
  struct Cand {
    int64_t cost;
    uint32_t rank;
    uint16_t graphone;
  };
  auto score = [&](const History& h, uint16_t g) {
    int64_t acc = 0;
    for (int k = h.n; k-- > 0;) {
      const int64_t c = child(h.node[k], g);
      if (c >= 0) return acc + nodes_[static_cast<size_t>(c)].cost;
      acc += nodes_[h.node[k]].backoff;
    }
    return acc + 255;  // a graphone never seen
  };
  auto advance = [&](const History& h, uint16_t g) {
    History out;
    out.node[0] = 0;
    out.n = 1;
    for (int k = 0; k < h.n && out.n < order_; ++k) {
      const int64_t c = child(h.node[k], g);
      if (c < 0) break;
      out.node[out.n++] = static_cast<uint32_t>(c);
    }
    return out;
  };
  std::vector<Step> trail;  // every kept hypothesis's last step, so a path is read back from its end
  trail.reserve(letters.size() * static_cast<size_t>(beam_) + 1);
  History root;
  root.node[0] = 0;
  root.n = 1;
  std::vector<Hyp> hyps{{0, advance(root, 1), UINT32_MAX}}, next;
  std::vector<Cand> cands;
  std::vector<uint32_t> seen;
  std::vector<int64_t> letter_cost;
  for (char c : letters) {
    const std::vector<uint16_t>& gs = by_letter_[static_cast<size_t>(c - 'a')];
    if (gs.empty()) return {};
    const uint16_t lo = gs.front(), hi = static_cast<uint16_t>(gs.back() + 1);
    cands.clear();
    for (uint32_t r = 0; r < hyps.size(); ++r) {
      // score() for every graphone of the letter at once (where the time goes: one binary search a history
      // suffix instead of one a suffix and graphone): the deepest suffix that has the graphone as a child
      // gives its cost, plus the backoff costs of the deeper suffixes.
      letter_cost.assign(gs.size(), -1);
      size_t unset = gs.size();
      int64_t acc = 0;
      const History& h = hyps[r].h;
      for (int k = h.n; k-- > 0 && unset > 0;) {
        const Node& node = nodes_[h.node[k]];
        uint32_t a = node.first_child, b = node.first_child + node.n_children;
        while (a < b) {  // the first child with a graphone >= lo
          const uint32_t mid = (a + b) / 2;
          if (nodes_[mid].graphone < lo)
            a = mid + 1;
          else
            b = mid;
        }
        for (uint32_t ch = a; ch < node.first_child + node.n_children && nodes_[ch].graphone < hi; ++ch) {
          int64_t& slot = letter_cost[nodes_[ch].graphone - lo];
          if (slot < 0) slot = acc + nodes_[ch].cost, --unset;
        }
        acc += node.backoff;
      }
      for (size_t i = 0; i < gs.size(); ++i)
        cands.push_back({hyps[r].cost + (letter_cost[i] < 0 ? acc + 255 : letter_cost[i]), r,
                         static_cast<uint16_t>(lo + i)});
    }
    const auto before = [](const Cand& a, const Cand& b) {
      if (a.cost != b.cost) return a.cost < b.cost;
      if (a.rank != b.rank) return a.rank < b.rank;
      return a.graphone < b.graphone;
    };
    // Only the first few candidates are usually read (a beam's worth, less the repeated histories): sort
    // those, and the rest only if they run out. The order is total, so this is the full sort's order.
    size_t sorted = std::min(cands.size(), static_cast<size_t>(beam_) * 2);
    std::partial_sort(cands.begin(), cands.begin() + static_cast<long>(sorted), cands.end(), before);
    next.clear();
    seen.clear();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (i == sorted) {
        std::sort(cands.begin() + static_cast<long>(sorted), cands.end(), before);
        sorted = cands.size();
      }
      const Cand& cand = cands[i];
      const Hyp& from = hyps[cand.rank];
      const History h = advance(from.h, cand.graphone);
      const uint32_t key = h.node[h.n - 1];
      // A plain loop: libc++ turns std::find over 32-bit ints into wmemchr, which the wasm build lacks.
      bool repeated = false;
      for (uint32_t k : seen) repeated |= k == key;
      if (repeated) continue;
      seen.push_back(key);
      trail.push_back({cand.graphone, from.back});
      next.push_back({cand.cost, h, static_cast<uint32_t>(trail.size() - 1)});
      if (next.size() == static_cast<size_t>(beam_)) break;
    }
    if (next.empty()) return {};
    hyps.swap(next);
  }
  // The final hypotheses in the trainer's order: by total cost (the end of the word included), then rank.
  std::vector<std::pair<int64_t, uint32_t>> finals;
  for (uint32_t r = 0; r < hyps.size(); ++r) finals.emplace_back(hyps[r].cost + score(hyps[r].h, 0), r);
  std::sort(finals.begin(), finals.end());
  auto phonemes = [&](uint32_t r) {
    std::vector<uint16_t> path;  // last step first
    for (uint32_t t = hyps[r].back; t != UINT32_MAX; t = trail[t].prev) path.push_back(trail[t].graphone);
    if (!right_to_left_) std::reverse(path.begin(), path.end());
    std::string out;
    for (uint16_t g : path) out += graphones_[g];
    return out;
  };
  // Longer words are no words (the G2P spells them past 40 letters): the search's best, so the variants
  // (one a primary, each the word's length) stay linear work.
  constexpr size_t kMaxRerankLetters = 40;  // the trainer's RERANK_MAX_LETTERS
  if (stress_nodes_.empty() || word.size() > kMaxRerankLetters) return phonemes(finals[0].second);
  // Rerank: each hypothesis's stress variants (one primary kept of several; fix_stress's reading where it
  // wrote none); the first of the lowest score wins. 16 hypotheses of a few trie lookups each: small beside
  // the search.
  std::string best;
  int64_t best_score = INT64_MAX;
  for (const auto& [total, r] : finals) {
    const std::string ps = phonemes(r);
    const auto consider = [&](const std::string& variant, int fixed) {
      const int64_t sc = w_model_ * total + w_stress_ * stress_cost(word, variant) + w_fix_ * fixed;
      if (sc < best_score) best_score = sc, best = variant;
    };
    const auto primaries = std::count(ps.begin(), ps.end(), ph::kPrimary);
    if (primaries == 1) {
      consider(ps, 0);
    } else if (primaries == 0) {
      std::string fixed = ps;
      fix_stress(fixed, true);
      consider(fixed, 1);
    } else {
      for (size_t keep = 0; keep < ps.size(); ++keep) {
        if (ps[keep] != ph::kPrimary) continue;
        std::string variant = ps;
        for (size_t i = 0; i < variant.size(); ++i)
          if (variant[i] == ph::kPrimary && i != keep) variant[i] = ph::kSecondary;
        consider(variant, 1);
      }
    }
  }
  return best;
}

std::string LetterToSound::read(std::string_view word) const {
  std::string letters;
  for (char c : word) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c >= 'a' && c <= 'z') letters.push_back(c);
  }
  std::string out = joint_sequence() ? read_jsm(letters) : read_tables(letters);
  fix_stress(out, joint_sequence());
  return out;
}

}  // namespace sotto::g2p
