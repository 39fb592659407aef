// The wasm engine under Node (worker_threads, SIMD128 build): the CLI's help, selftest and info commands, and
// the libm replacement (src/wasm/math.cpp) against JS Math (and Python's math.erf, which JS lacks) on random inputs.
// Run: node --test tests/web/node.test.mjs   (needs build/wasm-simd128/sotto.wasm)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { createSharedMemory, instantiate } from '../../web/runtime.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const cli = fileURLToPath(new URL('../../web/cli.mjs', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const wasmPath = `${repo}build/wasm-simd128/sotto.wasm`;

function runCli(...args) {
  return execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120000 });
}

test('cli selftest passes on 1, 2 and 4 worker threads', () => {
  for (const threads of ['1', '2', '4']) {
    const out = runCli('selftest', '--threads', threads);
    assert.match(out, new RegExp(`selftest passed: simd128, ${threads} threads`), out);
  }
});

test('cli --help lists every command; COMMAND --help its usage; an unknown command exits 2', () => {
  const all = runCli('--help');
  for (const c of ['selftest', 'info', 'tokenize', 'detokenize', 'generate', 'bench llm', 'vad'])
    assert.match(all, new RegExp(`usage: node web/cli.mjs ${c} `), all);
  for (const args of [['generate', '--help'], ['bench', 'llm', '--help'], ['vad', '-h']]) {
    const out = runCli(...args);
    assert.match(out, new RegExp(`^usage: node web/cli.mjs ${args[0]} `), out);
    assert.equal(out.match(/^usage:/gm).length, 1, out);
  }
  let failed = null;
  try {
    runCli('frobnicate');
  } catch (e) {
    failed = e;
  }
  assert.equal(failed?.status, 2);
  assert.match(failed.stderr, /^sotto: unknown command 'frobnicate'/);
});

test('cli info streams a real GGUF and lists its 48 tensors', () => {
  const d = JSON.parse(runCli('info', `${fixtures}/llm/stories260K.gguf`, '--json'));
  assert.equal(d.ok, true, d.error);
  assert.match(d.format, /^gguf/);
  assert.equal(d.tensors.length, 48);
  assert.equal(d.bytes, readFileSync(`${fixtures}/llm/stories260K.gguf`).length);
  const text = runCli('info', `${fixtures}/llm/stories260K.gguf`);
  assert.match(text, /48 tensors/);
});

test('cli info on a file that is no model says so and exits 1', () => {
  let failed = null;
  try {
    runCli('info', cli, '--json');
  } catch (e) {
    failed = e;
  }
  assert.ok(failed, 'expected a non-zero exit');
  const d = JSON.parse(failed.stdout);
  assert.equal(d.ok, false);
  assert.ok(d.error.length > 0);
});

// ------------------------------------------------------------------ math
// Order as in sotto_math_eval (src/wasm/math.cpp): 12 unary float functions, the same 12 in double, then
// powf, pow, atan2f, atan2.
const UNARY = ['exp', 'log', 'sin', 'cos', 'tanh', 'sqrt', 'exp2', 'log2', 'atan', 'erf', 'expm1', 'tan'];
const REFERENCE = {
  exp: Math.exp, log: Math.log, sin: Math.sin, cos: Math.cos, tanh: Math.tanh, sqrt: Math.sqrt,
  exp2: (x) => 2 ** x, log2: Math.log2, atan: Math.atan, expm1: Math.expm1, tan: Math.tan,
};
const uniform = (lo, hi) => () => lo + (hi - lo) * Math.random();
const logUniform = (lo, hi) => () => Math.exp(Math.log(lo) + (Math.log(hi) - Math.log(lo)) * Math.random());
const DOMAINS = {
  exp: [uniform(-87, 88), uniform(-1, 1)], log: [logUniform(1e-30, 1e30), uniform(0.5, 2)],
  sin: [uniform(-10, 10), uniform(-1e4, 1e4)], cos: [uniform(-10, 10), uniform(-1e4, 1e4)],
  tanh: [uniform(-10, 10), uniform(-0.01, 0.01)], sqrt: [logUniform(1e-20, 1e20)],
  exp2: [uniform(-120, 120)], log2: [logUniform(1e-20, 1e20)], atan: [uniform(-3, 3), uniform(-1e3, 1e3)],
  erf: [uniform(-6, 6), uniform(-0.1, 0.1)], expm1: [uniform(-1, 1), uniform(-1e-5, 1e-5)], tan: [uniform(-1.5, 1.5)],
};
const N = 4000;

