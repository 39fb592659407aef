#!/usr/bin/env python3
"""Trains the G2P's letter-to-sound model on misaki 0.9.4's lexicon and writes it as C++ tables.

    python3 tools/g2p_lts_train.py WHEEL [--out data/g2p] [--lang us|gb] [--heldout-only]
                                                               (WHEEL: misaki-0.9.4-py3-none-any.whl)

Writes data/g2p/lts-en-{us,gb}.bin (the older letter-to-sound tables: tools/g2p_lexicon.py now ships
tools/g2p_jsm_train.py's model instead; tools/g2p_jsm_train.py reuses this file's lexicon reading and alignment) and
prints the held-out accuracy; writes every 4th held-out word (in sorted order) with its lexicon phonemes to
tests/data/g2p/lts_heldout_{us,gb}.tsv for the C++ test. --heldout-only writes just those lists.
Deterministic: the same wheel gives the same files.

Table file (little-endian), read by src/text/g2p_lts.cpp:
  "SOTTOLTS" u32 version(1)
  u32 n_outputs, then per output: u8 n_bytes, its phonemes in UTF-8 (stress marks included)
  u32 n_levels, then per level: u8 left, u8 right, u32 n_records, and the records sorted by context: the
      context's left + 1 + right letters ('#' past the word's ends), then the u16 index of its output.

The model (read by src/text/g2p_lts.cpp):
  1. Each lexicon word of plain letters is aligned with its phonemes, one letter to zero, one or two phoneme
     units (a unit is a phoneme with the stress mark before it, if any), by EM over letter -> units counts
     (Viterbi alignments, four rounds).
  2. For each letter, its units are predicted from the letters around it: a chain of contexts, each one letter
     wider than the last (right then left), up to five letters each side, '#' beyond the word's ends. The
     prediction is the most frequent output of the widest context seen in training. A context is kept only
     where its answer differs from the narrower context's, which keeps the tables small.
  3. Held out: words whose crc32 is 0 mod 20 (5 %) never enter training; their exact-match rate is reported.
"""
import collections
import json
import struct
import sys
import zipfile
import zlib
from pathlib import Path

STRESS = 'ˈˌ'
VOWELS = set('AIOQWYaiuæɑɒɔəɛɜɪʊʌᵻ')
# The chain of contexts: (letters left, letters right) at each level.
# Five letters a side read US dev words (crc32 % 20 == 1: left out of the tables, not of the alignment's EM)
# 59.0 % exactly, four 57.6 %; dropping contexts seen once instead cost 3.7 points.
LEVELS = [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (4, 5), (5, 5)]
PAD = max(max(lr) for lr in LEVELS)
MAX_CHUNK = 2


def units_of(ps):
    units, pending = [], ''
    for c in ps:
        if c in STRESS:
            pending += c
        else:
            units.append(pending + c)
            pending = ''
    if pending:
        return None
    return units


def load_words(z, lang):
    words = {}
    for tier in ('gold', 'silver'):
        d = json.loads(z.read(f'misaki/data/{lang}_{tier}.json'))
        for k, v in d.items():
            if isinstance(v, dict):
                v = v.get('DEFAULT')
            if not v or not k.isalpha() or not k.isascii() or k != k.lower() or not 2 <= len(k) <= 20:
                continue
            if k in words:
                continue  # gold first
            u = units_of(v)
            if u and len(u) <= 2 * len(k):
                words[k] = u
    return words


def held_out(word):
    return zlib.crc32(word.encode()) % 20 == 0


def align(words, rounds=4):
    """Viterbi EM: P(chunk | letter), chunk = tuple of 0..MAX_CHUNK units."""
    prob = collections.defaultdict(lambda: 1e-3)
    alignments = {}
    import math
    for r in range(rounds):
        counts = collections.defaultdict(collections.Counter)
        alignments = {}
        for w, u in words.items():
            n, m = len(w), len(u)
            best = [[None] * (m + 1) for _ in range(n + 1)]
            best[0][0] = (0.0, None)
            for i in range(n):
                li = w[i]
                for j in range(m + 1):
                    cur = best[i][j]
                    if cur is None:
                        continue
                    for k in range(0, MAX_CHUNK + 1):
                        if j + k > m:
                            break
                        chunk = tuple(u[j:j + k])
                        p = 0.0 if r == 0 else math.log(prob[(li, chunk)])
                        if r == 0 and k == 0:
                            p = -1.0  # prefer one unit a letter before anything is learned
                        if r == 0 and k == 2:
                            p = -2.0
                        s = cur[0] + p
                        nb = best[i + 1][j + k]
                        if nb is None or s > nb[0]:
                            best[i + 1][j + k] = (s, (j, k))
            if best[n][m] is None:
                continue
            # Trace back.
            path = []
            j = m
            for i in range(n, 0, -1):
                pj, k = best[i][j][1]
                path.append(tuple(u[pj:pj + k]))
                j = pj
            path.reverse()
            alignments[w] = path
            for li, chunk in zip(w, path):
                counts[li][chunk] += 1
        prob = collections.defaultdict(lambda: 1e-6)
        for li, c in counts.items():
            total = sum(c.values())
            for chunk, n in c.items():
                prob[(li, chunk)] = n / total
    return alignments


def context(padded, i, left, right):
    # padded has PAD '#' each side; letter i of the word is padded[i + PAD].
    return padded[i + PAD - left:i + PAD + 1 + right]


