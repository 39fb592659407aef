// A lost GPU does not lose the conversation's engine: the model moves to the CPU (web/llm.js, device 'auto'
// and toCpu()), from the same bytes in wasm memory, and writes what the CPU backend writes. Runs in Node on
// npm `webgpu` (Dawn on Chromium's SwiftShader Vulkan driver); the device is destroyed mid-session by the
// worker's test hook, as a driver reset would. The Vulkan loader reads its environment at process start, so
// the check runs in a child process.
// Run: node --test tests/web/llm_fallback.test.mjs   (needs build/wasm-simd128 and /usr/lib/chromium's Vulkan)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const wasm = process.env.SOTTO_TEST_WASM ?? `${repo}build/wasm-simd128/sotto.wasm`;
const vkLibraryPath = process.env.SOTTO_VK_LIBRARY_PATH ?? '/usr/lib/chromium';
const vkIcd = process.env.SOTTO_VK_ICD ?? '/usr/lib/chromium/vk_swiftshader_icd.json';
const model = `${process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`}/llm/stories260K.gguf`;
const skip = !existsSync(wasm) ? `no wasm build at ${wasm}` : !existsSync(vkIcd) ? `no Vulkan ICD at ${vkIcd}` : !existsSync(model) && `missing ${model}`;

// The child: CPU reference, then 'auto' on the GPU, a lost device, the same call again; then 'webgpu', whose
// call fails after the loss until toCpu().
const child = `
import { Llm } from ${JSON.stringify(`${repo}web/llm.js`)};
const wasmUrl = ${JSON.stringify(wasm)};
const model = ${JSON.stringify(model)};
const opts = { maxTokens: 24, greedy: true };
const out = {};
const cpu = await Llm.load(model, { device: 'cpu', threads: 1, wasmUrl, nCtx: 128 });
out.cpu = (await cpu.generate('Once upon a time', opts)).ids;
await cpu.dispose();

const auto = await Llm.load(model, { device: 'auto', threads: 1, wasmUrl, nCtx: 128 });
out.autoDevice = auto.info.device;
out.autoGpu = (await auto.generate('Once upon a time', opts)).ids;
await auto.engine.call('gpuLoseDevice', {});
const after = await auto.generate('Once upon a time', opts);
out.autoAfter = after.ids;
out.autoAfterDevice = auto.info.device;
out.autoFallback = auto.info.fallback;
await auto.dispose();

const explicit = await Llm.load(model, { device: 'webgpu', threads: 1, wasmUrl, nCtx: 128 });
await explicit.engine.call('gpuLoseDevice', {});
try {
  await explicit.generate('Once upon a time', opts);
  out.explicitError = null;
} catch (e) {
  out.explicitError = String(e.message);
}
await explicit.toCpu();
out.explicitAfter = (await explicit.generate('Once upon a time', opts)).ids;
out.explicitDevice = explicit.info.device;
await explicit.dispose();

console.log(JSON.stringify(out));
process.exit(0);
`;

// Runs a module's source in a child Node with `env`; -> its last stdout line as JSON.
function runModule(source, env) {
  const dir = mkdtempSync(`${tmpdir()}/sotto-fallback-`);
  try {
    writeFileSync(`${dir}/child.mjs`, source);
    const r = spawnSync(process.execPath, [`${dir}/child.mjs`], { env, encoding: 'utf8', timeout: 600000 });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a lost GPU: device auto carries on on the CPU with the same tokens; webgpu reports it and toCpu() carries on', { skip }, (t) => {
  const env = { ...process.env, LD_LIBRARY_PATH: [vkLibraryPath, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'), VK_ICD_FILENAMES: vkIcd };
  const out = runModule(child, env);
  assert.equal(out.cpu.length, 24);
  assert.equal(out.autoDevice, 'webgpu');
  assert.deepEqual(out.autoGpu, out.cpu, 'GPU greedy tokens equal the CPU ones (stories260K F32)');
  assert.equal(out.autoAfterDevice, 'cpu');
  assert.match(out.autoFallback, /device (was )?lost/);
  assert.deepEqual(out.autoAfter, out.cpu);
  assert.match(out.explicitError ?? '', /device (was )?lost/);
  assert.equal(out.explicitDevice, 'cpu');
  assert.deepEqual(out.explicitAfter, out.cpu);
  t.diagnostic(`after the loss: ${out.autoFallback}`);
});

test('device auto without a GPU driver loads on the CPU and says why', { skip }, (t) => {
  const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json', LD_LIBRARY_PATH: '' };
  const out = runModule(`
import { Llm } from ${JSON.stringify(`${repo}web/llm.js`)};
const llm = await Llm.load(${JSON.stringify(model)}, { device: 'auto', threads: 1, wasmUrl: ${JSON.stringify(wasm)}, nCtx: 64 });
const r = await llm.generate('Once upon a time', { maxTokens: 4, greedy: true });
console.log(JSON.stringify({ device: llm.info.device, fallback: llm.info.fallback, n: r.ids.length }));
await llm.dispose();
process.exit(0);`, env);

  assert.equal(out.device, 'cpu');
  assert.match(out.fallback, /webgpu: no adapter/);
  assert.equal(out.n, 4);
  t.diagnostic(`fallback: ${out.fallback}`);
});
