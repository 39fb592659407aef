// Silero VAD speed: sotto against ONNX Runtime on the same model file and the same 16 kHz clip (the 60 s
// test.wav by default), in one run. See bench/README.md ("vad.mjs") for the method.
//
//   node bench/vad.mjs [--repeats 5] [--threads 1,2] [--clip test.wav] [--models v5.1,v6.2] [--out FILE.md]
//
// Browser (headless Chromium, one page per configuration, served by web/serve.mjs): sotto's wasm (relaxed
// SIMD and SIMD128) through web/vad.js vs onnxruntime-web 1.30 (wasm backend, numThreads = the same count,
// proxy off) from node_modules/onnxruntime-web/dist. Native: `sotto vad` vs onnxruntime-node 1.30
// (intraOpNumThreads = the same count). Needs build/bin/sotto and build/wasm-{relaxed,simd128}/sotto.wasm
// (or SOTTO_CLI / SOTTO_WASM_DIR).
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import * as ort from 'onnxruntime-node';
import { chromium } from 'playwright-core';

import {
  clipPath, modelPath, nativeCli, onnxRuntimeProbs, onnxRuntimeSession, readWav16, repo, wasmDir, wasmPath,
} from '../tests/web/vad_support.mjs';
import { startServer } from '../web/serve.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from './bench_page.mjs';
import { median } from './report.mjs';

function parseArgs(argv) {
  const o = { repeats: 5, threads: [1, 2], clip: 'test.wav', models: ['v5.1', 'v6.2'], out: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (a === '--repeats') o.repeats = Number(v);
    else if (a === '--threads') o.threads = v.split(',').map(Number);
    else if (a === '--clip') o.clip = v;
    else if (a === '--models') o.models = v.split(',');
    else if (a === '--out') o.out = v;
    else throw new Error(`unknown option ${a}`);
  }
  if (!(o.repeats >= 1) || !o.threads.every((t) => t >= 1)) throw new Error('--repeats and --threads must be >= 1');
  return o;
}


// Everything measured inside one page: per-frame ms of each path, median over repeats (the first pass of each
// is a warm-up and not counted).
async function browserRun(browser, baseUrl, { model, clip, threads, repeats, engine }) {
  const page = await browser.newPage();
  if (`${repo}build` !== wasmDir)
    await page.route(/\/build\/wasm-(simd128|relaxed)\/sotto\.wasm$/, (route) =>
      route.fulfill({ path: wasmPath(route.request().url().match(/wasm-(simd128|relaxed)/)[1]), contentType: 'application/wasm' }));
  await page.goto(`${baseUrl}web/serve.mjs`);
  try {
    return await page.evaluate(async ({ model, clip, threads, repeats, engine }) => {
      const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      const { Vad } = await import('/web/vad.js');
      const loader = await Vad.load(`/fixtures/vad/${model}`, { variant: 'simd128', threads: 1 });
      const samples = await loader.decodeWav(`/fixtures/audio/${clip}`);
      await loader.dispose();
      const n = 512;
      const frames = Math.floor(samples.length / n);
      const out = { frames, audioS: samples.length / 16000, threads };
      const timed = async (fn) => {
        const ms = [];
        for (let r = 0; r <= repeats; r++) {
          const t0 = performance.now();
          await fn();
          if (r) ms.push((performance.now() - t0) / frames);
        }
        return median(ms);
      };
      if (engine === 'ort-web') {
        const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
        ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
        ort.env.wasm.numThreads = threads;
        ort.env.wasm.proxy = false;
        const bytes = new Uint8Array(await (await fetch(`/fixtures/vad/${model}`)).arrayBuffer());
        const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
        const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
        // Silero's streaming as vad-web runs it: 64 samples of context + 512 new, the state carried.
        out.msPerFrame = await timed(async () => {
          let state = new ort.Tensor('float32', new Float32Array(256), [2, 1, 128]);
          const input = new Float32Array(64 + n);
          for (let i = 0; i < frames; i++) {
            input.copyWithin(0, n, n + 64);
            input.set(samples.subarray(i * n, (i + 1) * n), 64);
            const r = await session.run({ input: new ort.Tensor('float32', input.slice(), [1, 64 + n]), state, sr });
            state = r.stateN;
          }
        });
        await session.release();
        return out;
      }
      // On the page's thread (the same thread ONNX Runtime Web runs on): one synchronous call per frame.
      const inline = await Vad.load(`/fixtures/vad/${model}`, { variant: engine, inline: true });
      out.variant = inline.info.variant;
      out.inlineMsPerFrame = await timed(async () => {
        await inline.reset();
        for (let i = 0; i < frames; i++) inline.processSync(samples.subarray(i * n, (i + 1) * n));
      });
      await inline.dispose();
      // In the engine worker (the default): one message per frame (what a naive microphone loop does), and one
      // message for the whole clip.
      const vad = await Vad.load(`/fixtures/vad/${model}`, { variant: engine, threads });
      // (the first 300 frames: on a loaded machine each round trip can take milliseconds)
      const messageFrames = Math.min(frames, 300);
      out.msPerFrame = (await timed(async () => {
        await vad.reset();
        for (let i = 0; i < messageFrames; i++) await vad.process(samples.subarray(i * n, (i + 1) * n));
      })) * frames / messageFrames;
      out.clipMsPerFrame = await timed(() => vad.processClip(samples.subarray(0, frames * n)));
      await vad.dispose();
      return out;
    }, { model, clip, threads, repeats, engine });
  } finally {
    await page.close();
  }
}

