"""Prints an ONNX Runtime .ort file's graph (nodes with inputs, outputs and attributes; initializers with shape,
dtype and, for scalars, the value), through the Python flatbuffer bindings ONNX Runtime's package ships. A
study tool for writing models against nn/ops.h; not used by the product.

  python3 tools/moonshine/ort_dump.py models/moonshine-base-en/encoder_model.ort [--values]
"""
import sys

import numpy as np
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py import fbs

DT = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16}


def tensor_value(t):
    raw = t.RawDataAsNumpy() if not t.RawDataIsNone() else np.zeros(0, np.uint8)
    dims = [t.Dims(i) for i in range(t.DimsLength())]
    dt = DT.get(t.DataType())
    if dt is None or t.ExternalDataOffset() >= 0 and raw.size == 0:
        return dims, None
    return dims, np.frombuffer(raw.tobytes(), dt).reshape(dims)


def attr_str(a):
    ty = a.Type()
    if ty == 1: return f'{a.F()}'
    if ty == 2: return f'{a.I()}'
    if ty == 3: return repr(a.S().decode())
    if ty == 6: return str([a.Floats(i) for i in range(a.FloatsLength())])
    if ty == 7: return str([a.Ints(i) for i in range(a.IntsLength())])
    if ty == 4:
        dims, v = tensor_value(a.T())
        return f'tensor{dims}={v.flatten()[:8].tolist() if v is not None else "?"}'
    if ty == 5: return '<graph>'
    return f'<type {ty}>'


def dump_graph(g, indent, values):
    pad = ' ' * indent
    inits = {}
    for i in range(g.InitializersLength()):
        t = g.Initializers(i)
        dims, v = tensor_value(t)
        name = t.Name().decode()
        inits[name] = (dims, t.DataType(), v)
    for name, (dims, dt, v) in inits.items():
        extra = ''
        if v is not None and (v.size <= 8 or values):
            extra = ' = ' + str(v.flatten()[:8].tolist())
        print(f'{pad}init {name} {dims} dt{dt}{extra}')
    print(f'{pad}inputs', [g.Inputs(i).decode() for i in range(g.InputsLength())])
    print(f'{pad}outputs', [g.Outputs(i).decode() for i in range(g.OutputsLength())])
    for i in range(g.NodesLength()):
        n = g.Nodes(i)
        ins = [n.Inputs(j).decode() for j in range(n.InputsLength())]
        outs = [n.Outputs(j).decode() for j in range(n.OutputsLength())]
        attrs = []
        subgraphs = []
        for j in range(n.AttributesLength()):
            a = n.Attributes(j)
            if a.Type() == 5:
                subgraphs.append((a.Name().decode(), a.G()))
            attrs.append(f'{a.Name().decode()}={attr_str(a)}')
        dom = n.Domain().decode() if n.Domain() else ''
        print(f'{pad}{n.OpType().decode()}{"(" + dom + ")" if dom else ""} {ins} -> {outs} {" ".join(attrs)}')
        for name, sg in subgraphs:
            print(f'{pad}  subgraph {name}:')
            dump_graph(sg, indent + 4, values)


def main():
    buf = open(sys.argv[1], 'rb').read()
    s = fbs.InferenceSession.InferenceSession.GetRootAs(buf, 0)
    m = s.Model()
    print('ort_version', s.OrtVersion(), 'ir', m.IrVersion(), 'producer', m.ProducerName())
    dump_graph(m.Graph(), 0, '--values' in sys.argv)


main()
