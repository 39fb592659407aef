// The voice agent page: microphone -> VAD (Silero, web/vad.js) -> speech recognition (web/asr.js when present)
// -> the language model (web/llm.js, the KV cache kept across turns) -> sentences -> speech synthesis
// (web/tts.js when present) -> the speaker; typing replaces the first two. All of it runs in this page, on
// our engine; the only requests are for the page's own files and the model files.
//
// URL parameters (tests and the latency bench use them): model=URL, profile=auto|gpu|cpu, cache=0 (do not keep
// models in Cache Storage), tokens=N (longest reply), endpoint=MS (the pause that ends a spoken turn), mic=1
// (start the microphone once loaded), warmup=0, first=N (the reply's first spoken piece ends after at most N words,
// sooner at a comma; 0: whole sentences), llmThreads=N (the language model's threads; default: one per core),
// sha256=HEX (the language model's expected sum, where it is not a known file), chunk=BYTES (download chunk size),
// asrThreads=N (speech recognition's threads; default: one per core, at most 4), yield=0 (the language model
// keeps writing while the first spoken piece is synthesised), echo=GAIN and echoDelay=MS (measurement: the
// agent's own voice added to the microphone, scaled and delayed, as a speaker with no echo canceller;
// agent.setEcho() changes it), echoGate=0 (speech over the voice interrupts it whatever its level against the
// echo), speculate=MS (transcribe the segment after this much silence, before the endpoint confirms it; 0: only
// at the endpoint), trim=0 (play the voice's clips with the silence Kokoro puts around them), ttschunks=0 (each
// piece of the voice synthesised whole before it plays; stream=0 says the same), firstChunk=MS (the first chunk's
// audio), ttslead=MS (the part of each piece's leading pause that is vocoded; -1: all of it), record=1
// (measurement: keep the voice's audio as played, agent.transcribeVoice() hears it back).
import { inlineAsset } from './assets.js';
import { Llm } from '../llm.js';
import { Vad } from '../vad.js';
import { Microphone, Player, resampleLinear, trimSilence } from './audio.js';
import { CHUNK_BYTES, StorageShortError, fetchModel, forgetAllModels, mb, modelUrl, savedBytes } from './models.js';
import { EchoGate, EchoReference, RATE_HZ as ECHO_RATE_HZ, rms as rmsOf } from './echo.js';
import { ensureIsolation } from './isolation.js';
import { VadTrace, modelRow as panelRow, rate } from './panels.js';
import { detectGpu, deviceFor } from './profile.js';
import { SentenceQueue, SentenceSplitter, heardPart, speakable } from './sentences.js';
import { loadSpeechModules } from './speech.js';
import { fmtMs, renderTimeline as drawTimeline, stagesOf } from './timeline.js';

const SYSTEM_PROMPT =
  "You are a friendly voice assistant that runs entirely on the user's own device. Everything you write is " +
  'read aloud, so answer in one to three short, plain sentences, as you would say them in conversation: no ' +
  'lists, no markdown, no code, no emoji. If you do not know, say so briefly.';

const html = document.documentElement.dataset;
const MODELS_BASE = new URL(html.modelsBase ?? 'models/', location.href).href;
const LLM_FILE = 'qwen2.5-coder-0.5b-instruct-q4_k_m.gguf';
// sha256 of the files scripts/get-models.sh fetches (checked after a download, once).
const KNOWN_SHA256 = {
  'qwen2.5-coder-0.5b-instruct-q4_k_m.gguf': '1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32',
  'gemma-3-270m-q4_k_m.gguf': 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818',
};
const ASR_DIR = 'moonshine-base-en/';
const TTS_FILE = 'kokoro/kokoro-v1.0.int8.onnx';
const TTS_VOICES = 'kokoro/voices/';
// Endpointing: a spoken turn ends after ENDPOINT_MS of non-speech (the segmenter's redemptionMs; a setting).
// It is added to every voice turn's latency, so it is shorter than vad-web's 1400 ms; a shorter pause answers
// sooner but may cut off a speaker who hesitates. The pre-speech pad keeps the first syllable.
const VAD_OPTIONS = { preSpeechPadMs: 320, minSpeechMs: 250 };
const ENDPOINT_MS = 560;
// Speculative recognition: once the VAD has heard SPECULATE_MS of silence in a segment (well inside the
// endpoint's pause), the segment so far is transcribed; if the endpoint then comes with nothing but silence after
// that point, the transcript is already there (recognition, 0.3-0.4 s of a 2-core machine, leaves the critical
// path). Any frame that is not silence after it discards it, and the endpoint's whole segment is transcribed.
// 100 ms rather than 190: recognition then prefill end ~90 ms sooner, which is on the critical path (1.07x and
// 1.12x per clip over the eight questions and three of them, interleaved; 2026-12-05-agent-speculate-100.md),
// at the cost of a recognition at more of the speaker's short pauses (dropped when speech resumes).
const SPECULATE_MS = 100;
// The reply's first spoken piece: its synthesis is the largest share of the time to the first sound (Kokoro in
// wasm makes about half a second of audio per second on one core of a 2-core machine), so it is a short clause,
// at most FIRST_WORDS words, cut at a comma when one comes sooner (sentences.js); later pieces are sentences,
// synthesised while the one before plays. Kokoro's time grows with the audio it makes (3 words ~1.6 s of it
// with its silences, 4 ~1.9 s, 5 ~2.1 s): in one interleaved measurement 3 and 4 words both took 0.8x the time
// of 5 (bench/results/agent-speculate-2026-12-04.md), and 3 cuts phrases more often ("The sky is | blue").
const FIRST_WORDS = 4;
// Each piece of the voice is vocoded and played in chunks (tts.stream's { chunks }; ?ttschunks=0 turns it off):
// the first FIRST_CHUNK_MS of audio (after the piece's leading pause) as soon as the text side, the decoder and
// that window of the generator have run, then chunks of twice the length while it plays. The generator is
// ~85 % of a piece in wasm, so the first sound comes 2-3x sooner than after the whole piece
// (bench/results/kokoro-first-piece-2026-12-04.md), for 5-60 % more compute per piece. The chunks are
// normalised window by window, so they are close to the whole piece's audio but not the same
// (models/tts/kokoro.h: ~2.6 dB log-spectral; Moonshine hears the same words: tests/web/agent_tts.test.mjs).
const STREAM_VOICE = true;
// Speculative prefill (?prefill=0 turns it off): once the speculative transcript exists, the chat turn it makes
// is prefilled into the language model's KV cache and held before its first token (llm.js chat's speculative);
// at the endpoint a confirmed transcript goes straight to writing (the prefill, ~0.35-0.5 s on the CPU, is off
// the critical path), and a dropped one is rolled back to before the turn (sotto_llm_rollback) so the real turn
// extends the conversation exactly as it would have without it.
const SPECULATIVE_PREFILL = true;
const FIRST_CHUNK_MS = 300;
// Each piece's leading pause (Kokoro's pad, ~0.3 s of near-silence that the trimming cuts to 20 ms before
// playback anyway) is vocoded only for its last LEAD_MS (tts.js streamPhonemes' leadMs; ?ttslead=-1: all of it,
// as before): the first chunk's generator window, most of the time to the first sound, shrinks from the pause +
// the first chunk + its margin to LEAD_MS + the first chunk + its margin. The frames kept are the generator's
// context before the speech (its convolutions reach ~150 ms); with less, the cut shows in the first syllable.
const LEAD_MS = 100;
// The language model yields to the voice: once the first piece is written, its token loop pauses until that
// piece is synthesised (both compete for the same cores, and the voice is what the user waits for; the rest of
// the reply is written while the first piece plays).
const YIELD_TO_VOICE = true;
// And after every later piece too (?yield=all): the two models then take turns on the cores instead of sharing
// them (two pools of two threads on two cores), which is measured against the default in bench/agent_ab.mjs.
const YIELD_ALL = false;
// Barge-in against the agent's own voice: while it plays, speech interrupts only once ECHO_CONFIRM_CHUNKS
// microphone chunks in a row hold more than its echo (echo.js EchoGate: the microphone's level does not follow
// what played, or is 3x (10 dB) over the echo that explains it); 2 chunks are 64 ms, inside the barge-in's
// 150 ms bound. A segment that starts while the voice plays and is never confirmed is taken for the echo and
// dropped, not transcribed.
const ECHO_CONFIRM_CHUNKS = 2;
const ECHO_SPAN_SAMPLES = Math.round(0.3 * ECHO_RATE_HZ);

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const now = () => performance.now();

