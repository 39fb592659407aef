// The lab's VAD page: a Silero model (a fixture or a picked .onnx), a WAV (a fixture or a picked file, any rate:
// decoded and resampled in wasm) or the microphone, and a canvas with the waveform, the speech probability of
// every 32 ms frame and the segments the segmenter finds (redrawn without re-running the network when the
// thresholds change). The microphone runs the streaming segmenter (web/vad.js VadSegmenter) and lists its events.
import { Microphone } from '../agent/audio.js';
import { VAD_WEB_DEFAULTS, Vad } from '../vad.js';

const $ = (id) => document.getElementById(id);
const OPTION_INPUTS = { positiveSpeechThreshold: 'positive', negativeSpeechThreshold: 'negative', redemptionMs: 'redemption',
  preSpeechPadMs: 'prepad', minSpeechMs: 'minspeech' };
const MIC_WINDOW_S = 20;

let vad = null;
let samples = new Float32Array(0);  // 16 kHz mono
let probs = new Float32Array(0);
let segments = [];
let mic = null;  // {microphone, segmenter, chunks, pending, probs}

function options() {
  const o = {};
  for (const [name, id] of Object.entries(OPTION_INPUTS)) if ($(id).value !== '') o[name] = Number($(id).value);
  return o;
}

function setOptions(o) {
  // Thresholds come back from wasm as float32 (0.35 -> 0.3499999940395355): show them rounded.
  for (const [name, id] of Object.entries(OPTION_INPUTS)) $(id).value = Math.round(o[name] * 1e6) / 1e6;
}

function logEvent(text) {
  const line = `${new Date().toLocaleTimeString()}  ${text}\n`;
  $('events').textContent = line + $('events').textContent.slice(0, 4000);
}

async function loadModel() {
  const source = $('model-file').files[0] ?? $('model').value;
  $('model-info').textContent = 'loading…';
  $('model-info').className = 'stats';
  try {
    await stopMic();
    await vad?.dispose();
    vad = null;
    vad = await Vad.load(source, { inline: $('inline').checked });
    if ($('positive').value === '') setOptions(vad.info.defaults);
    const i = vad.info;
    $('model-info').textContent = `${i.name.split('/').pop()}: ${i.frameSamples} samples (${i.frameMs} ms) per frame at ${i.sampleRate} Hz, ` +
      `wasm ${i.variant}, ${i.inline ? "page's thread" : 'engine worker'}, loaded in ${i.loadMs.toFixed(0)} ms`;
    if (samples.length) await analyse();
  } catch (e) {
    $('model-info').textContent = String(e.message);
    $('model-info').className = 'bad';
  }
}

async function analyse() {
  const r = await vad.segments(samples, options());
  probs = r.probs;
  segments = r.segments;
  const audioS = samples.length / vad.sampleRate;
  $('summary').textContent = `${audioS.toFixed(2)} s, ${probs.length} frames in ${r.ms.toFixed(1)} ms ` +
    `(${(r.ms / Math.max(1, probs.length)).toFixed(3)} ms per frame, real-time factor ${(r.ms / 1000 / Math.max(audioS, 1e-9)).toFixed(5)}), ` +
    `${segments.length} segments, ${r.misfires} misfires`;
  showSegments();
  draw();
}

// Only the segmenter again, on the probabilities already computed.
async function resegment() {
  if (!vad || mic) return;
  segments = await vad.segmentsOf(probs, options());
  showSegments();
  draw();
}

function play(audio) {
  const context = new AudioContext({ sampleRate: vad.sampleRate });
  const buffer = context.createBuffer(1, audio.length, vad.sampleRate);
  buffer.copyToChannel(audio, 0);
  const node = context.createBufferSource();
  node.buffer = buffer;
  node.connect(context.destination);
  node.onended = () => context.close();
  node.start();
}

function showSegments() {
  const body = $('segments').tBodies[0];
  body.replaceChildren();
  segments.forEach((s, i) => {
    const tr = body.insertRow();
    for (const v of [i + 1, s.start.toFixed(3), s.end.toFixed(3), (s.end - s.start).toFixed(3)]) tr.insertCell().textContent = v;
    const button = document.createElement('button');
    button.textContent = 'play';
    const audio = s.audio ?? samples.subarray(s.startFrame * vad.frameSamples, s.endFrame * vad.frameSamples);
    button.onclick = () => play(audio);
    tr.insertCell().append(button);
  });
}

// The plot's colours, named once for the drawing and its legend.
const COLORS = { waveform: '#999', probability: '#1450c8', positive: '#c60', negative: '#69c',
  segment: 'rgba(40, 160, 60, 0.18)', axis: '#444', grid: '#eee' };
const MARGIN = { left: 44, right: 10, top: 24, bottom: 26 };  // canvas pixels around the plot area

// A tick step of 1, 2 or 5 times a power of ten giving at most `maxTicks` ticks over `span`.
function tickStep(span, maxTicks) {
  const raw = span / Math.max(1, maxTicks);
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
}

