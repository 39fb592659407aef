#!/usr/bin/env python3
"""ONNX export of a Parakeet TDT directory (transformers' ParakeetForTDT layout: config.json + model.safetensors),
written straight from the weights with numpy and the `onnx` package (no torch), in the two-graph form NeMo's
export gives and parakeet.js / sherpa-onnx / onnx-asr run:

  OUT/encoder.onnx        audio_signal [1, 128, T] float32 (normalised log-mel, channels-major), length [1] int64
                          -> outputs [1, d_model, T'] float32, encoded_lengths [1] int64
  OUT/decoder_joint.onnx  encoder_outputs [1, d_model, 1] float32, targets [1, 1] int32, target_length [1] int32,
                          input_states_1 / input_states_2 [layers, 1, H] float32 (LSTM h and c)
                          -> outputs [1, 1, 1, V + 1 + durations] float32 (token logits, then duration logits),
                             prediction_lengths [1] int32, output_states_1 / output_states_2
  (.onnx.data beside each: the weights as external data, so models past protobuf's 2 GB limit load)

The graphs are NeMo's operations: subsampling convs (Conv, the depthwise ones grouped), then per block
LayerNormalization, MatMul against the transposed weights, SiLU as x * sigmoid(x), Transformer-XL relative
attention with the sinusoids computed in the graph from T and NeMo's rel_shift (pad, reshape, slice), the conv
module's depthwise Conv with BatchNormalization after it (ONNX Runtime folds it), and in decoder_joint an
embedding Gather, one ONNX LSTM per layer (torch's gate order i f g o reordered to ONNX's i o f c) and the joint.
Batch of one, every frame valid (no masks: the benchmarks and checks feed one clip at a time). The decoder_joint
graph runs the prediction net on every call, as those runners call it once per greedy step.

  python3 tools/parakeet_export_onnx.py tests/data/parakeet/tdt_ci /tmp/parakeet_ci_onnx
  python3 tools/parakeet_random_weights.py --size v2 --out models/parakeet_v2_random
  python3 tools/parakeet_export_onnx.py models/parakeet_v2_random models/parakeet_v2_random/onnx

Checked by tests/web/parakeet_onnx.test.mjs (the CI model's export against transformers' reference encoder output
and tokens, through onnxruntime-node) and by bench/parakeet.mjs (against sotto on the benchmark models).
"""
import argparse, json, os, struct, sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    sys.exit("parakeet_export_onnx: needs the 'onnx' package (pip install onnx)")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        if name.endswith("num_batches_tracked"):  # batch norm's training counter
            continue
        if v["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} is {v['dtype']} (float32 expected)")
        a, b = v["data_offsets"]
        out[name] = data[a:b].view(np.float32).reshape(v["shape"])
    return out


