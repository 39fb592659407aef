#!/usr/bin/env node
// The wasm engine from the command line, in Node with worker_threads (always the SIMD128 build: Node 20
// mis-executes relaxed integer dot products).
//   node web/cli.mjs selftest [--threads N] [--rows R --cols C] [--wasm PATH]
//   node web/cli.mjs info FILE [--json] [--threads N] [--wasm PATH]
// and the native CLI's language-model commands, with the same flags and the same stdout (cli/generate.cpp,
// cli/tokenize.cpp):
//   node web/cli.mjs tokenize -m FILE [--special] [--no-bos] [--jsonl]     (text on stdin)
//   node web/cli.mjs detokenize -m FILE [--hide-special] [--jsonl]         (JSON ids on stdin)
//   node web/cli.mjs generate -m FILE (-p PROMPT | --prompt-ids 1,2,3) [-n N] [--greedy | --temp T --top-k K
//            --top-p P --min-p P --repeat-penalty R --seed S] [--stop STR] [--ctx N] [--threads T]
//            [--top-logprobs N] [--json] [--backend cpu|webgpu [--attention f16|f32]] [--wasm PATH]
//   node web/cli.mjs chat [-m FILE] [--system TEXT] [-n N] [sampling as generate] [--stop STR] [--ctx N]
//            [--threads T] [--backend cpu|webgpu [--attention f16|f32]] [--wasm PATH]   (a line per turn)
//   node web/cli.mjs bench llm -m FILE [--threads T] [--repeats R] [--depth N] [--backend cpu|webgpu]
// and voice activity detection, the same stdout as `sotto vad` (cli/vad.cpp):
//   node web/cli.mjs vad -m MODEL.onnx AUDIO.wav [--json] [--rate 16000|8000] [--positive P] [--negative P]
//            [--redemption-ms MS] [--pre-pad-ms MS] [--min-speech-ms MS] [--backend cpu|webgpu] [--wasm PATH]
//   node web/cli.mjs phonemize [--lang en-us|en-gb] [--lexicon FILE] [--json] [--sentences] [--wasm PATH]
//            (text on stdin; the same stdout as `sotto phonemize`, cli/phonemize.cpp)
// speech recognition with Moonshine (web/asr.js), the same stdout as `sotto transcribe` (cli/transcribe.cpp):
//   node web/cli.mjs transcribe -m MODEL_DIR AUDIO.wav [--json] [--vad SILERO.onnx] [--backend cpu|webgpu]
// speech synthesis with Kokoro (web/tts.js), the same WAV and stdout as `sotto speak` (cli/speak.cpp); --text
// reads English through our G2P first (one Kokoro call per sentence):
//   node web/cli.mjs speak -m MODEL --voice NAME|FILE (--phonemes P | --text T) [--speed S] -o OUT.wav [--json]
//            [--threads T]
//   node web/cli.mjs gpu-selftest [--n N] [--json]         (the WebGPU device seam from wasm)
//   node web/cli.mjs --help | COMMAND --help
// --backend webgpu runs the language model on npm `webgpu` (Dawn; without a GPU it needs a Vulkan driver:
// LD_LIBRARY_PATH=/usr/lib/chromium VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json).
import { Asr } from './asr.js';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Engine } from './engine.js';
import { G2p } from './g2p.js';
import { Llm } from './llm.js';
import { Tts } from './tts.js';
import { Vad } from './vad.js';
import { floatWav } from './wav.mjs';

function parseArgs(argv) {
  const opts = { positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a.startsWith('--')) opts[a.slice(2)] = argv[++i];
    else opts.positional.push(a);
  }
  return opts;
}

// A name or value from a file as the native `sotto info` shows it (core/error.h quoted()): as it is when it is
// plain text, else quoted with control characters escaped, so a corrupted key prints in full on one line.
function shown(s) {
  if (!/[\x00-\x1f\x7f]/.test(s)) return s;
  const escape = (c) => ({ '\n': '\\n', '\t': '\\t', "'": "\\'", '\\': '\\\\' })[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  return `'${s.replace(/[\x00-\x1f\x7f'\\]/g, escape)}'`;
}

function humanBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) (n /= 1024), u++;
  return `${u ? n.toFixed(1) : n} ${units[u]}`;
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks);
}

function write(text) {
  return new Promise((resolve) => process.stdout.write(text, resolve));
}

class UsageError extends Error {}

