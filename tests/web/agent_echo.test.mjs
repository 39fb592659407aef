// The agent's echo reference and gate (web/agent/echo.js) on synthetic signals: the reference returns what
// played at the right time, the simulated echo is the played signal delayed and scaled, and the gate takes the
// echo alone for the echo (whatever its gain and delay, up to its span) while a talker over it, 10 dB louder
// than the echo, is found. The page's own measurement with its real voice is bench/agent_echo.mjs.
// Run: node --test tests/web/agent_echo.test.mjs
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EchoGate, EchoReference, RATE_HZ, rms } from '../../web/agent/echo.js';

// Speech-like: noise in "syllables" of `period` s with 60 ms gaps between them, at 24 kHz. Deterministic (an LCG).
function voice(seconds, seed, level = 0.2, rate = 24000, period = 0.25) {
  let x = seed >>> 0;
  const out = new Float32Array(Math.round(seconds * rate));
  for (let i = 0; i < out.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    const phase = (i / rate) % period;
    const envelope = phase < period - 0.06 ? Math.sin((Math.PI * phase) / (period - 0.06)) : 0;
    out[i] = level * envelope * ((x / 2 ** 32) * 2 - 1);
  }
  return out;
}

const CHUNK = 512;
const CHUNK_MS = (CHUNK * 1000) / RATE_HZ;
const SPAN = Math.round(0.3 * RATE_HZ);

test('the reference gives back what played, when it played, and nothing after a stop', () => {
  const ref = new EchoReference();
  const tone = Float32Array.from({ length: 24000 }, () => 0.5);  // 1 s of a constant at 24 kHz
  ref.add(1000, tone, 24000);
  assert.equal(rms(ref.window(1000, 160)), 0, 'before it started');
  assert.ok(Math.abs(rms(ref.window(1510, 160)) - 0.5) < 1e-6, 'while it played');
  assert.equal(rms(ref.window(2100, 160)), 0, 'after it ended');
  const w = ref.window(1005, 160);  // 10 ms up to 5 ms after the start: half of it played
  assert.equal(w.filter((v) => v > 0).length, 80);
  ref.stopAt(1200);
  assert.equal(rms(ref.window(1300, 160)), 0, 'after the stop');
  assert.ok(rms(ref.window(1150, 160)) > 0.4, 'before the stop');
  const chunk = new Float32Array(160);
  ref.mixInto(chunk, 1110, 0.25, 60);  // the signal of 1040..1050 ms, a quarter of it
  assert.ok(chunk.every((v) => Math.abs(v - 0.125) < 1e-6));
});

// What the page acts on: two chunks in a row taken for the user (ECHO_CONFIRM_CHUNKS) interrupt the voice.
function firstRun(flags, n = 2) {
  let run = 0;
  for (let i = 0; i < flags.length; i++) {
    run = flags[i] ? run + 1 : 0;
    if (run >= n) return i;
  }
  return -1;
}

for (const [gain, delayMs] of [[0.05, 20], [0.3, 60], [1, 150], [2, 250]]) {
  test(`the gate takes the echo alone (gain ${gain}, ${delayMs} ms late) for the echo, and a talker 10 dB over it for the user within 200 ms`, () => {
    const played = voice(4, 7);
    const talker = voice(2, 99);  // another voice, the same level before scaling, from 3.5 s
    const ref = new EchoReference();
    ref.add(1000, played, 24000);
    const gate = new EchoGate();
    const echoOnly = [];
    const overTalker = [];
    for (let end = 1000 + CHUNK_MS; end < 5000; end += CHUNK_MS) {
      const mic = ref.mixInto(new Float32Array(CHUNK), end, gain, delayMs);
      const into = end - 3500;  // ms of the talker in this chunk's end
      if (into > 0) {
        // The talker 10 dB over the echo (gain x the same level), resampled by picking from 24 kHz.
        for (let i = 0; i < CHUNK; i++) {
          const t = Math.round(((into - CHUNK_MS + (i * 1000) / RATE_HZ) * 24000) / 1000);
          if (t >= 0 && t < talker.length) mic[i] += gain * Math.sqrt(10) * talker[t];
        }
      }
      const user = gate.update(rms(mic), ref.window(end, SPAN));
      (into > 0 ? overTalker : echoOnly).push(user);
    }
    assert.equal(firstRun(echoOnly), -1, `the echo alone was taken for the user at chunk ${firstRun(echoOnly)} (${echoOnly.filter(Boolean).length} of ${echoOnly.length} single chunks)`);
    const found = firstRun(overTalker);
    assert.ok(found >= 0 && (found + 1) * CHUNK_MS <= 200, `the talker found after ${found < 0 ? 'never' : `${((found + 1) * CHUNK_MS).toFixed(0)} ms`}`);
  });
}

test('with nothing playing, the gate passes any sound over the room\'s floor', () => {
  const gate = new EchoGate();
  const nothing = new Float32Array(SPAN);
  assert.equal(gate.update(0.05, nothing), true);
  assert.equal(gate.update(0.0001, nothing), false);
});

test('a microphone silent under the voice (a good canceller) lets the user in at once; none is let in before the voice has been heard', () => {
  const ref = new EchoReference();
  ref.add(1000, voice(3, 5), 24000);
  const gate = new EchoGate();
  const flags = [];
  for (let end = 1000 + CHUNK_MS; end < 3500; end += CHUNK_MS) flags.push(gate.update(end < 1200 ? 0.2 : end < 2500 ? 0 : 0.01, ref.window(end, SPAN)));
  assert.equal(flags.slice(0, 6).some(Boolean), false, 'speech in the first 200 ms of the first voice counted as the user');
  const from = Math.ceil((2500 - 1000) / CHUNK_MS);  // the user at a tenth of the voice's level, from 2.5 s
  assert.equal(firstRun(flags.slice(from)), 1, 'the user was not let in at once');
});

