// Barge-in against its bound (issue #32: playback stops within 150 ms of the user's speech), in headless
// Chromium with the stand-in voice (tests/web/agent_standins.mjs): the agent is talking (a typed question's
// reply, voiced as a tone) when the microphone starts; the fake microphone's clip is 3.000 s of digital silence
// and then beckett.wav, whose onset (first 10 ms over -34 dBFS RMS) is found in the file. The delay runs from
// that onset (the device's opening on the page's clock plus the onset's place in the clip) to the voice's
// silence (the barge-in's start plus the stop's time on the audio clock, output latency included); the
// microphone's own capture latency (a few ms on the fake device) is outside what the page can see.
// Run: node --test tests/web/agent_bargein.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { SMALL_MODEL, assertOnlyAllowed, buildStandinsOnce, fixtures, micArgs, openAgent, skipReason, useAgentBrowser, waitReady, writeWav } from './agent_support.mjs';

const skip = skipReason();
const BOUND_MS = 150;
const SILENCE_MS = 3000;

// Writes a 16-bit mono 16 kHz WAV to `out`: `silenceMs` of zeros, then the samples of `speech` (a 16 kHz 16-bit
// mono WAV) and 1 s of zeros. -> {onsetMs}: where the speech's first 10 ms over 0.02 RMS (-34 dBFS) starts.
function clipWithSilence(speech, silenceMs, out) {
  const wav = readFileSync(speech);
  let o = 12;
  while (wav.toString('ascii', o, o + 4) !== 'data') o += 8 + wav.readUInt32LE(o + 4);
  const data = wav.subarray(o + 8, o + 8 + wav.readUInt32LE(o + 4));
  const pcm = Buffer.concat([Buffer.alloc((16 * silenceMs) * 2), data, Buffer.alloc(16000 * 2)]);
  for (let w = 0; w + 320 <= data.length; w += 320) {
    let sum = 0;
    for (let i = 0; i < 320; i += 2) sum += (data.readInt16LE(w + i) / 32768) ** 2;
    if (Math.sqrt(sum / 160) > 0.02) {
      writeWav(out, pcm);
      return { onsetMs: silenceMs + w / 32 };
    }
  }
  throw new Error(`${speech}: no speech onset found`);
}


