#!/usr/bin/env python3
"""Reference speech probabilities for tests/unit/vad_test.cpp, computed by ONNX Runtime (PyPI `onnxruntime`)
on the real Silero VAD files, independently of sotto's engine.

Streaming exactly as Silero's own wrapper does at 16 kHz: frames of 512 new samples, each preceded by the
previous frame's last 64 samples (zeros before the first frame), state [2,1,128] carried from frame to frame
(zeros at the start). The last partial frame is zero-padded to 512 samples. Audio: 16-bit PCM mono 16 kHz
WAVs read with Python's `wave` module, scaled by 1/32768 (sotto's decode_wav does the same).

Writes tests/data/vad_reference.json:
  {"frame_samples":512,"context_samples":64,
   "probs":{"<model file>":{"<audio file>":[p0,p1,...]}}}   probabilities rounded to 7 decimals

Run from the repository root:  pip install onnxruntime numpy && python3 tools/vad_reference.py [fixtures_dir]
"""
import json, os, sys, wave

import numpy as np
import onnxruntime as ort

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
models = ["silero_vad_v5.1.onnx", "silero_vad_v6.2.onnx"]
audios = ["test.wav", "beckett.wav"]
frame, context = 512, 64


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


out = {"frame_samples": frame, "context_samples": context, "probs": {}}
for model in models:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(fixtures, "vad", model), opts, providers=["CPUExecutionProvider"])
    out["probs"][model] = {}
    for audio in audios:
        x = read_wav(os.path.join(fixtures, "audio", audio))
        n_frames = (len(x) + frame - 1) // frame
        x = np.concatenate([np.zeros(context, np.float32), x, np.zeros(n_frames * frame - len(x), np.float32)])
        state = np.zeros((2, 1, 128), np.float32)
        sr = np.array(16000, np.int64)
        probs = []
        for i in range(n_frames):
            chunk = x[i * frame : i * frame + context + frame][None, :]
            p, state = sess.run(None, {"input": chunk, "state": state, "sr": sr})
            probs.append(round(float(p[0, 0]), 7))
        out["probs"][model][audio] = probs
        print(model, audio, n_frames, "frames, max", max(probs), file=sys.stderr)

with open(os.path.join(root, "tests", "data", "vad_reference.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"))
