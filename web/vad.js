// Voice activity detection in the page (or Node): Silero VAD v5 / v6 read from its .onnx file and run by
// sotto's own code in the engine worker, and a streaming speech segmenter with @ricky0123/vad-web's options
// and callbacks. The segmenter's rules are the C++ ones (models/vad/segmenter.h) through the C API: one
// implementation for the CLI, the tests and the page.
//
//   const vad = await Vad.load('/fixtures/vad/silero_vad_v5.1.onnx');       // or a File, or (Node) a path
//   const p = await vad.process(frame);            // 512 samples at 16 kHz (32 ms) -> speech probability
//   const { probs, segments } = await vad.segments(samples, { sampleRate: 48000 });  // a whole clip, one message
//   const seg = await vad.segmenter({ onSpeechStart, onSpeechEnd: (audio) => ..., onFrameProcessed, onVADMisfire });
//   await seg.process(chunk);                      // any length of 16 kHz samples, e.g. from the microphone
//   await seg.flush();                             // end of stream: closes a segment still open
//
// On the GPU: Vad.load(file, { device: 'webgpu' }) runs the same forward pass (src/models/vad/silero.cpp) on the
// op layer's WebGPU backend in the engine worker, each frame's probability read back through JS Promise
// Integration (web/vad-ops.js drive()). 'auto' falls back to the CPU with the reason in vad.info.fallback.
//
// Where it runs: by default in the engine worker (web/engine.js), so the page's thread never computes; each
// call is then a message round trip (~0.05 ms idle, several ms on a loaded machine). { inline: true } runs
// it on the calling thread instead (its own small wasm instance, as ONNX Runtime Web does by default): no
// messages, and vad.processSync(frame) returns the probability at once (~0.1-0.3 ms a frame).
//
// Defaults: Silero's own thresholds (positive 0.5, negative 0.35) with vad-web's durations (redemption
// 1400 ms, pre-speech pad 800 ms, min speech 400 ms). vad-web 0.0.31 uses 0.3 / 0.25: pass
// {...VAD_WEB_DEFAULTS} (or preset: 'vad-web') to get its values exactly.
import { Engine } from './engine.js';
import { createSharedMemory, hasRelaxedSimd, instantiate, isNode } from './runtime.js';
import { vadOps } from './vad-ops.js';

export const VAD_WEB_DEFAULTS = Object.freeze({
  positiveSpeechThreshold: 0.3,
  negativeSpeechThreshold: 0.25,
  redemptionMs: 1400,
  preSpeechPadMs: 800,
  minSpeechMs: 400,
});

const OPTION_NAMES = ['positiveSpeechThreshold', 'negativeSpeechThreshold', 'redemptionMs', 'preSpeechPadMs', 'minSpeechMs'];

// The segmenter options among `options` (vad-web's names), after a preset's.
function segmenterOptions(options = {}) {
  const out = options.preset === 'vad-web' ? { ...VAD_WEB_DEFAULTS } : {};
  if (options.preset !== undefined && options.preset !== 'vad-web' && options.preset !== 'silero')
    throw new Error(`sotto: unknown VAD preset '${options.preset}' ('silero' or 'vad-web')`);
  for (const name of OPTION_NAMES) {
    if (options[name] === undefined) continue;
    const v = Number(options[name]);
    if (!Number.isFinite(v)) throw new Error(`sotto: VAD option ${name} must be a number, got ${options[name]}`);
    out[name] = v;
  }
  return out;
}

// A Float32Array that owns its whole buffer: posting a view (subarray) to the worker would structured-clone
// the entire underlying buffer (a 60 s clip is 3.8 MB) with every frame.
function toFloat32(samples) {
  if (samples instanceof Float32Array)
    return samples.byteOffset === 0 && samples.byteLength === samples.buffer.byteLength ? samples : samples.slice();
  if (Array.isArray(samples) || ArrayBuffer.isView(samples)) return Float32Array.from(samples);
  throw new Error('sotto: VAD audio must be a Float32Array (or an array of numbers)');
}

