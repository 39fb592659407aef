// Kokoro against ONNX Runtime, run LIVE here (onnxruntime-node 1.30, CPU) on the same int8 file, voice and
// phonemes (other ones than the committed stage references of tests/unit/kokoro_test.cpp): the native CLI
// (`sotto speak --json`) must give the length ONNX Runtime gives within two 25 ms duration frames (the
// duration predictor's rounding may flip where a float ulp moves a sum across .5; onnxruntime-web moves up to
// 2 % of lengths against ONNX Runtime CPU) and a log-mel distance after alignment of at most 3 dB (the same
// measure as kokoro_test.cpp and tools/kokoro_logmel.py). Two ONNX Runtime builds differ as much: on the
// bm_george case onnxruntime-web 1.30 is 2.29 dB from ONNX Runtime CPU (we: 2.52 dB, and 2.17 dB from web;
// length: web equal, we one frame shorter); on kokoro_test.cpp's input web 0.99 dB, we 0.94 dB.
// Run: node --test tests/web/kokoro_reference.test.mjs   (needs build/bin/sotto or SOTTO_CLI, and
// models/kokoro from scripts/get-models.sh kokoro)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';

import { kokoroFeeds } from '../../tools/kokoro_inputs.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODEL = `${ROOT}/models/kokoro/kokoro-v1.0.int8.onnx`;
const CLI = process.env.SOTTO_CLI ?? `${ROOT}/build/bin/sotto`;

const CASES = [
  { voice: 'bm_george', phonemes: 'wˈʌn, tˈu, θɹˈi, fˈɔɹ.' },
  { voice: 'af_bella', phonemes: 'ɪts ɐ bjˈuɾɪfəl dˈA tədˈA.' },
];

// 1024-point Hann STFT, hop 256, 80 HTK-mel bands over 0..12 kHz, 10 log10(power + 1e-8): [frames][80].
function logMel(audio) {
  const N = 1024, HOP = 256, MELS = 80, BINS = N / 2 + 1;
  const mel = (hz) => 2595 * Math.log10(1 + hz / 700);
  const hz = (m) => 700 * (10 ** (m / 2595) - 1);
  const edges = Array.from({ length: MELS + 2 }, (_, i) => hz((mel(12000) * i) / (MELS + 1)));
  const cos = Float64Array.from({ length: N }, (_, m) => Math.cos((2 * Math.PI * m) / N));
  const sin = Float64Array.from({ length: N }, (_, m) => Math.sin((2 * Math.PI * m) / N));
  const out = [];
  const frame = new Float64Array(N);
  for (let start = 0; start + N <= audio.length; start += HOP) {
    for (let n = 0; n < N; n++) frame[n] = audio[start + n] * (0.5 - 0.5 * cos[n]);
    const power = new Float64Array(BINS);
    for (let k = 0; k < BINS; k++) {
      let re = 0, im = 0;
      for (let n = 0; n < N; n++) {
        const m = (k * n) & (N - 1);
        re += frame[n] * cos[m];
        im -= frame[n] * sin[m];
      }
      power[k] = re * re + im * im;
    }
    const bands = new Float64Array(MELS);
    for (let b = 0; b < MELS; b++) {
      let sum = 0;
      for (let k = 0; k < BINS; k++) {
        const f = (k * 24000) / N;
        if (f < edges[b] || f > edges[b + 2]) continue;
        sum += (f <= edges[b + 1] ? (f - edges[b]) / (edges[b + 1] - edges[b]) : (edges[b + 2] - f) / (edges[b + 2] - edges[b + 1])) * power[k];
      }
      bands[b] = 10 * Math.log10(sum + 1e-8);
    }
    out.push(bands);
  }
  return out;
}

// Mean per-frame RMS band difference (dB) along the dynamic-time-warping path.
function logMelDistanceDb(a, b) {
  const ma = logMel(a), mb = logMel(b);
  const n = ma.length, m = mb.length;
  const cost = Array.from({ length: n + 1 }, () => new Float64Array(m + 1).fill(Infinity));
  const steps = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
  cost[0][0] = 0;
  for (let i = 1; i <= n; i++)
    for (let j = 1; j <= m; j++) {
      let d = 0;
      for (let k = 0; k < 80; k++) d += (ma[i - 1][k] - mb[j - 1][k]) ** 2;
      let best = cost[i - 1][j - 1], len = steps[i - 1][j - 1];
      if (cost[i - 1][j] < best) { best = cost[i - 1][j]; len = steps[i - 1][j]; }
      if (cost[i][j - 1] < best) { best = cost[i][j - 1]; len = steps[i][j - 1]; }
      cost[i][j] = best + Math.sqrt(d / 80);
      steps[i][j] = len + 1;
    }
  return cost[n][m] / steps[n][m];
}

