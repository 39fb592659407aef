// The WGSL rewriting of gpu/fusion.h: a small lexer, the module-scope declarations of each kernel, and the
// rewrite of their storage and workgroup arrays into accessors over shared roots and pools.
#include "gpu/fusion.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace sotto::gpu {

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Lexing: identifiers, numbers, punctuation (longest operator first), and spacing (comments become spacing).

struct Tok {
  enum class Kind { Ident, Number, Punct, Space };
  Kind kind;
  std::string text;
};

// ASCII classes written out: the wasm build's libc has no <cctype>.
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

std::vector<Tok> lex(std::string_view s) {
  static const char* kOps[] = {"<<=", ">>=", "->", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                               "==",  "!=",  "<=", ">=", "&&", "||", "<<", ">>", "++", "--"};
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (s.compare(i, 2, "//") == 0) {
      const size_t end = s.find('\n', i);
      out.push_back({Tok::Kind::Space, "\n"});
      i = end == std::string_view::npos ? s.size() : end + 1;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t end = s.find("*/", i + 2);
      out.push_back({Tok::Kind::Space, " "});
      i = end == std::string_view::npos ? s.size() : end + 2;
    } else if (is_space(c)) {
      size_t j = i;
      while (j < s.size() && is_space(s[j])) ++j;
      out.push_back({Tok::Kind::Space, std::string(s.substr(i, j - i))});
      i = j;
    } else if (is_ident_start(c)) {
      size_t j = i;
      while (j < s.size() && is_ident_char(s[j])) ++j;
      out.push_back({Tok::Kind::Ident, std::string(s.substr(i, j - i))});
      i = j;
    } else if (is_digit(c) || (c == '.' && i + 1 < s.size() && is_digit(s[i + 1]))) {
      size_t j = i;
      while (j < s.size() && (is_ident_char(s[j]) || s[j] == '.' ||
                              ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E') &&
                               s.compare(i, 2, "0x") != 0)))
        ++j;
      out.push_back({Tok::Kind::Number, std::string(s.substr(i, j - i))});
      i = j;
    } else {
      size_t len = 1;
      for (const char* op : kOps)
        if (s.compare(i, std::char_traits<char>::length(op), op) == 0) {
          len = std::char_traits<char>::length(op);
          break;
        }
      out.push_back({Tok::Kind::Punct, std::string(s.substr(i, len))});
      i += len;
    }
  }
  return out;
}

