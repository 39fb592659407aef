// Two or more native `sotto` binaries on the same Kokoro work, interleaved (order rotated each round), for
// before/after figures on a shared machine: per binary and thread count, the median of `sotto speak --json`'s
// compute_ms and first_audio_ms (a streamed 3-sentence paragraph: the first sentence's audio is written before
// the rest is computed) and of the process's CPU time (user + sys from /usr/bin/time: loading and the warm-up
// are in it, the same work for every binary, so differences are the pass's).
//
//   node bench/kokoro_ab.mjs --bins /tmp/base/sotto,build/bin/sotto [--threads 1,2] [--repeats 5] [--stream]
//       [--out FILE.md]
//
// --stream: `sotto speak --stream` at its defaults (the voice agent's way: the first 300 ms of speech after 100 ms
// of the leading pause, then doubling chunks), so first audio ms is the first chunk's.
import {spawnSync} from 'node:child_process';
import {writeFileSync} from 'node:fs';
import {loadavg} from 'node:os';
import {dirname, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

import {markdownTable, median} from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
// bench/kokoro.mjs's paragraph (first sound) and its longer phrase (4.9 s: speed).
const INPUTS = {
  paragraph: 'ðə kˈæt sˈæt. həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən. ðə kˈæt sˈæt.',
};

function parseArgs(argv) {
  const o = {bins: [], threads: [1, 2], repeats: 5, out: null, stream: false};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--stream') {
      o.stream = true;
      continue;
    }
    const v = argv[++i];
    if (a === '--bins')
      o.bins = v.split(',');
    else if (a === '--threads')
      o.threads = v.split(',').map(Number);
    else if (a === '--repeats')
      o.repeats = Number(v);
    else if (a === '--out')
      o.out = v;
    else
      throw new Error(`unknown option ${a}`);
  }
  if (o.bins.length < 1) throw new Error('--bins A,B: the sotto binaries to compare');
  return o;
}

function run(bin, phonemes, threads, stream) {
  const r = spawnSync(
      '/usr/bin/time',
      [
        '-f', 'CPU %U %S', bin, 'speak', '-m', MODEL, '--voice', 'af_heart', '--phonemes', phonemes, '-o',
        '/tmp/sotto_kokoro_ab.wav', '--json', '--threads', String(threads), ...(stream ? ['--stream'] : [])
      ],
      {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`${bin} speak failed: ${r.stderr}`);
  const cpu = r.stderr.match(/CPU ([\d.]+) ([\d.]+)/);
  const j = JSON.parse(r.stdout);
  return {...j, cpu_ms: (Number(cpu[1]) + Number(cpu[2])) * 1000};
}

const o = parseArgs(process.argv.slice(2));
const loadStart = loadavg().map((x) => x.toFixed(1)).join(' ');
const results = new Map();  // key -> runs
for (let r = 0; r < o.repeats; r++) {
  for (const threads of o.threads) {
    for (let b = 0; b < o.bins.length; b++) {
      const bin = o.bins[(b + r) % o.bins.length];
      for (const [name, phonemes] of Object.entries(INPUTS)) {
        const key = `${bin}|${threads}|${name}`;
        if (!results.has(key)) results.set(key, []);
        results.get(key).push(run(bin, phonemes, threads, o.stream));
      }
    }
  }
  console.error(`round ${r + 1}/${o.repeats} done, load ${loadavg()[0].toFixed(1)}`);
}
const loadEnd = loadavg().map((x) => x.toFixed(1)).join(' ');
const rows = [];
for (const threads of o.threads)
  for (const name of Object.keys(INPUTS)) {
    const base = results.get(`${o.bins[0]}|${threads}|${name}`);
    const m = (runs, f) => median(runs.map(f));
    for (const bin of o.bins) {
      const runs = results.get(`${bin}|${threads}|${name}`);
      rows.push([
        threads, name, bin, runs[0].audio_s.toFixed(2), m(runs, (x) => x.first_audio_ms).toFixed(0),
        m(runs, (x) => x.compute_ms).toFixed(0), m(runs, (x) => x.cpu_ms).toFixed(0),
        (m(runs, (x) => x.first_audio_ms) / m(base, (x) => x.first_audio_ms)).toFixed(2),
        (m(runs, (x) => x.compute_ms) / m(base, (x) => x.compute_ms)).toFixed(2),
        (m(runs, (x) => x.cpu_ms) / m(base, (x) => x.cpu_ms)).toFixed(2)
      ]);
    }
  }
const report = [
  `Load average ${loadStart} at the start, ${loadEnd} at the end; median of ${o.repeats}, binaries interleaved (order rotated each round).`,
  `Command: node bench/kokoro_ab.mjs ${process.argv.slice(2).join(' ')}`, '',
  `Ours: ${o.stream ? '`sotto speak --stream`' : '`sotto speak`'} (first audio: the first ${
      o.stream ? 'chunk' : 'sentence'}).`,
  '',
  markdownTable(
      [
        'threads', 'input', 'binary', 'audio s', 'first audio ms', 'compute ms', 'process CPU ms',
        'first / first binary', 'compute / first binary', 'CPU / first binary'
      ],
      rows),
  ''
].join('\n');
console.log(report);
if (o.out) writeFileSync(o.out, report);
