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

// Whether the microphone holds more than the agent's own voice, from levels alone (the browser's echo
// canceller does the real work; this keeps its residue, or a speaker with no canceller, from interrupting the
// agent or being taken for a question). The echo of a chunk is at most coupling x the loudest 32 ms of what
// played over the last `spanMs` (whatever the room's delay, up to spanMs). Coupling (microphone level over
// that) is the median of the chunks heard while the voice played, counted once the voice has played spanMs
// (its echo has arrived by then), over the last `history` such chunks and across turns (the room stays): the
// echo alone sets it as long as the user talks over the voice less than half that time (a barge-in ends the
// voice sooner). A chunk is the user's when it is `margin` x louder than coupling predicts, or when nothing
// plays and it is over the room's floor. Until the gate has heard the voice once, speech in the voice's first
// spanMs is not the user's (nothing says yet what the echo is).
export class EchoGate {
  constructor({ margin = 3, spanMs = 300, history = 32, floor = 1e-3 } = {}) {
    this.margin = margin;
    this.spanSamples = Math.round((spanMs * RATE_HZ) / 1000);
    this.history = history;
    this.floor = floor;
    this.ratios = [];  // microphone rms / loudest played rms, the last chunks heard while playing
    this.coupling = null;
    this.playedSamples = 0;  // how long the voice has been playing without a pause of spanMs
  }

  // One microphone chunk's rms (`n` samples) against `played`, the reference's spanSamples up to the chunk's
  // end. -> true when the chunk holds more than the echo.
  update(micRms, played, n = 512) {
    let loudest = 0;
    for (let o = 0; o + 512 <= played.length; o += 256) loudest = Math.max(loudest, rms(played.subarray(o, o + 512)));
    if (loudest < 1e-4) {
      this.playedSamples = 0;
      return micRms > this.floor;
    }
    this.playedSamples += n;
    const ratio = micRms / loudest;
    if (this.playedSamples >= this.spanSamples) {
      this.ratios.push(ratio);
      if (this.ratios.length > this.history) this.ratios.shift();
      const sorted = [...this.ratios].sort((a, b) => a - b);
      this.coupling = sorted[sorted.length >> 1];
    }
    if (this.coupling === null) return false;
    return micRms > this.floor && ratio > this.margin * this.coupling;
  }
}
