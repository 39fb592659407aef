// The lab's VAD page: a Silero model (a fixture or a picked .onnx), a WAV (a fixture or a picked file, any rate:
// decoded and resampled in wasm) or the microphone, and a canvas with the waveform, the speech probability of
// every 32 ms frame and the segments the segmenter finds (redrawn without re-running the network when the
// thresholds change). The microphone runs the streaming segmenter (web/vad.js VadSegmenter) and lists its events.
import { VAD_WEB_DEFAULTS, Vad } from '../vad.js';

const $ = (id) => document.getElementById(id);
const OPTION_INPUTS = { positiveSpeechThreshold: 'positive', negativeSpeechThreshold: 'negative', redemptionMs: 'redemption',
  preSpeechPadMs: 'prepad', minSpeechMs: 'minspeech' };
const MIC_WINDOW_S = 20;

let vad = null;
let samples = new Float32Array(0);  // 16 kHz mono
let probs = new Float32Array(0);
let segments = [];
let mic = null;  // {stream, context, node, segmenter, chunks, probs, open}

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

// Waveform (min / max per pixel column), the probability trace (0 at the bottom, 1 at the top), the two
// thresholds, and the segments as shaded spans. `firstFrame`: the frame at the left edge (the microphone's
// rolling window).
function draw(firstFrame = 0) {
  const canvas = $('plot');
  const g = canvas.getContext('2d');
  const { width, height } = canvas;
  g.clearRect(0, 0, width, height);
  if (!vad) return;
  const n = vad.frameSamples;
  const frames = Math.max(probs.length - firstFrame, 1);
  const first = firstFrame * n;
  const count = Math.max(samples.length - first, 1);
  const x = (frame) => ((frame - firstFrame) / frames) * width;
  g.fillStyle = 'rgba(40, 160, 60, 0.18)';
  for (const s of segments) if (s.endFrame > firstFrame) g.fillRect(x(s.startFrame), 0, x(s.endFrame) - x(s.startFrame), height);
  g.strokeStyle = '#999';
  g.beginPath();
  for (let px = 0; px < width; px++) {
    const a = first + Math.floor((px / width) * count);
    const b = first + Math.max(Math.floor(((px + 1) / width) * count), a - first + 1);
    let lo = 0;
    let hi = 0;
    for (let i = a; i < b && i < samples.length; i++) {
      const v = samples[i];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    g.moveTo(px + 0.5, height / 2 - (hi * height) / 2);
    g.lineTo(px + 0.5, height / 2 - (lo * height) / 2 + 1);
  }
  g.stroke();
  const o = options();
  g.setLineDash([4, 4]);
  for (const [t, color] of [[o.positiveSpeechThreshold, '#c60'], [o.negativeSpeechThreshold, '#69c']]) {
    g.strokeStyle = color;
    g.beginPath();
    g.moveTo(0, height * (1 - t));
    g.lineTo(width, height * (1 - t));
    g.stroke();
  }
  g.setLineDash([]);
  g.strokeStyle = '#1450c8';
  g.lineWidth = 2;
  g.beginPath();
  for (let f = firstFrame; f < probs.length; f++) {
    const y = height * (1 - probs[f]);
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

// The microphone at 16 kHz (the AudioContext resamples), chunks of 4096 samples into the streaming segmenter.
async function startMic() {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false } });
  const context = new AudioContext({ sampleRate: vad.sampleRate });
  const sourceNode = context.createMediaStreamSource(stream);
  const node = context.createScriptProcessor(4096, 1, 1);
  const state = { stream, context, node, chunks: [], probs: [], open: null };
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
  node.onaudioprocess = (e) => {
    const chunk = new Float32Array(e.inputBuffer.getChannelData(0));
    state.chunks.push(chunk);
    state.segmenter.process(chunk).then((events) => {
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
  };
  sourceNode.connect(node);
  node.connect(context.destination);
  mic = state;
  $('mic').textContent = 'stop the microphone';
  logEvent('microphone on');
}

async function stopMic() {
  if (!mic) return;
  const m = mic;
  mic = null;
  m.node.disconnect();
  m.stream.getTracks().forEach((t) => t.stop());
  await m.context.close();
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
