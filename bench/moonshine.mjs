// Moonshine base speed: sotto's native CLI against onnxruntime-node 1.30 on the same .ort files and the same
// 16 kHz clip (beckett.wav, 10 s, by default), the same thread count, in one run. Both transcripts must be
// identical (the bench refuses to report otherwise). sotto's encode_ms / decode_ms are its own (`sotto transcribe
// --json`: model loading not included); ORT's are timed around session.run here (greedy loop in JS, as
// tests/web/moonshine_support.mjs). Medians over --repeats runs.
//
//   node bench/moonshine.mjs [--threads 2] [--repeats 3] [--clip beckett.wav] [--out FILE.md]
//
// On a shared machine read bench/README.md first: a load average above the thread count says nothing about
// either engine.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import * as ort from 'onnxruntime-node';

import { OrtMoonshine, modelDir } from '../tests/web/moonshine_support.mjs';
import { clipPath, nativeCli, readWav16 } from '../tests/web/vad_support.mjs';
import { median } from './report.mjs';

function parseArgs(argv) {
  const o = { threads: 2, repeats: 3, clip: 'beckett.wav', out: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[++i];
    if (a === '--threads') o.threads = Number(v);
    else if (a === '--repeats') o.repeats = Number(v);
    else if (a === '--clip') o.clip = v;
    else if (a === '--out') o.out = v;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const o = parseArgs(process.argv.slice(2));
const wav = readWav16(clipPath(o.clip));
if (wav.rate !== 16000) throw new Error(`${o.clip}: the bench needs a 16 kHz clip`);
const load0 = loadavg()[0];

const ours = [];
for (let r = 0; r < o.repeats; r++) {
  const p = spawnSync(nativeCli, ['transcribe', '-m', modelDir, clipPath(o.clip), '--json', '--threads', String(o.threads)],
    { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`sotto transcribe: ${p.stderr}`);
  ours.push(JSON.parse(p.stdout));
}
if (ours[0].segments.length !== 1) throw new Error('the bench clip must be one window (at most 20 s)');

const reference = await OrtMoonshine.create(ort, { threads: o.threads });
const theirs = [];
for (let r = 0; r < o.repeats; r++) theirs.push(await reference.transcribe(wav.samples));
await reference.release();

const same = ours.every((x) => JSON.stringify(x.tokens) === JSON.stringify(theirs[0].tokens));
if (!same) throw new Error(`transcripts differ: sotto "${ours[0].text}" vs ORT "${theirs[0].text}"`);

const n = theirs[0].tokens.length + 1;  // decoder steps: the tokens and the step that produced EOS
const row = (name, a, b) => `| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(2)}x |`;
const s = { enc: median(ours.map((x) => x.encode_ms)), dec: median(ours.map((x) => x.decode_ms)) };
const t = { enc: median(theirs.map((x) => x.encodeMs)), dec: median(theirs.map((x) => x.decodeMs)) };
const lines = [
  `# Moonshine base: sotto (native) vs onnxruntime-node, ${o.threads} thread(s)`,
  '',
  `${o.clip}: ${(wav.samples.length / 16000).toFixed(2)} s, ${theirs[0].tokens.length} tokens, identical transcripts: "${theirs[0].text}"`,
  `CPU: ${cpus()[0]?.model ?? '?'} (${cpus().length} cores); load average ${load0.toFixed(2)} before, ${loadavg()[0].toFixed(2)} after;` +
    ` medians of ${o.repeats}`,
  '',
  '| ms | sotto | onnxruntime-node | ORT / sotto |',
  '|---|---:|---:|---:|',
  row('encode', s.enc, t.enc),
  row('decode', s.dec, t.dec),
  row('decode per step', s.dec / n, t.dec / n),
  row('total', s.enc + s.dec, t.enc + t.dec),
  '',
];
const text = lines.join('\n');
console.log(text);
if (o.out) {
  mkdirSync(dirname(o.out), { recursive: true });
  writeFileSync(o.out, text);
}
