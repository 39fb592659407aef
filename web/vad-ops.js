// The engine worker's voice activity detection requests (web/vad.js sends them; web/worker.js runs them on its
// wasm instance): Silero VAD and the speech segmenter through the C API (api/sotto.h). Audio crosses as
// Float32Array; probabilities come back as Float32Array copies (wasm memory is shared and may move).
import { hasJspi } from './gpu.js';
import { readCString, readString } from './runtime.js';
import { offsetOf, sizeOf } from './struct-layout.js';

let wasm = null;
let memory = null;
let loadIntoWasm = null;
let bound = null;  // the engine these belong to (an inline engine on the page's thread may share this module)
const promisingExports = new WeakMap();  // wasm exports -> {name: WebAssembly.promising(export)}

// Back to the engine of the running request after an await (another engine's request may have run meanwhile).
function rebind(env) {
  ({ wasm, memory, loadIntoWasm } = env);
  bound = env;
}

const vads = new Map();  // handle -> { vad, name, frameSamples, sampleRate }
const segmenters = new Map();  // handle -> SottoVadSegmenter*
let nextVad = 1;

function vadOf(handle) {
  const v = vads.get(handle);
  if (!v) throw new Error('sotto: this VAD was disposed');
  return v;
}

function vadError(vad) {
  return readCString(memory, wasm.sotto_vad_last_error(vad));
}

// Runs a request written once as a generator that yields the wasm calls which compute probabilities
// ([name, ...args]) and receives their results. On the CPU each runs directly and the request stays synchronous
// (processSync needs that). On the GPU the op layer reads each frame's probability back synchronously, which
// this thread can only do by suspending: the call goes through WebAssembly.promising with blocking reads on
// (src/gpu/device_wasm.cpp), each pending read suspends wasm in sotto_gpu_wait until the map completes, and
// the request becomes a promise. The worker runs one request at a time, so nothing else enters wasm meanwhile.
function drive(v, gen) {
  let step = gen.next();
  if (!v.onGpu) {
    while (!step.done) {
      let result;
      try {
        result = wasm[step.value[0]](...step.value.slice(1));
      } catch (e) {
        step = gen.throw(e);  // the request's own finally blocks free what it allocated
        continue;
      }
      step = gen.next(result);
    }
    return step.value;
  }
  const env = bound;
  let table = promisingExports.get(wasm);
  if (!table) promisingExports.set(wasm, (table = {}));
  return (async () => {
    while (!step.done) {
      const [name, ...args] = step.value;
      table[name] ??= WebAssembly.promising(wasm[name]);
      let result;
      try {
        wasm.sotto_gpu_blocking_reads(1);
        result = await table[name](...args);
      } catch (e) {
        rebind(env);
        wasm.sotto_gpu_blocking_reads(0);
        step = gen.throw(e);
        continue;
      }
      rebind(env);
      wasm.sotto_gpu_blocking_reads(0);
      step = gen.next(result);
    }
    return step.value;
  })();
}

const DEVICES = ['cpu', 'webgpu', 'auto'];

// Why the op layer's GPU backend cannot run in this engine ('' when it can): it needs the engine worker's
// GPUDevice (web/gpu.js) and JS Promise Integration to wait for readbacks.
async function gpuUnavailable() {
  if (!bound.gpu) return 'the VAD runs inline on this thread, which has no WebGPU device (load it without { inline: true })';
  if (!hasJspi()) return 'this runtime lacks JS Promise Integration (WebAssembly.Suspending / promising; Chromium 137+), which the GPU models need to wait for readbacks';
  try {
    await bound.gpu.open();
  } catch (e) {
    return String(e?.message ?? e);
  }
  return '';
}

// Float32 samples copied into a fresh wasm allocation (free it with sotto_free).
function floatsToWasm(samples) {
  const f32 = samples instanceof Float32Array ? samples : Float32Array.from(samples);
  const ptr = wasm.sotto_alloc(Math.max(4, f32.length * 4));
  if (!ptr) throw new Error(`sotto: out of wasm memory (${f32.length} samples)`);
  new Float32Array(memory.buffer, ptr, f32.length).set(f32);
  return { ptr, length: f32.length };
}

