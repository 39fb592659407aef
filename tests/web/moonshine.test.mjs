// Moonshine base: our native CLI (`sotto transcribe --json`) against ONNX Runtime (onnxruntime-node, the same
// .ort files) run LIVE here, on the 16 kHz clips of tests/fixtures/audio and on clips synthesised from them
// (very short, silent, quiet, noisy, faster and slower speech, 30 s of speech with pauses, exactly one window).
// The CLI reports the windows it cut long audio into (sample ranges); ORT transcribes exactly those samples, and
// every window's tokens must be IDENTICAL (greedy decoding; our logits are within 5e-3 of ORT's, see
// tests/unit/moonshine_test.cpp). sample.wav (24 kHz) is left out: ORT would need our resampler's samples.
// The wasm build (web/asr.js, `node web/cli.mjs transcribe`; its encoder products in int16 x int8) is checked
// the same way on every fixture and synthesised clip.
// Also bad input: one-line errors and exit code 1, never a crash.
// Run: node --test tests/web/moonshine.test.mjs   (needs build/bin/sotto and models/moonshine-base-en)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { Asr } from '../../web/asr.js';
import { floatWav } from '../../web/wav.mjs';
import { OrtMoonshine, haveMoonshine, modelDir, vadPath, writeWav16 } from './moonshine_support.mjs';
import { clipPath, haveFixtures, nativeCli, readWav16, repo, wasmPath } from './vad_support.mjs';

const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(nativeCli) ? `no CLI at ${nativeCli}`
  : !haveMoonshine() && `no Moonshine model in ${modelDir} (bash scripts/get-models.sh moonshine)`;

const wasmSkip = skip || (!existsSync(wasmPath('simd128')) && `no wasm at ${wasmPath('simd128')}`);
let reference;
let dir;

before(async () => {
  if (skip) return;
  reference = await OrtMoonshine.create(ort, { threads: 2 });
  dir = mkdtempSync(join(tmpdir(), 'sotto-moonshine-'));
});

