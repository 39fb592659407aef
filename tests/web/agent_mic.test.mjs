// The agent page's microphone path in headless Chromium: a WAV file as the fake microphone
// (--use-file-for-fake-audio-capture, played once in real time) through the capture AudioWorklet (16 kHz) and
// the Silero segmenter; the page shows the speech segments, and, while speech recognition is not in the tree,
// says so for each utterance. The segments are compared with `web/vad.js`'s own segmentation of the same clip
// (the page hears it through Chromium's audio path, so its boundaries may move by a few frames).
// Run: node --test tests/web/agent_mic.test.mjs
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { SMALL_MODEL, assertOnlyAllowed, buildOnce, fixtures, micArgs, openAgent, skipReason, useAgentBrowser, waitReady } from './agent_support.mjs';

const skip = skipReason();
const CLIP = `${fixtures}/audio/beckett.wav`;  // 9.96 s of speech
before(async () => {
  if (!skip) await buildOnce();
});
const chrome = useAgentBrowser({ args: micArgs(CLIP), skip });

test('the fake microphone drives the VAD: the page shows live level, speech state and the segments', { skip }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/agent/?model=${SMALL_MODEL}&cache=0&warmup=0&mic=1`);
  try {
    await waitReady(page);
    await page.waitForFunction(() => window.sottoAgent.events.some((e) => e.type === 'mic-on'), null, { timeout: 10000 });
    let sawSpeech = false;
    let maxLevel = 0;
    const t0 = Date.now();
    // The clip plays in real time; its last segment closes ~0.6 s after it ends.
    while (Date.now() - t0 < 14000) {
      const v = await page.evaluate(() => ({ speech: document.getElementById('vad-state').dataset.speech, level: Number(document.getElementById('mic-meter').getAttribute('aria-valuenow')) }));
      sawSpeech ||= v.speech === 'true';
      maxLevel = Math.max(maxLevel, v.level);
      if (Date.now() - t0 > 11500 && (await page.evaluate(() => window.sottoAgent.segments.length)) > 0) break;
      await page.waitForTimeout(100);
    }
    const agent = await page.evaluate(() => ({ segments: window.sottoAgent.segments, turns: window.sottoAgent.turns, events: window.sottoAgent.events, speech: window.sottoAgent.speech }));
    assert.ok(sawSpeech, `the VAD state never showed speech: ${JSON.stringify(agent)}`);
    assert.ok(maxLevel > 5, `the level meter stayed at ${maxLevel}`);
    assert.ok(agent.segments.length >= 1, 'no speech segment');
    const speechMs = agent.segments.reduce((a, s) => a + s.ms, 0);
    // Beckett's quote is speech nearly throughout: most of the clip must be in segments.
    assert.ok(speechMs > 6000 && speechMs < 11500, `segments hold ${speechMs} ms of the 9.96 s clip`);
    assert.equal(await page.locator('#segments li').count(), agent.segments.length);
    if (!agent.speech.asr) {
      assert.equal(agent.turns.length, agent.segments.length);
      assert.match(await page.locator('.msg.system').first().textContent(), /Speech recognition is not available/);
    }
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});
