#!/usr/bin/env python3
"""Small seed models for tests/fuzz/fuzz_onnx.cpp, written with the official onnx package: every data type in
raw_data and in typed fields, Constant forms, and If/Loop subgraphs. usage: tools/onnx_fuzz_seeds.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)


def save(name, graph):
    m = helper.make_model(graph, producer_name="seed", opset_imports=[helper.make_opsetid("", 17)])
    m.metadata_props.add(key="k", value="v")
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


types = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
         np.int64, np.uint64, np.bool_]
raw, typed = [], []
for i, t in enumerate(types):
    a = (rng.standard_normal((2, 3)) * 50).astype(t)
    raw.append(numpy_helper.from_array(a, f"raw{i}"))
    dt = helper.np_dtype_to_tensor_dtype(a.dtype)
    vals = a.flatten().tolist()  # make_tensor stores float16 as bit patterns in int32_data itself
    typed.append(helper.make_tensor(f"typed{i}", dt, a.shape, vals))
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
save("raw_types.onnx", helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "raw", [x], [y], raw))
save("typed_types.onnx", helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "typed", [x], [y], typed))

consts = [helper.make_node("Constant", [], ["c0"], value=numpy_helper.from_array(np.arange(4, dtype=np.float32))),
          helper.make_node("Constant", [], ["c1"], value_float=1.5),
          helper.make_node("Constant", [], ["c2"], value_floats=[1.0, 2.0]),
          helper.make_node("Constant", [], ["c3"], value_int=7),
          helper.make_node("Constant", [], ["c4"], value_ints=[1, -2, 3]),
          helper.make_node("Constant", [], ["c5"], value_string="s")]
branch = lambda name: helper.make_graph(
    [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "w"))],
    name, [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])])
cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
out_v = helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])
if_node = helper.make_node("If", ["cond"], ["out"], name="if0", then_branch=branch("then"), else_branch=branch("else"))
save("constants_if.onnx", helper.make_graph(consts + [if_node], "g", [cond], [out_v]))
