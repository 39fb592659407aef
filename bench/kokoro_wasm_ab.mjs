// Kokoro in wasm, builds against each other in Node (worker_threads pool, as web/tts.js runs it outside a
// page): each build is one Tts of its own, called interleaved, build by build, on
//   first   the voice agent's first pieces streamed as the agent asks (first chunk 300 ms, 100 ms of the lead):
//           the time to the first chunk, the number the agent's first sound waits for;
//   whole   bench/kokoro.mjs's two sentences, speakPhonemes.
// Medians of --repeats after a warm-up; each build's process CPU is not separable (one process), so wall time
// only: interleaving is what makes the ratios fair on a shared machine. The audio of each call is hashed and
// the builds' hashes compared (exact arithmetic changes must give the same bits).
//
//   node --experimental-wasm-relaxed-simd bench/kokoro_wasm_ab.mjs --wasm A.wasm,B.wasm [--threads 2]
//        [--repeats 5] [--only first|whole]
import { createHash } from 'node:crypto';
import { loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { median } from './report.mjs';
import { BENCH_PHRASES } from '../tools/kokoro_inputs.mjs';
import { Tts } from '../web/tts.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const builds = arg('--wasm', 'build/wasm-relaxed/sotto.wasm').split(',');
const threads = Number(arg('--threads', '2'));
const repeats = Number(arg('--repeats', '5'));
const only = arg('--only', null);
const PIECES = ['The capital of France is', 'Sure, I can help!', 'Hello! How can I help', 'I am doing well,'];

const hash = (a) => createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex').slice(0, 12);
const load0 = loadavg();
const model = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
const engines = [];
for (const b of builds) engines.push(await Tts.load(model, { threads, wasmUrl: resolve(b), variant: 'relaxed' }));
const cases = [];
if (only !== 'whole') {
  for (const text of PIECES) {
    const phonemes = (await engines[0].sentences(text)).map((s) => s.phonemes).join(' ');
    cases.push({ name: `first chunk "${text}"`, run: async (tts) => {
      const t0 = performance.now();
      for await (const c of tts.streamPhonemes(phonemes, { firstChunkMs: 300, leadMs: 100 })) {
        return { ms: performance.now() - t0, audio: c.audio };  // leaving early abandons the rest
      }
    } });
  }
}
if (only !== 'first') {
  for (const phonemes of BENCH_PHRASES) {
    cases.push({ name: `whole ${[...phonemes].length} phonemes`, run: async (tts) => {
      const t0 = performance.now();
      const r = await tts.speakPhonemes(phonemes);
      return { ms: performance.now() - t0, audio: r.audio };
    } });
  }
}
for (const tts of engines) for (const c of cases) await c.run(tts);  // warm-up: weight layouts, tensor pool
const times = cases.map(() => engines.map(() => []));
const hashes = cases.map(() => engines.map(() => new Set()));
for (let r = 0; r < repeats; r++) {
  for (const [ci, c] of cases.entries()) {
    for (const [ei, tts] of engines.entries()) {
      const { ms, audio } = await c.run(tts);
      times[ci][ei].push(ms);
      hashes[ci][ei].add(hash(audio));
    }
  }
}
const load1 = loadavg();
console.log(`threads ${threads}, median of ${repeats}, load ${load0.map((l) => l.toFixed(2)).join(' ')} -> ` +
  `${load1.map((l) => l.toFixed(2)).join(' ')}`);
console.log(`| case | ${builds.map((b, i) => `${i ? `B${i}` : 'A'} ms`).join(' | ')} | ${builds.slice(1).map((_, i) => `B${i + 1} / A`).join(' | ')} | audio |`);
console.log(`|---|${builds.map(() => '---:').join('|')}|${builds.slice(1).map(() => '---:').join('|')}|---|`);
for (const [ci, c] of cases.entries()) {
  const m = times[ci].map(median);
  const same = hashes[ci].every((h) => h.size === 1 && [...h][0] === [...hashes[ci][0]][0]);
  console.log(`| ${c.name} | ${m.map((x) => x.toFixed(0)).join(' | ')} | ${m.slice(1).map((x) => (x / m[0]).toFixed(3)).join(' | ')} | ` +
    `${same ? 'same bits' : hashes[ci].map((h) => [...h].join('/')).join(' vs ')} |`);
}
for (const tts of engines) await tts.dispose();
process.exit(0);
