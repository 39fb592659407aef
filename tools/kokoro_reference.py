#!/usr/bin/env python3
"""Kokoro-82M v1.0 int8 reference tensors from ONNX Runtime, for tests/unit/kokoro_test.cpp.

Runs models/kokoro/kokoro-v1.0.int8.onnx with ONNX Runtime's CPU build (bitwise repeatable across threads and
graph optimisation levels), with the stage boundaries below added as graph outputs, and writes them with the
inputs to tests/data/kokoro/reference.safetensors (float32, and int64 for tokens / durations). Tensors too large
to commit are cut to their first KEEP_COLUMNS time steps (marked in the name list below); a stage's input is
always stored whole, so each stage can be run teacher-forced from ONNX Runtime's own input.

  pip install onnxruntime onnx numpy        (tools only; never in the product or CI's hot path)
  python3 tools/kokoro_reference.py [--phonemes P] [--voice af_heart] [--list-stages]

Also: --list-stages prints every node by stage (the module path in the node names), which is how the
architecture comment in src/models/tts/kokoro.h was read off the file.
"""
import argparse, collections, json, os, re, struct, sys

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
MODEL = os.path.join(ROOT, 'models/kokoro/kokoro-v1.0.int8.onnx')
VOICES = os.path.join(ROOT, 'models/kokoro/voices')
OUT = os.path.join(ROOT, 'tests/data/kokoro/reference.safetensors')

# Kokoro v1.0's phoneme -> id table (the model's config.json "vocab"; the same table is in
# src/models/tts/kokoro_vocab.cpp).
VOCAB = {';': 1, ':': 2, ',': 3, '.': 4, '!': 5, '?': 6, '—': 9, '…': 10, '"': 11, '(': 12, ')': 13, '“': 14,
         '”': 15, ' ': 16, '̃': 17, 'ʣ': 18, 'ʥ': 19, 'ʦ': 20, 'ʨ': 21, 'ᵝ': 22, 'ꭧ': 23, 'A': 24, 'I': 25,
         'O': 31, 'Q': 33, 'S': 35, 'T': 36, 'W': 39, 'Y': 41, 'ᵊ': 42, 'a': 43, 'b': 44, 'c': 45, 'd': 46,
         'e': 47, 'f': 48, 'h': 50, 'i': 51, 'j': 52, 'k': 53, 'l': 54, 'm': 55, 'n': 56, 'o': 57, 'p': 58,
         'q': 59, 'r': 60, 's': 61, 't': 62, 'u': 63, 'v': 64, 'w': 65, 'x': 66, 'y': 67, 'z': 68, 'ɑ': 69,
         'ɐ': 70, 'ɒ': 71, 'æ': 72, 'β': 75, 'ɔ': 76, 'ɕ': 77, 'ç': 78, 'ɖ': 80, 'ð': 81, 'ʤ': 82, 'ə': 83,
         'ɚ': 85, 'ɛ': 86, 'ɜ': 87, 'ɟ': 90, 'ɡ': 92, 'ɥ': 99, 'ɨ': 101, 'ɪ': 102, 'ʝ': 103, 'ɯ': 110,
         'ɰ': 111, 'ŋ': 112, 'ɳ': 113, 'ɲ': 114, 'ɴ': 115, 'ø': 116, 'ɸ': 118, 'θ': 119, 'œ': 120, 'ɹ': 123,
         'ɾ': 125, 'ɻ': 126, 'ʁ': 128, 'ɽ': 129, 'ʂ': 130, 'ʃ': 131, 'ʈ': 132, 'ʧ': 133, 'ʊ': 135, 'ʋ': 136,
         'ʌ': 138, 'ɣ': 139, 'ɤ': 140, 'χ': 142, 'ʎ': 143, 'ʒ': 147, 'ʔ': 148, 'ˈ': 156, 'ˌ': 157, 'ː': 158,
         'ʰ': 162, 'ʲ': 164, '↓': 169, '→': 171, '↗': 172, '↘': 173, 'ᵻ': 177}

