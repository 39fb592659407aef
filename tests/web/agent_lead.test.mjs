// The options the agent page gives its voice (tts.stream's { chunks }): chunks by default, the first of 300 ms,
// each piece's leading pause vocoded only for its last 100 ms (web/tts.js leadMs; the trimming cuts the rest
// before playback anyway); ?ttslead=-1 or ?trim=0 vocode all of it (with trim=0 the pause is played), ?ttschunks=0
// whole pieces. Stand-ins for the speech models (tests/web/agent_standins.mjs): only the page's settings are
// under test; tests/web/tts.test.mjs checks what leadMs does to the audio.
// Run: node --test tests/web/agent_lead.test.mjs
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { SMALL_MODEL, buildStandinsOnce, openAgent, skipReason, useAgentBrowser, waitReady } from './agent_support.mjs';

const skip = skipReason();
before(async () => {
  if (!skip) await buildStandinsOnce();
});
const chrome = useAgentBrowser({ skip });

test('the voice\'s chunks: 300 ms first, 100 ms of the leading pause vocoded; ttslead, trim and ttschunks change it', { skip }, async () => {
  const cases = [
    ['', { firstChunkMs: 300, leadMs: 100 }],
    ['&ttslead=40&firstChunk=200', { firstChunkMs: 200, leadMs: 40 }],
    ['&ttslead=-1', { firstChunkMs: 300, leadMs: null }],
    ['&trim=0', { firstChunkMs: 300, leadMs: null }],
    ['&ttschunks=0', false],
  ];
  for (const [query, want] of cases) {
    const { page, context } = await openAgent(chrome.browser, chrome.url, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&warmup=0${query}`);
    try {
      await waitReady(page);
      assert.deepEqual(await page.evaluate(() => window.sottoAgent.voiceChunks()), want, query || '(defaults)');
    } finally {
      await context.close();
    }
  }
});
