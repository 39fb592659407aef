// A pool helper: instantiates the engine's module on the shared memory, takes the stack and TLS block thread 0
// allocated for it, then lives inside sotto_worker_main(ith) (the thread pool's worker loop) until the pool
// is destroyed. It never receives a second message.
import { instantiate, parentChannel } from './runtime.js';

const parent = await parentChannel();
parent.onMessage(async ({ module, memory, ith, stackTop, tlsBase }) => {
  try {
    const wasm = await instantiate(module, memory, `helper ${ith}`);
    // Before any C++ runs: this instance's __stack_pointer still points at thread 0's stack.
    wasm.sotto_set_stack_pointer(stackTop);
    wasm.sotto_thread_init(tlsBase, ith);
    parent.post({ type: 'started', ith, tlsBase: wasm.sotto_thread_tls_base(), index: wasm.sotto_thread_index() });
    wasm.sotto_worker_main(ith);
    parent.post({ type: 'exited', ith });
  } catch (e) {
    parent.post({ type: 'error', ith, message: String(e?.stack ?? e) });
  }
});
