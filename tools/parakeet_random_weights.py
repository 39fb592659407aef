#!/usr/bin/env python3
"""A random-weight Parakeet TDT directory (config.json + model.safetensors in transformers' ParakeetForTDT
layout) with numpy alone, for timing where torch is not installed (sotto_parakeet_bench). The weights are not
transformers' (use tools/parakeet_make_test_model.py for references); names and shapes are the same.

  python3 tools/parakeet_random_weights.py --size v2 --out /tmp/parakeet_v2_np
  python3 tools/parakeet_random_weights.py --size 110m --out /tmp/parakeet_110m_np
"""
import argparse, json, os, struct

import numpy as np

# d_model, layers, heads, FF, subsampling channels, vocab V (blank = V), decoder hidden. "110m": the shape of
# parakeet-tdt_ctc-110m (FastConformer 110M: d_model 512, 17 layers), small enough for the browser's 4 GB wasm
# memory (v2's 2.4 GB of float32 weights do not fit twice: the file's bytes and the model's copy).
SIZES = {"v2": (1024, 24, 8, 4096, 256, 1024, 640), "v3": (1024, 24, 8, 4096, 256, 8192, 640),
         "110m": (512, 17, 8, 2048, 256, 1024, 640)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=SIZES, default="v2")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    D, L, heads, F, C, V, H = SIZES[a.size]
    rng = np.random.default_rng(0)
    shapes = {"encoder.subsampling.layers.0.weight": (C, 1, 3, 3), "encoder.subsampling.layers.0.bias": (C,)}
    for i in (2, 5):
        shapes.update({f"encoder.subsampling.layers.{i}.weight": (C, 1, 3, 3), f"encoder.subsampling.layers.{i}.bias": (C,),
                       f"encoder.subsampling.layers.{i + 1}.weight": (C, C, 1, 1), f"encoder.subsampling.layers.{i + 1}.bias": (C,)})
    shapes.update({"encoder.subsampling.linear.weight": (D, C * 16), "encoder.subsampling.linear.bias": (D,)})
    for l in range(L):
        p = f"encoder.layers.{l}."
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            shapes[p + n + ".weight"] = (D,)
            shapes[p + n + ".bias"] = (D,)
        for ff in ("feed_forward1", "feed_forward2"):
            shapes[p + ff + ".linear1.weight"] = (F, D)
            shapes[p + ff + ".linear2.weight"] = (D, F)
        for m in ("q_proj", "k_proj", "v_proj", "o_proj", "relative_k_proj"):
            shapes[p + "self_attn." + m + ".weight"] = (D, D)
        shapes[p + "self_attn.bias_u"] = (heads, D // heads)
        shapes[p + "self_attn.bias_v"] = (heads, D // heads)
        shapes[p + "conv.pointwise_conv1.weight"] = (2 * D, D, 1)
        shapes[p + "conv.depthwise_conv.weight"] = (D, 1, 9)
        shapes[p + "conv.pointwise_conv2.weight"] = (D, D, 1)
        for n in ("weight", "bias", "running_mean", "running_var"):
            shapes[p + "conv.norm." + n] = (D,)
    shapes.update({"encoder_projector.weight": (H, D), "encoder_projector.bias": (H,),
                   "decoder.embedding.weight": (V + 1, H), "decoder.decoder_projector.weight": (H, H),
                   "decoder.decoder_projector.bias": (H,), "joint.head.weight": (V + 6, H), "joint.head.bias": (V + 6,)})
    for l in range(2):
        shapes.update({f"decoder.lstm.weight_ih_l{l}": (4 * H, H), f"decoder.lstm.weight_hh_l{l}": (4 * H, H),
                       f"decoder.lstm.bias_ih_l{l}": (4 * H,), f"decoder.lstm.bias_hh_l{l}": (4 * H,)})
    os.makedirs(a.out, exist_ok=True)
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in shapes.items():
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            if name.endswith("running_var") or (len(shape) == 1 and "norm" in name and name.endswith("weight")):
                arr = 0.5 + rng.random(shape, dtype=np.float32)
            elif len(shape) == 1:
                arr = 0.1 * (rng.random(shape, dtype=np.float32) - 0.5)
            else:
                arr = (rng.random(shape, dtype=np.float32) * 2 - 1) * np.float32(np.sqrt(3.0 / fan_in))
            f.write(arr.astype(np.float32).tobytes())
    config = {"architectures": ["ParakeetForTDT"], "model_type": "parakeet_tdt", "vocab_size": V + 1,
              "blank_token_id": V, "pad_token_id": V, "decoder_hidden_size": H, "num_decoder_layers": 2,
              "durations": [0, 1, 2, 3, 4], "hidden_act": "relu", "max_symbols_per_step": 10,
              "encoder_config": {"model_type": "parakeet_encoder", "hidden_size": D, "num_hidden_layers": L,
                                 "num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": F,
                                 "hidden_act": "silu", "attention_bias": False, "convolution_bias": False,
                                 "conv_kernel_size": 9, "subsampling_factor": 8, "subsampling_conv_channels": C,
                                 "num_mel_bins": 128, "subsampling_conv_kernel_size": 3, "subsampling_conv_stride": 2,
                                 "scale_input": False}}
    json.dump(config, open(os.path.join(a.out, "config.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
