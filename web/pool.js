// A thread pool for a wasm instance that is not the engine worker's: thread 0 is the calling worker (which
// must not be a page's main thread: memory.atomic.wait traps there), helpers 1..n-1 are Web Workers
// (helper-worker.js) on the same module and shared memory, as web/worker.js starts them for the engine.
// The speech worker's recognition uses it (web/asr.js with threads > 1).
import { spawnWorker } from './runtime.js';

const HELPER_STACK_BYTES = 1 << 20;  // the same as thread 0's linker stack (-z stack-size)

// -> the pool's thread count (sotto_pool_create may give fewer than asked).
export async function startPool(wasm, memory, module, threads) {
  const n = wasm.sotto_pool_create(Math.max(1, threads | 0));
  const started = [];
  for (let ith = 1; ith < n; ith++) {
    const block = wasm.sotto_thread_alloc(HELPER_STACK_BYTES);
    if (!block) throw new Error('sotto: out of memory allocating a worker stack');
    const [stackTop, tlsBase] = new Uint32Array(memory.buffer, block, 2);
    const helper = await spawnWorker(new URL('./helper-worker.js', import.meta.url));
    helper.unref();  // Node: helpers alone must not keep the process alive
    started.push(new Promise((resolve, reject) => {
      helper.onMessage((m) => {
        if (m.type === 'started') resolve(m);
        if (m.type === 'error') reject(new Error(m.message));
      });
      helper.onError(reject);
    }));
    helper.post({ module, memory, ith, stackTop, tlsBase });
  }
  await Promise.all(started);
  return n;
}