test('a talker over the voice from its first word, with no echo of it, is let in once the voice has been heard 512 ms', () => {
  for (const reference of ['speech', 'tone']) {
    const ref = new EchoReference();
    const played = reference === 'tone' ? Float32Array.from({ length: 72000 }, (_, i) => 0.2 * Math.sin((2 * Math.PI * 440 * i) / 24000)) : voice(3, 5);
    ref.add(1000, played, 24000);
    const talker = voice(3, 42, 0.1, RATE_HZ, 0.33);  // another speaker's rhythm
    const gate = new EchoGate();
    const flags = [];
    for (let k = 1; k * CHUNK_MS < 2500; k++) flags.push(gate.update(rms(talker.subarray((k - 1) * CHUNK, k * CHUNK)), ref.window(1000 + k * CHUNK_MS, SPAN)));
    const found = firstRun(flags);
    assert.ok(found >= 0 && (found + 1) * CHUNK_MS <= 750, `${reference}: the talker let in after ${found < 0 ? 'never' : `${((found + 1) * CHUNK_MS).toFixed(0)} ms`}`);
  }
});

test('a pause in the voice (a late chunk) does not restart its warm-up: a talker just after it is let in at once', () => {
  const ref = new EchoReference();
  ref.add(1000, voice(2, 5), 24000);  // 1.0 - 3.0 s
  ref.add(3500, voice(2, 6), 24000);  // after a 0.5 s gap, 3.5 - 5.5 s
  const gate = new EchoGate();
  const flags = [];
  // A good canceller: the microphone silent under the voice; the user from 3.6 s, at a tenth of its level.
  for (let end = 1000 + CHUNK_MS; end < 4500; end += CHUNK_MS) flags.push(gate.update(end < 3600 ? 0 : 0.02, ref.window(end, SPAN)));
  const from = Math.ceil((3600 - 1000) / CHUNK_MS) - 1;  // flags[i] is the chunk that ends at 1000 + (i + 1) CHUNK_MS
  assert.equal(flags.slice(0, from).some(Boolean), false, 'the silent microphone was taken for the user');
  assert.equal(firstRun(flags.slice(from)), 1, `the user was held after the pause: ${JSON.stringify(flags.slice(from, from + 20))}`);
});

test('after a long pause in the voice, a microphone that stayed silent under it still lets the user in at once', () => {
  // The voice 1.0 - 3.0 s, then after 1.5 s (more than the gate's history: its warm-up restarts) 4.5 - 6.5 s; the
  // microphone silent under it (headphones, a canceller, the test pages' fake device), the user from 4.7 s, inside
  // the resumed voice's first 512 ms, when no fit of an echo exists: nothing of the voice reached the microphone,
  // so the user is let in at once, not held until the warm-up ends.
  const ref = new EchoReference();
  ref.add(1000, voice(2, 5), 24000);
  ref.add(4500, voice(2, 6), 24000);
  const gate = new EchoGate();
  const flags = [];
  for (let end = 1000 + CHUNK_MS; end < 5500; end += CHUNK_MS) flags.push(gate.update(end < 4700 ? 0 : 0.02, ref.window(end, SPAN)));
  const from = Math.ceil((4700 - 1000) / CHUNK_MS) - 1;
  assert.equal(flags.slice(0, from).some(Boolean), false, 'the silent microphone was taken for the user');
  assert.equal(firstRun(flags.slice(from)), 1, `the user was held after the long pause: ${JSON.stringify(flags.slice(from, from + 20))}`);
});

test('a talker who starts as the voice resumes after a pause, over a microphone silent under it, is let in at once and kept', () => {
  // The stand-in voice's steady tone 1.0 - 2.5 s, then after 0.8 s (most of the gate's history) 3.3 - 5.3 s; the
  // microphone silent under it; a talker from around the resumption. Both rise at once, so a fit of the
  // microphone on what played follows the talker: the gate must not take the talker for the echo.
  const tone = (s) => Float32Array.from({ length: Math.round(s * 24000) }, (_, i) => 0.2 * Math.sin((2 * Math.PI * 440 * i) / 24000));
  for (const offset of [-48, -16, 0, 16, 48, 96]) {
    const ref = new EchoReference();
    ref.add(1000, tone(1.5), 24000);
    ref.add(3300, tone(2), 24000);
    const talker = voice(2, 42, 0.1, RATE_HZ, 0.33);
    const onset = 3300 + offset;
    const gate = new EchoGate();
    const flags = [];
    for (let end = 1000 + CHUNK_MS; end < onset + 640; end += CHUNK_MS) {
      const k = Math.floor((end - onset) / CHUNK_MS) - 1;  // the talker's chunk that ends here
      const mic = k < 0 ? 0 : 0.01 + rms(talker.subarray(k * CHUNK, (k + 1) * CHUNK));
      const user = gate.update(mic, ref.window(end, SPAN));
      if (k >= 0) flags.push(user);
    }
    assert.equal(firstRun(flags), 1, `talker ${offset} ms from the resumption: ${JSON.stringify(flags.map(Number))}`);
    assert.ok(flags.every(Boolean), `talker ${offset} ms from the resumption taken for the echo later: ${JSON.stringify(flags.map(Number))}`);
  }
});
