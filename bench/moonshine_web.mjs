// Moonshine base in the browser: sotto's wasm (web/asr.js, speech worker) against onnxruntime-web 1.30 (wasm
// backend) on the same .ort files (models/moonshine-base-en), in headless Chromium, the same samples and thread
// count, in one page per thread count. Clips: beckett.wav (10 s) and its first --short seconds (default 4). Each
// engine gets a warm-up run per clip, then --rounds interleaved rounds (the order alternates), medians.
// ORT's greedy loop is tests/web/moonshine_ort.mjs's (the Moonshine tests' reference), imported into the page:
// BOS 1, EOS 2, at most floor(seconds * 6.5) + 1 tokens, the merged decoder's use_cache_branch false on the first
// step and true after, the first step's cross-attention keys/values kept. Every transcript (token ids) must equal
// ours, or the bench reports nothing. ours encode/decode: the engine's encode_ms / decode_ms; total: wall time of
// asr.transcribe() (worker messaging included). ORT: timed around session.run.
//
//   node bench/moonshine_web.mjs [--threads 1,2] [--rounds 3] [--short 4] [--variant relaxed|simd128] [--out FILE.md]
//
// SOTTO_WASM_DIR: a build folder holding wasm-relaxed/ and wasm-simd128/ (default build/). On a shared machine
// only the ratios, interleaved, say anything; the load average is printed.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';

import { CHROMIUM, CHROMIUM_ARGS, openBenchPage, wasmDir } from './bench_page.mjs';
import { median } from './report.mjs';

const repo = resolve(dirname(new URL(import.meta.url).pathname), '..');
const MODEL = 'models/moonshine-base-en';

function parseArgs(argv) {
  const o = { threads: [1, 2], rounds: 3, short: 4, variant: 'relaxed', out: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[++i];
    if (a === '--threads') o.threads = v.split(',').map(Number);
    else if (a === '--rounds') o.rounds = Number(v);
    else if (a === '--short') o.short = Number(v);
    else if (a === '--variant') o.variant = v;
    else if (a === '--out') o.out = v;
    else throw new Error(`unknown option ${a}`);
  }
  if (!o.threads.every((t) => t >= 1) || !(o.rounds >= 1) || !(o.short > 0)) throw new Error('--threads, --rounds, --short must be positive');
  if (!['relaxed', 'simd128'].includes(o.variant)) throw new Error('--variant: relaxed or simd128');
  return o;
}

// In the page: one thread count, both clips, both engines.
async function pageRun({ threads, rounds, short, variant, model }) {
  const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.proxy = false;
  const { Asr } = await import('/web/asr.js');
  const { ortGreedy } = await import('/tests/web/moonshine_ort.mjs');
  const asr = await Asr.load(`/${model}`, { threads, variant });
  const full = await asr.decodeWav('/fixtures/audio/beckett.wav');
  const clips = [['beckett.wav', full], [`beckett.wav, first ${short} s`, full.slice(0, Math.round(short * 16000))]];

  const options = { executionProviders: ['wasm'], intraOpNumThreads: threads, interOpNumThreads: 1 };
  const encoder = await ort.InferenceSession.create(`/${model}/encoder_model.ort`, options);
  const decoder = await ort.InferenceSession.create(`/${model}/decoder_model_merged.ort`, options);
  async function ortTranscribe(samples) {
    const r = await ortGreedy(ort, encoder, decoder, samples);
    return { ...r, totalMs: r.encodeMs + r.decodeMs };
  }
  async function oursTranscribe(samples) {
    const t0 = performance.now();
    const x = await asr.transcribe(samples);
    return { tokens: x.tokens, text: x.text, encodeMs: x.encode_ms, decodeMs: x.decode_ms, totalMs: performance.now() - t0 };
  }

  const result = { crossOriginIsolated, poolThreads: asr.threads, clips: [] };
  for (const [name, samples] of clips) {
    const c = { name, audioS: samples.length / 16000, ours: [], theirs: [] };
    c.oursWarm = await oursTranscribe(samples);
    c.theirsWarm = await ortTranscribe(samples);
    console.log(`${threads} thread(s), ${name}: warm-up done`);
    for (let r = 0; r < rounds; r++) {
      if (r % 2) { c.theirs.push(await ortTranscribe(samples)); c.ours.push(await oursTranscribe(samples)); }
      else { c.ours.push(await oursTranscribe(samples)); c.theirs.push(await ortTranscribe(samples)); }
    }
    result.clips.push(c);
  }
  await encoder.release();
  await decoder.release();
  await asr.dispose?.();
  return result;
}

