// Silero VAD against ONNX Runtime, run LIVE here (onnxruntime-node 1.30, CPU, 1 thread) on the same file and
// the same 16 kHz samples: v5.1 and v6.2 on the four speech clips of tests/fixtures/audio, through
//  - the native CLI (`sotto vad --json`), and
//  - the wasm build (SIMD128) in Node through web/vad.js (one engine worker), and `node web/cli.mjs vad`.
// Probabilities: max |ours - ORT| <= 1e-4 per frame (the bound; float32 sums in another order differ by
// ~1e-6). Segments: identical to those an independent JS segmenter (vad_support.mjs, vad-web's rules written
// with an explicit frame buffer) finds in ORT's probabilities, with Silero's defaults and with vad-web's
// thresholds. The C++ segmenter through wasm on ORT's probabilities must give the same.
// Samples: the 16 kHz clips are read here (16-bit PCM / 32768); sample.wav is 24 kHz, so ORT gets the 16 kHz
// samples sotto's resampler produced (the wasm build's vad.decodeWav), which is what our VAD sees; for the
// 16 kHz clips the test checks that decodeWav gives exactly the samples read here.
// Also: streaming (VadSegmenter over random chunk sizes) equals the whole clip, and bad input through JS.
// Run: node --test tests/web/vad_reference.test.mjs   (needs build/bin/sotto or SOTTO_CLI, the wasm in
// build/wasm-simd128 or SOTTO_WASM_DIR, and tests/fixtures or SOTTO_FIXTURES)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { Engine } from '../../web/engine.js';
import { VAD_WEB_DEFAULTS, Vad } from '../../web/vad.js';
import {
  CLIPS, MODELS, clipPath, fixtures, haveFixtures, maxAbsDiff, modelPath, nativeCli, onnxRuntimeProbs, onnxRuntimeSession, onnxWithTensor,
  readWav16, referenceSegments, repo, toFrames, wasmPath,
} from './vad_support.mjs';

const TOLERANCE = 1e-4;
const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(nativeCli) ? `no CLI at ${nativeCli}`
  : !existsSync(wasmPath('simd128')) && `no wasm at ${wasmPath('simd128')}`;
const VAD_WEB_FLAGS = ['--positive', String(VAD_WEB_DEFAULTS.positiveSpeechThreshold), '--negative', String(VAD_WEB_DEFAULTS.negativeSpeechThreshold)];

let engine;
const vads = {};  // model -> Vad (wasm)
const samples = {};  // clip -> Float32Array at 16 kHz, what every implementation is fed
const reference = {};  // `${model}/${clip}` -> ORT probabilities

before(async () => {
  if (skip) return;
  engine = await Engine.create({ threads: 1, variant: 'simd128', wasmUrl: wasmPath('simd128') });
  for (const m of MODELS) vads[m] = await Vad.load(modelPath(m), { engine });
  for (const c of CLIPS) {
    const decoded = await vads[MODELS[0]].decodeWav(clipPath(c));
    const wav = readWav16(clipPath(c));
    if (wav.rate === 16000) {
      assert.equal(maxAbsDiff(decoded, wav.samples), 0, `${c}: sotto's WAV decoder gives the samples read here`);
      samples[c] = wav.samples;
    } else {
      assert.equal(decoded.length, Math.round((wav.samples.length * 16000) / wav.rate), `${c}: resampled length`);
      samples[c] = decoded;
    }
  }
  for (const m of MODELS) {
    const session = await onnxRuntimeSession(ort, modelPath(m));
    for (const c of CLIPS) reference[`${m}/${c}`] = (await onnxRuntimeProbs(ort, session, samples[c])).probs;
    await session.release();
  }
});

after(async () => {
  for (const v of Object.values(vads)) await v.dispose();
  engine?.terminate();
});

