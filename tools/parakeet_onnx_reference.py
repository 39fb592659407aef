#!/usr/bin/env python3
"""ONNX Runtime's time for the same Parakeet encoder as sotto_parakeet_bench: exports the encoder of a model
written by tools/parakeet_make_test_model.py (transformers' ParakeetEncoder, input_features [1, T, 128] ->
last_hidden_state) with torch.onnx, then times it in onnxruntime (CPU, intra-op threads as given, graph
optimisations on) on the mel of a clip of the same length, and checks the output against torch.

  python3 tools/parakeet_onnx_reference.py /tmp/parakeet_v2 --threads 2 --seconds 6
  python3 tools/parakeet_onnx_reference.py /tmp/parakeet_v2 --reuse --runs 5   # time that export again (no
      # torch export or check; median and CPU time, for interleaving with sotto_parakeet_bench on a loaded host)
"""
import argparse, os, shutil, time

import numpy as np
import torch
from transformers import ParakeetForTDT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reuse", action="store_true",
                    help="time MODEL_DIR/onnx_encoder/encoder.onnx from an earlier run (no export, no torch check)")
    args = ap.parse_args()
    if args.reuse:
        return time_only(args)
    torch.set_num_threads(args.threads)
    # Eager attention: the default SDPA path traces into a graph that disagrees with torch (max |diff| ~5).
    model = ParakeetForTDT.from_pretrained(args.model_dir, attn_implementation="eager").eval()
    enc = model.encoder
    frames = int(args.seconds * 100)
    mel = torch.randn(1, frames, 128, generator=torch.Generator().manual_seed(0))
    # A fresh directory each time: the exporter writes every >2 GB model's tensors as separate files named after
    # graph values, and stale files from an earlier export would be read in place of the new ones.
    out_dir = os.path.join(args.model_dir, "onnx_encoder")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    path = os.path.join(out_dir, "encoder.onnx")
    if True:  # exported on every run (see above)
        class Wrap(torch.nn.Module):
            def __init__(self, e):
                super().__init__()
                self.e = e

            def forward(self, x):
                return self.e(input_features=x).last_hidden_state

        torch.onnx.export(Wrap(enc).eval(), (mel,), path, input_names=["input_features"], output_names=["encoder"],
                          dynamic_axes={"input_features": {1: "frames"}, "encoder": {1: "out_frames"}},
                          opset_version=17, dynamo=False)
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = mel.numpy()
    best = 1e30
    for r in range(args.runs + 1):
        t0 = time.perf_counter()
        out = sess.run(None, {"input_features": x})[0]
        ms = (time.perf_counter() - t0) * 1e3
        if r:
            best = min(best, ms)
    # The exporter puts the wrapper back in training mode afterwards (batch norm would use the batch's own
    # statistics): eval() again before torch's own run.
    enc.eval()
    with torch.no_grad():
        want = enc(input_features=mel).last_hidden_state.numpy()
    print(f"{args.seconds} s ({frames} mel frames), {args.threads} threads: onnxruntime {ort.__version__} encoder "
          f"best of {args.runs} {best:.1f} ms; max |ort - torch| {np.abs(out - want).max():.2e}")


def time_only(args):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(args.model_dir, "onnx_encoder", "encoder.onnx"), so,
                                providers=["CPUExecutionProvider"])
    frames = int(args.seconds * 100)
    x = np.random.default_rng(0).standard_normal((1, frames, 128), dtype=np.float32)
    times, cpu = [], []
    for r in range(args.runs + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(None, {"input_features": x})
        if r:
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    print(f"{args.seconds} s ({frames} mel frames), {args.threads} threads: onnxruntime {ort.__version__} encoder "
          f"median of {args.runs} {float(np.median(times)):.1f} ms, best {min(times):.1f} ms; CPU time (all threads) "
          f"median {float(np.median(cpu)):.1f} ms")


if __name__ == "__main__":
    main()
