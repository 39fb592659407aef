// Moonshine from the hub's ONNX layout (encoder_model.onnx, decoder_model_merged.onnx, tokenizer.json), which
// scripts/test.sh writes into build/moonshine-onnx from the package's .ort files with
// tools/moonshine/ort_to_onnx.py (its --check ran both forms in ONNX Runtime: identical outputs). Checked here:
// ONNX Runtime on the .onnx files gives the same tokens as our native CLI and our wasm build reading that
// directory, and the CLI's output is the .ort layout's byte for byte (the same weights, read from protobuf
// instead of a flatbuffer; the text from tokenizer.json instead of tokenizer.bin).
// Run: node --test tests/web/moonshine_onnx.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { Asr } from '../../web/asr.js';
import { OrtMoonshine, haveMoonshine, modelDir, vadPath } from './moonshine_support.mjs';
import { clipPath, haveFixtures, nativeCli, readWav16, repo, wasmPath } from './vad_support.mjs';

const onnxDir = process.env.SOTTO_MOONSHINE_ONNX ?? `${repo}build/moonshine-onnx`;
const layoutMissing = !existsSync(`${onnxDir}/tokenizer.json`)
  && `no ONNX layout in ${onnxDir} (python3 tools/moonshine/ort_to_onnx.py ${modelDir} ${onnxDir})`;
// In CI scripts/test.sh makes the layout before the tests: its absence fails there instead of skipping.
const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(nativeCli) ? `no CLI at ${nativeCli}`
  : !haveMoonshine() ? `no Moonshine model in ${modelDir}` : !process.env.CI && layoutMissing;

let reference;
before(async () => {
  if (skip) return;
  assert.ok(!layoutMissing, layoutMissing);
  reference = await OrtMoonshine.create(ort, { threads: 2, dir: onnxDir, ext: 'onnx' });
});
after(async () => { if (reference) await reference.release(); });

function transcribe(dir, path) {
  const r = spawnSync(nativeCli, ['transcribe', '-m', dir, path, '--json', '--threads', '2', '--vad', vadPath],
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `sotto transcribe -m ${dir} ${path}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

for (const clip of ['beckett.wav', 'two_cities_16k.wav', 'test.wav']) {
  test(`${clip}: the ONNX layout transcribes as the .ort one, window by window as ONNX Runtime on the .onnx files`, { skip }, async () => {
    const fromOnnx = transcribe(onnxDir, clipPath(clip));
    const fromOrt = transcribe(modelDir, clipPath(clip));
    const strip = (r) => r.segments.map(({ start_sample, end_sample, text, tokens }) => ({ start_sample, end_sample, text, tokens }));
    assert.deepEqual(strip(fromOnnx), strip(fromOrt));
    assert.equal(fromOnnx.text, fromOrt.text);
    const samples = readWav16(clipPath(clip)).samples;
    for (const s of fromOnnx.segments) {
      const theirs = await reference.transcribe(samples.subarray(s.start_sample, s.end_sample));
      assert.deepEqual(s.tokens, theirs.tokens, `[${s.start_sample}, ${s.end_sample}): "${s.text}" vs ORT "${theirs.text}"`);
      assert.equal(s.text, theirs.text);
    }
  });
}

test('wasm: web/asr.js loads the ONNX layout and gives ONNX Runtime\'s tokens', { skip: skip || (!existsSync(wasmPath('simd128')) && 'no wasm build') }, async () => {
  const asr = await Asr.load(onnxDir, { variant: 'simd128', wasmUrl: wasmPath('simd128') });
  try {
    const short = readWav16(clipPath('beckett.wav')).samples.subarray(0, 48000);
    const ours = await asr.transcribe(short);
    const theirs = await reference.transcribe(short);
    assert.deepEqual(ours.tokens, theirs.tokens);
    assert.equal(ours.text, theirs.text);
  } finally {
    asr.dispose();
  }
});
