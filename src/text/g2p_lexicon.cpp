#include "text/g2p_lexicon.h"

#include <cstring>

namespace sotto::g2p {

namespace {

constexpr std::string_view kTagNames[] = {"DEFAULT", "None", "NOUN", "VERB", "ADJ",
                                          "ADV",     "VBD",  "VBN",  "VBP",  "DT"};
static_assert(std::size(kTagNames) == static_cast<size_t>(Tag::Count));

// Bounds-checked little-endian reads over the image; the first failure sticks.
struct Reader {
  std::span<const uint8_t> b;
  size_t pos = 0;
  bool failed = false;
  uint32_t u32() {
    if (failed || b.size() - pos < 4 || pos > b.size()) {
      failed = true;
      return 0;
    }
    const uint32_t v = b[pos] | (b[pos + 1] << 8) | (b[pos + 2] << 16) | (uint32_t(b[pos + 3]) << 24);
    pos += 4;
    return v;
  }
  std::string_view str8() {
    if (failed || pos >= b.size() || b.size() - pos - 1 < b[pos]) {
      failed = true;
      return {};
    }
    const size_t n = b[pos];
    std::string_view s(reinterpret_cast<const char*>(b.data() + pos + 1), n);
    pos += 1 + n;
    return s;
  }
  bool skip(size_t n) {
    if (failed || b.size() - pos < n) return !(failed = true);
    pos += n;
    return true;
  }
};

int phoneme_byte_of(std::string_view symbol) {
  if (symbol.size() == 1 && static_cast<unsigned char>(symbol[0]) < 0x80) return symbol[0];
  for (size_t i = 0; i < std::size(kPhonemeSymbols); ++i)
    if (kPhonemeSymbols[i] == symbol) return static_cast<int>(0x80 + i);
  return -1;
}

// Compares key with a stored key (shared prefix of prev + suffix) without building it.
int compare_keys(std::string_view a, std::string_view b) {
  const int c = std::memcmp(a.data(), b.data(), a.size() < b.size() ? a.size() : b.size());
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

// Bytes an encoded value takes (the image was checked at load, so this stays inside it).
size_t value_size(const uint8_t* v) {
  if (!(*v & 0x80)) return 1 + *v;
  size_t n = 1;
  for (int i = 0; i < (*v & 0x7f); ++i) n += 2 + (v[n + 1] == 0xff ? 0 : v[n + 1]);
  return n;
}

}  // namespace

std::string to_utf8(std::string_view phoneme_bytes) {
  std::string out;
  out.reserve(phoneme_bytes.size() * 2);
  for (char c : phoneme_bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (c == ph::kFlap)
      out.push_back('T');
    else if (c == ph::kGlottal)
      out.push_back('t');
    else if (b < 0x80)
      out.push_back(c);
    else if (b - 0x80u < std::size(kPhonemeSymbols))
      out.append(kPhonemeSymbols[b - 0x80]);
  }
  return out;
}

bool from_utf8(std::string_view utf8, std::string& out) {
  size_t i = 0;
  while (i < utf8.size()) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    size_t n = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    if (i + n > utf8.size()) return false;
    const int b = phoneme_byte_of(utf8.substr(i, n));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += n;
  }
  return true;
}

// "SOTTOAFX" u32 version(1) u32 n_rules, then per rule: u8 kind, str8 letters, str8 key, u8 drop, str8 add
// (tools/g2p_affixes.py).
Status Lexicon::load_affixes(std::span<const uint8_t> b, std::string_view name) {
  Reader r{b};
  if (b.empty()) return {};
  if (b.size() < 16 || std::memcmp(b.data(), "SOTTOAFX", 8) != 0)
    return error("g2p: ", name, ": the affix rules have no SOTTOAFX magic");
  r.pos = 8;
  if (const uint32_t version = r.u32(); version != 1)
    return error("g2p: ", name, ": affix rules of version ", version, ", expected 1");
  const uint32_t n = r.u32();
  if (n > b.size() / 5)
    return error("g2p: ", name, ": ", n, " affix rules do not fit in ", b.size(), " bytes");
  affixes_.reserve(n);
  for (uint32_t i = 0; i < n && !r.failed; ++i) {
    AffixRule rule;
    if (!r.skip(1)) break;
    rule.prefix = b[r.pos - 1] == 1;
    rule.letters = std::string(r.str8());
    std::string key, add;
    const std::string_view key_utf8 = r.str8();
    if (!r.skip(1)) break;
    rule.drop = b[r.pos - 1];
    const std::string_view add_utf8 = r.str8();
    if (r.failed) break;
    if (!from_utf8(key_utf8, key) || key.size() != 1 || !from_utf8(add_utf8, rule.add) ||
        rule.letters.empty())
      return error("g2p: ", name, ": affix rule ", i, " is not one sotto can read");
    for (char c : rule.letters)
      if (c < 'a' || c > 'z') return error("g2p: ", name, ": affix rule ", i, " has letters other than a-z");
    rule.key = key[0];
    affixes_.push_back(std::move(rule));
  }
  if (r.failed || r.pos != b.size()) return error("g2p: ", name, ": the affix rules are cut off or overlong");
  return {};
}

Result<Lexicon> Lexicon::load(std::span<const uint8_t> bytes, std::string_view name) {
  Lexicon lex;
  lex.image_.assign(bytes.begin(), bytes.end());
  Reader r{lex.image_};
  if (bytes.size() < 16 || std::memcmp(bytes.data(), "SOTTOG2P", 8) != 0)
    return error("g2p: ", name, " is not a sotto G2P lexicon (no SOTTOG2P magic)");
  r.pos = 8;
  const uint32_t version = r.u32();
  if (version != 2 && version != 3)
    return error("g2p: ", name, " has version ", version,
                 ", expected 2 or 3 (make it again: bash scripts/get-models.sh g2p)");
  lex.british_ = r.u32() != 0;
  const uint32_t n_symbols = r.u32();
  if (n_symbols > 254) return error("g2p: ", name, " lists ", n_symbols, " phoneme symbols (at most 254)");
  for (uint32_t i = 0; i < n_symbols; ++i) {
    const std::string_view s = r.str8();
    const int b = phoneme_byte_of(s);
    if (r.failed) break;
    if (b < 0) return error("g2p: ", name, ": phoneme symbol ", i, " ('", s, "') is not one sotto knows");
    lex.code_to_byte_[i + 1] = static_cast<uint8_t>(b);
  }
  const uint32_t n_tags = r.u32();
  if (n_tags > 255) return error("g2p: ", name, " lists ", n_tags, " tags (at most 255)");
  for (uint32_t i = 0; i < n_tags && !r.failed; ++i) {
    const std::string_view s = r.str8();
    lex.tag_of_code_[i] = static_cast<uint8_t>(Tag::Count);
    for (size_t t = 0; t < std::size(kTagNames); ++t)
      if (kTagNames[t] == s) lex.tag_of_code_[i] = static_cast<uint8_t>(t);
  }
  for (int t = 0; t < 2 && !r.failed; ++t) {
    Table& tab = lex.tables_[t];
    tab.n_entries = r.u32();
    tab.n_blocks = r.u32();
    if (r.failed) break;
    if (tab.n_blocks != (tab.n_entries + 15) / 16)
      return error("g2p: ", name, ": table ", t, " has ", tab.n_blocks, " blocks for ", tab.n_entries,
                   " entries (blocks of 16)");
    tab.block_starts = r.pos;
    if (!r.skip(4ull * (tab.n_blocks + 1))) break;
    tab.data_bytes = r.u32();
    tab.data = r.pos;
    if (!r.skip(tab.data_bytes)) break;
    // Walk every entry once so lookups can trust the image: starts in order, lengths inside the data.
    const uint8_t* d = lex.image_.data() + tab.data;
    size_t pos = 0, prev_len = 0;
    for (uint32_t e = 0; e < tab.n_entries; ++e) {
      if (e % 16 == 0 && lex.block_start(tab, e / 16) != pos)
        return error("g2p: ", name, ": table ", t, " block ", e / 16, " does not start at byte ", pos);
      if (tab.data_bytes - pos < 2) return error("g2p: ", name, ": table ", t, " entry ", e, " is cut off");
      const size_t shared = d[pos], suffix = d[pos + 1];
      if (shared > prev_len || (e % 16 == 0 && shared != 0) || tab.data_bytes - pos - 2 < suffix + 1)
        return error("g2p: ", name, ": table ", t, " entry ", e, " has a bad key");
      pos += 2 + suffix;
      prev_len = shared + suffix;
      const uint8_t* v = d + pos;
      const size_t room = tab.data_bytes - pos;
      bool codes_ok = true;
      auto check_codes = [&](const uint8_t* c, size_t count) {
        for (size_t k = 0; k < count; ++k) codes_ok &= c[k] >= 1 && c[k] <= n_symbols;
      };
      size_t n = 1;
      if (!(*v & 0x80)) {
        n += *v;
        if (n <= room) check_codes(v + 1, *v);
      }
      for (size_t k = 0; (*v & 0x80) && k < (*v & 0x7fu) && n + 2 <= room; ++k) {
        const size_t count = v[n + 1] == 0xff ? 0 : v[n + 1];
        if (n + 2 + count <= room) check_codes(v + n + 2, count);
        n += 2 + count;
      }
      if (n > room) return error("g2p: ", name, ": table ", t, " entry ", e, " value is cut off");
      if (!codes_ok)
        return error("g2p: ", name, ": table ", t, " entry ", e, " has a phoneme code past the list");
      pos += n;
    }
    if (pos != tab.data_bytes || lex.block_start(tab, tab.n_blocks) != pos)
      return error("g2p: ", name, ": table ", t, " holds ", tab.data_bytes, " bytes but its entries end at ",
                   pos);
  }
  const uint32_t lts_bytes = r.u32();
  lex.lts_offset_ = r.pos;
  if (!r.skip(lts_bytes) || r.failed) return error("g2p: ", name, " ends early (", bytes.size(), " bytes)");
  lex.lts_bytes_ = lts_bytes;
  if (version >= 3) {  // the affix rules (tools/g2p_affixes.py)
    const uint32_t affix_bytes = r.u32();
    const size_t start = r.pos;
    if (!r.skip(affix_bytes) || r.failed)
      return error("g2p: ", name, " ends early (", bytes.size(), " bytes)");
    SOTTO_TRY(lex.load_affixes(std::span<const uint8_t>(lex.image_).subspan(start, affix_bytes), name));
  }
  return lex;
}

uint32_t Lexicon::block_start(const Table& t, uint32_t i) const {
  const uint8_t* p = image_.data() + t.block_starts + 4ull * i;
  return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24);
}