// Axes (time in seconds along the bottom, speech probability 0..1 on the left, with grid lines) and a legend
// above the plot area.
function drawFrame(g, width, height, t0, t1) {
  const { left, right, top, bottom } = MARGIN;
  const pw = width - left - right, ph = height - top - bottom;
  g.font = '12px system-ui, sans-serif';
  g.lineWidth = 1;
  g.fillStyle = COLORS.axis;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (const p of [0, 0.25, 0.5, 0.75, 1]) {
    const y = top + ph * (1 - p);
    g.strokeStyle = COLORS.grid;
    g.beginPath();
    g.moveTo(left, y + 0.5);
    g.lineTo(left + pw, y + 0.5);
    g.stroke();
    g.fillText(p.toFixed(2), left - 4, y);
  }
  g.save();
  g.translate(11, top + ph / 2);
  g.rotate(-Math.PI / 2);
  g.textAlign = 'center';
  g.fillText('P(speech)', 0, 0);
  g.restore();
  const step = tickStep(Math.max(t1 - t0, 1e-3), 12);
  g.textAlign = 'center';
  g.textBaseline = 'top';
  for (let t = Math.ceil(t0 / step) * step; t <= t1 + 1e-9; t += step) {
    const x = left + ((t - t0) / Math.max(t1 - t0, 1e-9)) * pw;
    g.strokeStyle = COLORS.axis;
    g.beginPath();
    g.moveTo(x + 0.5, top + ph);
    g.lineTo(x + 0.5, top + ph + 4);
    g.stroke();
    g.fillText(`${Number(t.toFixed(3))}`, x, top + ph + 6);
  }
  g.textAlign = 'right';
  g.fillText('time (s)', left + pw, top + ph + 6 + 0);
  g.strokeStyle = COLORS.axis;
  g.strokeRect(left + 0.5, top + 0.5, pw, ph);
  // Legend: one row above the plot.
  const items = [['waveform', COLORS.waveform, 'line'], ['speech probability', COLORS.probability, 'thick'],
    ['positive threshold', COLORS.positive, 'dash'], ['negative threshold', COLORS.negative, 'dash'],
    ['segment', COLORS.segment, 'box']];
  let x = left;
  g.textAlign = 'left';
  g.textBaseline = 'middle';
  for (const [label, color, kind] of items) {
    const y = top / 2;
    if (kind === 'box') {
      g.fillStyle = color;
      g.fillRect(x, y - 6, 18, 12);
    } else {
      g.strokeStyle = color;
      g.lineWidth = kind === 'thick' ? 2 : 1;
      g.setLineDash(kind === 'dash' ? [4, 4] : []);
      g.beginPath();
      g.moveTo(x, y);
      g.lineTo(x + 18, y);
      g.stroke();
      g.setLineDash([]);
      g.lineWidth = 1;
    }
    g.fillStyle = COLORS.axis;
    g.fillText(label, x + 23, y);
    x += 23 + g.measureText(label).width + 16;
  }
  return { left, top, pw, ph };
}

