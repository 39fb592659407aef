#!/usr/bin/env python3
"""Writes the small seed files in tests/fuzz/corpus/{gguf,safetensors} (a few hundred bytes each).

Usage: python3 tools/make_fuzz_seeds.py [FIXTURES_DIR]   (default tests/fixtures)
"""
import json
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIX = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, type_id, value):
    return s(key) + struct.pack("<I", type_id) + value


def gguf_seeds():
    kvs = [kv("general.architecture", 8, s("llama")), kv("llama.context_length", 4, struct.pack("<I", 2048)),
           kv("eps", 6, struct.pack("<f", 1e-5)), kv("flag", 7, b"\x01"), kv("big", 10, struct.pack("<Q", 2**40)),
           kv("tokens", 9, struct.pack("<IQ", 8, 3) + s("<s>") + s("a") + s("\u2581b")),
           kv("scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.5, -1, 2)),
           kv("general.alignment", 4, struct.pack("<I", 32))]
    tensors = [(b"w", [32, 2], 8, 0), (b"n", [4], 0, 96)]  # Q8_0 (68 bytes), F32 (16 bytes) at offset 96
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    for name, ne, ggml_type, offset in tensors:
        header += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(ne))
        header += b"".join(struct.pack("<q", x) for x in ne) + struct.pack("<IQ", ggml_type, offset)
    header += b"\0" * ((-len(header)) % 32)
    data = bytes((i * 37 + 11) % 256 for i in range(112))
    with open(os.path.join(OUT, "gguf", "two_tensors.gguf"), "wb") as f:
        f.write(header + data)
    vocab = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv("general.name", 8, s("x"))
    vocab += kv("t", 9, struct.pack("<IQ", 5, 4) + struct.pack("<4i", 1, 2, 3, 4))
    with open(os.path.join(OUT, "gguf", "vocab_only.gguf"), "wb") as f:
        f.write(vocab)


def safetensors_seeds():
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                         "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}).encode()
    with open(os.path.join(OUT, "safetensors", "small.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bytes(range(1, 23)))
    # Two entries of the real Silero header, re-based onto a small data section.
    real = open(os.path.join(FIX, "vad", "silero_vad_16k.safetensors"), "rb").read()
    n = struct.unpack_from("<Q", real)[0]
    entries = json.loads(real[8:8 + n])
    keep = {k: entries[k] for k in ["conv1.bias", "final_conv.bias"]}
    keep["conv1.bias"]["data_offsets"] = [0, 512]
    keep["final_conv.bias"]["data_offsets"] = [512, 516]
    header = json.dumps(keep, separators=(",", ":")).encode()
    with open(os.path.join(OUT, "safetensors", "silero_subset.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bytes((i * 7) % 251 for i in range(516)))


if __name__ == "__main__":
    os.makedirs(os.path.join(OUT, "gguf"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "safetensors"), exist_ok=True)
    gguf_seeds()
    safetensors_seeds()
