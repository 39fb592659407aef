// The int16 packed product against the packed f32 one in wasm (bench/wasm_kernels/gemm_i16.cpp; build it first,
// see there) on Moonshine's encoder linears, weights prepacked both ways, one thread, median of 9 with the two
// kernels interleaved per round, and each instruction's own rate (`peak_*`: 12 chains, no loads). Checks the
// int16 product against the f32 one on every entry (|diff| <= 1e-3 sqrt(K): x's rounding to int16) and, on
// three entries, bit for bit against the same algorithm written plainly in JS. In headless
// Chromium (wall time, so run it quiet).
//   node bench/wasm_kernels/gemm_i16.mjs [GEMM_I16.wasm]
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? '/tmp/gemm_i16.wasm';

async function measure(bytes) {
  const shapes = [
    ['q/k/v/o', 415, 416, 416], ['fc1', 415, 1664, 416], ['fc2', 415, 416, 1664],
    ['q/k/v/o, half the rows (2 threads)', 208, 416, 416], ['fc2, half the rows', 208, 416, 1664],
  ];
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const { instance } = await WebAssembly.instantiate(new Uint8Array(bytes), { env: {} });
  const e = instance.exports;
  const iters = 2_000_000;
  const peaks = {};
  for (const [name, f, macs] of [['f32', (n) => e.peak_f32(n), 48], ['i16', (n) => e.peak_i16(n, 3), 96]]) {
    f(iters);  // warm-up: one long call, so V8 tiers it up
    const t = [];
    for (let r = 0; r < 7; r++) { const t0 = performance.now(); f(iters); t.push(performance.now() - t0); }
    peaks[name] = (macs * iters) / median(t) / 1e6;
  }
  const kernels = ['f32', 'i16_4', 'i16_5', 'i16_6'];
  const rows = [];
  for (const [name, M, N, K] of shapes) {
    const base = e.buf(4 * M * K + N * K + 64 + 4 * M * N * kernels.length);
    const x = base / 4, q = base + 4 * M * K;
    const c0 = (q + N * K + 63) & ~63;
    const out = kernels.map((_, i) => c0 / 4 + i * M * N);
    let s = 1;
    const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    const f32 = new Float32Array(e.memory.buffer);
    for (let i = 0; i < M * K; i++) f32[x + i] = rnd();
    const i8 = new Int8Array(e.memory.buffer);
    for (let i = 0; i < N * K; i++) i8[q + i] = Math.round(rnd() * 127.5 - 0.5);
    const scale = 1 / 128;
    e.prepare(N, K, q, scale);
    const run = (i) => (kernels[i] === 'f32' ? e.gemm_f32(M, N, K, 4 * x, 4 * out[i]) : e[`gemm_${kernels[i]}`](M, N, K, 4 * x, scale, 4 * out[i]));
    kernels.forEach((_, i) => run(i));  // warm-up (and V8's optimised tier)
    const t = kernels.map(() => []);
    for (let r = 0; r < 9; r++)
      kernels.forEach((_, i) => { const t0 = performance.now(); run(i); t[i].push(performance.now() - t0); });
    const c = new Float32Array(e.memory.buffer);
    let worst = 0;
    for (let i = 1; i < kernels.length; i++)
      for (let j = 0; j < M * N; j++) worst = Math.max(worst, Math.abs(c[out[i] + j] - c[out[0] + j]));
    if (!(worst <= 1e-3 * Math.sqrt(K))) throw new Error(`${name}: int16 product off by ${worst}`);
    // A few entries bit for bit against the int16 algorithm in plain JS (float32 rounding via Math.fround).
    const f = Math.fround;
    const halfEven = (v) => { const fl = Math.floor(v), d = v - fl; return d < 0.5 ? fl : d > 0.5 ? fl + 1 : fl % 2 === 0 ? fl : fl + 1; };
    const KP = (K + 1) >> 1, blocks = Math.ceil(KP / 256), pc = Math.ceil(KP / blocks);
    for (const [i, j] of [[0, 0], [M - 1, N - 1], [M >> 1, N >> 2]]) {
      let amax = 0;
      for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(f32[x + i * K + k]));
      const inv = f(32767 / amax), xs = f(amax / 32767);
      const xq = (k) => halfEven(f(f32[x + i * K + k] * inv));
      let acc = 0;
      for (let p0 = 0; p0 < KP; p0 += pc) {
        let sum = 0;
        for (let k = 2 * p0; k < Math.min(K, 2 * (p0 + pc)); k++) sum += xq(k) * i8[q + j * K + k];
        acc = p0 === 0 ? f(sum) : f(acc + f(sum));
      }
      const want = f(f(scale * xs) * acc);
      for (let t = 1; t < kernels.length; t++)
        if (c[out[t] + i * N + j] !== want) throw new Error(`${name} ${kernels[t]}: C[${i}][${j}] ${c[out[t] + i * N + j]} != ${want}`);
    }
    rows.push({ name: `${name} ${M}x${N}x${K}`, worst, ms: t.map(median), gmac: t.map((v) => (M * N * K) / median(v) / 1e6) });
  }
  return { peaks, kernels, rows };
}

const { chromium } = await import('playwright-core');
const { CHROMIUM, CHROMIUM_ARGS } = await import('../bench_page.mjs');
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
const page = await browser.newPage();
const r = await page.evaluate(`(${measure.toString()})(${JSON.stringify([...readFileSync(file)])})`);
await browser.close();
console.log(`headless Chromium, one thread; instruction alone: relaxed_madd ${r.peaks.f32.toFixed(1)} GMAC/s, dot_i16x8 + add ${r.peaks.i16.toFixed(1)} GMAC/s`);
console.log(`| M x N x K | ${r.kernels.map((k) => (k === 'f32' ? 'f32 6x8' : `int16 ${k.slice(4)}x8`)).join(' | ')} | best int16 / f32 | max |int16 - f32| |`);
console.log(`|---|${r.kernels.map(() => '---:').join('|')}|---:|---:|`);
for (const row of r.rows) {
  const best = Math.min(...row.ms.slice(1));
  console.log(`| ${row.name} | ${row.ms.map((ms, i) => `${ms.toFixed(2)} ms (${row.gmac[i].toFixed(1)})`).join(' | ')} | ${(row.ms[0] / best).toFixed(2)}x | ${row.worst.toExponential(1)} |`);
}
