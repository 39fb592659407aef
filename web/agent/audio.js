// The page's sound: the microphone in (AudioWorklet, resampled to 16 kHz for the VAD and the ASR) and the
// agent's voice out (AudioWorklet playback that reports which samples really reached the speaker, so a barge-in
// knows what was heard). The worklets' code is a string turned into a Blob URL: the one-file build has no
// second file to load, and the page's CSP allows scripts from blob: only for this.

const CAPTURE_RATE_HZ = 16000;
const CHUNK_SAMPLES = 512;  // 32 ms at 16 kHz: one Silero frame, and the level meter's refresh

// Runs on the audio thread. Resampling: each output sample is the mean of the input span it covers (a box
// filter: 48 kHz -> 16 kHz averages 3 samples, which keeps most aliasing out of the VAD's band) with linear
// interpolation at the span's fractional edges; at equal rates it passes samples through.
const WORKLET_SOURCE = `
class SottoCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.outRate = options.processorOptions.outRate;
    this.chunk = options.processorOptions.chunk;
    this.step = sampleRate / this.outRate;   // input samples per output sample
    this.pos = 0;                             // where the next output sample's span starts, in input samples
    this.prev = 0;
    this.out = new Float32Array(this.chunk);
    this.n = 0;
    this.carry = new Float32Array(0);
  }
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (!input) return true;
    let x = input;
    if (this.carry.length) {
      x = new Float32Array(this.carry.length + input.length);
      x.set(this.carry);
      x.set(input, this.carry.length);
    }
    if (this.step === 1) {
      for (let i = 0; i < x.length; i++) this.emit(x[i]);
      this.carry = new Float32Array(0);
      return true;
    }
    let pos = this.pos;
    while (pos + this.step <= x.length) {
      const a = pos, b = pos + this.step;
      let sum = 0, i = Math.floor(a);
      const end = Math.ceil(b);
      for (; i < end; i++) {
        const lo = Math.max(a, i), hi = Math.min(b, i + 1);
        sum += x[i] * (hi - lo);
      }
      this.emit(sum / this.step);
      pos = b;
    }
    const keep = Math.floor(pos);
    this.carry = x.slice(keep);
    this.pos = pos - keep;
    return true;
  }
  emit(v) {
    this.out[this.n++] = v;
    if (this.n === this.chunk) {
      const samples = this.out;
      let sq = 0;
      for (let i = 0; i < samples.length; i++) sq += samples[i] * samples[i];
      this.port.postMessage({ samples, rms: Math.sqrt(sq / samples.length), time: currentTime }, [samples.buffer]);
      this.out = new Float32Array(this.chunk);
      this.n = 0;
    }
  }
}
registerProcessor('sotto-capture', SottoCapture);

// A queue of clips at the context's rate. Messages in: {type:'clip', id, samples} | {type:'stop'}. Out:
// {type:'start', id, time} when a clip's first sample is rendered, {type:'end', id, played} when it has all
// been rendered, {type:'stopped', id, played, time} for the clip cut short (played: its samples rendered; time:
// the audio clock when the stop took effect: nothing of it is rendered after that quantum).
class SottoPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0;
    this.port.onmessage = (e) => {
      const m = e.data;
      if (m.type === 'clip') this.queue.push(m);
      else if (m.type === 'stop') {
        const cur = this.queue[0];
        if (cur) this.port.postMessage({ type: 'stopped', id: cur.id, played: this.offset, time: currentTime });
        for (const c of this.queue.slice(1)) this.port.postMessage({ type: 'stopped', id: c.id, played: 0, time: currentTime });
        this.queue = [];
        this.offset = 0;
      }
    };
  }
  process(inputs, outputs) {
    const out = outputs[0][0];
    let i = 0;
    while (i < out.length && this.queue.length) {
      const c = this.queue[0];
      if (this.offset === 0) this.port.postMessage({ type: 'start', id: c.id, time: currentTime + i / sampleRate });
      const n = Math.min(out.length - i, c.samples.length - this.offset);
      out.set(c.samples.subarray(this.offset, this.offset + n), i);
      i += n;
      this.offset += n;
      if (this.offset >= c.samples.length) {
        this.port.postMessage({ type: 'end', id: c.id, played: c.samples.length });
        this.queue.shift();
        this.offset = 0;
      }
    }
    out.fill(0, i);
    for (let ch = 1; ch < outputs[0].length; ch++) outputs[0][ch].set(out);
    return true;
  }
}
registerProcessor('sotto-player', SottoPlayer);
`;

