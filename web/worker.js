// The engine worker: thread 0 of the pool and the owner of the wasm instance the page talks to. The page's
// main thread must never block (memory.atomic.wait traps there), so every call into the engine runs here and
// the page sends requests as messages: {id, op, ...args} -> {id, ok, result | error} (+ {id, progress}).
import { GpuBridge, hasJspi } from './gpu.js';
import { createSharedMemory, instantiate, isNode, parentChannel, readCString, readString, spawnWorker } from './runtime.js';
import { offsetOf as at, sizeOf } from './struct-layout.js';
import { ttsOps } from './tts-ops.js';
import { vadOps } from './vad-ops.js';

const HELPER_STACK_BYTES = 1 << 20;  // the same as thread 0's linker stack (-z stack-size)

let wasm = null;
let memory = null;
let nThreads = 1;
const helpers = [];
const gpu = new GpuBridge();  // the WebGPU device of this engine, opened on request (gpuInit)

async function init({ module, threads }) {
  memory = createSharedMemory();
  wasm = await instantiate(module, memory, 'thread 0', gpu);
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

// ---------------------------------------------------------------- the language model (api/sotto.h)

const models = new Map();  // handle -> { llm, bytesPtr, name }
let nextModel = 1;
const encoder = new TextEncoder();

function model(handle) {
  const m = models.get(handle);
  if (!m) throw new Error('sotto: this model was disposed');
  return m;
}

function lastError(llm) {
  return readCString(memory, wasm.sotto_llm_last_error(llm));
}

// Bytes (a string as UTF-8, or a Uint8Array as is) copied into a fresh wasm allocation; free it with sotto_free.
function toWasm(data) {
  const bytes = typeof data === 'string' ? encoder.encode(data) : data;
  const ptr = wasm.sotto_alloc(bytes.length);
  if (!ptr) throw new Error(`sotto: out of wasm memory (${bytes.length} bytes)`);
  new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
  return { ptr, bytes: bytes.length };
}

function idsToWasm(ids) {
  const ptr = wasm.sotto_alloc(Math.max(4, ids.length * 4));
  if (!ptr) throw new Error('sotto: out of wasm memory');
  new Int32Array(memory.buffer, ptr, ids.length).set(ids);
  return ptr;
}

// Calls a C API function that returns (const char*, *out_bytes) and reads the string (null -> the error).
function withOutString(llm, call) {
  const lenPtr = wasm.sotto_alloc(4);
  try {
    const ptr = call(lenPtr);
    if (!ptr) throw new Error(`sotto: ${lastError(llm)}`);
    return readString(memory, ptr, new Uint32Array(memory.buffer, lenPtr, 1)[0]);
  } finally {
    wasm.sotto_free(lenPtr);
  }
}

// Calls a C API function that writes token ids into (out, capacity) and returns how many there are (more than
// capacity: call again with that room; negative: the error), and reads them.
function withOutIds(llm, capacity, call) {
  for (;;) {
    const out = wasm.sotto_alloc(capacity * 4);
    try {
      const n = call(out, capacity);
      if (n < 0) throw new Error(`sotto: ${lastError(llm)}`);
      if (n <= capacity) return Array.from(new Int32Array(memory.buffer, out, n));
      capacity = n;
    } finally {
      wasm.sotto_free(out);
    }
  }
}

// Streams the file into wasm memory (the only full copy), then reads the model in place: the weights stay in
// those bytes, so the page holds the file once plus the KV cache and small buffers.
// device 'webgpu': the forward pass runs on this worker's GPU (sotto_llm_load_on with the WebGPU backend);
// the weights are uploaded from the same bytes, which stay for the tokenizer. device 'auto': the GPU when it
// opens and takes the model, else the CPU over the same bytes (read once either way); `fallback` says why.
// attention 'f32': on the GPU, attention sums the values in f32 (faster, not the CPU's bits; sotto.h
// SOTTO_GPU_ATTENTION_F32).
async function llmLoad({ source, nCtx = 0, tokenizerOnly = false, device = 'cpu', attention = 'f16' }, progress) {
  if (!['cpu', 'webgpu', 'auto'].includes(device)) throw new Error(`sotto: unknown device '${device}' (use 'cpu', 'webgpu' or 'auto')`);
  if (!['f16', 'f32'].includes(attention)) throw new Error(`sotto: unknown attention sum '${attention}' (use 'f16' or 'f32')`);
  let tryGpu = device !== 'cpu' && !tokenizerOnly;
  let fallback;
  if (tryGpu) {
    try {
      await gpu.open();
    } catch (e) {
      if (device === 'webgpu') throw new Error(`sotto: device 'webgpu': ${String(e?.message ?? e)}`);
      fallback = String(e?.message ?? e);
      tryGpu = false;
    }
  }
  const t0 = performance.now();
  const { ptr, size, name } = await loadIntoWasm(source, progress);
  const loadMs = performance.now() - t0;
  const open = (backend) => {
    const llm = wasm.sotto_llm_create();
    wasm.sotto_llm_set_gpu_options(llm, attention === 'f32' ? GPU_ATTENTION_F32 : 0);
    const status = tokenizerOnly ? wasm.sotto_llm_load_tokenizer(llm, ptr, size) : wasm.sotto_llm_load_on(llm, ptr, size, nCtx | 0, backend);
    if (status === 0) return { llm };
    const message = lastError(llm);
    wasm.sotto_llm_destroy(llm);
    return { message };
  };
  let opened = open(tryGpu ? BACKEND_WEBGPU : BACKEND_CPU);
  if (opened.message && tryGpu && device === 'auto') {
    fallback = opened.message;
    tryGpu = false;
    opened = open(BACKEND_CPU);
  }
  if (opened.message) {
    wasm.sotto_free(ptr);
    throw new Error(`sotto: ${name}: ${opened.message}`);
  }
  const { llm } = opened;
  const handle = nextModel++;
  models.set(handle, { llm, onGpu: tryGpu, bytesPtr: ptr, size, name, nCtx: nCtx | 0 });
  const info = JSON.parse(withOutString(llm, (len) => wasm.sotto_llm_info_json(llm, len)));
  if (tryGpu) info.gpu = { adapter: info.adapter, backend: info.gpu_backend, dispatches_per_token: info.dispatches_per_token, attention: info.attention_sum, n_ctx: info.n_ctx };
  return { handle, name, bytes: size, loadMs, readMs: performance.now() - t0 - loadMs, memoryBytes: memory.buffer.byteLength,
    ...info, device: tryGpu ? 'webgpu' : 'cpu', ...(fallback ? { fallback } : {}) };
}

function llmDispose({ handle }) {
  const m = models.get(handle);
  if (!m) return false;
  models.delete(handle);
  wasm.sotto_llm_destroy(m.llm);
  wasm.sotto_free(m.bytesPtr);
  return true;
}

// Moves a model from the GPU to the CPU (after a lost device, or on request): a CPU handle over the same
// bytes in wasm memory, so nothing is read again; the GPU handle goes. The KV cache starts empty.
function llmToCpu({ handle }) {
  const m = model(handle);
  if (m.onGpu) {
    const llm = wasm.sotto_llm_create();
    if (wasm.sotto_llm_load_on(llm, m.bytesPtr, m.size, m.nCtx, BACKEND_CPU) !== 0) {
      const message = lastError(llm);
      wasm.sotto_llm_destroy(llm);
      throw new Error(`sotto: ${m.name}: ${message}`);
    }
    wasm.sotto_llm_destroy(m.llm);
    Object.assign(m, { llm, onGpu: false });
  }
  const info = JSON.parse(withOutString(m.llm, (len) => wasm.sotto_llm_info_json(m.llm, len)));
  return { ...info, device: 'cpu' };
}

// Rolls the model's KV cache back to its first nPast positions (sotto_llm_rollback): a speculatively prefilled
// turn that is not wanted, undone exactly (nPast: the nPastBefore of the llmGenerate that prefilled it).
function llmRollback({ handle, nPast }) {
  const { llm } = model(handle);
  if (wasm.sotto_llm_rollback(llm, nPast) !== 0) throw new Error(`sotto: ${lastError(llm)}`);
  return true;
}

// Tests only: destroys this engine's GPU device, as a driver reset or a lost adapter would.
async function gpuLoseDevice() {
  const device = gpu.device;
  if (!device) return false;
  // Let the checks of earlier work settle first: a destroyed device never settles its open error scopes
  // (Dawn's Node binding then aborts at exit), and a real loss at an idle moment looks the same.
  await gpu.pending();
  device.destroy();
  await device.lost;  // gpu.js's own handler (registered first) has made the loss sticky by now
  return true;
}


function llmTokenize({ handle, text, addSpecial = true, parseSpecial = false }) {
  const { llm } = model(handle);
  const input = toWasm(text);
  try {
    return withOutIds(llm, input.bytes + 16, (out, capacity) =>
      wasm.sotto_llm_tokenize(llm, input.ptr, input.bytes, addSpecial ? 1 : 0, parseSpecial ? 1 : 0, out, capacity));
  } finally {
    wasm.sotto_free(input.ptr);
  }
}

function llmDetokenize({ handle, ids, removeSpecial = false, renderSpecial = true }) {
  const { llm } = model(handle);
  const ptr = idsToWasm(ids);
  try {
    return withOutString(llm, (len) => wasm.sotto_llm_detokenize(llm, ptr, ids.length, removeSpecial ? 1 : 0, renderSpecial ? 1 : 0, len));
  } finally {
    wasm.sotto_free(ptr);
  }
}

// One user turn's ids (sotto_llm_tokenize_turn): only the chat format's markup becomes control tokens; the
// system prompt and the user's text are plain text whatever they hold.
function llmTokenizeTurn({ handle, system = null, user, firstTurn, replyClosed }) {
  const { llm } = model(handle);
  const s = system === null ? null : toWasm(system);
  const u = toWasm(user);
  try {
    return withOutIds(llm, u.bytes + (s ? s.bytes : 0) + 64, (out, capacity) =>
      wasm.sotto_llm_tokenize_turn(llm, s ? s.ptr : 0, s ? s.bytes : 0, u.ptr, u.bytes, firstTurn ? 1 : 0,
                                   replyClosed ? 1 : 0, out, capacity));
  } finally {
    if (s) wasm.sotto_free(s.ptr);
    wasm.sotto_free(u.ptr);
  }
}

function llmFormatTurn({ handle, system = '', user, firstTurn, replyClosed }) {
  const { llm } = model(handle);
  const s = toWasm(system);
  const u = toWasm(user);
  try {
    return withOutString(llm, (len) => wasm.sotto_llm_format_turn(llm, s.ptr, s.bytes, u.ptr, u.bytes, firstTurn ? 1 : 0, replyClosed ? 1 : 0, len));
  } finally {
    wasm.sotto_free(s.ptr);
    wasm.sotto_free(u.ptr);
  }
}

// SottoSampling (api/sotto.h; offsets from struct-layout.js).
function writeSampling(ptr, o) {
  const d = new DataView(memory.buffer, ptr, sizeOf('SottoSampling'));
  const S = (field) => at('SottoSampling', field);
  d.setInt32(S('greedy'), o.greedy ? 1 : 0, true);
  d.setFloat32(S('temperature'), o.temperature ?? 0, true);  // greedy unless told otherwise (sotto_sampling_defaults)
  d.setInt32(S('top_k'), o.topK ?? 40, true);
  d.setFloat32(S('top_p'), o.topP ?? 0.95, true);
  d.setFloat32(S('min_p'), o.minP ?? 0.05, true);
  d.setFloat32(S('repeat_penalty'), o.repeatPenalty ?? 1, true);
  d.setInt32(S('repeat_last_n'), o.repeatLastN ?? 64, true);
  d.setInt32(S('max_new_tokens'), o.maxTokens ?? 64, true);
  d.setBigUint64(S('seed'), BigInt.asUintN(64, BigInt(o.seed ?? 0)), true);
}

const STOP_NAMES = ['', 'length', 'eog', 'stop_string', 'context_full'];

// sotto_llm_step answers PENDING on the GPU while the token's readback is in flight (api/sotto.h).
const PENDING = 100;
const BACKEND_CPU = 0;
const BACKEND_WEBGPU = 1;
const GPU_ATTENTION_F32 = 1;  // sotto.h SottoGpuOption

// SottoTimings (api/sotto.h; offsets from struct-layout.js) of the handle's last generation and its cache.
function timingsOf(llm) {
  const timings = wasm.sotto_alloc(sizeOf('SottoTimings'));
  try {
    wasm.sotto_llm_timings(llm, timings);
    const tv = new DataView(memory.buffer, timings, sizeOf('SottoTimings'));
    const T = (field) => at('SottoTimings', field);
    return {
      nPrompt: tv.getInt32(T('n_prompt'), true),
      nDecoded: tv.getInt32(T('n_decoded'), true),
      nPast: tv.getInt32(T('n_past'), true),
      nDropped: tv.getInt32(T('n_dropped'), true),
      prefillMs: tv.getFloat64(T('prefill_ms'), true),
      decodeMs: tv.getFloat64(T('decode_ms'), true),
      decodeTokensPerS: tv.getFloat64(T('decode_tokens_per_s'), true),
    };
  } finally {
    wasm.sotto_free(timings);
  }
}

// Prefills `promptIds`, then steps token by token, posting {id, text} for each as progress so the page sees
// tokens as they come. `cancel` (an Int32Array on a SharedArrayBuffer) set to 1 ends it after the current
// token. keepCache continues the conversation in the KV cache (the C API carries the last unprocessed token).
async function llmGenerate({ handle, promptIds, sampling = {}, stops = [], keepCache = false, cancel, prompt, resultJson, topLogprobs = 0, ignoreEos = false }, progress) {
  const m = model(handle);
  const { llm } = m;
  const ids = idsToWasm(promptIds);
  const params = wasm.sotto_alloc(sizeOf('SottoSampling'));
  const stopBytes = encoder.encode(stops.map((s) => `${s}\0`).join(''));
  const stopsIn = toWasm(stopBytes);
  const step = wasm.sotto_alloc(sizeOf('SottoStep'));
  const out = { ids: [], text: '', stop: '', promptIds };
  try {
    if (topLogprobs > 0)
      out.topLogprobs = JSON.parse(withOutString(llm, (len) => wasm.sotto_llm_top_logprobs(llm, ids, promptIds.length, topLogprobs, len)));
    writeSampling(params, sampling);
    wasm.sotto_llm_set_end_ids(llm, 0, ignoreEos ? 0 : -1);  // ignoreEos: only the length and stop strings end it
    out.nPastBefore = timingsOf(llm).nPast;  // where sotto_llm_rollback undoes this call
    const t0 = performance.now();
    if (wasm.sotto_llm_begin(llm, ids, promptIds.length, params, stopsIn.ptr, stopsIn.bytes, keepCache ? 1 : 0) !== 0)
      throw new Error(`sotto: ${lastError(llm)}`);
    out.beginMs = performance.now() - t0;  // the prefill on the CPU (prefillMs also counts a held wait after it)
    for (;;) {
      // cancel[1] = 1 (when the page passes two words) holds the loop here, between tokens, until it is 0 again
      // or the call is cancelled: the voice agent gives the cores to the first spoken piece's synthesis.
      while (cancel?.length > 1 && Atomics.load(cancel, 1) && !Atomics.load(cancel, 0)) Atomics.wait(cancel, 1, 1, 200);
      if (cancel && Atomics.load(cancel, 0)) {
        out.stop = 'cancelled';
        break;
      }
      let status = wasm.sotto_llm_step(llm, step);
      while (status === PENDING) {
        await gpu.pending();  // the token's readback completes only while this worker's event loop runs
        status = wasm.sotto_llm_step(llm, step);
      }
      if (status !== 0) throw new Error(`sotto: ${lastError(llm)}`);
      const sv = new DataView(memory.buffer, step, sizeOf('SottoStep'));
      const id = sv.getInt32(at('SottoStep', 'id'), true), done = sv.getInt32(at('SottoStep', 'done'), true);
      const stop = sv.getInt32(at('SottoStep', 'stop'), true);
      const textBytes = sv.getUint32(at('SottoStep', 'text_bytes'), true);
      const textPtr = sv.getUint32(at('SottoStep', 'text'), true);
      const text = textBytes ? readString(memory, textPtr, textBytes) : '';
      if (id >= 0) out.ids.push(id);
      out.text += text;
      if (id >= 0 || text) progress({ id, text });
      if (done) {
        out.stop = STOP_NAMES[stop];
        break;
      }
    }
    Object.assign(out, timingsOf(llm), { replyClosed: wasm.sotto_llm_reply_closed(llm) === 1 });
    if (resultJson) {
      const p = toWasm(prompt ?? '');
      try {
        out.json = withOutString(llm, (len) => wasm.sotto_llm_result_json(llm, p.ptr, p.bytes, len));
      } finally {
        wasm.sotto_free(p.ptr);
      }
    }
    return out;
  } finally {
    for (const ptr of [ids, params, stopsIn.ptr, step]) wasm.sotto_free(ptr);
  }
}

// ---------------------------------------------------------------- WebGPU (web/gpu.js, src/gpu/device_wasm.cpp)

async function gpuInit({ timestamps = true, powerPreference } = {}) {
  return gpu.open({ timestamps, powerPreference });
}

// Calls a wasm function that may answer Pending (1 in the int32 at `statusPtr`) while a readback is in
// flight: awaits the device's pending work and calls `again` until the status is no longer Pending.
async function untilSettled(statusPtr, again) {
  while (new Int32Array(memory.buffer, statusPtr, 1)[0] === 1) {
    await gpu.pending();
    again();
  }
}

// GpuSelftestResult (src/gpu/selftest_gpu_wasm.cpp): 3 i32/u32, 2 f32, u32, then a 248-byte message.
async function gpuSelftest({ n = 4096, seed = 0, mode = 0 } = {}) {
  const out = wasm.sotto_alloc(272);
  try {
    const t0 = performance.now();
    wasm.sotto_gpu_selftest_begin(n, seed || (Date.now() >>> 0), mode, out);
    await untilSettled(out, () => wasm.sotto_gpu_selftest_finish(out));
    const d = new DataView(memory.buffer, out, 272);
    return {
      status: ['ok', 'pending', 'error'][d.getInt32(0, true)],
      passed: d.getInt32(4, true) === 1,
      n: d.getUint32(8, true),
      maxAbsError: d.getFloat32(12, true),
      tolerance: d.getFloat32(16, true),
      overLimitRefused: d.getUint32(20, true) === 1,
      message: readCString(memory, out + 24),
      adapter: gpu.adapterInfo,
      ms: performance.now() - t0,
    };
  } finally {
    wasm.sotto_free(out);
  }
}

// Per-command GPU times of the last timed run (timestamp queries), once they have resolved.
async function gpuTimings() {
  await gpu.pending();
  return { timestamps: !!gpu.adapterInfo?.timestamps, timings: gpu.lastTimings };
}

// One decode step of a GPU model run with timestamp queries: the per-kernel view of the lab page.
// -> {timestamps, timings: [{label, ns}]} (one entry per dispatch, labelled by pipeline)
async function llmGpuProfile({ handle }) {
  const m = model(handle);
  if (!m.onGpu) throw new Error('sotto: this model runs on the CPU (load it with device: \'webgpu\')');
  if (wasm.sotto_llm_profile_step(m.llm) !== 0) throw new Error(`sotto: ${lastError(m.llm)}`);
  const names = JSON.parse(withOutString(m.llm, (len) => wasm.sotto_llm_plan_names_json(m.llm, len)));
  const { timestamps, timings } = await gpuTimings();
  // The plan's own names (which op each dispatch is) where they line up with the timed commands.
  const named = timings.length === names.length ? timings.map((x, i) => ({ label: names[i], kernel: x.label, ns: x.ns })) : timings;
  return { timestamps, timings: named };
}

// The op-by-op harness (src/models/llm/gpu/op_check.h) on this engine's device: it reads back synchronously, so it runs
// through WebAssembly.promising and suspends on each pending read. -> {ok, error | adapter, text, checks}
async function gpuOpCheck({ seed = 1, packedDot = true } = {}) {
  if (!hasJspi()) throw new Error('webgpu: the op harness needs JS Promise Integration (WebAssembly.Suspending; Chromium 137+), which this runtime lacks');
  const t0 = performance.now();
  const ptr = await WebAssembly.promising(wasm.sotto_gpu_op_check)(seed >>> 0, packedDot ? 1 : 0);
  if (!ptr) throw new Error('sotto: out of wasm memory');
  const text = readCString(memory, ptr);
  wasm.sotto_free(ptr);
  return { ...JSON.parse(text), ms: performance.now() - t0 };
}

// The quantized dot kernels against the scalar reference (src/wasm/kernel_check.cpp), and their time: one
// call over every row and token on this thread, best of `repeats`.
const GGML_TYPES = { q4_0: 2, q5_0: 6, q8_0: 8, q4_K: 12, q6_K: 14 };
function kernelCheck({ type = 'q4_0', rows = 256, cols = 1024, tokens = 1, seed = 0, repeats = 0 }) {
  if (!(type in GGML_TYPES)) throw new Error(`sotto: kernelCheck: unknown type '${type}' (known: ${Object.keys(GGML_TYPES).join(', ')})`);
  const handle = wasm.sotto_kernel_check_create(GGML_TYPES[type], rows, cols, tokens, (seed || (Date.now() >>> 0)) >>> 0);
  if (!handle) throw new Error(`sotto: kernelCheck: bad shape ${rows}x${cols}, ${tokens} tokens, or out of memory`);
  try {
    let bestMs = Infinity;
    for (let i = 0; i < repeats; i++) {
      const t0 = performance.now();
      wasm.sotto_kernel_check_run(handle);
      bestMs = Math.min(bestMs, performance.now() - t0);
    }
    const out = wasm.sotto_alloc(40);
    try {
      wasm.sotto_kernel_check_verify(handle, out);
      const [errorOverBound, tileMatchesSingle, piecesMatchWhole, boundFactor, digest] = new Float64Array(memory.buffer, out, 5);
      return { type, rows, cols, tokens, errorOverBound, boundFactor, tileMatchesSingle: tileMatchesSingle === 1, piecesMatchWhole: piecesMatchWhole === 1, digest, bestMs: repeats > 0 ? bestMs : null };
    } finally {
      wasm.sotto_free(out);
    }
  } finally {
    wasm.sotto_kernel_check_destroy(handle);
  }
}

// This build's attention kernel against the scalar reference on fresh random q, K and V (src/wasm/
// kernel_check.cpp): how many outputs differ in any bit (must be 0), the largest difference, and whether the
// relaxed build's fused multiply-add kernel ran.
function attentionCheck({ nQuery = 4, pos0 = 60, nHead = 4, nHeadKv = 2, headDimK = 64, headDimV = 64, seed = 0 }) {
  const out = wasm.sotto_alloc(24);
  try {
    const status = wasm.sotto_attention_check(nQuery, pos0, nHead, nHeadKv, headDimK, headDimV, (seed || (Date.now() >>> 0)) >>> 0, out);
    if (status !== 0) throw new Error(`sotto: attentionCheck: bad shape (${nQuery} queries after ${pos0}, ${nHead}/${nHeadKv} heads, dims ${headDimK}/${headDimV})`);
    const [differ, maxAbsDiff, fused] = new Float64Array(memory.buffer, out, 3);
    return { nQuery, pos0, nHead, nHeadKv, headDimK, headDimV, differ, maxAbsDiff, fusedMadd: fused === 1 };
  } finally {
    wasm.sotto_free(out);
  }
}

// The op layer's CPU kernels in this build against their scalar references (src/wasm/nn_check.cpp).
function nnCheck({ seed = 0 }) {
  const out = wasm.sotto_alloc(32);
  try {
    wasm.sotto_nn_check((seed || (Date.now() >>> 0)) >>> 0, out);
    const [failed, checks, worstExcess, worstCheck] = new Float64Array(memory.buffer, out, 4);
    return { failed, checks, worstExcess, worstCheck };
  } finally {
    wasm.sotto_free(out);
  }
}

const ops = { init, selftest, kernelCheck, attentionCheck, nnCheck, describe, gpuInit, gpuSelftest, gpuOpCheck, gpuTimings, gpuLoseDevice, llmGpuProfile, llmLoad, llmToCpu, llmDispose, llmTokenize, llmDetokenize, llmFormatTurn, llmTokenizeTurn, llmGenerate, llmRollback,
  ...vadOps(() => ({ wasm, memory, loadIntoWasm, gpu })),
  // Kokoro on this pool (web/tts.js with threads > 1): its int8 convs split across the helpers.
  ...ttsOps(() => ({ wasm, memory, loadIntoWasm, gpu })) };
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