// ---------------------------------------------------------------- settings

function loadSettings() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem('sotto-agent') ?? '{}');
  } catch {}
  const s = { profile: 'auto', model: MODELS_BASE + LLM_FILE, tokens: 160, endpointMs: ENDPOINT_MS, cache: true, voice: '', ...saved };
  if (params.has('model')) s.model = params.get('model');
  if (params.has('profile')) s.profile = params.get('profile');
  if (params.has('tokens')) s.tokens = Number(params.get('tokens'));
  if (params.has('endpoint')) s.endpointMs = Number(params.get('endpoint'));
  if (params.has('cache')) s.cache = params.get('cache') !== '0';
  s.firstWords = params.has('first') ? Number(params.get('first')) : FIRST_WORDS;
  s.llmThreads = params.has('llmThreads') ? Number(params.get('llmThreads')) : undefined;
  s.asrThreads = params.has('asrThreads') ? Number(params.get('asrThreads')) : Math.min(4, navigator.hardwareConcurrency || 1);
  // ?yield=0: never; ?yield=all: after every piece, not only the first (yieldAll).
  s.yieldToVoice = params.has('yield') ? params.get('yield') !== '0' : YIELD_TO_VOICE;
  s.yieldAll = params.has('yield') ? params.get('yield') === 'all' : YIELD_ALL;
  s.speculateMs = params.has('speculate') ? Number(params.get('speculate')) : SPECULATE_MS;
  s.prefill = params.has('prefill') ? params.get('prefill') !== '0' : SPECULATIVE_PREFILL;
  // ?seed=N: every reply samples from this seed (tests compare replies); otherwise a fresh one each.
  s.seed = params.has('seed') ? Number(params.get('seed')) : undefined;
  s.trim = params.get('trim') !== '0';
  s.streamVoice = params.has('ttschunks') ? params.get('ttschunks') !== '0' : params.has('stream') ? params.get('stream') !== '0' : STREAM_VOICE;
  s.record = params.get('record') === '1';
  s.firstChunkMs = params.has('firstChunk') ? Number(params.get('firstChunk')) : FIRST_CHUNK_MS;
  // Only with the trimming, which would cut the rest of the pause anyway (negative: all of it).
  s.leadMs = params.has('ttslead') ? Number(params.get('ttslead')) : LEAD_MS;
  if (!(s.leadMs >= 0) || !s.trim) s.leadMs = null;
  s.echoGain = Number(params.get('echo') ?? 0);
  s.echoDelayMs = Number(params.get('echoDelay') ?? 60);
  s.echoGate = params.get('echoGate') !== '0';
  return s;
}

const settings = loadSettings();

function showSettings() {
  $('set-profile').value = settings.profile;
  $('set-model').value = settings.model;
  $('set-tokens').value = settings.tokens;
  $('set-endpoint').value = settings.endpointMs;
  $('set-cache').checked = settings.cache;
}

// ---------------------------------------------------------------- state the tests and the bench read

const agent = {
  status: 'loading',
  profile: null,       // {device, reason}
  models: {},          // name -> {state, detail}
  segments: [],        // [{start, end (s since the microphone started), ms}]
  turns: [],           // per turn: {source, user, reply, heard, stages, ...}
  events: [],          // [{t, type}] for the bench
  speech: { asr: false, tts: false },
  speechWorkers: { asr: false, tts: false },  // recognition / synthesis off this thread, in workers of their own
  errors: [],
  echo: { dropped: 0, held: 0 },  // segments taken for the agent's own voice; speech starts not let interrupt at once
};
window.sottoAgent = agent;

const s = {
  llm: null, vad: null, segmenter: null, asr: null, tts: null, player: null, mic: null, micStartedAt: 0,
  history: [],        // the conversation as the model should remember it (what was heard, after a barge-in)
  carry: '',          // the user's words whose reply nobody heard (joined to the next question)
  turn: null,         // the turn in progress
  busy: Promise.resolve(),
  trace: null,        // VadTrace
  speaking: false,     // VAD state
  samplesIn: 0,
  longestStall: 0,    // the longest this thread went without running a 50 ms timer, since the turn began
  echoRef: new EchoReference(),  // what the voice played, for the echo gate (and the simulated echo)
  gate: new EchoGate(),
  voiceBargeInAt: -Infinity,  // when speech last stopped the voice (an utterance without words then resets the gate)
  userChunks: 0,      // microphone chunks in a row louder than the echo explains
  echoSuspect: null,  // a speech segment that began while the voice played, not yet confirmed as the user's
  clipAudio: new Map(),  // player clip id -> {audio, rate}, until it starts playing
  silentFrames: 0,    // VAD frames in a row under the silence threshold
  realSpeech: false,  // the open segment has minSpeechMs of speech (it will not be a misfire)
  spec: null,         // speculative recognition of the open segment: {samples, started, result, prefill}
  queued: 0,          // turns queued or running on s.busy (a speculative prefill starts only when none is)
  prefilled: null,    // the speculative prefill held in the model, not yet taken or dropped
};

// How responsive this thread stays (the VAD, the level meter and playback's queue run here): a 50 ms heartbeat
// whose late ticks are stalls. Each turn records its longest.
const HEARTBEAT_MS = 50;
let lastBeat = now();
setInterval(() => {
  const t = now();
  s.longestStall = Math.max(s.longestStall, t - lastBeat - HEARTBEAT_MS);
  lastBeat = t;
}, HEARTBEAT_MS);

