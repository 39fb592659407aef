// GMAC/s of the packed f32 product in wasm (bench/wasm_kernels/gemm_f32.cpp; build both variants first, see
// there) on Moonshine encoder shapes, one thread, median of 7, against the multiply-add's own rate (`peak`:
// 12 chains, no loads). Checks C against a plain JS product on a few entries. In headless Chromium by default
// (the engine the browser bench runs; wall time, so run it quiet); --node runs it in this Node (CPU time;
// needs node --no-liftoff --experimental-wasm-relaxed-simd: a single long call never leaves V8's baseline code
// otherwise, and Node 20's V8 runs relaxed_madd as a multiply and an add).
//   node bench/wasm_kernels/gemm_f32.mjs [--node] [SIMD128.wasm RELAXED.wasm]
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const inNode = args.includes('--node');
const paths = args.filter((a) => a !== '--node');
const files = paths.length ? paths : ['/tmp/gemm_f32_simd128.wasm', '/tmp/gemm_f32_relaxed.wasm'];

// Runs where it is evaluated (Node or the page): bytes, a list of byte arrays; returns [{peak, rows}].
async function measure(modules, useCpuTime) {
  const shapes = [
    ['linear q/k/v/o', 415, 416, 416], ['fc1', 415, 1664, 416], ['fc2', 415, 416, 1664],
    ['conv2 (unrolled)', 832, 830, 2912], ['conv3 (unrolled)', 416, 415, 2496],
    ['attn scores (a head)', 415, 415, 52], ['attn values (a head)', 415, 52, 415],
  ];
  const now = useCpuTime ? () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; } : () => performance.now();
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const out = [];
  for (const bytes of modules) {
    const { instance } = await WebAssembly.instantiate(new Uint8Array(bytes), { env: {} });
    const e = instance.exports;
    const iters = 2_000_000;
    e.peak(1000);
    const times = [];
    for (let r = 0; r < 7; r++) { const t0 = now(); e.peak(iters); times.push(now() - t0); }
    const peak = (48 * iters) / median(times) / 1e6;
    const rows = [];
    for (const [name, M, N, K] of shapes) {
      const base = e.buf(4 * (M * K + N * K + M * N));
      const mem = new Float32Array(e.memory.buffer);
      const a = base / 4, b = a + M * K, c = b + N * K;
      let s = 1;
      const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
      for (let i = 0; i < M * K + N * K; i++) mem[a + i] = rnd();
      e.gemm(M, N, K, 4 * a, 4 * b, 4 * c);  // warm-up (and V8's optimised tier)
      const t = [];
      for (let r = 0; r < 7; r++) { const t0 = now(); e.gemm(M, N, K, 4 * a, 4 * b, 4 * c); t.push(now() - t0); }
      for (const [i, j] of [[0, 0], [M - 1, N - 1], [M >> 1, N >> 2]]) {
        let ref = 0;
        for (let k = 0; k < K; k++) ref += mem[a + i * K + k] * mem[b + j * K + k];
        const got = mem[c + i * N + j];
        if (!(Math.abs(got - ref) <= 1e-3 * Math.sqrt(K))) throw new Error(`${name}: C[${i}][${j}] ${got} != ${ref}`);
      }
      rows.push({ name: `${name} ${M}x${N}x${K}`, ms: median(t), gmac: (M * N * K) / median(t) / 1e6 });
    }
    out.push({ peak, rows });
  }
  return out;
}

const modules = files.map((f) => [...readFileSync(f)]);
let results;
if (inNode) {
  results = await measure(modules, true);
} else {
  const { chromium } = await import('playwright-core');
  const { CHROMIUM, CHROMIUM_ARGS } = await import('../bench_page.mjs');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
  const page = await browser.newPage();
  results = await page.evaluate(`(${measure.toString()})(${JSON.stringify(modules)}, false)`);
  await browser.close();
}
console.log(`${inNode ? `Node ${process.version}` : 'headless Chromium'}; multiply-add alone: ${results.map((r, i) => `${files[i]} ${r.peak.toFixed(1)} GMAC/s`).join(', ')}`);
console.log(`| M x N x K | ${files.join(' | ')} |\n|---|${files.map(() => '---:').join('|')}|`);
results[0].rows.forEach((row, k) => {
  const cells = results.map((r) => `${r.rows[k].ms.toFixed(2)} ms, ${r.rows[k].gmac.toFixed(1)} GMAC/s (${((100 * r.rows[k].gmac) / r.peak).toFixed(0)} %)`);
  console.log(`| ${row.name} | ${cells.join(' | ')} |`);
});
