// The agent page's whole voice path in headless Chromium, with stand-ins for speech recognition and synthesis
// (tests/web/agent_standins.mjs: a fixed transcript and a tone; web/asr.js and web/tts.js do not exist yet):
// the fake microphone plays beckett.wav (six utterances with short pauses); each utterance's end becomes a turn
// (transcript -> first token -> first sentence -> first sound, in that order), the next utterance's start
// barges in on the voice still talking — playback stops within 150 ms of the VAD's speech start and the
// history keeps only what was heard — and the last turn, uninterrupted, is heard whole.
// Run: node --test tests/web/agent_voice.test.mjs
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { SMALL_MODEL, assertOnlyAllowed, buildStandinsOnce, fixtures, micArgs, openAgent, skipReason, useAgentBrowser, waitReady } from './agent_support.mjs';
import { STANDIN_QUESTION } from './agent_standins.mjs';

const skip = skipReason();
const BARGE_IN_BOUND_MS = 150;
before(async () => {
  if (!skip) await buildStandinsOnce();
});
const chrome = useAgentBrowser({ args: micArgs(`${fixtures}/audio/beckett.wav`), skip });

test('voice turns in order, barge-in within the bound keeps only what was heard, the last turn heard whole', { skip }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&warmup=0&tokens=40&mic=1`);
  try {
    await waitReady(page);
    // Six utterances over ~10 s; the last turn ends when its tone has played.
    await page.waitForFunction(() => {
      const a = window.sottoAgent;
      return a.segments.length >= 6 && a.turns.length === a.segments.length && a.status !== 'speaking';
    }, null, { timeout: 40000, polling: 200 });
    const { turns, events, speech } = await page.evaluate(() => window.sottoAgent);
    if (process.env.SOTTO_AGENT_DEBUG) console.log(JSON.stringify(turns, null, 1));
    assert.deepEqual(speech, { asr: true, tts: true });
    for (const t of turns) {
      assert.equal(t.source, 'voice');
      // An utterance whose reply nobody heard opens the next question: the transcript once or joined several times.
      assert.match(t.user, new RegExp(`^${STANDIN_QUESTION.replace('?', '\\?')}( ${STANDIN_QUESTION.replace('?', '\\?')})*$`));
      const st = t.stages;
      assert.ok(st.endpoint_ms > 0 && st.transcript_ms >= 0, JSON.stringify(t));
      // A turn interrupted before its first token has no later stages.
      if (!t.cancelled || st.first_token_ms !== undefined) assert.ok(st.first_token_ms >= st.transcript_ms, JSON.stringify(t));
      if (!t.cancelled) assert.ok(st.first_sentence_ms >= st.first_token_ms && st.first_sound_ms >= st.first_sentence_ms, JSON.stringify(st));
    }
    const interrupted = turns.filter((t) => t.bargeIn?.wasPlaying);
    assert.ok(interrupted.length >= 1, `no turn was interrupted while speaking: ${JSON.stringify(turns.map((t) => t.bargeIn))}`);
    for (const t of interrupted) {
      assert.equal(t.bargeIn.why, 'speech');
      assert.ok(t.bargeIn.stopMs < BARGE_IN_BOUND_MS, `playback stopped ${t.bargeIn.stopMs} ms after the VAD's speech start`);
      assert.ok(t.heard.length < t.reply.length, `kept ${JSON.stringify(t.heard)} of ${JSON.stringify(t.reply)}`);
    }
    const last = turns.at(-1);
    assert.equal(last.cancelled, false);
    assert.ok(last.stages.first_sound_ms > 0);
    assert.ok(last.heard.length > 0 && last.reply.replace(/\s+/g, ' ').trim().startsWith(last.heard.replace(/\s+/g, ' ').trim().slice(0, 10)));
    assert.ok(events.filter((e) => e.type === 'barge-in').length >= interrupted.length);
    assert.ok(await page.locator('.msg .unspoken').count() >= 1, 'the unspoken part of an interrupted reply is not marked');
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});
