"""Turns the Moonshine package's ONNX Runtime files into the layout users download from the hub: the same graphs as
plain ONNX (encoder_model.onnx, decoder_model_merged.onnx) and the tokenizer as a Hugging Face tokenizer.json.
The graphs are rebuilt node for node from the .ort flatbuffers (through the Python bindings ONNX Runtime's package
ships): every node with its attributes and subgraphs, every initializer's bytes, the inputs' and outputs' types.
--check then runs both forms with ONNX Runtime on the same inputs and requires identical outputs, so the
.onnx files are the .ort models, not an approximation of them. tokenizer.json is a byte-fallback BPE as
transformers writes Llama-style SentencePiece tokenizers: vocab {piece: id} with "<0xHH>" for the byte pieces
(ids 3..258) and U+2581 for the word boundary, merges of the pieces whose halves are pieces too.

  python3 tools/moonshine/ort_to_onnx.py models/moonshine-base-en OUT_DIR [--check]

Needs onnx and onnxruntime (pip). Not used by the product: tests read what it writes (tests/unit/moonshine_test.cpp,
scripts/test.sh makes build/moonshine-onnx with it).
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import helper
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py import fbs
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import (DimensionValueType, TensorTypeAndShape,
                                                                       TypeInfoValue)


def s(b):
    return b.decode() if b is not None else ''


def tensor(t):
    proto = onnx.TensorProto()
    proto.name = s(t.Name())
    proto.dims.extend(t.Dims(i) for i in range(t.DimsLength()))
    proto.data_type = t.DataType()
    if t.ExternalDataOffset() >= 0:
        raise SystemExit(f'{proto.name}: data outside the .ort file is not handled')
    if t.StringDataLength():
        proto.string_data.extend(t.StringData(i) for i in range(t.StringDataLength()))
    elif not t.RawDataIsNone():
        proto.raw_data = t.RawDataAsNumpy().tobytes()
    return proto


def value_info(v):
    info = onnx.ValueInfoProto()
    info.name = s(v.Name())
    ti = v.Type()
    if ti is None or ti.ValueType() != TypeInfoValue.TypeInfoValue.tensor_type:
        return info
    tab = ti.Value()
    tt = TensorTypeAndShape.TensorTypeAndShape()
    tt.Init(tab.Bytes, tab.Pos)
    info.type.tensor_type.elem_type = tt.ElemType()
    shape = tt.Shape()
    if shape is not None:
        info.type.tensor_type.shape.SetInParent()
        for i in range(shape.DimLength()):
            dim = info.type.tensor_type.shape.dim.add()
            dv = shape.Dim(i).Value()
            if dv is None:
                continue
            if dv.DimType() == DimensionValueType.DimensionValueType.VALUE:
                dim.dim_value = dv.DimValue()
            elif dv.DimType() == DimensionValueType.DimensionValueType.PARAM:
                dim.dim_param = s(dv.DimParam())
    return info


def attribute(a):
    name, ty = s(a.Name()), a.Type()
    if ty == 1: return helper.make_attribute(name, a.F())
    if ty == 2: return helper.make_attribute(name, a.I())
    if ty == 3: return helper.make_attribute(name, a.S())
    if ty == 4: return helper.make_attribute(name, tensor(a.T()))
    if ty == 5: return helper.make_attribute(name, graph(a.G(), name))
    if ty == 6: return helper.make_attribute(name, [a.Floats(i) for i in range(a.FloatsLength())], attr_type=6)
    if ty == 7: return helper.make_attribute(name, [a.Ints(i) for i in range(a.IntsLength())], attr_type=7)
    if ty == 8: return helper.make_attribute(name, [a.Strings(i) for i in range(a.StringsLength())], attr_type=8)
    if ty == 9: return helper.make_attribute(name, [tensor(a.Tensors(i)) for i in range(a.TensorsLength())])
    if ty == 10: return helper.make_attribute(name, [graph(a.Graphs(i), name) for i in range(a.GraphsLength())])
    raise SystemExit(f'attribute {name}: type {ty} is not handled')


def graph(g, name):
    args = {s(g.NodeArgs(i).Name()): g.NodeArgs(i) for i in range(g.NodeArgsLength())}
    nodes = []
    for i in range(g.NodesLength()):
        n = g.Nodes(i)
        node = helper.make_node(s(n.OpType()), [s(n.Inputs(j)) for j in range(n.InputsLength())],
                                [s(n.Outputs(j)) for j in range(n.OutputsLength())], name=s(n.Name()),
                                domain=s(n.Domain()) or None)
        node.attribute.extend(attribute(n.Attributes(j)) for j in range(n.AttributesLength()))
        nodes.append(node)
    inits = [tensor(g.Initializers(i)) for i in range(g.InitializersLength())]
    if g.SparseInitializersLength():
        raise SystemExit('sparse initializers are not handled')
    io = lambda names: [value_info(args[n]) if n in args else onnx.ValueInfoProto(name=n) for n in names]
    inputs = io(s(g.Inputs(i)) for i in range(g.InputsLength()))
    outputs = io(s(g.Outputs(i)) for i in range(g.OutputsLength()))
    return helper.make_graph(nodes, name, inputs, outputs, inits)


def ort_to_onnx(path):
    buf = open(path, 'rb').read()
    m = fbs.InferenceSession.InferenceSession.GetRootAs(buf, 0).Model()
    opsets = [helper.make_opsetid(s(m.OpsetImport(i).Domain()), m.OpsetImport(i).Version())
              for i in range(m.OpsetImportLength())]
    model = helper.make_model(graph(m.Graph(), os.path.basename(path).split('.')[0]), opset_imports=opsets,
                              producer_name=s(m.ProducerName()), producer_version=s(m.ProducerVersion()))
    model.ir_version = m.IrVersion()
    return model


def pieces_of(tokenizer_bin):
    b = open(tokenizer_bin, 'rb').read()
    out, i = [], 0
    while i < len(b):
        out.append(b[i + 1:i + 1 + b[i]])
        i += 1 + b[i]
    return out


def tokenizer_json(tokenizer_bin):
    raw = pieces_of(tokenizer_bin)
    pieces = [p.decode() if i < 3 or i > 258 else f'<0x{p[0]:02X}>' for i, p in enumerate(raw)]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i, p in enumerate(pieces[259:], 259):
        for k in range(1, len(p)):
            if p[:k] in vocab and p[k:] in vocab:
                merges.append((i, vocab[p[:k]], vocab[p[k:]], p[:k], p[k:]))
    merges.sort()
    special = lambda i, p: {'id': i, 'content': p, 'single_word': False, 'lstrip': False, 'rstrip': False,
                            'normalized': False, 'special': True}
    return {
        'version': '1.0', 'truncation': None, 'padding': None,
        'added_tokens': [special(i, pieces[i]) for i in range(3)],
        'normalizer': {'type': 'Sequence', 'normalizers': [
            {'type': 'Prepend', 'prepend': '\u2581'}, {'type': 'Replace', 'pattern': {'String': ' '},
                                                       'content': '\u2581'}]},
        'pre_tokenizer': None,
        'post_processor': {'type': 'TemplateProcessing', 'single': [
            {'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}}],
            'pair': [{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}},
                     {'SpecialToken': {'id': '<s>', 'type_id': 1}}, {'Sequence': {'id': 'B', 'type_id': 1}}],
            'special_tokens': {'<s>': {'id': '<s>', 'ids': [1], 'tokens': ['<s>']}}},
        'decoder': {'type': 'Sequence', 'decoders': [
            {'type': 'Replace', 'pattern': {'String': '\u2581'}, 'content': ' '}, {'type': 'ByteFallback'},
            {'type': 'Fuse'}, {'type': 'Strip', 'content': ' ', 'start': 1, 'stop': 0}]},
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': '<unk>', 'continuing_subword_prefix': None,
                  'end_of_word_suffix': None, 'fuse_unk': True, 'byte_fallback': True, 'ignore_merges': False,
                  'vocab': vocab, 'merges': [[a, b] for _, _, _, a, b in merges]},
    }


def check(src, out):
    import onnxruntime as ort
    # Optimizations off for both: ONNX Runtime fuses and folds a .onnx graph at load (changing the float
    # rounding) but runs a .ort one as saved.
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = lambda path: ort.InferenceSession(path, opts, providers=['CPUExecutionProvider'])
    rng = np.random.default_rng(7)
    audio = (rng.standard_normal((1, 16000 * 3)) * 0.1).astype(np.float32)
    run = lambda d, name, feeds: session(os.path.join(d, name)).run(None, feeds)
    a = run(src, 'encoder_model.ort', {'input_values': audio})
    b = run(out, 'encoder_model.onnx', {'input_values': audio})
    assert all(np.array_equal(x, y) for x, y in zip(a, b)), 'encoder outputs differ'
    sess = session(os.path.join(src, 'decoder_model_merged.ort'))
    feeds = {}
    for i in sess.get_inputs():
        if i.name == 'input_ids': feeds[i.name] = np.array([[1, 2, 3]], np.int64)
        elif i.name == 'encoder_hidden_states': feeds[i.name] = a[0]
        elif i.name == 'use_cache_branch': feeds[i.name] = np.array([False])
        else: feeds[i.name] = np.zeros([1, 8, 0, 52], np.float32)
    c = sess.run(None, feeds)
    d = run(out, 'decoder_model_merged.onnx', feeds)
    assert all(np.array_equal(x, y) for x, y in zip(c, d)), 'decoder outputs differ'
    # A second step through the If's other branch, the caches from the first.
    present = {o.name: v for o, v in zip(sess.get_outputs(), c)}
    for name in feeds:
        if name.startswith('past_key_values.'): feeds[name] = present[name.replace('past_key_values.', 'present.')]
    feeds['input_ids'], feeds['use_cache_branch'] = np.array([[4]], np.int64), np.array([True])
    c, d = sess.run(None, feeds), run(out, 'decoder_model_merged.onnx', feeds)
    assert all(np.array_equal(x, y) for x, y in zip(c, d)), 'decoder outputs differ (cached step)'
    # tokenizer.json read back by Hugging Face's tokenizers: every id decodes to what tokenizer.bin says.
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(out, 'tokenizer.json'))
    raw = pieces_of(os.path.join(src, 'tokenizer.bin'))
    for i in range(259, len(raw)):
        want = raw[i].decode().replace('\u2581', ' ')
        got = tok.decode([5, i], skip_special_tokens=True)  # after a piece: no leading space stripped
        assert got == tok.decode([5]) + want, f'id {i}: {got!r}'
    text = 'Ever tried. Ever failed. No matter.'
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=True) == text
    print(f'check: encoder ({a[0].shape}) and decoder ({len(c)} outputs) identical from .ort and .onnx')


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in ['encoder_model', 'decoder_model_merged']:
        model = ort_to_onnx(os.path.join(src, name + '.ort'))
        onnx.save(model, os.path.join(out, name + '.onnx'))
    with open(os.path.join(out, 'tokenizer.json'), 'w', encoding='utf-8') as f:
        json.dump(tokenizer_json(os.path.join(src, 'tokenizer.bin')), f, ensure_ascii=False)
    print(f'wrote {out}/encoder_model.onnx, decoder_model_merged.onnx, tokenizer.json')
    if '--check' in sys.argv:
        check(src, out)


main()