// SottoVadOptions (api/sotto.h; offsets from struct-layout.js) from vad-web-style names; frame_ms from the model.
const V = (field) => offsetOf('SottoVadOptions', field);
function writeVadOptions(ptr, o, frameMs) {
  wasm.sotto_vad_segmenter_defaults(ptr);
  const d = new DataView(memory.buffer, ptr, sizeOf('SottoVadOptions'));
  if (o.positiveSpeechThreshold !== undefined) d.setFloat32(V('positive_threshold'), o.positiveSpeechThreshold, true);
  if (o.negativeSpeechThreshold !== undefined) d.setFloat32(V('negative_threshold'), o.negativeSpeechThreshold, true);
  if (o.redemptionMs !== undefined) d.setFloat64(V('redemption_ms'), o.redemptionMs, true);
  if (o.preSpeechPadMs !== undefined) d.setFloat64(V('pre_speech_pad_ms'), o.preSpeechPadMs, true);
  if (o.minSpeechMs !== undefined) d.setFloat64(V('min_speech_ms'), o.minSpeechMs, true);
  d.setFloat64(V('frame_ms'), frameMs, true);
}

function readVadOptions(ptr) {
  const d = new DataView(memory.buffer, ptr, sizeOf('SottoVadOptions'));
  return {
    positiveSpeechThreshold: d.getFloat32(V('positive_threshold'), true),
    negativeSpeechThreshold: d.getFloat32(V('negative_threshold'), true),
    redemptionMs: d.getFloat64(V('redemption_ms'), true), preSpeechPadMs: d.getFloat64(V('pre_speech_pad_ms'), true),
    minSpeechMs: d.getFloat64(V('min_speech_ms'), true), frameMs: d.getFloat64(V('frame_ms'), true),
  };
}

// device 'webgpu': the op layer's GPU backend (throws when it cannot run here), 'auto': the GPU where it can,
// else the CPU with the reason in `fallback`, 'cpu' (the default).
async function vadLoad({ source, sampleRate = 16000, device = 'cpu' }, progress) {
  const t0 = performance.now();
  if (!DEVICES.includes(device)) throw new Error(`sotto: unknown VAD device '${device}' (use 'cpu', 'webgpu' or 'auto')`);
  const env = bound;
  let fallback = device === 'cpu' ? '' : await gpuUnavailable();
  rebind(env);
  if (fallback && device === 'webgpu') throw new Error(`sotto: VAD device 'webgpu': ${fallback}`);
  const { ptr, size, name } = await loadIntoWasm(source, progress);
  rebind(env);
  const vad = wasm.sotto_vad_create();
  try {
    if (wasm.sotto_vad_load(vad, ptr, size, sampleRate | 0) !== 0) {
      const message = vadError(vad);
      wasm.sotto_vad_destroy(vad);
      throw new Error(`sotto: ${name}: ${message}`);
    }
  } finally {
    wasm.sotto_free(ptr);  // the weights were copied out
  }
  let onGpu = device !== 'cpu' && !fallback;
  if (onGpu && wasm.sotto_vad_set_backend(vad, 1) !== 0) {  // SOTTO_BACKEND_WEBGPU
    const message = vadError(vad);
    if (device === 'webgpu') {
      wasm.sotto_vad_destroy(vad);
      throw new Error(`sotto: ${name}: ${message}`);
    }
    fallback = message;
    onGpu = false;
  }
  const handle = nextVad++;
  const info = { name, bytes: size, frameSamples: wasm.sotto_vad_frame_samples(vad), sampleRate: wasm.sotto_vad_sample_rate(vad),
    device: onGpu ? 'webgpu' : 'cpu', ...(fallback ? { fallback } : {}) };
  vads.set(handle, { vad, onGpu, ...info });
  const options = wasm.sotto_alloc(sizeOf('SottoVadOptions'));
  writeVadOptions(options, {}, (1000 * info.frameSamples) / info.sampleRate);
  const defaults = readVadOptions(options);
  wasm.sotto_free(options);
  return { handle, ...info, defaults, loadMs: performance.now() - t0 };
}

