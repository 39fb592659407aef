// Moonshine base in headless Chromium through web/asr.js (wasm, relaxed SIMD and SIMD128 where built) and the
// lab page web/lab/asr.html: beckett.wav decoded in wasm and transcribed to ONNX Runtime's tokens exactly
// (onnxruntime-node run live here on the same 16 kHz samples).
// Run: node --test tests/web/moonshine_browser.test.mjs   (needs build/wasm-simd128, models/moonshine-base-en,
// /usr/bin/chromium or $CHROMIUM, tests/fixtures)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { before, test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { CHROMIUM, onPage, useBrowser } from './browser_support.mjs';
import { OrtMoonshine, haveMoonshine, modelDir } from './moonshine_support.mjs';
import { clipPath, haveFixtures, readWav16, repo, wasmPath } from './vad_support.mjs';

const variants = ['relaxed', 'simd128'].filter((v) => existsSync(wasmPath(v)));
const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !variants.length ? 'build the wasm first' : modelDir !== `${repo}models/moonshine-base-en` ? 'SOTTO_MOONSHINE is not served'
  : !haveMoonshine() && 'no models/moonshine-base-en (bash scripts/get-models.sh moonshine)';

const chrome = useBrowser({ skip });
let expected;

before(async () => {
  if (skip) return;
  const reference = await OrtMoonshine.create(ort, { threads: 2 });
  expected = await reference.transcribe(readWav16(clipPath('beckett.wav')).samples);
  await reference.release();
});


test(`beckett.wav in Chromium (${variants.join(', ')}) and on the lab page: ONNX Runtime's tokens`, { skip }, async () => {
  await onPage(chrome, 'web/lab/asr.html', async (page, logs) => {
    const out = await page.evaluate(async (variants) => {
      const { Asr } = await import('/web/asr.js');
      const results = {};
      for (const variant of variants) {
        const asr = await Asr.load('/models/moonshine-base-en', { variant });
        results[variant] = await asr.transcribeWav('/fixtures/audio/beckett.wav');
        asr.dispose();
      }
      return results;
    }, variants);
    for (const v of variants) {
      assert.deepEqual(out[v].tokens, expected.tokens, `${v}: ours "${out[v].text}" vs ORT "${expected.text}"`);
      assert.equal(out[v].text, expected.text);
    }
    // The lab page itself: the fixture's button.
    await page.click('#run-clip');
    await page.waitForFunction(() => /real time|bad/.test(document.getElementById('stats').textContent + document.getElementById('stats').className),
      null, { timeout: 240000 });
    assert.equal(await page.textContent('#text'), expected.text, logs.join('\n'));
  });
});
