// The wasm builds' decode kernels (quant_dot_rows(), one token, one thread) timed in headless Chromium on the
// shapes of the default chat model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M: q5_0 attention/gate/up, q8_0 output
// table and v, q6_K / q4_K down), two builds side by side in interleaved rounds (one page each), so a change
// to src/cpu/quant_dot_fast_wasm.cpp is compared with the build before it under the same background load.
// Each figure is the best of `--repeats` calls inside a round, then the median over rounds; GB/s counts the
// weight bytes read. The outputs are also checked (kernelCheck: against the scalar reference, tile = single).
//
//   node bench/wasm_quant_dot.mjs [--variant relaxed] [--rounds 5] [--repeats 5] DIR_A [DIR_B]
//
// DIR_*: directories under the repository root holding wasm-relaxed/sotto.wasm and wasm-simd128/sotto.wasm
// (e.g. build, and a copy of an earlier build's).
import { relative, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { chromium } from 'playwright-core';

import { startServer } from '../web/serve.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from './bench_page.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// [type, rows, cols, bytes per block, elements per block, what it is in the model]. The output table has
// 151,936 rows; kernelCheck allows 2^24 elements, so 16,384 of them.
const SHAPES = [
  ['q8_0', 16384, 896, 34, 32, 'output table (slice)'],
  ['q5_0', 4864, 896, 22, 32, 'ffn gate / up'],
  ['q5_0', 896, 896, 22, 32, 'attn q / output'],
  ['q6_K', 896, 4864, 210, 256, 'ffn down (q6_K layers)'],
  ['q4_K', 896, 4864, 144, 256, 'ffn down (q4_K layers)'],
];

const opts = { variant: 'relaxed', rounds: 5, repeats: 5, dirs: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === '--variant') opts.variant = argv[++i];
  else if (argv[i] === '--rounds') opts.rounds = Number(argv[++i]);
  else if (argv[i] === '--repeats') opts.repeats = Number(argv[++i]);
  else if (argv[i].startsWith('--')) throw new Error(`unknown option ${argv[i]}`);
  else opts.dirs.push(argv[i]);
}
if (opts.dirs.length === 0) opts.dirs.push('build');

const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
try {
  const pages = [];
  for (const dir of opts.dirs) {
    const page = await browser.newPage();
    await page.goto(`${url}web/serve.mjs`);
    const wasmUrl = `/${relative(ROOT, resolve(ROOT, dir, `wasm-${opts.variant}`, 'sotto.wasm'))}`;
    await page.evaluate(async ({ variant, wasmUrl }) => {
      const { Engine } = await import('/web/engine.js');
      globalThis.engine = await Engine.create({ threads: 1, variant, wasmUrl });
    }, { variant: opts.variant, wasmUrl });
    pages.push([dir, page]);
  }
  const times = {};  // dir -> shape index -> [ms per round]
  for (let r = 0; r < opts.rounds; ++r) {
    for (const [dir, page] of pages) {
      for (let s = 0; s < SHAPES.length; ++s) {
        const [type, rows, cols] = SHAPES[s];
        const out = await page.evaluate((c) => globalThis.engine.kernelCheck(c), { type, rows, cols, tokens: 1, repeats: opts.repeats });
        if (!(out.errorOverBound <= 1) || !out.piecesMatchWhole) throw new Error(`${dir} ${type}: wrong results ${JSON.stringify(out)}`);
        ((times[dir] ??= [])[s] ??= []).push(out.bestMs);
      }
    }
    console.error(`round ${r + 1} done (load ${loadavg()[0].toFixed(2)})`);
  }
  const head = `| kernel | shape | ${opts.dirs.map((d) => `${d} ms | ${d} GB/s`).join(' | ')} |${opts.dirs.length > 1 ? ' ratio |' : ''}`;
  const lines = [head, `|${'---|'.repeat(2 + 2 * opts.dirs.length + (opts.dirs.length > 1 ? 1 : 0))}`];
  for (let s = 0; s < SHAPES.length; ++s) {
    const [type, rows, cols, blockBytes, blockElems, what] = SHAPES[s];
    const bytes = (rows * cols / blockElems) * blockBytes;
    const ms = opts.dirs.map((d) => median(times[d][s]));
    const cells = ms.map((m) => `${m.toFixed(3)} | ${(bytes / m / 1e6).toFixed(2)}`);
    lines.push(`| ${type} ${what} | ${rows}x${cols} | ${cells.join(' | ')} |${ms.length > 1 ? ` ${(ms[0] / ms[1]).toFixed(2)}x |` : ''}`);
  }
  console.log(`${opts.variant} build, 1 thread, 1 token, median over ${opts.rounds} rounds of the best of ${opts.repeats} calls; load ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(lines.join('\n'));
} finally {
  await browser.close();
  server.close();
}
