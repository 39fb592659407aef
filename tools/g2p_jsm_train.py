#!/usr/bin/env python3
"""Trains the G2P's joint-sequence (graphone) model on misaki 0.9.4's lexicon: what reads words in no lexicon.

    python3 tools/g2p_jsm_train.py WHEEL [--out data/g2p] [--lang us|gb] [--dev] [--order N] [--min-count K]
                                         [--beam B] [--flip] [--no-rerank] [--weights M,S,F]
                                         (WHEEL: misaki-0.9.4-py3-none-any.whl)

Writes data/g2p/jsm-en-{us,gb}.bin (tools/g2p_lexicon.py puts each in its language's lexicon file as the
letter-to-sound section) and tests/data/g2p/jsm_predictions_{us,gb}.tsv (this script's own readings of the
words in tests/data/g2p/lts_heldout_*.tsv, which the C++ decoder must reproduce exactly), and prints the
held-out accuracy. --flip reads the other way (left to right), for comparison. --dev trains without the dev
words too (crc32 % 20 == 1) and reports on them instead: the split every choice below was made on; the held-out
words (crc32 % 20 == 0) never enter training or tuning.
Deterministic: the same wheel gives the same files.

The model (Bisani & Ney's joint-sequence model, with graphones of exactly one letter):
  1. Each lexicon word is aligned letter by letter with its phoneme units (a unit: a phoneme with the stress
     mark before it, if any), each letter taking 0, 1 or 2 units: tools/g2p_lts_train.py's Viterbi EM.
     A graphone is a (letter, units) pair.
  2. An n-gram model over a word's graphones (ORDER graphones, word start and end marked), interpolated
     Kneser-Ney (one discount a order), stored as a backoff model: n-grams seen fewer than MIN_COUNT times
     above the bigrams are left out.
  3. A word is read by a beam search (BEAM hypotheses, the same n-gram history merged) over the graphones
     of each letter in turn, from the word's last letter to its first (RIGHT_TO_LEFT); the best path's units
     are the word's phonemes, with one primary stress made sure of afterwards (fix_stress: of several
     primaries the last is kept, the others made secondary).
  Why right to left and the last primary: English stress is set by the word's end (-ation, -ity, -ic), which
  a left-to-right model of 6 graphones of history has not seen yet when it places an early stress; read from
  the end, the suffix is in the history. Where the model still writes two primaries, the lexicon mostly has
  the secondary first (ˌæbəɹdˈOniən). On the dev words (US, the first 3,000): left to right 65.6 % exact,
  keeping the last primary 67.0 %, right to left with it 67.5 %.
  4. The search's final hypotheses (BEAM of them) are reranked: each hypothesis with several primaries
     becomes one variant a primary kept (the others secondary), and each variant is scored by
     W_MODEL * its n-gram cost + W_STRESS * its stress-pattern cost + W_FIX if its stress was not written as
     one primary (StressTable: P(the pattern of stresses over the vowels | the word's last 0-5 letters)).
     On the dev words (US, all 8,572): the search's best with the last primary kept 70.0 %, reranked 71.2 %
     (the oracle of the 16 hypotheses: 83 %; a left-to-right model's costs added on the union of both
     n-bests: 71.5 %, not worth a second model's 3.3 MB; features for known lexicon words inside the word:
     +0.2).
  Scores are integers (tenths of a nat, summed), so the C++ decoder (src/text/g2p_lts.cpp) finds the same
  best path, ties included.

File (little-endian), read by src/text/g2p_lts.cpp:
  "SOTTOJSM" u32 version(3) u32 order u32 beam u32 direction (0: left to right, 1: right to left; version 1
      files have no direction field and read left to right; version 2 ones have no reranker)
  u32 n_graphones, then per graphone: u8 letter ('a'..'z', or '^' for the word's end), u8 n_bytes, units
      (UTF-8). Graphone 0 is the word's end; a word's start is the root context.
  u32 n_nodes, then the n-gram trie in breadth-first order, node 0 the root (the empty history); per node:
      u16 graphone, u8 cost (-ln P(graphone | history) in tenths of a nat, the root's 0), u8 backoff cost
      (-ln of the history's backoff weight, 0 for nodes with no children), u16 n_children. A node's children
      follow the nodes before them in breadth-first order, sorted by graphone.
  Version 3: the reranker's section (StressTable.blob) to the end of the file.
"""
import collections
import math
import struct
import sys
import zipfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import g2p_lts_train as lts  # noqa: E402  (the lexicon reading and the letter-unit alignment)