// `sotto vad` prints "vad: N frames in X ms (Y ms per frame, ...)" on stderr: the forward passes only.
function nativeSottoMsPerFrame({ model, clip, repeats }) {
  const ms = [];
  for (let r = 0; r <= repeats; r++) {
    const p = spawnSync(nativeCli, ['vad', '-m', modelPath(model), clipPath(clip)], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const m = /\(([\d.]+) ms per frame/.exec(p.stderr);
    if (p.status !== 0 || !m) throw new Error(`sotto vad failed: ${p.stderr}`);
    if (r) ms.push(Number(m[1]));
  }
  return median(ms);
}

async function nativeOrtMsPerFrame({ model, clip, repeats, threads }) {
  const session = await onnxRuntimeSession(ort, modelPath(model), threads);
  const { samples } = readWav16(clipPath(clip));
  const ms = [];
  for (let r = 0; r <= repeats; r++) {
    const { msPerFrame } = await onnxRuntimeProbs(ort, session, samples);
    if (r) ms.push(msPerFrame);
  }
  await session.release();
  return median(ms);
}

const opts = parseArgs(process.argv.slice(2));
const fmt = (x) => (x >= 1 ? x.toFixed(3) : x.toFixed(4));
const lines = [];
const say = (s = '') => {
  lines.push(s);
  console.log(s);
};
const loadBefore = loadavg()[0];
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
const cliKey = (m) => `silero_vad_${m}.onnx`;
const results = [];
try {
  for (const m of opts.models) {
    const model = cliKey(m);
    const audioS = readWav16(clipPath(opts.clip)).samples.length / 16000;
    const rtf = (msPerFrame, frames) => (msPerFrame * frames) / 1000 / audioS;
    for (const threads of opts.threads) {
      const base = { model, clip: opts.clip, threads, repeats: opts.repeats };
      const relaxed = await browserRun(browser, url, { ...base, engine: 'relaxed' });
      const simd = await browserRun(browser, url, { ...base, engine: 'simd128' });
      const ortWeb = await browserRun(browser, url, { ...base, engine: 'ort-web' });
      const nativeOurs = nativeSottoMsPerFrame(base);
      const nativeOrt = await nativeOrtMsPerFrame(base);
      results.push({ model, threads, relaxed, simd, ortWeb, nativeOurs, nativeOrt, frames: relaxed.frames, rtf });
    }
  }
} finally {
  await browser.close();
  server.close();
}

const date = new Date().toISOString().slice(0, 10);
say(`# Silero VAD: sotto vs ONNX Runtime (${date})`);
say();
say(`Clip ${opts.clip} (${(results[0].frames * 0.032).toFixed(1)} s of 32 ms frames at 16 kHz); ms per frame, median of ${opts.repeats} passes ` +
    `after a warm-up pass. Chromium: ${CHROMIUM}; ${cpus().length} CPUs (${cpus()[0].model}); load average ${loadBefore.toFixed(2)} before, ` +
    `${loadavg()[0].toFixed(2)} after. ratio = peer / ours (> 1: sotto faster). RTF = compute time / audio time.`);
say();
say('sotto runs the VAD on one thread whatever the engine\'s thread count (the network is ~0.7 M multiply-adds ' +
    'per frame: threads cost more than they save); "threads" is ONNX Runtime\'s count and the sotto engine\'s pool size.');
for (const r of results) {
  say();
  say(`## ${r.model}, ${r.threads} thread${r.threads > 1 ? 's' : ''}`);
  say();
  say('| path | sotto ms/frame | peer | peer ms/frame | ratio | sotto RTF | peer RTF |');
  say('|---|---:|---|---:|---:|---:|---:|');
  const row = (path, ours, peerName, peer) =>
    say(`| ${path} | ${fmt(ours)} | ${peerName} | ${fmt(peer)} | ${(peer / ours).toFixed(2)}x | ${r.rtf(ours, r.frames).toFixed(5)} | ${r.rtf(peer, r.frames).toFixed(5)} |`);
  const ortName = `onnxruntime-web wasm, ${r.threads} thr, \`await session.run\` per frame (page thread)`;
  row('browser, relaxed SIMD, page thread: `vad.processSync(frame)` (`inline: true`)', r.relaxed.inlineMsPerFrame, ortName, r.ortWeb.msPerFrame);
  row('browser, SIMD128, page thread: `vad.processSync(frame)`', r.simd.inlineMsPerFrame, ortName, r.ortWeb.msPerFrame);
  row('browser, relaxed SIMD, engine worker: `await vad.processClip(clip)` (one message)', r.relaxed.clipMsPerFrame, ortName, r.ortWeb.msPerFrame);
  row('browser, SIMD128, engine worker: `await vad.processClip(clip)`', r.simd.clipMsPerFrame, ortName, r.ortWeb.msPerFrame);
  row('browser, relaxed SIMD, engine worker: `await vad.process(frame)` (a message per frame; first 300 frames)', r.relaxed.msPerFrame, ortName, r.ortWeb.msPerFrame);
  row('browser, SIMD128, engine worker: `await vad.process(frame)`', r.simd.msPerFrame, ortName, r.ortWeb.msPerFrame);
  row('native: `sotto vad` forward passes (x86-64, 4-lane SSE vectors)', r.nativeOurs, `onnxruntime-node CPU, ${r.threads} thr, \`await session.run\` per frame`, r.nativeOrt);
}
say();
say(`Command: node bench/vad.mjs --repeats ${opts.repeats} --threads ${opts.threads.join(',')} --clip ${opts.clip} --models ${opts.models.join(',')}`);
if (opts.out) {
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, `${lines.join('\n')}\n`);
  console.log(`wrote ${opts.out}`);
}