// Flags as the native CLI takes them: value flags in VALUES, the rest booleans; anything else is an error.
// A value flag given last, without its value, is kept as null (the range checks below then say what it needs).
// opts.$names[key] is the flag as typed (-n or --n-predict), opts.$command the command, for messages.
function parseFlags(argv, values, booleans, command) {
  const opts = { stop: [], $names: {}, $command: command };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const key = a.replace(/^-+/, '');
    if (booleans.includes(a)) opts[key] = true;
    else if (values.includes(a)) {
      const value = i + 1 < argv.length ? argv[++i] : null;
      if (key === 'stop' && value === null) throw new UsageError(`${command}: ${a} needs a value`);
      if (key === 'stop') opts.stop.push(value);
      else opts[key] = value;
      opts.$names[key] = a;
    } else throw new UsageError(`${command}: unknown option '${a}'`);
  }
  return opts;
}

// Option values checked as the native CLI checks them (cli/options.h), with the same words: a whole number is
// decimal digits only ('3.7', '0x10', '1e3' are refused), a number a finite decimal, each within its range.
const WHOLE = /^-?[0-9]+$/;
const DECIMAL = /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/;

function flagName(opts, key) {
  return opts.$names?.[key] ?? `--${key}`;
}

function wholeFlag(opts, key, fallback, lo, hi) {
  const v = opts[key];
  if (v === undefined) return fallback;
  const what = `a whole number from ${lo} to ${hi}`;
  if (v === null) throw new UsageError(`${opts.$command}: ${flagName(opts, key)} needs ${what}`);
  if (!WHOLE.test(v) || Number(v) < lo || Number(v) > hi) throw new UsageError(`${opts.$command}: ${flagName(opts, key)} must be ${what}, not '${v}'`);
  return Number(v);
}

function numberFlag(opts, key, fallback, lo, hi, aboveLo = false) {
  const v = opts[key];
  if (v === undefined) return fallback;
  const what = aboveLo ? `a number above ${lo} up to ${hi}` : `a number from ${lo} to ${hi}`;
  if (v === null) throw new UsageError(`${opts.$command}: ${flagName(opts, key)} needs ${what}`);
  const n = Number(v);
  if (!DECIMAL.test(v) || !Number.isFinite(n) || (aboveLo ? n <= lo : n < lo) || n > hi)
    throw new UsageError(`${opts.$command}: ${flagName(opts, key)} must be ${what}, not '${v}'`);
  return n;
}

function stringFlag(opts, key) {
  if (opts[key] === null) throw new UsageError(`${opts.$command}: ${flagName(opts, key)} needs a value`);
  return opts[key];
}

// The seed: 0 to 2^64 - 1 (BigInt keeps it exact).
function seedFlag(opts) {
  const v = opts.seed;
  if (v === undefined) return 0;
  const what = 'a whole number from 0 to 18446744073709551615';
  if (v === null) throw new UsageError(`${opts.$command}: --seed needs ${what}`);
  if (!/^[0-9]+$/.test(v) || BigInt(v) >= 2n ** 64n) throw new UsageError(`${opts.$command}: --seed must be ${what}, not '${v}'`);
  return BigInt(v) <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : BigInt(v);
}

// "1,403,407" or the JSON array "[1, 403, 407]" (as `tokenize` prints), as the native CLI takes them.
function parseIds(text) {
  const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const parts = inner.replaceAll(' ', '').split(',');
  if (inner.replaceAll(' ', '') === '') return [];
  if (!parts.every((p) => /^[0-9]+$/.test(p) && Number(p) <= 2147483647)) return null;
  return parts.map(Number);
}

// The sampling and length options generate and chat share (cli/generate.cpp take_llm_option). Filters
// without a temperature change nothing, as greedy is the default: say so, as the native CLI does.
function generationFlags(o, minTokens, defaultTokens) {
  const n = o.n === undefined ? o['n-predict'] : o.n;
  const out = {
    maxTokens: wholeFlag({ ...o, n }, 'n', defaultTokens, minTokens, 1000000),
    greedy: !!o.greedy,
    temperature: numberFlag(o, 'temp', 0, 0, 100),
    topK: wholeFlag(o, 'top-k', 40, 0, 1000000),
    topP: numberFlag(o, 'top-p', 0.95, 0, 1),
    minP: numberFlag(o, 'min-p', 0.05, 0, 1),
    repeatPenalty: numberFlag(o, 'repeat-penalty', 1, 0, 100, true),
    seed: seedFlag(o),
    stop: o.stop,
  };
  const filter = ['top-k', 'top-p', 'min-p'].find((k) => o[k] !== undefined);
  if (filter && (out.greedy || !(out.temperature > 0)))
    process.stderr.write(`sotto: ${o.$command}: note: --${filter} applies only when sampling (--temp T > 0); decoding is greedy\n`);
  return out;
}