ORDER = 7
MIN_COUNT = 2
BEAM = 16
RIGHT_TO_LEFT = True
SCALE = 10.0  # costs in tenths of a nat
END = ('^', ())
START = ('$', ())


def dev(word):
    return zlib.crc32(word.encode()) % 20 == 1


def sequences(alignments, reverse=False):
    """Each word as its graphones (last letter first if reverse), in sorted word order."""
    out = []
    for w in sorted(alignments):
        gs = [(w[i], chunk) for i, chunk in enumerate(alignments[w])]
        out.append([START] + (gs[::-1] if reverse else gs) + [END])
    return out


def train(seqs, order, min_count):
    """Interpolated Kneser-Ney over graphone n-grams; returns the trie as {history tuple: node} dicts."""
    counts = [collections.Counter() for _ in range(order + 1)]  # counts[k][ngram of k graphones]
    for s in seqs:
        for i in range(len(s)):
            # The history may start at the word's start (shorter n-grams there).
            for k in range(1, order + 1):
                if i - k + 1 < 0:
                    break
                counts[k][tuple(s[i - k + 1:i + 1])] += 1
    # Keep n-grams of order >= 3 seen min_count times; counts are monotone, so the kept set is closed under
    # prefixes and suffixes.
    kept = [set()] + [set(c) if k <= 2 else {g for g, n in c.items() if n >= min_count}
                      for k, c in enumerate(counts) if k > 0]
    # Kneser-Ney counts: the highest order and n-grams starting at the word's start use raw counts; the
    # others the number of distinct graphones seen before them.
    cont = [collections.Counter() for _ in range(order + 1)]
    for k in range(2, order + 1):
        for g in counts[k]:
            cont[k - 1][g[1:]] += 1
    kn = [None] + [collections.Counter() for _ in range(order)]
    for k in range(1, order + 1):
        for g, n in counts[k].items():
            kn[k][g] = n if k == order or g[0] == START else cont[k][g]
    # Discounts (Ney's estimate from counts of one and two), per order.
    disc = [0.0] * (order + 1)
    for k in range(1, order + 1):
        n1 = sum(1 for v in kn[k].values() if v == 1)
        n2 = sum(1 for v in kn[k].values() if v == 2)
        disc[k] = n1 / (n1 + 2 * n2) if n1 + 2 * n2 else 0.5
    # Per history: total count and number of followers (over all n-grams, kept or not).
    tot = [collections.Counter() for _ in range(order + 1)]
    types = [collections.Counter() for _ in range(order + 1)]
    for k in range(1, order + 1):
        for g, n in kn[k].items():
            tot[k][g[:-1]] += n
            types[k][g[:-1]] += 1
    vocab = sorted((g[0] for g in counts[1]), key=lambda g: (g[0], len(g[1]), g[1]))
    prob = {}

    def p(hist, g):
        k = len(hist) + 1
        if k == 1:
            t = tot[1][()]
            lower = 1.0 / len(vocab)
            return max(kn[1][(g,)] - disc[1], 0) / t + disc[1] * types[1][()] / t * lower
        lower = p(hist[1:], g)
        t = tot[k][hist]
        if t == 0:
            return lower
        return max(kn[k][hist + (g,)] - disc[k], 0) / t + disc[k] * types[k][hist] / t * lower

    # Sorted everywhere a float sum's order could depend on Python's string hashing (PYTHONHASHSEED).
    for k in range(1, order + 1):
        for g in sorted(kept[k]):
            prob[g] = p(g[:-1], g[-1])
    # Backoff weights: the mass an n-gram left out of a history gets from the shorter history, normalised.
    bow = {}
    children = collections.defaultdict(list)
    for k in range(1, order + 1):
        for g in sorted(kept[k]):
            children[g[:-1]].append(g)
    for hist, ch in children.items():
        if not hist:
            continue
        num = 1.0 - sum(prob[g] for g in ch)
        den = 1.0 - sum(prob[g[1:]] for g in ch)
        bow[hist] = max(num, 1e-12) / max(den, 1e-12)
    return vocab, prob, bow, children