function setStatus(state, text) {
  agent.status = state;
  const el = $('status');
  el.dataset.state = state;
  el.textContent = text;
}

function notice(text, { error = false, action = null } = {}) {
  const el = $('notice');
  el.hidden = !text;
  el.className = error ? 'notice error' : 'notice';
  el.textContent = text ?? '';
  if (action) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'secondary';
    b.textContent = action.label;
    b.onclick = action.run;
    el.append(b);
  }
}

function fail(where, e) {
  const message = `${where}: ${e?.message ?? e}`;
  agent.errors.push(message);
  console.warn(`sotto agent: ${message}`);
  return message;
}

// ---------------------------------------------------------------- models panel

const modelRow = (key, label) => panelRow($('models'), key, label, agent.models);
const renderTimeline = () => drawTimeline($('timeline'), agent.turns, { tts: !!s.tts });

// A model file as something the engine can read: from Cache Storage (downloading what is missing), or the URL
// itself when caching is off or the user chose to skip it after a storage warning.
async function modelSource(url, row, { cache = settings.cache } = {}) {
  if (!cache || !globalThis.caches) return { source: url, note: 'not kept' };
  const name = url.split('/').pop().split('?')[0];
  // Ask once that the cached models survive storage pressure (the browser may say no; the cache still works).
  await navigator.storage?.persist?.().catch(() => false);
  try {
    const r = await fetchModel(url, {
      sha256: (url === settings.model && params.get('sha256')) || KNOWN_SHA256[name],
      chunkBytes: Number(params.get('chunk')) || CHUNK_BYTES,
      onProgress: ({ phase, loaded, total, bytesPerS }) => {
        if (phase === 'download') row.progress(loaded, total, `${mb(loaded)} / ${mb(total)}${rate(bytesPerS)}`);
        else if (phase === 'verify') row.progress(loaded, total, 'checking sha256…');
      },
    });
    const how = r.resumed ? 'resumed, ' : '';
    return { source: r.blob, note: `${how}kept in this browser${r.verified ? ', sha256 ok' : ''}` };
  } catch (e) {
    if (!(e instanceof StorageShortError)) throw e;
    row.state('storage short', 'warn');
    notice(e.message, { error: true, action: { label: 'Load without saving', run: () => reload({ cache: false }) } });
    throw e;
  }
}

// Progress of the engine reading a source (the URL itself when not cached: then this is the download).
function engineProgress(row, what) {
  let t0 = now();
  let last = 0;
  return ({ loaded, total }) => {
    const dt = (now() - t0) / 1000;
    const speed = dt > 0.2 ? (loaded - last) / dt : 0;
    if (dt > 1) {
      t0 = now();
      last = loaded;
    }
    row.progress(loaded, total, `${what} ${mb(loaded)}${total ? ` / ${mb(total)}` : ''}${rate(speed)}`);
  };
}

// ---------------------------------------------------------------- loading

async function loadVad() {
  const row = modelRow('vad', 'Voice activity (Silero VAD v5.1)');
  const t0 = now();
  const inlined = inlineAsset('silero_vad_v5.1.onnx');
  let source = inlined;
  if (!source) source = (await modelSource(new URL(html.vadUrl, location.href).href, row)).source;
  // Inline: its own small wasm instance on this thread, so speech is detected even while the language model's
  // worker is busy generating (barge-in must not wait for a token).
  s.vad = await Vad.load(source, { inline: true });
  row.done('ready', `${mb(s.vad.info.bytes ?? 0)}${inlined ? ', inside the page' : ''} · ${Math.round(now() - t0)} ms`);
}

async function loadLlm(device) {
  const row = modelRow('llm', 'Language model');
  const t0 = now();
  const where = modelUrl(settings.model, location.href);
  if (where.error) throw new Error(where.error);
  settings.model = where.url;
  const { source, note } = await modelSource(settings.model, row);
  const load = (dev) => Llm.load(source, { device: dev, threads: settings.llmThreads, onProgress: engineProgress(row, typeof source === 'string' ? 'downloading' : 'reading') });
  try {
    s.llm = await load(device);
  } catch (e) {
    if (device === 'cpu') throw e;
    notice(`The GPU could not run the language model (${e.message}); it runs on the CPU instead.`);
    s.llm = await load('cpu');
  }
  const info = s.llm.info;
  agent.profile = { device: info.device ?? 'cpu', reason: info.fallback ?? null };
  row.done(`ready · ${info.device === 'webgpu' ? 'GPU' : `CPU, ${info.threads} threads`}`,
    `${info.name?.split('/').pop() ?? ''} · ${mb(info.bytes ?? 0)} · ${note} · ${((now() - t0) / 1000).toFixed(1)} s`);
}

// Recognition and synthesis load side by side, each into a dedicated worker of its own (web/asr.js, web/tts.js).
async function loadSpeech(device, modules) {
  await Promise.all([loadAsr(device, modules), loadTts(device, modules)]);
}

async function loadAsr(device, modules) {
  const asrRow = modelRow('asr', 'Speech recognition (Moonshine)');
  if (!modules.Asr) {
    asrRow.done('not available yet', 'web/asr.js is not in this build: type your questions (the microphone still shows speech).', 'warn');
  } else {
    try {
      // Recognition runs between the user's last word and the language model's first, when nothing else
      // computes: it takes every core (its own pool in its worker).
      s.asr = await modules.Asr.load(MODELS_BASE + ASR_DIR, { device, engine: s.llm.engine, threads: settings.asrThreads, onProgress: engineProgress(asrRow, 'reading') });
      agent.speech.asr = true;
      agent.asrThreads = s.asr.threads ?? 1;
      agent.speechWorkers.asr = !!s.asr.worker;
      // Warm-up on a second of silence: the first utterance should not pay for first-call costs.
      const t0 = now();
      if (params.get('warmup') !== '0') await s.asr.transcribe(new Float32Array(16000));
      asrRow.done(`ready · ${agent.asrThreads} thread${agent.asrThreads > 1 ? 's' : ''}`, `${MODELS_BASE + ASR_DIR}${params.get('warmup') !== '0' ? ` · warm-up ${Math.round(now() - t0)} ms` : ''}`);
    } catch (e) {
      asrRow.done('failed', fail('speech recognition', e), 'bad');
    }
  }
}

