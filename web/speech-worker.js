// A dedicated worker for speech recognition (Moonshine, web/asr.js) or synthesis (Kokoro, web/tts-ops.js): one
// wasm instance of its own (recognition's with a pool of `threads`, web/pool.js; synthesis's one thread). The page (web/speech-client.js) starts one per model; calls into the
// engine block this worker for their whole length (a sentence of Kokoro is seconds), never the page.
import { Asr } from './asr.js';
import { copyIntoWasm, ttsOps } from './tts-ops.js';
import { createSharedMemory, instantiate, parentChannel } from './runtime.js';

let wasm = null;
let memory = null;
let asr = null;

const ops = {
  // Synthesis: the instance tts-ops runs on.
  async init({ module }) {
    memory = createSharedMemory();
    wasm = await instantiate(module, memory, 'speech worker');
    wasm.__wasm_call_ctors();
    return { threads: 1 };
  },
  // Recognition: web/asr.js's own instance, inline here.
  async asrLoad({ dir, vad, module, threads = 1 }, progress) {
    asr = await Asr.load(dir, { module, vad, worker: false, threads, onProgress: progress });
    return { threads: asr.threads };
  },
  asrTranscribe({ samples }) {
    return asr.transcribe(samples);
  },
  asrDecodeWav({ source }) {
    return asr.decodeWav(source);
  },
  asrDispose() {
    asr?.dispose();
    asr = null;
    return true;
  },
  ...ttsOps(() => ({ wasm, memory, loadIntoWasm: copyIntoWasm(wasm, memory) })),
};

const parent = await parentChannel();
let queue = Promise.resolve();
parent.onMessage((msg) => {
  queue = queue.then(async () => {
    try {
      if (!ops[msg.op]) throw new Error(`sotto: unknown speech worker request '${msg.op}'`);
      const result = await ops[msg.op](msg, (p) => parent.post({ id: msg.id, progress: p }));
      // Audio goes back by transfer, not by copy.
      const buffer = result?.audio?.buffer ?? (result instanceof Float32Array ? result.buffer : null);
      parent.post({ id: msg.id, ok: true, result }, buffer ? [buffer] : []);
    } catch (e) {
      parent.post({ id: msg.id, ok: false, error: String(e?.message ?? e) });
    }
  });
});