// The clip the fake microphone plays, written now: the browser's flags name it. onsetMs: the speech's onset in
// the clip, the first 10 ms whose RMS passes 0.02 (beckett.wav: ~340 ms in).
const dir = skip ? null : mkdtempSync(join(tmpdir(), 'sotto-bargein-'));
const clip = dir ? join(dir, 'silence-then-speech.wav') : '';
const { onsetMs } = dir ? clipWithSilence(`${fixtures}/audio/beckett.wav`, SILENCE_MS, clip) : { onsetMs: 0 };
before(async () => {
  if (!skip) await buildStandinsOnce();
});
const chrome = useAgentBrowser({ args: micArgs(clip), skip });
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// The voice in chunks (the page's default: a sentence's later chunks are made while its first plays) and whole
// (?ttschunks=0). Either way the history keeps what played: the stand-in voice is 60 ms of tone per character,
// so what was heard is the voice's playing time in characters (to a word), not the share of the chunks made.
for (const [name, query] of [[' (whole pieces)', '&ttschunks=0'], [' (the voice in chunks)', '']])
test(`speech while the agent talks stops its voice within ${BOUND_MS} ms of the speech's onset${name}`, { skip }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&tokens=60${query}`);
  try {
    await waitReady(page);
    // Loaded with the warm-ups (the language model's greeting, a second of silence transcribed, "Hello." voiced).
    assert.match(await page.evaluate(() => window.sottoAgent.models.tts.detail), /warm-up \d+ ms/);
    await page.evaluate(() => {
      window.sottoAgent.ask('Tell me a story.');
    });
    await page.waitForFunction(() => window.sottoAgent.events.some((e) => e.type === 'first-sound'), null, { timeout: 20000 });
    await page.evaluate(() => window.sottoAgent.toggleMic());
    await page.waitForFunction(() => window.sottoAgent.turns.some((t) => t.bargeIn), null, { timeout: 15000, polling: 50 });
    const turn = await page.evaluate(() => window.sottoAgent.turns.find((t) => t.bargeIn));
    const events = await page.evaluate(() => window.sottoAgent.events);
    const b = turn.bargeIn;
    assert.equal(b.why, 'speech');
    assert.equal(b.wasPlaying, true, 'the voice was not playing when the speech began');
    // Not a false start in the digital silence (the stream position runs behind the clip's: see below).
    assert.ok(b.streamMs >= SILENCE_MS - 500, `the VAD fired at ${b.streamMs} ms of the stream, in the silence before the speech`);
    // The fake device plays the clip from its opening, so the onset is at openedAt + onsetMs on the page's clock;
    // the voice is silent audioStopMs (audio clock: the quantum that applied the stop, the output latency) after
    // the barge-in began. The stream's own clock starts when the worklet is connected, some ms after the device.
    const openedAt = events.find((e) => e.type === 'mic-on').openedAt;
    const delay = b.at - openedAt - onsetMs + b.audioStopMs;
    const streamGap = b.at - openedAt - b.lagMs - b.streamMs;
    console.log(`barge-in: the voice stopped ${delay.toFixed(0)} ms after the speech's onset: the VAD's callback ${b.lagMs.toFixed(1)} ms ` +
      `after the worklet sent the chunk, the stop ${b.audioStopMs.toFixed(1)} ms on the audio clock (the page heard back after ` +
      `${b.stopMs.toFixed(1)} ms); the stream started ~${streamGap.toFixed(0)} ms after the device` +
      `${b.confirmedAfterMs === undefined ? '' : `; held for the echo gate ${b.confirmedAfterMs.toFixed(0)} ms`}`);
    assert.ok(delay < BOUND_MS, `${delay.toFixed(0)} ms from the speech's onset to the stopped voice`);
    assert.ok(turn.heard.length < turn.reply.length, 'the history kept more than was heard');
    // Played: from the first sound to the stop, less the gaps where the voice waited for synthesis. The heard
    // text is cut to a whole word (up to ~12 characters less) and its sentences joined by spaces.
    const firstSound = events.find((e) => e.type === 'first-sound').t;
    const playedChars = (b.at + b.audioStopMs - firstSound - turn.voiceGapMs) / 60;
    console.log(`heard ${turn.heard.length} characters of ${turn.reply.length} after ~${playedChars.toFixed(0)} characters' worth of voice: ${JSON.stringify(turn.heard)}`);
    assert.ok(turn.heard.length <= playedChars + 5 && turn.heard.length >= playedChars - 25,
      `the history kept ${turn.heard.length} characters of the reply; ~${playedChars.toFixed(0)} were spoken`);
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});

// Speech that stops the voice but holds no words (the recognizer answers nothing: ?asrtext=): the echo gate took
// the voice's echo for the user, so the page makes it learn the room afresh (agent.js, 'echo-gate-reset').
test('speech that stops the voice and holds no words makes the echo gate learn the room afresh', { skip }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, chrome.url, `/build/agent-standins/?model=${SMALL_MODEL}&cache=0&tokens=60&asrtext=`);
  try {
    await waitReady(page);
    await page.evaluate(() => {
      window.sottoAgent.ask('Tell me a story.');  // not awaited: the turn ends when the voice does
    });
    await page.waitForFunction(() => window.sottoAgent.events.some((e) => e.type === 'first-sound'), null, { timeout: 20000 });
    await page.evaluate(() => window.sottoAgent.toggleMic());
    await page.waitForFunction(() => window.sottoAgent.events.some((e) => e.type === 'echo-gate-reset'), null, { timeout: 20000, polling: 50 });
    const types = await page.evaluate(() => window.sottoAgent.events.map((e) => e.type));
    assert.ok(types.indexOf('barge-in') >= 0 && types.indexOf('barge-in') < types.indexOf('echo-gate-reset'), types.join(' '));
    assert.match(await page.textContent('#conversation'), /nothing recognised/);
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, chrome.url);
  } finally {
    await context.close();
  }
});
