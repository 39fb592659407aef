// The language model on this machine's CPU: sotto against llama.cpp's own C API (build/bin/llama_capi, made by
// bench/build_llama_capi.sh over node-llama-cpp's prebuilt libraries) on the same GGUF files, with the same
// thread count, interleaved in one run. node-llama-cpp itself is used only for the sanity check of the tokens
// (its per-token JavaScript cost made it a slower peer than llama.cpp is). See bench/README.md for the method.
//
//   node bench/llm_native.mjs [--threads 2] [--repeats 3] [--out bench/results/native-DATE.md] [--sotto PATH]
//        [FILE.gguf ...]
//
// --sotto: the sotto CLI to measure (default build/bin/sotto), e.g. another build of a change to compare.
//
// Without files it uses the three random-weight Qwen2.5-0.5B files in build/models/ (made first with
// build/bin/sotto_make_random_gguf when missing). Needs build/bin/{sotto,sotto_bench_memory,
// sotto_make_random_gguf} (cmake --preset release && cmake --build --preset release -j2) and build/bin/llama_capi
// (bash bench/build_llama_capi.sh).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { loadLine, markdownTable, median, rawDetails, writeReport } from './report.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'build', 'bin');
const DEFAULT_MODELS = ['q4_0', 'q8_0', 'q4_k_m'].map((t) => join(ROOT, 'build', 'models', `qwen2.5-0.5b-random-${t}.gguf`));
const PREFILL_SIZES = [64, 256];
const SANITY_PROMPT = 'Hello, my name is';
const SANITY_TOKENS = 16;

function parseArgs(argv) {
  const opts = { threads: 2, repeats: 3, out: null, sotto: join(BIN, 'sotto'), models: [] };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--threads') opts.threads = Number(argv[++i]);
    else if (a === '--repeats') opts.repeats = Number(argv[++i]);
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--sotto') opts.sotto = argv[++i];
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else opts.models.push(a);
  }
  if (!(opts.threads >= 1) || !(opts.repeats >= 1)) throw new Error('--threads and --repeats must be >= 1');
  if (opts.models.length === 0) opts.models = DEFAULT_MODELS;
  return opts;
}

let sottoPath = join(BIN, 'sotto');
const run = (exe, args) =>
  execFileSync(exe === 'sotto' ? sottoPath : join(BIN, exe), args, { encoding: 'utf8', maxBuffer: 1 << 28 });

// Bytes a decode step reads: every tensor once (a tied token_embd is the output matrix, read whole; the
// embedding lookup itself reads one row). The KV cache at these lengths is < 1% of it and left out.
function weightBytes(file) {
  const info = JSON.parse(run('sotto', ['info', file, '--json']));
  return { bytes: info.tensors.reduce((s, t) => s + t.bytes, 0), tensors: info.tensors };
}

// ---------------------------------------------------------------- llama.cpp

// Only for the sanity check: llama.cpp's tokenization and top-5 of the same prompt.
async function llamaSession(llama, file, threads) {
  const model = await llama.loadModel({ modelPath: file });
  const ctx = await model.createContext({ contextSize: 512, batchSize: 512, threads, sequences: 1 });
  const seq = ctx.getSequence();
  return {
    model,
    async sanity() {
      const ids = model.tokenize(SANITY_PROMPT);
      await seq.clearHistory();
      const out = [];
      let top = null;
      const gen = seq.evaluateWithMetadata(ids, { probabilities: true }, { temperature: 0, yieldEogToken: true });
      for await (const step of gen) {
        if (!top) top = [...step.probabilities.entries()].slice(0, 5).map(([id, p]) => ({ id, logprob: Math.log(p) }));
        out.push(step.token);
        if (out.length >= SANITY_TOKENS) break;
      }
      return { ids, out, top };
    },
    async dispose() {
      await ctx.dispose();
      await model.dispose();
    },
  };
}

// llama.cpp's C API, measured as `sotto bench llm` measures sotto (bench/llama_capi.cpp).
function capiMeasure(file, threads) {
  return JSON.parse(run('llama_capi', ['-m', file, '--threads', String(threads), '--repeats', '1', '--json']));
}

function sottoMeasure(file, threads) {
  return JSON.parse(run('sotto', ['bench', 'llm', '-m', file, '--threads', String(threads), '--repeats', '1', '--json']));
}

function sottoSanity(file, threads, ids) {
  const r = JSON.parse(run('sotto', ['generate', '-m', file, '--prompt-ids', ids.join(','), '--greedy', '-n',
    String(SANITY_TOKENS), '--top-logprobs', '5', '--threads', String(threads), '--json']));
  return { out: r.ids, top: r.top_logprobs };
}