// opts: the command's flags; --backend cpu | webgpu picks the device, --wasm another build of the module.
async function loadModel(path, threads, nCtx, tokenizerOnly = false, opts = {}) {
  if (!path) throw new UsageError('no model given (-m FILE)');
  const device = opts.backend ?? 'cpu';
  if (device !== 'cpu' && device !== 'webgpu') throw new UsageError(`bad value for --backend: '${device}' (cpu or webgpu)`);
  const attention = opts.attention ?? 'f16';
  if (attention !== 'f16' && attention !== 'f32') throw new UsageError(`bad value for --attention: '${attention}' (f16 or f32)`);
  if (opts.attention !== undefined && device !== 'webgpu') throw new UsageError('--attention is an option of --backend webgpu');
  return Llm.load(path, { threads, variant: 'simd128', nCtx, tokenizerOnly, device, attention, wasmUrl: opts.wasm });
}

async function runTokenize(args, detokenize) {
  const opts = parseFlags(args, ['-m', '--model'], detokenize ? ['--hide-special', '--jsonl'] : ['--special', '--no-bos', '--jsonl'],
                          detokenize ? 'detokenize' : 'tokenize');
  const llm = await loadModel(opts.m ?? opts.model, 1, 0, true);
  try {
    const input = await readStdin();
    const lines = opts.jsonl ? input.toString('utf8').split('\n').filter((l) => l.length) : [null];
    for (const line of lines) {
      if (!detokenize) {
        const text = line === null ? new Uint8Array(input) : JSON.parse(line);
        await write(`${JSON.stringify(await llm.tokenize(text, { addSpecial: !opts['no-bos'], parseSpecial: !!opts.special }))}\n`);
      } else {
        const ids = JSON.parse(line ?? input.toString('utf8'));
        if (!Array.isArray(ids)) throw new Error('stdin: expected a JSON array of token ids');
        const text = await llm.detokenize(ids, { removeSpecial: false, renderSpecial: !opts['hide-special'] });
        await write(line === null ? text : `${JSON.stringify(text)}\n`);
      }
    }
    return 0;
  } finally {
    await llm.dispose();
  }
}

const GENERATE_VALUES = ['-m', '--model', '-p', '--prompt', '--prompt-ids', '-n', '--n-predict', '--temp', '--top-k', '--top-p',
  '--min-p', '--repeat-penalty', '--seed', '--stop', '--threads', '--ctx', '--top-logprobs', '--backend', '--attention', '--wasm'];

async function runGenerate(args) {
  const o = parseFlags(args, GENERATE_VALUES, ['--json', '--greedy'], 'generate');
  const prompt = o.p === undefined ? o.prompt : o.p;
  if (prompt === null) throw new UsageError(`generate: ${flagName(o, o.p === null ? 'p' : 'prompt')} needs a value`);
  let promptIds = null;
  if (o['prompt-ids'] !== undefined) {
    promptIds = o['prompt-ids'] === null ? null : parseIds(o['prompt-ids']);
    if (!promptIds) throw new UsageError('generate: --prompt-ids needs ids like 1,403,407 or [1,403,407]');
  }
  const threads = wholeFlag(o, 'threads', 4, 1, 256);
  const nCtx = wholeFlag(o, 'ctx', 0, 1, 1 << 20);
  const generation = generationFlags(o, 0, 64);
  const topLogprobs = wholeFlag(o, 'top-logprobs', 0, 0, 1000);
  const model = stringFlag(o, o.m !== undefined ? 'm' : 'model');
  if (!model) throw new UsageError('generate: no model given (-m FILE)');
  if (prompt === undefined && !promptIds) throw new UsageError('generate: no prompt given (-p PROMPT or --prompt-ids)');
  const llm = await loadModel(model, threads, nCtx, false, o);
  try {
    const ids = promptIds ?? (await llm.tokenize(prompt, { addSpecial: true, parseSpecial: false }));
    if (!ids.length) throw new Error('llm: empty prompt (no tokens to start from)');
    const r = await llm.generate(ids, {
      ...generation,
      topLogprobs,
      resultJson: !!o.json,
      prompt: prompt ?? '',
      onToken: o.json ? undefined : (text) => text && process.stdout.write(text),
    });
    if (o.json) {
      await write(`${r.json}\n`);
    } else {
      await write('\n');
      const gpu = llm.info.gpu ? ` (webgpu, attention summing in ${llm.info.gpu.attention})` : '';
      process.stderr.write(`prompt: ${r.nPrompt} tokens in ${r.prefillMs.toFixed(1)} ms; wrote ${r.ids.length} tokens, ` +
                           `${r.decodeTokensPerS.toFixed(1)} tokens/s${gpu}\n`);
    }
    return 0;
  } finally {
    await llm.dispose();
  }
}

