// The lab's speech recognition page: Moonshine base (web/asr.js, wasm on this page's thread) on a fixture, a
// picked WAV or 5 s from the microphone, with the transcript and where the time went.
import { Asr } from '../asr.js';

const $ = (id) => document.getElementById(id);
let asr = null;

function status(el, text, bad = false) {
  el.textContent = text;
  el.className = bad ? 'stats bad' : 'stats';
}

async function load() {
  asr?.dispose();
  asr = null;
  const t0 = performance.now();
  status($('model-info'), 'loading…');
  try {
    asr = await Asr.load($('model').value, { onProgress: ({ loaded, file }) => status($('model-info'), `${file}: ${(loaded / 1e6).toFixed(1)} MB read`) });
    status($('model-info'), `loaded in ${(performance.now() - t0).toFixed(0)} ms`);
  } catch (e) {
    status($('model-info'), String(e.message ?? e), true);
    status($('stats'), String(e.message ?? e), true);
  }
}

function show(r, wallMs) {
  $('text').textContent = r.text || '(no speech)';
  status($('stats'), `${r.audio_s.toFixed(2)} s of audio, ${r.segments.length} window(s), ${r.tokens.length} tokens: ` +
    `encode ${r.encode_ms.toFixed(0)} ms, decode ${r.decode_ms.toFixed(0)} ms ` +
    `(${(r.decode_ms / Math.max(1, r.tokens.length + r.segments.length)).toFixed(1)} ms a step), ` +
    `${(r.audio_s / (wallMs / 1000)).toFixed(1)}x real time`);
}

async function run(getSamples) {
  if (!asr) await load();
  if (!asr) return;
  try {
    const samples = await getSamples();
    const t0 = performance.now();
    const r = await asr.transcribe(samples);
    show(r, performance.now() - t0);
  } catch (e) {
    $('text').textContent = '';
    status($('stats'), String(e.message ?? e), true);
  }
}

// 5 s of the microphone at 16 kHz (the AudioContext resamples), as one Float32Array.
async function record(seconds = 5) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1 } });
  const context = new AudioContext({ sampleRate: 16000 });
  const source = context.createMediaStreamSource(stream);
  const node = context.createScriptProcessor(4096, 1, 1);
  const chunks = [];
  node.onaudioprocess = (e) => chunks.push(new Float32Array(e.inputBuffer.getChannelData(0)));
  source.connect(node);
  node.connect(context.destination);
  status($('stats'), `recording ${seconds} s…`);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  node.disconnect();
  source.disconnect();
  stream.getTracks().forEach((t) => t.stop());
  await context.close();
  const out = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

$('load').onclick = load;
$('run-clip').onclick = () => run(() => asr.decodeWav($('clip').value));
$('file').onchange = () => $('file').files[0] && run(() => asr.decodeWav($('file').files[0]));
$('mic').onclick = () => run(() => record(5));
window.sottoAsrLab = { load, run: (url) => run(() => asr.decodeWav(url)) };  // for tests
