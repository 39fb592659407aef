#!/usr/bin/env python3
"""Writes a Parakeet TDT model with the exact architecture of NVIDIA's parakeet-tdt-0.6b (v2 / v3) and random
weights, in transformers' layout (config.json + model.safetensors of ParakeetForTDT), and the reference
outputs of transformers' implementation (CPU torch, float32) on a few synthetic clips:

  DIR/config.json, DIR/model.safetensors       the model (save_pretrained)
  DIR/reference.safetensors                    per clip k: clip{k}.audio [N] (16 kHz float32),
                                               clip{k}.mel [128, T] (transformers' ParakeetFeatureExtractor),
                                               clip{k}.encoder [T', d_model] (ParakeetEncoder on that mel),
                                               clip{k}.tokens / .frames / .durations [U] int32 (greedy TDT)

  python3 tools/parakeet_make_test_model.py --size ci --out tests/data/parakeet/tdt_ci   (committed, ~1 MB)
  python3 tools/parakeet_make_test_model.py --size v2 --out /tmp/parakeet_v2               (benchmarks only)

Random weights are drawn variance-preserving (uniform, 1/fan_in), norms and batch-norm statistics
perturbed so folding and scaling are exercised, the blank row of the prediction net's embedding zeroed (NeMo's
blank_as_pad), and the blank logit's bias lowered so the decoder emits tokens on roughly half the steps. The
greedy loop below is the issue's rule (token and duration argmax per step; the LSTM state advances only on
non-blank; a blank with duration 0 advances one frame; at most max_symbols_per_step symbols on one frame); it is
checked against transformers' own generate() on every clip.
"""
import argparse, json, math, os, struct

import numpy as np
import torch
from transformers import ParakeetFeatureExtractor, ParakeetForTDT, ParakeetTDTConfig

SIZES = {
    # d_model, layers, heads, ff, subsampling channels, vocab V (blank = V), decoder hidden
    "ci": dict(hidden=64, layers=2, heads=4, ff=256, sub=16, vocab=48, dec=32),
    "v2": dict(hidden=1024, layers=24, heads=8, ff=4096, sub=256, vocab=1024, dec=640),
    "v3": dict(hidden=1024, layers=24, heads=8, ff=4096, sub=256, vocab=8192, dec=640),
}


def make_config(s):
    enc = dict(
        hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        intermediate_size=s["ff"], hidden_act="silu", attention_bias=False, convolution_bias=True,
        conv_kernel_size=9, subsampling_factor=8, subsampling_conv_channels=s["sub"], num_mel_bins=128,
        subsampling_conv_kernel_size=3, subsampling_conv_stride=2, dropout=0.0, dropout_positions=0.0,
        layerdrop=0.0, activation_dropout=0.0, attention_dropout=0.0, scale_input=False)
    return ParakeetTDTConfig(
        encoder_config=enc, vocab_size=s["vocab"] + 1, decoder_hidden_size=s["dec"], num_decoder_layers=2,
        hidden_act="relu", max_symbols_per_step=10, pad_token_id=s["vocab"], blank_token_id=s["vocab"],
        durations=[0, 1, 2, 3, 4])


@torch.no_grad()
def randomize(model, gen):
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            # Variance-preserving (1 / fan_in; 2 / fan_in before a ReLU in the subsampling stack) so every
            # frame's features reach the joint rather than the biases alone.
            fan_in = p[0].numel()
            gain = 6.0 if "subsampling.layers" in name else 3.0
            p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * math.sqrt(gain / fan_in))
        elif "norm" in name and name.endswith("weight"):
            p.copy_(1 + 0.2 * (torch.rand(p.shape, generator=gen) - 0.5))
        else:
            p.copy_(0.2 * (torch.rand(p.shape, generator=gen) - 0.5))
    for name, b in model.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(0.2 * (torch.rand(b.shape, generator=gen) - 0.5))
        elif name.endswith("running_var"):
            b.copy_(0.5 + torch.rand(b.shape, generator=gen))
    # The embedding table is [V + 1, dec]; blank (= V) is NeMo's padding row (all zeros).
    emb = model.decoder.embedding.weight
    emb.copy_(torch.randn(emb.shape, generator=gen))
    emb[model.config.blank_token_id].zero_()


def make_clips(rng):
    sr = 16000
    clips = []
    # A chirp with noise, tones with an on/off envelope, and a noise burst (odd lengths on purpose).
    n = 13_337
    t = np.arange(n) / sr
    clips.append(0.3 * np.sin(2 * np.pi * (200 + 1500 * t) * t) + 0.02 * rng.standard_normal(n))
    n = 25_601
    t = np.arange(n) / sr
    env = (np.sin(2 * np.pi * 2.5 * t) > 0).astype(np.float64)
    clips.append(env * (0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 1250 * t)) +
                 0.01 * rng.standard_normal(n))
    n = 9_000
    clips.append(0.1 * rng.standard_normal(n) * np.hanning(n))
    return [c.astype(np.float32) for c in clips]