def fix_stress(ps):
    """One primary stress: of several the last kept (the others secondary); with none, the first secondary
    promoted, or a primary put before the first vowel (src/text/g2p_lts.cpp's fix_stress)."""
    n = ps.count('ˈ')
    if n > 1:
        last = ps.rindex('ˈ')
        return ps[:last].replace('ˈ', 'ˌ') + ps[last:]
    return ps if n == 1 else lts.fix_stress([ps])


# The reranker: the search's final hypotheses (each with its choice of primary where it wrote several) scored
# again with a stress-pattern model. A word's stress pattern: one mark a vowel ('P' primary, 'S' secondary, '0'
# none), its last vowel first. Its cost: -ln P(pattern | the word's last letters), Witten-Bell interpolated
# over the last 0..STRESS_SUFFIX letters, suffixes of fewer than STRESS_MIN_COUNT training words left out,
# stored as a backoff trie (integer costs, as the n-gram's) so the C++ reranker sums the same integers.
STRESS_SUFFIX = 5
STRESS_MIN_COUNT = 5
UNIFORM_VOWEL_COST = 11  # a pattern the suffixes never saw: 1/3 a vowel (ln 3 = 1.1 nats)
# Score = W_MODEL * n-gram cost + W_STRESS * stress cost + W_FIX (a variant whose stress the search did not
# write as exactly one primary). Chosen on the dev words (US): 0.3 a stress tenth of a nat, 10 for a fix.
W_MODEL, W_STRESS, W_FIX = 10, 3, 100
RERANK_MAX_LETTERS = 40  # longer: the search's best (the variants' work grows with length squared)
STRESS_MARK = {'0': 0, 'P': 1, 'S': 2}


def stress_pattern(ps):
    out, mark = [], '0'
    for c in ps:
        if c == 'ˈ':
            mark = 'P'
        elif c == 'ˌ':
            mark = 'S'
        elif c in lts.VOWELS:
            out.append(mark)
            mark = '0'
    return ''.join(reversed(out))


