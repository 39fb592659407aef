// The int8 conv's int16 product alone in wasm (Node, one thread): GMAC/s of gemm.cpp's int16 kernel (0)
// against the multiply-add instruction's own peak (99: i32x4.dot_i16x8_s + add with no loads; 98: relaxed
// SIMD's i32x4.relaxed_dot_i8x16_i7x16_add_s, relaxed build only) on Kokoro
// generator shapes (Cout x frames x kernel*Cin, stride-1 windows), interleaved, median of --repeats, by the
// process's CPU time (not wall time: the machine is shared).
//   node bench/kokoro_wasm_kernel.mjs [--repeats 5] [--wasm build/wasm-simd128/sotto.wasm] [--variants 0,99]
//   node --experimental-wasm-relaxed-simd bench/kokoro_wasm_kernel.mjs --wasm build/wasm-relaxed/sotto.wasm --variants 0,99,98
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { median } from './report.mjs';
import { createSharedMemory, instantiate } from '../web/runtime.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const repeats = Number(arg('--repeats', '5'));
const wasmPath = resolve(ROOT, arg('--wasm', 'build/wasm-simd128/sotto.wasm'));
const variants = arg('--variants', '0,99').split(',').map(Number);
// [Cout, frames, kernel, Cin]: the generator's first-stage resblocks (256 channels, k 3/7/11) and second (128).
// Then the tap pairs' leaves (conv_integer_bias.cpp) of those: 256 channels at depth 2 (150 outputs, 1-3
// taps), 128 at depth 3 (375 outputs, 1-2 taps). Variants 10-13: the time-in-lanes kernel's block shapes.
const SHAPES = [[256, 600, 3, 256], [256, 600, 11, 256], [128, 3000, 7, 128], [128, 3000, 11, 128],
  [256, 150, 3, 256], [256, 150, 1, 256], [128, 375, 2, 128], [128, 375, 1, 128]];

const module = await WebAssembly.compile(await readFile(wasmPath));
const memory = createSharedMemory();
const wasm = await instantiate(module, memory, 'kernel');
wasm.__wasm_call_ctors();
for (const [cout, n, k, cin] of SHAPES) {
  const K = k * cin, macs = cout * n * K;
  const reps = Math.max(1, Math.round(2e9 / macs));
  const ms = new Map(variants.map((v) => [v, []]));
  const sums = new Map();
  for (const v of variants) sums.set(v, wasm.sotto_nn_bench_igemm(v, cout, n, K, cin, 1));  // warm-up, checksum
  for (let r = 0; r < repeats; r++)
    for (const v of variants) {
      // CPU time of this thread (the machine is shared: wall time would count other jobs' turns).
      const c0 = process.cpuUsage();
      wasm.sotto_nn_bench_igemm(v, cout, n, K, cin, reps);
      const c1 = process.cpuUsage(c0);
      ms.get(v).push((c1.user + c1.system) / 1e3 / reps);
    }
  const kernels = variants.filter((v) => v < 90).map((v) => sums.get(v));
  const same = new Set(kernels).size <= 1;
  const cells = variants.map((v) => `${v}: ${(macs / median(ms.get(v)) / 1e6).toFixed(1)}`);
  console.log(`${cout}x${n}x${k}*${cin} (${(macs / 1e6).toFixed(0)} M MAC) GMAC/s ${cells.join('  ')}` +
    `${same ? '' : '  CHECKSUMS DIFFER'}`);
}
