#!/usr/bin/env python3
"""Converts NVIDIA NeMo's parakeet-tdt .nemo archive (a tar of model_config.yaml, model_weights.ckpt (a torch
state dict) and the SentencePiece tokenizer.model) into the directory sotto loads: config.json (transformers'
ParakeetForTDT fields) + model.safetensors (transformers' tensor names) + tokenizer.model.

  python3 tools/parakeet_convert_nemo.py parakeet-tdt-0.6b-v2.nemo OUT_DIR
  python3 tools/parakeet_convert_nemo.py --self-test tests/data/parakeet/tdt_ci    (round trip, no .nemo needed)

Names follow transformers' own converter (convert_nemo_to_hf.py): encoder.pre_encode.conv.* ->
encoder.subsampling.layers.*, pre_encode.out -> subsampling.linear, linear_q/k/v/out -> q/k/v/o_proj,
linear_pos -> relative_k_proj, pos_bias_u/v -> bias_u/v, conv.batch_norm -> conv.norm; the TDT head:
decoder.prediction.embed -> decoder.embedding, decoder.prediction.dec_rnn.lstm -> decoder.lstm, joint.enc ->
encoder_projector, joint.pred -> decoder.decoder_projector, joint.joint_net.2 -> joint.head. Config: d_model,
n_heads, n_layers, feat_in, conv_kernel_size, subsampling_factor / _conv_channels, xscaling (scale_input),
use_bias (attention and convolution biases), ff_expansion_factor (intermediate = d_model * factor); the
prediction net's pred_hidden / pred_rnn_layers; decoding.durations; vocab = len(labels) + 1 (blank last).
Needs torch (to unpickle the checkpoint), pyyaml and safetensors; not used by CI except --self-test.
"""
import argparse, io, json, os, re, shutil, sys, tarfile, tempfile

import torch
import yaml
from safetensors.torch import load_file, save_file

NAME_MAP = [
    (r"encoder\.pre_encode\.conv\.", "encoder.subsampling.layers."),
    (r"encoder\.pre_encode\.out\.", "encoder.subsampling.linear."),
    (r"encoder\.layers\.(\d+)\.conv\.batch_norm\.", r"encoder.layers.\1.conv.norm."),
    (r"linear_([kv])\b", r"\1_proj"),
    (r"linear_out\b", "o_proj"),
    (r"linear_q\b", "q_proj"),
    (r"pos_bias_([uv])\b", r"bias_\1"),
    (r"linear_pos\b", "relative_k_proj"),
    (r"decoder\.prediction\.embed\.", "decoder.embedding."),
    (r"decoder\.prediction\.dec_rnn\.lstm\.", "decoder.lstm."),
    (r"joint\.enc\.", "encoder_projector."),
    (r"joint\.pred\.", "decoder.decoder_projector."),
    (r"joint\.joint_net\.2\.", "joint.head."),
]


def hf_name(key):
    for pattern, replacement in NAME_MAP:
        key = re.sub(pattern, replacement, key)
    return key


def hf_config(cfg):
    enc, dec = cfg["encoder"], cfg["decoder"]
    prednet = dec.get("prednet", {})
    labels = cfg["labels"]
    use_bias = bool(enc.get("use_bias", True))
    return {
        "architectures": ["ParakeetForTDT"],
        "model_type": "parakeet_tdt",
        "vocab_size": len(labels) + 1,
        "blank_token_id": len(labels),
        "pad_token_id": labels.index("<pad>") if "<pad>" in labels else len(labels),
        "decoder_hidden_size": prednet.get("pred_hidden", 640),
        "num_decoder_layers": prednet.get("pred_rnn_layers", 2),
        "durations": list(cfg.get("decoding", {}).get("durations", [0, 1, 2, 3, 4])),
        "hidden_act": "relu",
        "max_symbols_per_step": 10,
        "encoder_config": {
            "model_type": "parakeet_encoder",
            "hidden_size": enc["d_model"],
            "num_attention_heads": enc["n_heads"],
            "num_key_value_heads": enc["n_heads"],
            "num_hidden_layers": enc["n_layers"],
            "intermediate_size": enc["d_model"] * enc.get("ff_expansion_factor", 4),
            "num_mel_bins": enc["feat_in"],
            "conv_kernel_size": enc["conv_kernel_size"],
            "subsampling_factor": enc["subsampling_factor"],
            "subsampling_conv_channels": enc["subsampling_conv_channels"],
            "subsampling_conv_kernel_size": 3,
            "subsampling_conv_stride": 2,
            "scale_input": bool(enc.get("xscaling", False)),
            "attention_bias": use_bias,
            "convolution_bias": use_bias,
            "hidden_act": "silu",
        },
    }