function vadDispose({ handle }) {
  const v = vads.get(handle);
  if (!v) return false;
  vads.delete(handle);
  wasm.sotto_vad_destroy(v.vad);
  return true;
}

function vadReset({ handle }) {
  wasm.sotto_vad_reset(vadOf(handle).vad);
  return true;
}

function vadProcess({ handle, frame }) {
  const v = vadOf(handle);
  return drive(v, vadProcessSteps(v, frame));
}

function* vadProcessSteps({ vad }, frame) {
  const input = floatsToWasm(frame);
  try {
    const p = yield ['sotto_vad_process', vad, input.ptr, input.length];
    if (p < 0) throw new Error(`sotto: ${vadError(vad)}`);
    return p;
  } finally {
    wasm.sotto_free(input.ptr);
  }
}

// Samples at another rate through sotto's resampler; the result stays in the handle's buffer (ptr, length).
function resampleInWasm(vad, input, sampleRate) {
  const lenPtr = wasm.sotto_alloc(4);
  try {
    const out = wasm.sotto_vad_resample(vad, input.ptr, input.length, sampleRate | 0, lenPtr);
    if (!out) throw new Error(`sotto: ${vadError(vad)}`);
    return { ptr: out, length: new Uint32Array(memory.buffer, lenPtr, 1)[0] };
  } finally {
    wasm.sotto_free(lenPtr);
  }
}

function segmentOut(start, end, frameMs) {
  return { startFrame: start, endFrame: end, start: (start * frameMs) / 1000, end: (end * frameMs) / 1000 };
}

// A whole clip in one message: probabilities for every frame (from a fresh stream unless `continue`), and when
// `segments` options are given, the segments the C++ segmenter finds in them. `ms`: time in the wasm calls.
function vadProcessClip({ handle, samples, sampleRate, segments, continueStream = false }) {
  const v = vadOf(handle);
  return drive(v, vadProcessClipSteps(v, { samples, sampleRate, segments, continueStream }));
}

function* vadProcessClipSteps({ vad, frameSamples, sampleRate: modelRate }, { samples, sampleRate, segments, continueStream }) {
  const input = floatsToWasm(samples);
  let probsPtr = 0;
  try {
    let signal = input;
    if (sampleRate && sampleRate !== modelRate) signal = resampleInWasm(vad, input, sampleRate);
    const frames = Number(wasm.sotto_vad_frame_count(vad, signal.length));  // int64_t in the C API: a BigInt
    probsPtr = wasm.sotto_alloc(Math.max(4, frames * 4));
    if (!continueStream) wasm.sotto_vad_reset(vad);
    const t0 = performance.now();
    const n = Number(yield ['sotto_vad_process_clip', vad, signal.ptr, signal.length, probsPtr, frames]);
    const ms = performance.now() - t0;
    if (n < 0) throw new Error(`sotto: ${vadError(vad)}`);
    const probs = new Float32Array(memory.buffer, probsPtr, n).slice();
    const out = { probs, ms, samples: signal.length };
    if (signal !== input) out.resampled = new Float32Array(memory.buffer, signal.ptr, signal.length).slice();
    if (segments) {
      const frameMs = (1000 * frameSamples) / modelRate;
      const seg = segmenterNew(segments, frameMs);
      const segOut = wasm.sotto_alloc(sizeOf('SottoVadSegment'));
      try {
        out.segments = [];
        out.misfires = 0;
        const take = (event) => {
          if (event === 2) {
            const [start, end] = new BigInt64Array(memory.buffer, segOut + offsetOf('SottoVadSegment', 'start_frame'), 2);
            out.segments.push(segmentOut(Number(start), Number(end), frameMs));
          } else if (event === 3) out.misfires++;
        };
        for (let i = 0; i < n; i++) take(wasm.sotto_vad_segmenter_push(seg, probs[i], segOut));
        take(wasm.sotto_vad_segmenter_finish(seg, segOut));
      } finally {
        wasm.sotto_free(segOut);
        wasm.sotto_vad_segmenter_destroy(seg);
      }
    }
    return out;
  } finally {
    wasm.sotto_free(input.ptr);
    if (probsPtr) wasm.sotto_free(probsPtr);
  }
}

