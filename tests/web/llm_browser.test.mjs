// The language model in headless Chromium through web/llm.js: Llm.load streams stories260K (Q4_0 and F32)
// into wasm memory in the engine worker, and 64 greedy tokens on several prompts must be llama.cpp's
// (tests/data/llm_reference.json), with the relaxed-SIMD and the SIMD128 builds, on 2 threads. Also: a
// streamed chat gives well-formed OpenAI chunks and keeps the KV cache across turns; a bad file gives a
// clear error.
// Run: node --test tests/web/llm_browser.test.mjs   (needs build/wasm-simd128 and build/wasm-relaxed,
// /usr/bin/chromium or $CHROMIUM, and tests/fixtures or $SOTTO_FIXTURES)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { onPage, useBrowser } from './browser_support.mjs';

// WebGPU plays no part here: the language model runs on the CPU build.
const recorded = JSON.parse(readFileSync(new URL('../data/llm_reference.json', import.meta.url), 'utf8'));

const chrome = useBrowser();

// Each test imports web/llm.js into a cross-origin-isolated page of the test server (onPage checks it).
const PAGE = 'web/serve.mjs';

const PROMPTS = recorded.models['stories260K.gguf'].slice(0, 3).map((r) => r.prompt);

for (const variant of ['relaxed', 'simd128']) {
  for (const model of ['stories260K-q4_0.gguf', 'stories260K.gguf']) {
    test(`${variant}, ${model}, 2 threads: Llm.load + 64 greedy tokens equal llama.cpp on ${PROMPTS.length} prompts`, async (t) => {
      await onPage(chrome, PAGE, async (page) => {
        const out = await page.evaluate(async ({ variant, model, prompts }) => {
          const { Llm } = await import('/web/llm.js');
          const progress = [];
          const llm = await Llm.load(`/fixtures/llm/${model}`, { threads: 2, variant, onProgress: (p) => progress.push(p) });
          const results = [];
          for (const prompt of prompts) {
            let streamed = '';
            const r = await llm.generate(prompt, { maxTokens: 64, greedy: true, onToken: (text) => (streamed += text) });
            results.push({ ...r, streamed });
          }
          const info = llm.info;
          await llm.dispose();
          return { info, progress, results };
        }, { variant, model, prompts: PROMPTS });
        assert.equal(out.info.variant, variant);
        assert.equal(out.info.threads, 2);
        const last = out.progress.at(-1);
        assert.ok(last && last.loaded === out.info.bytes && last.total === out.info.bytes, `progress ${JSON.stringify(last)}`);
        for (const [i, r] of out.results.entries()) {
          const ref = recorded.models[model][i];
          assert.deepEqual(r.promptIds, ref.prompt_ids, `"${ref.prompt}": prompt ids`);
          assert.deepEqual(r.ids, ref.ids, `"${ref.prompt}": ids`);
          assert.equal(r.text, ref.text, `"${ref.prompt}": text`);
          assert.equal(r.streamed, r.text, 'the streamed pieces add up to the text');
          t.diagnostic(`${variant} ${model} "${ref.prompt}": prefill ${r.prefillMs.toFixed(1)} ms, ${r.decodeTokensPerS.toFixed(0)} tokens/s`);
        }
        t.diagnostic(`wasm memory ${(out.info.memoryBytes / 2 ** 20).toFixed(1)} MiB for a ${(out.info.bytes / 2 ** 20).toFixed(2)} MiB file, n_ctx ${out.info.n_ctx}`);
      });
    });
  }
}

