// Speech recognition in the page (or Node): Moonshine base read from its .ort files and run by sotto's own code
// (the C API's sotto_asr_*, api/sotto.h) in WebAssembly.
//
//   const asr = await Asr.load('/models/moonshine-base-en', { onProgress });   // a directory URL or (Node) path
//   const { text, tokens, encode_ms, decode_ms } = await asr.transcribe(samples16k);  // Float32Array, 16 kHz
//   const r = await asr.transcribeWav(fileOrUrlOrPath);                         // any WAV (resampled, mixed down)
//   seg = await vad.segmenter({ onSpeechEnd: asr.onSpeechEnd((r) => show(r.text)) });   // web/vad.js's segments
//
// Where it runs: on a wasm instance of its own, in a dedicated worker (web/speech-worker.js; the default in a
// page, so the page stays responsive while a 10 s clip takes a second or more) or, with { worker: false } (the
// default in Node), on the calling thread. { threads: N } gives that instance a pool of N threads (helpers
// are Web Workers, web/pool.js; the calling thread must be a worker, as the speech worker is).
// A page needs cross-origin isolation for either (shared memory). Pass { vad: 'silero_vad.onnx' } to cut
// audio over 20 s at pauses with Silero VAD; without it long audio is cut at its quietest points.
// { device: 'webgpu' } runs Moonshine on the op layer's WebGPU backend on the calling thread's instance (never in
// the speech worker), its readbacks waited for through JS Promise Integration; 'auto' falls back to the CPU with
// the reason in asr.fallback.
import { GpuBridge, hasJspi } from './gpu.js';
import { compileWasm, SpeechWorker } from './speech-client.js';
import { startPool } from './pool.js';
import { createSharedMemory, hasRelaxedSimd, instantiate, isNode, readCString, readString } from './runtime.js';

const WASM_URLS = {
  simd128: new URL('../build/wasm-simd128/sotto.wasm', import.meta.url),
  relaxed: new URL('../build/wasm-relaxed/sotto.wasm', import.meta.url),
};
// Moonshine's files: the package's layout, else the hub's ONNX one (the engine tells each file's format by its
// bytes).
const FILES = [['encoder_model.ort', 'encoder_model.onnx'], ['decoder_model_merged.ort', 'decoder_model_merged.onnx'],
  ['tokenizer.bin', 'tokenizer.json']];

// config.json's bytes when dir holds a Parakeet model (model_type "parakeet..."), else null (Moonshine has none).
async function parakeetConfig(dir) {
  let bytes;
  try {
    bytes = await readSource(join(dir, 'config.json'));
  } catch {
    return null;
  }
  try {
    return String(JSON.parse(new TextDecoder().decode(bytes)).model_type ?? '').startsWith('parakeet') ? bytes : null;
  } catch {
    return null;
  }
}

