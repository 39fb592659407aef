// A Moonshine decoder step's int8 products in wasm, one thread, one row: the integer kernel (x as int16,
// i32x4.dot_i16x8_s) against the float one it replaced (bench/wasm_kernels/linear_int8.cpp; build there), on
// the step's shapes (8 layers x q, k, v, o, cross q, cross o 416x416, up 3328x416, down 416x1664; the head
// 32768x416). Median of 15 per shape, wall time in headless Chromium (run it quiet), or --node (CPU time; run
// node with --no-liftoff --experimental-wasm-relaxed-simd). Checks both against a plain JS sum on a few rows.
//   node bench/wasm_kernels/linear_int8.mjs [--node] [A.wasm ...]
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const inNode = args.includes('--node');
const paths = args.filter((a) => a !== '--node');
const files = paths.length ? paths : ['/tmp/linear_int8_simd128.wasm', '/tmp/linear_int8_relaxed.wasm'];

async function measure(modules, useCpuTime) {
  const shapes = [['q/k/v/o/cross q/o', 416, 416, 48], ['up', 3328, 416, 8], ['down', 416, 1664, 8], ['head', 32768, 416, 1]];
  const now = useCpuTime ? () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; } : () => performance.now();
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const out = [];
  for (const bytes of modules) {
    const { instance } = await WebAssembly.instantiate(new Uint8Array(bytes), { env: {} });
    const e = instance.exports;
    const rows = [];
    for (const [name, N, K, count] of shapes) {
      const base = e.buf();
      const q = base, xq = base + N * K, x = xq + 2 * K + 64 - ((xq + 2 * K) % 64), y = x + 4 * K;
      const m8 = new Int8Array(e.memory.buffer), m16 = new Int16Array(e.memory.buffer), mf = new Float32Array(e.memory.buffer);
      let s = 7;
      const rnd = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
      for (let i = 0; i < N * K; i++) m8[q + i] = Math.floor(rnd() * 256) - 128;
      for (let t = 0; t < K; t++) { m16[xq / 2 + t] = Math.round((rnd() * 2 - 1) * 32767); mf[x / 4 + t] = m16[xq / 2 + t]; }
      const res = {};
      for (const kind of ['f32', 'int16']) {
        const run = () => kind === 'f32' ? e.f32(N, K, x, q, y) : e.int16(N, K, xq, q, y);
        run(); run();
        for (const j of [0, N - 1, N >> 1]) {
          let ref = 0;
          for (let t = 0; t < K; t++) ref += m16[xq / 2 + t] * m8[q + j * K + t];
          const got = mf[y / 4 + j];
          if (!(Math.abs(got - ref) <= 1e-5 * Math.abs(ref) + 1)) throw new Error(`${kind} ${name}: y[${j}] ${got} != ${ref}`);
        }
        const t = [];
        const reps = Math.ceil(4e7 / (N * K));  // ~40 M weights a timing: far above the page timer's resolution
        for (let r = 0; r < 15; r++) { const t0 = now(); for (let c = 0; c < reps; c++) run(); t.push((now() - t0) / reps); }
        res[kind] = median(t);
      }
      rows.push({ name: `${name} ${N}x${K} (x${count} a step)`, count, ...res, gb: N * K / 1e6 });
    }
    out.push(rows);
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
console.log(`${inNode ? `Node ${process.version}` : 'headless Chromium'}, one thread, one row`);
for (const [i, rows] of results.entries()) {
  console.log(`\n${files[i]}\n| shape | float kernel ms | integer kernel ms | float / integer | integer GB/s of weights |\n|---|---:|---:|---:|---:|`);
  let a = 0, b = 0;
  for (const r of rows) {
    a += r.count * r.f32; b += r.count * r.int16;
    console.log(`| ${r.name} | ${r.f32.toFixed(3)} | ${r.int16.toFixed(3)} | ${(r.f32 / r.int16).toFixed(2)}x | ${(r.gb / r.int16).toFixed(1)} |`);
  }
  console.log(`| a step's products (sum) | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(a / b).toFixed(2)}x | |`);
}