function compareSanity(ours, theirs) {
  const oursById = new Map(ours.top.map((t) => [t.id, t.logprob]));
  const shared = theirs.top.filter((t) => oursById.has(t.id));
  const maxDiff = Math.max(0, ...shared.map((t) => Math.abs(t.logprob - oursById.get(t.id))));
  let same = 0;
  while (same < Math.min(ours.out.length, theirs.out.length) && ours.out[same] === theirs.out[same]) ++same;
  return `top-1 ${ours.top[0]?.id === theirs.top[0]?.id ? 'same' : 'DIFFERENT'} (${theirs.top[0]?.id}), ` +
    `top-5 ids shared ${shared.length}/5, max |Δ logprob| ${maxDiff.toFixed(4)}, ` +
    `greedy tokens identical for the first ${same} of ${SANITY_TOKENS}`;
}

// ---------------------------------------------------------------- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  sottoPath = opts.sotto;
  for (const f of opts.models) {
    if (!existsSync(f) && DEFAULT_MODELS.includes(f)) {
      console.error(`making ${f} ...`);
      run('sotto_make_random_gguf', ['--out', dirname(f)]);
    }
    if (!existsSync(f)) throw new Error(`no such model file: ${f}`);
  }
  const { getLlama } = await import('node-llama-cpp');
  // maxThreads 0: the context's `threads` is then exactly the count used, never lowered.
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', maxThreads: 0 });
  const loadBefore = loadavg();
  const bandwidth = JSON.parse(run('sotto_bench_memory', ['--threads', String(opts.threads), '--json']));
  const gbps = bandwidth.read_gb_per_s;
  console.error(`read bandwidth (${opts.threads} threads): ${gbps} GB/s`);

  const rows = [], bestRows = [], sanity = [], raw = {};
  for (const file of opts.models) {
    const name = basename(file);
    const { bytes } = weightBytes(file);
    const ours = [], theirs = [];
    for (let r = 0; r < opts.repeats; ++r) { // interleaved, so both see the same background load
      ours.push(sottoMeasure(file, opts.threads));
      theirs.push(capiMeasure(file, opts.threads));
      console.error(`${name} round ${r + 1}: sotto ${JSON.stringify(ours.at(-1))} llama.cpp ${JSON.stringify(theirs.at(-1))}`);
    }
    const session = await llamaSession(llama, file, opts.threads);
    const ref = await session.sanity();
    sanity.push(`${name}: ${compareSanity(sottoSanity(file, opts.threads, ref.ids), ref)}`);
    await session.dispose();
    raw[name] = { ours, theirs, weight_bytes: bytes };

    // Medians for the main table; the best (least disturbed) round of each engine for the second one.
    for (const [table, pick] of [[rows, median], [bestRows, (xs) => Math.min(...xs)]]) {
      const ms = (xs, key) => pick(xs.map((x) => x[key]));
      for (const n of PREFILL_SIZES) {
        const a = (1000 * n) / ms(ours, `prefill_${n}_ms`), b = (1000 * n) / ms(theirs, `prefill_${n}_ms`);
        table.push([name, `prefill ${n} (tok/s)`, a, b, a / b, '']);
      }
      const msA = ms(ours, 'decode_ms_per_token'), msB = ms(theirs, 'decode_ms_per_token');
      const share = (t) => `${((100 * bytes) / (t / 1000) / (gbps * 1e9)).toFixed(0)}%`;
      table.push([name, `decode (tok/s)`, 1000 / msA, 1000 / msB, msB / msA, `${share(msA)} / ${share(msB)}`]);
    }
  }

  const markdown = (rs) => markdownTable(['file', 'metric', 'sotto', 'llama.cpp', 'ratio', '% of bandwidth (sotto / llama.cpp)'], rs,
                                         { align: ['', '', 'r', 'r', 'r', 'r'] });
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const nlcVersion = JSON.parse(readFileSync(join(ROOT, 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8')).version;
  const report = [
    `# sotto vs llama.cpp, native CPU, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `${cpu}, ${cpus().length} logical CPUs; ${opts.threads} threads; sotto: ${opts.sotto}; median of ${opts.repeats} interleaved rounds; ` +
      `llama.cpp: its C API (build/bin/llama_capi) over node-llama-cpp ${nlcVersion}'s prebuilt CPU libraries (F16 KV cache, flash attention auto, batch 512).`,
    `Read bandwidth (sotto_bench_memory, ${opts.threads} threads, ${bandwidth.mib} MiB): ${gbps} GB/s (best ${bandwidth.best_gb_per_s}). ` +
      `${loadLine(loadBefore)}.`,
    `ratio = sotto / llama.cpp speed (> 1: sotto faster). % of bandwidth = weight bytes per token / time per token / read bandwidth.`,
    '',
    markdown(rows),
    '',
    `Best round of each engine (the least disturbed one; on a busy machine the fairer comparison of what each can do):`,
    '',
    markdown(bestRows),
    '',
    'Sanity (prompt "' + SANITY_PROMPT + '", llama.cpp\'s tokenization, greedy; random weights so near-ties are expected):',
    '',
    ...sanity.map((s) => `- ${s}`),
    '',
    rawDetails(raw),
  ].join('\n');
  writeReport(report, opts.out);
}

await main();