function native(model, clip, flags = []) {
  return JSON.parse(execFileSync(nativeCli, ['vad', '--json', '-m', modelPath(model), clipPath(clip), ...flags], { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
}

for (const model of MODELS) {
  test(`native CLI, ${model}: probabilities within ${TOLERANCE} of ONNX Runtime, segments identical`, { skip }, (t) => {
    for (const clip of CLIPS) {
      const ref = reference[`${model}/${clip}`];
      const out = native(model, clip);
      const diff = maxAbsDiff(out.probs, ref);
      t.diagnostic(`${clip}: ${ref.length} frames, max |native - ORT| ${diff.toExponential(2)}, ${out.segments.length} segments`);
      assert.ok(diff <= TOLERANCE, `${clip}: max diff ${diff}`);
      assert.deepEqual(toFrames(out.segments), referenceSegments(ref), `${clip}: segments (Silero thresholds)`);
      const vadWeb = native(model, clip, VAD_WEB_FLAGS);
      assert.deepEqual(toFrames(vadWeb.segments), referenceSegments(ref, VAD_WEB_DEFAULTS), `${clip}: segments (vad-web thresholds)`);
    }
  });

  test(`wasm (SIMD128) in Node, ${model}: probabilities within ${TOLERANCE} of ONNX Runtime, segments identical`, { skip }, async (t) => {
    const vad = vads[model];
    for (const clip of CLIPS) {
      const ref = reference[`${model}/${clip}`];
      const out = await vad.segments(samples[clip]);
      const diff = maxAbsDiff(out.probs, ref);
      t.diagnostic(`${clip}: max |wasm - ORT| ${diff.toExponential(2)}, ${out.segments.length} segments, ${(out.ms / out.probs.length).toFixed(3)} ms/frame`);
      assert.ok(diff <= TOLERANCE, `${clip}: max diff ${diff}`);
      const frames = (segs) => segs.map(({ startFrame, endFrame }) => ({ startFrame, endFrame }));
      assert.deepEqual(frames(out.segments), referenceSegments(ref), `${clip}: segments`);
      const vadWeb = await vad.segments(samples[clip], { preset: 'vad-web' });
      assert.deepEqual(frames(vadWeb.segments), referenceSegments(ref, VAD_WEB_DEFAULTS), `${clip}: segments (vad-web)`);
      // The C++ segmenter (through wasm) on ORT's own probabilities, against the JS one.
      assert.deepEqual(frames(await vad.segmentsOf(ref)), referenceSegments(ref), `${clip}: C++ segmenter on ORT probabilities`);
      assert.deepEqual(frames(await vad.segmentsOf(ref, VAD_WEB_DEFAULTS)), referenceSegments(ref, VAD_WEB_DEFAULTS));
      for (const s of out.segments) assert.equal(s.end, (s.endFrame * 32) / 1000);
    }
    // The 24 kHz clip handed over raw: resampled in wasm, the same probabilities.
    const raw = readWav16(clipPath('sample.wav'));
    const resampled = await vad.processClip(raw.samples, { sampleRate: raw.rate });
    assert.equal(maxAbsDiff(resampled.resampled, samples['sample.wav']), 0);
    assert.ok(maxAbsDiff(resampled.probs, reference[`${model}/sample.wav`]) <= TOLERANCE);
  });

  test(`wasm (SIMD128), ${model}: frame by frame and streaming in random chunks equal the whole clip`, { skip }, async () => {
    const vad = vads[model];
    const clip = samples['beckett.wav'];
    const whole = await vad.segments(clip, { preset: 'vad-web', redemptionMs: 600 });
    // process(), one message per frame.
    await vad.reset();
    const n = vad.frameSamples;
    for (let i = 0; i < 40; i++) assert.equal(await vad.process(clip.subarray(i * n, (i + 1) * n)), whole.probs[i], `frame ${i}`);
    // A streaming segmenter fed chunks of random sizes (fresh each run, as a microphone would).
    const log = [];
    const ends = [];
    const seg = await vad.segmenter({
      preset: 'vad-web', redemptionMs: 600,
      onSpeechStart: () => log.push('start'),
      onSpeechRealStart: () => log.push('real'),
      onSpeechEnd: (audio) => (log.push('end'), ends.push(audio)),
      onVADMisfire: () => log.push('misfire'),
      onFrameProcessed: (p, frame) => {
        assert.equal(frame.length, n);
        assert.equal(p.notSpeech, 1 - p.isSpeech);
        log.push(p.isSpeech);
      },
    });
    for (let at = 0; at < clip.length;) {
      const size = 1 + Math.floor(Math.random() * 3000);
      await seg.process(clip.subarray(at, at + size));
      at += size;
    }
    const flushed = await seg.flush();
    const probs = log.filter((x) => typeof x === 'number');
    const wholeFrames = Math.floor(clip.length / n);  // the partial last frame is dropped at flush
    assert.equal(probs.length, wholeFrames);
    assert.ok(maxAbsDiff(probs, whole.probs.subarray(0, wholeFrames)) === 0, 'the same probabilities');
    const expected = referenceSegments(whole.probs.subarray(0, wholeFrames), { ...VAD_WEB_DEFAULTS, redemptionMs: 600 });
    assert.equal(ends.length, expected.length);
    ends.forEach((audio, i) => {
      const { startFrame, endFrame } = expected[i];
      assert.equal(audio.length, (endFrame - startFrame) * n);
      assert.equal(maxAbsDiff(audio, clip.subarray(startFrame * n, endFrame * n)), 0, `segment ${i} audio`);
    });
    assert.equal(log.filter((x) => x === 'start').length, ends.length + log.filter((x) => x === 'misfire').length);
    // onSpeechRealStart once per segment that is not a misfire, between its start and its end.
    const starts = log.filter((x) => typeof x === 'string').join(' ');
    assert.equal(log.filter((x) => x === 'real').length, ends.length, starts);
    assert.ok(!/start end|real real|end real|misfire real/.test(starts), starts);
    assert.ok(Array.isArray(flushed));
    await seg.dispose();
  });
}

test('node web/cli.mjs vad: what the native CLI prints (numbers within 1e-5: wasm float rounding differs)', { skip }, () => {
  for (const [model, clip] of [[MODELS[0], 'beckett.wav'], [MODELS[1], 'sample.wav']]) {
    const run = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    const nativeJson = JSON.parse(run(nativeCli, ['vad', '--json', '-m', modelPath(model), clipPath(clip)]));
    const web = run(process.execPath, [`${repo}web/cli.mjs`, 'vad', '--json', '-m', modelPath(model), clipPath(clip), '--wasm', wasmPath('simd128')]);
    assert.ok(web.endsWith('}\n'));
    const webJson = JSON.parse(web);
    assert.equal(webJson.frame_ms, nativeJson.frame_ms);
    assert.ok(maxAbsDiff(webJson.probs, nativeJson.probs) <= 1e-5);
    assert.deepEqual(webJson.segments, nativeJson.segments);
    const table = (text) => text.split('\n').map((l) => l.split(/\s+/).filter(Boolean));
    const nativeText = table(run(nativeCli, ['vad', '-m', modelPath(model), clipPath(clip), ...VAD_WEB_FLAGS]));
    const webText = table(run(process.execPath, [`${repo}web/cli.mjs`, 'vad', '-m', modelPath(model), clipPath(clip), ...VAD_WEB_FLAGS, '--wasm', wasmPath('simd128')]));
    assert.equal(webText.length, nativeText.length);
    webText.forEach((row, i) => row.forEach((cell, j) => {
      const [a, b] = [Number(cell), Number(nativeText[i][j])];
      if (Number.isNaN(a)) assert.equal(cell, nativeText[i][j]);
      else assert.ok(Math.abs(a - b) <= 1e-5, `line ${i}: ${cell} vs ${nativeText[i][j]}`);
    }));
  }
});

test('bad input through JS: clear one-line errors, sane probabilities, no crash', { skip }, async () => {
  const attempt = async (source, options) => {
    try {
      const v = await Vad.load(source, { engine, ...options });
      await v.dispose();
      return 'loaded';
    } catch (e) {
      return String(e.message);
    }
  };
  const errors = {
    text: await attempt(new Blob(['hello, not a model'])),
    notSilero: await attempt(new Blob([onnxWithTensor('fc.weight', [4, 4])])),
    wrongShape: await attempt(new Blob([onnxWithTensor('stft.forward_basis_buffer', [10, 1, 256])])),
    gguf: await attempt(`${fixtures}/llm/stories260K.gguf`),
    rate: await attempt(modelPath(MODELS[0]), { sampleRate: 44100 }),
    truncated: await attempt(new Blob([readFileSync(modelPath(MODELS[1])).subarray(0, 100000)])),
  };
  assert.match(errors.text, /^sotto: blob: onnx: /);
  assert.match(errors.notSilero, /vad: tensor 'stft.forward_basis_buffer' missing \(not a Silero VAD v5\/v6 file\?\)/);
  assert.match(errors.wrongShape, /has shape \[10,1,256\], expected \[258,1,256\]/);
  assert.match(errors.gguf, /^sotto: .*stories260K.gguf: /);
  assert.match(errors.rate, /sample rate 44100 Hz is not supported/);
  assert.match(errors.truncated, /^sotto: blob: onnx: /);
  for (const e of Object.values(errors)) assert.ok(!e.includes('\n'), `one line: ${e}`);

  const vad = vads[MODELS[0]];
  await assert.rejects(vad.decodeWav(new Blob(['RIFF....WAVEnope'])), /^Error: sotto: blob: wav: /);
  await assert.rejects(vad.processClip([0.1], { sampleRate: -5 }), /bad input sample rate/);
  const valid = (probs) => probs.every((p) => p >= 0 && p <= 1);
  // Empty, shorter than a frame, silence, clipped, NaN / Inf.
  assert.equal((await vad.processClip(new Float32Array(0))).probs.length, 0);
  const short = Float32Array.from({ length: 100 }, () => Math.random() - 0.5);
  assert.equal((await vad.processClip(short)).probs.length, 1);
  const silence = await vad.segments(new Float32Array(32000));
  assert.ok(valid(silence.probs) && silence.probs.every((p) => p < 0.5) && silence.segments.length === 0);
  const clipped = samples['beckett.wav'].map((x) => Math.max(-1, Math.min(1, 10 * x)));
  assert.ok(valid((await vad.processClip(clipped)).probs));
  const poisoned = samples['beckett.wav'].slice();
  for (let i = 0; i < poisoned.length; i += 101) poisoned[i] = NaN;
  poisoned[777] = Infinity;
  assert.ok(valid((await vad.processClip(poisoned)).probs));
  const p = await vad.process(new Float32Array(512).fill(NaN));
  assert.ok(p >= 0 && p <= 1);
  assert.throws(() => vad.process('not audio'), /Float32Array/);
  assert.throws(() => vad.segments(short, { preset: 'nope' }), /unknown VAD preset/);
});
