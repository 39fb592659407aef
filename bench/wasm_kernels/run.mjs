// Times bench/wasm_kernels/kernels.cpp's SIMD128 product blocks (build it first, see there) on a Kokoro generator conv's
// shape (96 output channels, K = 7 taps x 64 channels, 1200 steps), median of 7, and checks every variant's sums agree.
//   node bench/wasm_kernels/run.mjs
import {readFileSync} from 'node:fs';
const {instance} = await WebAssembly.instantiate(readFileSync('/tmp/wasm_kernels.wasm'));
const e = instance.exports; const base = e.buf();
const M = 96, N = 1200, K = 448;  // 64-ch gen conv, kernel 7
const mem = e.memory.buffer;
const A16 = base, B16 = A16 + M*K*2, C = B16 + N*K*2, A8 = C + M*N*4, B8 = A8 + M*K;
const a16 = new Int16Array(mem, A16, M*K), b16 = new Int16Array(mem, B16, N*K), a8 = new Int8Array(mem, A8, M*K), b8 = new Uint8Array(mem, B8, N*K);
for (let i=0;i<M*K;i++){const v=(Math.random()*256|0)-128; a16[i]=v; a8[i]=v;}
for (let i=0;i<N*K;i++){const v=Math.random()*256|0; b16[i]=v; b8[i]=v;}
const c = new Int32Array(mem, C, M*N);
const fns = {run16_42u:[A16,B16], run16_24:[A16,B16], run16_22:[A16,B16], run16_42:[A16,B16], run16_43:[A16,B16], run16_34:[A16,B16], run16_33:[A16,B16], run8_42:[A8,B8], run8_24:[A8,B8], run8_33:[A8,B8]};
let ref=null;
const t = {};
for (let rep=0; rep<7; rep++) for (const [f,[a,b]] of Object.entries(fns)) {
  const MM = f.endsWith('33')||f.endsWith('34') ? 96 : 96; // 96 divisible by 3 and 4
  c.fill(0); const t0=performance.now(); e[f](MM,N - (N%12),K,a,b,C); const dt=performance.now()-t0;
  (t[f] ??= []).push(dt);
  const s = c.reduce((x,y)=>(x+y)|0,0); if (ref===null) ref=s; else if (s!==ref) console.log('MISMATCH', f);
}
for (const [f,v] of Object.entries(t)) { v.sort((a,b)=>a-b); console.log(f, v[3].toFixed(1), 'ms', (2*96*1200*K/v[3]/1e6).toFixed(1), 'GOPS'); }
