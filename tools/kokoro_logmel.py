#!/usr/bin/env python3
"""The end-to-end measure of tests/unit/kokoro_test.cpp (log_mel_distance_db), in numpy, to measure what two
ONNX Runtime builds give on the same input (the bound the C++ test asserts):

  python3 tools/kokoro_logmel.py A B        (WAV float32/int16, or raw float32 .f32; 24 kHz mono)

Log-mel: 1024-point Hann STFT, hop 256, 80 HTK-mel triangles over 0..12 kHz, 10 log10(power + 1e-8); distance:
mean per-frame RMS band difference (dB) along the dynamic-time-warping path.
"""
import sys, wave
import numpy as np


def load(path):
    if path.endswith('.f32'):
        return np.fromfile(path, dtype=np.float32)
    with open(path, 'rb') as f:
        data = f.read()
    # our WAVs are float32 (format 3) with a 44-byte header; fall back to the wave module for PCM
    if data[20:22] == b'\x03\x00':
        return np.frombuffer(data[44:], dtype=np.float32)
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768


def log_mel(audio):
    n_fft, hop, mels = 1024, 256, 80
    mel = lambda hz: 2595 * np.log10(1 + hz / 700)
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)
    edges = hz(mel(12000.0) * np.arange(mels + 2) / (mels + 1))
    freqs = np.arange(n_fft // 2 + 1) * 24000 / n_fft
    fb = np.zeros((mels, freqs.size))
    for m in range(mels):
        up = (freqs - edges[m]) / (edges[m + 1] - edges[m])
        down = (edges[m + 2] - freqs) / (edges[m + 2] - edges[m + 1])
        fb[m] = np.where((freqs < edges[m]) | (freqs > edges[m + 2]), 0, np.where(freqs <= edges[m + 1], up, down))
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    frames = [audio[s:s + n_fft] * window for s in range(0, len(audio) - n_fft + 1, hop)]
    power = np.abs(np.fft.rfft(np.array(frames, dtype=np.float64), axis=1)) ** 2
    return 10 * np.log10(power @ fb.T + 1e-8)


def distance_db(a, b):
    ma, mb = log_mel(a), log_mel(b)
    d = np.sqrt(((ma[:, None, :] - mb[None, :, :]) ** 2).mean(axis=2))
    n, m = d.shape
    cost = np.full((n + 1, m + 1), np.inf)
    steps = np.zeros((n + 1, m + 1), dtype=np.int64)
    cost[0, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            options = [(cost[i - 1, j - 1], steps[i - 1, j - 1]), (cost[i - 1, j], steps[i - 1, j]),
                       (cost[i, j - 1], steps[i, j - 1])]
            best, length = min(options, key=lambda o: o[0])
            cost[i, j] = best + d[i - 1, j - 1]
            steps[i, j] = length + 1
    return cost[n, m] / steps[n, m]


if __name__ == '__main__':
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print(f'{len(a)} vs {len(b)} samples; log-mel distance {distance_db(a, b):.2f} dB')
