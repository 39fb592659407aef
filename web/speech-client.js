// The page's side of a dedicated speech worker (web/speech-worker.js): web/asr.js and web/tts.js start one
// each, so Moonshine and Kokoro run off the page's thread (the page, its VAD and playback stay responsive, and
// synthesis of one sentence overlaps the language model writing the next). Requests are messages
// {id, op, ...args} -> {id, ok, result | error} (+ {id, progress}), as with the engine worker (web/engine.js);
// an argument may therefore never be named `id` or `op`.
import { isNode, spawnWorker } from './runtime.js';

// The wasm module, compiled once here and sent to the worker (a WebAssembly.Module is structured-cloneable):
// the worker needs no URL of its own, which keeps the one-file build's Blob URLs on the page.
export async function compileWasm(url, fallbackUrl = null) {
  const read = async (u) => {
    if (isNode && u.protocol === 'file:') {
      const { readFile } = await import('node:fs/promises');
      return readFile(decodeURIComponent(u.pathname));
    }
    const response = await fetch(u);
    if (!response.ok) throw new Error(`sotto: ${u}: HTTP ${response.status}`);
    return response.arrayBuffer();
  };
  let bytes;
  try {
    bytes = await read(url);
  } catch (e) {
    if (!fallbackUrl) throw e;
    bytes = await read(fallbackUrl);  // a checkout with only the SIMD128 build
  }
  return WebAssembly.compile(bytes);
}

export class SpeechWorker {
  #worker;
  #nextId = 1;
  #pending = new Map();

  static async start() {
    return new SpeechWorker(await spawnWorker(new URL('./speech-worker.js', import.meta.url)));
  }

  constructor(worker) {
    this.#worker = worker;
    worker.onMessage((m) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      if (m.progress) return p.onProgress?.(m.progress);
      this.#pending.delete(m.id);
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(m.error));
    });
    worker.onError((e) => {
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    });
  }

  // (In Node the worker keeps the process alive until terminate(): Asr/Tts dispose() calls it.)
  // Requests run in order, one at a time, in the worker.
  call(op, args = {}, onProgress = null) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onProgress });
      this.#worker.post({ ...args, id, op });
    });
  }

  terminate() {
    for (const p of this.#pending.values()) p.reject(new Error('sotto: the speech worker was stopped'));
    this.#pending.clear();
    this.#worker.terminate();
  }
}
