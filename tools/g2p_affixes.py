#!/usr/bin/env python3
"""Learns the G2P's affix rules from misaki 0.9.4's lexicon: how a known word's phonemes change when a suffix
(-ness, -ly, -er, -able, ...) or a prefix (un-, re-, over-, ...) is added, or a second known word is joined to it.

    python3 tools/g2p_affixes.py WHEEL [--dev]        (WHEEL: misaki-0.9.4-py3-none-any.whl)

Prints, per language, how the rules alone read the lexicon words held out of the letter-to-sound model's
training (crc32 % 20 == 0; they are left out of learning here too): how many they cover and how many of those
come out identical. --dev learns without the words whose crc32 is 1 mod 20 too and reads those instead (the
split the rules' thresholds were chosen on; the held-out words were not looked at for that).
tools/g2p_lexicon.py calls rules_blob() and stores the rules in each g2p-en-*.bin; src/text/g2p_words.cpp
applies them (WordRules::affixes) to words the lexicon and misaki's -s/-ed/-ing rules do not know.

A rule is learned from pairs of lexicon words (stem, stem + affix):
  suffix: keyed by the suffix letters and the stem's last phoneme ('*': any); the stem's phonemes lose their
          last `drop` phonemes and get `add` appended (stress marks included). Stems tried for a word W = B + S:
          B, B + 'e' (S starting with a vowel letter), B with a final 'i' read as 'y', B with a doubled final
          consonant single.
  prefix: keyed by the prefix letters and whether the stem's first vowel carries the primary stress and its
          first consonant is k or ɡ; `add` is put before the stem's phonemes.
A rule is kept when it is right for at least MIN_SHARE of its pairs and MIN_COUNT of them. MIN_SHARE was chosen
on the --dev split (US dev words, the letter-to-sound model trained without them reads 57.9 % exactly; with
the affix rules first: MIN_SHARE 0.6: 61.4 %, 0.7: 61.2 %, 0.8: 60.8 %; the rules 0.5 adds over 0.65 were
right a third of the time); the held-out words were not looked at for it. Compounds (A + B, both known, B's stress made secondary) were tried and
left out: 30 % right on the dev words they covered, below the letter-to-sound model.

Blob (little-endian), read by src/text/g2p_lexicon.cpp:
  "SOTTOAFX" u32 version(1) u32 n_rules, then per rule: u8 kind (0 suffix, 1 prefix), u8 n_letters, letters,
  u8 n_key, key (UTF-8: the stem's last phoneme or the prefix signature; '*' any), u8 drop, u8 n_add, add (UTF-8).
  Rules are in the order to try them: suffixes longest first (for one suffix the phoneme keys, then '*'), then
  prefixes longest first.

How a word is read (apply() here, WordRules::affixes in C++): for each suffix the word ends in (longest first,
at least 2 letters left), the first stem candidate the lexicon knows; its last phoneme's rule, else the
suffix's '*' rule; no rule: the next suffix. Then for each prefix (longest first, at least 3 letters left) the
rest of the word if the lexicon knows it and the prefix has a rule for its signature.
"""
import collections
import json
import struct
import sys
import zipfile
import zlib

SUFFIXES = ['s', 'es', 'ed', 'd', 'ing', 'ings', 'er', 'ers', 'est', 'ly', 'ness', 'ment', 'ments', 'less',
            'ful', 'fully', 'fulness', 'able', 'ably', 'ism', 'isms', 'ist', 'ists', 'ish', 'like', 'ship',
            'ships', 'hood', 'wise', 'y', 'ier', 'iest', 'ily', 'iness', 'lessness', 'ward', 'wards', 'dom',
            'ance', 'ence', 'ry', 'ery', 'ian', 'ive', 'al', 'ally', 'ize', 'ized', 'izes', 'izing', 'ise',
            'ised', 'ises', 'ising', 'ization', 'isation', 'ishness', 'ably', 'ful', 'man', 'men', 'let',
            'lets', 'ling', 'lings', 'ette', 'ettes', 'esque', 'ology', 'ologist', 'ologists', 'ic', 'ics']
PREFIXES = ['un', 're', 'dis', 'non', 'over', 'under', 'out', 'pre', 'mis', 'in', 'im', 'anti', 'counter',
            'super', 'sub', 'inter', 'semi', 'co', 'de', 'up', 'multi', 'micro', 'ultra', 'hyper', 'post',
            'fore', 'trans', 'be', 'en', 'ex', 'bi', 'tri', 'auto', 'pro', 'neo', 'pseudo', 'mid', 'off',
            'down', 'back', 'self', 'proto', 'poly', 'mono', 'macro', 'meta', 'para', 'infra', 'extra',
            'intra', 'mega', 'nano', 'tele', 'photo', 'electro', 'thermo', 'geo', 'bio', 'psycho', 'socio']
STRESS = 'ˈˌ'
VOWELS = set('AIOQWYaiuæɑɒɔəɛɜɪʊʌᵻ')  # g2p_words.cpp's is_vowel
MIN_SHARE = 0.6
MIN_COUNT = 3


def held_out(word):
    return zlib.crc32(word.encode()) % 20 == 0


def dev(word):
    return zlib.crc32(word.encode()) % 20 == 1


def lexicon(z, lang):
    """Lowercase word -> phonemes as WordRules::known_stem finds them: gold before silver; in a tier, the
    lowercase key before its Capitalised form; a heteronym's DEFAULT."""
    out = {}
    for tier in ('gold', 'silver'):
        d = json.loads(z.read(f'misaki/data/{lang}_{tier}.json'))
        here = {}
        for k, v in d.items():
            if isinstance(v, dict):
                v = v.get('DEFAULT')
            kl = k.lower()
            if not v or not kl.isascii() or not kl.isalpha() or (k != kl and k != k.capitalize()) or kl in out:
                continue
            if kl not in here or k == kl:
                here[kl] = v
        out.update(here)
    return out


