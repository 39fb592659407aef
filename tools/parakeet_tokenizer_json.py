#!/usr/bin/env python3
"""Writes the Hugging Face layout's tokenizer.json for Parakeet TDT v3 from NeMo's SentencePiece model
(tests/fixtures/asr/tokenizer.model) the way transformers' own converter does it
(models/parakeet/convert_nemo_to_hf.py: ParakeetConverter, <pad> and <blank> added, pad and unk set), and
transformers' decoding of random token sequences beside it, for tests/unit/parakeet_test.cpp:

  tests/data/parakeet/tokenizer_v3/tokenizer.json     what a ParakeetForTDT directory from the hub carries
  tests/data/parakeet/tokenizer_v3/decode.json        [{"ids": [...], "text": "..."}] from ParakeetTokenizer

The sequences use the SentencePiece model's ordinary pieces (not its <|...|> control pieces, which
transformers keeps as added tokens and spaces differently). Needs transformers, tokenizers, sentencepiece,
protobuf (pip; no torch).

  python3 tools/parakeet_tokenizer_json.py [--model PATH] [--out DIR]
"""
import argparse
import json
import os
import random

from tokenizers import AddedToken
from transformers import ParakeetTokenizer
from transformers.convert_slow_tokenizer import ParakeetConverter


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='tests/fixtures/asr/tokenizer.model')
    ap.add_argument('--out', default='tests/data/parakeet/tokenizer_v3')
    args = ap.parse_args()
    tok = ParakeetTokenizer(tokenizer_object=ParakeetConverter(args.model).converted(),
                            clean_up_tokenization_spaces=False)
    special = lambda s: AddedToken(s, normalized=False, special=True)
    if tok.convert_tokens_to_ids('<pad>') is None:
        tok.add_tokens([special('<pad>')])
    tok.add_tokens([special('<blank>')])  # TDT: the blank, one past the pieces
    tok.add_special_tokens({'pad_token': special('<pad>'), 'unk_token': special('<unk>')})
    os.makedirs(args.out, exist_ok=True)
    tok.backend_tokenizer.save(os.path.join(args.out, 'tokenizer.json'))

    added = {t.content for t in tok.backend_tokenizer.get_added_tokens_decoder().values()}
    vocab = tok.backend_tokenizer.get_vocab(with_added_tokens=False)
    ordinary = sorted(i for p, i in vocab.items() if p not in added)
    rng = random.Random(7)
    cases = []
    for n in [1, 1, 2, 3, 5, 8, 13, 21, 34] * 6:
        ids = [rng.choice(ordinary) for _ in range(n)]
        cases.append({'ids': ids, 'text': tok.decode(ids, group_tokens=False)})
    with open(os.path.join(args.out, 'decode.json'), 'w', encoding='utf-8') as f:
        f.write('[\n' + ',\n'.join(json.dumps(c, ensure_ascii=False) for c in cases) + '\n]\n')
    print(f'wrote {args.out}/tokenizer.json ({len(vocab)} pieces, blank {tok.convert_tokens_to_ids("<blank>")}), '
          f'decode.json ({len(cases)} sequences)')


main()
