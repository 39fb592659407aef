// Speculative recognition (web/agent/agent.js speculate()): the page transcribes a segment once the VAD has heard
// a short silence in it, before the endpoint; the result stands only when nothing but silence follows.
//  1. Node, the real Silero VAD (wasm): VadSegmenter.openSegmentAudio() at any frame of an open segment is the
//     start of the audio that segment's onSpeechEnd hands over (what makes the early transcript the segment's).
//  2. Headless Chromium, the page with stand-ins for recognition and synthesis (tests/web/agent_standins.mjs):
//     a question with a 0.45 s pause cut into its middle (longer than the speculation's 100 ms, shorter than the
//     560 ms endpoint) is one segment; the speculation made during the pause is dropped when speech resumes, and
//     the turn's transcript is of the whole utterance (the speculation made in the final pause, which holds
//     both halves and ends within the endpoint's silence of the segment's end).
// Run: node --test tests/web/agent_speculate.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Engine } from '../../web/engine.js';
import { Vad } from '../../web/vad.js';
import { SMALL_MODEL, assertOnlyAllowed, buildStandinsOnce, fixtures, micArgs, openAgent, pausedClip, skipReason, useAgentBrowser, wasmDir } from './agent_support.mjs';
import { readWav16 } from './vad_support.mjs';

const skip = skipReason();
const VAD_OPTIONS = { preSpeechPadMs: 320, minSpeechMs: 250, redemptionMs: 560 };  // the page's (agent.js)

test('openSegmentAudio: every open segment so far is the start of the segment onSpeechEnd hands over', { skip }, async () => {
  const engine = await Engine.create({ threads: 1, variant: 'simd128', wasmUrl: `${wasmDir}/wasm-simd128/sotto.wasm` });
  try {
    const vad = await Vad.load(`${fixtures}/vad/silero_vad_v5.1.onnx`, { engine });
    const { samples: clip, rate } = readWav16(`${fixtures}/audio/beckett.wav`);
    assert.equal(rate, 16000);
    const open = [];  // openSegmentAudio() at every frame, in the segment's order
    const ends = [];
    let nulls = 0;
    let seg = null;
    seg = await vad.segmenter({
      ...VAD_OPTIONS,
      onFrameProcessed: () => {
        const a = seg.openSegmentAudio();
        if (a) open.push({ segment: ends.length, audio: a });
        else nulls++;
      },
      onSpeechEnd: (audio) => ends.push(audio),
    });
    // Random chunk sizes, fresh each run, as a microphone's.
    for (let at = 0; at < clip.length;) {
      const size = 1 + Math.floor(Math.random() * 3000);
      await seg.process(clip.subarray(at, at + size));
      at += size;
    }
    await seg.flush();
    assert.ok(ends.length >= 3, `${ends.length} segments`);
    assert.ok(nulls > 0, 'no frame outside a segment');
    for (const { segment, audio } of open) {
      if (segment >= ends.length) continue;  // open at the clip's end, closed by flush: not an onSpeechEnd one
      const whole = ends[segment];
      assert.ok(audio.length > 0 && audio.length <= whole.length, `segment ${segment}: ${audio.length} of ${whole.length}`);
      assert.deepEqual(audio, whole.subarray(0, audio.length), `segment ${segment}: not its start`);
    }
    // Each segment was seen open up to its last frame (the one that ends it is processed before its end event).
    for (let i = 0; i < ends.length; i++) {
      const longest = Math.max(...open.filter((o) => o.segment === i).map((o) => o.audio.length));
      assert.equal(longest, ends[i].length, `segment ${i}`);
    }
    await seg.dispose();
    await vad.dispose();
  } finally {
    engine.terminate();
  }
});

// The clip the fake microphone plays, written now: the browser's flags name it.
const dir = skip ? null : mkdtempSync(join(tmpdir(), 'sotto-speculate-'));
const clip = dir ? pausedClip(dir, 450) : '';
before(async () => {
  if (!skip) await buildStandinsOnce();
});
const chrome = useAgentBrowser({ args: micArgs(clip), skip });
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a pause inside the question: the early transcript is dropped, the turn transcribes the whole utterance', { skip, timeout: 90_000 }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&warmup=0&tokens=8&mic=1`);
  try {
    await page.waitForFunction(() => {
      const a = window.sottoAgent;
      return a.errors.length || (a.segments.length >= 1 && a.turns.length === a.segments.length && a.status !== 'speaking');
    }, null, { timeout: 60000, polling: 200 });
    const { turns, events, segments, errors } = await page.evaluate(() => window.sottoAgent);
    assert.deepEqual(errors, []);
    assert.equal(segments.length, 1, `the pause ended the segment: ${JSON.stringify(segments)}`);
    const specs = events.filter((e) => e.type === 'speculation' || e.type === 'speculation-dropped');
    assert.deepEqual(specs.map((e) => e.type), ['speculation', 'speculation-dropped', 'speculation'], JSON.stringify(specs));
    const [first, , last] = specs;
    const turn = turns[0];
    assert.equal(turn.source, 'voice');
    assert.equal(turn.speculativeAsr, true);
    assert.equal(turn.asrSamples, last.samples);
    // The final speculation holds the first half, the pause and the second half: at least the pause more than the
    // first one; and the segment is it plus at most the endpoint's silence.
    assert.ok(last.samples >= first.samples + 0.45 * 16000, `${first.samples} then ${last.samples}`);
    const segmentSamples = (segments[0].ms / 1000) * 16000;
    assert.ok(segmentSamples > last.samples && segmentSamples - last.samples <= (VAD_OPTIONS.redemptionMs / 1000) * 16000,
      `segment ${segmentSamples} samples, transcribed ${last.samples}`);
    assert.ok(turn.stages.first_sound_ms > 0, JSON.stringify(turn.stages));
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});
