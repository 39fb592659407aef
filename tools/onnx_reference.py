#!/usr/bin/env python3
"""Reference tensor table for ONNX files, made with the official `onnx` package (pip install onnx numpy), so
tests/unit/onnx_test.cpp checks sotto's own protobuf reader against an independent decoder.

Writes one TSV per model: a few "#key<TAB>value" metadata lines, then one line per initializer and Constant
tensor (subgraphs included, depth first in file order):
    unique_name  tensor_name  dtype  shape(comma-separated)  n_elements  sha256_prefix  sum
sha256_prefix is the first 16 hex digits of the sha256 of the values' little-endian bytes; sum is their
float64 sum. With --skip-int64 the int64 rows (shape constants) are left out to keep the file small; the
#tensor_count line still counts them.
Scopes and unique names follow the rule documented in src/io/onnx.h, re-derived here from the onnx objects.

usage: tools/onnx_reference.py [--skip-int64] OUT_DIR model.onnx...
"""
import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
          10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def tensor_row(unique_name, tensor_name, t):
    arr = numpy_helper.to_array(t)
    if t.data_type == 16:  # bfloat16: hash the raw 16-bit patterns
        data = np.ascontiguousarray(arr).view(np.uint16).astype("<u2").tobytes()
    else:
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    total = float(np.sum(arr.astype(np.float64))) if arr.size else 0.0
    shape = ",".join(str(d) for d in t.dims)
    return "\t".join([unique_name, tensor_name, DTYPES[t.data_type], shape, str(arr.size),
                      hashlib.sha256(data).hexdigest()[:16], repr(total)])


def walk(graph, scope, rows, counts):
    join = lambda name: f"{scope}/{name}" if scope else name
    for t in graph.initializer:
        rows.append(tensor_row(join(t.name), t.name, t))
    for index, node in enumerate(graph.node):
        counts["nodes"] += 1
        label = node.name if node.name else f"{node.op_type}#{index}"
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                counts["subgraphs"] += 1
                walk(a.g, join(f"{label}.{a.name}"), rows, counts)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for i, g in enumerate(a.graphs):
                    counts["subgraphs"] += 1
                    walk(g, join(f"{label}.{a.name}[{i}]"), rows, counts)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            a = node.attribute[0]
            out = node.output[0] if node.output else a.t.name
            if a.name == "value":
                rows.append(tensor_row(join(out), a.t.name or out, a.t))
            elif a.name in ("value_float", "value_floats", "value_int", "value_ints"):
                t = numpy_helper.from_array(np.array(onnx.helper.get_attribute_value(a),
                                                     np.float32 if "float" in a.name else np.int64), out)
                rows.append(tensor_row(join(out), out, t))


def main():
    args = sys.argv[1:]
    skip_int64 = args[0] == "--skip-int64"
    if skip_int64:
        args = args[1:]
    out_dir = args[0]
    for path in args[1:]:
        m = onnx.load(path)
        rows, counts = [], {"nodes": 0, "subgraphs": 0}
        walk(m.graph, "", rows, counts)
        meta = [f"#ir_version\t{m.ir_version}", f"#producer_name\t{m.producer_name}",
                f"#producer_version\t{m.producer_version}", f"#graph_name\t{m.graph.name}",
                f"#opset\t" + ",".join(f"{o.domain}:{o.version}" for o in m.opset_import),
                f"#inputs\t" + ",".join(i.name for i in m.graph.input),
                f"#outputs\t" + ",".join(o.name for o in m.graph.output),
                f"#node_count\t{len(m.graph.node)}", f"#total_node_count\t{counts['nodes']}",
                f"#subgraph_count\t{counts['subgraphs']}", f"#tensor_count\t{len(rows)}"]
        if skip_int64:
            rows = [r for r in rows if r.split("\t")[2] != "int64"]
        name = os.path.basename(path) + ".tensors.tsv"
        with open(os.path.join(out_dir, name), "w") as f:
            f.write("\n".join(meta + rows) + "\n")
        print(name, len(rows), "tensors")


if __name__ == "__main__":
    main()
