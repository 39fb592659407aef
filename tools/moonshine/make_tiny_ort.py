"""Writes tiny .ort files with ONNX Runtime's own converter, as seeds for tests/fuzz/fuzz_ort.cpp and fixtures
for tests/unit/ort_test.cpp: a weight-only int8 MatMul (Cast -> Mul -> Add, Moonshine's pattern) and an If node
whose branches hold their own initializers (the merged decoder's pattern).

  python3 tools/moonshine/make_tiny_ort.py tests/fuzz/corpus/ort
"""
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def int8_matmul_model():
    q = numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), 'w_quantized')
    scale = numpy_helper.from_array(np.array([0.5], np.float32), 'w_scale')
    offset = numpy_helper.from_array(np.array([0.25], np.float32), 'w_zero_point')
    nodes = [
        helper.make_node('Cast', ['w_quantized'], ['w_cast'], to=TensorProto.FLOAT),
        helper.make_node('Mul', ['w_cast', 'w_scale'], ['w_mul']),
        helper.make_node('Add', ['w_mul', 'w_zero_point'], ['w_add']),
        helper.make_node('MatMul', ['x', 'w_add'], ['y'], name='/proj/MatMul'),
    ]
    g = helper.make_graph(nodes, 'int8_matmul', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2, 4])], [q, scale, offset])
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])


def if_model():
    def branch(name, value):
        c = numpy_helper.from_array(np.full([2], value, np.float32), f'{name}_bias')
        n = helper.make_node('Add', ['x', f'{name}_bias'], [f'{name}_out'])
        return helper.make_graph([n], name, [], [helper.make_tensor_value_info(f'{name}_out', TensorProto.FLOAT, [2])],
                                 [c])
    nodes = [helper.make_node('If', ['cond'], ['y'], name='optimum::if', then_branch=branch('then', 1.0),
                              else_branch=branch('else', -1.0))]
    g = helper.make_graph(nodes, 'if', [helper.make_tensor_value_info('cond', TensorProto.BOOL, [1]),
                                        helper.make_tensor_value_info('x', TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])


def main():
    out_dir = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in [('int8_matmul', int8_matmul_model()), ('if_branches', if_model())]:
            path = os.path.join(tmp, f'{name}.onnx')
            onnx.save(model, path)
            # Saved by a session with every optimisation off, so the dequantization chain stays in the graph
            # as the exporters wrote it (the converter script would fold it into one float initializer).
            ort_path = os.path.join(tmp, f'{name}.ort')
            o = ort.SessionOptions()
            o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            o.optimized_model_filepath = ort_path
            o.add_session_config_entry('session.save_model_format', 'ORT')
            ort.InferenceSession(path, o)
            data = open(ort_path, 'rb').read()
            open(os.path.join(out_dir, f'{name}.ort'), 'wb').write(data)
            print(name, len(data), 'bytes')


main()