const WASM_URLS = {
  simd128: new URL('../build/wasm-simd128/sotto.wasm', import.meta.url),
  relaxed: new URL('../build/wasm-relaxed/sotto.wasm', import.meta.url),
};

// The VAD requests of web/vad-ops.js run on this thread, on a wasm instance of its own (no pool, no helper
// workers: the VAD never uses threads, and the allocator's lock spins rather than waits, which the page's
// main thread allows). The same call() interface as Engine.
export class InlineEngine {
  static async create({ variant, wasmUrl } = {}) {
    const chosen = variant ?? (!isNode && hasRelaxedSimd() ? 'relaxed' : 'simd128');
    if (!WASM_URLS[chosen]) throw new Error(`sotto: unknown wasm variant '${chosen}'`);
    const url = wasmUrl ? new URL(wasmUrl, isNode ? `file://${process.cwd()}/` : location.href) : WASM_URLS[chosen];
    let bytes;
    if (isNode && url.protocol === 'file:') {
      const { readFile } = await import('node:fs/promises');
      bytes = await readFile(url);
    } else {
      const response = await fetch(url);
      if (!response.ok) throw new Error(`sotto: ${url}: HTTP ${response.status}`);
      bytes = await response.arrayBuffer();
    }
    const memory = createSharedMemory();
    const wasm = await instantiate(await WebAssembly.compile(bytes), memory, 'inline');
    wasm.__wasm_call_ctors();
    return new InlineEngine(wasm, memory, String(url));
  }

  #ops;

  constructor(wasm, memory, wasmUrl) {
    const loadIntoWasm = async (source, onProgress) => {
      const { bytes, name } = await readSource(source);
      const ptr = wasm.sotto_alloc(bytes.length);
      if (!ptr) throw new Error(`sotto: cannot allocate ${bytes.length} bytes in wasm memory for ${name}`);
      new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
      onProgress?.({ bytes: bytes.length, total: bytes.length });
      return { ptr, size: bytes.length, name };
    };
    this.#ops = vadOps(() => ({ wasm, memory, loadIntoWasm }));
    this.info = { threads: 1, simdLevel: wasm.sotto_simd_level(), variant: wasm.sotto_simd_level() === 2 ? 'relaxed' : 'simd128', wasmUrl, inline: true };
  }

  // Synchronous: the request's result (or its exception).
  callSync(op, args = {}) {
    if (!this.#ops[op]) throw new Error(`sotto: unknown request '${op}'`);
    return this.#ops[op](args, () => {});
  }

  async call(op, args = {}, onProgress) {
    if (!this.#ops[op]) throw new Error(`sotto: unknown request '${op}'`);
    return this.#ops[op](args, (p) => onProgress?.(p));
  }

  terminate() {}
}

// A whole file's bytes: a Blob, a URL, or (Node) a path. Model files are small (~2 MB).
async function readSource(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { bytes: new Uint8Array(await source.arrayBuffer()), name: source.name ?? 'blob' };
  if (isNode && typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)) {
    const { readFile } = await import('node:fs/promises');
    return { bytes: new Uint8Array(await readFile(source)), name: source };
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`sotto: ${source}: HTTP ${response.status}`);
  return { bytes: new Uint8Array(await response.arrayBuffer()), name: String(source) };
}

export class Vad {
  // source: a URL (string or URL), a File/Blob, or in Node a path to silero_vad.onnx (v5 or v6).
  // Options: sampleRate (16000, or 8000 for the file's 8 kHz branch), onProgress({loaded, total}), inline (run
  // on this thread, see above), engine (share a running Engine or InlineEngine), and for a new engine threads
  // (default 1: the network is tiny), variant ('relaxed' | 'simd128'), wasmUrl.
  // device: 'cpu' (the default), 'webgpu' (the op layer's GPU backend in the engine worker: needs WebGPU and JS
  // Promise Integration, e.g. Chromium 137+; throws a one-line reason where either is missing) or 'auto' (the
  // GPU where it can run, else the CPU with the reason in info.fallback). info.device says where it runs.
  static async load(source, { sampleRate = 16000, onProgress, engine, inline = false, threads = 1, variant, wasmUrl, device = 'cpu' } = {}) {
    const ownEngine = !engine;
    engine ??= inline ? await InlineEngine.create({ variant, wasmUrl }) : await Engine.create({ threads, variant, wasmUrl });
    try {
      const info = await engine.call('vadLoad', { source: source instanceof URL ? String(source) : source, sampleRate, device },
        (p) => onProgress?.({ loaded: p.bytes, total: p.total }));
      return new Vad(engine, ownEngine, info);
    } catch (e) {
      if (ownEngine) engine.terminate();
      throw e;
    }
  }

