// The voice agent page (web/agent/, built into one file by web/agent/build.mjs) in headless Chromium, served
// by web/serve.mjs at /agent/: it loads with no console errors and says what it lacks, typing gets a streamed
// reply (the small fixture model for speed; the real default model, when present, for a real answer and a second
// turn that reuses the KV cache), a model download resumes after an interruption with Range requests and is
// checked against its sha256, and every request the page makes is its own or a model file's.
// Run: node --test tests/web/agent.test.mjs   (needs build/wasm-*, tests/fixtures, /usr/bin/chromium)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

import { CPU_ARGS, useBrowser } from './browser_support.mjs';
import { AGENT_ARGS, REAL_MODEL, SMALL_MODEL, assertOnlyAllowed, buildOnce, fixtures, openAgent, skipReason, waitReady } from './agent_support.mjs';

const skip = skipReason();
const chrome = useBrowser({ args: [...CPU_ARGS, ...AGENT_ARGS], skip });

test('the one-file page loads with no console errors, says what is missing, and answers a typed question', { skip }, async () => {
  const build = await buildOnce();
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/agent/?model=${SMALL_MODEL}&cache=0&tokens=6`);
  try {
    await waitReady(page);
    const state = await page.evaluate(() => ({
      isolated: crossOriginIsolated, models: window.sottoAgent.models, notice: document.getElementById('notice').textContent,
      status: document.getElementById('status').textContent,
      // Every form control has a label a screen reader can read.
      unlabelled: [...document.querySelectorAll('input, select, button')].filter((el) =>
        !(el.labels?.length || el.getAttribute('aria-label') || el.textContent.trim())).map((el) => el.id),
    }));
    assert.equal(state.isolated, true);
    assert.deepEqual(state.unlabelled, []);
    assert.match(state.models.vad.state, /ready/);
    assert.match(state.models.llm.state, /ready/);
    if (!build.speech.asr) assert.match(state.notice, /speech recognition/);
    if (!build.speech.tts) assert.match(state.notice, /speech synthesis/);

    await page.fill('#ask-input', 'Once upon a time');
    await page.press('#ask-input', 'Enter');
    await page.waitForFunction(() => window.sottoAgent.turns.length === 1, null, { timeout: 30000 });
    const turn = await page.evaluate(() => window.sottoAgent.turns[0]);
    assert.ok(turn.reply.length > 0, 'an empty reply');
    assert.ok(turn.stages.first_token_ms >= 0 && turn.stages.reply_done_ms >= turn.stages.first_token_ms, JSON.stringify(turn.stages));
    const shown = await page.locator('.msg.assistant .text').last().textContent();
    assert.equal(shown, turn.reply);
    assert.equal(await page.locator('.timeline .turn').count(), 1);
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
    // The Content-Security-Policy itself refuses other origins, whatever the page's code tries.
    const tried = await page.evaluate(() => Promise.all(['https://example.com/x', 'http://127.0.0.2:9/x'].map((u) =>
      fetch(u).then(() => 'fetched', (e) => `refused: ${e.message}`))));
    for (const r of tried) assert.match(r, /^refused/);
  } finally {
    await context.close();
  }
});

test('when the browser cannot store the model, the page says how much is needed and offers to load it unsaved', { skip }, async () => {
  await buildOnce();
  const context = await chrome.browser.newContext();
  try {
    await context.addInitScript(() => {
      navigator.storage.estimate = async () => ({ quota: 1_000_000, usage: 900_000 });
    });
    const page = await context.newPage();
    await page.goto(new URL(`/agent/?model=${SMALL_MODEL}&warmup=0`, chrome.url).href);
    await page.waitForFunction(() => window.sottoAgent?.status === 'error', null, { timeout: 30000 });
    assert.match(await page.locator('#notice').textContent(), /not enough storage to keep stories260K\.gguf: it needs 1\.2 MB and the browser allows 0\.1 MB more/);
    await page.getByRole('button', { name: 'Load without saving' }).click();
    await page.waitForFunction(() => window.sottoAgent?.ready, null, { timeout: 30000 });
    assert.match(await page.evaluate(() => window.sottoAgent.models.llm.detail), /not kept/);
  } finally {
    await context.close();
  }
});

test('the default model greets, answers typed questions streamed, and every turn reuses the KV cache', { skip: skip || (!existsSync(REAL_MODEL) && `no ${REAL_MODEL} (scripts/get-models.sh)`) }, async () => {
  await buildOnce();
  // cache=0: 491 MB through Cache Storage and a sha256 would add ~20 s here; the download path is tested below.
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, '/agent/?cache=0&tokens=4');
  try {
    await waitReady(page, 90000);
    const pieces = [];
    await page.exposeFunction('onPiece', (text) => pieces.push(text));
    await page.evaluate(() => {
      const body = () => document.querySelector('.msg.assistant:last-of-type .text');
      new MutationObserver(() => window.onPiece(body()?.textContent ?? '')).observe(document.getElementById('conversation'), { subtree: true, characterData: true, childList: true });
    });
    await page.evaluate(() => window.sottoAgent.ask('What is the capital of France?'));
    await page.evaluate(() => window.sottoAgent.ask('And of Italy?'));
    const turns = await page.evaluate(() => window.sottoAgent.turns);
    assert.equal(turns.length, 2);
    for (const t of turns) assert.ok(t.reply.trim().length > 0, `empty reply: ${JSON.stringify(t)}`);
    assert.match(turns[0].reply, /Paris|capital/i);
    assert.ok(new Set(pieces).size >= 3, `the reply was not streamed (${pieces.length} updates)`);
    // The warm-up's greeting (system prompt + "Hello.") is in the cache: the first question prefills only itself.
    const greeting = await page.locator('.msg.assistant .text').first().textContent();
    assert.ok(greeting.length > 0 && greeting !== turns[0].reply, `no greeting: ${greeting}`);
    assert.equal(turns[0].reusedCache, true, 'the first turn prefilled the system prompt again');
    assert.equal(turns[1].reusedCache, true, 'the second turn prefilled the whole conversation again');
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});

test('a model download resumes after an interruption (Range requests) and is checked against its sha256', { skip }, async () => {
  await buildOnce();
  const bytes = readFileSync(`${fixtures}/llm/stories260K.gguf`);
  const sha = createHash('sha256').update(bytes).digest('hex');
  const chunk = 1 << 18;  // 5 chunks of the 1.2 MB file
  const context = await chrome.browser.newContext();
  try {
    const page = await context.newPage();
    const ranges = [];
    let failOnce = true;
    await page.route('**/fixtures/llm/stories260K.gguf', (route) => {
      const range = route.request().headers().range;
      ranges.push(range);
      if (range === `bytes=${3 * chunk}-${4 * chunk - 1}` && failOnce) {
        failOnce = false;
        return route.abort('connectionreset');
      }
      return route.continue();
    });
    const url = (s) => new URL(`/agent/?model=${SMALL_MODEL}&chunk=${chunk}&sha256=${s}&tokens=2&warmup=0`, chrome.url).href;
    await page.goto(url(sha));
    await page.waitForFunction(() => window.sottoAgent?.status === 'error', null, { timeout: 30000 });
    assert.deepEqual(ranges, [0, 1, 2, 3].map((i) => `bytes=${i * chunk}-${(i + 1) * chunk - 1}`));
    ranges.length = 0;
    await page.goto(url(sha));
    await waitReady(page);
    // Only the chunks that were missing: the fourth (interrupted) and the last.
    assert.deepEqual(ranges, [`bytes=${3 * chunk}-${4 * chunk - 1}`, `bytes=${4 * chunk}-${bytes.length - 1}`]);
    const llm = await page.evaluate(() => window.sottoAgent.models.llm);
    assert.match(llm.detail, /resumed, kept in this browser, sha256 ok/);
    await page.waitForFunction(() => /Saved in this browser: 1\.2 MB/.test(document.getElementById('storage-info').textContent), null, { timeout: 5000 });
    await page.getByRole('button', { name: 'Remove saved models' }).click();
    await page.waitForFunction(() => /Removed the saved models/.test(document.getElementById('storage-info').textContent), null, { timeout: 5000 });
    assert.equal(await page.evaluate(() => caches.has('sotto-models-v1')), false);
    // A download from an empty cache is not a resumed one (its first chunk is fetched before the rest).
    await page.goto(url(sha));
    await waitReady(page);
    const fresh = await page.evaluate(() => window.sottoAgent.models.llm);
    assert.match(fresh.detail, / · kept in this browser, sha256 ok · /);
    // A wrong sum: the cached copy is not trusted again after the check fails, and the page says why.
    const wrong = sha.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    await page.goto(url(wrong));
    await page.waitForFunction(() => window.sottoAgent?.status === 'error', null, { timeout: 30000 });
    assert.match(await page.locator('#notice').textContent(), new RegExp(`sha256 ${sha} is not the expected ${wrong}`));
  } finally {
    await context.close();
  }
});
