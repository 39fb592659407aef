// Parakeet TDT in WebAssembly through the JS Asr API (web/asr.js reads the model type from config.json, as
// `sotto transcribe -m DIR` does natively): on the CI model (tests/data/parakeet/tdt_ci, random weights) every
// reference clip's tokens from the wasm build are transformers' tokens (reference.safetensors, written by
// tools/parakeet_make_test_model.py), which the native build also gives (tests/unit/parakeet_test.cpp), and the
// native CLI's tokens on the same samples written as a WAV, and on tests/fixtures/audio/test.wav.
// Run: node --test tests/web/parakeet_wasm.test.mjs   (needs build/wasm-simd128/sotto.wasm; the native
// comparison also build/bin/sotto)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { Asr } from '../../web/asr.js';
import { pcm16Wav } from '../../web/wav.mjs';
import { ciModelDir as modelDir, readSafetensors } from './parakeet_support.mjs';
import { fixtures, nativeCli, wasmPath } from './vad_support.mjs';

const wasm = wasmPath('simd128');
const skip = !existsSync(wasm) ? `no wasm build at ${wasm}` : false;

test('Parakeet in wasm gives the reference tokens on every CI clip, and the native CLI\'s', { skip }, async () => {
  const ref = readSafetensors(`${modelDir}/reference.safetensors`);
  const asr = await Asr.load(modelDir, { wasmUrl: wasm, worker: false });
  const dir = mkdtempSync(join(tmpdir(), 'sotto-parakeet-'));
  try {
    let clips = 0;
    for (let i = 0; ref.header[`clip${i}.audio`]; ++i, ++clips) {
      const audio = ref.get(`clip${i}.audio`);
      const got = await asr.transcribe(audio);
      assert.deepEqual(got.tokens, ref.get(`clip${i}.tokens`), `clip${i}: wasm vs transformers`);
      if (existsSync(nativeCli)) {
        // The same samples through 16-bit PCM for both builds.
        const path = join(dir, `clip${i}.wav`);
        writeFileSync(path, pcm16Wav(audio, 16000, 32767));
        const r = spawnSync(nativeCli, ['transcribe', '-m', modelDir, path, '--json'], { encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
        const native = JSON.parse(r.stdout).tokens;
        const viaWav = await asr.transcribeWav(path);
        assert.deepEqual(viaWav.tokens, native, `clip${i}: wasm vs native on the WAV`);
      }
    }
    assert.ok(clips >= 3, 'reference clips');
    // A longer real recording (hundreds of tokens on random weights): wasm and native token for token.
    const speech = `${fixtures}/audio/test.wav`;
    if (existsSync(nativeCli) && existsSync(speech)) {
      const r = spawnSync(nativeCli, ['transcribe', '-m', modelDir, speech, '--json'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const native = JSON.parse(r.stdout).tokens;
      assert.ok(native.length > 100);
      assert.deepEqual((await asr.transcribeWav(speech)).tokens, native, 'test.wav: wasm vs native');
    }
  } finally {
    asr.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});
