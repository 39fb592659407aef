// Kokoro on the op layer's WebGPU backend in headless Chromium (SwiftShader), through web/tts.js
// { device: 'webgpu' }: the weights read on the CPU and copied to the engine worker's GPUDevice, the forward
// pass (src/models/tts/kokoro.cpp) recorded as WGSL dispatches, every readback (durations, lengths) waited
// for through JS Promise Integration. Fast checks (always): an unknown device refused in one line, 'auto'
// on an engine without a GPU (Node: no JSPI) falling back to the CPU with its reason. Slow (SwiftShader needs
// minutes for the vocoder at frame rate, as tests/unit/kokoro_gpu_test.cpp says; SOTTO_SLOW_GPU_TESTS=1): a
// short phoneme string on the GPU against the CPU build in the same page: the same length (the durations
// agree on a string this short) and the GPU's audio within 20 dB SNR of the CPU's. Not bit-equal: the float
// parts round differently and a value at a rounding boundary of the next dynamic quantization moves a whole
// step (kokoro_gpu_test.cpp measures 4e-4 .. 7e-3 relative RMS per ALBERT pass, compounding).
// Run: node --test tests/web/kokoro_gpu_browser.test.mjs   (needs build/wasm-simd128, models/kokoro,
// /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';

import { Tts } from '../../web/tts.js';
import { startServer } from '../../web/serve.mjs';
import { CHROMIUM } from './browser_support.mjs';
import { repo, wasmPath } from './vad_support.mjs';

const MODEL = `${repo}models/kokoro/kokoro-v1.0.int8.onnx`;
const PHONEMES = 'hˈɛlO';
const MIN_SNR_DB = 20;
const ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];
const fastSkip = !existsSync(wasmPath('simd128')) ? 'build the wasm first (cmake --build --preset wasm-simd128)'
  : !existsSync(MODEL) && 'no models/kokoro (bash scripts/get-models.sh kokoro)';
const slowSkip = fastSkip || (!existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !process.env.SOTTO_SLOW_GPU_TESTS && 'SwiftShader needs minutes for Kokoro in Chromium: SOTTO_SLOW_GPU_TESTS=1 runs it');

let server;
let url;
let browser;

before(async () => {
  if (slowSkip) return;
  ({ server, url } = await startServer(0));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, ignoreDefaultArgs: ['--enable-unsafe-swiftshader'], timeout: 60000 });
});

after(async () => {
  await browser?.close();
  server?.close();
});

test('Tts device option: unknown refused; auto without JSPI (Node) on the CPU with the reason', { skip: fastSkip }, async () => {
  await assert.rejects(Tts.load(MODEL, { device: 'tpu', variant: 'simd128' }), { message: "sotto: unknown TTS device 'tpu' (use 'cpu', 'webgpu' or 'auto')" });
  if (typeof WebAssembly.Suspending === 'function') return;
  await assert.rejects(Tts.load(MODEL, { device: 'webgpu', variant: 'simd128' }),
    { message: /^sotto: TTS device 'webgpu': this runtime lacks JS Promise Integration/ });
  const tts = await Tts.load(MODEL, { device: 'auto', variant: 'simd128' });
  try {
    assert.equal(tts.device, 'cpu');
    assert.match(tts.fallback, /^this runtime lacks JS Promise Integration/);
  } finally {
    tts.dispose?.();
  }
});

test(`Kokoro on WebGPU in the page: '${PHONEMES}' the CPU build's length, SNR >= ${MIN_SNR_DB} dB`, { skip: slowSkip, timeout: 600000 }, async (t) => {
  const page = await browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  try {
    await page.goto(`${url}web/serve.mjs`);
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
    let signal = 0;
    let noise = 0;
    for (let i = 0; i < Math.min(out.gpu.audio.length, out.cpu.audio.length); i++) {
      signal += out.cpu.audio[i] ** 2;
      noise += (out.gpu.audio[i] - out.cpu.audio[i]) ** 2;
    }
    const snr = 10 * Math.log10(signal / Math.max(noise, 1e-30));
    t.diagnostic(`GPU ${out.gpu.audio.length} samples in ${(out.gpu.ms / 1000).toFixed(1)} s (load ${(out.gpu.loadMs / 1000).toFixed(1)} s) on SwiftShader; `
      + `CPU ${out.cpu.audio.length} samples in ${(out.cpu.ms / 1000).toFixed(2)} s; SNR ${snr.toFixed(1)} dB`);
    assert.equal(out.gpu.device, 'webgpu');
    assert.equal(out.cpu.device, 'cpu');
    assert.ok(out.cpu.audio.length > 0);
    assert.equal(out.gpu.audio.length, out.cpu.audio.length);
    assert.ok(snr >= MIN_SNR_DB, `SNR ${snr} dB`);
  } catch (e) {
    e.message += `\nconsole: ${logs.join(' | ')}`;
    throw e;
  } finally {
    await page.close();
  }
});
