#!/usr/bin/env node
// Voice-agent latency in headless Chromium: each clip is the page's fake microphone (played once, in real
// time), and the page's own timeline gives, per turn, end of speech -> transcript -> first token -> first
// sentence -> first sound. Voice to voice (end of speech in the clip to the first audible sample) exists only
// once the page has speech recognition and synthesis (web/asr.js, web/tts.js); until then this prints what
// exists: the VAD's endpoint delay per utterance and, with --ask, the language model's stages for a typed
// question asked after the clip (so the numbers are not empty while ASR is missing; they are marked typed).
//
// --standins swaps in tests/web/agent_standins.mjs for recognition and synthesis (a fixed transcript, a tone):
// then voice to voice is the page's own share (endpoint wait, plumbing, playback) plus the language model's
// time to a first sentence, with the models' shares missing. Its numbers are labelled as such.
//
// --first N: the reply's first spoken piece ends after at most N words (sooner at a comma; 0: whole sentences;
// the page's default otherwise); --llm-threads N: the language model's threads (default: one per core);
// --yield 0: the language model keeps writing while the first piece is synthesised (the page's default pauses it);
// --asr-threads N: speech recognition's threads (default: one per core).
// --speculate MS: the pause after which the page transcribes a segment before its endpoint (0: off; the page's
// default otherwise); --trim 0: the voice's clips keep the silence Kokoro puts around them (the first sound is
// the first audible sample either way); --ttschunks 0|1 (or --stream): the voice vocoded and played whole piece by
// piece, or in chunks (the page's default), the first of --first-chunk MS of audio after Kokoro's leading
// pause; --ttslead MS: how much of each piece's leading pause is vocoded (-1: all of it; the page's default
// otherwise); --endpoint MS: the pause that ends a turn (the page's default otherwise); --prefill 0: no speculative prefill (the page
// prefills the speculative transcript's turn during the pause by default).
// NOANIM=1 (environment): the page as with prefers-reduced-motion (no motion at all, not even the loading pulse).
// --json also gives per turn when the voice's first audio reached the page (first_audio_ms) and its synthesis
// time in the worker (first_audio_compute_ms).
// Without clips: the eight short spoken questions of bench/data/questions/ (bench/make_questions.mjs: our
// Kokoro, eight voices); tests/fixtures/audio/beckett.wav and sample.wav are longer (10-12 s, several sentences).
//
//   node bench/agent_latency.mjs [--profile cpu|gpu|auto] [--json] [--model URL] [--tokens N] [--ask TEXT] [--standins] [--first N] [--llm-threads N] [--yield 0|1] [--asr-threads N] [--speculate MS] [--trim 0|1] [--ttschunks 0|1] [--first-chunk MS] [--ttslead MS] [--endpoint MS] [--prefill 0|1] [CLIP.wav...]
//   (npm run bench:agent -- ...; builds build/agent first; the models are cached across clips in one profile dir)
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

import { buildAgent } from '../web/agent/build.mjs';
import { startServer } from '../web/serve.mjs';

const { values: opts, positionals: clips } = parseArgs({
  allowPositionals: true,
  options: {
    profile: { type: 'string', default: 'cpu' }, json: { type: 'boolean', default: false }, model: { type: 'string' },
    tokens: { type: 'string', default: '48' }, ask: { type: 'string' }, standins: { type: 'boolean', default: false },
    first: { type: 'string' }, 'llm-threads': { type: 'string' }, yield: { type: 'string' }, 'asr-threads': { type: 'string' },
    speculate: { type: 'string' }, trim: { type: 'string' }, stream: { type: 'string' }, ttschunks: { type: 'string' }, endpoint: { type: 'string' }, 'first-chunk': { type: 'string' }, ttslead: { type: 'string' }, prefill: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  },
});
if (opts.help) {
  console.log('usage: node bench/agent_latency.mjs [--profile cpu|gpu|auto] [--json] [--model URL] [--tokens N] [--ask TEXT] [--standins] [--first N] [--llm-threads N] [--yield 0|1] [--asr-threads N] [--speculate MS] [--trim 0|1] [--ttschunks 0|1] [--first-chunk MS] [--ttslead MS] [--endpoint MS] [--prefill 0|1] [CLIP.wav...]');
  process.exit(0);
}
if (!clips.length) {
  const dir = fileURLToPath(new URL('data/questions/', import.meta.url));
  clips.push(...readdirSync(dir).filter((f) => f.endsWith('.wav')).sort().map((f) => join(dir, f)));
}
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const GPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=vulkan'];

function quantile(values, q) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  return v[Math.min(v.length - 1, Math.floor(q * v.length))];
}

