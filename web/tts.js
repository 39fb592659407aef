// Speech synthesis in the page (or Node): Kokoro-82M v1.0 (kokoro-v1.0.int8.onnx) and our G2P, run by sotto's
// own code (the C API's sotto_tts_*, api/sotto.h) in WebAssembly.
//
//   const tts = await Tts.load('/models/kokoro/kokoro-v1.0.int8.onnx', { voices: '/models/kokoro/voices/', onProgress });
//   tts.voices                                          // ['af_heart', ...] (each read on first use)
//   const { audio, sampleRate, phonemes } = await tts.speak('Hello there.', { voice: 'af_heart', speed: 1 });
//   for await (const { audio, sampleRate, text, phonemes } of tts.stream(sentencesOrText, { voice })) play(audio);
//   for await (const { audio, last } of tts.streamPhonemes('həlˈO.', { voice })) play(audio);  // chunks, sooner
//   await tts.speakPhonemes('həlˈO.', { voice })        // phonemes as `sotto speak --phonemes` takes them
//
// Options of load: voices (a directory URL or, in Node, a path; default: voices/ beside the model), voice (the
// default, 'af_heart'), g2p ({ 'en-us': source, 'en-gb': source }; default: ../g2p-en-us.bin and
// ../g2p-en-gb.bin beside the model's directory, read when a voice of that language is first used), variant,
// wasmUrl, onProgress({loaded, total}) for the model file, worker (default: true in a page, false in Node),
// threads (default 2 in a cross-origin isolated page with 2+ cores, else 1: defaultTtsThreads). With threads > 1
// it runs on the engine worker (web/worker.js) of an instance of its own with that many pool threads (one
// thread if that worker cannot start); with one, on a wasm instance of its own in a dedicated worker (web/speech-worker.js)
// or, with worker: false, on the calling thread (`engine` is ignored). device: 'webgpu' runs Kokoro on the op
// layer's WebGPU backend in the engine worker (which holds the GPUDevice), each readback waited for through JS
// Promise Integration (Chromium 137+); 'auto' falls back to the CPU with the reason in tts.fallback. On
// SwiftShader a short word takes minutes (tests/web/kokoro_gpu_browser.test.mjs). Only the wasm module is
// found by import.meta.url, in the WASM_URLS block the agent's one-file build replaces (the pool's worker is the
// engine's, web/engine.js, which that build bundles).
import { compileWasm, SpeechWorker } from './speech-client.js';
import { copyIntoWasm, ttsOps } from './tts-ops.js';
import { Engine } from './engine.js';
import { createSharedMemory, hasRelaxedSimd, instantiate, isNode } from './runtime.js';

const WASM_URLS = {
  simd128: new URL('../build/wasm-simd128/sotto.wasm', import.meta.url),
  relaxed: new URL('../build/wasm-relaxed/sotto.wasm', import.meta.url),
};

function wasmUrlOf({ variant, wasmUrl } = {}) {
  const chosen = variant ?? (!isNode && hasRelaxedSimd() ? 'relaxed' : 'simd128');
  if (!WASM_URLS[chosen]) throw new Error(`sotto: unknown wasm variant '${chosen}'`);
  return wasmUrl ? new URL(wasmUrl, isNode ? `file://${process.cwd()}/` : location.href) : WASM_URLS[chosen];
}

// The engine requests of web/tts-ops.js on a wasm instance of this module's own, on the calling thread, one
// thread: a sentence takes about twice its length to compute there, and the thread is blocked meanwhile.
class InlineEngine {
  #ops;
  static async create(options = {}) {
    const module = await compileWasm(wasmUrlOf(options));
    const memory = createSharedMemory();
    const wasm = await instantiate(module, memory, 'tts');
    wasm.__wasm_call_ctors();
    return new InlineEngine(ttsOps(() => ({ wasm, memory, loadIntoWasm: copyIntoWasm(wasm, memory) })));
  }
  constructor(ops) {
    this.#ops = ops;
    this.info = { threads: 1, worker: false };
  }
  async call(op, args = {}, onProgress) {
    return this.#ops[op](args, onProgress);
  }
  terminate() {}
}