async function loadTts(device, modules) {
  const ttsRow = modelRow('tts', 'Speech synthesis (Kokoro)');
  if (!modules.Tts) {
    ttsRow.done('not available yet', 'web/tts.js is not in this build: replies are text only.', 'warn');
    return;
  }
  try {
    s.tts = await modules.Tts.load(MODELS_BASE + TTS_FILE, { device, voices: MODELS_BASE + TTS_VOICES, onProgress: engineProgress(ttsRow, 'reading') });
    agent.speech.tts = true;
    agent.speechWorkers.tts = !!s.tts.worker;
    const t0 = now();
    if (params.get('warmup') !== '0') for await (const clip of s.tts.stream('Hello.')) void clip;  // warm-up, not played
    ttsRow.done('ready', `${MODELS_BASE + TTS_FILE}${params.get('warmup') !== '0' ? ` · warm-up ${Math.round(now() - t0)} ms` : ''}`);
    const voices = s.tts.voices ?? [];
    const select = $('set-voice');
    select.replaceChildren(...voices.map((v) => new Option(v, v)));
    select.disabled = !voices.length;
    if (voices.includes(settings.voice)) select.value = settings.voice;
  } catch (e) {
    ttsRow.done('failed', fail('speech synthesis', e), 'bad');
  }
}

async function start() {
  showSettings();
  setStatus('loading', 'loading models…');
  const gpu = await detectGpu();
  $('gpu-info').textContent = gpu.text;
  const device = deviceFor(settings.profile, gpu);
  try {
    const [modules] = await Promise.all([loadSpeechModules(), loadVad()]);
    await loadLlm(device);
    if (params.get('warmup') !== '0') await warmUp();
    // Speech recognition and synthesis stay in wasm on both profiles unless ?speech=gpu: their browser GPU path
    // (the op layer through JSPI, web/tts.js and web/asr.js device 'webgpu') runs one request at a time on the
    // language model's engine worker and is not yet measured against wasm on a real GPU (on SwiftShader Kokoro
    // takes minutes to load there).
    await loadSpeech(device !== 'cpu' && params.get('speech') === 'gpu' ? 'auto' : 'cpu', modules);
  } catch (e) {
    const message = fail('loading', e);
    setStatus('error', 'could not load');
    if (!(e instanceof StorageShortError)) notice(message, { error: true });
    return;
  }
  for (const id of ['mic-button', 'ask-input', 'ask-send']) $(id).disabled = false;
  const where = agent.profile.device === 'webgpu' ? 'GPU' : 'CPU';
  setStatus('ready', `ready · ${where}${s.asr ? '' : ' · type to talk'}${s.tts ? '' : ' · text replies'}`);
  if (!s.asr || !s.tts) {
    const missing = [!s.asr && 'speech recognition (type instead)', !s.tts && 'speech synthesis (replies are shown as text)'].filter(Boolean);
    notice(`Not available yet in this build: ${missing.join('; ')}. Voice activity detection and the language model run on this device.`);
  }
  agent.ready = true;
  showStorage();
  if (params.get('mic') === '1') toggleMic();
  else $('ask-input').focus();
}

// The first turn should not be the slow one: a greeting exchange puts the system prompt in the KV cache (and
// touches every weight page and kernel once), and stays in the history, so the first question prefills only
// itself. The greeting is shown as the agent's first message.
async function warmUp() {
  setStatus('loading', 'warming up…');
  const t0 = now();
  const r = await s.llm.chat([{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: 'Hello.' }], { maxTokens: 24, greedy: true });
  const greeting = r.choices[0].message.content;
  if (r.choices[0].finish_reason === 'stop' && greeting.trim()) {
    s.history.push({ role: 'user', content: 'Hello.' }, { role: 'assistant', content: greeting });
    addMessage('assistant', greeting.trim());
  }
  agent.warmUpMs = Math.round(now() - t0);
}

function reload(changes) {
  Object.assign(settings, changes);
  localStorage.setItem('sotto-agent', JSON.stringify(settings));
  const url = new URL(location.href);
  for (const k of ['model', 'profile', 'tokens', 'cache', 'endpoint']) url.searchParams.delete(k);
  location.href = url.href;
}

// ---------------------------------------------------------------- microphone and VAD

async function toggleMic() {
  const button = $('mic-button');
  if (s.mic) {
    const mic = s.mic;
    s.mic = null;
    await mic.stop();
    await s.segmenter.flush();
    button.setAttribute('aria-pressed', 'false');
    $('mic-label').textContent = 'Start talking';
    setVadState(null);
    $('mic-level').style.transform = 'scaleX(0)';
    if (agent.status === 'listening') setStatus('ready', 'ready');
    return;
  }
  try {
    s.segmenter ??= await s.vad.segmenter({
      ...VAD_OPTIONS,
      redemptionMs: settings.endpointMs,
      onFrameProcessed: ({ isSpeech }) => {
        (s.trace ??= new VadTrace($('vad-trace'))).push(isSpeech, s.speaking);
        speculate(isSpeech);
        if (s.echoSuspect && s.userChunks >= ECHO_CONFIRM_CHUNKS) {
          // Louder than the echo: the user is talking over the voice after all.
          const detected = s.echoSuspect;
          s.echoSuspect = null;
          bargeIn('speech', { ...detected, confirmedAfterMs: now() - detected.t });
        }
      },
      onSpeechRealStart: () => (s.realSpeech = true),
      onSpeechStart: () => {
        setVadState(true);
        s.realSpeech = false;
        dropSpec(s.spec);
        s.spec = null;
        // Where in the microphone's stream speech was detected (ms of audio since it started, up to the chunk
        // being processed) and how long after the worklet sent that chunk: the VAD's share of a barge-in's delay.
        const detected = { streamMs: (s.samplesIn * 1000) / 16000, lagMs: s.lastChunkQueuedMs + now() - s.lastChunkAt };
        const held = settings.echoGate && s.player?.playing && s.userChunks < ECHO_CONFIRM_CHUNKS;
        agent.events.push({ t: now(), type: 'speech-start', ...detected, held });
        if (held) {
          agent.echo.held++;
          s.echoSuspect = { t: now(), ...detected };
          return;
        }
        bargeIn('speech', detected);
      },
      onVADMisfire: () => {
        s.echoSuspect = null;
        dropSpec(s.spec);
        s.spec = null;
        setVadState(false);
      },
      onSpeechEnd: (audio) => {
        const spec = s.spec;
        s.spec = null;
        if (!s.echoSuspect) return onUtterance(audio, spec);
        // Never louder than the agent's own voice explains: its echo, not a question.
        s.echoSuspect = null;
        agent.echo.dropped++;
        agent.events.push({ t: now(), type: 'echo-dropped', ms: Math.round((audio.length / 16000) * 1000) });
        setVadState(false);
      },
    });
    await ensurePlayer();
    s.mic = await Microphone.start({
      onChunk: (samples, rms, queuedMs) => {
        const endMs = now() - queuedMs;  // when the chunk's last sample was captured, on this thread's clock
        if (settings.echoGain > 0) rms = rmsOf(s.echoRef.mixInto(samples, endMs, settings.echoGain, settings.echoDelayMs));
        const user = s.gate.update(rms, s.echoRef.window(endMs, ECHO_SPAN_SAMPLES));
        s.userChunks = user ? s.userChunks + 1 : 0;
        s.samplesIn += samples.length;
        s.lastChunkAt = now();
        s.lastChunkQueuedMs = queuedMs;
        const level = Math.min(100, Math.round(Math.sqrt(rms) * 180));
        $('mic-level').style.transform = `scaleX(${level / 100})`;
        $('mic-meter').setAttribute('aria-valuenow', String(level));
        s.segmenter.process(samples).catch((e) => notice(fail('voice activity detection', e), { error: true }));
      },
    });
    s.micStartedAt = now();
    s.samplesIn = 0;
    button.setAttribute('aria-pressed', 'true');
    $('mic-label').textContent = 'Stop listening';
    setVadState(false);
    agent.events.push({ t: now(), type: 'mic-on', label: s.mic.label, rateHz: s.mic.contextRateHz, openedAt: s.mic.openedAt });
    setStatus('listening', `listening · ${s.mic.label}`);
  } catch (e) {
    notice(fail('microphone', e), { error: true });
  }
}