let mathInstance = null;
async function math() {
  if (!mathInstance) {
    const memory = createSharedMemory();
    const wasm = await instantiate(await WebAssembly.compile(readFileSync(wasmPath)), memory, 'math test');
    wasm.__wasm_call_ctors();
    mathInstance = { wasm, memory };
  }
  return mathInstance;
}

async function evaluate(which, xs, ys, isDouble) {
  const { wasm, memory } = await math();
  const Type = isDouble ? Float64Array : Float32Array;
  const bytes = xs.length * Type.BYTES_PER_ELEMENT;
  const [px, py, po] = [wasm.sotto_alloc(bytes), wasm.sotto_alloc(bytes), wasm.sotto_alloc(bytes)];
  new Type(memory.buffer, px, xs.length).set(xs);
  new Type(memory.buffer, py, xs.length).set(ys ?? xs);
  assert.equal(wasm.sotto_math_eval(which, px, py, po, xs.length), 1);
  const out = Array.from(new Type(memory.buffer, po, xs.length));
  for (const p of [px, py, po]) wasm.sotto_free(p);
  return out;
}

// Distance in units in the last place between two floats (ordered integer view of their bits).
function floatUlps(a, b) {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b) ? 0 : Infinity;
  const view = new DataView(new ArrayBuffer(4));
  const ordered = (v) => {
    view.setFloat32(0, v);
    const i = view.getInt32(0);
    return i < 0 ? -2147483648 - i : i;
  };
  return Math.abs(ordered(a) - ordered(b));
}

function erfReference(xs) {
  const script = 'import math,sys,json; print(json.dumps([math.erf(x) for x in json.load(sys.stdin)]))';
  return JSON.parse(execFileSync('python3', ['-c', script], { input: JSON.stringify(xs), encoding: 'utf8' }));
}

test('float math functions are within 1 ulp of the correctly rounded value', async (t) => {
  for (const [which, name] of UNARY.entries()) {
    for (const draw of DOMAINS[name]) {
      const xs = Array.from({ length: N }, () => Math.fround(draw()));
      const exact = name === 'erf' ? erfReference(xs) : xs.map(REFERENCE[name]);
      const got = await evaluate(which, xs, null, false);
      let worst = 0;
      let worstX = 0;
      for (let i = 0; i < N; i++) {
        const u = floatUlps(got[i], Math.fround(exact[i]));
        if (u > worst) (worst = u), (worstX = xs[i]);
      }
      t.diagnostic(`${name}f: worst ${worst} ulp (x = ${worstX})`);
      assert.ok(worst <= 1, `${name}f(${worstX}) is ${worst} ulps off`);
    }
  }
  // powf and atan2f: two arguments.
  const xs = Array.from({ length: N }, () => Math.fround(logUniform(1e-3, 1e3)()));
  const ys = Array.from({ length: N }, () => Math.fround(uniform(-10, 10)()));
  for (const [which, name, ref] of [[24, 'powf', (x, y) => x ** y], [26, 'atan2f', Math.atan2]]) {
    const got = await evaluate(which, xs, ys, false);
    const worst = Math.max(...got.map((g, i) => floatUlps(g, Math.fround(ref(xs[i], ys[i])))));
    t.diagnostic(`${name}: worst ${worst} ulp`);
    assert.ok(worst <= 1, `${name} is ${worst} ulps off`);
  }
});

