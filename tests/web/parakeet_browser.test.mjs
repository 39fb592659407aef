// Parakeet TDT in headless Chromium through web/asr.js's speech worker (wasm, on the CPU), on 1 and 2 threads:
// on the CI model (tests/data/parakeet/tdt_ci, random weights) every reference clip gives transformers' tokens
// (reference.safetensors), and a longer recording (tests/fixtures/audio/test.wav, hundreds of tokens on these
// weights) gives the same tokens on 2 threads as on 1. The 2-thread worker runs the model on the pool whose
// helper Web Workers web/pool.js starts; a model that made a pool of its own there waited forever in its first
// parallel op for helpers nobody starts (the page looked dead): the test's time limit turns that into a failure.
// Run: node --test tests/web/parakeet_browser.test.mjs   (needs build/wasm-relaxed or build/wasm-simd128,
// /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { CHROMIUM, onPage, useBrowser } from './browser_support.mjs';
import { referenceClips } from './parakeet_support.mjs';
import { clipPath, repo, wasmPath } from './vad_support.mjs';

const variants = ['relaxed', 'simd128'].filter((v) => existsSync(wasmPath(v)));
const skip = !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}` : !variants.length ? 'build the wasm first'
  : wasmPath(variants[0]) !== `${repo}build/wasm-${variants[0]}/sotto.wasm` ? 'SOTTO_WASM_DIR is not served' : false;
const speech = clipPath('test.wav');

const chrome = useBrowser({ skip });

test('Parakeet in the speech worker on 1 and 2 threads: the reference tokens, and the same tokens on a long clip',
  { skip, timeout: 180000 }, async () => {
    const clips = referenceClips();
    assert.ok(clips.length >= 3, 'reference clips');
    await onPage(chrome, 'web/lab/asr.html', async (page) => {
      const runs = {};
      for (const threads of [1, 2]) {
        runs[threads] = await page.evaluate(async ({ threads, clips, speech }) => {
          const { Asr } = await import('/web/asr.js');
          const asr = await Asr.load('/tests/data/parakeet/tdt_ci', { threads });
          try {
            const out = { threads: asr.threads, worker: asr.worker, clips: [] };
            for (const audio of clips) out.clips.push((await asr.transcribe(new Float32Array(audio))).tokens);
            if (speech) out.speech = (await asr.transcribeWav(speech)).tokens;
            return out;
          } finally {
            asr.dispose();
          }
        }, { threads, clips: clips.map((c) => Array.from(c.audio)), speech: existsSync(speech) ? '/fixtures/audio/test.wav' : null });
      }
      for (const threads of [1, 2]) {
        const r = runs[threads];
        assert.equal(r.worker, true, 'the speech worker');
        assert.equal(r.threads, threads, `a pool of ${threads}`);
        clips.forEach((c, i) => assert.deepEqual(r.clips[i], c.tokens, `${threads} thread(s), clip${i}: wasm vs transformers`));
      }
      if (existsSync(speech)) {
        assert.ok(runs[1].speech.length > 100, 'test.wav: hundreds of tokens');
        assert.deepEqual(runs[2].speech, runs[1].speech, 'test.wav: 2 threads vs 1');
      }
    });
  });