// chat: one line of stdin is one user turn, the reply streams to stdout, as `sotto chat` (cli/generate.cpp):
// the same options and defaults (the default chat model from models/, 512 tokens per reply, a 4096-position
// context at most), through llm.chat, which keeps the KV cache across turns.
const CHAT_VALUES = ['-m', '--model', '--system', '-n', '--n-predict', '--temp', '--top-k', '--top-p', '--min-p', '--repeat-penalty',
  '--seed', '--stop', '--threads', '--ctx', '--backend', '--attention', '--wasm'];
const DEFAULT_CHAT_MODEL = 'qwen2.5-coder-0.5b-instruct-q4_k_m.gguf';

async function runChat(args) {
  const o = parseFlags(args, CHAT_VALUES, ['--greedy'], 'chat');
  const threads = wholeFlag(o, 'threads', 4, 1, 256);
  const nCtx = wholeFlag(o, 'ctx', 4096, 1, 1 << 20);
  const generation = generationFlags(o, 1, 512);
  const system = o.system === undefined ? undefined : stringFlag(o, 'system');
  let model = stringFlag(o, o.m !== undefined ? 'm' : 'model');
  if (!model) {
    model = [`models/${DEFAULT_CHAT_MODEL}`, `${fileURLToPath(new URL('../models/', import.meta.url))}${DEFAULT_CHAT_MODEL}`].find((p) => existsSync(p));
    if (!model) throw new Error(`chat: no -m FILE given and the default model models/${DEFAULT_CHAT_MODEL} is not there; fetch it with: bash scripts/get-models.sh`);
    process.stderr.write(`chat: model ${model}\n`);
  }
  const llm = await loadModel(model, threads, -nCtx, false, o);
  try {
    const gpu = llm.info.gpu ? `, webgpu (${llm.info.gpu.adapter ?? 'GPU'})` : '';
    process.stderr.write(`chat format: ${llm.info.chat_format}, context ${llm.info.n_ctx} tokens${gpu}; one line per turn, end with Ctrl-D\n`);
    const messages = system === undefined ? [] : [{ role: 'system', content: system }];
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
    // Ctrl-C during a reply stops the reply (the conversation keeps what was written); at the prompt it ends
    // the chat, as `sotto chat` does.
    let reply = null;
    process.on('SIGINT', () => {
      if (reply) return reply.abort();
      process.stderr.write('\n');
      process.exit(130);
    });
    process.stderr.write('> ');
    for await (const line of lines) {
      if (line.length) {
        messages.push({ role: 'user', content: line });
        reply = new AbortController();
        const r = await llm.chat(messages, { ...generation, signal: reply.signal, onToken: (text) => text && process.stdout.write(text) });
        const stopped = reply.signal.aborted;
        reply = null;
        messages.push(r.choices[0].message);
        await write('\n');
        if (stopped) process.stderr.write('[reply stopped by Ctrl-C; Ctrl-C at the prompt ends the chat]\n');
        const t = r.timings;
        process.stderr.write(`[${t.newPromptTokens} new prompt tokens in ${t.prefillMs.toFixed(0)} ms, ${r.usage.completion_tokens} tokens at ` +
                             `${t.decodeTokensPerS.toFixed(1)} tokens/s, ${t.nPast} of ${llm.info.n_ctx} positions used]\n`);
      }
      process.stderr.write('> ');
    }
    return 0;
  } finally {
    await llm.dispose();
  }
}

// bench llm: prefill of 64 and 256 pseudo-random tokens, then the decode speed of 64 greedy tokens after a
// 16-token prompt; median of repeats. Timings come from the engine (time inside the wasm calls).
async function runBench(args) {
  if (args[0] !== 'llm') throw new UsageError('bench: say what to measure: bench llm -m FILE [--threads T] [--repeats R]');
  const o = parseFlags(args.slice(1), ['-m', '--model', '--threads', '--repeats', '--depth', '--backend', '--wasm'], ['--json'], 'bench llm');
  const threads = wholeFlag(o, 'threads', 4, 1, 256);
  const repeats = wholeFlag(o, 'repeats', 5, 1, 1000);
  const depth = wholeFlag(o, 'depth', 16, 1, 16384);
  const path = o.m ?? o.model;
  // The context holds the prompt, the 64 decoded tokens and one more (llm.bench's decode run).
  const llm = await loadModel(path, threads, Math.max(512, depth + 65), false, o);
  try {
    const r = await llm.bench({ repeats, depth });
    if (o.json) {
      await write(`${JSON.stringify({ model: path, threads, repeats, ...r })}\n`);
      return 0;
    }
    await write(`${path}: ${llm.info.arch}, ${llm.info.n_layer} layers, n_embd ${llm.info.n_embd}, ${threads} threads, wasm ${llm.info.variant}, median of ${repeats}\n` +
                `  prefill  64 tokens: ${r.prefill_64_ms.toFixed(2).padStart(9)} ms  (${(64000 / r.prefill_64_ms).toFixed(1)} tokens/s)\n` +
                `  prefill 256 tokens: ${r.prefill_256_ms.toFixed(2).padStart(9)} ms  (${(256000 / r.prefill_256_ms).toFixed(1)} tokens/s)\n` +
                `  decode 64 tokens after ${depth}: ${r.decode_tokens_per_s.toFixed(1)} tokens/s\n`);
    return 0;
  } finally {
    await llm.dispose();
  }
}