@torch.no_grad()
def greedy_tdt(model, enc_proj):
    """The issue's greedy TDT loop over the projected encoder frames enc_proj [T, dec]."""
    cfg = model.config
    blank, V1 = cfg.blank_token_id, cfg.vocab_size
    durations = list(cfg.durations)
    dec = model.decoder
    n_layers, H = cfg.num_decoder_layers, cfg.decoder_hidden_size
    h = torch.zeros(n_layers, 1, H)
    c = torch.zeros(n_layers, 1, H)

    def predict(token, h, c):
        x = dec.embedding(torch.tensor([[token]]))
        out, (h2, c2) = dec.lstm(x, (h, c))
        return dec.decoder_projector(out)[0, 0], h2, c2

    g, h, c = predict(blank, h, c)  # the start symbol is blank, through the LSTM once (transformers does)
    tokens, frames, durs, margins = [], [], [], []
    t, symbols = 0, 0
    T = enc_proj.shape[0]
    while t < T:
        logits = model.joint.head(model.joint.activation(enc_proj[t] + g))
        tok_logits, dur_logits = logits[:V1], logits[V1:]
        k = int(tok_logits.argmax())
        d = durations[int(dur_logits.argmax())]
        top2 = torch.topk(tok_logits, 2).values
        margins.append(float(top2[0] - top2[1]))
        top2d = torch.topk(dur_logits, 2).values
        margins.append(float(top2d[0] - top2d[1]))
        if k != blank:
            tokens.append(k)
            frames.append(t)
            durs.append(d)
            g, h, c = predict(k, h, c)
            symbols += 1
        elif d == 0:
            d = 1
        if d == 0 and symbols >= cfg.max_symbols_per_step:
            d = 1
        if d > 0:
            symbols = 0
        t += d
    return tokens, frames, durs, min(margins)


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = {np.float32: "F32", np.int32: "I32"}[arr.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        blobs.append(arr.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=SIZES, default="ci")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--blank-bias", type=float, default=-0.5, help="the blank logit's bias")
    ap.add_argument("--stay-bias", type=float, default=0.0, help="added to the duration-0 logit's bias")
    ap.add_argument("--joint-gain", type=float, default=2.0, help="scales the joint's output weights")
    ap.add_argument("--no-reference", action="store_true", help="write the model only")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    s = SIZES[args.size]
    config = make_config(s)
    model = ParakeetForTDT(config).eval()
    randomize(model, gen)
    blank = config.blank_token_id
    # Logits that depend on the frame and the history (not only on the biases): a wider joint.
    model.joint.head.weight.mul_(args.joint_gain)
    model.joint.head.bias[blank] = args.blank_bias
    model.joint.head.bias[config.vocab_size] += args.stay_bias  # duration 0: several symbols on one frame
    # transformers' generate() takes its token as the argmax over all V + 1 + 5 logits (durations included):
    # lifting every token logit by the same amount keeps both argmaxes and keeps that one a token.
    model.joint.head.bias[: config.vocab_size] += 4.0
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    if args.no_reference:
        return

    fe = ParakeetFeatureExtractor(feature_size=128)
    rng = np.random.default_rng(args.seed)
    out = {}
    for i, audio in enumerate(make_clips(rng)):
        feats = fe(audio, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
        n_valid = int(feats["attention_mask"].sum())
        mel = feats["input_features"][:, :n_valid]  # [1, T, 128]
        enc = model.get_audio_features(input_features=mel)
        tokens, frames, durs, margin = greedy_tdt(model, enc.pooler_output[0])
        # transformers' own generate() on the same features: the same non-blank sequence.
        gen_out = model.generate(input_features=mel, decoder_start_token_id=blank)
        hf_tokens = [int(x) for x in gen_out.sequences[0].tolist() if x != blank]
        agree = hf_tokens == tokens
        print(f"clip{i}: {len(audio)} samples, mel {tuple(mel.shape)}, encoder {tuple(enc.last_hidden_state.shape)}, "
              f"{len(tokens)} tokens over {enc.last_hidden_state.shape[1]} frames, smallest top-2 margin "
              f"{margin:.4f}, transformers generate() agrees: {agree}")
        print("  tokens", tokens, "frames", frames, "durations", durs)
        if not agree:
            print("  ours        ", tokens)
            print("  transformers", hf_tokens)
        out[f"clip{i}.audio"] = audio
        out[f"clip{i}.mel"] = mel[0].T.contiguous().numpy()
        out[f"clip{i}.encoder"] = enc.last_hidden_state[0].numpy()
        out[f"clip{i}.tokens"] = np.array(tokens, np.int32)
        out[f"clip{i}.frames"] = np.array(frames, np.int32)
        out[f"clip{i}.durations"] = np.array(durs, np.int32)
    save_safetensors(os.path.join(args.out, "reference.safetensors"), out)


if __name__ == "__main__":
    main()
