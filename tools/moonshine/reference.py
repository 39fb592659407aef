"""Moonshine base (English) with ONNX Runtime's Python package, the independent reference our engine is checked
against: greedy transcripts, encoder outputs and teacher-forced decoder logits.

  python3 tools/moonshine/reference.py transcribe AUDIO.wav...       # one JSON line per file: text, tokens
  python3 tools/moonshine/reference.py dump AUDIO.wav OUT.bin [SECONDS]
      writes OUT.bin: the first SECONDS (default all) of the audio at 16 kHz, the encoder output and the
      decoder's logits for every step of teacher forcing with the greedy tokens (format below), so a C++ test
      can compare without ONNX Runtime.

OUT.bin: magic "MSRF", u32 version 1, u32 n_samples, u32 n_frames, u32 d_model, u32 n_tokens, u32 vocab,
then f32 samples[n_samples], f32 encoder[n_frames][d_model], i32 tokens[n_tokens] (BOS first, the greedy
output after), f32 logits_top[n_tokens][k=16] ids as i32 then values as f32 (the 16 largest logits per step,
to keep the file small), f32 logits_stats[n_tokens][2] (max, logsumexp).
Audio is read with Python's wave module (16-bit PCM, any rate: resampled linearly to 16 kHz, channels mixed);
use 16 kHz mono files for exact comparisons.
"""
import json
import struct
import sys
import wave

import numpy as np
import onnxruntime as ort

MODEL_DIR = 'models/moonshine-base-en'
N_LAYERS, N_HEADS, HEAD_DIM = 8, 8, 52


def read_wav(path):
    w = wave.open(path)
    rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
    raw = w.readframes(w.getnframes())
    assert width == 2, 'needs 16-bit PCM'
    x = np.frombuffer(raw, '<i2').astype(np.float32) / 32768.0
    x = x.reshape(-1, channels).mean(axis=1)
    if rate != 16000:
        n = int(round(len(x) * 16000 / rate))
        x = np.interp(np.arange(n) * rate / 16000, np.arange(len(x)), x).astype(np.float32)
    return x


class Moonshine:
    def __init__(self, model_dir=MODEL_DIR, threads=2):
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        self.enc = ort.InferenceSession(f'{model_dir}/encoder_model.ort', o)
        self.dec = ort.InferenceSession(f'{model_dir}/decoder_model_merged.ort', o)
        b = open(f'{model_dir}/tokenizer.bin', 'rb').read()
        self.vocab, i = [], 0
        while i < len(b):
            n = b[i]
            self.vocab.append(b[i + 1:i + 1 + n])
            i += 1 + n

    def encode(self, audio):
        return self.enc.run(None, {'input_values': audio[None, :].astype(np.float32)})[0]

    def step(self, ids, enc, past):
        feeds = {'input_ids': np.array([ids], np.int64), 'encoder_hidden_states': enc}
        use_cache = past is not None
        for i in range(N_LAYERS):
            for a in ('decoder', 'encoder'):
                for kv in ('key', 'value'):
                    name = f'past_key_values.{i}.{a}.{kv}'
                    feeds[name] = past[f'present.{i}.{a}.{kv}'] if use_cache else np.zeros(
                        (1, N_HEADS, 0, HEAD_DIM), np.float32)
        feeds['use_cache_branch'] = np.array([use_cache])
        outs = self.dec.run(None, feeds)
        names = [o.name for o in self.dec.get_outputs()]
        present = dict(zip(names, outs))
        if use_cache:  # the cache branch returns empty cross-attention keys and values: keep the first step's
            for k in present:
                if '.encoder.' in k:
                    present[k] = past[k]
        return outs[0], present

    def greedy(self, audio):
        enc = self.encode(audio)
        max_tokens = int(len(audio) / 16000 * 6.5) + 1
        tokens, past, logits_all = [1], None, []
        while len(tokens) <= max_tokens:
            logits, past = self.step(tokens[-1:], enc, past)
            logits_all.append(logits[0, -1])
            t = int(np.argmax(logits[0, -1]))
            tokens.append(t)
            if t == 2:
                break
        return enc, tokens, np.array(logits_all)

    def text(self, tokens):
        out = b''.join(self.vocab[t] for t in tokens if 2 < t < len(self.vocab))
        return out.decode('utf-8', 'replace').replace('\u2581', ' ').strip()


def main():
    cmd = sys.argv[1]
    m = Moonshine()
    if cmd == 'transcribe':
        for path in sys.argv[2:]:
            _, tokens, _ = m.greedy(read_wav(path))
            print(json.dumps({'file': path, 'text': m.text(tokens), 'tokens': tokens}))
    elif cmd == 'dump':
        audio = read_wav(sys.argv[2])
        if len(sys.argv) > 4:
            audio = audio[:int(float(sys.argv[4]) * 16000)]
        enc, tokens, logits = m.greedy(audio)
        # Teacher forcing: feed all but the last token at once, no cache (the else branch).
        forced, _ = m.step(tokens[:-1], enc, None)
        forced = forced[0]
        assert np.allclose(forced, logits, atol=1e-3), np.abs(forced - logits).max()
        top = np.argsort(-forced, axis=1)[:, :16]
        lse = np.log(np.exp(forced - forced.max(1, keepdims=True)).sum(1)) + forced.max(1)
        with open(sys.argv[3], 'wb') as f:
            f.write(b'MSRF' + struct.pack('<6I', 1, len(audio), enc.shape[1], enc.shape[2], len(tokens) - 1,
                                          forced.shape[1]))
            f.write(audio.astype('<f4').tobytes())
            f.write(enc[0].astype('<f4').tobytes())
            f.write(np.array(tokens[:-1], '<i4').tobytes())
            f.write(top.astype('<i4').tobytes())
            f.write(np.take_along_axis(forced, top, 1).astype('<f4').tobytes())
            f.write(np.stack([forced.max(1), lse], 1).astype('<f4').tobytes())
        print(json.dumps({'text': m.text(tokens), 'tokens': tokens, 'frames': enc.shape[1]}))


main()
