// Silero VAD on the op layer's WebGPU backend in headless Chromium (SwiftShader), through web/vad.js
// { device: 'webgpu' }: the same forward pass as the CPU (src/models/vad/silero.cpp) recorded as WGSL dispatches
// by the wasm engine worker, each frame's probability read back through JS Promise Integration. v5.1 and v6.2
// on the first 3 s of beckett.wav (SwiftShader is slow): the GPU's probabilities within 1e-4 of the CPU
// build's on the same samples in the same page and of ONNX Runtime's (onnxruntime-node, live), the tolerance
// the native WebGPU test (tests/unit/vad_test.cpp WebGpuMatchesOnnxRuntime) holds; frame-by-frame process()
// equal to the clip call; the streaming segmenter on the GPU giving the CPU's events; 'auto' on an inline
// engine falling back to the CPU with its reason; 'webgpu' there and an unknown device refused in one line.
// Run: node --test tests/web/vad_gpu_browser.test.mjs   (needs build/wasm-simd128, /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { CHROMIUM, onPage, useBrowser } from './browser_support.mjs';
import { MODELS, clipPath, haveFixtures, maxAbsDiff, modelPath, onnxRuntimeProbs, onnxRuntimeSession, readWav16, repo, wasmPath } from './vad_support.mjs';

const TOLERANCE = 1e-4;
const SECONDS = 3;
const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !existsSync(wasmPath('simd128')) && 'build the wasm first (cmake --build --preset wasm-simd128)';

const chrome = useBrowser({ webgpu: true, skip });
const inPage = (fn, arg) => onPage(chrome, 'web/serve.mjs', (page) => page.evaluate(fn, arg));

test(`v5.1 and v6.2 on WebGPU: ${SECONDS} s within ${TOLERANCE} of the CPU build and of ONNX Runtime`, { skip }, async (t) => {
  const samples = readWav16(clipPath('beckett.wav')).samples.slice(0, SECONDS * 16000);
  const out = await inPage(async ({ models, samples }) => {
    const { Engine } = await import('/web/engine.js');
    const { Vad } = await import('/web/vad.js');
    const engine = await Engine.create({ threads: 1, variant: 'simd128' });
    const audio = Float32Array.from(samples);
    const results = {};
    try {
      for (const model of models) {
        const gpu = await Vad.load(`/fixtures/vad/${model}`, { engine, device: 'webgpu' });
        const cpu = await Vad.load(`/fixtures/vad/${model}`, { engine });
        const onGpu = await gpu.segments(audio);
        const onCpu = await cpu.segments(audio);
        // process() frame by frame on the GPU: the same stream as the clip call.
        await gpu.reset();
        const frames = [];
        for (let i = 0; i < 8; i++) frames.push(await gpu.process(audio.subarray(i * 512, (i + 1) * 512)));
        results[model] = { info: gpu.info, cpuInfo: cpu.info, gpu: Array.from(onGpu.probs), cpu: Array.from(onCpu.probs), frames,
          gpuSegments: onGpu.segments, cpuSegments: onCpu.segments, gpuMs: onGpu.ms, cpuMs: onCpu.ms };
        await gpu.dispose();
        await cpu.dispose();
      }
    } finally {
      engine.terminate();
    }
    return results;
  }, { models: MODELS, samples: Array.from(samples) });
  for (const model of MODELS) {
    const r = out[model];
    assert.equal(r.info.device, 'webgpu');
    assert.equal(r.cpuInfo.device, 'cpu');
    assert.equal(r.gpu.length, Math.ceil(samples.length / 512));
    const session = await onnxRuntimeSession(ort, modelPath(model));
    const ref = (await onnxRuntimeProbs(ort, session, samples)).probs;
    await session.release();
    const vsCpu = maxAbsDiff(r.gpu, r.cpu);
    const vsOrt = maxAbsDiff(r.gpu, ref);
    t.diagnostic(`${model}: ${r.gpu.length} frames, max |gpu - cpu| ${vsCpu.toExponential(2)}, |gpu - ORT| ${vsOrt.toExponential(2)}, `
      + `${(r.gpuMs / r.gpu.length).toFixed(2)} ms/frame on SwiftShader vs ${(r.cpuMs / r.cpu.length).toFixed(3)} on the CPU`);
    assert.ok(vsCpu <= TOLERANCE, `${model}: GPU vs CPU ${vsCpu}`);
    assert.ok(vsOrt <= TOLERANCE, `${model}: GPU vs ONNX Runtime ${vsOrt}`);
    assert.ok(Math.max(...r.gpu) > 0.5, `${model}: speech found`);
    assert.deepEqual(r.gpuSegments, r.cpuSegments);
    assert.deepEqual(r.frames, r.gpu.slice(0, 8));
  }
});

