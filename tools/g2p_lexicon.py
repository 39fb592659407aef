#!/usr/bin/env python3
"""Builds sotto's compact G2P lexicons from misaki 0.9.4's US and GB lexicons (Apache-2.0, hexgrad).

    python3 tools/g2p_lexicon.py WHEEL OUT_DIR

WHEEL is misaki-0.9.4-py3-none-any.whl from the Python package index (`pip download --no-deps misaki==0.9.4`);
its misaki/data/{us,gb}_{gold,silver}.json are read straight from the zip. Writes OUT_DIR/g2p-en-us.bin and
OUT_DIR/g2p-en-gb.bin (the layout below, read by src/text/g2p_lexicon.cpp), each with its language's
letter-to-sound model (data/g2p/jsm-en-*.bin, trained on the same lexicon by tools/g2p_jsm_train.py) and
affix rules (learned here by tools/g2p_affixes.py, ~10 KB) at the end. The output is a pure function of its inputs, so its sha256 is fixed (scripts/get-models.sh checks it).

File layout (little-endian):
  "SOTTOG2P" u32 version(3) u32 british(0|1)
  u32 n_symbols, then per symbol: u8 n_bytes, UTF-8 bytes      phoneme code c (1..n) is symbol c-1
  u32 n_tags,    then per tag:    u8 n_bytes, ASCII bytes      POS tags of heteronym variants
  two tables, gold then silver:
    u32 n_entries, u32 n_blocks, u32 block_start[n_blocks + 1] (byte offsets into data), u32 data_bytes, data
    data: entries sorted by key bytes, in blocks of BLOCK entries; an entry is
      u8 shared (bytes shared with the previous key; 0 at a block start), u8 n_suffix, suffix bytes,
      then its value: u8 h; h < 0x80: one pronunciation of h codes;
                      h >= 0x80: (h & 0x7f) variants, each u8 tag, u8 n (0xff: no pronunciation), n codes.
  u32 n_bytes, then the letter-to-sound model (0: none), as data/g2p/jsm-en-*.bin holds it (src/text/g2p_lts.cpp
      also reads the older context tables of tools/g2p_lts_train.py there).
  u32 n_bytes, then the affix rules (0: none) that tools/g2p_affixes.py learns from the same lexicon.
Keys and values are misaki's, unchanged (the case variants misaki's grow_dictionary adds are derived at lookup).
"""
import json
import struct
import sys
import zipfile
from pathlib import Path

import g2p_affixes

BLOCK = 16
# Every phoneme character either lexicon uses; the stress marks first. Fixed so the files of both languages
# share codes and the C++ side can name them.
SYMBOLS = list('ˈˌ' 'AIOQWY' 'abdfhijklmnpstuvwz' 'æðŋɑɒɔəɛɜɡɪɹɾʃʊʌʒʔʤʧθᵊᵻː')
TAGS = ['DEFAULT', 'None', 'NOUN', 'VERB', 'ADJ', 'ADV', 'VBD', 'VBN', 'VBP', 'DT']


def encode_ps(ps):
    code = {s: i + 1 for i, s in enumerate(SYMBOLS)}
    out = bytes(code[c] for c in ps)
    if len(out) >= 0x80:
        sys.exit(f'g2p_lexicon: pronunciation of {len(out)} symbols is too long: {ps}')
    return out


def encode_value(v):
    if isinstance(v, str):
        return bytes([len(encode_ps(v))]) + encode_ps(v)
    out = bytearray([0x80 | len(v)])
    for tag, ps in v.items():
        out.append(TAGS.index(tag))
        if ps is None:
            out.append(0xFF)
        else:
            e = encode_ps(ps)
            out.append(len(e))
            out += e
    return bytes(out)


def table(d):
    keys = sorted(d, key=lambda k: k.encode())
    data = bytearray()
    starts = []
    prev = b''
    for i, k in enumerate(keys):
        kb = k.encode()
        if i % BLOCK == 0:
            starts.append(len(data))
            shared = 0
        else:
            shared = 0
            while shared < min(len(kb), len(prev), 255) and kb[shared] == prev[shared]:
                shared += 1
        data += bytes([shared, len(kb) - shared]) + kb[shared:] + encode_value(d[k])
        prev = kb
    starts.append(len(data))
    head = struct.pack('<II', len(keys), len(starts) - 1) + struct.pack(f'<{len(starts)}I', *starts)
    return head + struct.pack('<I', len(data)) + bytes(data)


def build(gold, silver, british, lts, affixes):
    out = bytearray(b'SOTTOG2P' + struct.pack('<II', 3, 1 if british else 0))
    out += struct.pack('<I', len(SYMBOLS))
    for s in SYMBOLS:
        b = s.encode()
        out += bytes([len(b)]) + b
    out += struct.pack('<I', len(TAGS))
    for t in TAGS:
        out += bytes([len(t)]) + t.encode()
    out += table(gold) + table(silver)
    out += struct.pack('<I', len(lts)) + lts
    out += struct.pack('<I', len(affixes)) + affixes
    return bytes(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split('\n\n')[1])
    wheel, out_dir = sys.argv[1], Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for lang, british in (('us', False), ('gb', True)):
            gold = json.loads(z.read(f'misaki/data/{lang}_gold.json'))
            silver = json.loads(z.read(f'misaki/data/{lang}_silver.json'))
            lts = (Path(__file__).resolve().parent.parent / 'data' / 'g2p' / f'jsm-en-{lang}.bin').read_bytes()
            affixes = g2p_affixes.rules_blob(g2p_affixes.lexicon(z, lang))
            blob = build(gold, silver, british, lts, affixes)
            path = out_dir / f'g2p-en-{lang}.bin'
            path.write_bytes(blob)
            print(f'g2p_lexicon: {path}: {len(gold)} gold + {len(silver)} silver entries, letter-to-sound model of '
                  f'{len(lts)} bytes, affix rules of {len(affixes)} bytes; {len(blob)} bytes')


if __name__ == '__main__':
    main()
