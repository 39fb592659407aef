#!/usr/bin/env python3
"""Copies a Kokoro v1.0 ONNX file with its graph inputs/outputs renamed to what transformers.js'
StyleTextToSpeech2Model (kokoro-js) feeds and reads: tokens -> input_ids, audio -> waveform (style and speed
keep their names). The weights and nodes are untouched, so kokoro-js runs exactly the same int8 graph as
onnxruntime-web and ours in bench/kokoro_web.mjs.

  python3 tools/kokoro_rename_io.py IN.onnx OUT.onnx      (needs the `onnx` package from PyPI)
"""
import sys

import onnx

RENAME = {'tokens': 'input_ids', 'audio': 'waveform'}


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: kokoro_rename_io.py IN.onnx OUT.onnx')
    try:
        model = onnx.load(sys.argv[1])
    except Exception as e:
        sys.exit(f'{sys.argv[1]}: cannot read as ONNX: {e}')
    graph = model.graph
    have = {v.name for v in graph.input} | {v.name for v in graph.output}
    if not set(RENAME) <= have:
        sys.exit(f'{sys.argv[1]}: not a Kokoro v1.0 export (inputs/outputs {sorted(have)}, expected {sorted(RENAME)})')
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = RENAME.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [RENAME.get(n, n) for n in node.input]
        node.output[:] = [RENAME.get(n, n) for n in node.output]
    onnx.save(model, sys.argv[2])


if __name__ == '__main__':
    main()