  #engine;
  #ownEngine;
  #handle;

  constructor(engine, ownEngine, info) {
    this.#engine = engine;
    this.#ownEngine = ownEngine;
    this.#handle = info.handle;
    // {name, bytes, frameSamples, sampleRate, frameMs, defaults: {positiveSpeechThreshold, ...}, variant, threads}
    this.info = {
      ...info, frameMs: (1000 * info.frameSamples) / info.sampleRate, variant: engine.info.variant, threads: engine.info.threads,
      inline: !!engine.info.inline,
    };
  }

  get engine() {
    return this.#engine;
  }
  get frameSamples() {
    return this.info.frameSamples;
  }
  get sampleRate() {
    return this.info.sampleRate;
  }

  // The speech probability (0..1) of the next frame of the stream: frameSamples samples at sampleRate (fewer
  // are zero-padded). NaN / Inf samples count as 0. One message per call: for whole clips use processClip.
  process(frame) {
    return this.#engine.call('vadProcess', { handle: this.#handle, frame: toFloat32(frame) });
  }

  // process() without a promise, for a VAD loaded with { inline: true }.
  processSync(frame) {
    if (!this.#engine.callSync) throw new Error('sotto: processSync needs a VAD loaded with { inline: true }');
    return this.#engine.callSync('vadProcess', { handle: this.#handle, frame: toFloat32(frame) });
  }

  // Back to the start of a stream (zero state and context).
  reset() {
    return this.#engine.call('vadReset', { handle: this.#handle });
  }

  // A whole clip in one message, from a fresh stream (continueStream: carry on from the last call).
  // sampleRate other than the model's: resampled in wasm with sotto's resampler (`resampled` returns the
  // samples the model saw). -> {probs: Float32Array, ms (time in the wasm call), samples, resampled?}
  processClip(samples, { sampleRate, continueStream = false } = {}) {
    return this.#engine.call('vadProcessClip', { handle: this.#handle, samples: toFloat32(samples), sampleRate, continueStream });
  }

  // processClip plus the speech segments in it. -> {probs, ms, segments: [{start, end (seconds), startFrame,
  // endFrame}], misfires}
  segments(samples, options = {}) {
    return this.#engine.call('vadProcessClip', {
      handle: this.#handle, samples: toFloat32(samples), sampleRate: options.sampleRate, segments: segmenterOptions(options),
    });
  }