def convert(nemo_path, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(nemo_path) as tar:
            for m in tar.getmembers():  # no absolute paths or '..' out of the temporary directory
                if m.name.startswith("/") or ".." in m.name.split("/"):
                    sys.exit(f"{nemo_path}: member '{m.name}' points outside the archive")
            tar.extractall(tmp)
        files = {}
        for root, _, names in os.walk(tmp):
            for n in names:
                p = os.path.join(root, n)
                if n == "model_config.yaml":
                    files["config"] = p
                elif n.endswith(".ckpt"):
                    files["weights"] = p
                elif n.endswith(".model"):
                    files["tokenizer"] = p
        for need in ("config", "weights"):
            if need not in files:
                sys.exit(f"{nemo_path}: no {need} file in the archive")
        cfg = yaml.safe_load(open(files["config"]))
        state = torch.load(files["weights"], map_location="cpu", weights_only=True)
        tensors = {}
        for k, v in state.items():
            if k.startswith("preprocessor.") or k.endswith("num_batches_tracked"):
                continue  # the front end is computed (audio/mel.h), not read
            tensors[hf_name(k)] = v.float().contiguous()
        os.makedirs(out_dir, exist_ok=True)
        json.dump(hf_config(cfg), open(os.path.join(out_dir, "config.json"), "w"), indent=2)
        save_file(tensors, os.path.join(out_dir, "model.safetensors"))
        if "tokenizer" in files:
            shutil.copy(files["tokenizer"], os.path.join(out_dir, "tokenizer.model"))


def self_test(hf_dir):
    """Builds a .nemo from an HF directory by the inverse names, converts it back, compares every tensor."""
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    inverse = [
        ("encoder.subsampling.layers.", "encoder.pre_encode.conv."), ("encoder.subsampling.linear.", "encoder.pre_encode.out."),
        (".conv.norm.", ".conv.batch_norm."), (".q_proj.", ".linear_q."), (".k_proj.", ".linear_k."),
        (".v_proj.", ".linear_v."), (".o_proj.", ".linear_out."), (".relative_k_proj.", ".linear_pos."),
        (".bias_u", ".pos_bias_u"), (".bias_v", ".pos_bias_v"), ("decoder.embedding.", "decoder.prediction.embed."),
        ("decoder.lstm.", "decoder.prediction.dec_rnn.lstm."), ("encoder_projector.", "joint.enc."),
        ("decoder.decoder_projector.", "joint.pred."), ("joint.head.", "joint.joint_net.2."),
    ]
    state = {}
    for k, v in tensors.items():
        nk = k
        for a, b in inverse:
            nk = nk.replace(a, b)
        state[nk] = v
    e = cfg["encoder_config"]
    nemo_cfg = {
        "labels": [f"t{i}" for i in range(cfg["vocab_size"] - 1)],
        "encoder": {"d_model": e["hidden_size"], "n_heads": e["num_attention_heads"], "n_layers": e["num_hidden_layers"],
                    "ff_expansion_factor": e["intermediate_size"] // e["hidden_size"], "feat_in": e["num_mel_bins"],
                    "conv_kernel_size": e["conv_kernel_size"], "subsampling_factor": e["subsampling_factor"],
                    "subsampling_conv_channels": e["subsampling_conv_channels"], "xscaling": e["scale_input"],
                    "use_bias": e["attention_bias"]},
        "decoder": {"prednet": {"pred_hidden": cfg["decoder_hidden_size"], "pred_rnn_layers": cfg["num_decoder_layers"]}},
        "decoding": {"durations": cfg["durations"]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        nemo = os.path.join(tmp, "model.nemo")
        with tarfile.open(nemo, "w") as tar:
            for name, data in (("model_config.yaml", yaml.safe_dump(nemo_cfg).encode()),):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            buf = io.BytesIO()
            torch.save(state, buf)
            info = tarfile.TarInfo("model_weights.ckpt")
            info.size = buf.tell()
            buf.seek(0)
            tar.addfile(info, buf)
        out = os.path.join(tmp, "out")
        convert(nemo, out)
        back = load_file(os.path.join(out, "model.safetensors"))
        expected = {k: v for k, v in tensors.items() if not k.endswith("num_batches_tracked")}
        assert set(back) == set(expected), (set(back) ^ set(expected))
        for k in expected:
            assert torch.equal(back[k], expected[k].float()), k
        got_cfg = json.load(open(os.path.join(out, "config.json")))
        for k in ("vocab_size", "blank_token_id", "decoder_hidden_size", "num_decoder_layers", "durations"):
            assert got_cfg[k] == cfg[k], k
        for k, v in got_cfg["encoder_config"].items():
            # NeMo has one use_bias for both; the CI model differs on purpose (attention without, conv with).
            if k in e and k != "convolution_bias":
                assert e[k] == v, (k, e[k], v)
    print(f"round trip of {hf_dir}: {len(expected)} tensors and the config identical")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("nemo", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--self-test", metavar="HF_DIR")
    a = ap.parse_args()
    if a.self_test:
        self_test(a.self_test)
    elif a.nemo and a.out:
        convert(a.nemo, a.out)
    else:
        ap.error("give NEMO OUT_DIR or --self-test HF_DIR")
