// The page's side of a dedicated speech worker (web/speech-worker.js): web/asr.js and web/tts.js start one
// each, so Moonshine and Kokoro run off the page's thread (the page, its VAD and playback stay responsive, and
// synthesis of one sentence overlaps the language model writing the next). Requests go through
// runtime.js's WorkerClient, as the engine worker's do (web/engine.js).
import { isNode, spawnWorker, WorkerClient } from './runtime.js';

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

// One speech worker: requests run in order, one at a time, in it. (In Node the worker keeps the process alive
// until terminate(): Asr/Tts dispose() calls it.)
export class SpeechWorker extends WorkerClient {
  static async start() {
    return new SpeechWorker(await spawnWorker(new URL('./speech-worker.js', import.meta.url)));
  }

  terminate() {
    super.terminate(new Error('sotto: the speech worker was stopped'));
  }
}
