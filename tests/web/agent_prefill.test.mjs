// Speculative prefill (web/agent/agent.js startPrefill): once the speculative transcript exists, the page
// prefills its chat turn into the KV cache and holds it; the endpoint either takes it (no prefill left to wait
// for) or, when the user went on speaking, it is rolled back (sotto_llm_rollback) to before the turn.
// Headless Chromium, the page with stand-ins for recognition and synthesis (tests/web/agent_standins.mjs) and
// the small stories model: a typed turn first (so the voice turn continues a conversation in the cache), then
// capital.wav with a 0.45 s pause cut into it (the speculation made in that pause is prefilled, then dropped
// and rolled back; the one made in the final pause is prefilled and used), then a typed turn again. Run with
// ?prefill=0 on the same clip and seed, every reply and the cache's length after each turn must be the same:
// a rollback that left a token behind, or lost the previous reply's unrun last token, changes both.
// Before that, in Node (no browser): llm.js chat's speculative stream, held, used or given up, against a model
// that never had the given-up turn.
// Run: node --test tests/web/agent_prefill.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Llm } from '../../web/llm.js';
import { startServer } from '../../web/serve.mjs';
import { SMALL_MODEL, assertOnlyAllowed, buildStandinsOnce, fixtures, launchAgentBrowser, micArgs, openAgent, pausedClip, skipReason, wasmDir } from './agent_support.mjs';

const skip = skipReason();

test('llm.js: a held speculative turn writes nothing; given up, the conversation goes on as if it never ran', { skip }, async () => {
  const load = () => Llm.load(`${fixtures}/llm/stories260K.gguf`, { threads: 1, variant: 'simd128', wasmUrl: `${wasmDir}/wasm-simd128/sotto.wasm`, nCtx: 512 });
  const [spec, plain] = [await load(), await load()];
  try {
    // Sampled, so a cache off by one token (the previous reply's unrun last one) gives other text.
    const options = { temperature: 0.8, seed: 11, maxTokens: 16 };
    const say = async (llm, messages, o = {}) => {
      const r = await llm.chat(messages, { ...options, ...o });
      return { text: r.choices[0].message.content, reused: r.timings.reusedCache, nPast: r.timings.nPast };
    };
    const m1 = [{ role: 'user', content: 'Once upon a time' }];
    const first = await say(spec, m1);
    assert.deepEqual(first, await say(plain, m1));
    const history = [...m1, { role: 'assistant', content: first.text }];
    // Given up while held (nothing written), then the real turn, then one more.
    let tokens = 0;
    const held = spec.chat([...history, { role: 'user', content: 'The dog ran' }], { ...options, stream: true, speculative: true, onToken: () => tokens++ });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(tokens, 0, 'a held turn wrote tokens');
    await held.return();
    const m2 = [...history, { role: 'user', content: 'The cat sat' }];
    const second = await say(spec, m2);
    assert.deepEqual(second, await say(plain, m2));
    assert.equal(second.reused, true, 'the cache was not kept across the rolled-back turn');
    // Held, then used: the same reply as a plain turn.
    const m3 = [...m2, { role: 'assistant', content: second.text }, { role: 'user', content: 'Lily went' }];
    const used = spec.chat(m3, { ...options, stream: true, speculative: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
    used.resume();
    let text = '';
    let timings = null;
    for await (const c of used) {
      text += c.choices[0].delta.content ?? '';
      timings = c.timings ?? timings;
    }
    const third = await say(plain, m3);
    assert.equal(text, third.text);
    assert.equal(timings.nPast, third.nPast);
    assert.equal(timings.reusedCache, true);
  } finally {
    await spec.dispose();
    await plain.dispose();
  }
});

let server = null;
let base = '';
let dir = null;
let clip = '';

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'sotto-prefill-'));
  clip = pausedClip(dir, 450);
  await buildStandinsOnce();
  ({ server, url: base } = await startServer(0));
});

after(() => {
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// Typed turn, voice turn (the microphone started once the typed one is over), typed turn: the page's record.
async function conversation(options) {
  // A browser per run: the fake microphone plays its file once.
  const browser = await launchAgentBrowser(micArgs(clip));
  try {
    const { page, logs, requests, context } = await openAgent(browser, base, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&warmup=0&tokens=8&seed=7${options}`);
    const settled = (n) => page.waitForFunction((count) => {
      const a = window.sottoAgent;
      return a.errors.length || (a.turns.length >= count && a.status !== 'speaking' && a.status !== 'thinking');
    }, n, { timeout: 60000, polling: 100 });
    const ask = async (text, n) => {
      await page.fill('#ask-input', text);
      await page.press('#ask-input', 'Enter');
      await settled(n);
    };
    await ask('Once upon a time', 1);
    await page.click('#mic-button');
    await settled(2);
    await ask('The dog ran', 3);
    const { turns, events, errors, segments } = await page.evaluate(() => window.sottoAgent);
    assert.deepEqual(errors, []);
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, base);
    await context.close();
    return { turns, events, segments };
  } finally {
    await browser.close();
  }
}

test('a prefill dropped when speech resumes is rolled back; the one the endpoint confirms is used; replies as without', { skip, timeout: 180_000 }, async () => {
  const spec = await conversation('');
  const plain = await conversation('&prefill=0');
  for (const run of [spec, plain]) {
    assert.equal(run.segments.length, 1, `the pause ended the segment: ${JSON.stringify(run.segments)}`);
    assert.deepEqual(run.turns.map((t) => t.source), ['typed', 'voice', 'typed']);
    assert.deepEqual(run.turns.map((t) => t.reusedCache), [false, true, true], 'each turn after the first extends the cache');
    assert.equal(run.turns[1].speculativeAsr, true);
  }
  const kinds = (run) => run.events.map((e) => e.type).filter((t) => t.startsWith('prefill') || t.startsWith('speculation'));
  assert.deepEqual(kinds(spec), ['speculation', 'prefill', 'speculation-dropped', 'prefill-dropped', 'speculation', 'prefill', 'prefill-used']);
  assert.deepEqual(kinds(plain), ['speculation', 'speculation-dropped', 'speculation']);
  assert.deepEqual(spec.turns.map((t) => t.speculativePrefill), [false, true, false]);
  assert.deepEqual(plain.turns.map((t) => t.speculativePrefill), [false, false, false]);
  for (let i = 0; i < 3; i++) {
    assert.ok(spec.turns[i].reply.length > 0, `turn ${i}: empty reply`);
    assert.equal(spec.turns[i].reply, plain.turns[i].reply, `turn ${i}'s reply`);
    assert.equal(spec.turns[i].nPast, plain.turns[i].nPast, `turn ${i}: the cache's length after it`);
  }
});