const o = parseArgs(process.argv.slice(2));
for (const f of ['encoder_model.ort', 'decoder_model_merged.ort', 'tokenizer.bin'])
  if (!existsSync(join(repo, MODEL, f))) throw new Error(`missing ${MODEL}/${f} (bash scripts/get-models.sh moonshine)`);
if (!existsSync(join(wasmDir, `wasm-${o.variant}`, 'sotto.wasm'))) throw new Error(`missing ${wasmDir}/wasm-${o.variant}/sotto.wasm`);
const load0 = loadavg().map((x) => x.toFixed(2)).join(' ');
const { startServer } = await import('../web/serve.mjs');
const { chromium } = await import('playwright-core');
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
const runs = [];
try {
  for (const threads of o.threads) {
    const { page, crashed } = await openBenchPage(browser, url);
    const r = await Promise.race([crashed, page.evaluate(pageRun, { threads, rounds: o.rounds, short: o.short, variant: o.variant, model: MODEL })]);
    if (!r.crossOriginIsolated) throw new Error('the page is not cross-origin isolated: no threads');
    if (r.poolThreads !== threads) throw new Error(`asked for ${threads} thread(s), web/asr.js runs ${r.poolThreads}`);
    runs.push({ threads, ...r });
    await page.close();
  }
} finally {
  await browser.close();
  server.close();
}

// Transcripts first: any difference and nothing is reported.
for (const run of runs)
  for (const c of run.clips) {
    const want = JSON.stringify(c.oursWarm.tokens);
    for (const x of [c.theirsWarm, ...c.ours, ...c.theirs])
      if (JSON.stringify(x.tokens) !== want)
        throw new Error(`${run.threads} thread(s), ${c.name}: tokens differ: ours ${want} vs ${JSON.stringify(x.tokens)}`);
  }

const ortVersion = JSON.parse(readFileSync(join(repo, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version;
const f = (x) => x.toFixed(0);
const lines = [];
const say = (s = '') => { lines.push(s); console.log(s); };
say(`# Moonshine base in headless Chromium: sotto wasm (${o.variant}) vs onnxruntime-web ${ortVersion} (wasm) (${new Date().toISOString().slice(0, 10)})`);
say();
say(`Same .ort files (${MODEL}), same samples (beckett.wav decoded by our engine; the short clip is its first ${o.short} s), ` +
    `same thread count (sotto: web/asr.js speech worker with a pool of T threads; ORT: numThreads T, proxy off). ` +
    `A warm-up run each, then ${o.rounds} interleaved rounds, medians. Token ids identical in every run. ` +
    `${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}); load average ${load0} before, ${loadavg().map((x) => x.toFixed(2)).join(' ')} after. ` +
    `ours total = wall time of asr.transcribe() (worker round trip included).`);
say();
say('| threads | clip | audio s | tokens | ours encode ms | ours decode ms | ours total ms | ORT-web encode ms | ORT-web decode ms | ORT-web total ms | ORT-web / ours | ours x real time |');
say('|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const run of runs)
  for (const c of run.clips) {
    const m = (xs, k) => median(xs.map((x) => x[k]));
    const ot = m(c.ours, 'totalMs'), tt = m(c.theirs, 'totalMs');
    say(`| ${run.threads} | ${c.name} | ${c.audioS.toFixed(2)} | ${c.oursWarm.tokens.length} | ${f(m(c.ours, 'encodeMs'))} | ${f(m(c.ours, 'decodeMs'))} | ${f(ot)} | ` +
        `${f(m(c.theirs, 'encodeMs'))} | ${f(m(c.theirs, 'decodeMs'))} | ${f(tt)} | ${(tt / ot).toFixed(2)}x | ${((c.audioS * 1000) / ot).toFixed(1)}x |`);
  }
say();
for (const c of runs[0].clips) say(`${c.name}: "${c.oursWarm.text}"`);
if (o.out) {
  mkdirSync(dirname(o.out), { recursive: true });
  writeFileSync(o.out, `${lines.join('\n')}\n`);
}