// A WAV file (Blob, URL or Node path) decoded, mixed to mono and resampled to the model's rate in wasm.
async function vadDecodeWav({ handle, source }, progress) {
  const { vad } = vadOf(handle);
  const env = bound;
  const { ptr, size, name } = await loadIntoWasm(source, progress);
  rebind(env);
  const lenPtr = wasm.sotto_alloc(4);
  try {
    const out = wasm.sotto_vad_decode_wav(vad, ptr, size, lenPtr);
    if (!out) throw new Error(`sotto: ${name}: ${vadError(vad)}`);
    // What could not be read at face value (a cut file, NaN samples), for the caller to show.
    const notes = readCString(memory, wasm.sotto_vad_notes(vad));
    if (notes) progress({ notes });
    return new Float32Array(memory.buffer, out, new Uint32Array(memory.buffer, lenPtr, 1)[0]).slice();
  } finally {
    wasm.sotto_free(lenPtr);
    wasm.sotto_free(ptr);
  }
}

// `sotto vad --json` (without the newline) of samples at the model's rate.
function vadClipJson({ handle, samples, options = {} }) {
  const v = vadOf(handle);
  return drive(v, vadClipJsonSteps(v, samples, options));
}

function* vadClipJsonSteps({ vad, frameSamples, sampleRate }, samples, options) {
  const input = floatsToWasm(samples);
  const opts = wasm.sotto_alloc(sizeOf('SottoVadOptions'));
  const lenPtr = wasm.sotto_alloc(4);
  try {
    writeVadOptions(opts, options, (1000 * frameSamples) / sampleRate);
    const json = yield ['sotto_vad_clip_json', vad, input.ptr, input.length, opts, lenPtr];
    if (!json) throw new Error(`sotto: ${vadError(vad)}`);
    return readString(memory, json, new Uint32Array(memory.buffer, lenPtr, 1)[0]);
  } finally {
    for (const p of [input.ptr, opts, lenPtr]) wasm.sotto_free(p);
  }
}

function segmenterNew(options, frameMs) {
  const opts = wasm.sotto_alloc(sizeOf('SottoVadOptions'));
  try {
    writeVadOptions(opts, options, frameMs);
    const seg = wasm.sotto_vad_segmenter_create(opts);
    if (!seg) throw new Error('sotto: out of wasm memory (segmenter)');
    return seg;
  } finally {
    wasm.sotto_free(opts);
  }
}

function vadSegmenterCreate({ handle, options = {} }) {
  const { frameSamples, sampleRate } = vadOf(handle);
  const frameMs = (1000 * frameSamples) / sampleRate;
  const id = nextVad++;
  const opts = wasm.sotto_alloc(sizeOf('SottoVadOptions'));
  writeVadOptions(opts, options, frameMs);
  const resolved = readVadOptions(opts);
  const seg = wasm.sotto_vad_segmenter_create(opts);
  wasm.sotto_free(opts);
  if (!seg) throw new Error('sotto: out of wasm memory (segmenter)');
  segmenters.set(id, { seg, frameMs });
  return { segmenter: id, options: resolved };
}

function segmenterOf(id) {
  const s = segmenters.get(id);
  if (!s) throw new Error('sotto: this segmenter was disposed');
  return s;
}

// Streaming: whole frames of `samples` (at the model's rate; a trailing partial frame is ignored, the caller
// keeps it) through the VAD and the segmenter, `firstFrame` being the index of the first one. With
// `probabilities` instead of samples, only the segmenter runs. -> {probs, events: [{type, frame, ...segment}],
// speaking}. finish: end the stream after these frames.
function vadSegmenterFeed(msg) {
  const s = segmenterOf(msg.segmenter);
  return drive(msg.probabilities ? {} : vadOf(msg.handle), vadSegmenterFeedSteps(s, msg));
}

