// sotto's JS API. The engine runs in a worker (web/worker.js), thread 0 of a pool whose helpers are further
// workers on the same shared WebAssembly.Memory; this module only compiles the wasm, starts that worker and
// turns messages into promises. It works in a page (needs crossOriginIsolated) and in Node (worker_threads).
//
//   const engine = await Engine.create({ threads: 4 });       // picks the relaxed-SIMD build when it validates
//   await engine.selftest();                                  // threaded SIMD kernels vs scalar reference
//   await engine.describe(file, { onProgress });               // a File/Blob, URL, or (Node) path -> info table
//   await engine.gpu();                                        // WebGPU in the engine worker (web/gpu.js)
//   await engine.gpuSelftest(); await engine.gpuOpCheck();     // the device seam; every kernel vs the CPU
import { hasRelaxedSimd, isNode, spawnWorker, WorkerClient } from './runtime.js';

const WASM_URLS = {
  simd128: new URL('../build/wasm-simd128/sotto.wasm', import.meta.url),
  relaxed: new URL('../build/wasm-relaxed/sotto.wasm', import.meta.url),
};

async function compileModule(url) {
  if (isNode && url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return WebAssembly.compile(await readFile(url));
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`sotto: ${url}: HTTP ${response.status}`);
  return WebAssembly.compileStreaming ? WebAssembly.compileStreaming(response) : WebAssembly.compile(await response.arrayBuffer());
}

export function defaultThreads() {
  const cores = isNode ? (globalThis.navigator?.hardwareConcurrency ?? 4) : navigator.hardwareConcurrency || 4;
  return Math.max(1, Math.min(cores, 8));
}

export class Engine {
  // variant: 'relaxed' | 'simd128' | undefined (auto). Node always gets simd128: Node 20 mis-executes relaxed
  // integer dot products.
  static async create({ threads = defaultThreads(), variant, wasmUrl } = {}) {
    if (!isNode && !globalThis.crossOriginIsolated) {
      throw new Error('sotto: the page is not cross-origin isolated (serve it with COOP/COEP headers)');
    }
    const chosen = variant ?? (!isNode && hasRelaxedSimd() ? 'relaxed' : 'simd128');
    if (!WASM_URLS[chosen]) throw new Error(`sotto: unknown wasm variant '${chosen}'`);
    const url = wasmUrl ? new URL(wasmUrl, isNode ? `file://${process.cwd()}/` : location.href) : WASM_URLS[chosen];
    const module = await compileModule(url);
    const worker = await spawnWorker(new URL('./worker.js', import.meta.url));
    const engine = new Engine(worker);
    engine.info = { ...(await engine.#call('init', { module, threads })), wasmUrl: String(url) };
    return engine;
  }

  #worker;

  constructor(worker) {
    this.#worker = new WorkerClient(worker);
  }

  #call(op, args = {}, onProgress) {
    return this.#worker.call(op, args, onProgress);
  }

  // {passed, threads, rows, cols, maxAbsError, tolerance, checksum, checksumRef, rowsPerThreadMin, ms}
  selftest({ rows, cols, seed, repeats } = {}) {
    return this.#call('selftest', { rows, cols, seed, repeats });
  }

  // The build's quantized dot kernels against the scalar reference on fresh random data (src/wasm/
  // kernel_check.cpp); repeats > 0 also times one single-threaded call. type: q4_0 | q5_0 | q8_0 | q4_K | q6_K.
  // -> {type, rows, cols, tokens, errorOverBound (<= 1 passes), boundFactor, tileMatchesSingle,
  // piecesMatchWhole, bestMs}
  kernelCheck({ type, rows, cols, tokens, seed, repeats } = {}) {
    return this.#call('kernelCheck', { type, rows, cols, tokens, seed, repeats });
  }

  // This build's attention kernel against the scalar reference, bit for bit (src/wasm/kernel_check.cpp).
  // -> {differ (outputs not bit-identical: 0 passes), maxAbsDiff, fusedMadd, ...the shape}
  attentionCheck({ nQuery, pos0, nHead, nHeadKv, headDimK, headDimV, seed } = {}) {
    return this.#call('attentionCheck', { nQuery, pos0, nHead, nHeadKv, headDimK, headDimV, seed });
  }

  // The op layer's CPU kernels in this build against their scalar references on fresh random inputs
  // (src/wasm/nn_check.cpp). -> {failed (0 passes), checks, worstExcess (<= 0 passes), worstCheck}
  nnCheck({ seed } = {}) {
    return this.#call('nnCheck', { seed });
  }

  // {ok, name, bytes, loadMs, describeMs, format, metadata:[{key,type,value,text}], tensors:[{name,dtype,shape,
  // offset,bytes}]} or {ok:false, error}. `source` streams into wasm memory; it is never copied whole in JS.
  describe(source, { onProgress } = {}) {
    return this.#call('describe', { source: source instanceof URL ? String(source) : source }, onProgress);
  }

  // Opens WebGPU in the engine worker (navigator.gpu, or npm `webgpu` in Node) for the GPU backend.
  // -> {description, backend, features, shaderF16, subgroups, timestamps, packedDot, limits}
  gpu({ timestamps = true, powerPreference } = {}) {
    return this.#call('gpuInit', { timestamps, powerPreference });
  }

  // The WebGPU smoke test: C++ in wasm drives the device through the seam (src/gpu/selftest_gpu_wasm.cpp).
  // -> {status, passed, n, maxAbsError, tolerance, overLimitRefused, message, adapter, ms}
  gpuSelftest({ n, seed, mode } = {}) {
    return this.#call('gpuSelftest', { n, seed, mode });
  }

  // The op-by-op cross-backend harness (src/models/llm/gpu/op_check.h) on this engine's GPU; needs JSPI (Chromium).
  // -> {ok, error | adapter, packed_dot, text, checks: [{op, shape, error, tolerance, passed}], ms}
  gpuOpCheck({ seed, packedDot } = {}) {
    return this.#call('gpuOpCheck', { seed, packedDot });
  }

  // GPU time per command of the last timed run: {timestamps, timings: [{label, ns}]} (copies read 0).
  gpuTimings() {
    return this.#call('gpuTimings');
  }

  // A request to the engine worker by name (web/worker.js `ops`); web/llm.js uses it.
  call(op, args = {}, onProgress) {
    return this.#call(op, args, onProgress);
  }

  terminate() {
    this.#worker.terminate();
  }
}