function setVadState(speech) {
  s.speaking = !!speech;
  const el = $('vad-state');
  el.dataset.speech = String(!!speech);
  el.textContent = speech === null ? 'off' : speech ? 'speech' : 'silence';
}

// Called for every VAD frame (before the frame's own segment events). A silent frame that completes
// speculateMs of silence in a segment that is real speech starts recognition of the segment so far
// (openSegmentAudio ends with this frame); any frame that is not silence afterwards discards that
// recognition (its result is never used: the endpoint's segment is transcribed whole).
function speculate(p) {
  const silent = p < s.segmenter.options.negativeSpeechThreshold;
  s.silentFrames = silent ? s.silentFrames + 1 : 0;
  if (!silent) {
    if (s.spec) {
      dropSpec(s.spec);
      s.spec = null;
      agent.events.push({ t: now(), type: 'speculation-dropped' });
    }
    return;
  }
  const frames = Math.max(1, Math.round(settings.speculateMs / s.segmenter.options.frameMs));
  if (!settings.speculateMs || !s.asr || !s.speaking || !s.realSpeech || s.echoSuspect || s.spec || s.silentFrames !== frames) return;
  const audio = s.segmenter.openSegmentAudio();
  if (!audio) return;
  const spec = { samples: audio.length, started: now(), result: null };
  // A failure here is not the user's: the endpoint's own recognition runs instead.
  spec.result = s.asr.transcribe(audio).then((r) => ({ r, at: now() }), () => null);
  s.spec = spec;
  agent.events.push({ t: spec.started, type: 'speculation', samples: audio.length });
  if (settings.prefill && s.llm) spec.prefill = spec.result.then((early) => startPrefill(spec, early));
}

// The chat turn a voice turn would run for `text` (runTurn): the earlier words nobody heard a reply to first.
function turnMessages(text) {
  const user = s.carry ? `${s.carry} ${text}` : text;
  return { user, messages: [{ role: 'system', content: SYSTEM_PROMPT }, ...s.history, { role: 'user', content: user }] };
}

function chatOptions() {
  return { maxTokens: settings.tokens, temperature: 0.7, topP: 0.9, repeatPenalty: 1.05, seed: settings.seed };
}

// The speculative transcript's turn, prefilled and held (llm.js chat's speculative) while the endpoint's
// silence runs out. Only when the page is idle: a turn queued or running owns the model, and its history is
// not this one's.
function startPrefill(spec, early) {
  const text = (early?.r?.text ?? '').trim();
  if (!text || s.spec !== spec || s.queued || s.turn || !s.llm) return null;
  const { messages } = turnMessages(text);
  const prefill = { key: JSON.stringify(messages), started: now() };
  prefill.stream = s.llm.chat(messages, { stream: true, speculative: true, ...chatOptions() });
  s.prefilled = prefill;
  agent.events.push({ t: prefill.started, type: 'prefill' });
  return prefill;
}

// A prefilled turn given up: rolled back (llm.js), and the model free for the next chat.
function dropPrefill(prefill) {
  if (!prefill || prefill.taken) return;
  prefill.taken = true;
  prefill.stream.return();
  if (s.prefilled === prefill) s.prefilled = null;
  agent.events.push({ t: now(), type: 'prefill-dropped' });
}

// A speculation that will not be used: its prefilled turn (if any) goes.
function dropSpec(spec) {
  spec?.prefill?.then(dropPrefill);
}

function onUtterance(audio, spec = null) {
  setVadState(false);
  const detectedAt = now();
  const ms = (audio.length / 16000) * 1000;
  const end = s.samplesIn / 16000 - settings.endpointMs / 1000;
  const seg = { start: Math.max(0, end - ms / 1000 + VAD_OPTIONS.preSpeechPadMs / 1000), end, ms: Math.round(ms) };
  agent.segments.push(seg);
  agent.events.push({ t: detectedAt, type: 'speech-end', ms: seg.ms });
  const li = document.createElement('li');
  li.innerHTML = '<span></span><span></span>';
  li.children[0].textContent = `${seg.start.toFixed(2)} s – ${seg.end.toFixed(2)} s`;
  li.children[1].textContent = `${(ms / 1000).toFixed(2)} s of speech`;
  $('segments').prepend(li);
  // The speech really ended redemptionMs before the segmenter could be sure of it.
  const timeline = { source: 'voice', endOfSpeech: detectedAt - settings.endpointMs, detected: detectedAt };
  // The speculative transcript stands for the segment when the segment is its audio plus the silence since.
  if (spec && spec.samples > audio.length) {
    dropSpec(spec);
    spec = null;
  }
  s.queued++;
  s.busy = s.busy.then(() => voiceTurn(audio, timeline, spec)).finally(() => s.queued--);
}