async function wavSeconds(path) {
  const { readFileSync } = await import('node:fs');
  const b = readFileSync(path);
  // RIFF: the byte rate at 28, then the chunks from 12; the 'data' chunk's size is the audio.
  const byteRate = b.readUInt32LE(28);
  for (let o = 12; o + 8 <= b.length; o += 8 + b.readUInt32LE(o + 4)) if (b.toString('ascii', o, o + 4) === 'data') return b.readUInt32LE(o + 4) / byteRate;
  return 0;
}

async function runClip(clip, base, profileDir) {
  const seconds = await wavSeconds(clip);
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM, headless: true, timeout: 60000,
    args: ['--no-sandbox', '--autoplay-policy=no-user-gesture-required', '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${clip}%noloop`, ...(opts.profile === 'cpu' ? [] : GPU_ARGS)],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const q = new URLSearchParams({ profile: opts.profile, tokens: opts.tokens });
    if (opts.first !== undefined) q.set('first', opts.first);
    if (opts['llm-threads'] !== undefined) q.set('llmThreads', opts['llm-threads']);
    if (opts.yield !== undefined) q.set('yield', opts.yield);
    if (opts['asr-threads'] !== undefined) q.set('asrThreads', opts['asr-threads']);
    if (opts.speculate !== undefined) q.set('speculate', opts.speculate);
    if (opts.trim !== undefined) q.set('trim', opts.trim);
    if (opts.stream !== undefined) q.set('stream', opts.stream);
    if (opts.ttschunks !== undefined) q.set('ttschunks', opts.ttschunks);
    if (opts.endpoint !== undefined) q.set('endpoint', opts.endpoint);
    if (opts['first-chunk'] !== undefined) q.set('firstChunk', opts['first-chunk']);
    if (opts.ttslead !== undefined) q.set('ttslead', opts.ttslead);
    if (opts.prefill !== undefined) q.set('prefill', opts.prefill);
    // The stand-in build lives at /build/agent-standins/, where models/ beside it is not served: name the file.
    const model = opts.model ?? (opts.standins ? '/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf' : null);
    if (model) q.set('model', model);
    // The microphone starts after loading, so the clip's audio (which starts when capture opens) is heard whole.
    if (process.env.NOANIM) await page.emulateMedia({ reducedMotion: 'reduce' });
    await page.goto(`${base}${pagePath}?${q}`);
    await page.waitForFunction(() => window.sottoAgent?.ready || window.sottoAgent?.status === 'error', null, { timeout: 600000 });
    const errors = await page.evaluate(() => window.sottoAgent.errors);
    if (errors.length) throw new Error(errors.join('; '));
    await page.evaluate(() => window.sottoAgent.toggleMic());
    // The clip plus the endpoint wait, then the turns still running.
    await page.waitForTimeout(seconds * 1000 + 1500);
    // Synthesis of a whole reply on one wasm thread of a loaded 2-core machine can take minutes.
    await page.waitForFunction(() => window.sottoAgent.segments.length <= window.sottoAgent.turns.length, null, { timeout: 420000 });
    if (opts.ask) await page.evaluate((t) => window.sottoAgent.ask(t), opts.ask);
    const agent = await page.evaluate(() => ({ asrThreads: window.sottoAgent.asrThreads, turns: window.sottoAgent.turns, segments: window.sottoAgent.segments, speech: window.sottoAgent.speech, speechWorkers: window.sottoAgent.speechWorkers, profile: window.sottoAgent.profile }));
    // The clip's turn: the first spoken one that ran to its end (a clip of several utterances interrupts its own
    // earlier turns), else the first spoken one.
    const spoken = agent.turns.filter((t) => t.source === 'voice');
    const voice = spoken.find((t) => t.user && !t.cancelled) ?? spoken.find((t) => t.user) ?? spoken[0] ?? null;
    const typed = agent.turns.find((t) => t.source === 'typed') ?? null;
    return {
      clip, seconds, device: agent.profile?.device, asr_threads: agent.asrThreads ?? null, speech: agent.speech, segments: agent.segments.length,
      transcript: voice?.user ?? null, reply: voice?.reply ?? null,
      voice_to_voice_ms: voice?.stages.first_sound_ms ?? null,
      stages: voice?.stages ?? {},
      // The page's thread: the longest it went without running a 50 ms timer during the turn (ASR or TTS on it
      // blocks it for seconds; in their workers only the page's own work remains).
      prefill_ms: voice?.prefillMs === null || voice?.prefillMs === undefined ? null : Math.round(voice.prefillMs), reused_cache: voice?.reusedCache ?? null,
      first_piece: voice?.firstPiece ?? null, speculative_asr: voice?.speculativeAsr ?? null, speculative_prefill: voice?.speculativePrefill ?? null, writing_paused_ms: voice?.writingPausedMs ?? null, longest_stall_ms: voice?.longestStallMs ?? null, voice_gap_ms: voice?.voiceGapMs ?? null, token_gaps_ms: voice?.tokenGapsMs ?? null, asr_done_ms: voice?.asrDoneMs ?? null, prefill_start_ms: voice?.prefillStartMs ?? null, first_audio_ms: voice?.firstAudioMs ?? null, first_audio_compute_ms: voice?.firstAudioComputeMs ?? null, decode_tokens_per_s: voice?.decodeTokensPerS ?? null, speech_workers: agent.speechWorkers ?? null,
      typed: typed && { question: typed.user, reply: typed.reply, stages: typed.stages, decode_tokens_per_s: typed.decodeTokensPerS },
    };
  } finally {
    await context.close();
  }
}