class StressTable:
    """The stress-pattern model: a trie over the word's letters from its last, each node with the costs of
    the patterns seen under that suffix and a backoff cost for the others."""

    def __init__(self, nodes, patterns):
        self.nodes = nodes  # [(suffix, backoff cost, {pattern: cost})], breadth first, root first
        self.patterns = patterns
        self.by_suffix = {n[0]: n for n in nodes}

    @staticmethod
    def train(words):
        counts = collections.defaultdict(collections.Counter)  # suffix -> pattern counts
        for w, units in sorted(words.items()):
            pat = stress_pattern(''.join(units))
            for k in range(min(STRESS_SUFFIX, len(w)) + 1):
                counts[w[len(w) - k:]][pat] += 1
        kept = {s: c for s, c in counts.items() if s == '' or sum(c.values()) >= STRESS_MIN_COUNT}
        # A suffix is kept only with the shorter suffixes (the lookup walks letter by letter).
        kept = {s: c for s, c in kept.items() if all(s[i:] in kept for i in range(len(s)))}
        prob = {}

        def p(suffix, pat):
            if suffix is None:
                return math.exp(-UNIFORM_VOWEL_COST / SCALE * len(pat))
            c = kept[suffix]
            t, d = sum(c.values()), len(c)
            lam = t / (t + d)
            return lam * c[pat] / t + (1 - lam) * p(suffix[1:] if suffix else None, pat)

        nodes = []
        for s in sorted(kept, key=lambda s: (len(s), s[::-1])):
            c = kept[s]
            t, d = sum(c.values()), len(c)
            costs = {pat: cost(p(s, pat)) for pat in sorted(c)}
            nodes.append((s, cost(1 - t / (t + d)), costs))
        patterns = sorted({pat for _, _, cs in nodes for pat in cs}, key=lambda x: (len(x), x))
        return StressTable(nodes, patterns)

    def cost(self, word, pat):
        chain = ['']
        for k in range(1, min(STRESS_SUFFIX, len(word)) + 1):
            if word[len(word) - k:] not in self.by_suffix:
                break
            chain.append(word[len(word) - k:])
        acc = 0
        for s in reversed(chain):
            _, backoff, costs = self.by_suffix[s]
            if pat in costs:
                return acc + costs[pat]
            acc += backoff
        return acc + UNIFORM_VOWEL_COST * len(pat)

    def blob(self):
        """u16 w_model, w_stress, w_fix; u32 n_patterns, per pattern u8 n_vowels and one byte a vowel (0 none,
        1 primary, 2 secondary; last vowel first); u32 n_nodes, per node (breadth first, children sorted by
        letter): u8 letter (the root's 0), u8 backoff cost, u16 n_children, u16 n_patterns; then per node its
        patterns: u16 pattern index, u8 cost (sorted by index)."""
        out = bytearray(struct.pack('<HHH', W_MODEL, W_STRESS, W_FIX))
        pindex = {pat: i for i, pat in enumerate(self.patterns)}
        out += struct.pack('<I', len(self.patterns))
        for pat in self.patterns:
            out += bytes([len(pat)] + [STRESS_MARK[m] for m in pat])
        n_children = collections.Counter(s[1:] for s, _, _ in self.nodes if s)
        out += struct.pack('<I', len(self.nodes))
        for s, backoff, costs in self.nodes:
            out += struct.pack('<BBHH', ord(s[0]) if s else 0, backoff, n_children.get(s, 0), len(costs))
        for s, backoff, costs in self.nodes:
            for i, c in sorted((pindex[pat], c) for pat, c in costs.items()):
                out += struct.pack('<HB', i, c)
        return bytes(out)


def stress_variants(raw):
    """The stress readings of one hypothesis: itself with one primary; with several, one variant a primary
    kept (the others secondary); with none, fix_stress's reading. Second item: 1 where the stress was fixed."""
    n = raw.count('ˈ')
    if n == 1:
        return [(raw, 0)]
    if n == 0:
        return [(fix_stress(raw), 1)]
    at = [i for i, c in enumerate(raw) if c == 'ˈ']
    return [(''.join('ˌ' if c == 'ˈ' and i != keep else c for i, c in enumerate(raw)), 1) for keep in at]


def cost(x):
    return min(255, max(0, int(round(-math.log(max(x, 1e-30)) * SCALE))))


def build(vocab, prob, bow, children, order):
    """The trie in breadth-first order: [(history tuple, graphone index, cost, backoff cost, n_children)]."""
    index = {g: i for i, g in enumerate([END, START] + [g for g in vocab if g not in (END, START)])}
    nodes = [((), 0, 0, 0)]
    frontier = [()]
    while frontier:
        nxt = []
        for hist in frontier:
            for g in sorted(children.get(hist, []), key=lambda g: index[g[-1]]):
                nodes.append((g, index[g[-1]], cost(prob[g]), cost(bow[g]) if g in bow else 0))
                nxt.append(g)
        frontier = nxt
    return index, nodes


