// The agent page's profiles on a WebGPU adapter (SwiftShader here, the launch of gpu_browser.test.mjs): 'auto'
// finds the adapter and runs the language model on the GPU, 'cpu' keeps it on the CPU, and both answer a typed
// question; the page says which it uses. (A lost GPU moves the model to the CPU inside web/llm.js, device 'auto';
// the conversation is the page's own history, so it carries on.)
// Run: node --test tests/web/agent_gpu.test.mjs
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';

import { startServer } from '../../web/serve.mjs';
import { CHROMIUM } from './browser_support.mjs';
import { AGENT_ARGS, SMALL_MODEL, assertOnlyAllowed, buildOnce, openAgent, skipReason, waitReady } from './agent_support.mjs';

const skip = skipReason();
const GPU_ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];
let browser = null;
let server = null;
let base = '';

before(async () => {
  if (skip) return;
  await buildOnce();
  ({ server, url: base } = await startServer(0));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: [...GPU_ARGS, ...AGENT_ARGS], ignoreDefaultArgs: ['--enable-unsafe-swiftshader'], timeout: 60000 });
});

after(async () => {
  await browser?.close();
  server?.close();
});

for (const [profile, device] of [['auto', 'webgpu'], ['cpu', 'cpu']]) {
  test(`profile ${profile}: the language model runs on ${device} and answers`, { skip }, async () => {
    const { page, logs, requests, context } = await openAgent(browser, base, `/agent/?model=${SMALL_MODEL}&cache=0&warmup=0&tokens=4&profile=${profile}`);
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
      assertOnlyAllowed(requests, base);
    } finally {
      await context.close();
    }
  });
}