// The same requests in a dedicated worker (web/speech-worker.js) on its own instance, one thread: the page's
// default, so synthesis never blocks the page (its VAD, playback, the language model's stream).
class WorkerEngine {
  static async create(options = {}) {
    const [module, worker] = await Promise.all([compileWasm(wasmUrlOf(options)), SpeechWorker.start()]);
    try {
      await worker.call('init', { module });
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return new WorkerEngine(worker);
  }
  #worker;
  constructor(worker) {
    this.#worker = worker;
    this.info = { threads: 1, worker: true };
  }
  call(op, args = {}, onProgress) {
    return this.#worker.call(op, args, onProgress);
  }
  terminate() {
    this.#worker.terminate();
  }
}

// The same requests on an engine of its own (web/engine.js: its worker, web/worker.js, with a pool of `threads`
// Web Workers sharing its memory): the int8 convs of the decoder and generator (three fifths of a sentence's
// time) split their outputs across the threads. Needs shared memory that can be waited on (a cross-origin
// isolated page, or Node). Through Engine, so the agent's one-file build finds the worker as the engine's.
class PoolEngine {
  static async create({ variant, wasmUrl, threads }) {
    return new PoolEngine(await Engine.create({ threads, variant, wasmUrl }));
  }
  #engine;
  constructor(engine) {
    this.#engine = engine;
    this.info = { threads: engine.info.threads, worker: true };
  }
  call(op, args = {}, onProgress) {
    return this.#engine.call(op, args, onProgress);
  }
  terminate() {
    this.#engine.terminate();
  }
}

// Two threads where the page may share memory (cross-origin isolated) and has 2+ cores, else one. On 2 cores
// too: the agent page pauses the language model while the reply's first piece is synthesised (the piece the
// user waits for), so both cores are free then, and the int8 convs of the decoder and generator (most of a
// piece's time) split across them. Later pieces share the cores with the model's writing; idle helpers sleep.
// A page URL's ?ttsThreads=N overrides (for measuring).
export function defaultTtsThreads() {
  if (isNode) return 1;
  const asked = Number(new URLSearchParams(globalThis.location?.search ?? '').get('ttsThreads'));
  if (asked >= 1) return Math.min(8, Math.floor(asked));
  const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  return globalThis.crossOriginIsolated && cores >= 2 ? 2 : 1;
}

export const SAMPLE_RATE = 24000;
// The English voices scripts/get-models.sh installs (kokoro-js 1.2.1's): a* American, b* British English.
export const VOICES = ['af_heart', 'af_alloy', 'af_aoede', 'af_bella', 'af_jessica', 'af_kore', 'af_nicole', 'af_nova',
  'af_river', 'af_sarah', 'af_sky', 'am_adam', 'am_echo', 'am_eric', 'am_fenrir', 'am_liam', 'am_michael', 'am_onyx',
  'am_puck', 'am_santa', 'bf_alice', 'bf_emma', 'bf_isabella', 'bf_lily', 'bm_daniel', 'bm_fable', 'bm_george',
  'bm_lewis'];

// A URL or path `rel` next to `base` (a file or, ending in '/', a directory): strings stay strings in Node
// (paths), URLs elsewhere (the engine worker resolves nothing relative).
function beside(base, rel) {
  if (base instanceof URL) return new URL(rel, base);
  if (isNode && !/^[a-z]+:\/\//i.test(base)) {
    const dir = base.endsWith('/') ? base : base.slice(0, base.lastIndexOf('/') + 1) || './';
    return `${dir}${rel}`;
  }
  return new URL(rel, new URL(base, globalThis.location?.href)).href;
}

function absolute(source) {
  if (typeof source !== 'string' || isNode || /^[a-z]+:/i.test(source)) return source instanceof URL ? source.href : source;
  return new URL(source, location.href).href;
}

// b* voices (bf_emma, or a file bm_george.bin) speak British English.
const langOf = (voice) => (voice.slice(voice.lastIndexOf('/') + 1).startsWith('b') ? 'en-gb' : 'en-us');

// Where speech starts in Kokoro's audio: every sentence opens with the silence of its leading pad (~0.3 s, below
// -70 dBFS), which a voice agent's first piece need not make the user wait through. -> the index `keepMs`
// before the first sample above `threshold` (-50 dBFS), or -1 when there is none.
export function speechStart(audio, { threshold = 0.003, keepMs = 30 } = {}) {
  let i = 0;
  while (i < audio.length && Math.abs(audio[i]) <= threshold) i++;
  if (i === audio.length) return -1;
  return Math.max(0, i - Math.round((keepMs * SAMPLE_RATE) / 1000));
}

export class Tts {
  #engine;
  #ownEngine;
  #id;
  #voicesDir;
  #g2pSources;
  #voiceLoads = new Map();  // name -> Promise (a voice is read once)
  #g2pLoads = new Map();  // lang -> Promise

