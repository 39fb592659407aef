// The engine worker: thread 0 of the pool and the owner of the wasm instance the page talks to. The page's
// main thread must never block (memory.atomic.wait traps there), so every call into the engine runs here and
// the page sends requests as messages: {id, op, ...args} -> {id, ok, result | error} (+ {id, progress}).
import { createSharedMemory, instantiate, isNode, parentChannel, readCString, spawnWorker } from './runtime.js';

const HELPER_STACK_BYTES = 1 << 20;  // the same as thread 0's linker stack (-z stack-size)

let wasm = null;
let memory = null;
let nThreads = 1;
const helpers = [];

async function init({ module, threads }) {
  memory = createSharedMemory();
  wasm = await instantiate(module, memory, 'thread 0');
  wasm.__wasm_call_ctors();  // once, for the whole memory: static constructors write shared data
  nThreads = wasm.sotto_pool_create(Math.max(1, threads | 0));
  const started = [];
  for (let ith = 1; ith < nThreads; ith++) {
    const block = wasm.sotto_thread_alloc(HELPER_STACK_BYTES);
    if (!block) throw new Error('sotto: out of memory allocating a worker stack');
    const [stackTop, tlsBase] = new Uint32Array(memory.buffer, block, 2);
    const helper = await spawnWorker(new URL('./helper-worker.js', import.meta.url));
    helper.unref();  // Node: helpers alone must not keep the process alive
    helpers.push({ helper, block });
    started.push(
      new Promise((resolve, reject) => {
        helper.onMessage((m) => {
          if (m.type === 'started') resolve(m);
          if (m.type === 'error') reject(new Error(m.message));
        });
        helper.onError(reject);
      }),
    );
    helper.post({ module, memory, ith, stackTop, tlsBase });
  }
  const helperInfo = await Promise.all(started);
  return {
    threads: nThreads,
    simdLevel: wasm.sotto_simd_level(),
    variant: wasm.sotto_simd_level() === 2 ? 'relaxed' : 'simd128',
    tlsBases: [wasm.sotto_thread_tls_base(), ...helperInfo.map((h) => h.tlsBase)],
    threadIndices: [wasm.sotto_thread_index(), ...helperInfo.map((h) => h.index)],
    memoryBytes: memory.buffer.byteLength,
  };
}

// SelftestResult (src/wasm/selftest_wasm.h): 4 i32, 2 f32, 4 u32, then 2 f64 and 2 f32 (64 bytes).
function selftest({ rows = 512, cols = 1024, seed = 0, repeats = 1 }) {
  const out = wasm.sotto_alloc(64);
  try {
    const t0 = performance.now();
    for (let i = 0; i < repeats; i++) wasm.sotto_selftest(rows, cols, (seed || (Date.now() >>> 0)) + i, out);
    const ms = (performance.now() - t0) / repeats;
    const i32 = new Int32Array(memory.buffer, out, 10);
    const u32 = new Uint32Array(memory.buffer, out, 10);
    const f32 = new Float32Array(memory.buffer, out, 16);
    const f64 = new Float64Array(memory.buffer, out, 8);
    return {
      passed: i32[0] === 1,
      threads: i32[1],
      rows: i32[2],
      cols: i32[3],
      maxAbsError: f32[4],
      tolerance: f32[5],
      checksum: u32[6],
      checksumRef: u32[7],
      rowsPerThreadMin: u32[8],
      q8Checksum: f64[5],
      q8Checksum1Thread: f64[6],
      q8MaxAbsError: f32[14],
      q8Tolerance: f32[15],
      ms,
    };
  } finally {
    wasm.sotto_free(out);
  }
}

// Streams a file into one sotto_alloc'd buffer: chunk by chunk from a Blob, a URL or (Node) a path, so the
// only full copy is the one in wasm memory. Unknown lengths grow the buffer by doubling.
async function loadIntoWasm(source, onProgress) {
  let reader;
  let total = 0;
  let name = '';
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    reader = source.stream().getReader();
    total = source.size;
    name = source.name ?? 'blob';
  } else if (isNode && typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)) {
    const fs = await import('node:fs');
    total = fs.statSync(source).size;
    name = source;
    const stream = fs.createReadStream(source, { highWaterMark: 1 << 22 });
    const it = stream[Symbol.asyncIterator]();
    reader = { read: async () => it.next() };
  } else {
    const response = await fetch(source);
    if (!response.ok) throw new Error(`sotto: ${source}: HTTP ${response.status}`);
    total = Number(response.headers.get('content-length') ?? 0);
    if (response.headers.get('content-encoding')) total = 0;  // the length is of the compressed body
    name = String(source);
    reader = response.body.getReader();
  }
  let capacity = total > 0 ? total : 1 << 20;
  let ptr = wasm.sotto_alloc(capacity);
  if (!ptr) throw new Error(`sotto: cannot allocate ${capacity} bytes in wasm memory for ${name}`);
  let size = 0;
  let lastReport = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const chunk = value instanceof Uint8Array ? value : new Uint8Array(value);
    if (size + chunk.length > capacity) {
      let bigger = capacity;
      while (bigger < size + chunk.length) bigger *= 2;
      const moved = wasm.sotto_alloc(bigger);
      if (!moved) throw new Error(`sotto: cannot allocate ${bigger} bytes in wasm memory for ${name}`);
      new Uint8Array(memory.buffer).copyWithin(moved, ptr, ptr + size);
      wasm.sotto_free(ptr);
      ptr = moved;
      capacity = bigger;
    }
    new Uint8Array(memory.buffer, ptr + size, chunk.length).set(chunk);  // memory.buffer: it may have grown
    size += chunk.length;
    if (onProgress && size - lastReport >= 1 << 22) {
      lastReport = size;
      onProgress({ bytes: size, total });
    }
  }
  onProgress?.({ bytes: size, total: total || size });
  return { ptr, size, name };
}

async function describe({ source }, progress) {
  const t0 = performance.now();
  const { ptr, size, name } = await loadIntoWasm(source, progress);
  const loadMs = performance.now() - t0;
  try {
    const json = wasm.sotto_describe(ptr, size);
    const text = readCString(memory, json);
    wasm.sotto_free(json);
    return { name, bytes: size, loadMs, describeMs: performance.now() - t0 - loadMs, ...JSON.parse(text) };
  } finally {
    wasm.sotto_free(ptr);
  }
}

const ops = { init, selftest, describe };
const parent = await parentChannel();
// Requests run one at a time: the engine is single-threaded at the API level (the pool is inside a call).
let queue = Promise.resolve();
parent.onMessage((msg) => {
  queue = queue.then(async () => {
    const progress = (p) => parent.post({ id: msg.id, progress: p });
    try {
      if (!ops[msg.op]) throw new Error(`sotto: unknown request '${msg.op}'`);
      if (msg.op !== 'init' && !wasm) throw new Error('sotto: engine not initialised');
      parent.post({ id: msg.id, ok: true, result: await ops[msg.op](msg, progress) });
    } catch (e) {
      parent.post({ id: msg.id, ok: false, error: String(e?.message ?? e), stack: String(e?.stack ?? '') });
    }
  });
});
