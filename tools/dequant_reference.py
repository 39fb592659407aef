#!/usr/bin/env python3
"""Writes tests/data/dequant_reference.bin: reference values from gguf-py's numpy (de)quantizers (gguf.quants),
an implementation independent of sotto's C++, for tests/unit/dtype_reference_test.cpp.

Two kinds of record:
  dequantize: random block bytes (with sane random f16 scales, never all zeros) -> the f32 values gguf-py decodes
  quantize:   random f32 values -> the block bytes gguf-py's quantizer writes (q4_0 q4_1 q5_0 q5_1 q8_0 bf16,
              the types gguf-py quantizes the way ggml's reference does)

File format (little-endian): b"SOTTODQ1", u32 record count, then per record
  u32 kind (0 dequantize, 1 quantize), u32 ggml type id, u32 element count n, u32 byte count m,
  m block bytes, n f32 values.
Usage: pip install gguf numpy; python3 tools/dequant_reference.py [output]
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Byte offsets of the f16 scale fields inside one block (ggml-common.h), overwritten with sane values so the
# decoded numbers are finite and of ordinary size.
F16_SCALE_OFFSETS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCKS = 4


def random_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    magnitude = np.exp2(rng.uniform(-10, 2, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (magnitude * sign).astype(np.float16)


def dequantize_records(rng: np.random.Generator) -> list:
    records = []
    for qtype, offsets in F16_SCALE_OFFSETS.items():
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        blocks = rng.integers(0, 256, size=(BLOCKS, block_bytes), dtype=np.uint8)
        for off in offsets:
            blocks[:, off:off + 2] = random_f16(rng, BLOCKS).view(np.uint8).reshape(BLOCKS, 2)
        data = blocks.reshape(-1)
        values = dequantize(data, qtype).astype(np.float32).reshape(-1)
        assert values.size == BLOCKS * block_elems and np.all(np.isfinite(values))
        records.append((0, qtype, data.tobytes(), values))
    # Plain 16-bit floats: every bit pattern is fair game (NaN payloads, infinities, subnormals).
    for qtype in (T.F16, T.BF16):
        data = rng.integers(0, 256, size=512, dtype=np.uint8)
        values = dequantize(data, qtype).astype(np.float32).reshape(-1)
        records.append((0, qtype, data.tobytes(), values))
    return records


def quantize_records(rng: np.random.Generator) -> list:
    n_blocks = 8
    values = rng.standard_normal((n_blocks, 32)).astype(np.float32)
    values *= np.exp2(rng.uniform(-6, 6, (n_blocks, 1))).astype(np.float32)  # a different range per block
    values[1, 5] *= 20  # an outlier
    values[2, :16] = np.abs(values[2, :16])  # one-sided halves
    values[3] = np.arange(-15.5, 16.5, 1.0, dtype=np.float32)  # halves: rounding ties
    values[4] = (np.arange(32, dtype=np.float32) - 16) * 0.5
    values = values.reshape(-1)
    records = []
    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16):
        data = quantize(values, qtype).reshape(-1)
        records.append((1, qtype, data.tobytes(), values))
    return records


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "dequant_reference.bin")
    rng = np.random.default_rng(20261130)
    records = dequantize_records(rng) + quantize_records(rng)
    with open(out_path, "wb") as f:
        f.write(b"SOTTODQ1" + struct.pack("<I", len(records)))
        for kind, qtype, data, values in records:
            f.write(struct.pack("<IIII", kind, int(qtype), values.size, len(data)))
            f.write(data)
            f.write(values.astype("<f4").tobytes())
    print(f"wrote {len(records)} records to {out_path} ({os.path.getsize(out_path)} bytes)")


if __name__ == "__main__":
    main()