Lexicon::Entry Lexicon::find(std::string_view key, Tier tier) const {
  const Table& t = tables_[static_cast<int>(tier)];
  if (t.n_entries == 0 || key.empty() || key.size() > 255) return {};
  const uint8_t* d = image_.data() + t.data;
  auto head_key = [&](uint32_t block) {
    const uint8_t* e = d + block_start(t, block);
    return std::string_view(reinterpret_cast<const char*>(e + 2), e[1]);
  };
  // The last block whose first key is <= key.
  uint32_t lo = 0, hi = t.n_blocks;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (compare_keys(head_key(mid), key) <= 0)
      lo = mid;
    else
      hi = mid;
  }
  char buf[256];
  size_t len = 0;
  size_t pos = block_start(t, lo);
  const uint32_t end_entry = (lo + 1) * 16 < t.n_entries ? (lo + 1) * 16 : t.n_entries;
  for (uint32_t e = lo * 16; e < end_entry; ++e) {
    const size_t shared = d[pos], suffix = d[pos + 1];
    std::memcpy(buf + shared, d + pos + 2, suffix);
    len = shared + suffix;
    pos += 2 + suffix;
    const int c = compare_keys(std::string_view(buf, len), key);
    if (c == 0) return Entry{d + pos};
    if (c > 0) break;
    pos += value_size(d + pos);
  }
  return {};
}

