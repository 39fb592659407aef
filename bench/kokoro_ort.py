"""ONNX Runtime's Python CPU build on kokoro-v1.0.int8.onnx, for bench/kokoro.mjs --python (the issue's peer:
Python ORT 1.32). Reads the feeds bench/kokoro.mjs writes (token ids, style row, speed per input) and prints one
JSON line: the median session.run wall time in ms and the sample count per input, after one warm-up run each.

  python3 bench/kokoro_ort.py FEEDS.json --threads 2 --repeats 3
"""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument('feeds')
p.add_argument('--model', default='models/kokoro/kokoro-v1.0.int8.onnx')
p.add_argument('--threads', type=int, default=2)
p.add_argument('--repeats', type=int, default=3)
a = p.parse_args()

opts = ort.SessionOptions()
opts.intra_op_num_threads = a.threads
opts.inter_op_num_threads = 1
session = ort.InferenceSession(a.model, opts, providers=['CPUExecutionProvider'])
out = {'version': ort.__version__, 'runs': []}
for f in json.load(open(a.feeds)):
    feeds = {
        'tokens': np.array(f['tokens'], dtype=np.int64)[None, :],
        'style': np.array(f['style'], dtype=np.float32)[None, :],
        'speed': np.array([f['speed']], dtype=np.float32),
    }
    samples = session.run(None, feeds)[0].size  # warm-up
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000)
    out['runs'].append({'ms': statistics.median(times), 'samples': int(samples)})
print(json.dumps(out))