  // A WAV file (File/Blob, URL, or Node path; any rate and channel count) -> Float32Array of mono samples at the
  // model's rate, decoded and resampled in wasm exactly as `sotto vad` does. onNotes(text): what could not be read
  // at face value (a data chunk longer than the file: the frames present are read; NaN / infinite samples: read
  // as 0), as `sotto vad` warns.
  decodeWav(source, { onNotes } = {}) {
    return this.#engine.call('vadDecodeWav', { handle: this.#handle, source: source instanceof URL ? String(source) : source },
      (p) => p.notes && onNotes?.(p.notes));
  }

  // `sotto vad --json`'s object (one line, no newline) for samples at the model's rate, from a fresh stream.
  clipJson(samples, options = {}) {
    return this.#engine.call('vadClipJson', { handle: this.#handle, samples: toFloat32(samples), options: segmenterOptions(options) });
  }

  // Segments of given per-frame probabilities (from any source) by the same segmenter. -> [{start, end, ...}]
  async segmentsOf(probabilities, options = {}) {
    const { segmenter } = await this.#engine.call('vadSegmenterCreate', { handle: this.#handle, options: segmenterOptions(options) });
    try {
      const r = await this.#engine.call('vadSegmenterFeed', { handle: this.#handle, segmenter, probabilities: toFloat32(probabilities), finish: true });
      return r.events.filter((e) => e.type === 'end').map(({ start, end, startFrame, endFrame }) => ({ start, end, startFrame, endFrame }));
    } finally {
      await this.#engine.call('vadSegmenterDispose', { segmenter });
    }
  }

  // A streaming segmenter on this VAD's stream (it resets the stream). Options: vad-web's threshold and
  // duration names (or preset: 'vad-web'), and callbacks onSpeechStart(), onSpeechRealStart() (minSpeechMs of
  // speech frames reached: not a misfire), onSpeechEnd(audio: Float32Array), onVADMisfire(),
  // onFrameProcessed({isSpeech, notSpeech}, frame).
  segmenter(options = {}) {
    return VadSegmenter.create(this, this.#engine, this.#handle, options);
  }

  // Inside the engine: ms per frame of one process() call per frame and of one processClip over the same
  // frames (median of repeats), on `samples` at the model's rate.
  bench(samples, { repeats = 5 } = {}) {
    return this.#engine.call('vadBench', { handle: this.#handle, samples: toFloat32(samples), repeats });
  }

  async dispose() {
    await this.#engine.call('vadDispose', { handle: this.#handle });
    if (this.#ownEngine) this.#engine.terminate();
  }
}

export class VadSegmenter {
  static async create(vad, engine, handle, options) {
    const { segmenter, options: resolved } = await engine.call('vadSegmenterCreate', { handle, options: segmenterOptions(options) });
    await engine.call('vadReset', { handle });
    return new VadSegmenter(vad, engine, handle, segmenter, resolved, options);
  }

  #engine;
  #handle;
  #id;
  #callbacks;
  #pending = new Float32Array(0);  // samples short of a whole frame
  #frames = [];  // recent frames (Float32Array each), the first being frame #keptFrom: the audio of a segment
  #keptFrom = 0;
  #nextFrame = 0;
  #padFrames;
  #minSpeechFrames;  // as models/vad/segmenter.cpp rounds it
  #speaking = false;
  #speechFrames = 0;
  #queue = Promise.resolve();
  #openFrom = 0;  // the first frame of the open segment's audio (its pre-speech pad), while #speaking
  #closedAt = 0;  // the frame after the last segment's end or misfire (a segment's pad starts no earlier)

  constructor(vad, engine, handle, id, options, callbacks) {
    this.vad = vad;
    this.#engine = engine;
    this.#handle = handle;
    this.#id = id;
    this.options = options;  // as resolved: {positiveSpeechThreshold, ..., frameMs}
    this.#callbacks = callbacks;
    this.#padFrames = Math.round(options.preSpeechPadMs / options.frameMs) + 1;
    this.#minSpeechFrames = Math.max(1, Math.round(options.minSpeechMs / options.frameMs));
  }

  // Samples at the VAD's rate, any length (a partial frame waits for the next call). Calls are serialised.
  // -> the events of these frames: [{type: 'start' | 'end' | 'misfire', frame, start?, end?, audio?}]
  process(samples) {
    const input = toFloat32(samples);
    return (this.#queue = this.#queue.then(() => this.#feed(input, false)));
  }

  // The audio of the segment still open, from its pre-speech pad to the last frame processed (null when none
  // is): what onSpeechEnd would hand over if the segment ended at this frame, which it begins with when it
  // does end later. Call it from onFrameProcessed: the voice agent transcribes it during the end-of-turn pause.
  openSegmentAudio() {
    if (!this.#speaking) return null;
    const frames = this.#frames.slice(Math.max(0, this.#openFrom - this.#keptFrom));
    const audio = new Float32Array(frames.length * this.vad.frameSamples);
    frames.forEach((f, i) => audio.set(f, i * f.length));
    return audio;
  }

  // End of the stream: a segment still open ends (onSpeechEnd or onVADMisfire); a partial frame is dropped.
  // The next process() starts a new stream.
  flush() {
    return (this.#queue = this.#queue.then(async () => {
      const events = await this.#feed(new Float32Array(0), true);
      this.#restart();
      await this.#engine.call('vadReset', { handle: this.#handle });
      return events;
    }));
  }

  reset() {
    return (this.#queue = this.#queue.then(async () => {
      this.#restart();
      await this.#engine.call('vadSegmenterReset', { segmenter: this.#id });
      await this.#engine.call('vadReset', { handle: this.#handle });
    }));
  }

  dispose() {
    return (this.#queue = this.#queue.then(() => this.#engine.call('vadSegmenterDispose', { segmenter: this.#id })));
  }

  #restart() {
    this.#speaking = false;
    this.#speechFrames = 0;
    this.#openFrom = 0;
    this.#closedAt = 0;
    this.#pending = new Float32Array(0);
    this.#frames = [];
    this.#keptFrom = 0;
    this.#nextFrame = 0;
  }

  async #feed(input, finish) {
    const n = this.vad.frameSamples;
    let all = input;
    if (this.#pending.length) {
      all = new Float32Array(this.#pending.length + input.length);
      all.set(this.#pending);
      all.set(input, this.#pending.length);
    }
    const whole = Math.floor(all.length / n) * n;
    this.#pending = all.slice(whole);
    const firstFrame = this.#nextFrame;
    const r = await this.#engine.call('vadSegmenterFeed', { handle: this.#handle, segmenter: this.#id, samples: toFloat32(all.subarray(0, whole)), firstFrame, finish });
    const cb = this.#callbacks;
    const byFrame = new Map();
    for (const e of r.events) byFrame.set(e.frame, [...(byFrame.get(e.frame) ?? []), e]);
    for (let i = 0; i < r.probs.length; i++) {
      const frame = all.slice(i * n, (i + 1) * n);
      this.#frames.push(frame);
      cb.onFrameProcessed?.({ isSpeech: r.probs[i], notSpeech: 1 - r.probs[i] }, frame);
      const events = byFrame.get(firstFrame + i) ?? [];
      for (const e of events) this.#emit(e);
      // onSpeechRealStart: the segment now holds minSpeechMs of speech frames (it will not be a misfire).
      if (events.some((e) => e.type === 'start')) this.#speechFrames = 0;
      if (this.#speaking && r.probs[i] >= this.options.positiveSpeechThreshold && ++this.#speechFrames === this.#minSpeechFrames)
        cb.onSpeechRealStart?.();
    }
    this.#nextFrame += r.probs.length;
    for (const e of byFrame.get(this.#nextFrame) ?? []) if (finish) this.#emit(e);  // finish's event
    if (!r.speaking) {
      // Silent: only the pre-speech padding can become part of a future segment.
      const keepFrom = Math.max(this.#keptFrom, this.#nextFrame - this.#padFrames);
      this.#frames.splice(0, keepFrom - this.#keptFrom);
      this.#keptFrom = keepFrom;
    }
    return r.events;
  }

  #emit(e) {
    const cb = this.#callbacks;
    this.#speaking = e.type === 'start';
    // As models/vad/segmenter.cpp: a segment starts pre_speech_pad frames before its first speech frame, and
    // never before the end of the one before it.
    if (e.type === 'start') this.#openFrom = Math.max(this.#closedAt, e.frame - (this.#padFrames - 1));
    else this.#closedAt = e.type === 'end' ? e.endFrame : e.frame + 1;
    if (e.type === 'start') cb.onSpeechStart?.();
    else if (e.type === 'misfire') cb.onVADMisfire?.();
    else if (e.type === 'end') {
      const frames = this.#frames.slice(Math.max(0, e.startFrame - this.#keptFrom), e.endFrame - this.#keptFrom);
      const audio = new Float32Array(frames.length * this.vad.frameSamples);
      frames.forEach((f, i) => audio.set(f, i * f.length));
      e.audio = audio;
      cb.onSpeechEnd?.(audio);
    }
  }
}
