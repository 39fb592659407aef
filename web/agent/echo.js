// The agent's own voice as the microphone hears it. EchoReference keeps what the player sent to the speaker
// (16 kHz, on the page's clock), which serves two ends:
//  - a simulated echo for measurement (issue #32: "measure it with the agent's audio fed back into the
//    microphone"): mixInto() adds the played signal, delayed and scaled, to a microphone chunk, as a speaker
//    heard by the microphone with no echo cancellation would (the browser's canceller never sees this path, so
//    it is the worst case);
//  - the barge-in's check against the played signal (EchoGate): while the voice plays, speech counts as the
//    user's only when the microphone is clearly louder than the echo of what is playing explains.

export const RATE_HZ = 16000;

export class EchoReference {
  #clips = [];  // [{at (ms, page clock, its first sample at the speaker), samples (16 kHz), end (ms)}]

  // A clip that started sounding at `atMs` (performance.now()), `samples` at `rateHz`.
  add(atMs, samples, rateHz) {
    const n = Math.floor((samples.length * RATE_HZ) / rateHz);
    const out = new Float32Array(n);
    const step = rateHz / RATE_HZ;
    // A box filter over each output sample's span (24 kHz -> 16 kHz: 1.5 input samples): enough for levels.
    for (let i = 0; i < n; i++) {
      const a = Math.floor(i * step), b = Math.max(a + 1, Math.floor((i + 1) * step));
      let sum = 0;
      for (let j = a; j < b && j < samples.length; j++) sum += samples[j];
      out[i] = sum / (b - a);
    }
    this.#clips.push({ at: atMs, samples: out, end: atMs + (n * 1000) / RATE_HZ });
    this.#forget(atMs - 10000);
  }

  // The voice stopped at `atMs` (a barge-in): nothing after it was played.
  stopAt(atMs) {
    for (const c of this.#clips) c.end = Math.min(c.end, atMs);
  }

  // The played signal for the `n` samples that end at `endMs` on the page's clock (zeros where nothing played).
  window(endMs, n) {
    const out = new Float32Array(n);
    const startMs = endMs - (n * 1000) / RATE_HZ;
    for (const c of this.#clips) {
      if (c.end <= startMs || c.at >= endMs) continue;
      for (let i = 0; i < n; i++) {
        const t = startMs + (i * 1000) / RATE_HZ;
        if (t < c.at || t >= c.end) continue;
        const j = Math.floor(((t - c.at) * RATE_HZ) / 1000);
        if (j < c.samples.length) out[i] += c.samples[j];
      }
    }
    return out;
  }

  // Adds `gain` x the signal played `delayMs` before each sample of `chunk` (which ends at `endMs`), in place.
  mixInto(chunk, endMs, gain, delayMs) {
    const ref = this.window(endMs - delayMs, chunk.length);
    for (let i = 0; i < chunk.length; i++) chunk[i] += gain * ref[i];
    return chunk;
  }

  #forget(beforeMs) {
    this.#clips = this.#clips.filter((c) => c.end > beforeMs);
  }
}

export function rms(x) {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * x[i];
  return Math.sqrt(s / Math.max(1, x.length));
}

// Whether the microphone holds more than the agent's own voice (the browser's echo canceller does the real
// work; this keeps its residue, or a speaker with no canceller, from interrupting the agent or being taken for
// a question). It compares level envelopes, one value per 32 ms chunk: what the microphone heard, and what
// played. Over the last `history` chunks it finds the delay (0 .. maxLagChunks) at which the microphone's
// envelope follows the played one best (Pearson correlation) and the line that maps one onto the other. The
// microphone is the agent's echo where that correlation is high (>= minCorrelation) and the chunk is no
// louder than `margin` x what the line predicts; anything else over the room's floor is the user: a talker
// over the voice is not explained by it (the correlation falls) and is louder than its echo (the line). In a
// voice's first minChunks (too short to find the delay) the last good fit judges (the room stays the same);
// with none yet, the gate says not the user, unless the microphone has stayed at the floor under the voice for
// minSilentChunks (headphones or a canceller: nothing of the voice reaches it), when what passes the floor is
// the user: else a voice resuming after a pause longer than the history would hold a talker for up to 512 ms.
// And at any time: a microphone that stayed at the floor under the voice at some level (through every delay)
// cannot hold an echo louder than that level explains, so a microphone well over it is the user.
export class EchoGate {
  constructor({ margin = 3, history = 32, maxLagChunks = 10, minChunks = 16, minCorrelation = 0.7, floor = 1e-3, minSilentChunks = 8 } = {}) {
    Object.assign(this, { margin, history, maxLagChunks, minChunks, minCorrelation, floor, minSilentChunks });
    this.mic = [];      // microphone rms per chunk
    this.played = [];   // played rms per chunk, the same moments
    this.playing = 0;   // chunks since the voice began (a pause of `history` chunks ends it)
    this.quiet = 0;     // chunks in a row with nothing played
    this.fit = null;    // {lag, correlation, a, b} of the last update
    this.known = null;  // the last fit that explained the microphone
    this.silentUnder = 0;  // chunks in which the voice played and the microphone stayed at the floor
    // The loudest the voice played while the microphone stayed at the floor although every delay the echo may
    // have (0 .. maxLagChunks) brought it at least that level (0: never).
    this.silentLevel = 0;
  }