after(async () => {
  if (reference) await reference.release();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function transcribe(path, extra = []) {
  const r = spawnSync(nativeCli, ['transcribe', '-m', modelDir, path, '--json', '--threads', '2', '--vad', vadPath, ...extra],
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `sotto transcribe ${path}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// The wasm build's `node web/cli.mjs transcribe --json` (its many-row products in int16: MoonshineLoadOptions).
function transcribeWasm(path) {
  const r = spawnSync(process.execPath, [`${repo}web/cli.mjs`, 'transcribe', '-m', modelDir, path, '--json',
    '--wasm', wasmPath('simd128'), '--vad', vadPath], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `node web/cli.mjs transcribe ${path}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Ours (the native CLI's, or `run`'s) and ORT's, window by window, on `samples` (what the file at `path` holds).
async function compare(name, path, samples, run = transcribe) {
  const ours = run(path);
  assert.ok(ours.segments.length >= 1 || samples.length === 0, `${name}: no windows`);
  const texts = [];
  for (const s of ours.segments) {
    const theirs = await reference.transcribe(samples.subarray(s.start_sample, s.end_sample));
    assert.deepEqual(s.tokens, theirs.tokens, `${name} [${s.start_sample}, ${s.end_sample}): ours "${s.text}" vs ORT "${theirs.text}"`);
    assert.equal(s.text, theirs.text);
    if (theirs.text) texts.push(theirs.text);
  }
  assert.equal(ours.text, texts.join(' '), `${name}: the joined text`);
  assert.equal(ours.audio_s, samples.length / 16000);
  for (const k of ['encode_ms', 'decode_ms']) assert.ok(ours[k] >= 0, `${name}: ${k}`);
  return ours;
}

for (const clip of ['beckett.wav', 'two_cities_16k.wav', 'test.wav']) {
  test(`${clip}: our transcript is ONNX Runtime's, window by window`, { skip }, async () => {
    const wav = readWav16(clipPath(clip));
    assert.equal(wav.rate, 16000);
    const ours = await compare(clip, clipPath(clip), wav.samples);
    if (clip === 'beckett.wav') {
      assert.equal(ours.segments.length, 1);
      assert.equal(ours.text, 'Ever tried ever failed, no matter try again fail again fail better.');
    } else {
      assert.ok(ours.vad, `${clip}: longer than a window, so cut by the VAD`);
      assert.ok(ours.segments.every((s) => s.end_sample - s.start_sample <= 20 * 16000), `${clip}: windows of at most 20 s`);
    }
  });
}

// Deterministic noise (a 32-bit LCG, Box-Muller).
function gaussian(seed) {
  let s = seed >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 1) / 4294967297;
  return () => Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
}

// Linear-interpolation time stretch: rate > 1 is faster speech (and higher pitch), as a tape played fast.
function stretch(x, rate) {
  const n = Math.floor(x.length / rate), out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const p = i * rate, j = Math.floor(p), f = p - j;
    out[i] = x[j] * (1 - f) + (x[Math.min(j + 1, x.length - 1)] ?? 0) * f;
  }
  return out;
}

test('synthesised clips: short, silent, quiet, noisy, fast, slow, 30 s with pauses, one full window', { skip }, async () => {
  const beckett = readWav16(clipPath('beckett.wav')).samples;
  const cities = readWav16(clipPath('two_cities_16k.wav')).samples;
  const noise = gaussian(12345);
  const rms = Math.sqrt(beckett.reduce((a, v) => a + v * v, 0) / beckett.length);
  const clips = {
    'short-0.4s': beckett.subarray(0, 6400),
    'silence-2s': new Float32Array(32000),
    'quiet-x0.1': beckett.map((v) => v * 0.1),
    'noisy-10dB': beckett.map((v) => v + noise() * rms * 0.316),
    'fast-x1.3': stretch(beckett, 1.3),
    'slow-x0.8': stretch(beckett, 0.8),
    'thirty-s': (() => {
      const gap = new Float32Array(8000), out = new Float32Array(3 * (beckett.length + gap.length));
      for (let k = 0; k < 3; k++) out.set(beckett, k * (beckett.length + gap.length));
      return out;
    })(),
    'window-20s': cities.subarray(0, 20 * 16000),
  };
  for (const [name, samples] of Object.entries(clips)) {
    const path = join(dir, `${name}.wav`);
    const stored = writeWav16(path, samples);
    const ours = await compare(name, path, stored);
    if (name === 'window-20s') assert.equal(ours.segments.length, 1, 'exactly 20 s is one window');
    if (name === 'thirty-s') assert.ok(ours.segments.length >= 2, 'over 20 s is cut');
    // The wasm build too (its products differ: int16 x int8 in the encoder).
    if (!wasmSkip) await compare(`wasm ${name}`, path, stored, transcribeWasm);
  }
});

// The wasm build: web/asr.js in this process (SIMD128) and `node web/cli.mjs
// transcribe --json`, on beckett.wav and the first 3 s of it, against ORT.
test('wasm: web/asr.js and web/cli.mjs transcribe give ONNX Runtime\'s tokens', { skip: wasmSkip }, async () => {
  // SIMD128 only: Node 20 cannot compile the relaxed-SIMD build (its LLM kernels use relaxed opcodes Node keeps
  // behind a flag); moonshine_browser.test.mjs runs the relaxed build in Chromium.
  const asr = await Asr.load(modelDir, { variant: 'simd128', wasmUrl: wasmPath('simd128') });
  try {
    const wav = readWav16(clipPath('beckett.wav'));
    const decoded = await asr.decodeWav(clipPath('beckett.wav'));
    assert.deepEqual(decoded, wav.samples, 'the engine\'s WAV decoder gives the samples read here');
    const short = wav.samples.subarray(0, 48000);
    const ours = await asr.transcribe(short);
    const theirs = await reference.transcribe(short);
    assert.deepEqual(ours.tokens, theirs.tokens);
    assert.equal(ours.text, theirs.text);
    // The VAD segmenter's onSpeechEnd(audio) straight in.
    const got = await new Promise((resolve) => asr.onSpeechEnd(resolve)(short));
    assert.equal(got.text, theirs.text);
    await assert.rejects(asr.transcribe(new Float32Array(0)), /no audio/);
  } finally {
    asr.dispose();
  }
  const r = spawnSync(process.execPath, [`${repo}web/cli.mjs`, 'transcribe', '-m', modelDir, clipPath('beckett.wav'), '--json',
    '--wasm', wasmPath('simd128')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const cli = JSON.parse(r.stdout);
  const theirs = await reference.transcribe(readWav16(clipPath('beckett.wav')).samples);
  assert.deepEqual(cli.tokens, theirs.tokens);
  assert.equal(cli.text, theirs.text);
});

test('wasm: every fixture clip window by window as ONNX Runtime, through web/cli.mjs', { skip: wasmSkip }, async () => {
  for (const clip of ['beckett.wav', 'two_cities_16k.wav', 'test.wav']) {
    await compare(`wasm ${clip}`, clipPath(clip), readWav16(clipPath(clip)).samples, transcribeWasm);
  }
});

test('bad input: one-line errors, exit code 1 or 2, never a crash', { skip }, () => {
  const run = (args) => spawnSync(nativeCli, ['transcribe', ...args], { encoding: 'utf8' });
  const empty = join(dir, 'empty.wav');
  writeFileSync(empty, Buffer.alloc(0));
  const headerOnly = join(dir, 'header.wav');
  writeWav16(headerOnly, new Float32Array(0));
  const lying = join(dir, 'lying.wav');
  writeWav16(lying, new Float32Array(100));
  const b = readFileSync(lying);
  b.writeUInt32LE(0x7ffffff0, 40);  // a data chunk far longer than the file
  writeFileSync(lying, b);
  const nanWav = join(dir, 'nan.wav');
  writeFileSync(nanWav, floatWav([0.1, NaN, 0.2], 16000));
  const cases = [
    [['-m', modelDir, empty], /empty\.wav/],
    [['-m', modelDir, headerOnly], /no samples|header\.wav/],
    [['-m', modelDir, nanWav], /NaN/],
    [['-m', dir, clipPath('beckett.wav')], /not a Moonshine model directory/],
    [['-m', modelDir, join(dir, 'missing.wav')], /missing\.wav/],
    [['-m', modelDir], /missing AUDIO/],
  ];
  for (const [args, pattern] of cases) {
    const r = run(args);
    assert.ok(r.status === 1 || r.status === 2, `${args.join(' ')}: exit ${r.status}, ${r.stderr}`);
    const first = r.stderr.split('\n')[0];
    assert.match(first, pattern, `${args.join(' ')}: ${r.stderr}`);
  }
  // A lying header is either read as what is there (a sane result) or refused in one line.
  const r = run(['-m', modelDir, lying, '--json']);
  assert.ok(r.status === 0 || (r.status === 1 && r.stderr.trim().split('\n').length === 1), r.stderr);
});