class Graph:
    """Nodes and initializers of one graph; initializers over 1 KB go to OUT.data as external data."""

    def __init__(self, path):
        self.path, self.nodes, self.inits, self.count = path, [], [], 0
        self.data_name = os.path.basename(path) + ".data"
        self.data = open(path + ".data", "wb")

    def name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint, array):
        array = np.asarray(array, order="C")  # (ascontiguousarray would make scalars 1-d)
        dtype = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}[array.dtype.type]
        name = self.name(hint)
        if array.nbytes <= 1024:
            self.inits.append(helper.make_tensor(name, dtype, array.shape, array.flatten().tolist()))
            return name
        t = TensorProto(name=name, data_type=dtype, dims=list(array.shape))
        offset = self.data.tell()
        pad = (-offset) % 64  # aligned, so runtimes can map the file in place
        self.data.write(b"\0" * pad)
        offset += pad
        self.data.write(array.tobytes())
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.data_name), ("offset", str(offset)), ("length", str(array.nbytes))):
            t.external_data.add(key=k, value=v)
        self.inits.append(t)
        return name

    def i64(self, *values):
        return self.const("c", np.array(values, np.int64))

    def op(self, op_type, inputs, hint=None, n_out=1, **attrs):
        outs = [self.name(hint or op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def save(self, inputs, outputs, doc):
        self.data.close()
        graph = helper.make_graph(self.nodes, os.path.basename(self.path), inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="sotto",
                                  doc_string=doc)
        model.ir_version = 8
        onnx.save_model(model, self.path)
        onnx.checker.check_model(self.path)


def linear(g, x, w, b=None, hint="linear"):
    """x @ w.T (+ b): torch's Linear as its exporter writes it (MatMul against the transposed weight)."""
    y = g.op("MatMul", [x, g.const(hint + "_wT", np.asarray(w).T)], hint)
    return g.op("Add", [y, g.const(hint + "_b", b)], hint) if b is not None else y


def silu(g, x):
    return g.op("Mul", [x, g.op("Sigmoid", [x])], "silu")


def export_encoder(w, cfg, path, break_rel_shift=False):
    e = cfg["encoder_config"]
    D, H = e["hidden_size"], e["num_attention_heads"]
    dh = D // H
    L, C = e["num_hidden_layers"], e["subsampling_conv_channels"]
    n_convs = int(np.log2(e["subsampling_factor"]))
    g = Graph(path)
    x = g.op("Transpose", ["audio_signal"], perm=[0, 2, 1])  # [1, T, 128]
    x = g.op("Unsqueeze", [x, g.i64(1)])  # [1, 1, T, 128]: conv2d's H is time, W frequency
    s = "encoder.subsampling."
    conv = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = g.op("Relu", [g.op("Conv", [x, g.const("sub0_w", w[s + "layers.0.weight"]), g.const("sub0_b", w[s + "layers.0.bias"])], **conv)])
    for i in range(1, n_convs):
        dw, pw = f"{s}layers.{3 * i - 1}.", f"{s}layers.{3 * i}."
        x = g.op("Conv", [x, g.const("subdw_w", w[dw + "weight"]), g.const("subdw_b", w[dw + "bias"])], group=C, **conv)
        x = g.op("Relu", [g.op("Conv", [x, g.const("subpw_w", w[pw + "weight"]), g.const("subpw_b", w[pw + "bias"])],
                               kernel_shape=[1, 1])])
    # [1, C, T', F'] -> [1, T', C * F'] (channel-major within a frame)
    x = g.op("Transpose", [x], perm=[0, 2, 1, 3])
    x = g.op("Reshape", [x, g.i64(1, -1, C * w[s + "linear.weight"].shape[1] // C)])
    x = linear(g, x, w[s + "linear.weight"], w[s + "linear.bias"], "sub_linear")
    if e.get("scale_input"):
        x = g.op("Mul", [x, g.const("xscale", np.array(np.sqrt(D), np.float32))])

    # Relative positions T'-1 .. -(T'-1): [2T'-1, D], sin and cos interleaved (angle = position * inv_freq).
    t = g.op("Gather", [g.op("Shape", [x]), g.const("one", np.array(1, np.int64))], axis=0)  # T' (scalar int64)
    start = g.op("Sub", [t, g.const("one", np.array(1, np.int64))])
    stop = g.op("Neg", [t])
    if break_rel_shift:  # positions j - i in place of i - j (for the test that shows the check catches it)
        start, stop, step = g.op("Neg", [start]), t, g.const("step", np.array(1, np.int64))
    else:
        step = g.const("step", np.array(-1, np.int64))
    positions = g.op("Cast", [g.op("Range", [start, stop, step])], to=TensorProto.FLOAT)
    inv_freq = (1.0 / np.power(10000.0, np.arange(0, D, 2, dtype=np.float64) / D)).astype(np.float32)
    angle = g.op("Mul", [g.op("Unsqueeze", [positions, g.i64(1)]), g.const("inv_freq", inv_freq[None, :])])  # [P, D/2]
    sc = g.op("Concat", [g.op("Unsqueeze", [g.op("Sin", [angle]), g.i64(2)]),
                         g.op("Unsqueeze", [g.op("Cos", [angle]), g.i64(2)])], axis=2)  # [P, D/2, 2]
    pos = g.op("Reshape", [sc, g.i64(1, -1, D)], "pos_emb")  # [1, P, D]
    t1 = g.op("Unsqueeze", [t, g.i64(0)])  # [1]

    def heads(y):  # [1, N, D] -> [1, H, N, dh]
        return g.op("Transpose", [g.op("Reshape", [y, g.i64(1, -1, H, dh)])], perm=[0, 2, 1, 3])

    def ln(y, name):
        return g.op("LayerNormalization", [y, g.const("ln_w", w[name + ".weight"]), g.const("ln_b", w[name + ".bias"])],
                    axis=-1, epsilon=1e-5)

    def bias_of(name):
        return w.get(name)

    def ff(y, p):
        y = silu(g, linear(g, y, w[p + ".linear1.weight"], bias_of(p + ".linear1.bias"), "ff1"))
        return linear(g, y, w[p + ".linear2.weight"], bias_of(p + ".linear2.bias"), "ff2")

    half = g.const("half", np.array(0.5, np.float32))
    scale = g.const("scale", np.array(1.0 / np.sqrt(dh), np.float32))
    for l in range(L):
        p = f"encoder.layers.{l}."
        x = g.op("Add", [x, g.op("Mul", [ff(ln(x, p + "norm_feed_forward1"), p + "feed_forward1"), half])])
        a = p + "self_attn."
        h = ln(x, p + "norm_self_att")
        q = heads(linear(g, h, w[a + "q_proj.weight"], bias_of(a + "q_proj.bias"), "q"))
        k = heads(linear(g, h, w[a + "k_proj.weight"], bias_of(a + "k_proj.bias"), "k"))
        v = heads(linear(g, h, w[a + "v_proj.weight"], bias_of(a + "v_proj.bias"), "v"))
        pk = heads(linear(g, pos, w[a + "relative_k_proj.weight"], None, "pos"))  # [1, H, P, dh]
        qu = g.op("Add", [q, g.const("bias_u", w[a + "bias_u"].reshape(1, H, 1, dh))])
        qv = g.op("Add", [q, g.const("bias_v", w[a + "bias_v"].reshape(1, H, 1, dh))])
        ac = g.op("MatMul", [qu, g.op("Transpose", [k], perm=[0, 1, 3, 2])])  # [1, H, T, T]
        bd = g.op("MatMul", [qv, g.op("Transpose", [pk], perm=[0, 1, 3, 2])])  # [1, H, T, P]
        # NeMo's rel_shift: pad one zero column in front, view as [.., P + 1, T], drop the first row, view back
        # as [.., T, P], keep the first T columns: out[i, j] = bd[i, T - 1 - i + j] (position i - j).
        bd = g.op("Pad", [bd, g.i64(0, 0, 0, 1, 0, 0, 0, 0)])
        bd = g.op("Reshape", [bd, g.op("Concat", [g.i64(1, H, -1), t1], axis=0)])
        bd = g.op("Slice", [bd, g.i64(1), g.i64(np.iinfo(np.int64).max), g.i64(2)])
        bd = g.op("Reshape", [bd, g.op("Concat", [g.i64(1, H), t1, g.i64(-1)], axis=0)])
        bd = g.op("Slice", [bd, g.i64(0), t1, g.i64(3)])
        scores = g.op("Mul", [g.op("Add", [ac, bd]), scale])
        att = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])  # [1, H, T, dh]
        att = g.op("Reshape", [g.op("Transpose", [att], perm=[0, 2, 1, 3]), g.i64(1, -1, D)])
        x = g.op("Add", [x, linear(g, att, w[a + "o_proj.weight"], bias_of(a + "o_proj.bias"), "o")])

        c = p + "conv."
        y = linear(g, ln(x, p + "norm_conv"), w[c + "pointwise_conv1.weight"][:, :, 0], bias_of(c + "pointwise_conv1.bias"), "pw1")
        ya, yb = g.op("Split", [y, g.i64(D, D)], n_out=2, axis=-1)
        y = g.op("Mul", [ya, g.op("Sigmoid", [yb])], "glu")
        y = g.op("Transpose", [y], perm=[0, 2, 1])  # [1, D, T]
        K = w[c + "depthwise_conv.weight"].shape[-1]
        dw_b = bias_of(c + "depthwise_conv.bias")
        y = g.op("Conv", [y, g.const("dw_w", w[c + "depthwise_conv.weight"])] + ([g.const("dw_b", dw_b)] if dw_b is not None else []),
                 group=D, kernel_shape=[K], pads=[(K - 1) // 2, (K - 1) // 2])
        y = g.op("BatchNormalization", [y] + [g.const("bn", w[c + "norm." + n]) for n in ("weight", "bias", "running_mean", "running_var")],
                 epsilon=1e-5)
        y = g.op("Transpose", [silu(g, y)], perm=[0, 2, 1])
        x = g.op("Add", [x, linear(g, y, w[c + "pointwise_conv2.weight"][:, :, 0], bias_of(c + "pointwise_conv2.bias"), "pw2")])
        x = g.op("Add", [x, g.op("Mul", [ff(ln(x, p + "norm_feed_forward2"), p + "feed_forward2"), half])])
        x = ln(x, p + "norm_out")
    g.nodes.append(helper.make_node("Transpose", [x], ["outputs"], perm=[0, 2, 1]))
    # encoded_lengths: the stride-2 convs' output length (pad 1, kernel 3: (n - 1) // 2 + 1), once per conv.
    n = "length"
    for _ in range(n_convs):
        n = g.op("Add", [g.op("Div", [g.op("Sub", [n, g.i64(1)]), g.i64(2)]), g.i64(1)])
    g.nodes.append(helper.make_node("Identity", [n], ["encoded_lengths"]))
    g.save([helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, [1, 128, "T"]),
            helper.make_tensor_value_info("length", TensorProto.INT64, [1])],
           [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, D, "T_out"]),
            helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, [1])],
           "Parakeet TDT encoder (sotto tools/parakeet_export_onnx.py)")


def export_decoder_joint(w, cfg, path):
    D = cfg["encoder_config"]["hidden_size"]
    Hd, layers = cfg["decoder_hidden_size"], cfg["num_decoder_layers"]
    g = Graph(path)
    tok = g.op("Cast", ["targets"], to=TensorProto.INT64)
    y = g.op("Gather", [g.const("embedding", w["decoder.embedding.weight"]), tok], axis=0)  # [1, 1, H]
    y = g.op("Transpose", [y], perm=[1, 0, 2])  # [seq 1, batch 1, H]
    hs, cs = [], []

    def gates(m):  # torch i f g o -> ONNX i o f c
        i, f, c, o = np.split(m, 4, axis=0)
        return np.concatenate([i, o, f, c], axis=0)

    for l in range(layers):
        h0 = g.op("Slice", ["input_states_1", g.i64(l), g.i64(l + 1), g.i64(0)])
        c0 = g.op("Slice", ["input_states_2", g.i64(l), g.i64(l + 1), g.i64(0)])
        W = gates(w[f"decoder.lstm.weight_ih_l{l}"])[None]
        R = gates(w[f"decoder.lstm.weight_hh_l{l}"])[None]
        B = np.concatenate([gates(w[f"decoder.lstm.bias_ih_l{l}"]), gates(w[f"decoder.lstm.bias_hh_l{l}"])])[None]
        out, h1, c1 = g.op("LSTM", [y, g.const("lstm_W", W), g.const("lstm_R", R), g.const("lstm_B", B), "", h0, c0],
                           n_out=3, hidden_size=Hd)
        y = g.op("Squeeze", [out, g.i64(1)])  # [seq, num_directions 1, batch, H] -> [seq, batch, H]
        hs.append(h1)
        cs.append(c1)
    g.nodes.append(helper.make_node("Concat", hs, ["output_states_1"], axis=0))
    g.nodes.append(helper.make_node("Concat", cs, ["output_states_2"], axis=0))
    pred = linear(g, g.op("Transpose", [y], perm=[1, 0, 2]), w["decoder.decoder_projector.weight"],
                  w["decoder.decoder_projector.bias"], "pred")  # [1, 1, H]
    enc = linear(g, g.op("Transpose", ["encoder_outputs"], perm=[0, 2, 1]), w["encoder_projector.weight"],
                 w["encoder_projector.bias"], "enc")  # [1, 1, H]
    joint = g.op("Relu", [g.op("Add", [enc, pred])])
    logits = linear(g, joint, w["joint.head.weight"], w["joint.head.bias"], "joint")
    n_out = w["joint.head.weight"].shape[0]
    g.nodes.append(helper.make_node("Reshape", [logits, g.i64(1, 1, 1, n_out)], ["outputs"]))
    g.nodes.append(helper.make_node("Identity", ["target_length"], ["prediction_lengths"]))
    g.save([helper.make_tensor_value_info("encoder_outputs", TensorProto.FLOAT, [1, D, 1]),
            helper.make_tensor_value_info("targets", TensorProto.INT32, [1, 1]),
            helper.make_tensor_value_info("target_length", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("input_states_1", TensorProto.FLOAT, [layers, 1, Hd]),
            helper.make_tensor_value_info("input_states_2", TensorProto.FLOAT, [layers, 1, Hd])],
           [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 1, 1, n_out]),
            helper.make_tensor_value_info("prediction_lengths", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("output_states_1", TensorProto.FLOAT, [layers, 1, Hd]),
            helper.make_tensor_value_info("output_states_2", TensorProto.FLOAT, [layers, 1, Hd])],
           "Parakeet TDT prediction net + joint, one step (sotto tools/parakeet_export_onnx.py)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--break-rel-shift", action="store_true", help="a wrong export (tests/web/parakeet_onnx.test.mjs)")
    a = ap.parse_args()
    for f in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(a.model_dir, f)):
            sys.exit(f"parakeet_export_onnx: {a.model_dir} has no {f} (a ParakeetForTDT directory is expected)")
    cfg = json.load(open(os.path.join(a.model_dir, "config.json")))
    if cfg.get("model_type") != "parakeet_tdt":
        sys.exit(f"{a.model_dir}/config.json: model_type {cfg.get('model_type')!r}, expected 'parakeet_tdt'")
    w = read_safetensors(os.path.join(a.model_dir, "model.safetensors"))
    os.makedirs(a.out_dir, exist_ok=True)
    export_encoder(w, cfg, os.path.join(a.out_dir, "encoder.onnx"), a.break_rel_shift)
    export_decoder_joint(w, cfg, os.path.join(a.out_dir, "decoder_joint.onnx"))
    meta = {"vocab_size": cfg["vocab_size"], "blank_id": cfg["blank_token_id"], "durations": cfg["durations"],
            "max_symbols_per_step": cfg.get("max_symbols_per_step", 10), "d_model": cfg["encoder_config"]["hidden_size"],
            "decoder_hidden": cfg["decoder_hidden_size"], "decoder_layers": cfg["num_decoder_layers"]}
    json.dump(meta, open(os.path.join(a.out_dir, "config.json"), "w"), indent=1)
    print(f"wrote {a.out_dir}/encoder.onnx, decoder_joint.onnx (+ .data), config.json")


if __name__ == "__main__":
    main()