// sotto vad in wasm: the WAV is decoded and resampled by the same C++ code, the JSON written by the C API
// (sotto_vad_clip_json) with the native CLI's number formatting; the text table formatted here as printf does.
async function runVad(args) {
  const values = ['-m', '--model', '--rate', '--positive', '--negative', '--redemption-ms', '--pre-pad-ms', '--min-speech-ms', '--wasm', '--backend'];
  const positional = [];
  const flags = [];
  for (let i = 0; i < args.length; i++) {
    if (values.includes(args[i]) || args[i] === '--json') flags.push(...(args[i] === '--json' || i + 1 >= args.length ? [args[i]] : [args[i], args[++i]]));
    else if (!args[i].startsWith('-') && !positional.length) positional.push(args[i]);
    else throw new UsageError(`vad: unknown argument '${args[i]}'`);
  }
  const o = parseFlags(flags, values, ['--json'], 'vad');
  // The ranges of cli/vad.cpp: probabilities, durations up to ten minutes, the end threshold not above the start.
  const rate = o.rate === undefined ? 16000 : Number(o.rate);
  if (o.rate !== undefined && (o.rate === null || !WHOLE.test(o.rate) || (rate !== 16000 && rate !== 8000))) throw new UsageError('vad: --rate must be 16000 or 8000');
  const MAX_MS = 600000;
  const options = {
    positiveSpeechThreshold: numberFlag(o, 'positive', undefined, 0, 1),
    negativeSpeechThreshold: numberFlag(o, 'negative', undefined, 0, 1),
    redemptionMs: numberFlag(o, 'redemption-ms', undefined, 0, MAX_MS),
    preSpeechPadMs: numberFlag(o, 'pre-pad-ms', undefined, 0, MAX_MS),
    minSpeechMs: numberFlag(o, 'min-speech-ms', undefined, 0, MAX_MS),
  };
  const positive = options.positiveSpeechThreshold ?? 0.5;
  const negative = options.negativeSpeechThreshold ?? 0.35;
  if (Math.fround(negative) > Math.fround(positive))
    throw new UsageError(`vad: --negative (${negative}) must not be above --positive (${positive}): speech would end above the level that starts it`);
  const model = stringFlag(o, o.m !== undefined ? 'm' : 'model');
  if (!model) throw new UsageError('vad: missing -m MODEL.onnx');
  if (!positional.length) throw new UsageError('vad: missing AUDIO.wav');
  const device = o.backend ?? 'cpu';
  if (device !== 'cpu' && device !== 'webgpu') throw new UsageError(`vad: bad value for --backend: '${device}' (cpu or webgpu)`);
  // webgpu: the op layer's GPU backend waits for readbacks through JS Promise Integration, which Node 20 lacks:
  // Vad.load then fails with that reason (the browser's web/vad.js, or the native `sotto vad`, run it).
  const vad = await Vad.load(model, { sampleRate: rate, threads: 1, variant: 'simd128', wasmUrl: o.wasm, device });
  try {
    const samples = await vad.decodeWav(positional[0], { onNotes: (notes) => process.stderr.write(`sotto: vad: warning: ${positional[0]}: ${notes}\n`) });
    const json = await vad.clipJson(samples, options);
    const t0 = performance.now();
    const { probs } = await vad.processClip(samples);
    const ms = performance.now() - t0;
    if (o.json) {
      await write(`${json}\n`);
    } else {
      const { frame_ms: frameMs, segments } = JSON.parse(json);
      const frameS = frameMs / 1000;
      let out = 'frame  time_s  prob\n';
      probs.forEach((p, i) => (out += `${String(i).padStart(5)} ${(i * frameS).toFixed(3).padStart(7)}  ${p.toFixed(6)}\n`));
      out += `segments: ${segments.length}\n`;
      for (const s of segments) out += `  ${s.start_s.toFixed(3).padStart(8)} s .. ${s.end_s.toFixed(3).padStart(8)} s\n`;
      await write(out);
    }
    if (probs.length) {
      const audioS = samples.length / vad.sampleRate;
      process.stderr.write(`vad: ${probs.length} frames in ${ms.toFixed(1)} ms (${(ms / probs.length).toFixed(4)} ms per frame, ` +
                           `real-time factor ${(audioS > 0 ? ms / 1000 / audioS : 0).toFixed(5)})\n`);
    }
    return 0;
  } finally {
    await vad.dispose();
  }
}