async function voiceTurn(audio, tl, spec = null) {
  tl.started = now();  // after the turn before this one has finished (a cancelled prefill runs to its end)
  s.longestStall = 0;
  if (!s.asr) {
    // One note that counts the utterances, rather than one per utterance.
    const last = $('conversation').lastElementChild;
    const n = last?.dataset.heard ? Number(last.dataset.heard) + 1 : 1;
    const text = `Heard ${n === 1 ? '' : `${n} utterances, the last `}${(audio.length / 16000).toFixed(1)} s of speech. ` +
      'Speech recognition is not available in this build yet — type your question instead.';
    if (n > 1) last.querySelector('.text').textContent = text;
    else addMessage('system', text).dataset.heard = '1';
    if (n > 1) last.dataset.heard = String(n);
    agent.turns.push({ source: 'voice', user: null, reply: null, stages: stagesOf(tl), note: 'no speech recognition' });
    renderTimeline();
    return;
  }
  setStatus('thinking', 'transcribing…');
  let text = '';
  const early = spec && (await spec.result);
  if (early) {
    // Recognised during the pause: the transcript is there when the recognition was, or now if later.
    tl.asrStart = spec.started;
    tl.speculative = true;
    tl.asrSamples = spec.samples;
    text = (early.r.text ?? '').trim();
    tl.asr = early.r;
    tl.transcript = Math.max(early.at, tl.started);
    tl.asrDone = early.at;
  } else {
    tl.asrStart = now();
    tl.asrSamples = audio.length;
    try {
      const r = await s.asr.transcribe(audio);
      text = (r.text ?? '').trim();
      tl.asr = r;
    } catch (e) {
      addMessage('system', fail('speech recognition', e));
    }
    tl.transcript = now();
  }
  if (text && s.speaking) {
    // The user is talking again: that was a pause, not the end of the question. Its words open the next one.
    s.carry = s.carry ? `${s.carry} ${text}` : text;
    dropSpec(spec);
    agent.turns.push({ source: 'voice', user: text, reply: '', heard: '', cancelled: true, stages: stagesOf(tl), note: 'joined to the next utterance', ...asrOf(tl) });
    renderTimeline();
    return;
  }
  if (!text) {
    // This utterance stopped the voice and held no words: the echo gate likely took the voice's own echo for the
    // user (the room changed since it learnt it: louder speakers, another output). It learns the room afresh,
    // rather than keep the quiet level it once heard the voice at (EchoGate.silentLevel).
    if (s.voiceBargeInAt >= tl.endOfSpeech - audio.length / 16) {
      s.gate = new EchoGate();
      agent.events.push({ t: now(), type: 'echo-gate-reset' });
    }
    dropSpec(spec);
    addMessage('system', '(nothing recognised)');
    setStatus(s.mic ? 'listening' : 'ready', s.mic ? 'listening' : 'ready');
    return;
  }
  await runTurn(text, tl, early ? spec : null);
}

// ---------------------------------------------------------------- conversation

function addMessage(role, text, { streaming = false } = {}) {
  $('empty-hint')?.remove();
  const li = document.createElement('li');
  li.className = `msg ${role}${streaming ? ' streaming' : ''}`;
  if (streaming) li.setAttribute('aria-busy', 'true');  // read out once written, not token by token
  if (role !== 'system') {
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = role === 'user' ? 'You' : 'sotto';
    li.append(who);
  }
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  li.append(body);
  $('conversation').append(li);
  li.scrollIntoView({ block: 'end' });
  return li;
}

async function ensurePlayer() {
  if (s.player || !s.tts) return;
  s.player = await Player.create({
    onStart: (id, at) => {
      const clip = s.clipAudio.get(id);
      s.clipAudio.delete(id);
      if (clip) s.echoRef.add(at, clip.audio, clip.rate);
      const t = s.turn;
      if (t && t.clipIds.has(id) && clip) {
        // Silence the voice did not mean: a clip (a sentence, or a chunk of one) that starts after the one before
        // has run out, because synthesis fell behind playback (the worklet reports starts to a few ms).
        if (t.voiceEnd !== undefined && at > t.voiceEnd + 20) t.voiceGapMs = (t.voiceGapMs ?? 0) + (at - t.voiceEnd);
        t.voiceEnd = Math.max(at, t.voiceEnd ?? 0) + (clip.audio.length / clip.rate) * 1000;
      }
      if (t && t.clipIds.has(id) && !t.tl.firstSound) {
        // The first audible sample: the clip's start plus the silence it opens with.
        t.tl.firstSound = at + (clip?.leadMs ?? 0);
        agent.events.push({ t: at, type: 'first-sound' });
        setStatus('speaking', 'speaking');
      }
    },
  });
}

function ask(text) {
  text = text.trim();
  if (!text || !s.llm) return Promise.resolve();
  const tl = { source: 'typed', endOfSpeech: now() };
  s.queued++;
  return (s.busy = s.busy.then(() => {
    tl.transcript = now();  // typed: the question is there once the turn before has finished
    s.longestStall = 0;
    return runTurn(text, tl);
  }).finally(() => s.queued--));
}

async function runTurn(text, tl, spec = null) {
  await ensurePlayer();
  // Words of an earlier utterance that got no heard reply (a pause mid-question, or a reply cut before its first
  // word) belong to this question: shown and sent with it.
  const { user, messages } = turnMessages(text);
  text = user;
  s.carry = '';
  // The turn prefilled during the pause, when it is this very turn (same words, same conversation before it).
  const prefill = await spec?.prefill;
  const held = prefill && !prefill.taken && prefill.key === JSON.stringify(messages) ? prefill : null;
  if (held) {
    held.taken = true;
    s.prefilled = null;
  } else dropSpec(spec);
  // Any other turn held in the model (a question typed during a spoken one's pause) would hold this one's chat.
  dropPrefill(s.prefilled);
  const turn = { tl, text, written: '', sentences: [], heard: [], clipIds: new Set(), cancelled: false, stream: null, synthesis: null, deltaTimes: [] };
  turn.cancelling = new Promise((resolve) => (turn.cancel = resolve));  // resolves (to undefined) on a barge-in
  s.turn = turn;
  $('stop-button').disabled = false;
  addMessage('user', text);
  const el = addMessage('assistant', '', { streaming: true });
  const body = el.querySelector('.text');
  setStatus('thinking', 'thinking…');
  const split = new SentenceSplitter({ firstWords: s.tts ? settings.firstWords : 0 });
  const queue = new SentenceQueue();
  if (s.tts) turn.synthesis = speak(turn, queue);
  const sentence = (x) => {
    if (!tl.firstSentence) {
      tl.firstSentence = now();
      if (turn.synthesis && settings.yieldToVoice) pauseWriting(turn);
    } else if (turn.synthesis && settings.yieldAll) pauseWriting(turn);
    turn.sentences.push(x);
    queue.push(x);
  };
  s.history.push({ role: 'user', content: text });
  let timings = null;
  try {
    if (held) {
      turn.stream = held.stream;
      tl.prefilled = held.started;
      agent.events.push({ t: now(), type: 'prefill-used' });
      held.stream.resume();
    } else turn.stream = s.llm.chat(messages, { stream: true, ...chatOptions() });
    for await (const chunk of turn.stream) {
      const delta = chunk.choices[0].delta.content ?? '';
      if (chunk.timings) timings = chunk.timings;
      if (turn.cancelled) break;
      if (!delta) continue;
      tl.firstToken ??= now();
      // When the first few pieces of text came (what the first spoken piece waited for, token by token).
      if (turn.deltaTimes.length < 16) turn.deltaTimes.push(now());
      turn.written += delta;
      body.textContent = turn.written;
      for (const x of split.push(delta)) sentence(x);
    }
    const rest = split.flush();
    if (rest && !turn.cancelled) sentence(rest);
  } catch (e) {
    addMessage('system', fail('language model', e));
  }
  tl.generated = now();
  queue.close();
  el.classList.remove('streaming');
  el.removeAttribute('aria-busy');
  await turn.synthesis;
  // What the model remembers saying: all it wrote when the reply is text; what was heard when it was spoken.
  let remembered = turn.written;
  if (s.tts) {
    remembered = turn.heard.join(' ');
    // All of it heard (the pieces are spoken trimmed): the text as written, which the KV cache holds, so the
    // next turn extends the cache rather than prefilling the whole conversation again.
    if (remembered === turn.written.trim()) remembered = turn.written;
    if (turn.cancelled && remembered !== turn.written) markUnspoken(body, remembered, turn.written);
  }
  if (turn.cancelled && !remembered.trim()) {
    // Nothing of the reply reached the user: the exchange did not happen, but what they said is kept for the next.
    s.carry = s.history.pop().content;
  } else s.history.push({ role: 'assistant', content: remembered });
  const record = {
    source: tl.source, user: text, reply: turn.written, heard: s.tts ? remembered : null, cancelled: turn.cancelled,
    bargeIn: turn.bargeIn ?? null, reusedCache: timings?.reusedCache ?? null, decodeTokensPerS: timings?.decodeTokensPerS ?? null,
    prefillMs: (held ? timings?.beginMs : timings?.prefillMs) ?? null, speculativePrefill: !!held, nPast: timings?.nPast ?? null, stages: stagesOf(tl), firstPiece: turn.sentences[0] ?? null, ...asrOf(tl),
    tokenGapsMs: turn.deltaTimes.slice(1).map((t, k) => Math.round(t - turn.deltaTimes[k])),
    writingPausedMs: turn.pausedAt ? Math.round((turn.resumedAt ?? now()) - turn.pausedAt) : null,
    longestStallMs: Math.round(s.longestStall), voiceGapMs: Math.round(turn.voiceGapMs ?? 0),
  };
  agent.turns.push(record);
  const meta = document.createElement('span');
  meta.className = 'meta';
  meta.textContent = [
    record.stages.first_token_ms !== undefined && `first word ${fmtMs(record.stages.first_token_ms)}`,
    record.decodeTokensPerS && `${record.decodeTokensPerS.toFixed(1)} tokens/s`,
    record.reusedCache && 'cache reused',
    turn.cancelled && (turn.bargeIn?.wasPlaying ? `interrupted: the voice stopped in ${fmtMs(turn.bargeIn.stopMs)}` : `stopped (${turn.bargeIn?.why ?? 'cancelled'})`),
  ].filter(Boolean).join(' · ');
  el.append(meta);
  renderTimeline();
  s.turn = null;
  $('stop-button').disabled = true;
  setStatus(s.mic ? 'listening' : 'ready', s.mic ? 'listening' : 'ready');
}