let workletUrl = null;
function workletModuleUrl() {
  workletUrl ??= URL.createObjectURL(new Blob([WORKLET_SOURCE], { type: 'text/javascript' }));
  return workletUrl;
}

// The microphone at 16 kHz, chunk by chunk: onChunk(Float32Array of 512 samples, rms, queuedMs). The context asks for
// 16 kHz (Chromium then resamples in the browser); where that is refused it runs at the device rate and the
// worklet resamples. Echo cancellation is on so the agent's own voice is mostly removed before the VAD.
export class Microphone {
  static async start({ onChunk, deviceId } = {}) {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true, ...(deviceId ? { deviceId } : {}) },
    });
    // The device runs from here; what it captures before the worklet is connected never reaches the page.
    const openedAt = performance.now();
    let context;
    try {
      context = new AudioContext({ sampleRate: CAPTURE_RATE_HZ, latencyHint: 'interactive' });
    } catch {
      context = new AudioContext({ latencyHint: 'interactive' });
    }
    try {
      await context.audioWorklet.addModule(workletModuleUrl());
      const source = context.createMediaStreamSource(stream);
      const node = new AudioWorkletNode(context, 'sotto-capture', {
        numberOfInputs: 1, numberOfOutputs: 0, processorOptions: { outRate: CAPTURE_RATE_HZ, chunk: CHUNK_SAMPLES },
      });
      // queuedMs: how long the chunk waited for this thread after the worklet sent it (a busy page delays the VAD).
      node.port.onmessage = (e) => onChunk?.(e.data.samples, e.data.rms, Math.max(0, (context.currentTime - e.data.time) * 1000));
      source.connect(node);
      if (context.state !== 'running') await context.resume();
      return new Microphone(stream, context, node, openedAt);
    } catch (e) {
      stream.getTracks().forEach((t) => t.stop());
      await context.close();
      throw e;
    }
  }

  constructor(stream, context, node, openedAt) {
    this.stream = stream;
    this.openedAt = openedAt;  // performance.now() when the device was open
    this.context = context;
    this.node = node;
    this.label = stream.getAudioTracks()[0]?.label ?? 'microphone';
    this.contextRateHz = context.sampleRate;
  }

  async stop() {
    this.node.port.onmessage = null;
    this.stream.getTracks().forEach((t) => t.stop());
    await this.context.close();
  }
}

// Linear interpolation to the context's rate (TTS voices are 24 kHz, contexts usually 48 kHz: an exact 2x).
export function resampleLinear(samples, fromHz, toHz) {
  if (fromHz === toHz) return samples.slice();  // a copy: the clip is transferred to the worklet
  const n = Math.floor((samples.length * toHz) / fromHz);
  const out = new Float32Array(n);
  const step = fromHz / toHz;
  for (let i = 0; i < n; i++) {
    const x = i * step;
    const j = Math.floor(x);
    const f = x - j;
    out[i] = samples[j] * (1 - f) + (samples[Math.min(j + 1, samples.length - 1)] ?? 0) * f;
  }
  return out;
}