test('streamed chat: OpenAI-shaped chunks, the KV cache kept across turns, early exit', async () => {
  await onPage(chrome, PAGE, async (page) => {
    const out = await page.evaluate(async () => {
      const { Llm } = await import('/web/llm.js');
      const llm = await Llm.load('/fixtures/llm/stories260K-q4_0.gguf', { threads: 2 });
      const collect = async (messages, options) => {
        const chunks = [];
        for await (const c of llm.chat(messages, { stream: true, greedy: true, maxTokens: 24, ...options })) chunks.push(c);
        return chunks;
      };
      const messages = [{ role: 'user', content: 'Once upon a time' }];
      const first = await collect(messages);
      const reply = first.map((c) => c.choices[0].delta.content ?? '').join('');
      messages.push({ role: 'assistant', content: reply }, { role: 'user', content: 'The end.' });
      const second = await collect(messages);
      // The same conversation without the cache: a non-streamed completion after a reset by generate().
      await llm.generate('x', { maxTokens: 1 });
      const whole = await llm.chat(messages, { greedy: true, maxTokens: 24 });
      // Leaving the loop early stops the generation; the engine stays usable.
      let taken = 0;
      for await (const c of llm.chat([{ role: 'user', content: 'One day' }], { stream: true, greedy: true, maxTokens: 200 })) {
        if (++taken === 4) break;
        void c;
      }
      const after = await llm.generate('Lily', { maxTokens: 8, greedy: true });
      await llm.dispose();
      return { first, second, whole, afterIds: after.ids.length };
    });
    for (const chunks of [out.first, out.second]) {
      assert.ok(chunks.length >= 3);
      const id = chunks[0].id;
      for (const c of chunks) {
        assert.equal(c.object, 'chat.completion.chunk');
        assert.equal(c.id, id);
        assert.equal(typeof c.created, 'number');
        assert.equal(typeof c.model, 'string');
        assert.equal(c.choices.length, 1);
        assert.equal(c.choices[0].index, 0);
        assert.equal(typeof c.choices[0].delta, 'object');
      }
      assert.equal(chunks[0].choices[0].delta.role, 'assistant');
      for (const c of chunks.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
      assert.ok(['stop', 'length'].includes(chunks.at(-1).choices[0].finish_reason));
      assert.ok(chunks.slice(1, -1).every((c) => typeof c.choices[0].delta.content === 'string' && c.choices[0].delta.content.length > 0));
    }
    assert.equal(out.first.at(-1).timings.reusedCache, false);
    assert.equal(out.second.at(-1).timings.reusedCache, true, 'the second turn continues the cached conversation');
    assert.equal(out.whole.object, 'chat.completion');
    assert.equal(out.whole.choices[0].message.role, 'assistant');
    assert.equal(out.whole.timings.reusedCache, false);
    assert.ok(out.whole.usage.prompt_tokens > 0 && out.whole.usage.completion_tokens > 0);
    assert.equal(out.afterIds, 8);
  });
});

test('a bad file gives a clear error, and the page stays responsive while generating', async () => {
  await onPage(chrome, PAGE, async (page) => {
    const errors = await page.evaluate(async () => {
      const { Llm } = await import('/web/llm.js');
      const attempt = async (source, options) => {
        try {
          await Llm.load(source, { threads: 1, ...options });
          return 'loaded';
        } catch (e) {
          return String(e.message);
        }
      };
      return {
        garbage: await attempt(new Blob([new Uint8Array([71, 71, 85, 70, 3, 0, 0, 0, 9, 9])], { type: 'application/octet-stream' })),
        text: await attempt(new Blob(['hello, not a model'])),
        missing: await attempt('/fixtures/llm/no-such-model.gguf'),
        vocabOnly: await attempt('/fixtures/tokenizer/ggml-vocab-qwen2.gguf'),
        device: await attempt('/fixtures/llm/stories260K-q4_0.gguf', { device: 'webgpu' }),
      };
    });
    assert.match(errors.garbage, /^sotto: .*gguf: /);
    assert.match(errors.text, /^sotto: .*gguf: bad magic/);
    assert.match(errors.missing, /HTTP 404/);
    assert.match(errors.vocabOnly, /missing tensor/);
    assert.match(errors.device, /device 'webgpu'/);
    for (const e of Object.values(errors)) assert.ok(!e.includes('\n'), `one line: ${e}`);
    // The main thread keeps running timers while the worker generates.
    const ticks = await page.evaluate(async () => {
      const { Llm } = await import('/web/llm.js');
      const llm = await Llm.load('/fixtures/llm/stories260K.gguf', { threads: 2 });
      let n = 0;
      const timer = setInterval(() => n++, 5);
      await llm.generate('Once upon a time', { maxTokens: 200, greedy: true });
      clearInterval(timer);
      await llm.dispose();
      return n;
    });
    assert.ok(ticks > 0, 'timers ran during generation');
  });
});
