// Kokoro-82M v1.0 in WebAssembly under Node (`node web/cli.mjs speak`, web/tts.js): one or more wasm builds
// side by side, interleaved run by run so a loaded machine slows each alike, on 1 and 2 pool threads, for the
// short and the long sentence of bench/kokoro.mjs. Real-time factor = seconds of audio per second of compute
// (compute_ms: synthesis only, a cold first call, one process per run).
//
//   node bench/kokoro_wasm.mjs [--wasm A.wasm,B.wasm] [--threads 1,2] [--repeats 3] [--out FILE.md]
//
// The first build is the baseline of the ratio column (its time over each build's). Needs build/wasm-simd128
// and models/kokoro/ (scripts/get-models.sh kokoro).
import {spawnSync} from 'node:child_process';
import {writeFileSync} from 'node:fs';
import {cpus, loadavg} from 'node:os';
import {dirname, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

import {markdownTable, median} from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
const PHRASES = [
  'ðə kˈæt sˈæt.',
  'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.',
];

const o = {wasm: [`${ROOT}/build/wasm-simd128/sotto.wasm`], threads: [1, 2], repeats: 3, out: null};
for (let i = 2; i < process.argv.length; i += 2) {
  const [a, v] = [process.argv[i], process.argv[i + 1]];
  if (a === '--wasm') o.wasm = v.split(',');
  else if (a === '--threads') o.threads = v.split(',').map(Number);
  else if (a === '--repeats') o.repeats = Number(v);
  else if (a === '--out') o.out = v;
  else throw new Error(`unknown option ${a}`);
}

function speak(wasm, phonemes, threads) {
  const r = spawnSync(process.execPath, [
    ...process.execArgv, `${ROOT}/web/cli.mjs`, 'speak', '-m', MODEL, '--voice', 'af_heart', '--phonemes', phonemes, '-o',
    '/tmp/sotto_bench_kokoro_wasm.wav', '--json', '--threads', String(threads), '--wasm', wasm,
  ], {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`web/cli.mjs speak failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const load0 = loadavg();
const rows = [];
for (const threads of o.threads) {
  for (const phonemes of PHRASES) {
    const runs = o.wasm.map(() => []);
    for (let r = 0; r < o.repeats; r++)
      o.wasm.forEach((w, i) => runs[i].push(speak(w, phonemes, threads)));
    const base = median(runs[0].map((x) => x.compute_ms));
    o.wasm.forEach((w, i) => {
      const ms = median(runs[i].map((x) => x.compute_ms)), audioS = runs[i][0].audio_s;
      rows.push([String(threads), `${[...phonemes].length} phonemes`, w.replace(`${ROOT}/`, ''), audioS.toFixed(2),
        ms.toFixed(0), (audioS * 1000 / ms).toFixed(2), (base / ms).toFixed(2)]);
      console.error(`threads ${threads}, ${[...phonemes].length} phonemes, ${w}: ${ms.toFixed(0)} ms`);
    });
  }
}
const report = [
  `# Kokoro-82M v1.0 int8 in wasm (Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)})`, '',
  `${cpus()[0].model}, ${cpus().length} cores, load average ${load0.map((x) => x.toFixed(1)).join(' ')} at the start, ${
      loadavg().map((x) => x.toFixed(1)).join(' ')} at the end; median of ${o.repeats}, builds interleaved.`, '',
  markdownTable(['threads', 'input', 'wasm', 'audio s', 'ms', 'x real time', 'first build / this'], rows), '',
].join('\n');
if (o.out) writeFileSync(o.out, report);
console.log(report);
