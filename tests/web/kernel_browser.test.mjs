// The wasm builds' quantized dot kernels (src/cpu/quant_dot_fast_wasm.cpp through quant_dot_rows()) in headless
// Chromium, against the scalar reference on fresh random data (src/wasm/kernel_check.cpp): every output within
// a float-rounding bound of the f64 dot of the reference-decoded blocks, and bit for bit the same whether a
// token runs alone (decode: several rows per pass) or in a tile of tokens (prefill), and whether the rows come
// as one range or odd pieces (remainder rows, thread splits). Shapes: a row count that is no multiple of the
// rows per pass, token counts around the tile size, block counts that are no multiple of 4; every 5th row and
// 3rd token small enough that their f16 block scales are subnormal (a kernel that flushed them fails here).
// Run: node --test tests/web/kernel_browser.test.mjs   (needs build/wasm-simd128 and build/wasm-relaxed, or
// SOTTO_WASM_DIR=<dir under the repository root holding wasm-*/sotto.wasm>; /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { onPage, useBrowser } from './browser_support.mjs';

const WASM_DIR = process.env.SOTTO_WASM_DIR ?? 'build';

const chrome = useBrowser();

const CASES = [];
for (const type of ['q4_0', 'q5_0', 'q8_0', 'q4_K', 'q6_K']) {
  for (const tokens of [1, 3, 4, 5, 9]) CASES.push({ type, rows: 61, cols: 1024, tokens });
}
CASES.push({ type: 'q4_0', rows: 37, cols: 4864, tokens: 2 });  // a wide row (Qwen2.5-0.5B's down projection)
// 35 blocks a row: the 32-value types take their scales 4 blocks at a time, then a tail of 3 blocks one by one.
for (const type of ['q4_0', 'q5_0', 'q8_0']) {
  for (const tokens of [1, 5]) CASES.push({ type, rows: 13, cols: 1120, tokens });
}

// Each case through the engine's `op` (kernelCheck or attentionCheck) in a page with the `variant` build, one
// thread, with its own seed or else a fresh random one -> {variant (the engine's own), out: the results in case
// order}.
async function runInEngine(variant, op, cases) {
  const wasmPath = `${WASM_DIR}/wasm-${variant}/sotto.wasm`;
  assert.ok(existsSync(new URL(`../../${wasmPath}`, import.meta.url)), `build wasm-${variant} first (${wasmPath})`);
  return onPage(chrome, 'web/serve.mjs', (page) =>
    page.evaluate(async ({ variant, wasmUrl, op, cases }) => {
      const { Engine } = await import('/web/engine.js');
      const engine = await Engine.create({ threads: 1, variant, wasmUrl });
      try {
        const out = [];
        for (const c of cases) out.push(await engine[op]({ seed: (Math.random() * 2 ** 32) >>> 0, ...c }));
        return { variant: engine.info.variant, out };
      } finally {
        engine.terminate();
      }
    }, { variant, wasmUrl: `/${wasmPath}`, op, cases }));
}

for (const variant of ['relaxed', 'simd128']) {
  test(`${variant}: quantized dot kernels equal the scalar reference, the same in every pass shape`, async (t) => {
    const results = await runInEngine(variant, 'kernelCheck', CASES);
    assert.equal(results.variant, variant);
    for (const r of results.out) {
      const what = `${variant} ${r.type} ${r.rows}x${r.cols}, ${r.tokens} tokens`;
      t.diagnostic(`${what}: error ${r.errorOverBound.toExponential(2)} of the bound (${r.boundFactor.toExponential(2)} x sum |w x|)`);
      assert.ok(r.errorOverBound <= 1, `${what}: error ${r.errorOverBound} x the bound`);
      assert.ok(r.tileMatchesSingle, `${what}: a tile of tokens differs from each token alone`);
      assert.ok(r.piecesMatchWhole, `${what}: odd row pieces differ from the whole range`);
    }
  });
}

// The two builds on the same random data (the same seeds), output bits compared through a digest. q4_K and
// q6_K must agree bit for bit: both builds add the same exact integers in each of 4 i32 lanes (the relaxed
// build's i8 dot takes x in pair order for that; see quant_dot_fast_wasm.cpp) and finish with the same f32
// multiply and add, so a lane mix-up that stays within the reference bound still fails here (and would change
// the model's greedy tokens between builds). The 32-value types end each block with relaxed_madd in the relaxed
// build, which the engine may or may not fuse (SIMD128 emulates the fused form), so theirs are only reported.
test('relaxed and simd128 give the same bits for the K-quants on the same data', async (t) => {
  const cases = [];
  for (const type of ['q4_K', 'q6_K', 'q4_0', 'q5_0', 'q8_0']) {
    for (const tokens of [1, 3, 5]) cases.push({ type, rows: 37, cols: type.endsWith('K') ? 1280 : 1120, tokens, seed: (Math.random() * 2 ** 32) >>> 0 || 1 });
  }
  const runWith = async (variant) => (await runInEngine(variant, 'kernelCheck', cases)).out;
  const relaxed = await runWith('relaxed'), simd128 = await runWith('simd128');
  for (let i = 0; i < cases.length; ++i) {
    const c = cases[i];
    const same = relaxed[i].digest === simd128[i].digest;
    t.diagnostic(`${c.type} ${c.rows}x${c.cols}, ${c.tokens} tokens: ${same ? 'same bits' : 'bits differ'}`);
    if (c.type.endsWith('K')) assert.ok(same, `${c.type}, ${c.tokens} tokens: the relaxed and SIMD128 builds give different bits`);
  }
});

// Attention (src/cpu/attention.cpp) in each build against the scalar reference on fresh random q, K and V, bit
// for bit: the model's greedy tokens equal llama.cpp's only if every build keeps ggml's f16 numerics. Shapes:
// Qwen2.5-0.5B's heads (64, GQA 14/2) deep into a prompt, a head size with a tail past ggml's 32-element steps
// (40), gemma3's 256, a single query (decode). The relaxed build runs its fused multiply-add kernel where the
// engine fuses relaxed_madd (V8 on a CPU with FMA); reported, not required, since that is the engine's choice.
const ATTENTION_CASES = [
  { nQuery: 8, pos0: 200, nHead: 14, nHeadKv: 2, headDimK: 64, headDimV: 64 },
  { nQuery: 5, pos0: 33, nHead: 4, nHeadKv: 4, headDimK: 40, headDimV: 40 },
  { nQuery: 3, pos0: 70, nHead: 4, nHeadKv: 1, headDimK: 256, headDimV: 256 },
  { nQuery: 1, pos0: 300, nHead: 8, nHeadKv: 2, headDimK: 64, headDimV: 64 },
];

for (const variant of ['relaxed', 'simd128']) {
  test(`${variant}: attention equals the scalar reference bit for bit`, async (t) => {
    const results = await runInEngine(variant, 'attentionCheck', ATTENTION_CASES);
    assert.equal(results.variant, variant);
    for (const r of results.out) {
      const what = `${variant}: ${r.nQuery} queries after ${r.pos0}, heads ${r.nHead}/${r.nHeadKv}, dims ${r.headDimK}`;
      t.diagnostic(`${what}: ${r.differ} outputs differ (largest ${r.maxAbsDiff}), fused madd ${r.fusedMadd}`);
      assert.equal(r.differ, 0, `${what}: ${r.differ} outputs differ from the reference, by up to ${r.maxAbsDiff}`);
      if (variant === 'simd128') assert.equal(r.fusedMadd, false);
    }
  });
}