// Waveform (min / max per pixel column), the probability trace (0 at the bottom, 1 at the top), the two
// thresholds, and the segments as shaded spans, inside drawFrame()'s axes. `firstFrame`: the frame at the left
// edge (the microphone's rolling window).
function draw(firstFrame = 0) {
  const canvas = $('plot');
  const g = canvas.getContext('2d');
  const { width, height } = canvas;
  g.clearRect(0, 0, width, height);
  if (!vad) return;
  const n = vad.frameSamples;
  const frames = Math.max(probs.length - firstFrame, 1);
  const frameS = n / vad.sampleRate;
  const { left, top, pw, ph } = drawFrame(g, width, height, firstFrame * frameS, (firstFrame + frames) * frameS);
  const first = firstFrame * n;
  const count = Math.max(samples.length - first, 1);
  const x = (frame) => left + ((frame - firstFrame) / frames) * pw;
  const yOf = (p) => top + ph * (1 - p);
  g.fillStyle = COLORS.segment;
  for (const s of segments) if (s.endFrame > firstFrame) g.fillRect(Math.max(x(s.startFrame), left), top, x(s.endFrame) - Math.max(x(s.startFrame), left), ph);
  g.strokeStyle = COLORS.waveform;
  g.beginPath();
  const mid = top + ph / 2;
  for (let px = 0; px < pw; px++) {
    const a = first + Math.floor((px / pw) * count);
    const b = first + Math.max(Math.floor(((px + 1) / pw) * count), a - first + 1);
    let lo = 0;
    let hi = 0;
    for (let i = a; i < b && i < samples.length; i++) {
      const v = samples[i];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    g.moveTo(left + px + 0.5, mid - (hi * ph) / 2);
    g.lineTo(left + px + 0.5, mid - (lo * ph) / 2 + 1);
  }
  g.stroke();
  const o = options();
  g.setLineDash([4, 4]);
  for (const [t, color] of [[o.positiveSpeechThreshold, COLORS.positive], [o.negativeSpeechThreshold, COLORS.negative]]) {
    g.strokeStyle = color;
    g.beginPath();
    g.moveTo(left, yOf(t));
    g.lineTo(left + pw, yOf(t));
    g.stroke();
  }
  g.setLineDash([]);
  g.strokeStyle = COLORS.probability;
  g.lineWidth = 2;
  g.beginPath();
  for (let f = firstFrame; f < probs.length; f++) {
    const y = yOf(probs[f]);
    if (f === firstFrame) g.moveTo(x(f), y);
    else g.lineTo(x(f), y);
    g.lineTo(x(f + 1), y);
  }
  g.stroke();
  g.lineWidth = 1;
}

async function useSource(source) {
  if (!vad) return;
  await stopMic();
  $('summary').textContent = 'decoding…';
  try {
    samples = await vad.decodeWav(source);
    await analyse();
  } catch (e) {
    $('summary').textContent = String(e.message);
  }
}

// The microphone at 16 kHz through the agent's AudioWorklet capture (web/agent/audio.js: 512-sample chunks,
// resampled on the audio thread where the context cannot run at 16 kHz), gathered into 4096-sample pieces for
// the streaming segmenter so the plot is redrawn about four times a second, not every 32 ms.
const MIC_PIECE_SAMPLES = 4096;

function takeMicPiece(state, piece) {
  state.chunks.push(piece);
  state.segmenter.process(piece).then((events) => {
    if (mic !== state) return;
    for (const ev of events) if (ev.type === 'end') segments.push(ev);
    const all = new Float32Array(state.chunks.reduce((a, c) => a + c.length, 0));
    let at = 0;
    for (const c of state.chunks) all.set(c, (at += c.length) - c.length);
    samples = all;
    probs = Float32Array.from(state.probs);
    const windowFrames = Math.round((MIC_WINDOW_S * vad.sampleRate) / vad.frameSamples);
    draw(Math.max(0, probs.length - windowFrames));
    $('summary').textContent = `microphone: ${(samples.length / vad.sampleRate).toFixed(1)} s, ${probs.length} frames, ` +
      `last probability ${(probs.at(-1) ?? 0).toFixed(3)}, ${segments.length} segments (the last ${MIC_WINDOW_S} s shown)`;
    showSegments();
  });
}

async function startMic() {
  const state = { microphone: null, chunks: [], pending: [], pendingSamples: 0, probs: [] };
  state.segmenter = await vad.segmenter({
    ...options(),
    onFrameProcessed: (p) => state.probs.push(p.isSpeech),
    onSpeechStart: () => logEvent('speech start'),
    onVADMisfire: () => logEvent('misfire (too short)'),
    onSpeechEnd: (audio) => logEvent(`speech end: ${(audio.length / vad.sampleRate).toFixed(2)} s`),
  });
  samples = new Float32Array(0);
  probs = new Float32Array(0);
  segments = [];
  mic = state;
  try {
    state.microphone = await Microphone.start({
      onChunk: (chunk) => {
        if (mic !== state) return;
        state.pending.push(chunk);
        state.pendingSamples += chunk.length;
        if (state.pendingSamples < MIC_PIECE_SAMPLES) return;
        const piece = new Float32Array(state.pendingSamples);
        let at = 0;
        for (const c of state.pending) piece.set(c, (at += c.length) - c.length);
        state.pending = [];
        state.pendingSamples = 0;
        takeMicPiece(state, piece);
      },
    });
  } catch (e) {
    mic = null;
    await state.segmenter.dispose();
    throw e;
  }
  $('mic').textContent = 'stop the microphone';
  logEvent(`microphone on (${state.microphone.label}, context at ${state.microphone.contextRateHz} Hz)`);
}

async function stopMic() {
  if (!mic) return;
  const m = mic;
  mic = null;
  await m.microphone?.stop();
  await m.segmenter.flush();
  await m.segmenter.dispose();
  $('mic').textContent = 'start the microphone';
  logEvent('microphone off');
  draw();
}

$('model').onchange = () => {
  $('model-file').value = '';
  loadModel();
};
$('model-file').onchange = loadModel;
$('inline').onchange = loadModel;
$('clip').onchange = () => $('clip').value && useSource(`/fixtures/audio/${$('clip').value}`);
$('wav-file').onchange = () => $('wav-file').files[0] && useSource($('wav-file').files[0]);
$('mic').onclick = () => (mic ? stopMic() : startMic().catch((e) => logEvent(`microphone: ${e.message}`)));
$('preset-silero').onclick = () => {
  setOptions(vad.info.defaults);
  resegment();
};
$('preset-vadweb').onclick = () => {
  setOptions(VAD_WEB_DEFAULTS);
  resegment();
};
for (const id of Object.values(OPTION_INPUTS)) $(id).onchange = resegment;

await loadModel();
$('clip').value = 'beckett.wav';
await useSource('/fixtures/audio/beckett.wav');