  // device: 'cpu' (the default), 'webgpu' (Kokoro on the op layer's WebGPU backend in an engine worker,
  // web/worker.js, which holds the GPUDevice: needs WebGPU and JS Promise Integration, e.g. Chromium 137+, and
  // throws the reason in one line where either is missing) or 'auto' (the GPU where it can run, else the CPU
  // with the reason in tts.fallback). tts.device says where it runs.
  static async load(model, { voices, voice = 'af_heart', g2p = {}, variant, wasmUrl, onProgress, worker = !isNode,
    threads = defaultTtsThreads(), device = 'cpu' } = {}) {
    const own = true;
    const pooled = device !== 'cpu' || (threads > 1 && (isNode || globalThis.crossOriginIsolated));
    const single = () => (worker ? WorkerEngine : InlineEngine).create({ variant, wasmUrl });
    // A pool that cannot start (a bundle without web/worker.js beside this module) falls back to one thread.
    const e = pooled ? await PoolEngine.create({ variant, wasmUrl, threads }).catch(single) : await single();
    try {
      const modelSource = absolute(model);
      const { tts: id, loadMs, device: where, fallback } = await e.call('ttsLoad', { model: modelSource, device }, onProgress);
      const modelName = typeof modelSource === 'string' ? modelSource : '';
      const tts = new Tts(e, own, id, {
        voicesDir: absolute(voices ?? (modelName ? beside(modelName, 'voices/') : 'voices/')),
        g2p: {
          'en-us': absolute(g2p['en-us'] ?? (modelName && beside(modelName, '../g2p-en-us.bin'))),
          'en-gb': absolute(g2p['en-gb'] ?? (modelName && beside(modelName, '../g2p-en-gb.bin'))),
        },
      });
      tts.loadMs = loadMs;
      tts.device = where;
      if (fallback) tts.fallback = fallback;
      tts.defaultVoice = voice;
      tts.threads = e.info?.threads ?? null;
      tts.worker = !!e.info?.worker;
      await tts.#voice(voice);  // the lexicon is read when text first comes
      return tts;
    } catch (err) {
      if (own) e.terminate();
      throw err;
    }
  }

  constructor(engine, ownEngine, id, { voicesDir, g2p }) {
    this.#engine = engine;
    this.#ownEngine = ownEngine;
    this.#id = id;
    this.#voicesDir = voicesDir;
    this.#g2pSources = g2p;
    this.voices = [...VOICES];
    this.sampleRate = SAMPLE_RATE;
  }

  #live() {
    if (!this.#id) throw new Error('sotto: this Tts was disposed');
  }

