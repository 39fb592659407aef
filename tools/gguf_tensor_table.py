#!/usr/bin/env python3
"""Writes tests/data/stories260K_tensors.txt: where each tensor of the stories260K fixtures lies, as read by
gguf-py's GGUFReader (an implementation independent of sotto's reader). dtype_fixture_test.cpp uses it to
dequantize the q8_0/q4_0 files' tensors and compare them with the f32 original.

Line format: <file> <tensor name> <ggml type id> <absolute data offset> <element count>

Usage: pip install gguf numpy; python3 tools/gguf_tensor_table.py [fixtures/llm dir] [output]
"""
import os
import sys

from gguf import GGUFReader

FILES = ["stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf"]


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "llm")
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "tests", "data", "stories260K_tensors.txt")
    lines = []
    for name in FILES:
        reader = GGUFReader(os.path.join(fixtures, name))
        for t in reader.tensors:
            lines.append(f"{name} {t.name} {int(t.tensor_type)} {int(t.data_offset)} {int(t.n_elements)}")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} tensors to {out_path}")


if __name__ == "__main__":
    main()