test('on WebGPU: the streaming segmenter; auto falls back inline; bad devices refused', { skip }, async () => {
  const samples = readWav16(clipPath('test.wav')).samples.slice(0, 2 * 16000);
  const out = await inPage(async ({ samples }) => {
    const { Engine } = await import('/web/engine.js');
    const { Vad } = await import('/web/vad.js');
    const engine = await Engine.create({ threads: 1, variant: 'simd128' });
    const audio = Float32Array.from(samples);
    const message = async (p) => p.then(() => 'no error', (e) => String(e.message));
    try {
      const events = {};
      for (const device of ['webgpu', 'cpu']) {
        const vad = await Vad.load('/fixtures/vad/silero_vad_v5.1.onnx', { engine, device });
        const got = [];
        const seg = await vad.segmenter({ minSpeechMs: 0, redemptionMs: 200, onSpeechStart: () => got.push('start'),
          onSpeechEnd: (a) => got.push(`end ${a.length}`), onVADMisfire: () => got.push('misfire') });
        for (let at = 0; at < audio.length; at += 1000) await seg.process(audio.subarray(at, at + 1000));
        await seg.flush();
        events[device] = got;
        await vad.dispose();
      }
      const inline = await Vad.load('/fixtures/vad/silero_vad_v5.1.onnx', { inline: true, variant: 'simd128', device: 'auto' });
      return {
        events, inline: inline.info,
        inlineGpu: await message(Vad.load('/fixtures/vad/silero_vad_v5.1.onnx', { inline: true, variant: 'simd128', device: 'webgpu' })),
        badDevice: await message(Vad.load('/fixtures/vad/silero_vad_v5.1.onnx', { engine, device: 'tpu' })),
      };
    } finally {
      engine.terminate();
    }
  }, { samples: Array.from(samples) });
  assert.ok(out.events.cpu.length > 0, 'speech events on the CPU');
  assert.deepEqual(out.events.webgpu, out.events.cpu);
  assert.equal(out.inline.device, 'cpu');
  assert.match(out.inline.fallback, /^the VAD runs inline on this thread, which has no WebGPU device/);
  assert.match(out.inlineGpu, /^sotto: VAD device 'webgpu': the VAD runs inline/);
  assert.equal(out.badDevice, "sotto: unknown VAD device 'tpu' (use 'cpu', 'webgpu' or 'auto')");
});

// Node 20 has WebGPU (npm `webgpu`) but no JS Promise Integration, which the op layer's readbacks need in wasm:
// `node web/cli.mjs vad --backend webgpu` says so in one line (exit 1); a bad backend is a usage error (exit 2).
test('node web/cli.mjs vad --backend webgpu: one line saying why Node cannot', { skip: skip || (typeof WebAssembly.Suspending === 'function' && 'this Node has JSPI') }, async () => {
  const { execFile } = await import('node:child_process');
  const run = (args) => new Promise((resolve) => execFile(process.execPath, [`${repo}web/cli.mjs`, ...args], (error, stdout, stderr) => resolve({ code: error?.code ?? 0, stdout, stderr })));
  const base = ['vad', '-m', modelPath('silero_vad_v5.1.onnx'), clipPath('test.wav')];
  const gpu = await run([...base, '--backend', 'webgpu']);
  assert.equal(gpu.code, 1);
  assert.equal(gpu.stdout, '');
  assert.match(gpu.stderr, /^sotto: VAD device 'webgpu': this runtime lacks JS Promise Integration \(WebAssembly\.Suspending \/ promising; Chromium 137\+\), which the GPU models need to wait for readbacks\n$/);
  const bad = await run([...base, '--backend', 'tpu']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^sotto: vad: bad value for --backend: 'tpu' \(cpu or webgpu\)\n/);
});