// How a voice turn's transcript was made: during the pause (speculative) or at the endpoint, and of how many
// samples (the segment's, or its part before the pause).
// asrDoneMs / prefillStartMs: when the speculative recognition ended and its held prefill began, from the end of
// speech (the stages clamp both to the endpoint, which hides how early they were). firstAudioMs: when the voice's
// first audio (its first chunk) reached the page, and firstAudioComputeMs its synthesis time in the worker.
function asrOf(tl) {
  const from = (t) => (t === undefined ? null : Math.round(t - tl.endOfSpeech));
  return tl.source === 'voice' ? { speculativeAsr: !!tl.speculative, asrSamples: tl.asrSamples ?? null, asrDoneMs: from(tl.asrDone), prefillStartMs: from(tl.prefilled), firstAudioMs: from(tl.firstAudio), firstAudioComputeMs: tl.firstAudioComputeMs === undefined ? null : Math.round(tl.firstAudioComputeMs) } : {};
}

// The writing waits while the first piece (YIELD_TO_VOICE), or each piece (YIELD_ALL), is synthesised;
// resumeWriting ends the wait. pausedAt / resumedAt: the first wait's, for the turn's record.
function pauseWriting(turn) {
  if (!turn.stream?.pause || turn.cancelled || turn.paused) return;
  turn.stream.pause();
  turn.paused = true;
  turn.pausedAt ??= now();
}

function resumeWriting(turn) {
  if (!turn.paused) return;
  turn.paused = false;
  turn.resumedAt ??= now();
  turn.stream.resume();
}

// tts.stream's { chunks } option for the voice: false (whole pieces) or the first chunk's length and how much of
// each piece's leading pause is vocoded.
function voiceChunks() {
  return settings.streamVoice ? { firstChunkMs: settings.firstChunkMs, leadMs: settings.leadMs } : false;
}