# (our name, the file's tensor, keep whole?) in graph order. Shapes are ONNX Runtime's (batch 1 first).
BERT_PASS = '/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/full_layer_layer_norm{}/LayerNormalization_output_0'
STAGES = [
    ('albert_pass0', BERT_PASS.format(''), True),                             # [1, n+2, 768] after pass 1 of 12
    ('albert_pass1', BERT_PASS.format('_1'), True),
    ('albert_pass10', BERT_PASS.format('_10'), True),
    ('bert', '/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/full_layer_layer_norm_11/'
             'LayerNormalization_output_0', True),                            # [1, n+2, 768]
    ('d_en', '/encoder/bert_encoder/Add_output_0', True),                    # [1, n+2, 512]
    ('d', '/encoder/predictor/text_encoder/Concat_4_output_0', True),        # [1, n+2, 640] (after 3 BiLSTM+AdaLN)
    ('dur_logits', '/encoder/predictor/duration_proj/linear_layer/Add_output_0', True),  # [1, n+2, 50]
    ('dur_sum', '/encoder/predictor/ReduceSum_output_0', True),              # [1, n+2]: sum of sigmoids
    ('durations', '/encoder/Clip_output_0', True),                           # [1, n+2] frames per phoneme
    ('f0', '/encoder/F0_proj/Conv_output_0', True),                          # [1, 1, 2 frames]
    ('noise', '/encoder/N_proj/Conv_output_0', True),                        # [1, 1, 2 frames]
    ('t_en', '/encoder/text_encoder/Transpose_2_output_0', True),           # [1, 512, n+2]
    ('asr', '/encoder/MatMul_1_output_0', True),                             # [1, 512, frames]
    ('dec_decode3', '/decoder/decoder/decode.3/Div_4_output_0', True),       # [1, 512, 2 frames]
    ('har_source', '/decoder/decoder/generator/m_source/l_tanh/Tanh_output_0', False),  # [1, samples, 1]
    ('har', '/decoder/decoder/generator/Concat_3_output_0', True),           # [1, 22, stft frames]
    ('gen_stage0', '/decoder/decoder/generator/Div_2_output_0', False),      # [1, 256, 20 frames]
    ('gen_stage1', '/decoder/decoder/generator/Div_4_output_0', False),      # [1, 128, 120 frames + 1]
    ('conv_post', '/decoder/decoder/generator/conv_post/Conv_output_0', False),  # [1, 22, 120 frames + 1]
    ('audio', 'audio', True),                                                # [samples]
]
KEEP_COLUMNS = 200
KEEP_SAMPLES = 12000


def list_stages(model):
    groups = collections.OrderedDict()
    for n in model.graph.node:
        parts = n.name.strip('/').split('/')
        key = '/'.join(parts[:3]) if n.name.startswith('/') else '(quantization of ' + parts[0].rsplit('.', 2)[0] + ')'
        groups.setdefault(key, collections.Counter())[n.op_type] += 1
    for key, ops in groups.items():
        print(f'{sum(ops.values()):5d}  {key}  ' + ', '.join(f'{op} {c}' for op, c in ops.most_common()))


