// Kokoro-82M v1.0 speed: sotto (`sotto speak`, native) against onnxruntime-node 1.30 on the same int8 file, the
// same phonemes, voice and thread count, in one run. Real-time factor = seconds of audio per second of compute
// (higher is faster); the ratio column is ONNX Runtime's time over ours (> 1: we are faster).
//
//   node bench/kokoro.mjs [--threads 1,2] [--repeats 3] [--voice af_heart] [--python] [--out FILE.md]
//
// --python: also ONNX Runtime's Python CPU build (bench/kokoro_ort.py; `pip install onnxruntime`), the peer the
// issue measured (Python ORT 1.32: 3.0-3.2x real time on 2 threads there), on the same inputs and threads.
//
// Ours: compute_ms from `sotto speak --json` (the model load is not counted; one process per run, so every run
// is a cold first call). ONNX Runtime: session.run() wall time after one warm-up run (intraOpNumThreads = the
// thread count, interOpNumThreads 1). Needs build/bin/sotto (or SOTTO_CLI) and models/kokoro/ (scripts/get-models.sh
// kokoro).
import {spawnSync} from 'node:child_process';
import {writeFileSync} from 'node:fs';
import {cpus, loadavg, tmpdir} from 'node:os';
import {dirname, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';
import * as ort from 'onnxruntime-node';

import {BENCH_PHRASES, kokoroFeeds} from '../tools/kokoro_inputs.mjs';

import {markdownTable, median} from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
const CLI = process.env.SOTTO_CLI ?? `${ROOT}/build/bin/sotto`;

// One sentence each: `sotto speak` splits at sentence ends (each piece with its own pads and style row), ONNX
// Runtime here gets the whole string.
const PHRASES = BENCH_PHRASES;

function parseArgs(argv) {
  const o = {threads: [1, 2], repeats: 3, voice: 'af_heart', out: null, python: false};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (a === '--python') {
      o.python = true;
      i--;
    } else if (a === '--threads')
      o.threads = v.split(',').map(Number);
    else if (a === '--repeats')
      o.repeats = Number(v);
    else if (a === '--voice')
      o.voice = v;
    else if (a === '--out')
      o.out = v;
    else
      throw new Error(`unknown option ${a}`);
  }
  return o;
}