  // One microphone chunk's rms against `played`, the reference's samples up to the chunk's end (its last
  // 512 are this chunk's moment). -> true when the chunk holds more than the echo.
  update(micRms, played) {
    const r = rms(played.subarray(Math.max(0, played.length - 512)));
    let loud = 0;
    for (let o = 0; o + 512 <= played.length; o += 256) loud = Math.max(loud, rms(played.subarray(o, o + 512)));
    this.mic.push(micRms);
    this.played.push(r);
    if (this.mic.length > this.history) {
      this.mic.shift();
      this.played.shift();
    }
    if (micRms <= this.floor && this.played.length > this.maxLagChunks) {
      let low = Infinity;
      for (let lag = 0; lag <= this.maxLagChunks; lag++) low = Math.min(low, this.played[this.played.length - 1 - lag]);
      this.silentLevel = Math.max(this.silentLevel, low);
    }
    if (loud < 1e-4) {
      // A pause in the voice (between sentences, or synthesis behind playback: chunks arriving late) keeps what
      // was learnt of it: the count restarts only once the history holds none of the voice. Restarting at every
      // pause held a talker for the first minChunks (512 ms) after each one.
      if (++this.quiet >= this.history) this.playing = 0;
      return micRms > this.floor;  // nothing played lately: the room and the user only
    }
    this.quiet = 0;
    this.playing++;
    if (micRms <= this.floor) {
      this.silentUnder++;
      return false;
    }
    const n = this.mic.length;
    // An echo is the played level scaled (the line below): where the microphone stayed at the floor while the
    // voice played at silentLevel through every delay the echo may have, its echo at `now` is at most
    // floor x now / silentLevel, and a microphone well over that is the user. This needs no fit: one made while
    // the user's speech starts together with the voice resuming after a pause follows the user (both rise at
    // once) and takes the user for the echo for a second or more (tests/web/agent_echo.test.mjs).
    let now = 0;
    for (let lag = 0; lag <= Math.min(this.maxLagChunks, n - 1); lag++) now = Math.max(now, this.played[n - 1 - lag]);
    if (this.silentLevel > 0 && micRms > this.floor * Math.max(1, (this.margin * now) / this.silentLevel)) return true;
    const louder = (f) => micRms > this.margin * Math.max(f.a + f.b * this.played[Math.max(0, n - 1 - f.lag)], 0);
    if (this.playing < this.minChunks) return this.known ? louder(this.known) : this.silentUnder >= this.minSilentChunks;
    let best = null;
    for (let lag = 0; lag <= Math.min(this.maxLagChunks, n - 6); lag++) {
      const c = correlate(this.mic, this.played, lag);
      if (c && (!best || c.correlation > best.correlation)) best = { lag, ...c };
    }
    this.fit = best;
    // A constant or silent reference (no variation to follow) explains nothing.
    if (!best || best.correlation < this.minCorrelation) return true;
    this.known = best;
    return louder(best);
  }
}

// Pearson correlation of m[t] with p[t - lag] over the overlap, and the least-squares line m = a + b p.
function correlate(m, p, lag) {
  const n = m.length - lag;
  let sm = 0, sp = 0;
  for (let t = lag; t < m.length; t++) {
    sm += m[t];
    sp += p[t - lag];
  }
  const mm = sm / n, mp = sp / n;
  let cov = 0, vm = 0, vp = 0;
  for (let t = lag; t < m.length; t++) {
    const dm = m[t] - mm, dp = p[t - lag] - mp;
    cov += dm * dp;
    vm += dm * dm;
    vp += dp * dp;
  }
  if (vp < 1e-12 || vm < 1e-12) return null;
  const b = cov / vp;
  return { correlation: cov / Math.sqrt(vm * vp), a: mm - b * mp, b };
}
