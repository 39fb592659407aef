// The language model deep into a conversation: decode of 64 tokens and the prefill of a chat turn (--turn
// tokens, default 26) after 1k, 4k and 8k positions, sotto against llama.cpp's C API (build/bin/llama_capi, from
// bench/build_llama_capi.sh) on the same file and threads, interleaved in one run. Both engines compute the
// prompt up to the depth once and cut their cache back to it before each timed repeat.
//
//   node bench/llm_depth.mjs [--threads 2] [--repeats 3] [--depths 1024,4096,8192] [--turn 26]
//        [--out bench/results/depth-DATE.md] [--sotto PATH] [FILE.gguf]
//
// Default file: models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (the default chat model).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { loadLine, markdownTable, median, rawDetails, writeReport } from './report.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'build', 'bin');

function parseArgs(argv) {
  const opts = { threads: 2, repeats: 3, depths: [1024, 4096, 8192], turn: 26, out: null, sotto: join(BIN, 'sotto'),
                 model: join(ROOT, 'models', 'qwen2.5-coder-0.5b-instruct-q4_k_m.gguf') };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--threads') opts.threads = Number(argv[++i]);
    else if (a === '--repeats') opts.repeats = Number(argv[++i]);
    else if (a === '--depths') opts.depths = argv[++i].split(',').map(Number);
    else if (a === '--turn') opts.turn = Number(argv[++i]);
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--sotto') opts.sotto = argv[++i];
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else opts.model = a;
  }
  if (!(opts.threads >= 1) || !(opts.repeats >= 1) || !(opts.turn >= 1) || !opts.depths.every((d) => d >= 1))
    throw new Error('--threads, --repeats, --turn and --depths must be >= 1');
  return opts;
}

const measure = (exe, file, threads, depth, turn, repeats) =>
  JSON.parse(execFileSync(exe, [...(exe.endsWith('sotto') ? ['bench', 'llm'] : []), '-m', file, '--threads', String(threads),
    '--repeats', String(repeats), '--depth', String(depth), '--turn', String(turn), '--no-prefill', '--json'],
  { encoding: 'utf8', maxBuffer: 1 << 24 }));

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const capi = join(BIN, 'llama_capi');
  if (!existsSync(capi)) throw new Error('no build/bin/llama_capi: run bash bench/build_llama_capi.sh');
  if (!existsSync(opts.model)) throw new Error(`no such model file: ${opts.model}`);
  const loadBefore = loadavg();
  const rows = [], raw = {};
  for (const depth of opts.depths) {
    const ours = [], theirs = [];
    // Interleaved rounds, each a process that prefills to the depth once and times 3 repeats (median).
    for (let r = 0; r < opts.repeats; ++r) {
      ours.push(measure(opts.sotto, opts.model, opts.threads, depth, opts.turn, 3));
      theirs.push(measure(capi, opts.model, opts.threads, depth, opts.turn, 3));
      console.error(`depth ${depth} round ${r + 1}: sotto ${ours.at(-1).decode_tokens_per_s.toFixed(1)} tok/s, ` +
        `turn ${ours.at(-1).turn_ms.toFixed(0)} ms; llama.cpp ${theirs.at(-1).decode_tokens_per_s.toFixed(1)} tok/s, ` +
        `turn ${theirs.at(-1).turn_ms.toFixed(0)} ms (load ${loadavg()[0].toFixed(2)})`);
    }
    raw[depth] = { ours, theirs };
    const dA = median(ours.map((x) => x.decode_ms_per_token)), dB = median(theirs.map((x) => x.decode_ms_per_token));
    const tA = median(ours.map((x) => x.turn_ms)), tB = median(theirs.map((x) => x.turn_ms));
    rows.push([String(depth), 'decode (tok/s)', 1000 / dA, 1000 / dB, dB / dA]);
    rows.push([String(depth), `prefill ${opts.turn}-token turn (ms)`, tA, tB, tB / tA]);
    // CPU time of the process: on a loaded machine at one thread it says more than the wall clock (with more
    // threads it counts llama.cpp's spinning barriers too).
    const cdA = median(ours.map((x) => x.decode_cpu_ms_per_token)), cdB = median(theirs.map((x) => x.decode_cpu_ms_per_token));
    const ctA = median(ours.map((x) => x.turn_cpu_ms)), ctB = median(theirs.map((x) => x.turn_cpu_ms));
    if (cdA > 0 && cdB > 0) rows.push([String(depth), 'decode CPU (ms/token)', cdA, cdB, cdB / cdA]);
    if (ctA > 0 && ctB > 0) rows.push([String(depth), `turn CPU (ms)`, ctA, ctB, ctB / ctA]);
  }
  const report = [
    `# sotto vs llama.cpp at depth, native CPU, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `${basename(opts.model)}; ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical CPUs; ${opts.threads} threads; ` +
      `median of ${opts.repeats} interleaved rounds (each the median of 3 repeats); sotto: ${opts.sotto}; ` +
      `llama.cpp: its C API (build/bin/llama_capi) over node-llama-cpp's prebuilt CPU libraries (F16 KV cache, flash attention auto).`,
    `${loadLine(loadBefore)}.`,
    'ratio = sotto / llama.cpp speed (> 1: sotto faster).',
    '',
    markdownTable(['depth', 'metric', 'sotto', 'llama.cpp', 'ratio'], rows, { align: ['r', '', 'r', 'r', 'r'] }),
    '',
    rawDetails(raw),
  ].join('\n');
  writeReport(report, opts.out);
}

main();
