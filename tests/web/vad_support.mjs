// What the VAD tests and bench/vad.mjs share: paths, a minimal WAV reader, ONNX Runtime (onnxruntime-node) run
// on Silero the way Silero's own wrapper streams it, and an independent segmenter written from @ricky0123/
// vad-web's FrameProcessor rules (as documented in models/vad/segmenter.h) to check the C++ one against.
// Not a test file itself (node --test runs only *.test.mjs).
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repo = fileURLToPath(new URL('../../', import.meta.url));
export const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
export const nativeCli = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
// The folder holding wasm-simd128/sotto.wasm and wasm-relaxed/sotto.wasm (default: the repository's build/).
export const wasmDir = process.env.SOTTO_WASM_DIR ?? `${repo}build`;
export const wasmPath = (variant) => `${wasmDir}/wasm-${variant}/sotto.wasm`;

export const MODELS = ['silero_vad_v5.1.onnx', 'silero_vad_v6.2.onnx'];
export const CLIPS = ['test.wav', 'beckett.wav', 'two_cities_16k.wav', 'sample.wav'];  // sample.wav is 24 kHz
export const modelPath = (m) => `${fixtures}/vad/${m}`;
export const clipPath = (c) => `${fixtures}/audio/${c}`;
export const haveFixtures = () => MODELS.every((m) => existsSync(modelPath(m))) && CLIPS.every((c) => existsSync(clipPath(c)));

// 16-bit PCM WAV -> {rate, channels, samples: Float32Array of channel 0 ... (interleaved)} scaled by 1/32768,
// as sotto's decode_wav does. Only what the fixtures use: format 1, 16 bits.
export function readWav16(path) {
  const b = readFileSync(path);
  if (b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') throw new Error(`${path}: not a WAV file`);
  let fmt = null;
  for (let at = 12; at + 8 <= b.length;) {
    const id = b.toString('latin1', at, at + 4);
    const size = b.readUInt32LE(at + 4);
    if (id === 'fmt ') fmt = { format: b.readUInt16LE(at + 8), channels: b.readUInt16LE(at + 10), rate: b.readUInt32LE(at + 12), bits: b.readUInt16LE(at + 22) };
    if (id === 'data') {
      if (!fmt || fmt.format !== 1 || fmt.bits !== 16) throw new Error(`${path}: not 16-bit PCM`);
      const n = Math.floor(Math.min(size, b.length - at - 8) / 2);
      const samples = new Float32Array(n);
      for (let i = 0; i < n; i++) samples[i] = b.readInt16LE(at + 8 + 2 * i) / 32768;
      return { rate: fmt.rate, channels: fmt.channels, samples };
    }
    at += 8 + size + (size & 1);
  }
  throw new Error(`${path}: no data chunk`);
}

// ONNX Runtime on a Silero VAD file, 16 kHz: frames of 512 new samples, each with the previous 64 samples in
// front (zeros before the first), the state [2,1,128] carried (zeros at first), the last partial frame
// zero-padded. One intra-op thread. -> {probs: Float32Array, msPerFrame}
export async function onnxRuntimeProbs(ort, session, samples, { frame = 512, context = 64 } = {}) {
  const frames = Math.ceil(samples.length / frame);
  const padded = new Float32Array(context + frames * frame);
  padded.set(samples, context);
  let state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  const probs = new Float32Array(frames);
  const t0 = performance.now();
  for (let i = 0; i < frames; i++) {
    const input = new ort.Tensor('float32', padded.slice(i * frame, i * frame + context + frame), [1, context + frame]);
    const out = await session.run({ input, state, sr });
    probs[i] = out.output.data[0];
    state = out.stateN;
  }
  return { probs, msPerFrame: frames ? (performance.now() - t0) / frames : 0 };
}

export async function onnxRuntimeSession(ort, path, threads = 1) {
  return ort.InferenceSession.create(path, { intraOpNumThreads: threads, interOpNumThreads: 1, executionProviders: ['cpu'] });
}

// The vad-web rules with an explicit frame buffer (not the C++ code's counters): each frame is pushed with its
// speech flag; while silent the buffer keeps only the last `pad` frames; a speech frame while silent starts
// speech; while speaking, frames below the negative threshold count toward redemption (a speech frame resets
// it); reaching it ends the segment = the buffer, kept when it holds >= minSpeech speech frames. End of stream
// closes an open segment under the same minimum. Durations: whole frames rounded to nearest (redemption and
// min speech >= 1), as models/vad/segmenter.h documents. -> [{startFrame, endFrame}]
export function referenceSegments(probs, { positiveSpeechThreshold = 0.5, negativeSpeechThreshold = 0.35, redemptionMs = 1400,
  preSpeechPadMs = 800, minSpeechMs = 400, frameMs = 32 } = {}) {
  const frames = (ms, min) => Math.max(min, Math.round(ms / frameMs));
  const redemption = frames(redemptionMs, 1);
  const pad = frames(preSpeechPadMs, 0);
  const minSpeech = frames(minSpeechMs, 1);
  const segments = [];
  let buffer = [];  // [{index, speech}]
  let speaking = false;
  let counter = 0;
  const close = () => {
    if (buffer.filter((f) => f.speech).length >= minSpeech) segments.push({ startFrame: buffer[0].index, endFrame: buffer.at(-1).index + 1 });
    buffer = [];
    speaking = false;
    counter = 0;
  };
  probs.forEach((p, index) => {
    const speech = p >= positiveSpeechThreshold;
    buffer.push({ index, speech });
    if (speech) {
      counter = 0;
      speaking = true;
    }
    if (speaking && p < negativeSpeechThreshold && ++counter >= redemption) close();
    if (!speaking) buffer = buffer.slice(Math.max(0, buffer.length - pad));
  });
  if (speaking) close();
  return segments;
}

export function maxAbsDiff(a, b) {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

// Seconds (from `sotto vad --json`) back to frame indices.
export const toFrames = (segments, frameMs = 32) =>
  segments.map((s) => ({ startFrame: Math.round((s.start_s * 1000) / frameMs), endFrame: Math.round((s.end_s * 1000) / frameMs) }));

// A ModelProto with one float32 initializer in its graph (onnx.proto field numbers: ModelProto.ir_version 1,
// graph 7; GraphProto.initializer 5; TensorProto dims 1, data_type 2, name 8, raw_data 9): a valid ONNX file
// that is not Silero.
export function onnxWithTensor(name, dims) {
  const varint = (v) => {
    const out = [];
    while (v >= 0x80) out.push((v & 0x7f) | 0x80), (v = Math.floor(v / 128));
    out.push(v);
    return out;
  };
  const field = (n, bytes) => [...varint((n << 3) | 2), ...varint(bytes.length), ...bytes];
  const count = dims.reduce((a, b) => a * b, 1);
  const tensor = [...dims.flatMap((d) => [...varint(1 << 3), ...varint(d)]), ...varint(2 << 3), 1,
    ...field(8, [...Buffer.from(name)]), ...field(9, new Array(count * 4).fill(0x3f))];
  return new Uint8Array([...varint(1 << 3), 8, ...field(7, field(5, tensor))]);
}