const skip = !existsSync(MODEL) ? `${MODEL} is missing (bash scripts/get-models.sh kokoro)`
  : !existsSync(CLI) && `no CLI at ${CLI}`;

test('sotto speak matches ONNX Runtime live: length within two frames, log-mel distance <= 3 dB', { skip }, async () => {
  const session = await ort.InferenceSession.create(MODEL, { intraOpNumThreads: 2, interOpNumThreads: 1 });
  for (const { voice, phonemes } of CASES) {
    const { audio } = await session.run(kokoroFeeds(ort, phonemes, voice));
    const wav = `/tmp/sotto_kokoro_live_${process.pid}.wav`;
    const json = JSON.parse(execFileSync(CLI, ['speak', '-m', MODEL, '--voice', voice, '--phonemes', phonemes, '-o', wav, '--json'], { encoding: 'utf8' }));
    const bytes = readFileSync(wav);
    rmSync(wav);
    const ours = new Float32Array(bytes.buffer.slice(bytes.byteOffset + 44, bytes.byteOffset + bytes.length));
    assert.equal(ours.length, json.samples);
    assert.ok(Math.abs(ours.length - audio.data.length) <= 2 * 600, `${voice}: ${ours.length} samples vs ONNX Runtime ${audio.data.length}`);
    const db = logMelDistanceDb(ours, audio.data);
    console.log(`# ${voice} "${phonemes}": ${ours.length} vs ${audio.data.length} samples, log-mel distance ${db.toFixed(2)} dB`);
    assert.ok(db <= 3.0, `${voice}: log-mel distance ${db.toFixed(2)} dB`);
  }
});

// `sotto speak --stream` (the voice agent's chunks: the leading pause cut to its last 100 ms before the vocoder,
// the first 300 ms of speech, then doubling windows with 150 ms of context a side): ONNX Runtime's speech, shorter
// by exactly the pause cut (Kokoro's pad is ~0.3 s), compared with ONNX Runtime's audio less that many leading
// samples; the first chunk is written before the sentence's last. The bound is looser than the whole sentence's
// 3 dB because each window normalises with its own AdaIN statistics (src/models/tts/kokoro.h), which moves the
// near-silent frames' noise floor most (this log-mel measure floors power at 1e-8, so a pause weighs as much as
// speech): measured on this sentence, whole 2.2 dB from ONNX Runtime, streamed 5.4 (with the whole pause kept
// 7.5; one window, bitwise the whole piece, 2.5). Misjoined or repeated chunks change the length or exceed it.
test('sotto speak --stream: ONNX Runtime\'s speech less the cut pause, log-mel distance <= 6.5 dB', { skip }, async () => {
  const session = await ort.InferenceSession.create(MODEL, { intraOpNumThreads: 2, interOpNumThreads: 1 });
  const voice = 'af_heart';
  const phonemes = 'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.';
  const { audio } = await session.run(kokoroFeeds(ort, phonemes, voice));
  const wav = `/tmp/sotto_kokoro_stream_${process.pid}.wav`;
  const json = JSON.parse(execFileSync(CLI, ['speak', '-m', MODEL, '--voice', voice, '--phonemes', phonemes, '-o', wav, '--json', '--stream'], { encoding: 'utf8' }));
  const bytes = readFileSync(wav);
  rmSync(wav);
  const ours = new Float32Array(bytes.buffer.slice(bytes.byteOffset + 44, bytes.byteOffset + bytes.length));
  assert.equal(ours.length, json.samples);
  assert.equal(json.stream, true);
  const cut = audio.data.length - ours.length;
  assert.ok(cut >= 0 && cut <= 0.4 * 24000 + 2 * 600, `${ours.length} samples vs ONNX Runtime ${audio.data.length}`);
  assert.ok(json.first_audio_ms < json.compute_ms, `first chunk at ${json.first_audio_ms} ms of ${json.compute_ms}`);
  const db = logMelDistanceDb(ours, audio.data.subarray(cut));
  console.log(`# --stream: ${ours.length} vs ${audio.data.length} samples, log-mel distance ${db.toFixed(2)} dB, first audio ${json.first_audio_ms.toFixed(0)} of ${json.compute_ms.toFixed(0)} ms`);
  assert.ok(db <= 6.5, `log-mel distance ${db.toFixed(2)} dB`);
});
