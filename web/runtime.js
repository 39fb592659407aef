// What the page's engine, its workers and the Node CLI share: loading the module onto the shared memory,
// the functions the module imports, and a few portability shims (browser Web Workers vs Node worker_threads).
import { GpuBridge } from './gpu.js';

export const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

// Must match --initial-memory in cmake/wasm.cmake (16 MiB): an imported memory may not be smaller than the
// module declares. The maximum is 4 GiB (wasm32's limit); smaller ones are tried if the host refuses it.
export const INITIAL_PAGES = 256;
const MAXIMUM_PAGES = [65536, 32768, 16384];

export function createSharedMemory() {
  let lastError;
  for (const maximum of MAXIMUM_PAGES) {
    try {
      return new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum, shared: true });
    } catch (e) {
      lastError = e;
    }
  }
  throw new Error(`sotto: cannot create a shared WebAssembly.Memory (${lastError})`);
}

// Text out of wasm memory. TextDecoder refuses views of a SharedArrayBuffer, so copy the bytes first (slice).
export function readString(memory, ptr, len) {
  return new TextDecoder().decode(new Uint8Array(memory.buffer, ptr, len).slice());
}

export function readCString(memory, ptr) {
  const bytes = new Uint8Array(memory.buffer);
  let end = ptr;
  while (bytes[end] !== 0) end++;
  return readString(memory, ptr, end - ptr);
}

// The module's imports: its memory, a log line sink, a clock (timings), abort, which throws so the failure
// reaches JS, and the WebGPU device seam (web/gpu.js; `gpu` is the engine worker's GpuBridge, and instances
// without one get imports that fail cleanly).
export function makeImports(memory, label, gpu = null) {
  let pending = '';
  return {
    env: {
      memory,
      sotto_js_log(ptr, len) {
        pending += readString(memory, ptr, len);
        let nl;
        while ((nl = pending.indexOf('\n')) >= 0) {
          console.log(`[sotto ${label}] ${pending.slice(0, nl)}`);
          pending = pending.slice(nl + 1);
        }
      },
      sotto_js_now_ms() {
        return performance.now();
      },
      sotto_js_abort(ptr, len) {
        throw new Error(`sotto (${label}): ${readString(memory, ptr, len)}`);
      },
      ...(gpu ?? new GpuBridge()).imports(memory),
    },
  };
}

// Instantiating runs wasm-ld's __wasm_init_memory, which fills the data segments only on the first instance.
export async function instantiate(module, memory, label, gpu = null) {
  return (await WebAssembly.instantiate(module, makeImports(memory, label, gpu))).exports;
}

// One message channel per worker, the same shape on both platforms: { post(msg, transfer), onMessage(fn) }.
export async function spawnWorker(url) {
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url);
    return {
      post: (m, t) => w.postMessage(m, t),
      onMessage: (fn) => w.on('message', fn),
      onError: (fn) => w.on('error', fn),
      terminate: () => w.terminate(),
      unref: () => w.unref(),
    };
  }
  const w = new Worker(url, { type: 'module' });
  return {
    post: (m, t) => w.postMessage(m, t),
    onMessage: (fn) => w.addEventListener('message', (e) => fn(e.data)),
    onError: (fn) => w.addEventListener('error', (e) => fn(e.error ?? new Error(e.message))),
    terminate: () => w.terminate(),
    unref: () => {},
  };
}

// Requests to a worker as promises: {id, op, ...args} -> {id, ok, result | error, stack} (+ {id, progress} on
// the way). The request's own id and op are written last, so no argument can overwrite them. Used for the
// engine worker (web/engine.js) and the speech workers (web/speech-client.js).
export class WorkerClient {
  #worker;
  #nextId = 1;
  #pending = new Map();

  constructor(worker) {
    this.#worker = worker;
    worker.onMessage((m) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      if (m.progress) return p.onProgress?.(m.progress);
      this.#pending.delete(m.id);
      if (m.ok) p.resolve(m.result);
      else p.reject(Object.assign(new Error(m.error), { workerStack: m.stack }));
    });
    worker.onError((e) => this.#rejectAll(e));
  }

  call(op, args = {}, onProgress = null) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onProgress });
      this.#worker.post({ ...args, id, op });
    });
  }

  // Stops the worker; with a reason, requests still waiting are rejected with it.
  terminate(reason = null) {
    if (reason) this.#rejectAll(reason);
    this.#worker.terminate();
  }

  #rejectAll(e) {
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
  }
}

// The current worker's link to whoever started it.
export async function parentChannel() {
  if (isNode) {
    const { parentPort } = await import('node:worker_threads');
    return { post: (m, t) => parentPort.postMessage(m, t), onMessage: (fn) => parentPort.on('message', fn) };
  }
  return {
    post: (m, t) => self.postMessage(m, t),
    onMessage: (fn) => self.addEventListener('message', (e) => fn(e.data)),
  };
}

// Relaxed SIMD is used only where the engine validates this module: one function that runs
// i8x16.relaxed_swizzle (opcode 0xfd 0x100) on two v128 constants.
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of type 0
  0x0a, 0x2b, 0x01, 0x29, 0x00, // code: one body of 41 bytes, no locals
  0xfd, 0x0c, ...new Array(16).fill(0), // v128.const 0
  0xfd, 0x0c, ...new Array(16).fill(0), // v128.const 0
  0xfd, 0x80, 0x02, // i8x16.relaxed_swizzle
  0x0b, // end
]);

export function hasRelaxedSimd() {
  try {
    return WebAssembly.validate(RELAXED_PROBE);
  } catch {
    return false;
  }
}
