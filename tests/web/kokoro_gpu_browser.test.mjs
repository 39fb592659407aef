// Kokoro on the op layer's WebGPU backend in headless Chromium (SwiftShader), through web/tts.js
// { device: 'webgpu' }: the weights read on the CPU and copied to the engine worker's GPUDevice, the forward
// pass (src/models/tts/kokoro.cpp) recorded as WGSL dispatches, every readback (durations, lengths) waited
// for through JS Promise Integration. Fast checks (always): an unknown device refused in one line, and
// 'webgpu' where JSPI is missing (Node) with its reason. Slow (SwiftShader needs
// minutes for the vocoder at frame rate, as tests/unit/kokoro_gpu_test.cpp says; SOTTO_SLOW_GPU_TESTS=1): a
// short phoneme string on the GPU against the CPU build in the same page, compared as sound (bounds below).
// Not bit-equal: the float parts round differently and a value at a rounding boundary of the next dynamic
// quantization moves a whole step (kokoro_gpu_test.cpp measures 4e-4 .. 7e-3 relative RMS per ALBERT pass,
// compounding to moved durations: measured here 34200 GPU samples against 33600, one unit apart).
// Run: node --test tests/web/kokoro_gpu_browser.test.mjs   (needs build/wasm-simd128, models/kokoro,
// /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { Tts } from '../../web/tts.js';
import { CHROMIUM, onPage, useBrowser } from './browser_support.mjs';
import { repo, wasmPath } from './vad_support.mjs';

const MODEL = `${repo}models/kokoro/kokoro-v1.0.int8.onnx`;
const PHONEMES = 'hˈɛlO';
// One predicted duration unit is 600 samples at 24 kHz (two 300-sample hops of the vocoder). Sample by sample
// comparison (an SNR) means nothing once a duration moved: the rest of the clip is shifted. What is compared:
// the length within MAX_DURATION_FRAMES units (two, as kokoro_gpu_test.cpp saw two ONNX Runtime builds differ),
// the level within MAX_LEVEL_DB, and the long-term average spectrum (16 bands to 12 kHz, in dB) within
// MAX_SPECTRUM_DB per band on average: silence, noise or a broken vocoder fails all three. Measured on
// SwiftShader for 'hˈɛlO': one unit apart, level 0.0 dB, spectrum 0.55 dB; white noise of the CPU's level is
// 15 dB from it, the CPU's own audio at half amplitude and shifted 6 dB.
const SAMPLES_PER_DURATION = 600;
const MAX_DURATION_FRAMES = 2;
const MAX_LEVEL_DB = 1;
const MAX_SPECTRUM_DB = 1.5;

function energy(x) {
  let e = 0;
  for (const v of x) e += v * v;
  return e / Math.max(1, x.length);
}

// Mean |difference| in dB over 16 bands of the two signals' average power spectra (512-sample Hann frames,
// hop 256, a plain DFT: the clips are short).
function spectralDistanceDb(a, b) {
  const N = 512;
  const bands = 16;
  const ltas = (x) => {
    const power = new Float64Array(N / 2);
    let count = 0;
    for (let start = 0; start + N <= x.length; start += N / 2, count++) {
      for (let k = 1; k <= N / 2; k++) {
        let re = 0;
        let im = 0;
        for (let n = 0; n < N; n++) {
          const v = x[start + n] * (0.5 - 0.5 * Math.cos((2 * Math.PI * n) / N));
          re += v * Math.cos((2 * Math.PI * k * n) / N);
          im -= v * Math.sin((2 * Math.PI * k * n) / N);
        }
        power[k - 1] += re * re + im * im;
      }
    }
    const out = new Float64Array(bands);
    for (let k = 0; k < N / 2; k++) out[Math.floor((k * bands) / (N / 2))] += power[k] / Math.max(1, count);
    return out;
  };
  const pa = ltas(a);
  const pb = ltas(b);
  let sum = 0;
  for (let i = 0; i < bands; i++) sum += Math.abs(10 * Math.log10((pa[i] + 1e-12) / (pb[i] + 1e-12)));
  return sum / bands;
}