class Model:
    """The stored model, read back exactly as the C++ decoder reads it."""

    def __init__(self, graphones, nodes, order, beam, rtl, stress=None):
        self.graphones = graphones  # [(letter, units string)]
        self.stress = stress  # a StressTable: the final hypotheses reranked (None: the search's best)
        self.order, self.beam, self.rtl = order, beam, rtl
        self.cost = [n[2] for n in nodes]
        self.bow = [n[3] for n in nodes]
        self.child = {}
        hist_id = {(): 0}
        for i, n in enumerate(nodes[1:], 1):
            hist_id[n[0]] = i
            self.child[(hist_id[n[0][:-1]], n[1])] = i
        by_letter = collections.defaultdict(list)
        for i, (letter, _) in enumerate(graphones):
            by_letter[letter].append(i)
        self.by_letter = by_letter

    def score(self, state, g):
        """state: node ids of the history's suffixes, longest last ([0] = the root alone)."""
        acc = 0
        for ctx in reversed(state):
            n = self.child.get((ctx, g))
            if n is not None:
                return acc + self.cost[n]
            acc += self.bow[ctx]
        return acc + 255  # a graphone never seen at all

    def advance(self, state, g):
        # The new history's suffixes, shortest first: a suffix left out of the model means every longer one
        # is too (the kept n-grams are closed under suffixes). At most order - 1 graphones of history.
        new = [0]
        for ctx in state:
            n = self.child.get((ctx, g))
            if n is None:
                break
            new.append(n)
        return tuple(new[:self.order])

    def path_cost(self, path):
        """The cost of one whole graphone path (word start and end included)."""
        state, total = self.advance((0,), 1), 0
        for g in path:
            total += self.score(state, g)
            state = self.advance(state, g)
        return total + self.score(state, 0)

    def nbest(self, word):
        """The final beam: [(total cost, rank of the hypothesis, graphone path)], best first (ties broken by the
        rank, as the C++ search breaks them); paths in the order of reading (last letter first if rtl)."""
        letters = [c for c in word.lower() if 'a' <= c <= 'z']
        if self.rtl:
            letters.reverse()
        hyps = [(0, self.advance((0,), 1), ())]  # (cost, state, graphone path); graphone 1 starts words
        for c in letters:
            cands = []
            for rank, (sc, state, path) in enumerate(hyps):
                for g in self.by_letter.get(c, []):
                    cands.append((sc + self.score(state, g), rank, g, state, path))
            cands.sort(key=lambda x: x[:3])
            hyps, seen = [], set()
            for sc, _, g, state, path in cands:
                st = self.advance(state, g)
                if st[-1] in seen:
                    continue
                seen.add(st[-1])
                hyps.append((sc, st, path + (g,)))
                if len(hyps) == self.beam:
                    break
            if not hyps:
                return []
        return sorted(((sc + self.score(state, 0), rank, path) for rank, (sc, state, path) in enumerate(hyps)))

    def read(self, word):
        """The best path by the beam search src/text/g2p_lts.cpp runs: candidates ordered by (cost, rank of
        the hypothesis they extend, graphone), the first of each n-gram history kept, BEAM of them; then, with
        a stress table, the final hypotheses' stress variants reranked (ties: the earlier in the search's
        order, then the earlier variant)."""
        best = self.nbest(word)
        if not best:
            return ''
        letters = ''.join(c for c in word.lower() if 'a' <= c <= 'z')
        if self.stress is None or len(letters) > RERANK_MAX_LETTERS:
            return fix_stress(self.phonemes(best[0][2]))
        top = None
        for total, _, path in best:
            for ps, fixed in stress_variants(self.phonemes(path)):
                sc = (W_MODEL * total + W_STRESS * self.stress.cost(letters, stress_pattern(ps)) + W_FIX * fixed)
                if top is None or sc < top[0]:
                    top = (sc, ps)
        return top[1]

    def phonemes(self, path):
        return ''.join(self.graphones[g][1] for g in (path[::-1] if self.rtl else path))


def model_file(index, nodes, order, beam, rtl, stress=None):
    graphones = sorted(index, key=index.get)
    version = 2 if stress is None else 3
    out = bytearray(b'SOTTOJSM' + struct.pack('<IIIII', version, order, beam, int(rtl), len(graphones)))
    for letter, chunk in graphones:
        b = ''.join(chunk).encode()
        out += letter.encode() + bytes([len(b)]) + b
    n_children = collections.Counter(n[0][:-1] for n in nodes[1:])
    out += struct.pack('<I', len(nodes))
    for hist, g, c, b, in nodes:
        out += struct.pack('<HBBH', g, c, b, n_children.get(hist, 0))
    if stress is not None:
        out += stress.blob()
    return bytes(out), [(letter, ''.join(chunk)) for letter, chunk in graphones]