def stems(word, suffix):
    base = word[:-len(suffix)]
    if len(base) < 2 or (suffix == 's' and base.endswith('s')):
        return []
    out = [base]
    if suffix[0] in 'aeiouy':
        out.append(base + 'e')
    if base.endswith('i'):
        out.append(base[:-1] + 'y')
    if len(base) >= 3 and base[-1] == base[-2] and base[-1] in 'bdgklmnprtvz':
        out.append(base[:-1])
    return out


def signature(ps):
    """'S' when the first vowel has the primary stress, else 'U'; lowercase when the first sound is k or ɡ."""
    s = 'U'
    for i, c in enumerate(ps):
        if c in VOWELS:
            s = 'S' if i > 0 and ps[i - 1] == 'ˈ' else 'U'
            break
    return s.lower() if ps.lstrip(STRESS)[:1] in ('k', 'ɡ') else s



def learn(words):
    """The rules from a word -> phonemes dict: [(kind, letters, key, drop, add)] in the order to try them."""
    suffix_counts = collections.defaultdict(collections.Counter)
    prefix_counts = collections.defaultdict(collections.Counter)
    by_suffix = collections.defaultdict(list)
    for suffix in set(SUFFIXES):
        by_suffix[suffix[-1]].append(suffix)
    for w, ps in words.items():
        for suffix in by_suffix.get(w[-1:], ()):
            if not w.endswith(suffix) or len(w) < len(suffix) + 3:
                continue
            for stem in stems(w, suffix):
                if stem == w or stem not in words:
                    continue
                sp = words[stem]
                k = 0
                while k < min(len(sp), len(ps)) and sp[k] == ps[k]:
                    k += 1
                change = (len(sp) - k, ps[k:]) if len(sp) - k <= 2 else None
                suffix_counts[(suffix, sp[-1])][change] += 1
                suffix_counts[(suffix, '*')][change] += 1
                break
        for prefix in PREFIXES:
            if not w.startswith(prefix) or len(w) < len(prefix) + 3:
                continue
            stem = w[len(prefix):]
            if stem in words:
                sp = words[stem]
                prefix_counts[(prefix, signature(sp))][ps[:len(ps) - len(sp)] if ps.endswith(sp) else None] += 1

    def keep(counts):
        out = {}
        for key, c in counts.items():
            best, n = max(c.items(), key=lambda kv: (kv[1], str(kv[0])))
            if best is not None and n >= MIN_COUNT and n / sum(c.values()) >= MIN_SHARE:
                out[key] = best
        return out

    rules = []
    suffix_rules = keep(suffix_counts)
    order = lambda kv: (-len(kv[0][0]), kv[0][0], kv[0][1] == '*', kv[0][1])
    for (suffix, key), (drop, add) in sorted(suffix_rules.items(), key=order):
        rules.append((0, suffix, key, drop, add))
    for (prefix, key), add in sorted(keep(prefix_counts).items(), key=lambda kv: (-len(kv[0][0]), kv[0])):
        rules.append((1, prefix, key, 0, add))
    return rules


def apply(word, known, rules):
    """The word's phonemes by the rules (known: word -> phonemes or None), or None; as g2p_words.cpp does."""
    i = 0
    while i < len(rules):
        kind, letters = rules[i][:2]
        j = i
        while j < len(rules) and rules[j][:2] == (kind, letters):
            j += 1
        group, i = rules[i:j], j
        if kind == 0 and word.endswith(letters) and len(word) >= len(letters) + 2:
            sp = next((p for p in map(known, stems(word, letters)) if p), None)
            if sp:
                for _, _, key, drop, add in group:
                    if key in ('*', sp[-1]) and len(sp) > drop:
                        return sp[:len(sp) - drop] + add
        elif kind == 1 and word.startswith(letters) and len(word) >= len(letters) + 3:
            sp = known(word[len(letters):])
            if sp:
                for _, _, key, _, add in group:
                    if key == signature(sp):
                        return add + sp
    return None


def rules_blob(words):
    rules = learn({w: ps for w, ps in words.items() if not held_out(w)})
    out = bytearray(b'SOTTOAFX' + struct.pack('<II', 1, len(rules)))
    for kind, letters, key, drop, add in rules:
        out += bytes([kind, len(letters)]) + letters.encode()
        out += bytes([len(key.encode())]) + key.encode() + bytes([drop, len(add.encode())]) + add.encode()
    return bytes(out)


def main():
    args = sys.argv[1:]
    use_dev = '--dev' in args
    args = [a for a in args if a != '--dev']
    if len(args) != 1:
        sys.exit(__doc__.split('\n\n')[1])
    with zipfile.ZipFile(args[0]) as z:
        for lang in ('us', 'gb'):
            words = lexicon(z, lang)
            test = dev if use_dev else held_out
            rules = learn({w: p for w, p in words.items() if not held_out(w) and not (use_dev and dev(w))})
            hidden = lambda w: held_out(w) or (use_dev and dev(w))
            known = lambda w: None if hidden(w) else words.get(w)
            targets = [w for w in words if test(w) and w.isalpha() and w.isascii() and 2 <= len(w) <= 20]
            covered = right = 0
            for w in targets:
                ps = apply(w, known, rules)
                if ps is not None:
                    covered += 1
                    right += ps == words[w]
            print(f'g2p_affixes: {lang}: {len(rules)} rules; {"dev" if use_dev else "held-out"} words '
                  f'{len(targets)}: covered {covered} ({covered / len(targets):.1%}), identical {right} '
                  f'({right / max(covered, 1):.1%} of those covered)')


if __name__ == '__main__':
    main()