async function readSource(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return new Uint8Array(await source.arrayBuffer());
  if (isNode && typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)) {
    const { readFile } = await import('node:fs/promises');
    return new Uint8Array(await readFile(source));
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`sotto: ${source}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function join(dir, file) {
  if (dir instanceof URL) return new URL(file, dir.href.endsWith('/') ? dir : `${dir.href}/`);
  return dir.endsWith('/') ? `${dir}${file}` : `${dir}/${file}`;
}

// What both Asr (inline) and AsrWorker (in a speech worker) build on their transcribe() and decodeWav().
class AsrBase {
  async transcribeWav(source) {
    const samples = await this.decodeWav(source);
    if (samples.length === 0) throw new Error('sotto: the WAV holds no samples');
    return this.transcribe(samples);
  }

  // A callback for web/vad.js's segmenter: onSpeechEnd(audio) transcribes the segment and hands the result on.
  onSpeechEnd(onResult) {
    return (audio) => this.transcribe(audio).then(onResult);
  }
}

export class Asr extends AsrBase {
  #wasm;
  #memory;
  #handle;

  // dir: the model directory (URL or, in Node, a path) holding encoder_model.ort, decoder_model_merged.ort and
  // tokenizer.bin (or the hub's encoder_model.onnx, decoder_model_merged.onnx and tokenizer.json), or a Parakeet TDT directory (config.json with model_type parakeet_tdt, model.safetensors,
  // optional tokenizer.model or tokenizer.json). Options: onProgress({loaded, total}) per file, vad (a Silero VAD .onnx source),
  // variant ('relaxed' | 'simd128'), wasmUrl, module (a compiled WebAssembly.Module instead of either), worker,
  // threads (default 1; the encoder and decoder matmuls split across them).
  // device: 'cpu' (the default), 'webgpu' (Moonshine on the op layer's WebGPU backend, on this thread's
  // instance: needs WebGPU and JS Promise Integration, e.g. Chromium 137+, and throws the reason in one line
  // where either is missing) or 'auto' (the GPU where it can run, else the CPU with the reason in
  // asr.fallback). asr.device says where it runs.
  static async load(dir, { onProgress, vad, variant, wasmUrl, module, worker = !isNode, threads = 1, device = 'cpu' } = {}) {
    if (!['cpu', 'webgpu', 'auto'].includes(device)) throw new Error(`sotto: unknown ASR device '${device}' (use 'cpu', 'webgpu' or 'auto')`);
    let gpu = null;
    let fallback = '';
    if (device !== 'cpu') {
      if (!hasJspi()) {
        fallback = 'this runtime lacks JS Promise Integration (WebAssembly.Suspending / promising; Chromium 137+), which the GPU models need to wait for readbacks';
      } else {
        gpu = new GpuBridge();
        try {
          await gpu.open();
        } catch (e) {
          fallback = String(e?.message ?? e);
          gpu = null;
        }
      }
      if (fallback && device === 'webgpu') throw new Error(`sotto: ASR device 'webgpu': ${fallback}`);
    }
    if (!module) {
      const chosen = variant ?? (!isNode && hasRelaxedSimd() ? 'relaxed' : 'simd128');
      if (!WASM_URLS[chosen]) throw new Error(`sotto: unknown wasm variant '${chosen}'`);
      const url = wasmUrl ? new URL(wasmUrl, isNode ? `file://${process.cwd()}/` : location.href) : WASM_URLS[chosen];
      // A checkout with only the SIMD128 build: relaxed SIMD is faster, not needed.
      module = await compileWasm(url, wasmUrl || variant || chosen !== 'relaxed' ? null : WASM_URLS.simd128);
    }
    // The GPU runs on this thread's instance (its GPUDevice is this thread's).
    if (worker && !gpu) return AsrWorker.load(dir, { onProgress, vad, module, threads, fallback });
    const memory = createSharedMemory();
    const wasm = await instantiate(module, memory, 'asr', gpu);
    wasm.__wasm_call_ctors();
    // A pool of helpers on this instance, and the handle on it (sotto_asr_create's own pool is one thread).
    const pooled = threads > 1 && typeof wasm.sotto_asr_create_shared === 'function';
    const asr = new Asr(wasm, memory, pooled ? await startPool(wasm, memory, module, threads) : 1);
    asr.device = gpu ? 'webgpu' : 'cpu';
    if (fallback) asr.fallback = fallback;
    const files = [];
    try {
      if (gpu && wasm.sotto_asr_set_backend(asr.#handle, 1) !== 0) throw new Error(`sotto: ${asr.#error()}`);  // SOTTO_BACKEND_WEBGPU
      // Parakeet TDT: the model type is read from config.json, as natively (`sotto transcribe -m DIR`).
      const parakeet = await parakeetConfig(dir);
      if (parakeet) {
        // tokenizer.model (NeMo's) or tokenizer.json (the transformers layout's), optional (without either the
        // text is the token ids).
        const tokenizer = await readSource(join(dir, 'tokenizer.model'))
          .catch(() => readSource(join(dir, 'tokenizer.json'))).catch(() => new Uint8Array(0));
        for (const bytes of [parakeet, await readSource(join(dir, 'model.safetensors')), tokenizer]) {
          files.push(asr.#copyIn(bytes));
        }
        onProgress?.({ loaded: files.reduce((n, f) => n + f.size, 0), file: 'model.safetensors' });
        if (wasm.sotto_asr_load_parakeet(asr.#handle, files[0].ptr, files[0].size, files[1].ptr, files[1].size,
          files[2].ptr, files[2].size) !== 0) throw new Error(`sotto: ${asr.#error()}`);
        return asr;
      }
      let loaded = 0;
      for (const [f, alternative] of FILES) {
        const bytes = await readSource(join(dir, f)).catch((e) => readSource(join(dir, alternative)).catch(() => { throw e; }));
        files.push(asr.#copyIn(bytes));
        loaded += bytes.length;
        onProgress?.({ loaded, file: f });
      }
      const status = wasm.sotto_asr_load(asr.#handle, files[0].ptr, files[0].size, files[1].ptr, files[1].size,
        files[2].ptr, files[2].size);
      if (status !== 0) throw new Error(`sotto: ${asr.#error()}`);
      if (vad) {
        const v = asr.#copyIn(await readSource(vad));
        try {
          if (wasm.sotto_asr_load_vad(asr.#handle, v.ptr, v.size) !== 0) throw new Error(`sotto: ${asr.#error()}`);
        } finally {
          wasm.sotto_free(v.ptr);
        }
      }
    } catch (e) {
      asr.dispose();
      throw e;
    } finally {
      for (const f of files) wasm.sotto_free(f.ptr);  // the weights were copied out of the files
    }
    return asr;
  }

  constructor(wasm, memory, threads = 1) {
    super();
    this.#wasm = wasm;
    this.#memory = memory;
    this.#handle = threads > 1 ? wasm.sotto_asr_create_shared() : wasm.sotto_asr_create(1);
    this.threads = threads;
  }

  #copyIn(bytes) {
    const ptr = this.#wasm.sotto_alloc(Math.max(1, bytes.length));
    if (!ptr) throw new Error(`sotto: cannot allocate ${bytes.length} bytes in wasm memory`);
    new Uint8Array(this.#memory.buffer, ptr, bytes.length).set(bytes);
    return { ptr, size: bytes.length };
  }

  #error() {
    return readCString(this.#memory, this.#wasm.sotto_asr_last_error(this.#handle));
  }

  #live() {
    if (!this.#handle) throw new Error('sotto: this Asr was disposed');
  }

  // samples: Float32Array (or numbers) at 16 kHz -> { text, tokens, audio_s, encode_ms, decode_ms, segments }
  async transcribe(samples) {
    this.#live();
    const f32 = samples instanceof Float32Array ? samples : Float32Array.from(samples);
    const ptr = this.#wasm.sotto_alloc(Math.max(4, f32.length * 4));
    if (!ptr) throw new Error(`sotto: out of wasm memory (${f32.length} samples)`);
    try {
      new Float32Array(this.#memory.buffer, ptr, f32.length).set(f32);
      const lenPtr = this.#wasm.sotto_alloc(4);
      try {
        const json = await this.#transcribeJson(ptr, f32.length, lenPtr);
        if (!json) throw new Error(`sotto: ${this.#error()}`);
        const len = new Uint32Array(this.#memory.buffer, lenPtr, 1)[0];
        return JSON.parse(readString(this.#memory, json, len));
      } finally {
        this.#wasm.sotto_free(lenPtr);
      }
    } finally {
      this.#wasm.sotto_free(ptr);
    }
  }

  // On the CPU a plain call. On the GPU the op layer reads results back synchronously (the encoder's length,
  // each decoder step's token), which this thread can only do by suspending: through WebAssembly.promising with
  // blocking reads on (src/gpu/device_wasm.cpp), each pending read waits in sotto_gpu_wait for its map. One
  // transcription at a time on a GPU handle (calls queue behind each other).
  #queue = Promise.resolve();
  #transcribeJson(ptr, n, lenPtr) {
    if (this.device !== 'webgpu') return this.#wasm.sotto_asr_transcribe_json(this.#handle, ptr, n, lenPtr);
    const run = async () => {
      this.#promising ??= WebAssembly.promising(this.#wasm.sotto_asr_transcribe_json);
      this.#wasm.sotto_gpu_blocking_reads(1);
      try {
        return await this.#promising(this.#handle, ptr, n, lenPtr);
      } finally {
        this.#wasm.sotto_gpu_blocking_reads(0);
      }
    };
    const result = this.#queue.then(run);
    this.#queue = result.catch(() => {});
    return result;
  }
  #promising = null;

  // Any WAV (a File/Blob, URL or Node path), decoded and resampled to 16 kHz by the engine's own code.
  async decodeWav(source) {
    this.#live();
    const file = this.#copyIn(await readSource(source));
    const lenPtr = this.#wasm.sotto_alloc(4);
    try {
      const out = this.#wasm.sotto_asr_decode_wav(this.#handle, file.ptr, file.size, lenPtr);
      if (!out) throw new Error(`sotto: ${this.#error()}`);
      const n = new Uint32Array(this.#memory.buffer, lenPtr, 1)[0];
      return new Float32Array(this.#memory.buffer, out, n).slice();
    } finally {
      this.#wasm.sotto_free(lenPtr);
      this.#wasm.sotto_free(file.ptr);
    }
  }


  dispose() {
    if (this.#handle) this.#wasm.sotto_asr_destroy(this.#handle);
    this.#handle = 0;
  }
}

// A URL for the worker, which resolves nothing relative to the page: absolute (Blobs and Node paths pass as they are).
function absolute(x) {
  if (x instanceof URL) return x.href;
  return typeof x === 'string' && !isNode ? new URL(x, location.href).href : x;
}

// The same Asr in a dedicated worker (web/speech-worker.js): what Asr.load returns in a page.
class AsrWorker extends AsrBase {
  #worker;
  static async load(dir, { onProgress, vad, module, threads, fallback }) {
    const worker = await SpeechWorker.start();
    let info;
    try {
      info = await worker.call('asrLoad', { dir: absolute(dir), vad: vad && absolute(vad), module, threads }, onProgress);
    } catch (e) {
      worker.terminate();
      throw e;
    }
    const asr = new AsrWorker(worker, info?.threads ?? 1);
    asr.device = 'cpu';
    if (fallback) asr.fallback = fallback;
    return asr;
  }

  constructor(worker, threads) {
    super();
    this.#worker = worker;
    this.worker = true;
    this.threads = threads;
  }

  #live() {
    if (!this.#worker) throw new Error('sotto: this Asr was disposed');
  }

  async transcribe(samples) {
    this.#live();
    // A copy goes over: the caller keeps its samples.
    return this.#worker.call('asrTranscribe', { samples: samples instanceof Float32Array ? samples : Float32Array.from(samples) });
  }

  async decodeWav(source) {
    this.#live();
    return this.#worker.call('asrDecodeWav', { source: absolute(source) });
  }


  dispose() {
    this.#worker?.terminate();
    this.#worker = null;
  }
}