def train(alignments):
    """Count tables per level, then prune to the contexts whose answer differs from the level below."""
    tables = [collections.defaultdict(collections.Counter) for _ in LEVELS]
    for w, path in alignments.items():
        padded = '#' * PAD + w + '#' * PAD
        for i, chunk in enumerate(path):
            for lv, (l, r) in enumerate(LEVELS):
                tables[lv][context(padded, i, l, r)][chunk] += 1
    pruned = [{} for _ in LEVELS]
    for lv, (l, r) in enumerate(LEVELS):
        for ctx, c in tables[lv].items():
            best = max(c.items(), key=lambda kv: (kv[1], kv[0]))[0]
            if lv == 0:
                pruned[lv][ctx] = best
                continue
            # What the pruned lower levels answer for this context.
            below = predict_ctx(pruned, ctx, lv - 1, l, r)
            if below != best:
                pruned[lv][ctx] = best
    return pruned


def predict_ctx(pruned, ctx, top, l, r):
    # ctx is the widest string (l left, r right letters); narrower levels are substrings of it.
    for lv in range(top, -1, -1):
        ll, rr = LEVELS[lv]
        sub = ctx[l - ll:len(ctx) - (r - rr)]
        if sub in pruned[lv]:
            return pruned[lv][sub]
    return ()


def fix_stress(units):
    ps = ''.join(units)
    if 'ˈ' not in ps:
        if 'ˌ' in ps:
            ps = ps.replace('ˌ', 'ˈ', 1)
        else:
            for i, c in enumerate(ps):
                if c in VOWELS:
                    ps = ps[:i] + 'ˈ' + ps[i:]
                    break
    elif ps.count('ˈ') > 1:
        first = ps.index('ˈ')
        ps = ps[:first + 1] + ps[first + 1:].replace('ˈ', 'ˌ')
    return ps


def predict(pruned, word):
    padded = '#' * PAD + word + '#' * PAD
    l, r = LEVELS[-1]
    out = []
    for i in range(len(word)):
        out.extend(predict_ctx(pruned, context(padded, i, l, r), len(LEVELS) - 1, l, r))
    return fix_stress(out)


def table_file(pruned):
    """The binary tables: outputs, then per level the sorted (context, output index) records."""
    chunks = sorted({c for t in pruned for c in t.values()}, key=lambda c: (len(c), c))
    index = {c: i for i, c in enumerate(chunks)}
    out = bytearray(b'SOTTOLTS' + struct.pack('<I', 1) + struct.pack('<I', len(chunks)))
    for c in chunks:
        b = ''.join(c).encode()
        out += bytes([len(b)]) + b
    out += struct.pack('<I', len(pruned))
    for lv, t in enumerate(pruned):
        l, r = LEVELS[lv]
        out += bytes([l, r]) + struct.pack('<I', len(t))
        for ctx, chunk in sorted(t.items()):
            out += ctx.encode() + struct.pack('<H', index[chunk])
    return bytes(out)


def main():
    args = sys.argv[1:]
    out_dir = Path('data/g2p')
    heldout_only = '--heldout-only' in args
    args = [a for a in args if a != '--heldout-only']
    langs = ('us', 'gb')
    if '--lang' in args:
        langs = (args[args.index('--lang') + 1],)
        del args[args.index('--lang'):args.index('--lang') + 2]
    if '--out' in args:
        out_dir = Path(args[args.index('--out') + 1])
        del args[args.index('--out'):args.index('--out') + 2]
    if len(args) != 1:
        sys.exit(__doc__.split('\n\n')[1])
    with zipfile.ZipFile(args[0]) as z:
        for lang in langs:
            words = load_words(z, lang)
            train_words = {w: u for w, u in words.items() if not held_out(w)}
            test_words = {w: u for w, u in words.items() if held_out(w)}
            sample = sorted(test_words)[::4]
            Path('tests/data/g2p').mkdir(parents=True, exist_ok=True)
            with open(f'tests/data/g2p/lts_heldout_{lang}.tsv', 'w', encoding='utf-8') as f:
                f.write(f'# {len(sample)} of the {len(test_words)} {lang} lexicon words held out of training '
                        '(crc32 % 20 == 0), every 4th in sorted order: word, misaki phonemes\n')
                f.write(''.join(f'{w}\t{"".join(test_words[w])}\n' for w in sample))
            if heldout_only:
                continue
            alignments = align(train_words)
            pruned = train(alignments)
            ok = sum(predict(pruned, w) == ''.join(u) for w, u in test_words.items())
            ok_nostress = sum(predict(pruned, w).replace('ˈ', '').replace('ˌ', '') ==
                              ''.join(u).replace('ˈ', '').replace('ˌ', '') for w, u in test_words.items())
            print(f'g2p_lts_train: {lang}: {len(train_words)} training words ({len(alignments)} aligned), '
                  f'{len(test_words)} held out: {ok / len(test_words):.1%} exact, '
                  f'{ok_nostress / len(test_words):.1%} ignoring stress; '
                  f'{sum(len(t) for t in pruned)} contexts')
            blob = table_file(pruned)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f'lts-en-{lang}.bin').write_bytes(blob)
            print(f'g2p_lts_train: wrote {out_dir / f"lts-en-{lang}.bin"} ({len(blob)} bytes)')


if __name__ == '__main__':
    main()