// phonemize: English text on stdin -> Kokoro phonemes, as `sotto phonemize` prints them.
async function runPhonemize(args) {
  const o = parseFlags(args, ['--lang', '--lexicon', '--wasm'], ['--json', '--sentences'], 'phonemize');
  const lang = o.lang ?? 'en-us';
  if (lang !== 'en-us' && lang !== 'en-gb') throw new UsageError(`--lang must be en-us or en-gb, not '${lang}'`);
  const lexicon = o.lexicon ?? `models/g2p-${lang}.bin`;
  const g2p = await G2p.load(lexicon, { variant: 'simd128', wasmUrl: o.wasm });
  try {
    if (g2p.lang !== lang) throw new Error(`${lexicon} is the ${g2p.lang} lexicon, not ${lang}`);
    const text = new Uint8Array(await readStdin());  // bytes as they came, as the native CLI reads them
    if (o.json) await write(`{"lang":${JSON.stringify(lang)},${g2p.json(text).slice(1)}\n`);
    else if (o.sentences) await write(g2p.sentences(text).map((s) => `${s.phonemes}\n`).join(''));
    else await write(`${g2p.phonemize(text)}\n`);
    return 0;
  } finally {
    g2p.dispose();
  }
}

// sotto transcribe in wasm (web/asr.js): the WAV decoded and resampled by the same C++ code, the JSON written by
// the C API (sotto_asr_transcribe_json) as the native CLI writes it. One thread.
async function runTranscribe(args) {
  const values = ['-m', '--model', '--vad', '--wasm', '--threads', '--backend'];
  const positional = [];
  const o = { json: false };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--json') o.json = true;
    else if (values.includes(args[i]) && i + 1 < args.length) o[args[i].replace(/^-+/, '')] = args[++i];
    else if (!args[i].startsWith('-') && !positional.length) positional.push(args[i]);
    else throw new UsageError(`unknown argument '${args[i]}'`);
  }
  const model = o.m ?? o.model;
  if (!model) throw new UsageError('missing -m MODEL_DIR (a directory with encoder_model.ort, ...)');
  if (!positional.length) throw new UsageError('missing AUDIO.wav');
  const { existsSync } = await import('node:fs');
  if (!existsSync(`${model}/encoder_model.ort`)) throw new Error(`${model} is not a Moonshine model directory (no encoder_model.ort)`);
  const device = o.backend ?? 'cpu';
  if (device !== 'cpu' && device !== 'webgpu') throw new UsageError(`bad value for --backend: '${device}' (cpu or webgpu)`);
  // webgpu: as for vad, Node 20 lacks the JS Promise Integration the GPU's readbacks need, and Asr.load says so.
  const asr = await Asr.load(model, { variant: 'simd128', wasmUrl: o.wasm, vad: o.vad, device });
  try {
    const samples = await asr.decodeWav(positional[0]);
    if (samples.length === 0) throw new Error(`${positional[0]}: the file holds no samples`);
    const r = await asr.transcribe(samples);
    await write(o.json ? `${JSON.stringify(r)}\n` : `${r.text}\n`);
    if (!o.json)
      process.stderr.write(`transcribe: ${r.audio_s.toFixed(2)} s of audio, ${r.segments.length} window(s), ${r.tokens.length} tokens: ` +
                           `encode ${r.encode_ms.toFixed(1)} ms, decode ${r.decode_ms.toFixed(1)} ms\n`);
    return 0;
  } finally {
    asr.dispose();
  }
}