function ours(phonemes, voice, threads, extra = []) {
  const r = spawnSync(
      CLI,
      [
        'speak', '-m', MODEL, '--voice', voice, '--phonemes', phonemes, '-o', '/tmp/sotto_bench_kokoro.wav',
        '--json', '--threads', String(threads), ...extra
      ],
      {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`sotto speak failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function onnxRuntime(session, phonemes, voice, repeats) {
  const feeds = kokoroFeeds(ort, phonemes, voice);
  let samples = 0;
  const times = [];
  for (let r = 0; r <= repeats; r++) {
    const t0 = performance.now();
    const out = await session.run(feeds);
    if (r > 0) times.push(performance.now() - t0);  // the first run is a warm-up
    samples = out.audio.data.length;
  }
  return {ms: median(times), samples};
}

// First sound of a streamed paragraph: `sotto speak` writes the first sentence's audio before computing the
// rest; first_audio_ms is the time from the start of compute to that write. With --stream (the voice agent's
// way, at its defaults: the first 300 ms of speech after 100 ms of the leading pause, then doubling chunks) it
// is the first chunk's. Runs alternate whole and streamed. ONNX Runtime's figure is its run on the first
// sentence alone (what a caller streaming sentence by sentence would wait for).
const PARAGRAPH = [
  'ðə kˈæt sˈæt.',
  'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.',
  'ðə kˈæt sˈæt.',
];

// ONNX Runtime's Python build on every phrase (bench/kokoro_ort.py), one process per thread count.
function pythonOrt(threads, repeats, voice) {
  const feeds = PHRASES.map((p) => {
    const f = kokoroFeeds(ort, p, voice);
    return {tokens: Array.from(f.tokens.data, Number), style: Array.from(f.style.data), speed: f.speed.data[0]};
  });
  const file = `${tmpdir()}/sotto_kokoro_feeds.json`;
  writeFileSync(file, JSON.stringify(feeds));
  const r = spawnSync('python3', [
    `${ROOT}/bench/kokoro_ort.py`, file, '--model', MODEL, '--threads', String(threads), '--repeats',
    String(repeats)
  ], {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`bench/kokoro_ort.py failed (pip install onnxruntime?): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const o = parseArgs(process.argv.slice(2));
const rows = [];
let pyVersion = null;
for (const threads of o.threads) {
  const session =
      await ort.InferenceSession.create(MODEL, {intraOpNumThreads: threads, interOpNumThreads: 1});
  const py = o.python ? pythonOrt(threads, o.repeats, o.voice) : null;
  if (py) pyVersion = py.version;
  for (const [i, phonemes] of PHRASES.entries()) {
    const runs = Array.from({length: o.repeats}, () => ours(phonemes, o.voice, threads));
    const oursMs = median(runs.map((r) => r.compute_ms));
    const audioS = runs[0].audio_s;
    const ref = await onnxRuntime(session, phonemes, o.voice, o.repeats);
    const refS = ref.samples / 24000;
    const row = [
      threads, `${[...phonemes].length} phonemes`, `${audioS.toFixed(2)} / ${refS.toFixed(2)}`,
      oursMs.toFixed(0), ref.ms.toFixed(0), (audioS * 1000 / oursMs).toFixed(2),
      (refS * 1000 / ref.ms).toFixed(2), (ref.ms / oursMs).toFixed(2)
    ];
    if (py) {
      const p = py.runs[i];
      row.push(p.ms.toFixed(0), (p.samples / 24 / p.ms).toFixed(2), (p.ms / oursMs).toFixed(2));
    }
    rows.push(row);
    console.error(`threads ${threads}: ${phonemes.slice(0, 30)}... ours ${
        oursMs.toFixed(0)} ms, ONNX Runtime ${ref.ms.toFixed(0)} ms${py ? `, Python ORT ${py.runs[i].ms.toFixed(0)} ms` : ''}`);
  }
}
const firstRows = [];
for (const threads of o.threads) {
  const session =
      await ort.InferenceSession.create(MODEL, {intraOpNumThreads: threads, interOpNumThreads: 1});
  const runs = [], streamed = [];
  for (let r = 0; r < o.repeats; r++) {
    runs.push(ours(PARAGRAPH.join(' '), o.voice, threads));
    streamed.push(ours(PARAGRAPH.join(' '), o.voice, threads, ['--stream']));
  }
  const ref = await onnxRuntime(session, PARAGRAPH[0], o.voice, o.repeats);
  firstRows.push([
    threads, `${PARAGRAPH.length} sentences, ${runs[0].audio_s.toFixed(2)} s`,
    median(runs.map((r) => r.first_audio_ms)).toFixed(0),
    median(streamed.map((r) => r.first_audio_ms)).toFixed(0), ref.ms.toFixed(0),
    median(runs.map((r) => r.compute_ms)).toFixed(0), median(streamed.map((r) => r.compute_ms)).toFixed(0)
  ]);
}
const report = [
  `# Kokoro-82M v1.0 int8: sotto vs onnxruntime-node${pyVersion ? ` and Python ORT ${pyVersion}` : ''} (${
      new Date().toISOString().slice(0, 10)})`,
  '',
  `${cpus()[0].model}, ${cpus().length} cores, load average ${
      loadavg().map((x) => x.toFixed(1)).join(' ')}; voice ${o.voice}, median of ${o.repeats}.`,
  '',
  markdownTable(
      [
        'threads', 'input', 'audio s (ours / ORT)', 'ours ms', 'ORT ms', 'ours x real time',
        'ORT x real time', 'ORT / ours',
        ...(pyVersion ? ['Python ORT ms', 'Python ORT x real time', 'Python ORT / ours'] : [])
      ],
      rows),
  '',
  'First sound of a streamed paragraph (ms from the start of compute to the first sentence\'s audio):',
  '',
  markdownTable(
      [
        'threads', 'paragraph', 'ours first audio ms (whole sentences)', 'ours first audio ms (--stream)',
        'ORT first sentence ms', 'ours whole ms (whole sentences)', 'ours whole ms (--stream)'
      ],
      firstRows),
  '',
].join('\n');
if (o.out) writeFileSync(o.out, report);
console.log(report);
