// The agent page's profiles on a WebGPU adapter (SwiftShader here, the launch of gpu_browser.test.mjs): 'auto'
// finds the adapter and runs the language model on the GPU, 'cpu' keeps it on the CPU, and both answer a typed
// question; the page says which it uses. (A lost GPU moves the model to the CPU inside web/llm.js, device 'auto';
// the conversation is the page's own history, so it carries on.)
// Run: node --test tests/web/agent_gpu.test.mjs
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { SMALL_MODEL, assertOnlyAllowed, buildOnce, openAgent, skipReason, useAgentBrowser, waitReady } from './agent_support.mjs';

const skip = skipReason();
before(async () => {
  if (!skip) await buildOnce();
});
const chrome = useAgentBrowser({ webgpu: true, skip });

for (const [profile, device] of [['auto', 'webgpu'], ['cpu', 'cpu']]) {
  test(`profile ${profile}: the language model runs on ${device} and answers`, { skip }, async () => {
    const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/agent/?model=${SMALL_MODEL}&cache=0&warmup=0&tokens=4&profile=${profile}`);
    try {
      await waitReady(page);
      const gpuInfo = await page.locator('#gpu-info').textContent();
      assert.match(gpuInfo, /^WebGPU: /);
      assert.equal(await page.evaluate(() => window.sottoAgent.profile.device), device);
      assert.match(await page.evaluate(() => window.sottoAgent.models.llm.state), device === 'webgpu' ? /GPU/ : /CPU/);
      await page.evaluate(() => window.sottoAgent.ask('Once upon a time'));
      const turn = await page.evaluate(() => window.sottoAgent.turns[0]);
      assert.ok(turn.reply.length > 0);
      assert.deepEqual(logs, []);
      assertOnlyAllowed(requests, chrome.url);
    } finally {
      await context.close();
    }
  });
}
