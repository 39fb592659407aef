// GMAC/s of the packed f32 product in wasm (bench/wasm_kernels/gemm_f32.cpp; build both variants first, see
// there) on Moonshine encoder shapes, one thread in Node, median of 7, against the multiply-add's own rate
// (`peak`: 12 chains, no loads). Checks each variant's C against a plain JS product on a few entries.
//   node bench/wasm_kernels/gemm_f32.mjs [/tmp/gemm_f32_simd128.wasm /tmp/gemm_f32_relaxed.wasm]
import { readFileSync } from 'node:fs';

const files = process.argv.length > 2 ? process.argv.slice(2) : ['/tmp/gemm_f32_simd128.wasm', '/tmp/gemm_f32_relaxed.wasm'];
const shapes = [
  ['linear q/k/v/o', 415, 416, 416], ['fc1', 415, 1664, 416], ['fc2', 415, 416, 1664],
  ['conv2 (unrolled)', 832, 830, 2912], ['conv3 (unrolled)', 416, 415, 2496],
  ['attn scores (a head)', 415, 415, 52], ['attn values (a head)', 415, 52, 415],
];
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
const rows = {};
for (const file of files) {
  const { instance } = await WebAssembly.instantiate(readFileSync(file), { env: {} });
  const e = instance.exports;
  const iters = 2_000_000;
  e.peak(1000);
  const times = [];
  for (let r = 0; r < 7; r++) { const t0 = performance.now(); e.peak(iters); times.push(performance.now() - t0); }
  const peak = (48 * iters) / median(times) / 1e6;
  console.log(`${file}: multiply-add alone ${peak.toFixed(1)} GMAC/s`);
  for (const [name, M, N, K] of shapes) {
    const bytes = 4 * (M * K + N * K + M * N);
    const base = e.buf(bytes);
    const mem = new Float32Array(e.memory.buffer);
    const a = base / 4, b = a + M * K, c = b + N * K;
    let s = 1;
    const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    for (let i = 0; i < M * K + N * K; i++) mem[a + i] = rnd();
    const t = [];
    for (let r = 0; r < 7; r++) { const t0 = performance.now(); e.gemm(M, N, K, 4 * a, 4 * b, 4 * c); t.push(performance.now() - t0); }
    for (const [i, j] of [[0, 0], [M - 1, N - 1], [M >> 1, N >> 2]]) {
      let ref = 0;
      for (let k = 0; k < K; k++) ref += mem[a + i * K + k] * mem[b + j * K + k];
      const got = new Float32Array(e.memory.buffer)[c + i * N + j];
      if (Math.abs(got - ref) > 1e-3 * Math.sqrt(K)) throw new Error(`${file} ${name}: C[${i}][${j}] ${got} != ${ref}`);
    }
    const gmac = (M * N * K) / median(t) / 1e6;
    (rows[name] ??= []).push(`${median(t).toFixed(2)} ms, ${gmac.toFixed(1)} GMAC/s (${((100 * gmac) / peak).toFixed(0)} %)`);
  }
}
console.log(`| M x N x K | ${files.join(' | ')} |\n|---|${files.map(() => '---:').join('|')}|`);
for (const [name, M, N, K] of shapes) console.log(`| ${name} ${M}x${N}x${K} | ${rows[name].join(' | ')} |`);