bool Lexicon::has_tag(Entry e, Tag tag) const {
  if (!e.has_variants()) return false;
  const uint8_t* v = e.value;
  size_t n = 1;
  for (int i = 0; i < (*v & 0x7f); ++i) {
    if (static_cast<Tag>(tag_of_code_[v[n]]) == tag) return true;
    n += 2 + (v[n + 1] == 0xff ? 0 : v[n + 1]);
  }
  return false;
}

bool Lexicon::pronunciation(Entry e, Tag tag, std::string& out) const {
  if (!e) return false;
  const uint8_t* v = e.value;
  if (!(*v & 0x80)) {
    for (int i = 1; i <= *v; ++i) out.push_back(static_cast<char>(code_to_byte_[v[i]]));
    return true;
  }
  const uint8_t* chosen = nullptr;
  const uint8_t* fallback = nullptr;
  size_t n = 1;
  for (int i = 0; i < (*v & 0x7f); ++i) {
    const Tag t = static_cast<Tag>(tag_of_code_[v[n]]);
    if (t == tag) chosen = v + n + 1;
    if (t == Tag::Default) fallback = v + n + 1;
    n += 2 + (v[n + 1] == 0xff ? 0 : v[n + 1]);
  }
  if (!chosen) chosen = fallback;
  if (!chosen || *chosen == 0xff) return false;
  for (int i = 1; i <= *chosen; ++i) out.push_back(static_cast<char>(code_to_byte_[chosen[i]]));
  return true;
}

}  // namespace sotto::g2p