// speak: phonemes (or English text) -> a 24 kHz float32 WAV, on the engine worker's pool. compute_ms counts
// synthesis only (not reading the model), as the native CLI does.
async function runSpeak(args) {
  const o = parseFlags(args, ['-m', '--model', '--voice', '--phonemes', '--text', '-o', '--output', '--speed', '--threads', '--wasm'], ['--json'], 'speak');
  const model = o.m ?? o.model;
  const out = o.o ?? o.output;
  if (!model) throw new UsageError('missing -m MODEL (kokoro-v1.0.int8.onnx)');
  if (!o.voice) throw new UsageError('missing --voice NAME|FILE');
  if (!out) throw new UsageError('missing -o OUT.wav');
  if (o.phonemes === undefined && o.text === undefined) throw new UsageError('missing --phonemes P (or --text T)');
  const speed = numberFlag(o, 'speed', 1, 0.25, 4);
  const threads = wholeFlag(o, 'threads', 2, 1, 256);
  const tts = await Tts.load(model, { voice: o.voice, threads, variant: 'simd128', wasmUrl: o.wasm });
  try {
    const t0 = performance.now();
    const pieces = o.text !== undefined ? await tts.sentences(o.text, { voice: o.voice }) : [{ phonemes: o.phonemes }];
    const parts = [];
    let firstAudioMs = 0;
    let calls = 0;
    for (const p of pieces) {
      const r = await tts.speakPhonemes(p.phonemes, { voice: o.voice, speed });
      parts.push(r.audio);
      calls += r.pieces;
      if (!firstAudioMs) firstAudioMs = performance.now() - t0;
    }
    const computeMs = performance.now() - t0;
    const samples = new Float32Array(parts.reduce((n, a) => n + a.length, 0));
    parts.reduce((at, a) => (samples.set(a, at), at + a.length), 0);
    const { writeFile } = await import('node:fs/promises');
    await writeFile(out, floatWav(samples, 24000));
    const audioS = samples.length / 24000;
    const phonemes = pieces.reduce((n, p) => n + [...p.phonemes].length, 0);
    if (o.json) {
      await write(`${JSON.stringify({ samples: samples.length, sample_rate: 24000, audio_s: audioS, compute_ms: computeMs, first_audio_ms: firstAudioMs, phonemes, sentences: calls, threads: tts.threads })}\n`);
    } else {
      await write(`${out}: ${audioS.toFixed(3)} s of audio (${samples.length} samples at 24 kHz) in ${computeMs.toFixed(0)} ms, ` +
                  `${(computeMs > 0 ? (audioS * 1000) / computeMs : 0).toFixed(2)}x real time, ${calls} piece(s)\n`);
    }
    return 0;
  } finally {
    await tts.dispose();
  }
}

// gpu-selftest: the WebGPU device seam from wasm (npm `webgpu`, Dawn; on a machine without a GPU it needs
// LD_LIBRARY_PATH=/usr/lib/chromium VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json).
async function runGpuSelftest(args) {
  const o = parseFlags(args, ['--n', '--seed', '--wasm'], ['--json'], 'gpu-selftest');
  const n = wholeFlag(o, 'n', 4096, 1, 1 << 24);
  const engine = await Engine.create({ threads: 1, variant: 'simd128', wasmUrl: o.wasm });
  try {
    const adapter = await engine.gpu();
    const r = await engine.gpuSelftest({ n, seed: wholeFlag(o, 'seed', 0, 0, 2 ** 32 - 1) });
    r.timings = (await engine.gpuTimings()).timings;
    if (o.json) await write(`${JSON.stringify(r)}\n`);
    else if (r.status !== 'ok') await write(`gpu selftest FAILED: ${r.message}\n`);
    else await write(`gpu selftest ${r.passed ? 'passed' : 'FAILED'}: ${adapter.description}, n ${r.n}, ` +
                     `max |gpu - cpu| ${r.maxAbsError} (tolerance ${r.tolerance}), ${r.ms.toFixed(2)} ms\n`);
    return r.passed ? 0 : 1;
  } finally {
    engine.terminate();
  }
}

// Each command's usage, for --help (the flags mean what the native CLI's `sotto COMMAND --help` says).
const USAGE = {
  selftest: 'selftest [--threads N] [--rows R --cols C] [--wasm PATH]',
  info: 'info FILE [--json] [--threads N] [--wasm PATH]',
  tokenize: 'tokenize -m FILE [--special] [--no-bos] [--jsonl]     (text on stdin)',
  detokenize: 'detokenize -m FILE [--hide-special] [--jsonl]         (JSON ids on stdin)',
  generate:
    'generate -m FILE (-p PROMPT | --prompt-ids 1,2,3) [-n N] [--greedy | --temp T --top-k K --top-p P\n' +
    '           --min-p P --repeat-penalty R --seed S] [--stop STR] [--ctx N] [--threads T] [--top-logprobs N]\n' +
    '           [--json] [--backend cpu|webgpu [--attention f16|f32]] [--wasm PATH]',
  chat:
    'chat [-m FILE] [--system TEXT] [-n N] [--greedy | --temp T --top-k K --top-p P --min-p P --repeat-penalty R\n' +
    '           --seed S] [--stop STR] [--ctx N] [--threads T] [--backend cpu|webgpu [--attention f16|f32]] [--wasm PATH]\n' +
    '           (one line of stdin per turn)',
  bench: 'bench llm -m FILE [--threads T] [--repeats R] [--depth N] [--backend cpu|webgpu]',
  vad:
    'vad -m MODEL.onnx AUDIO.wav [--json] [--rate 16000|8000] [--positive P] [--negative P]\n' +
    '           [--redemption-ms MS] [--pre-pad-ms MS] [--min-speech-ms MS] [--backend cpu|webgpu] [--wasm PATH]',
  phonemize: 'phonemize [--lang en-us|en-gb] [--lexicon FILE] [--json] [--sentences] [--wasm PATH]   (text on stdin)',
  transcribe: 'transcribe -m MODEL_DIR AUDIO.wav [--json] [--vad SILERO.onnx] [--backend cpu|webgpu] [--wasm PATH]',
  speak: 'speak -m MODEL --voice NAME|FILE (--phonemes P | --text T) [--speed S] -o OUT.wav [--json] [--threads T] [--wasm PATH]',
  'gpu-selftest': 'gpu-selftest [--n N] [--json]',
};
const isHelp = (a) => a === '--help' || a === '-h';

