// The engine in headless Chromium: cross-origin isolation, both wasm builds, the threaded SIMD self-test on
// every worker, streaming a real model file into wasm memory, and a WebGPU adapter (SwiftShader here).
// Run: node --test tests/web/browser.test.mjs   (needs build/wasm-simd128 and build/wasm-relaxed built,
// /usr/bin/chromium or $CHROMIUM, and tests/fixtures or $SOTTO_FIXTURES)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { onLab, useBrowser } from './browser_support.mjs';

const chrome = useBrowser({ webgpu: true });

// onLab, with the engine it started: fn(page, info).
function withEngine(query, fn) {
  return onLab(chrome, query, async (page) => {
    const info = await page.evaluate(() => window.sottoLab.engine?.info ?? null);
    assert.ok(info, `engine did not start (${query})`);
    return fn(page, info);
  });
}

for (const variant of ['simd128', 'relaxed']) {
  test(`${variant} build: loads, isolated, threaded self-test matches the scalar reference`, async (t) => {
    assert.ok(existsSync(new URL(`../../build/wasm-${variant}/sotto.wasm`, import.meta.url)), `build wasm-${variant} first`);
    await withEngine(`variant=${variant}&threads=4`, async (page, info) => {
      // (onPage has checked that the page is cross-origin isolated.)
      assert.equal(info.variant, variant);
      assert.equal(info.threads, 4);
      // Each worker has its own TLS block (a thread_local written at start-up reads back per worker).
      assert.deepEqual(info.threadIndices, [0, 1, 2, 3]);
      assert.equal(new Set(info.tlsBases).size, 4);
      if (variant === 'relaxed') {
        const validates = await page.evaluate(async (u) => WebAssembly.validate(await (await fetch(u)).arrayBuffer()), info.wasmUrl);
        assert.equal(validates, true, 'Chromium must validate the relaxed-SIMD build');
      }
      for (const threads of [4]) {
        const r = await page.evaluate(() => window.sottoLab.engine.selftest({ rows: 512, cols: 1024 }));
        t.diagnostic(`${variant} ${threads} threads: ${r.ms.toFixed(2)} ms, q8_0 max error ${r.q8MaxAbsError}`);
        assert.equal(r.threads, 4);
        assert.ok(r.rowsPerThreadMin > 0, 'every worker computed rows');
        assert.equal(r.checksum, r.checksumRef, 'threaded SIMD int8 dot products equal the scalar reference');
        assert.ok(r.maxAbsError <= r.tolerance);
        assert.ok(r.q8MaxAbsError >= 0 && r.q8MaxAbsError <= r.q8Tolerance, `q8_0 error ${r.q8MaxAbsError}`);
        assert.equal(r.q8Checksum, r.q8Checksum1Thread, 'q8_0 outputs do not depend on the thread count');
        assert.equal(r.passed, true);
      }
    });
  });
}

test('auto-detection picks the relaxed build in Chromium', async () => {
  const variant = await withEngine('threads=2', (page, info) => info.variant);
  assert.equal(variant, 'relaxed');
});

test('self-test timing at 1, 2 and 4 threads', async (t) => {
  for (const threads of [1, 2, 4]) {
    await withEngine(`threads=${threads}`, async (page, info) => {
      const r = await page.evaluate(() => window.sottoLab.engine.selftest({ rows: 2048, cols: 2048, repeats: 5 }));
      assert.equal(r.passed, true);
      t.diagnostic(`${info.variant}, ${threads} threads, 2048x2048 (int8 + q8_0 kernels + references): ${r.ms.toFixed(1)} ms`);
    });
  }
});

test('describe streams a real GGUF into wasm memory', async () => {
  await withEngine('threads=2', async (page) => {
    const d = await page.evaluate(() => window.sottoLab.describe('/fixtures/llm/stories260K.gguf'));
    assert.equal(d.ok, true, d.error);
    assert.match(d.format, /^gguf/);
    assert.equal(d.tensors.length, 48);
    assert.ok(d.tensors.some((x) => x.name === 'token_embd.weight'));
    // The page shows the table.
    assert.ok((await page.locator('#describe-out table').count()) === 2);
    const bad = await page.evaluate(() => window.sottoLab.engine.describe(new Blob([new Uint8Array([1, 2, 3, 4, 5])])));
    assert.equal(bad.ok, false);
    assert.ok(bad.error.length > 0);
    // Through the page: a failed describe replaces the previous tables with its error, also when the read
    // itself fails (a URL that does not exist).
    for (const source of ['bytes', '/fixtures/no-such-file.gguf']) {
      await page.evaluate(() => window.sottoLab.describe('/fixtures/llm/stories260K.gguf'));
      assert.equal(await page.locator('#describe-out table').count(), 2);
      await page.evaluate((s) => window.sottoLab.describe(s === 'bytes' ? new Blob([new Uint8Array([1, 2, 3, 4, 5])]) : s), source);
      assert.equal(await page.locator('#describe-out table').count(), 0, source);
      assert.equal(await page.locator('#describe-out .bad').count(), 1, source);
    }
  });
});

test('WebGPU: navigator.gpu gives an adapter', async (t) => {
  await withEngine('threads=1', async (page) => {
    const adapter = await page.evaluate(async () => {
      if (!navigator.gpu) return { error: 'navigator.gpu is missing' };
      const a = await navigator.gpu.requestAdapter();
      if (!a) return { error: 'requestAdapter() returned null' };
      const i = a.info ?? {};
      return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
               features: [...a.features].sort(), maxBufferSize: a.limits.maxBufferSize };
    });
    t.diagnostic(`WebGPU adapter: ${JSON.stringify(adapter)}`);
    assert.ok(!adapter.error, adapter.error);
  });
});
