#!/usr/bin/env python3
"""Expected values for tests/unit/gguf_test.cpp and safetensors_test.cpp, computed independently of sotto.

Parses the GGUF and safetensors fixtures with a from-scratch Python reader (struct + json + hashlib only) and
prints, per file, the tensor table and the sha256 of selected tensors' data bytes, as C++ initializer rows.
Usage: python3 tools/fixture_digests.py [FIXTURES_DIR]   (default tests/fixtures)
"""
import hashlib
import json
import os
import struct
import sys

FIX = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")

# ggml type id -> (name, block elements, block bytes), from ggml.h / ggml.c type traits.
GGML = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 8: ("q8_0", 32, 34),
        30: ("bf16", 1, 2)}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s.decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALAR[t])


def gguf(path):
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.take("<I") == 0x46554747
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    align = kv.get("general.alignment", 32)
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        ne = [r.take("<q") for _ in range(nd)]
        t = r.take("<I")
        off = r.take("<Q")
        tensors.append((name, ne, t, off))
    data_start = (r.p + align - 1) // align * align
    return data, version, kv, tensors, data_start


def tensor_bytes(ne, t):
    n = 1
    for d in ne:
        n *= d
    _, be, bb = GGML[t]
    return n // be * bb


def main():
    for rel in ["llm/stories260K.gguf", "llm/stories260K-q8_0.gguf", "llm/stories260K-q4_0.gguf",
                "tokenizer/ggml-vocab-qwen2.gguf", "tokenizer/ggml-vocab-llama-spm.gguf",
                "tokenizer/ggml-vocab-llama-bpe.gguf"]:
        data, version, kv, tensors, data_start = gguf(os.path.join(FIX, rel))
        counts = {}
        for _, _, t, _ in tensors:
            counts[GGML[t][0]] = counts.get(GGML[t][0], 0) + 1
        print(f"// {rel}: version {version}, {len(kv)} keys, {len(tensors)} tensors, data at {data_start}, "
              f"types {sorted(counts.items())}, general.name {kv.get('general.name')!r}, "
              f"tokens {len(kv.get('tokenizer.ggml.tokens', []))}, "
              f"token[1] {kv['tokenizer.ggml.tokens'][1]!r}")
        for name, ne, t, off in tensors:
            if name in ("token_embd.weight", "output.weight", "blk.0.ffn_down.weight", "output_norm.weight",
                        "blk.4.attn_k.weight"):
                begin = data_start + off
                size = tensor_bytes(ne, t)
                digest = hashlib.sha256(data[begin:begin + size]).hexdigest()
                print(f'  {{"{name}", "{GGML[t][0]}", {{{", ".join(map(str, ne))}}}, {begin}, {size}, "{digest}"}},')

    path = os.path.join(FIX, "vad/silero_vad_16k.safetensors")
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    print(f"// silero_vad_16k.safetensors: header {n} bytes, metadata {header.get('__metadata__')}, "
          f"{len([k for k in header if k != '__metadata__'])} tensors")
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        digest = hashlib.sha256(data[8 + n + b:8 + n + end]).hexdigest()
        print(f'  {{"{name}", "{e["dtype"]}", {{{", ".join(map(str, e["shape"]))}}}, {8 + n + b}, {end - b}, "{digest}"}},')


if __name__ == "__main__":
    main()