// Synthesis sentence by sentence, each clip queued for playback as soon as it exists (the next sentence is
// synthesised while this one plays); what each clip played is what the user heard.
async function speak(turn, queue) {
  const played = [];
  try {
    const voice = $('set-voice').value || undefined;
    let i = 0;
    // tts.stream voices an async iterable sentence by sentence; a module with only speak() gets one call each.
    const chunks = voiceChunks();
    const clips = s.tts.stream ? s.tts.stream(queue, { voice, chunks }) : (async function* () {
      for await (const text of queue) yield { ...(await s.tts.speak(text, { voice })), text };
    })();
    // A barge-in does not wait for the piece being synthesised (seconds in the worker): the loop leaves at once,
    // the worker's result is dropped, and the next turn's recognition and language model start meanwhile.
    const it = clips[Symbol.asyncIterator]();
    let sentence = null;  // the sentence being played: { text, clips: [done promises], sounding }
    for (;;) {
      const pending = it.next();
      pending.catch(() => {});  // a dropped piece's failure is nobody's error; a live one's is thrown by the race
      const next = await Promise.race([pending, turn.cancelling]);
      if (!next || next.done || turn.cancelled) {
        if (next && !next.done) it.return?.();
        break;
      }
      const clip = next.value;
      const chunked = clip.chunk !== undefined;
      if (turn.tl.firstAudio === undefined) {
        turn.tl.firstAudio = now();  // the first audio of the voice is in the page (a chunk, or a whole piece)
        turn.tl.firstAudioComputeMs = clip.ms;  // its synthesis in the worker (the piece's text side included)
      }
      // The writing resumes when the first piece is wholly synthesised (its last chunk), not at its first sound:
      // the rest of its vocoding would compete with the language model.
      if (!chunked || clip.last) resumeWriting(turn);
      if (!chunked || clip.chunk === 0) {
        // totalS: the whole sentence's audio when it comes in chunks (tts.js gives its length with the first), so a
        // sentence cut before its later chunks exist is not taken as heard for the share of what arrived;
        // cutS: what the trimming took off it (its silences), for the same sum.
        sentence = { text: clip.text ?? turn.sentences[i], clips: [], sounding: false, totalS: chunked && clip.total ? clip.total / clip.sampleRate : 0, cutS: 0 };
        i++;
        played.push(sentence);
      }
      // Without the voice's silence in front (and behind a clause that the next piece continues). A chunked
      // sentence trims its front until its first sound (a first chunk of silence only is skipped) and its tail
      // on its last chunk.
      const clause = !/[.!?…]["')\]]*\s*$/.test(sentence.text ?? '');
      const lastOfSentence = !chunked || clip.last;
      let audio = clip.audio, leadMs = 0;
      if (settings.trim) {
        const tailMs = lastOfSentence && clause ? 60 : null;
        if (!sentence.sounding) {
          const t = trimSilence(audio, clip.sampleRate, { tailMs });
          if (t.samples === audio && t.leadMs === 0 && chunked && !clip.last) {  // silence only
            sentence.cutS += audio.length / clip.sampleRate;
            continue;
          }
          ({ samples: audio, leadMs } = t);
        } else if (tailMs !== null) {
          ({ samples: audio } = trimSilence(audio, clip.sampleRate, { leadMs: Infinity, tailMs }));
        }
      } else if (!sentence.sounding) {
        ({ samples: audio, leadMs } = trimSilence(audio, clip.sampleRate, { leadMs: Infinity }));
      }
      sentence.cutS += (clip.audio.length - audio.length) / clip.sampleRate;
      sentence.sounding = true;
      sentence.ended = lastOfSentence;
      if (settings.record) agent.voiceAudio.push({ audio: audio.slice(), rate: clip.sampleRate });
      const { id, done } = s.player.play(audio, clip.sampleRate);
      s.clipAudio.set(id, { audio, rate: clip.sampleRate, leadMs });
      turn.clipIds.add(id);
      sentence.clips.push(done);
    }
  } catch (e) {
    addMessage('system', fail('speech synthesis', e));
  } finally {
    resumeWriting(turn);
  }
  // What was heard of each sentence: the share of its audio (all its chunks, those not made yet included) that
  // played.
  for (const { text, clips, totalS, cutS, ended } of played) {
    const rs = await Promise.all(clips);
    if (!rs.length) continue;
    const total = Math.max(rs.reduce((n, r) => n + r.total, 0), totalS - cutS), heard = rs.reduce((n, r) => n + r.played, 0);
    const complete = ended && rs.every((r) => r.complete);
    const part = heardPart(speakable(text ?? ''), heard / Math.max(total, 1e-9));
    if (part) turn.heard.push(complete ? text : part);
  }
}

function markUnspoken(body, heard, written) {
  const kept = heard.replace(/…$/, '');
  const at = written.indexOf(kept) === 0 ? kept.length : 0;
  const span = document.createElement('span');
  span.className = 'unspoken';
  span.title = 'not spoken: interrupted';
  span.textContent = written.slice(at);
  body.textContent = written.slice(0, at);
  body.append(span);
}

// Barge-in: the user speaks (or presses Stop) while the agent writes or talks. Playback stops first (the
// bound is on that), then generation is cancelled; the history keeps only what was heard (runTurn).
async function bargeIn(why, detected = null) {
  const turn = s.turn;
  if (!turn || turn.cancelled) return;
  // Speech that cannot become a question (no speech recognition) only interrupts a voice that is talking.
  if (why === 'speech' && !s.asr && !s.player?.playing) return;
  const t0 = now();
  turn.cancelled = true;
  turn.cancel();
  const wasPlaying = !!s.player?.playing;
  const stopping = s.player?.stop();
  s.echoRef.stopAt(now());
  s.clipAudio.clear();
  turn.stream?.return?.();
  const stopped = await stopping;
  // stopMs: until the page heard back; audioStopMs: until the voice stopped, on the audio clock.
  turn.bargeIn = { why, stopMs: now() - t0, audioStopMs: stopped?.audioMs ?? 0, at: t0, wasPlaying, ...(detected ?? {}) };
  if (why === 'speech' && wasPlaying) s.voiceBargeInAt = t0;
  agent.events.push({ t: now(), type: 'barge-in', why, stopMs: turn.bargeIn.stopMs });
}

// ---------------------------------------------------------------- wiring

$('ask-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = $('ask-input');
  const text = input.value;
  input.value = '';
  bargeIn('typed');
  ask(text);
});
$('mic-button').addEventListener('click', () => toggleMic());
$('stop-button').addEventListener('click', () => bargeIn('stop button'));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') bargeIn('escape');
});
$('settings').addEventListener('submit', (e) => {
  e.preventDefault();
  const model = modelUrl($('set-model').value.trim() || MODELS_BASE + LLM_FILE, location.href);
  $('set-model').setCustomValidity(model.error ?? '');
  if (model.error) {
    $('set-model').reportValidity();
    return;
  }
  reload({
    profile: $('set-profile').value, model: model.url,
    tokens: Math.max(1, Number($('set-tokens').value) || 160), cache: $('set-cache').checked, voice: $('set-voice').value,
    endpointMs: Math.min(3000, Math.max(200, Number($('set-endpoint').value) || ENDPOINT_MS)),
  });
});
$('set-forget').addEventListener('click', async () => {
  const freed = await forgetAllModels();
  $('storage-info').textContent = `Removed the saved models (${mb(freed)} freed); they download again on the next load.`;
});
async function showStorage() {
  const saved = await savedBytes().catch(() => 0);
  const estimate = await navigator.storage?.estimate?.().catch(() => null);
  const free = estimate?.quota ? ` · ${mb(estimate.quota - (estimate.usage ?? 0))} more allowed` : '';
  $('storage-info').textContent = saved ? `Saved in this browser: ${mb(saved)}${free}.` : `No models saved in this browser yet${free}.`;
}
$('set-voice').addEventListener('change', () => {
  settings.voice = $('set-voice').value;
  localStorage.setItem('sotto-agent', JSON.stringify(settings));
});

agent.ask = ask;
agent.toggleMic = toggleMic;
// Measurement (?record=1): the voice as it was queued for playback, every clip trimmed as played, all turns.
agent.voiceAudio = [];
// -> what our speech recognition hears in that audio (from clip `from` on), resampled to its 16 kHz.
agent.transcribeVoice = async (from = 0) => {
  const clips = agent.voiceAudio.slice(from).map((c) => resampleLinear(c.audio, c.rate, 16000));
  const joined = new Float32Array(clips.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of clips) {
    joined.set(c, at);
    at += c.length;
  }
  return { text: (await s.asr.transcribe(joined)).text ?? '', seconds: joined.length / 16000 };
};
agent.bargeIn = bargeIn;
agent.voiceChunks = voiceChunks;
// Measurement: the agent's voice fed back into the microphone at `gain` (0: none), `delayMs` late; the gate on/off.
// A new gain is a new room: the gate learns it afresh.
agent.setEcho = (gain, { delayMs = settings.echoDelayMs, gate = settings.echoGate } = {}) => {
  if (gain !== settings.echoGain && gain > 0) s.gate = new EchoGate();
  Object.assign(settings, { echoGain: gain, echoDelayMs: delayMs, echoGate: gate });
};

if (await ensureIsolation({ onError: (e) => fail('service worker', e) })) {
  sessionStorage.removeItem('sotto-agent-sw-reload');
  await start();
} else {
  setStatus('error', 'not cross-origin isolated');
  notice('This page needs cross-origin isolation for its threads: serve it with COOP/COEP headers (node web/serve.mjs does), ' +
    'or over https / localhost so its service worker can add them.', { error: true });
}
