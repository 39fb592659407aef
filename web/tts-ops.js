// Speech synthesis requests on a wasm instance (web/tts.js runs them on one of its own): Kokoro and the G2P
// through the C API (sotto_tts_*, api/sotto.h). Written as worker ops ({id, op, ...args} in, results out: the
// dedicated speech worker, web/speech-worker.js, runs them; web/worker.js could take them on its pool). The handle
// travels as `tts`, never `id`: a worker request is {id, op, ...args}, so an argument named id would replace the
// request's own id and its reply would never find its caller (every call after the model loaded hung so).
// Audio comes back as a Float32Array copy (wasm memory is shared and may move).
import { hasJspi } from './gpu.js';
import { isNode, readCString, readString } from './runtime.js';

const handles = new Map();  // id -> SottoTts*
const onGpu = new Set();  // ids of handles whose Kokoro runs on the op layer's WebGPU backend
const promisingExports = new WeakMap();  // wasm exports -> {name: WebAssembly.promising(export)}
let nextId = 1;
const encoder = new TextEncoder();

export async function readWhole(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return new Uint8Array(await source.arrayBuffer());
  if (isNode && typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)) {
    const { readFile } = await import('node:fs/promises');
    return new Uint8Array(await readFile(source));
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`sotto: ${source}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// loadIntoWasm for an instance that has no streaming loader (web/tts.js's inline one, the speech worker's): the
// file read whole, then copied into one sotto_alloc'd buffer.
export function copyIntoWasm(wasm, memory) {
  return async (source, onProgress) => {
    const data = await readWhole(source);
    const ptr = wasm.sotto_alloc(Math.max(1, data.length));
    if (!ptr) throw new Error(`sotto: cannot allocate ${data.length} bytes in wasm memory for ${source}`);
    new Uint8Array(memory.buffer, ptr, data.length).set(data);
    onProgress?.({ bytes: data.length, total: data.length });
    return { ptr, size: data.length, name: String(source) };
  };
}

export function ttsOps(env) {
  // env() -> { wasm, memory, loadIntoWasm } of the engine running the request.
  const handle = (id) => {
    const h = handles.get(id);
    if (!h) throw new Error('sotto: this Tts was disposed');
    return h;
  };
  const lastError = (h) => {
    const { wasm, memory } = env();
    return readCString(memory, wasm.sotto_tts_last_error(h));
  };
  // A string into a fresh wasm allocation (free it with sotto_free).
  const stringIn = (s) => {
    const { wasm, memory } = env();
    const bytes = encoder.encode(String(s));
    const ptr = wasm.sotto_alloc(Math.max(1, bytes.length));
    if (!ptr) throw new Error(`sotto: cannot allocate ${bytes.length} bytes in wasm memory`);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    return { ptr, size: bytes.length };
  };
  // A file (URL, Blob or Node path) in wasm memory, handed to `use(ptr, size)`, then freed. The model streams in
  // (loadIntoWasm: no whole copy in JS); small files (a voice, a lexicon) are read whole.
  const withFile = async (source, progress, use) => {
    const { wasm, memory, loadIntoWasm } = env();
    let ptr;
    let size;
    if (progress) {
      ({ ptr, size } = await loadIntoWasm(source, (p) => progress({ loaded: p.bytes, total: p.total })));
    } else {
      const bytes = await readWhole(source);
      size = bytes.length;
      ptr = wasm.sotto_alloc(Math.max(1, size));
      if (!ptr) throw new Error(`sotto: cannot allocate ${size} bytes in wasm memory for ${source}`);
      new Uint8Array(memory.buffer, ptr, size).set(bytes);
    }
    try {
      return await use(ptr, size);  // a GPU load suspends: the bytes stay until it returns
    } finally {
      env().wasm.sotto_free(ptr);
    }
  };

  // A wasm call that computes: direct on the CPU; on the GPU the op layer reads back synchronously, which this
  // thread can only do by suspending, so the call goes through WebAssembly.promising with blocking reads on
  // (src/gpu/device_wasm.cpp) and each pending read waits in sotto_gpu_wait. The engine worker runs one request
  // at a time, so nothing else enters wasm meanwhile.
  const compute = async (gpu, name, ...args) => {
    const { wasm } = env();
    if (!gpu) return wasm[name](...args);
    let table = promisingExports.get(wasm);
    if (!table) promisingExports.set(wasm, (table = {}));
    table[name] ??= WebAssembly.promising(wasm[name]);
    wasm.sotto_gpu_blocking_reads(1);
    try {
      return await table[name](...args);
    } finally {
      wasm.sotto_gpu_blocking_reads(0);
    }
  };
  // Why Kokoro cannot run on the GPU here ('' when it can): the engine worker's GPUDevice (web/gpu.js) and JS
  // Promise Integration.
  const gpuUnavailable = async () => {
    const { gpu } = env();
    if (!gpu) return 'this engine has no WebGPU device (only the engine worker, web/worker.js, has one)';
    if (!hasJspi()) return 'this runtime lacks JS Promise Integration (WebAssembly.Suspending / promising; Chromium 137+), which the GPU models need to wait for readbacks';
    try {
      await gpu.open();
    } catch (e) {
      return String(e?.message ?? e);
    }
    return '';
  };

  return {
    // device: 'cpu' (the default), 'webgpu' (throws the reason where it cannot run) or 'auto' (the CPU then,
    // with the reason in `fallback`).
    async ttsLoad({ model, device = 'cpu' }, progress) {
      if (!['cpu', 'webgpu', 'auto'].includes(device)) throw new Error(`sotto: unknown TTS device '${device}' (use 'cpu', 'webgpu' or 'auto')`);
      const fallback = device === 'cpu' ? '' : await gpuUnavailable();
      if (fallback && device === 'webgpu') throw new Error(`sotto: TTS device 'webgpu': ${fallback}`);
      const gpu = device !== 'cpu' && !fallback;
      const { wasm } = env();
      const h = wasm.sotto_tts_create(1);
      const t0 = performance.now();
      try {
        if (gpu && wasm.sotto_tts_set_backend(h, 1) !== 0) throw new Error(`sotto: ${lastError(h)}`);  // SOTTO_BACKEND_WEBGPU
        await withFile(model, progress, async (ptr, size) => {
          if ((await compute(gpu, 'sotto_tts_load', h, ptr, size)) !== 0) throw new Error(`sotto: ${lastError(h)}`);
        });
      } catch (e) {
        wasm.sotto_tts_destroy(h);
        throw e;
      }
      const id = nextId++;
      handles.set(id, h);
      if (gpu) onGpu.add(id);
      return { tts: id, loadMs: performance.now() - t0, device: gpu ? 'webgpu' : 'cpu', ...(fallback ? { fallback } : {}) };
    },
    async ttsAddVoice({ tts: id, name, source }) {
      const h = handle(id);
      const { wasm } = env();
      await withFile(source, null, (ptr, size) => {
        const n = stringIn(name);
        try {
          if (wasm.sotto_tts_add_voice(h, n.ptr, n.size, ptr, size) !== 0) throw new Error(`sotto: ${lastError(h)}`);
        } finally {
          wasm.sotto_free(n.ptr);
        }
      });
      return true;
    },
    async ttsLoadG2p({ tts: id, source }) {
      const h = handle(id);
      const { wasm } = env();
      await withFile(source, null, (ptr, size) => {
        if (wasm.sotto_tts_load_g2p(h, ptr, size) !== 0) throw new Error(`sotto: ${lastError(h)}`);
      });
      return true;
    },
    // -> { lang, sentences: [{ text, phonemes }] }
    ttsPhonemize({ tts: id, voice, text }) {
      const h = handle(id);
      const { wasm, memory } = env();
      const v = stringIn(voice);
      const t = stringIn(text);
      const lenPtr = wasm.sotto_alloc(4);
      try {
        const out = wasm.sotto_tts_phonemize_json(h, v.ptr, v.size, t.ptr, t.size, lenPtr);
        if (!out) throw new Error(`sotto: ${lastError(h)}`);
        return JSON.parse(readString(memory, out, new Uint32Array(memory.buffer, lenPtr, 1)[0]));
      } finally {
        for (const p of [v.ptr, t.ptr, lenPtr]) wasm.sotto_free(p);
      }
    },
    // -> { audio: Float32Array (24 kHz), ms, pieces (Kokoro calls) }
    async ttsSpeak({ tts: id, voice, phonemes, speed = 1 }) {
      const h = handle(id);
      const { wasm, memory } = env();
      const v = stringIn(voice);
      const p = stringIn(phonemes);
      const lenPtr = wasm.sotto_alloc(4);
      try {
        const t0 = performance.now();
        const out = await compute(onGpu.has(id), 'sotto_tts_speak', h, v.ptr, v.size, p.ptr, p.size, speed, lenPtr);
        if (!out) throw new Error(`sotto: ${lastError(h)}`);
        const n = new Uint32Array(memory.buffer, lenPtr, 1)[0];
        const ms = performance.now() - t0;
        return { audio: new Float32Array(memory.buffer, out, n).slice(), ms, pieces: wasm.sotto_tts_last_pieces(h) };
      } finally {
        for (const q of [v.ptr, p.ptr, lenPtr]) wasm.sotto_free(q);
      }
    },
    // Streaming (sotto_tts_stream_*): begin runs all of the first piece but its vocoder -> { ms }; each next
    // vocodes the next chunk -> { audio (null once all was given), ms, more (chunks left after this one) }.
    // leadMs: keep only this much of each piece's leading pause and never vocode the rest
    // (sotto_tts_set_stream_lead; null: all of it).
    async ttsStreamBegin({ tts: id, voice, phonemes, speed = 1, firstChunkMs = 300, leadMs = null }) {
      const h = handle(id);
      const { wasm } = env();
      const lead = leadMs === null || leadMs === undefined ? -1 : Number(leadMs);
      if (!wasm.sotto_tts_set_stream_lead) {
        if (lead >= 0) throw new Error('sotto: this wasm build cannot cut the leading pause (sotto_tts_set_stream_lead); rebuild it');
      } else if (wasm.sotto_tts_set_stream_lead(h, lead) !== 0) throw new Error(`sotto: ${lastError(h)}`);
      const v = stringIn(voice);
      const p = stringIn(phonemes);
      try {
        const t0 = performance.now();
        if ((await compute(onGpu.has(id), 'sotto_tts_stream_begin', h, v.ptr, v.size, p.ptr, p.size, speed, firstChunkMs)) !== 0) {
          throw new Error(`sotto: ${lastError(h)}`);
        }
        return { ms: performance.now() - t0 };
      } finally {
        for (const q of [v.ptr, p.ptr]) wasm.sotto_free(q);
      }
    },
    async ttsStreamNext({ tts: id }) {
      const h = handle(id);
      const { wasm, memory } = env();
      const lenPtr = wasm.sotto_alloc(4);
      try {
        const t0 = performance.now();
        const out = await compute(onGpu.has(id), 'sotto_tts_stream_next', h, lenPtr);
        const ms = performance.now() - t0;
        if (!out) {
          const why = lastError(h);
          if (why) throw new Error(`sotto: ${why}`);
          return { audio: null, ms, more: false };
        }
        const n = new Uint32Array(memory.buffer, lenPtr, 1)[0];
        // total: the samples of the piece this chunk is from, all its chunks joined (null from a wasm without it).
        const total = wasm.sotto_tts_stream_piece_samples ? wasm.sotto_tts_stream_piece_samples(h) : null;
        return { audio: new Float32Array(memory.buffer, out, n).slice(), ms, more: wasm.sotto_tts_stream_more(h) === 1, total };
      } finally {
        wasm.sotto_free(lenPtr);
      }
    },
    ttsDispose({ tts: id }) {
      const h = handles.get(id);
      if (h) env().wasm.sotto_tts_destroy(h);
      handles.delete(id);
      onGpu.delete(id);
      return true;
    },
  };
}