def write_names(model, path):
    """The int8 weights' tensor names per module, read off the graph's MatMulInteger / ConvInteger /
    DynamicQuantizeLSTM nodes: the quantizer shares zero-point tensors between layers and names the folded
    weight-norm convs after their Mul node, so names cannot be derived from the module path alone."""
    inits = {t.name for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers = collections.defaultdict(list)
    for n in model.graph.node:
        for i in n.input:
            consumers[i].append(n)

    def upstream_bias(name, depth=0):
        if name in inits:
            return name if name.endswith('bias') else None
        n = producer.get(name)
        if n is None or depth > 6:
            return None
        for i in n.input:
            found = upstream_bias(i, depth + 1)
            if found:
                return found
        return None

    def float_bias(output):
        # int accumulator -> (bias add) -> cast -> scale mul -> (float bias add / FastGelu)
        frontier, seen = [output], set()
        for _ in range(5):
            nxt = []
            for t in frontier:
                for c in consumers[t]:
                    if c.name in seen:
                        continue
                    seen.add(c.name)
                    others = [i for i in c.input if i != t and i]
                    if c.op_type in ('Add', 'FastGelu'):
                        for i in others:
                            b = upstream_bias(i)
                            if b:
                                return b
                    if c.op_type in ('Add', 'Cast', 'Mul'):
                        nxt.extend(c.output)
            frontier = nxt
        return ''

    rows = []
    for n in model.graph.node:
        if n.op_type not in ('MatMulInteger', 'ConvInteger', 'DynamicQuantizeLSTM'):
            continue
        parts = n.name.strip('/').split('/')[:-1]
        if any(re.search(r'_\d+$', p) for p in parts):
            continue  # ALBERT's 11 later passes reuse the first pass's weights
        module = '/'.join(parts)
        if n.op_type == 'DynamicQuantizeLSTM':
            w, r, b = n.input[1], n.input[2], n.input[3]
            rows.append((module, w, n.input[8], n.input[9], b))
            rows.append((module + '#recurrent', r, n.input[10], n.input[11], ''))
            continue
        w, wzp = n.input[1], n.input[3]
        scale = w.replace('_quantized', '_scale')
        assert w in inits and wzp in inits and scale in inits, n.name
        if n.op_type == 'ConvInteger':
            # the quantized bias joins the int32 accumulator directly; a conv without bias goes to a Cast
            adds = [c for c in consumers[n.output[0]] if c.op_type == 'Add']
            bias = upstream_bias([i for i in adds[0].input if i != n.output[0]][0]) if adds else ''
        else:
            bias = float_bias(n.output[0])
        rows.append((module, w, scale, wzp, bias or ''))
    with open(path, 'w') as f:
        f.write('// Generated by tools/kokoro_reference.py --names from kokoro-v1.0.int8.onnx: per int8 module, its\n'
                '// {module, weight, scale, zero point, float bias} tensor names (bias "" when none).\n')
        for row in rows:
            f.write('{' + ', '.join('"' + x + '"' for x in row) + '},\n')
    print(f'wrote {path} ({len(rows)} modules)')


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = {np.float32: 'F32', np.int64: 'I64'}[array.dtype.type]
        data = array.tobytes()
        header[name] = {'dtype': dtype, 'shape': list(array.shape), 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--phonemes', default='ðə kˈæt sˈæt.')
    ap.add_argument('--voice', default='af_heart')
    ap.add_argument('--speed', type=float, default=1.0)
    ap.add_argument('--out', default=OUT)
    ap.add_argument('--list-stages', action='store_true')
    ap.add_argument('--names', action='store_true', help='write src/models/tts/kokoro_names.inc')
    args = ap.parse_args()

    model = onnx.load(MODEL)
    if args.list_stages:
        list_stages(model)
        return
    if args.names:
        write_names(model, os.path.join(ROOT, 'src/models/tts/kokoro_names.inc'))
        return
    ids = [VOCAB[c] for c in args.phonemes]
    tokens = np.array([[0] + ids + [0]], dtype=np.int64)
    voice = np.fromfile(os.path.join(VOICES, args.voice + '.bin'), dtype=np.float32).reshape(510, 256)
    style = voice[len(ids)][None]  # row n = the number of phoneme ids (kokoro-js, kokoro-onnx)
    speed = np.array([args.speed], dtype=np.float32)

    known = {o for n in model.graph.node for o in n.output}
    for _, tensor, _ in STAGES:
        if tensor != 'audio':
            assert tensor in known, tensor
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), so, providers=['CPUExecutionProvider'])
    names = [t for _, t, _ in STAGES]
    outputs = session.run(names, {'tokens': tokens, 'style': style, 'speed': speed})

    tensors = {'tokens': tokens, 'style': style, 'speed': speed}
    for (ours, _, whole), value in zip(STAGES, outputs):
        value = np.asarray(value)
        if value.dtype != np.int64:
            value = value.astype(np.float32)
        if ours == 'har_source':
            value = value[0, :KEEP_SAMPLES, 0]  # [samples] (the file's [1, samples, 1])
        elif not whole and value.shape[-1] > KEEP_COLUMNS:
            value = value[..., :KEEP_COLUMNS]
        tensors[ours] = value
        print(f'{ours:12s} {str(list(value.shape)):18s} {value.dtype}  |max| {np.abs(value).max():.4g}')
    print('durations', tensors['durations'].ravel().tolist(), 'frames', int(tensors['durations'].sum()),
          'samples', tensors['audio'].size, f'({tensors["audio"].size / 24000:.3f} s)')
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_safetensors(args.out, tensors)
    print(f'wrote {args.out} ({os.path.getsize(args.out)} bytes)')


if __name__ == '__main__':
    main()