// A synthesised clip without the silence the voice puts around it: Kokoro starts every clip with 0.25-0.4 s of
// digital silence and ends it with 0.35-0.5 s, which the first piece would otherwise play before its first word
// (voice-to-voice latency) and every joint twice (a clause cut at a comma mid-sentence sounds broken). Keeps
// leadMs before the first sample over `threshold` (|x|; the voice peaks at 0.3-0.5) and, with tailMs, that
// much after the last one (null: the tail as it is, a sentence's natural pause). -> {samples (a view), leadMs
// (the silence left in front, for the first audible sample's time)}
export function trimSilence(samples, rateHz, { threshold = 0.01, leadMs = 20, tailMs = null } = {}) {
  let first = 0;
  while (first < samples.length && !(Math.abs(samples[first]) > threshold)) first++;
  if (first === samples.length) return { samples, leadMs: 0 };  // no sound at all: played as it is
  let last = samples.length - 1;
  while (last > first && !(Math.abs(samples[last]) > threshold)) last--;
  const from = Math.max(0, first - Math.round((leadMs / 1000) * rateHz));
  const to = tailMs === null ? samples.length : Math.min(samples.length, last + 1 + Math.round((tailMs / 1000) * rateHz));
  return { samples: samples.subarray(from, to), leadMs: ((first - from) / rateHz) * 1000 };
}

// The agent's voice. play() queues one clip (a sentence): -> {id, done}, done resolving when it has been rendered
// in full or cut short: {id, played (seconds), total (seconds), complete}. onStart(id, atMs) tells when a clip's first sample
// went out (performance.now() time). stop() cuts everything now (a barge-in) and resolves once the worklet has
// confirmed: what it reports as played is what the user heard.
export class Player {
  static async create({ onStart } = {}) {
    const context = new AudioContext({ latencyHint: 'interactive' });
    await context.audioWorklet.addModule(workletModuleUrl());
    const node = new AudioWorkletNode(context, 'sotto-player', { numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1] });
    node.connect(context.destination);
    return new Player(context, node, onStart);
  }

  #nextId = 1;
  #pending = new Map();  // id -> {resolve, total}
  #stopWaiters = [];
  #stoppedAt = 0;

  constructor(context, node, onStart) {
    this.context = context;
    this.node = node;
    this.onStart = onStart;
    node.port.onmessage = (e) => this.#message(e.data);
  }

  get playing() {
    return this.#pending.size > 0;
  }

  #message(m) {
    const p = this.#pending.get(m.id);
    if (m.type === 'start') {
      // The worklet's clock to the page's: the message arrives a render quantum or so after the sample left.
      this.onStart?.(m.id, performance.now() - Math.max(0, (this.context.currentTime - m.time) * 1000) + this.context.outputLatency * 1000);
      return;
    }
    if (!p) return;
    if (m.type === 'stopped') this.#stoppedAt = m.time;
    this.#pending.delete(m.id);
    const rate = this.context.sampleRate;
    p.resolve({ id: m.id, played: m.played / rate, total: p.total / rate, complete: m.type === 'end' });
    if (!this.#pending.size) this.#stopWaiters.splice(0).forEach((f) => f());
  }

  play(samples, sampleRateHz) {
    if (this.context.state !== 'running') this.context.resume();
    const clip = resampleLinear(samples, sampleRateHz, this.context.sampleRate);
    const id = this.#nextId++;
    const done = new Promise((resolve) => {
      this.#pending.set(id, { resolve, total: clip.length });
      this.node.port.postMessage({ type: 'clip', id, samples: clip }, [clip.buffer]);
    });
    return { id, done };
  }

  // -> {audioMs}: from this call until the speaker goes quiet, on the audio clock: to the render quantum that
  // applied the stop, that quantum itself, and the output latency (the promise resolves when the page's thread
  // hears back, which a busy page can delay further, but the sound has stopped by then).
  stop() {
    if (!this.#pending.size) return Promise.resolve({ audioMs: 0 });
    const requested = this.context.currentTime;
    const tail = 128 / this.context.sampleRate + (this.context.outputLatency || 0);
    const done = new Promise((resolve) => this.#stopWaiters.push(() => resolve({ audioMs: (Math.max(0, this.#stoppedAt - requested) + tail) * 1000 })));
    this.node.port.postMessage({ type: 'stop' });
    return done;
  }

  async close() {
    await this.context.close();
  }
}