function* vadSegmenterFeedSteps({ seg, frameMs }, { handle, samples, probabilities, firstFrame = 0, finish = false }) {
  let probs;
  if (probabilities) {
    probs = Float32Array.from(probabilities);
  } else {
    const { vad, frameSamples } = vadOf(handle);
    const whole = Math.floor(samples.length / frameSamples) * frameSamples;
    const input = floatsToWasm(samples.subarray(0, whole));
    const frames = whole / frameSamples;
    const probsPtr = wasm.sotto_alloc(Math.max(4, frames * 4));
    try {
      if (Number(yield ['sotto_vad_process_clip', vad, input.ptr, whole, probsPtr, frames]) < 0) throw new Error(`sotto: ${vadError(vad)}`);
      probs = new Float32Array(memory.buffer, probsPtr, frames).slice();
    } finally {
      wasm.sotto_free(input.ptr);
      wasm.sotto_free(probsPtr);
    }
  }
  const segOut = wasm.sotto_alloc(sizeOf('SottoVadSegment'));
  const events = [];
  const TYPES = [null, 'start', 'end', 'misfire'];
  const take = (event, frame) => {
    if (!event) return;
    const e = { type: TYPES[event], frame };
    if (event === 2) {
      const [start, end] = new BigInt64Array(memory.buffer, segOut + offsetOf('SottoVadSegment', 'start_frame'), 2);
      Object.assign(e, segmentOut(Number(start), Number(end), frameMs));
    }
    events.push(e);
  };
  try {
    for (let i = 0; i < probs.length; i++) take(wasm.sotto_vad_segmenter_push(seg, probs[i], segOut), firstFrame + i);
    if (finish) take(wasm.sotto_vad_segmenter_finish(seg, segOut), firstFrame + probs.length);
  } finally {
    wasm.sotto_free(segOut);
  }
  return { probs, events, speaking: wasm.sotto_vad_segmenter_speaking(seg) === 1 };
}

function vadSegmenterReset({ segmenter }) {
  wasm.sotto_vad_segmenter_reset(segmenterOf(segmenter).seg);
  return true;
}

function vadSegmenterDispose({ segmenter }) {
  const s = segmenters.get(segmenter);
  if (!s) return false;
  segmenters.delete(segmenter);
  wasm.sotto_vad_segmenter_destroy(s.seg);
  return true;
}

// Timing inside the engine: `repeats` passes of process() over `frames` frames of `samples`, one wasm call
// per frame (the streaming path), and the same via process_clip; median ms per frame of each.
function vadBench({ handle, samples, repeats = 5 }) {
  const v = vadOf(handle);
  return drive(v, vadBenchSteps(v, samples, repeats));
}

function* vadBenchSteps({ vad, frameSamples }, samples, repeats) {
  const input = floatsToWasm(samples);
  const frames = Math.floor(input.length / frameSamples);
  const probsPtr = wasm.sotto_alloc(Math.max(4, frames * 4));
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  try {
    const perCall = [];
    const clip = [];
    for (let r = 0; r < repeats; r++) {
      wasm.sotto_vad_reset(vad);
      let t0 = performance.now();
      for (let i = 0; i < frames; i++) yield ['sotto_vad_process', vad, input.ptr + i * frameSamples * 4, frameSamples];
      perCall.push((performance.now() - t0) / frames);
      wasm.sotto_vad_reset(vad);
      t0 = performance.now();
      yield ['sotto_vad_process_clip', vad, input.ptr, frames * frameSamples, probsPtr, frames];
      clip.push((performance.now() - t0) / frames);
    }
    wasm.sotto_vad_reset(vad);
    return { frames, processMsPerFrame: median(perCall), clipMsPerFrame: median(clip) };
  } finally {
    wasm.sotto_free(input.ptr);
    wasm.sotto_free(probsPtr);
  }
}

const OPS = { vadLoad, vadDispose, vadReset, vadProcess, vadProcessClip, vadDecodeWav, vadClipJson, vadSegmenterCreate,
  vadSegmenterFeed, vadSegmenterReset, vadSegmenterDispose, vadBench };

// The worker's request table entries; `engine()` gives the worker's current {wasm, memory, loadIntoWasm}.
export function vadOps(engine) {
  const withEngine = (fn) => (msg, progress) => {
    rebind(engine());
    return fn(msg, progress);
  };
  return Object.fromEntries(Object.entries(OPS).map(([name, fn]) => [name, withEngine(fn)]));
}
