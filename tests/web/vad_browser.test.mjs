// Silero VAD in headless Chromium through web/vad.js, with the relaxed-SIMD and the SIMD128 builds: v5.1 and
// v6.2 streamed from /fixtures into the engine worker, the four speech clips decoded (and sample.wav resampled
// from 24 kHz) in wasm, probabilities within 1e-4 of ONNX Runtime run live in Node (onnxruntime-node, on the
// samples the page saw: for the 16 kHz clips those equal the WAV's 16-bit samples / 32768, checked), and
// segments identical to the independent segmenter of vad_support.mjs on ORT's probabilities. Also the
// streaming segmenter's events in the page, and a bad file's error.
// Run: node --test tests/web/vad_browser.test.mjs   (needs build/wasm-simd128 and build/wasm-relaxed, or
// SOTTO_WASM_DIR holding wasm-*/sotto.wasm; /usr/bin/chromium or $CHROMIUM; tests/fixtures)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { CHROMIUM, onPage, useBrowser } from './browser_support.mjs';
import {
  CLIPS, MODELS, clipPath, haveFixtures, maxAbsDiff, modelPath, onnxRuntimeProbs, onnxRuntimeSession, readWav16, referenceSegments,
  repo, wasmDir, wasmPath,
} from './vad_support.mjs';

const TOLERANCE = 1e-4;
const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !['simd128', 'relaxed'].every((v) => existsSync(wasmPath(v))) && `build the wasm first (${wasmDir})`;

const chrome = useBrowser({ skip });
const sessions = {};

before(async () => {
  if (skip) return;
  for (const m of MODELS) sessions[m] = await onnxRuntimeSession(ort, modelPath(m));
});

after(async () => {
  for (const s of Object.values(sessions)) await s.release();
});

// The tests' pages: web/serve.mjs of the test server, with the wasm from SOTTO_WASM_DIR when it is not the
// repository's build/ (the server serves the repository).
async function routeWasm(page) {
  if (`${repo}build` === wasmDir) return;
  await page.route(/\/build\/wasm-(simd128|relaxed)\/sotto\.wasm$/, (route) => {
    const variant = route.request().url().match(/wasm-(simd128|relaxed)/)[1];
    return route.fulfill({ path: wasmPath(variant), contentType: 'application/wasm', headers: { 'Cross-Origin-Resource-Policy': 'same-origin' } });
  });
}
const inPage = (fn) => onPage(chrome, 'web/serve.mjs', fn, routeWasm);

for (const variant of ['relaxed', 'simd128']) {
  test(`${variant}: v5.1 and v6.2 on ${CLIPS.length} clips within ${TOLERANCE} of ONNX Runtime, segments identical`, { skip }, async (t) => {
    await inPage(async (page) => {
      const out = await page.evaluate(async ({ variant, models, clips }) => {
        const { Vad } = await import('/web/vad.js');
        // The decoded samples go back once per clip, as the bytes of their floats in base64: millions of
        // numbers as JSON took most of this test's ~50 s.
        const base64 = (f32) => {
          const bytes = new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength);
          let s = '';
          for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
          return btoa(s);
        };
        const results = {};
        for (const model of models) {
          const progress = [];
          const vad = await Vad.load(`/fixtures/vad/${model}`, { variant, onProgress: (p) => progress.push(p) });
          for (const clip of clips) {
            const samples = await vad.decodeWav(`/fixtures/audio/${clip}`);
            const r = await vad.segments(samples);
            results[`${model}/${clip}`] = { samples: model === models[0] ? base64(samples) : null, probs: Array.from(r.probs),
                                            segments: r.segments, ms: r.ms };
          }
          results[model] = { info: vad.info, progress: progress.at(-1) };
          await vad.dispose();
        }
        return results;
      }, { variant, models: MODELS, clips: CLIPS });
      const decoded = {};  // clip -> the samples the page decoded (the same whichever model reads them)
      for (const clip of CLIPS) {
        const bytes = Uint8Array.from(Buffer.from(out[`${MODELS[0]}/${clip}`].samples, 'base64'));  // 4-byte aligned
        decoded[clip] = new Float32Array(bytes.buffer);
      }
      for (const model of MODELS) {
        assert.equal(out[model].info.variant, variant);
        assert.equal(out[model].info.frameSamples, 512);
        assert.equal(out[model].progress.loaded, out[model].info.bytes);
        for (const clip of CLIPS) {
          const r = out[`${model}/${clip}`];
          const samples = decoded[clip];
          const wav = readWav16(clipPath(clip));
          if (wav.rate === 16000) assert.equal(maxAbsDiff(samples, wav.samples), 0, `${clip}: the page decoded the WAV's samples`);
          const ref = (await onnxRuntimeProbs(ort, sessions[model], samples)).probs;
          const diff = maxAbsDiff(r.probs, ref);
          t.diagnostic(`${model} ${clip}: max |${variant} - ORT| ${diff.toExponential(2)}, ${r.segments.length} segments, ${(r.ms / r.probs.length).toFixed(3)} ms/frame`);
          assert.ok(diff <= TOLERANCE, `${model} ${clip}: max diff ${diff}`);
          assert.deepEqual(r.segments.map(({ startFrame, endFrame }) => ({ startFrame, endFrame })), referenceSegments(ref), `${model} ${clip}: segments`);
        }
      }
    });
  });
}

test('in the page: streaming segmenter events (vad-web names), process() per frame, a bad file', { skip }, async () => {
  await inPage(async (page) => {
    const out = await page.evaluate(async () => {
      const { Vad, VAD_WEB_DEFAULTS } = await import('/web/vad.js');
      const vad = await Vad.load('/fixtures/vad/silero_vad_v5.1.onnx');
      const samples = await vad.decodeWav('/fixtures/audio/test.wav');
      const whole = await vad.segments(samples, VAD_WEB_DEFAULTS);
      const events = [];
      let frames = 0;
      const seg = await vad.segmenter({
        ...VAD_WEB_DEFAULTS,
        onSpeechStart: () => events.push({ type: 'start', frame: frames }),
        onSpeechEnd: (audio) => events.push({ type: 'end', frame: frames, samples: audio.length }),
        onVADMisfire: () => events.push({ type: 'misfire', frame: frames }),
        onFrameProcessed: () => frames++,
      });
      for (let at = 0; at < samples.length; at += 4096) await seg.process(samples.subarray(at, at + 4096));
      await seg.flush();
      await vad.reset();
      const perFrame = [];
      for (let i = 0; i < 20; i++) perFrame.push(await vad.process(samples.subarray(i * 512, (i + 1) * 512)));
      let error = '';
      try {
        await Vad.load(new Blob(['not an onnx file at all']));
      } catch (e) {
        error = e.message;
      }
      await vad.dispose();
      return { whole: { probs: Array.from(whole.probs.subarray(0, 20)), segments: whole.segments }, events, frames, perFrame, error, total: samples.length };
    });
    assert.deepEqual(out.perFrame, out.whole.probs);
    assert.equal(out.frames, Math.floor(out.total / 512));
    const ends = out.events.filter((e) => e.type === 'end');
    assert.equal(ends.length, out.whole.segments.length);
    ends.forEach((e, i) => assert.equal(e.samples, (out.whole.segments[i].endFrame - out.whole.segments[i].startFrame) * 512));
    assert.ok(out.events.length >= 2 && out.events[0].type === 'start');
    assert.match(out.error, /^sotto: blob: onnx: /);
  });
});
