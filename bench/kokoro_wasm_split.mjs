// Where a short piece's time goes in wasm (Node, one thread, the SIMD128 build): the text side, prosody and
// decoder (sotto_tts_stream_begin: everything before the vocoder) against the generator (one
// sotto_tts_stream_next over the whole piece: the same computation as sotto_tts_speak), per piece, median of
// --repeats after a warm-up, in wall time and in this process's CPU time (steadier on a shared machine).
//   node bench/kokoro_wasm_split.mjs [--repeats 3] [--wasm build/wasm-simd128/sotto.wasm]
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { median } from './report.mjs';
import { copyIntoWasm, ttsOps } from '../web/tts-ops.js';
import { createSharedMemory, instantiate } from '../web/runtime.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const repeats = Number(arg('--repeats', '3'));
const wasmPath = resolve(ROOT, arg('--wasm', 'build/wasm-simd128/sotto.wasm'));
const PIECES = ['The capital of France is', 'Sure, I can help!'];

const module = await WebAssembly.compile(await readFile(wasmPath));
const memory = createSharedMemory();
const wasm = await instantiate(module, memory, 'split');
wasm.__wasm_call_ctors();
const ops = ttsOps(() => ({ wasm, memory, loadIntoWasm: copyIntoWasm(wasm, memory) }));
const { tts } = await ops.ttsLoad({ model: `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx` });
await ops.ttsAddVoice({ tts, name: 'af_heart', source: `${ROOT}/models/kokoro/voices/af_heart.bin` });
await ops.ttsLoadG2p({ tts, source: `${ROOT}/models/g2p-en-us.bin` });
for (const text of PIECES) {
  const phonemes = ops.ttsPhonemize({ tts, voice: 'af_heart', text }).sentences.map((s) => s.phonemes).join(' ');
  const front = [], generator = [], frontCpu = [], generatorCpu = [];
  let warmCpu = 0;
  let samples = 0;
  for (let r = 0; r <= repeats; r++) {
    const c0 = process.cpuUsage();
    const b = await ops.ttsStreamBegin({ tts, voice: 'af_heart', phonemes, firstChunkMs: 60_000 });
    const c1 = process.cpuUsage();
    const n = await ops.ttsStreamNext({ tts });
    const c2 = process.cpuUsage();
    samples = n.audio.length;
    if (r === 0) {  // warm-up: sizes the tensor pool (and, on the first piece, makes the weights' layouts)
      warmCpu = (c2.user + c2.system - c0.user - c0.system) / 1e3;
      continue;
    }
    front.push(b.ms);
    generator.push(n.ms);
    frontCpu.push((c1.user + c1.system - c0.user - c0.system) / 1e3);
    generatorCpu.push((c2.user + c2.system - c1.user - c1.system) / 1e3);
  }
  const f = median(front), g = median(generator);
  console.log(`"${text}" (${(samples / 24000).toFixed(2)} s): before the vocoder ${f.toFixed(0)} ms, generator ` +
    `${g.toFixed(0)} ms (${((100 * g) / (f + g)).toFixed(0)} % of ${(f + g).toFixed(0)} ms); CPU time ` +
    `${median(frontCpu).toFixed(0)} + ${median(generatorCpu).toFixed(0)} ms (warm-up pass ${warmCpu.toFixed(0)} ms)`);
}
ops.ttsDispose({ tts });