def main():
    args = sys.argv[1:]
    out_dir = Path('data/g2p')
    global W_MODEL, W_STRESS, W_FIX
    opts = {'--out': None, '--lang': None, '--order': None, '--min-count': None, '--beam': None,
            '--weights': None}
    use_dev = '--dev' in args
    rtl = RIGHT_TO_LEFT != ('--flip' in args)
    rerank = '--no-rerank' not in args
    args = [a for a in args if a not in ('--dev', '--flip', '--no-rerank')]
    for k in opts:
        if k in args:
            opts[k] = args[args.index(k) + 1]
            del args[args.index(k):args.index(k) + 2]
    if len(args) != 1:
        sys.exit(__doc__.split('\n\n')[1])
    out_dir = Path(opts['--out'] or out_dir)
    order = int(opts['--order'] or ORDER)
    min_count = int(opts['--min-count'] or MIN_COUNT)
    beam = int(opts['--beam'] or BEAM)
    langs = (opts['--lang'],) if opts['--lang'] else ('us', 'gb')
    if opts['--weights']:
        W_MODEL, W_STRESS, W_FIX = (int(x) for x in opts['--weights'].split(','))
    with zipfile.ZipFile(args[0]) as z:
        for lang in langs:
            words = lts.load_words(z, lang)
            train_words = {w: u for w, u in words.items() if not lts.held_out(w) and not (use_dev and dev(w))}
            test_words = {w: u for w, u in words.items() if (dev(w) if use_dev else lts.held_out(w))}
            alignments = lts.align(train_words)
            vocab, prob, bow, children = train(sequences(alignments, rtl), order, min_count)
            index, nodes = build(vocab, prob, bow, children, order)
            stress = StressTable.train(train_words) if rerank else None
            blob, graphones = model_file(index, nodes, order, beam, rtl, stress)
            model = Model(graphones, nodes, order, beam, rtl, stress)
            ok = ok_ns = 0
            for w, u in sorted(test_words.items()):
                got, want = model.read(w), ''.join(u)
                ok += got == want
                ok_ns += got.replace('ˈ', '').replace('ˌ', '') == want.replace('ˈ', '').replace('ˌ', '')
            split = 'dev (crc32 % 20 == 1)' if use_dev else 'held out (crc32 % 20 == 0)'
            print(f'g2p_jsm_train: {lang}: {"right to left" if rtl else "left to right"}, order {order}, '
                  f'min count {min_count}, beam {beam}, '
                  f'{f"reranked ({W_MODEL},{W_STRESS},{W_FIX})" if rerank else "not reranked"}: '
                  f'{len(train_words)} training words, {len(test_words)} {split}: '
                  f'{ok / len(test_words):.1%} exact, {ok_ns / len(test_words):.1%} ignoring stress; '
                  f'{len(graphones)} graphones, {len(nodes)} n-grams, {len(blob)} bytes', flush=True)
            if use_dev:
                continue
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f'jsm-en-{lang}.bin').write_bytes(blob)
            listed = [line.split('\t')[0] for line in
                      Path(f'tests/data/g2p/lts_heldout_{lang}.tsv').read_text(encoding='utf-8').splitlines()
                      if line and not line.startswith('#')]
            with open(f'tests/data/g2p/jsm_predictions_{lang}.tsv', 'w', encoding='utf-8') as f:
                f.write(f'# tools/g2p_jsm_train.py\'s readings of the words of lts_heldout_{lang}.tsv '
                        f'(held out of its training; {ok / len(test_words):.1%} of all {len(test_words)} '
                        'held-out words exact): word, phonemes\n')
                f.write(''.join(f'{w}\t{model.read(w)}\n' for w in listed))
            print(f'g2p_jsm_train: wrote {out_dir / f"jsm-en-{lang}.bin"} ({len(blob)} bytes)')


if __name__ == '__main__':
    main()