const pagePath = opts.standins ? 'build/agent-standins/' : 'agent/';
if (opts.standins) {
  const standins = fileURLToPath(new URL('../tests/web/agent_standins.mjs', import.meta.url));
  await buildAgent(fileURLToPath(new URL('../build/agent-standins', import.meta.url)), { speech: { asr: standins, tts: standins } });
} else await buildAgent();
const { server, url: base } = await startServer(0);
const profileDir = mkdtempSync(join(tmpdir(), 'sotto-agent-bench-'));
const turns = [];
// The machine's load, before and after: these timings are only comparable within a run on a shared machine.
const load = { cpus: cpus().length, before: loadavg()[0] };
try {
  for (const clip of clips) {
    const t = await runClip(resolve(clip), base, profileDir);
    turns.push(t);
    if (!opts.json) {
      const st = Object.entries(t.stages).map(([k, v]) => `${k} ${v}`).join(', ');
      console.log(`${clip}: ${t.seconds.toFixed(1)} s, ${t.segments} segment(s) on ${t.device}; transcript ${t.transcript === null ? '(no speech recognition in this build)' : JSON.stringify(t.transcript)}`);
      console.log(`  reply ${t.reply === null ? '-' : JSON.stringify(t.reply)}; voice to voice ${t.voice_to_voice_ms ?? '- (needs speech recognition and synthesis)'}; stages (ms from end of speech): ${st || '-'}`);
      console.log(`  first piece spoken ${JSON.stringify(t.first_piece)}; writing paused ${t.writing_paused_ms ?? '-'} ms; prefill ${t.prefill_ms ?? '-'} ms (cache reused: ${t.reused_cache}); longest stall of the page's thread ${t.longest_stall_ms ?? '-'} ms; gaps in the voice ${t.voice_gap_ms ?? '-'} ms; recognised during the pause: ${t.speculative_asr}; prefilled during it: ${t.speculative_prefill}; speech in workers ${JSON.stringify(t.speech_workers)}`);
      if (t.typed) console.log(`  typed ${JSON.stringify(t.typed.question)}: ${Object.entries(t.typed.stages).map(([k, v]) => `${k} ${v}`).join(', ')}; ${t.typed.decode_tokens_per_s?.toFixed(1)} tokens/s; ${JSON.stringify(t.typed.reply)}`);
    }
  }
} finally {
  server.close();
  rmSync(profileDir, { recursive: true, force: true });
}

load.after = loadavg()[0];
const v2v = turns.map((t) => t.voice_to_voice_ms);
const summary = { median_ms: quantile(v2v, 0.5), p90_ms: quantile(v2v, 0.9) };
const stageNames = [...new Set(turns.flatMap((t) => Object.keys(t.stages)))];
const stages = Object.fromEntries(stageNames.map((k) => [k, { median: quantile(turns.map((t) => t.stages[k]), 0.5), p90: quantile(turns.map((t) => t.stages[k]), 0.9) }]));
const typedNames = [...new Set(turns.flatMap((t) => Object.keys(t.typed?.stages ?? {})))];
const typed = Object.fromEntries(typedNames.map((k) => [k, { median: quantile(turns.map((t) => t.typed?.stages[k]), 0.5), p90: quantile(turns.map((t) => t.typed?.stages[k]), 0.9) }]));
const note = opts.standins ? 'stand-ins for recognition and synthesis (fixed transcript, tone): the page and the language model only' : null;
if (opts.json) {
  console.log(JSON.stringify({ turns, ...summary, stages, typed_stages: typed, load, ...(note ? { note } : {}) }));
} else {
  if (note) console.log(`(${note})`);
  console.log(`load average ${load.before.toFixed(1)} before, ${load.after.toFixed(1)} after, on ${load.cpus} CPUs`);
  console.log(`voice to voice: median ${summary.median_ms ?? '-'} ms, p90 ${summary.p90_ms ?? '-'} ms${summary.median_ms !== null ? '' : opts.standins ? ' (no turn reached a first sound)' : ' (not measurable until web/asr.js and web/tts.js exist)'}`);
  for (const [k, v] of Object.entries(stages)) console.log(`  ${k}: median ${v.median} ms, p90 ${v.p90} ms`);
  for (const [k, v] of Object.entries(typed)) console.log(`  typed ${k}: median ${v.median} ms, p90 ${v.p90} ms`);
}
