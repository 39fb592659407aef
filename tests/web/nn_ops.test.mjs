// The op layer's CPU kernels as each wasm build compiles them (SIMD128, relaxed SIMD) against their scalar
// references, on fresh random inputs (src/wasm/nn_check.cpp): products, convs, LSTM, activations, softmax,
// layer norm, attention. Node runs relaxed SIMD only behind a flag, so each build's check runs in a child
// node with it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { repo, wasmPath } from './vad_support.mjs';

const script = (variant, seed) => `
import { Engine } from ${JSON.stringify(`${repo}web/engine.js`)};
const engine = await Engine.create({ threads: 1, variant: '${variant}', wasmUrl: ${JSON.stringify(wasmPath(variant))} });
try { console.log(JSON.stringify(await engine.nnCheck({ seed: ${seed} }))); } finally { engine.terminate(); }
`;

for (const variant of ['simd128', 'relaxed']) {
  const skip = !existsSync(wasmPath(variant)) && `no wasm at ${wasmPath(variant)}`;
  test(`wasm (${variant}): nn ops match their references`, { skip }, () => {
    const seed = (Date.now() >>> 0) || 1;
    // A script file, not -e: the engine's worker would inherit --input-type, which workers refuse.
    const dir = mkdtempSync(join(tmpdir(), 'sotto-nn-'));
    let out;
    try {
      writeFileSync(join(dir, 'check.mjs'), script(variant, seed));
      out = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', join(dir, 'check.mjs')]).toString();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const r = JSON.parse(out.trim().split('\n').pop());
    assert.ok(r.checks >= 30, out);
    assert.equal(r.failed, 0, `seed ${seed}: ${out}`);
    assert.ok(r.worstExcess <= 0, `seed ${seed}: ${out}`);
  });
}