  // A voice by name (voices/NAME.bin) or a path/URL ending in .bin, read into the engine on first use.
  #voice(name) {
    let p = this.#voiceLoads.get(name);
    if (!p) {
      const source = /\.bin$/.test(name) || name.includes('/') ? name : beside(this.#voicesDir.endsWith?.('/') ? this.#voicesDir : `${this.#voicesDir}/`, `${name}.bin`);
      p = this.#engine.call('ttsAddVoice', { tts: this.#id, name, source: absolute(source) });
      p.catch(() => this.#voiceLoads.delete(name));
      this.#voiceLoads.set(name, p);
    }
    return p;
  }

  #g2p(lang) {
    let p = this.#g2pLoads.get(lang);
    if (!p) {
      const source = this.#g2pSources[lang];
      p = source ? this.#engine.call('ttsLoadG2p', { tts: this.#id, source })
        : Promise.reject(new Error(`sotto: no ${lang} G2P lexicon given (Tts.load's g2p option)`));
      p.catch(() => this.#g2pLoads.delete(lang));
      this.#g2pLoads.set(lang, p);
    }
    return p;
  }

  // Text -> [{ text, phonemes }], one per sentence (each at most 510 phonemes: one Kokoro call).
  async sentences(text, { voice = this.defaultVoice } = {}) {
    this.#live();
    await Promise.all([this.#voice(voice), this.#g2p(langOf(voice))]);
    return (await this.#engine.call('ttsPhonemize', { tts: this.#id, voice, text: String(text) })).sentences;
  }

  // Phonemes (Kokoro's symbols, as `sotto speak --phonemes`) -> { audio, sampleRate, phonemes, ms }.
  async speakPhonemes(phonemes, { voice = this.defaultVoice, speed = 1 } = {}) {
    this.#live();
    await this.#voice(voice);
    const { audio, ms, pieces } = await this.#engine.call('ttsSpeak', { tts: this.#id, voice, phonemes, speed });
    return { audio, sampleRate: SAMPLE_RATE, phonemes, ms, pieces };
  }

  // Text -> { audio: Float32Array (24 kHz, the sentences one after another), sampleRate, phonemes, sentences }.
  async speak(text, { voice = this.defaultVoice, speed = 1 } = {}) {
    const sentences = await this.sentences(text, { voice });
    const parts = [];
    let ms = 0;
    for (const s of sentences) {
      const r = await this.speakPhonemes(s.phonemes, { voice, speed });
      parts.push(r.audio);
      ms += r.ms;
    }
    const audio = new Float32Array(parts.reduce((n, a) => n + a.length, 0));
    let at = 0;
    for (const a of parts) {
      audio.set(a, at);
      at += a.length;
    }
    return { audio, sampleRate: SAMPLE_RATE, phonemes: sentences.map((s) => s.phonemes).join(' '), sentences, ms };
  }

  // Phonemes -> an async iterable of { audio, sampleRate, ms, last } chunks as the vocoder makes them: the first
  // (firstChunkMs of audio, default 300) once the text side, the decoder and that much of the generator have
  // run, then chunks of twice the length before (the generator, ~85 % of a sentence's work, runs window by
  // window: models/tts/kokoro.h). Played back to back they are the sentence; they differ from speakPhonemes'
  // audio only by the generator's normalisation over each window (log-mel distance within what two correct
  // ONNX Runtime builds differ by). ms: compute time of this chunk (the first's includes the text side); total:
  // the samples of its sentence (its piece) all chunks joined, known from the first chunk on (a player cut short
  // mid-sentence knows what share was heard before the rest exists). One
  // stream at a time per Tts: a new one (or leaving this loop early) abandons the one in progress.
  // leadMs: only the last leadMs of the piece's leading pause (~0.3 s of near-silence) is vocoded and given
  // (sotto_tts_set_stream_lead): the first chunk comes ~25-35 % sooner for a player that trims that silence
  // anyway; the chunks joined are then shorter than speakPhonemes' audio by the rest of the pause, and differ
  // from it slightly just around the cut. null (the default): all of it.
  async *streamPhonemes(phonemes, { voice = this.defaultVoice, speed = 1, firstChunkMs = 300, leadMs = null } = {}) {
    this.#live();
    await this.#voice(voice);
    const id = this.#id;
    const begin = await this.#engine.call('ttsStreamBegin', { tts: id, voice, phonemes, speed, firstChunkMs, leadMs });
    let ms = begin.ms;
    for (;;) {
      const r = await this.#engine.call('ttsStreamNext', { tts: id });
      if (!r.audio) return;
      yield { audio: r.audio, sampleRate: SAMPLE_RATE, ms: ms + r.ms, last: !r.more, total: r.total ?? null };
      ms = 0;
      if (!r.more) return;
    }
  }

  // A string, or an async (or plain) iterable of sentences as they are written (an LLM's reply) -> an async
  // iterable of { audio, sampleRate, text, phonemes, ms }, one per sentence, each computed only when the one
  // before has been taken (a player that wants the next ready while one plays pulls ahead).
  // With { chunks: true } (or { chunks: { firstChunkMs, leadMs } }) each sentence comes as streamPhonemes' chunks
  // instead, the sooner to be heard: { audio, sampleRate, text, phonemes, ms, chunk (0, 1, ...), last (the
  // sentence's final chunk) }; play them back to back.
  // With { trimStart: true } the first sentence's leading silence is cut to 30 ms before its speech
  // (speechStart): the reply is heard ~0.3 s sooner (the agent page's "first sound" is the clip's start, so its
  // timeline does not show this). Later sentences keep theirs: it is the pause between sentences.
  async *stream(input, { voice = this.defaultVoice, speed = 1, chunks = false, trimStart = false } = {}) {
    const pieces = typeof input === 'string' ? [input] : input;
    let trimming = trimStart;  // until the first sound
    for await (const piece of pieces) {
      for (const s of await this.sentences(piece, { voice })) {
        if (!s.phonemes) continue;
        if (chunks) {
          let chunk = 0;
          for await (const c of this.streamPhonemes(s.phonemes, { voice, speed, ...(chunks === true ? {} : chunks) })) {
            let { audio } = c;
            if (trimming) {
              const at = speechStart(audio);
              if (at < 0 && !c.last) continue;  // a chunk of silence only
              audio = audio.subarray(Math.max(0, at));
              trimming = false;
            }
            yield { ...c, audio, text: s.text, phonemes: s.phonemes, chunk: chunk++ };
          }
          continue;
        }
        const r = await this.speakPhonemes(s.phonemes, { voice, speed });
        const audio = trimming ? r.audio.subarray(Math.max(0, speechStart(r.audio))) : r.audio;
        trimming = false;
        yield { audio, sampleRate: SAMPLE_RATE, text: s.text, phonemes: s.phonemes, ms: r.ms };
      }
    }
  }

  async dispose() {
    if (!this.#id) return;
    const id = this.#id;
    this.#id = 0;
    try {
      await this.#engine.call('ttsDispose', { tts: id });
    } finally {
      if (this.#ownEngine) this.#engine.terminate();
    }
  }
}