std::optional<uint64_t> parse_number(std::string_view s) {
  while (!s.empty() && (s.back() == 'u' || s.back() == 'i')) s.remove_suffix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// ---------------------------------------------------------------------------------------------------------------
// One kernel module: its module-scope items.

struct Item {
  enum class Kind { Enable, Var, Const, Struct, Fn, Other };
  Kind kind = Kind::Other;
  size_t begin = 0, end = 0;  // tokens [begin, end), attributes included
  std::string name;
  std::optional<uint32_t> binding;
  std::string address_space, access;    // var<address_space, access>
  std::string type;                     // var / const type, spaces removed
  size_t type_begin = 0, type_end = 0;  // var: the tokens of its type
  size_t body_begin = 0;                // fn: the '(' of its parameters; struct: its '{'
  uint32_t workgroup_size = 0;          // fn: @workgroup_size(x), 0 when none
  bool compute = false;
};

class Module {
 public:
  Module(std::string_view wgsl, std::string prefix) : toks_(lex(wgsl)), prefix_(std::move(prefix)) {}

  Status parse();
  std::vector<Tok>& toks() { return toks_; }
  const std::vector<Tok>& toks() const { return toks_; }
  std::vector<Item>& items() { return items_; }
  const std::string& prefix() const { return prefix_; }
  size_t next(size_t i) const {  // the next non-space token at or after i
    while (i < toks_.size() && toks_[i].kind == Tok::Kind::Space) ++i;
    return i;
  }
  size_t prev(size_t i) const {  // the previous non-space token before i (toks_.size() when none)
    while (i > 0) {
      --i;
      if (toks_[i].kind != Tok::Kind::Space) return i;
    }
    return toks_.size();
  }
  bool is(size_t i, std::string_view text) const { return i < toks_.size() && toks_[i].text == text; }
  // The token closing the bracket opened at i ('(' '[' '{').
  Result<size_t> closing(size_t i) const;
  std::string text(size_t b, size_t e, bool spaces = true) const {
    std::string s;
    for (size_t i = b; i < e && i < toks_.size(); ++i)
      if (spaces || toks_[i].kind != Tok::Kind::Space) s += toks_[i].text;
    return s;
  }
  // Renames every module-scope name (not member accesses, not struct field declarations).
  void rename();
  // The value of a `const NAME = <number>;`.
  std::optional<uint64_t> const_value(std::string_view name) const;

 private:
  std::vector<Tok> toks_;
  std::string prefix_;
  std::vector<Item> items_;
};

Result<size_t> Module::closing(size_t i) const {
  int depth = 0;
  for (size_t j = i; j < toks_.size(); ++j) {
    const std::string& t = toks_[j].text;
    if (toks_[j].kind != Tok::Kind::Punct) continue;
    if (t == "(" || t == "[" || t == "{") ++depth;
    if (t == ")" || t == "]" || t == "}") {
      if (--depth == 0) return j;
    }
  }
  return error("fusion: unbalanced brackets");
}

Status Module::parse() {
  size_t i = next(0);
  while (i < toks_.size()) {
    Item it;
    it.begin = i;
    // Attributes.
    while (is(i, "@")) {
      const size_t name = next(i + 1);
      if (name >= toks_.size()) return error("fusion: an attribute at the end of the module");
      const std::string& a = toks_[name].text;
      size_t after = next(name + 1);
      std::string arg;
      if (is(after, "(")) {
        SOTTO_ASSIGN(size_t close, closing(after));
        arg = text(after + 1, close, false);
        after = next(close + 1);
      }
      if (a == "binding") {
        const auto v = parse_number(arg);
        if (!v) return error("fusion: @binding(", arg, ")");
        it.binding = static_cast<uint32_t>(*v);
      } else if (a == "compute") {
        it.compute = true;
      } else if (a == "workgroup_size") {
        const auto v = parse_number(arg);
        if (!v) return error("fusion: @workgroup_size(", arg, ") is not one number");
        it.workgroup_size = static_cast<uint32_t>(*v);
      }
      i = after;
    }
    if (i >= toks_.size()) return error("fusion: attributes without a declaration");
    const std::string kw = toks_[i].text;
    auto to_semicolon = [&](size_t from) -> Result<size_t> {
      for (size_t j = from; j < toks_.size(); ++j) {
        if (is(j, "{") || is(j, "(") || is(j, "[")) {
          SOTTO_ASSIGN(size_t c, closing(j));
          j = c;
        } else if (is(j, ";")) {
          return j;
        }
      }
      return error("fusion: a declaration without ';'");
    };
    if (kw == "enable" || kw == "requires" || kw == "diagnostic") {
      it.kind = Item::Kind::Enable;
      SOTTO_ASSIGN(size_t semi, to_semicolon(i));
      it.end = semi + 1;
    } else if (kw == "var") {
      it.kind = Item::Kind::Var;
      size_t j = next(i + 1);
      if (is(j, "<")) {
        j = next(j + 1);
        it.address_space = toks_[j].text;
        j = next(j + 1);
        if (is(j, ",")) {
          j = next(j + 1);
          it.access = toks_[j].text;
          j = next(j + 1);
        }
        if (!is(j, ">")) return error("fusion: var<", it.address_space, "...> not closed");
        j = next(j + 1);
      } else {
        it.address_space = "private";
      }
      it.name = toks_[j].text;
      j = next(j + 1);
      if (!is(j, ":")) return error("fusion: var ", it.name, " without a type");
      it.type_begin = next(j + 1);
      SOTTO_ASSIGN(size_t semi, to_semicolon(j));
      it.type_end = semi;
      it.type = text(it.type_begin, semi, false);
      it.end = semi + 1;
    } else if (kw == "const" || kw == "override" || kw == "alias") {
      it.kind = kw == "const" ? Item::Kind::Const : Item::Kind::Other;
      it.name = toks_[next(i + 1)].text;
      SOTTO_ASSIGN(size_t semi, to_semicolon(i));
      it.end = semi + 1;
    } else if (kw == "struct") {
      it.kind = Item::Kind::Struct;
      const size_t name = next(i + 1);
      it.name = toks_[name].text;
      it.body_begin = next(name + 1);
      if (!is(it.body_begin, "{")) return error("fusion: struct ", it.name, " without a body");
      SOTTO_ASSIGN(size_t close, closing(it.body_begin));
      it.end = is(next(close + 1), ";") ? next(close + 1) + 1 : close + 1;
    } else if (kw == "fn") {
      it.kind = Item::Kind::Fn;
      const size_t name = next(i + 1);
      it.name = toks_[name].text;
      it.body_begin = next(name + 1);
      size_t j = it.body_begin;
      while (j < toks_.size() && !is(j, "{")) ++j;
      SOTTO_ASSIGN(size_t close, closing(j));
      it.end = close + 1;
    } else {
      return error("fusion: unexpected '", kw, "' at module scope");
    }
    items_.push_back(it);
    i = next(it.end);
  }
  return {};
}

void Module::rename() {
  std::set<std::string> names;
  for (const Item& it : items_)
    if (!it.name.empty()) names.insert(it.name);
  // Inside functions a parameter or a let / var / const of the same name hides a module-scope one (Q6_K's dot
  // has a local `p`, the kernels' uniforms are `p`): such names stay as they are while their block lasts.
  for (const Item& it : items_) {
    if (it.kind == Item::Kind::Struct) {
      for (size_t i = it.begin; i < it.end; ++i) {  // its name and field types, not its field names
        Tok& t = toks_[i];
        const size_t before = prev(i);
        if (t.kind == Tok::Kind::Ident && names.count(t.text) && !is(next(i + 1), ":") &&
            !(before < toks_.size() && toks_[before].text == "."))
          t.text = prefix_ + t.text;
      }
      continue;
    }
    std::vector<std::set<std::string>> scopes(1);  // the function's parameters, then one per block
    bool in_params = it.kind == Item::Kind::Fn;
    for (size_t i = it.begin; i < it.end; ++i) {
      Tok& t = toks_[i];
      if (t.kind == Tok::Kind::Punct) {
        if (t.text == "{") {
          in_params = false;
          scopes.emplace_back();
        } else if (t.text == "}" && scopes.size() > 1) {
          scopes.pop_back();
        }
        continue;
      }
      if (t.kind != Tok::Kind::Ident) continue;
      const size_t before = prev(i);
      const std::string& b = before < toks_.size() ? toks_[before].text : std::string();
      if (b == ".") continue;  // a member
      const bool declares = it.kind == Item::Kind::Fn && i > it.body_begin &&
                            ((scopes.size() > 1 && (b == "let" || b == "var" || b == "const")) ||
                             (in_params && is(next(i + 1), ":") && b != "@"));
      if (declares) {
        scopes.back().insert(t.text);
        continue;
      }
      if (!names.count(t.text)) continue;
      bool hidden = false;
      for (const auto& scope : scopes) hidden = hidden || scope.count(t.text) > 0;
      if (!hidden) t.text = prefix_ + t.text;
    }
  }
  for (Item& it : items_) {
    if (!it.name.empty()) it.name = prefix_ + it.name;
    if (it.kind == Item::Kind::Var) it.type = text(it.type_begin, it.type_end, false);
  }
}

std::optional<uint64_t> Module::const_value(std::string_view name) const {
  for (const Item& it : items_) {
    if (it.kind != Item::Kind::Const || it.name != name) continue;
    // const NAME (: T)? = NUMBER ;
    size_t j = it.begin;
    while (j < it.end && !is(j, "=")) ++j;
    j = next(j + 1);
    if (j < it.end && toks_[j].kind == Tok::Kind::Number && is(next(j + 1), ";"))
      return parse_number(toks_[j].text);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Element types: how many words one element takes and how it is made from / split into u32 words.

struct Elem {
  std::string type;  // the WGSL type
  uint32_t words = 1;
  std::string scalar;  // f32 / u32 / i32
  bool atomic = false;
};

std::optional<Elem> elem_of(std::string_view t) {
  if (t == "f32" || t == "u32" || t == "i32") return Elem{std::string(t), 1, std::string(t), false};
  if (t == "vec2f" || t == "vec2<f32>") return Elem{"vec2f", 2, "f32", false};
  if (t == "vec4f" || t == "vec4<f32>") return Elem{"vec4f", 4, "f32", false};
  if (t == "vec2u" || t == "vec2<u32>") return Elem{"vec2u", 2, "u32", false};
  if (t == "vec4u" || t == "vec4<u32>") return Elem{"vec4u", 4, "u32", false};
  if (t == "atomic<u32>") return Elem{"atomic<u32>", 1, "u32", true};
  if (t == "atomic<i32>") return Elem{"atomic<i32>", 1, "i32", true};
  return std::nullopt;
}

// `word` (a u32 expression) as the scalar type, and back.
std::string from_word(const std::string& scalar, const std::string& word) {
  return scalar == "u32" ? word : cat("bitcast<", scalar, ">(", word, ")");
}
std::string to_word(const std::string& scalar, const std::string& value) {
  return scalar == "u32" ? value : cat("bitcast<u32>(", value, ")");
}

// The accessor functions of one array: NAME_ld(i) and NAME_st(i, v) over `words(j)` / `store(j, w)`.
// (No NAME_st for a root nobody writes: a store into read-only storage does not compile, even unused.)
std::string accessors(const std::string& name, const Elem& e, const std::string& base,
                      const std::function<std::string(const std::string&)>& load,
                      const std::function<std::string(const std::string&, const std::string&)>& store,
                      bool writable = true) {
  static const char* kComp[] = {"x", "y", "z", "w"};
  std::string ld =
      cat("fn ", name, "_ld(i: u32) -> ", e.type, " {\n  let j = ", base, " + ", e.words, "u * i;\n");
  std::string st =
      cat("fn ", name, "_st(i: u32, v: ", e.type, ") {\n  let j = ", base, " + ", e.words, "u * i;\n");
  if (e.words == 1) {
    ld += cat("  return ", from_word(e.scalar, load("j")), ";\n}\n");
    st += cat("  ", store("j", to_word(e.scalar, "v")), "\n}\n");
  } else {
    std::string parts;
    for (uint32_t c = 0; c < e.words; ++c) {
      const std::string j = cat("j + ", c, "u");
      parts += cat(c ? ", " : "", from_word(e.scalar, load(j)));
      st += cat("  ", store(j, to_word(e.scalar, cat("v.", kComp[c]))), "\n");
    }
    ld += cat("  return ", e.type, "(", parts, ");\n}\n");
    st += "}\n";
  }
  return writable ? ld + st : ld;
}

// How one array of a phase is reached after fusion.
struct ArrayAccess {
  Elem elem;
  std::string root;  // the root buffer or workgroup pool it lives in
  std::string base;  // its first word there (a WGSL u32 expression)
};

// Rewrites tokens [b, e) of m: NAME[i] of the arrays in `arrays` becomes NAME_ld(i), NAME[i] = v becomes
// NAME_st(i, v), NAME[i] op= v becomes NAME_st(i, NAME_ld(i) op (v)), &NAME[i] a pointer into the root or pool.
Result<std::string> rewrite(const Module& m, size_t b, size_t e,
                            const std::map<std::string, ArrayAccess>& arrays) {
  const std::vector<Tok>& t = m.toks();
  std::string out;
  for (size_t i = b; i < e; ++i) {
    auto found = t[i].kind == Tok::Kind::Ident ? arrays.find(t[i].text) : arrays.end();
    const size_t open = m.next(i + 1);
    if (found == arrays.end() || !m.is(open, "[")) {
      out += t[i].text;
      continue;
    }
    const ArrayAccess& a = found->second;
    SOTTO_ASSIGN(size_t close, m.closing(open));
    SOTTO_ASSIGN(std::string index, rewrite(m, open + 1, close, arrays));
    const size_t before = m.prev(i);
    const size_t before2 = before < t.size() ? m.prev(before) : t.size();
    const bool address_of = before < t.size() && t[before].text == "&" &&
                            (before2 >= t.size() || (t[before2].kind == Tok::Kind::Punct &&
                                                     t[before2].text != ")" && t[before2].text != "]"));
    if (address_of) {
      if (!a.elem.atomic) return error("fusion: the address of a non-atomic element of ", t[i].text);
      out += cat(a.root, "[", a.base, " + (", index, ")]");
      i = close;
      continue;
    }
    if (a.elem.atomic) return error("fusion: atomic array ", t[i].text, " used without '&'");
    const size_t after = m.next(close + 1);
    const std::string op = after < t.size() ? t[after].text : "";
    if (op == "++" || op == "--") return error("fusion: ", op, " on an array element of ", t[i].text);
    if (op == "." && m.is(m.next(m.next(after + 1) + 1), "="))
      return error("fusion: a component store into ", t[i].text);
    const bool compound =
        op.size() >= 2 && op.back() == '=' && op != "==" && op != "!=" && op != "<=" && op != ">=";
    if (op == "=" || compound) {
      size_t semi = after + 1;
      while (semi < e && !m.is(semi, ";")) {
        if (m.is(semi, "(") || m.is(semi, "[") || m.is(semi, "{")) {
          SOTTO_ASSIGN(size_t c, m.closing(semi));
          semi = c;
        }
        ++semi;
      }
      if (semi >= e) return error("fusion: a store into ", t[i].text, " without ';'");
      SOTTO_ASSIGN(std::string value, rewrite(m, after + 1, semi, arrays));
      if (compound)
        value = cat(t[i].text, "_ld(", index, ") ", op.substr(0, op.size() - 1), " (", value, ")");
      out += cat(t[i].text, "_st(", index, ", ", value, ")");
      i = semi - 1;  // the ';' is copied next
      continue;
    }
    out += cat(t[i].text, "_ld(", index, ")");
    i = close;
  }
  return out;
}

// Where a phase's builtin parameter comes from in the fused entry point (v: the virtual workgroup's index).
Result<std::string> builtin_argument(std::string_view builtin, uint32_t gx, uint32_t gy) {
  const std::string wg = cat("vec3u(v % ", gx, "u, v / ", gx, "u, 0u)");
  if (builtin == "local_invocation_id") return std::string("lid");
  if (builtin == "local_invocation_index") return std::string("lid.x");
  if (builtin == "workgroup_id") return wg;
  if (builtin == "global_invocation_id") return cat(wg, " * vec3u(", kFusedWorkgroupSize, "u, 1u, 1u) + lid");
  if (builtin == "num_workgroups") return cat("vec3u(", gx, "u, ", gy, "u, 1u)");
  if (builtin == "subgroup_size") return std::string("fused_sg_size");
  if (builtin == "subgroup_invocation_id") return std::string("fused_sg_id");
  return error("fusion: builtin ", builtin, " is not passed to a fused phase");
}

// Workgroup words kept for the atomic pool (the largest phase's: norm_quant's 2 x 512) when deciding what to
// copy into the plain one.
constexpr uint64_t kAtomicReserve = 1100;

// Module-scope WGSL of the fused kernel, ahead of the phases.
const char* kFusedHeader = R"(
struct FusedStep { pos: u32, n: u32, pad1: u32, pad2: u32 }
struct FusedUniform { slot: u32, pad0: u32, pad1: u32, pad2: u32, PHASE_PARAMS off: array<vec4u, N_OFF_VEC4> }
@group(0) @binding(0) var<uniform> fused_step: FusedStep;
@group(0) @binding(1) var<uniform> fused_u: FusedUniform;
@group(0) @binding(2) var<storage, read_write> fused_sync: array<atomic<u32>>;
var<private> fused_sink: u32;
var<workgroup> fused_landed: atomic<u32>;
var<workgroup> fused_flag: u32;
var<workgroup> fused_wg: array<u32, WG_WORDS>;
var<workgroup> fused_wga: array<atomic<u32>, WG_ATOMICS>;
// The grid barrier after phase k: every workgroup adds one to this dispatch's counter and waits until all
// `grid` have; false when the dispatch gave up (a workgroup waited kFusedSpinLimit spins, or saw the failure
// flag in sync word 0 that such a one raised), and the workgroup must then leave.
fn fused_barrier(lid: u32, k: u32, grid: u32) -> bool {
  // The atomic stores' old values, gathered: the workgroup's count below depends on every one of them, so no
  // compiler or GPU can move it ahead of a store that has not landed. (The step uniform's last word is 0.)
  atomicOr(&fused_landed, fused_sink);
  workgroupBarrier();
  if (lid == 0u) {
    let slot = fused_u.slot;
    atomicAdd(&fused_sync[slot], 1u + (atomicLoad(&fused_landed) & fused_step.pad2));
    var failed = 0u;
    for (var spins = 0u; ; spins++) {
      if (atomicLoad(&fused_sync[slot]) >= k * grid) { break; }
      if (atomicLoad(&fused_sync[0]) != 0u || spins >= SPIN_LIMITu) {
        atomicStore(&fused_sync[0], 1u);
        failed = 1u;
        break;
      }
    }
    fused_flag = failed;
  }
  return workgroupUniformLoad(&fused_flag) == 0u;
}
)";

std::string offset_expr(uint32_t slot) {
  const char component[2] = {"xyzw"[slot % 4], 0};
  return cat("fused_u.off[", slot / 4, "].", component);
}

}  // namespace

Result<FusedKernel> fuse_phases(std::span<const FusionPhase> phases, uint32_t n_roots,
                                uint64_t max_workgroup_bytes, uint32_t max_copy_words) {
  if (phases.empty()) return error("fusion: nothing to fuse");
  FusedKernel out;
  out.n_roots = n_roots;
  out.root_written.assign(n_roots, false);
  std::vector<Module> modules;
  modules.reserve(phases.size());
  // Pass 1: parse each phase; which roots are written.
  for (size_t k = 0; k < phases.size(); ++k) {
    const FusionPhase& ph = phases[k];
    modules.emplace_back(ph.wgsl, cat("f", k, "_"));
    Module& m = modules.back();
    SOTTO_TRY(m.parse().context(cat("phase ", k, ": ")));
    for (const Item& it : m.items()) {
      if (it.kind != Item::Kind::Var || it.address_space != "storage" || it.access != "read_write") continue;
      for (const FusionPhase::Bind& bd : ph.bindings)
        if (it.binding && bd.binding == *it.binding && bd.kind == FusionPhase::Bind::Kind::Storage) {
          if (bd.root >= n_roots) return error("fusion: root ", bd.root, " of ", n_roots);
          out.root_written[bd.root] = true;
        }
    }
    out.widest = std::max(out.widest, ph.groups_x * ph.groups_y);
  }
  std::set<std::string> enables;
  std::string body;   // the phases' declarations and functions
  std::string entry;  // the fused entry point's body
  uint64_t wg_words = 1, wg_atomics = 1;
  uint32_t n_offsets = 0;
  bool uses_subgroups = false;
  std::string phase_params;    // members of the fused uniform
  out.uniform = {0, 0, 0, 0};  // the sync slot and padding; the phases' parameters follow
  for (size_t k = 0; k < phases.size(); ++k) {
    const FusionPhase& ph = phases[k];
    Module& m = modules[k];
    m.rename();
    std::map<std::string, ArrayAccess> arrays;
    std::map<std::string, std::string> replaced;  // names of removed vars -> what stands for them
    std::string decls;
    uint64_t plain_at = 0, atomic_at = 0;
    std::string zero_atomics;
    const Item* entry_fn = nullptr;
    struct Prefetch {
      std::string name;
      Elem elem;
      std::string root, base;
      uint32_t words;
    };
    std::vector<Prefetch> prefetch;
    for (const Item& it : m.items()) {
      if (it.kind == Item::Kind::Fn && it.compute) {
        if (it.workgroup_size != kFusedWorkgroupSize)
          return error("fusion: phase ", k, " has workgroups of ", it.workgroup_size, ", not ",
                       kFusedWorkgroupSize);
        entry_fn = &it;
      }
      if (it.kind != Item::Kind::Var) continue;
      if (it.address_space == "storage") {
        const FusionPhase::Bind* bd = nullptr;
        for (const FusionPhase::Bind& b : ph.bindings)
          if (it.binding && b.binding == *it.binding) bd = &b;
        if (!bd || bd->kind != FusionPhase::Bind::Kind::Storage)
          return error("fusion: phase ", k, " storage ", it.name, " is not bound to a root");
        if (it.type.rfind("array<", 0) != 0 || it.type.back() != '>')
          return error("fusion: storage ", it.name, " of type ", it.type, " is not a runtime array");
        const auto e = elem_of(it.type.substr(6, it.type.size() - 7));
        if (!e) return error("fusion: storage ", it.name, " has elements of type ", it.type);
        const bool root_atomic = out.root_written[bd->root];
        const std::string root = cat("fused_r", bd->root);
        n_offsets = std::max(n_offsets, bd->offset_slot + 1);
        ArrayAccess a{*e, root, offset_expr(bd->offset_slot)};
        arrays[it.name] = a;
        if (root_atomic && !e->atomic && it.access != "read_write" && bd->words > 0) {
          prefetch.push_back({it.name, *e, root, a.base, bd->words});  // decided below
          continue;
        }
        if (!e->atomic)
          decls += accessors(
              it.name, *e, a.base,
              [&](const std::string& j) {
                return root_atomic ? cat("atomicLoad(&", root, "[", j, "])") : cat(root, "[", j, "]");
              },
              [&](const std::string& j, const std::string& w) {
                return cat("fused_sink ^= atomicExchange(&", root, "[", j, "], ", w, ");");
              },
              root_atomic);
      } else if (it.address_space == "uniform") {
        const FusionPhase::Bind* bd = nullptr;
        for (const FusionPhase::Bind& b : ph.bindings)
          if (it.binding && b.binding == *it.binding) bd = &b;
        if (!bd) return error("fusion: phase ", k, " uniform ", it.name, " is not bound");
        const Item* st = nullptr;
        for (const Item& s : m.items())
          if (s.kind == Item::Kind::Struct && s.name == it.type) st = &s;
        if (!st) return error("fusion: uniform ", it.name, " is not of a struct type");
        // The struct's fields, all 4-byte scalars.
        std::vector<std::string> field_types;
        std::string fields;
        for (size_t j = st->body_begin + 1; j < st->end; ++j) {
          if (m.toks()[j].kind != Tok::Kind::Ident || !m.is(m.next(j + 1), ":")) continue;
          const size_t type = m.next(m.next(j + 1) + 1);
          field_types.push_back(m.toks()[type].text);
          fields += cat(fields.empty() ? "" : ",", m.toks()[j].text, ":", m.toks()[type].text);
          j = type;
        }
        if (bd->kind == FusionPhase::Bind::Kind::Step) {
          if (fields != "pos:u32,n:u32,pad1:u32,pad2:u32")
            return error("fusion: step uniform ", it.name, " has fields ", fields);
          replaced[it.name] = "fused_step";
          continue;
        }
        if (bd->kind != FusionPhase::Bind::Kind::Params || bd->params.size() < field_types.size())
          return error("fusion: uniform ", it.name, " has ", field_types.size(), " fields and ",
                       bd->params.size(), " words");
        // The parameters become a member of the fused uniform (16-byte aligned, as uniform struct members
        // must be): read from a uniform as in the kernel alone, rather than folded in as constants, so the
        // compiler sees the arithmetic it compiled for the separate dispatch (constants let it contract
        // multiply-adds differently, and the logits parted in the last bits on the H200).
        for (const std::string& ft : field_types)
          if (ft != "u32" && ft != "f32" && ft != "i32") return error("fusion: uniform field type ", ft);
        out.uniform.resize((out.uniform.size() + 3) / 4 * 4, 0);
        const std::string member = cat("p", out.uniform.size());
        out.uniform.insert(out.uniform.end(), bd->params.begin(), bd->params.begin() + field_types.size());
        phase_params += cat(member, ": ", it.type, ", ");
        replaced[it.name] = cat("fused_u.", member);
      } else if (it.address_space == "workgroup") {
        // array<T, N>
        const size_t comma = it.type.rfind(',');
        if (it.type.rfind("array<", 0) != 0 || comma == std::string::npos)
          return error("fusion: workgroup ", it.name, " of type ", it.type, " is not an array");
        const std::string count_text = it.type.substr(comma + 1, it.type.size() - comma - 2);
        std::optional<uint64_t> count = parse_number(count_text);
        if (!count) count = m.const_value(count_text);
        const auto e = elem_of(it.type.substr(6, comma - 6));
        if (!count || !e) return error("fusion: workgroup array ", it.name, " of type ", it.type);
        if (e->atomic) {
          ArrayAccess a{*e, "fused_wga", cat(atomic_at, "u")};
          arrays[it.name] = a;
          zero_atomics += cat("    for (var i = lid.x; i < ", *count, "u; i += ", kFusedWorkgroupSize,
                              "u) { atomicStore(&fused_wga[", atomic_at, "u + i], 0u); }\n");
          atomic_at += *count;
        } else {
          ArrayAccess a{*e, "fused_wg", cat(plain_at, "u")};
          arrays[it.name] = a;
          decls += accessors(
              it.name, *e, a.base, [](const std::string& j) { return cat("fused_wg[", j, "]"); },
              [](const std::string& j, const std::string& w) { return cat("fused_wg[", j, "] = ", w, ";"); });
          plain_at += *count * e->words;
        }
      } else {
        return error("fusion: var<", it.address_space, "> ", it.name, " in phase ", k);
      }
    }
    if (!entry_fn) return error("fusion: phase ", k, " has no compute entry point");
    // Ranges this phase only reads of what earlier phases wrote: copied into workgroup memory after the phase's
    // own arrays while they fit (an atomic pool of up to kAtomicReserve words stays free), else read from the
    // root with atomic loads.
    std::string copy_in;
    const uint64_t plain_budget =
        max_workgroup_bytes / 4 > kAtomicReserve ? max_workgroup_bytes / 4 - kAtomicReserve : 0;
    uint64_t copied = 0;
    for (const Prefetch& f : prefetch) {
      if (plain_at + f.words <= plain_budget && copied + f.words <= max_copy_words) {
        copied += f.words;
        decls += accessors(
            f.name, f.elem, cat(plain_at, "u"), [](const std::string& j) { return cat("fused_wg[", j, "]"); },
            [](const std::string&, const std::string&) { return std::string(); }, false);
        copy_in +=
            cat("    for (var i = lid.x; i < ", f.words, "u; i += ", kFusedWorkgroupSize, "u) { fused_wg[",
                plain_at, "u + i] = atomicLoad(&", f.root, "[", f.base, " + i]); }\n");
        plain_at += f.words;
      } else {
        decls += accessors(
            f.name, f.elem, f.base,
            [&](const std::string& j) { return cat("atomicLoad(&", f.root, "[", j, "])"); },
            [](const std::string&, const std::string&) { return std::string(); }, false);
      }
    }
    wg_words = std::max(wg_words, plain_at);
    wg_atomics = std::max(wg_atomics, atomic_at);
    // Names of removed vars (the step uniform) now stand for the fused ones.
    for (Tok& t : m.toks())
      if (t.kind == Tok::Kind::Ident)
        if (auto r = replaced.find(t.text); r != replaced.end()) t.text = r->second;
    // The phase's items: enables hoisted, vars gone (now accessors / consts), the rest rewritten.
    std::string phase_src = decls;
    std::vector<std::string> entry_args;
    for (const Item& it : m.items()) {
      if (it.kind == Item::Kind::Enable) {
        enables.insert(m.text(it.begin, it.end));
        continue;
      }
      if (it.kind == Item::Kind::Var) continue;
      if (&it != entry_fn) {
        SOTTO_ASSIGN(std::string s, rewrite(m, it.begin, it.end, arrays));
        phase_src += s + "\n";
        continue;
      }
      // fn NAME(@builtin(b) name: T, ...) { ... }  ->  fn NAME(name: T, ...) { ... }
      const size_t open = it.body_begin;
      SOTTO_ASSIGN(size_t close, m.closing(open));
      std::string params;
      for (size_t j = open + 1; j < close; ++j) {
        if (!m.is(j, "@")) continue;
        const size_t attr = m.next(j + 1);
        if (m.toks()[attr].text != "builtin")
          return error("fusion: entry parameter attribute ", m.toks()[attr].text);
        const size_t paren = m.next(attr + 1);
        SOTTO_ASSIGN(size_t paren_close, m.closing(paren));
        const std::string builtin = m.text(paren + 1, paren_close, false);
        if (builtin.rfind("subgroup", 0) == 0) uses_subgroups = true;
        SOTTO_ASSIGN(std::string arg, builtin_argument(builtin, ph.groups_x, ph.groups_y));
        entry_args.push_back(arg);
        size_t end = paren_close + 1;
        while (end < close && !m.is(end, ",")) ++end;
        params += cat(params.empty() ? "" : ", ", m.text(paren_close + 1, end, false));
        j = end;
      }
      size_t brace = close + 1;
      while (brace < it.end && !m.is(brace, "{")) ++brace;
      SOTTO_ASSIGN(std::string fn_body, rewrite(m, brace, it.end, arrays));
      phase_src += cat("fn ", it.name, "(", params, ") ", fn_body, "\n");
    }
    body += cat("// ---- phase ", k, "\n", phase_src);
    std::string args;
    for (const std::string& a : entry_args) args += cat(args.empty() ? "" : ", ", a);
    if (k > 0) entry += cat("  if (!fused_barrier(lid.x, ", k, "u, fused_grid)) { return; }\n");
    if (!copy_in.empty())
      entry += cat("  if (fused_wgid.x < ", ph.groups_x * ph.groups_y, "u) {\n", copy_in, "  }\n");
    entry += cat("  for (var v = fused_wgid.x; v < ", ph.groups_x * ph.groups_y,
                 "u; v += fused_grid) {\n    workgroupBarrier();\n", zero_atomics,
                 zero_atomics.empty() ? "" : "    workgroupBarrier();\n", "    ", entry_fn->name, "(", args,
                 ");\n  }\n");
  }
  out.workgroup_bytes = 4 * (wg_words + wg_atomics + 1);
  if (out.workgroup_bytes > max_workgroup_bytes)
    return error("fusion: the fused kernel needs ", out.workgroup_bytes, " bytes of workgroup memory (",
                 max_workgroup_bytes, " available)");
  std::string header = kFusedHeader;
  auto put = [&](std::string_view key, uint64_t v) {
    const size_t at = header.find(key);
    header.replace(at, key.size(), cat(v));
  };
  put("N_OFF_VEC4", std::max<uint32_t>(1, (n_offsets + 3) / 4));
  const size_t params_at = header.find("PHASE_PARAMS");
  header.replace(params_at, 12, phase_params);
  out.uniform.resize((out.uniform.size() + 3) / 4 * 4, 0);
  out.offsets_word = static_cast<uint32_t>(out.uniform.size());
  out.uniform.resize(out.uniform.size() + std::max<uint32_t>(1, (n_offsets + 3) / 4) * 4, 0);
  put("WG_WORDS", wg_words);
  put("WG_ATOMICS", wg_atomics);
  put("SPIN_LIMIT", kFusedSpinLimit);
  std::string src;
  for (const std::string& e : enables) src += e + "\n";
  src += header;
  for (uint32_t r = 0; r < n_roots; ++r)
    src += out.root_written[r]
               ? cat("@group(0) @binding(", 3 + r, ") var<storage, read_write> fused_r", r,
                     ": array<atomic<u32>>;\n")
               : cat("@group(0) @binding(", 3 + r, ") var<storage, read> fused_r", r, ": array<u32>;\n");
  src += body;
  src += cat("@compute @workgroup_size(", kFusedWorkgroupSize, ")\n",
             "fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) fused_wgid: vec3u,\n",
             "        @builtin(num_workgroups) fused_nwg: vec3u",
             uses_subgroups ? ",\n        @builtin(subgroup_size) fused_sg_size: u32, "
                              "@builtin(subgroup_invocation_id) fused_sg_id: u32"
                            : "",
             ") {\n  let fused_grid = fused_nwg.x;\n",
             // A fused phase alone has no barrier; its bindings stay those of every fused kernel.
             phases.size() == 1 ? "  _ = &fused_sync;\n  _ = fused_step.pos;\n" : "", entry, "}\n");
  out.wgsl = std::move(src);
  return out;
}

}  // namespace sotto::gpu