const fastSkip = !existsSync(wasmPath('simd128')) ? 'build the wasm first (cmake --build --preset wasm-simd128)'
  : !existsSync(MODEL) && 'no models/kokoro (bash scripts/get-models.sh kokoro)';
const slowSkip = fastSkip || (!existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !process.env.SOTTO_SLOW_GPU_TESTS && 'SwiftShader needs minutes for Kokoro in Chromium: SOTTO_SLOW_GPU_TESTS=1 runs it');

const chrome = useBrowser({ webgpu: true, skip: slowSkip });

// (Both are refused before the model is read; 'auto''s CPU fallback would load the whole model on the CPU, ~8 s
// of the web suite's budget, and is left out.)
test('Tts device option: unknown refused; webgpu without JSPI (Node) refused with the reason', { skip: fastSkip }, async () => {
  await assert.rejects(Tts.load(MODEL, { device: 'tpu', variant: 'simd128' }), { message: "sotto: unknown TTS device 'tpu' (use 'cpu', 'webgpu' or 'auto')" });
  if (typeof WebAssembly.Suspending === 'function') return;
  await assert.rejects(Tts.load(MODEL, { device: 'webgpu', variant: 'simd128' }),
    { message: /^sotto: TTS device 'webgpu': this runtime lacks JS Promise Integration/ });
});

test(`Kokoro on WebGPU in the page: '${PHONEMES}' as sound against the CPU build (length, level, spectrum)`, { skip: slowSkip, timeout: 600000 }, async (t) => {
  await onPage(chrome, 'web/serve.mjs', async (page) => {
    const out = await page.evaluate(async ({ phonemes }) => {
      const { Tts } = await import('/web/tts.js');
      const run = async (device) => {
        const t0 = performance.now();
        const tts = await Tts.load('/models/kokoro/kokoro-v1.0.int8.onnx', { device, variant: 'simd128', threads: 1 });
        const loadMs = performance.now() - t0;
        const r = await tts.speakPhonemes(phonemes);
        const where = tts.device;
        tts.dispose?.();
        return { device: where, audio: Array.from(r.audio), ms: r.ms, loadMs };
      };
      return { gpu: await run('webgpu'), cpu: await run('cpu') };
    }, { phonemes: PHONEMES });
    if (process.env.SOTTO_KOKORO_GPU_DUMP) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(process.env.SOTTO_KOKORO_GPU_DUMP, JSON.stringify({ gpu: out.gpu.audio, cpu: out.cpu.audio }));
    }
    const diff = spectralDistanceDb(out.gpu.audio, out.cpu.audio);
    const frames = Math.abs(out.gpu.audio.length - out.cpu.audio.length) / SAMPLES_PER_DURATION;
    const level = 10 * Math.log10(energy(out.gpu.audio) / energy(out.cpu.audio));
    t.diagnostic(`GPU ${out.gpu.audio.length} samples in ${(out.gpu.ms / 1000).toFixed(1)} s (load ${(out.gpu.loadMs / 1000).toFixed(1)} s) on SwiftShader; `
      + `CPU ${out.cpu.audio.length} samples in ${(out.cpu.ms / 1000).toFixed(2)} s; ${frames} duration frames apart, level ${level.toFixed(2)} dB, `
      + `average spectrum ${diff.toFixed(2)} dB apart per band`);
    assert.equal(out.gpu.device, 'webgpu');
    assert.equal(out.cpu.device, 'cpu');
    assert.ok(out.cpu.audio.length > 0);
    assert.ok(frames <= MAX_DURATION_FRAMES, `${frames} duration frames apart`);
    assert.ok(Math.abs(level) <= MAX_LEVEL_DB, `level ${level} dB`);
    assert.ok(diff <= MAX_SPECTRUM_DB, `average spectrum ${diff} dB apart`);
  });
});