function printUsage(out, command) {
  const lines = command ? [USAGE[command]] : Object.values(USAGE);
  out.write(lines.map((u) => `usage: node web/cli.mjs ${u}\n`).join(''));
  if (!command) out.write('the wasm engine (SIMD128 build) with the native CLI\'s commands; see `sotto COMMAND --help`\n');
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  if (command === undefined || isHelp(command) || command === 'help') {
    printUsage(command === undefined ? process.stderr : process.stdout);
    return command === undefined ? 2 : 0;
  }
  // Right after the command (or bench's noun), as the native CLI: a prompt "-h" elsewhere stays a prompt.
  if (USAGE[command] && (isHelp(rest[0]) || (command === 'bench' && rest[0] === 'llm' && isHelp(rest[1])))) {
    printUsage(process.stdout, command);
    return 0;
  }
  if (command === 'gpu-selftest') return runGpuSelftest(rest);
  if (command === 'tokenize' || command === 'detokenize') return runTokenize(rest, command === 'detokenize');
  if (command === 'generate') return runGenerate(rest);
  if (command === 'chat') return runChat(rest);
  if (command === 'bench') return runBench(rest);
  if (command === 'vad') return runVad(rest);
  if (command === 'phonemize') return runPhonemize(rest);
  if (command === 'transcribe') return runTranscribe(rest);
  if (command === 'speak') return runSpeak(rest);
  const opts = parseArgs(rest);
  const threads = opts.threads ? Number(opts.threads) : command === 'info' ? 1 : 4;
  if (command !== 'selftest' && command !== 'info') {
    console.error(`sotto: unknown command '${command}'\n`);
    printUsage(process.stderr);
    return 2;
  }
  const engine = await Engine.create({ threads, variant: 'simd128', wasmUrl: opts.wasm });
  try {
    if (command === 'selftest') {
      const r = await engine.selftest({ rows: Number(opts.rows ?? 512), cols: Number(opts.cols ?? 1024) });
      console.log(
        `selftest ${r.passed ? 'passed' : 'FAILED'}: ${engine.info.variant}, ${r.threads} threads, ` +
          `${r.rows}x${r.cols}, max error ${r.maxAbsError} (tolerance ${r.tolerance}), ` +
          `checksum ${r.checksum.toString(16)} vs reference ${r.checksumRef.toString(16)}, ${r.ms.toFixed(2)} ms`,
      );
      return r.passed ? 0 : 1;
    }
    const file = opts.positional[0];
    if (!file) throw new Error('info: which file?');
    const d = await engine.describe(file);
    if (opts.json) {
      console.log(JSON.stringify(d));
      return d.ok ? 0 : 1;
    }
    if (!d.ok) {
      console.error(`sotto: ${d.error}`);
      return 1;
    }
    console.log(`${file}: ${d.format}, ${humanBytes(d.bytes)}, ${d.metadata.length} metadata, ${d.tensors.length} tensors`);
    for (const m of d.metadata) console.log(`  ${shown(m.key)} (${m.type}) = ${shown(m.text)}`);
    for (const t of d.tensors) console.log(`  ${shown(t.name)}  ${t.dtype}  [${t.shape.join(', ')}]  ${humanBytes(t.bytes)}`);
    return 0;
  } finally {
    engine.terminate();
  }
}

{
  main().then(
    (code) => process.exit(code),
    (e) => {
      // One line, as the native CLI: "sotto: <message>"; exit 2 for bad usage.
      console.error(`sotto: ${String(e?.message ?? e).replace(/^sotto: /, '').split('\n')[0]}`);
      process.exit(e instanceof UsageError ? 2 : 1);
    },
  );
}