test('double math functions agree with JS Math to a few ulps', async (t) => {
  for (const [index, name] of UNARY.entries()) {
    const xs = Array.from({ length: N }, () => DOMAINS[name][0]());
    const exact = name === 'erf' ? erfReference(xs) : xs.map(REFERENCE[name]);
    const got = await evaluate(12 + index, xs, null, true);
    // erf's Taylor sum cancels terms near 16 in size for |x| ~ 2.5: absolute error ~5e-15, not relative.
    const bound = name === 'erf' ? 1e-14 : 1e-15;
    const worst = Math.max(...got.map((g, i) => Math.abs(g - exact[i]) / Math.max(Math.abs(exact[i]), name === 'erf' ? 1 : 1e-300)));
    t.diagnostic(`${name}: worst relative error ${worst.toExponential(2)}`);
    assert.ok(worst <= bound, `${name}: relative error ${worst}`);
  }
  const xs = Array.from({ length: N }, logUniform(1e-3, 1e3));
  const ys = Array.from({ length: N }, uniform(-10, 10));
  const pow = await evaluate(25, xs, ys, true);
  const worstPow = Math.max(...pow.map((g, i) => Math.abs(g / xs[i] ** ys[i] - 1)));
  t.diagnostic(`pow: worst relative error ${worstPow.toExponential(2)}`);
  assert.ok(worstPow < 1e-13);
});

test('math special cases', async () => {
  const isDouble = (which) => (which >= 12 && which < 24) || which === 25 || which === 27;
  const f = (which, x, y) => evaluate(which, [x], y === undefined ? null : [y], isDouble(which)).then((r) => r[0]);
  assert.equal(await f(12, -Infinity), 0); // exp(-inf)
  assert.equal(await f(12, 1000), Infinity);
  assert.equal(await f(13, 0), -Infinity); // log(0)
  assert.ok(Number.isNaN(await f(13, -1)));
  assert.equal(await f(25, -2, 3), -8); // pow(-2, 3)
  assert.ok(Number.isNaN(await f(25, -2, 0.5)));
  assert.equal(await f(25, 0, -1), Infinity);
  assert.equal(await f(25, 5, 0), 1);
  assert.equal(await f(27, 0, -1), Math.PI); // atan2(+0, -1)
  assert.equal(await f(16, 30), 1); // tanh(30)
});

test('allocator: a 300 MB block, reuse after free, and many small blocks', async () => {
  const { wasm, memory } = await math();
  const big = 300 * 1024 * 1024;
  const p = wasm.sotto_alloc(big);
  assert.ok(p > 0 && p % 64 === 0);
  const bytes = new Uint8Array(memory.buffer);
  bytes[p] = 7;
  bytes[p + big - 1] = 9;
  const grownTo = memory.buffer.byteLength;
  assert.ok(grownTo >= p + big);
  wasm.sotto_free(p);
  // The freed block is found again: memory does not grow for a second block of the same size.
  const q = wasm.sotto_alloc(big);
  assert.equal(memory.buffer.byteLength, grownTo);
  wasm.sotto_free(q);
  // Many small blocks of random sizes, each filled with its own byte, then checked and freed in random order.
  const blocks = [];
  for (let i = 0; i < 5000; i++) {
    const size = 1 + Math.floor(Math.random() * 2000);
    const ptr = wasm.sotto_alloc(size);
    new Uint8Array(memory.buffer, ptr, size).fill(i & 255);
    blocks.push({ ptr, size, tag: i & 255 });
  }
  blocks.sort(() => Math.random() - 0.5);
  for (const b of blocks) {
    const view = new Uint8Array(memory.buffer, b.ptr, b.size);
    assert.ok(view.every((v) => v === b.tag), 'a block was overwritten by another');
    wasm.sotto_free(b.ptr);
  }
  // Everything merged back: the big block fits again without growing.
  const r = wasm.sotto_alloc(big);
  assert.equal(memory.buffer.byteLength, grownTo);
  wasm.sotto_free(r);
});
