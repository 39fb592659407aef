// Kokoro-82M v1.0 speed: sotto (`sotto speak`, native) against onnxruntime-node 1.30 on the same int8 file, the
// same phonemes, voice and thread count, in one run. Real-time factor = seconds of audio per second of compute
// (higher is faster); the ratio column is ONNX Runtime's time over ours (> 1: we are faster).
//
//   node bench/kokoro.mjs [--threads 1,2] [--repeats 3] [--voice af_heart] [--out FILE.md]
//
// Ours: compute_ms from `sotto speak --json` (the model load is not counted; one process per run, so every run
// is a cold first call). ONNX Runtime: session.run() wall time after one warm-up run (intraOpNumThreads = the
// thread count, interOpNumThreads 1). Needs build/bin/sotto (or SOTTO_CLI) and models/kokoro/ (scripts/get-models.sh
// kokoro).
import {spawnSync} from 'node:child_process';
import {readFileSync, writeFileSync} from 'node:fs';
import {cpus, loadavg} from 'node:os';
import {dirname, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';
import * as ort from 'onnxruntime-node';

import {markdownTable, median} from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
const CLI = process.env.SOTTO_CLI ?? `${ROOT}/build/bin/sotto`;

// Kokoro v1.0's phoneme table (src/models/tts/kokoro_vocab.cpp), for ONNX Runtime's token ids.
const SYMBOLS = ";:,.!?—…\"()“” ̃ʣʥʦʨᵝꭧAIOQSTWYᵊabcdefhijklmnopqrstuvwxyzɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ";
const IDS = [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 31, 33, 35, 36, 39, 41, 42, 43, 44, 45, 46, 47, 48, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 75, 76, 77, 78, 80, 81, 82, 83, 85, 86, 87, 90, 92, 99, 101, 102, 103, 110, 111, 112, 113, 114, 115, 116, 118, 119, 120, 123, 125, 126, 128, 129, 130, 131, 132, 133, 135, 136, 138, 139, 140, 142, 143, 147, 148, 156, 157, 158, 162, 164, 169, 171, 172, 173, 177];
const VOCAB = Object.fromEntries([...SYMBOLS].map((c, i) => [c, IDS[i]]));

// One sentence each: `sotto speak` splits at sentence ends (each piece with its own pads and style row), ONNX
// Runtime here gets the whole string.
const PHRASES = [
  'ðə kˈæt sˈæt.',
  'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.',
];

function parseArgs(argv) {
  const o = {threads: [1, 2], repeats: 3, voice: 'af_heart', out: null};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (a === '--threads')
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
  const ids = [...phonemes].map((c) => {
    if (!(c in VOCAB)) throw new Error(`unknown phoneme ${c}`);
    return VOCAB[c];
  });
  const rows = new Float32Array(readFileSync(`${ROOT}/models/kokoro/voices/${voice}.bin`).buffer.slice(0));
  const feeds = {
    tokens: new ort.Tensor('int64', BigInt64Array.from([0, ...ids, 0].map(BigInt)), [1, ids.length + 2]),
    style: new ort.Tensor('float32', rows.slice(ids.length * 256, ids.length * 256 + 256), [1, 256]),
    speed: new ort.Tensor('float32', Float32Array.from([1]), [1]),
  };
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

const o = parseArgs(process.argv.slice(2));
const rows = [];
for (const threads of o.threads) {
  const session =
      await ort.InferenceSession.create(MODEL, {intraOpNumThreads: threads, interOpNumThreads: 1});
  for (const phonemes of PHRASES) {
    const runs = Array.from({length: o.repeats}, () => ours(phonemes, o.voice, threads));
    const oursMs = median(runs.map((r) => r.compute_ms));
    const audioS = runs[0].audio_s;
    const ref = await onnxRuntime(session, phonemes, o.voice, o.repeats);
    const refS = ref.samples / 24000;
    rows.push([
      threads, `${[...phonemes].length} phonemes`, `${audioS.toFixed(2)} / ${refS.toFixed(2)}`,
      oursMs.toFixed(0), ref.ms.toFixed(0), (audioS * 1000 / oursMs).toFixed(2),
      (refS * 1000 / ref.ms).toFixed(2), (ref.ms / oursMs).toFixed(2)
    ]);
    console.error(`threads ${threads}: ${phonemes.slice(0, 30)}... ours ${
        oursMs.toFixed(0)} ms, ONNX Runtime ${ref.ms.toFixed(0)} ms`);
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
  `# Kokoro-82M v1.0 int8: sotto vs onnxruntime-node (${new Date().toISOString().slice(0, 10)})`,
  '',
  `${cpus()[0].model}, ${cpus().length} cores, load average ${
      loadavg().map((x) => x.toFixed(1)).join(' ')}; voice ${o.voice}, median of ${o.repeats}.`,
  '',
  markdownTable(
      [
        'threads', 'input', 'audio s (ours / ORT)', 'ours ms', 'ORT ms', 'ours x real time',
        'ORT x real time', 'ORT / ours'
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
