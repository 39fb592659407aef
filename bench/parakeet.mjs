// Parakeet TDT speed: sotto against ONNX Runtime on an ONNX export of the same random-weight model
// (tools/parakeet_export_onnx.py: NeMo's encoder.onnx + decoder_joint.onnx, run as parakeet.js / onnx-asr run
// them: bench/parakeet_ort.mjs), on the same clip and the same features, the same thread count, rounds
// interleaved (the order alternates), medians. See bench/README.md ("parakeet.mjs").
//
//   node bench/parakeet.mjs MODEL_DIR [--onnx DIR] [--threads 2] [--rounds 5] [--seconds 6] [--clip FILE.wav]
//                           [--no-native] [--bf16x3] [--browser] [--variant relaxed|simd128] [--out FILE.md]
//
// MODEL_DIR: config.json + model.safetensors (tools/parakeet_random_weights.py); --onnx: its export (default
// MODEL_DIR/onnx). The clip: the first --seconds of --clip (default beckett.wav from $SOTTO_FIXTURES/audio).
// Native (default on; --no-native skips it): build/bin/sotto_parakeet_bench --serve (model loaded once, one
// run per round; mel, encoder and decoder timed apart, wall and CPU time) against onnxruntime-node 1.30
// (intraOpNumThreads = threads) fed sotto's mel; --bf16x3: sotto's encoder products as three bf16 products on
// AMX tiles (ParakeetModel::use_bf16x3_products; CPUs with AMX-BF16 only), checked the same way. Browser
// (--browser): headless Chromium, one page
// (web/serve.mjs): sotto's wasm through web/asr.js (Asr.load(dir, { threads, variant }): the speech worker with a
// pool of that many threads; whole transcription, mel included) against onnxruntime-web 1.30 (wasm backend,
// numThreads = threads, proxy off; encoder + decoder on sotto's mel). SOTTO_WASM_DIR: another build folder for
// sotto.wasm. Before timing: ONNX Runtime's encoder output against sotto's (largest |diff|, and the largest
// value) and the tokens of every path against sotto's native tokens (the bench refuses to report speed when
// tokens differ).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

import { OrtParakeet } from './parakeet_ort.mjs';
import { CHROMIUM, CHROMIUM_ARGS, openBenchPage, wasmDir } from './bench_page.mjs';
import { median } from './report.mjs';

const repo = resolve(dirname(new URL(import.meta.url).pathname), '..');
const fixtures = process.env.SOTTO_FIXTURES ?? join(repo, 'tests/fixtures');
const benchTool = process.env.SOTTO_PARAKEET_BENCH ?? join(repo, 'build/bin/sotto_parakeet_bench');

function parseArgs(argv) {
  const o = { model: null, onnx: null, threads: 2, rounds: 5, seconds: 6, clip: join(fixtures, 'audio/beckett.wav'), native: true, browser: false, variant: 'relaxed', out: null, bf16x3: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--browser') { o.browser = true; continue; }
    if (a === '--native') { o.native = true; continue; }
    if (a === '--no-native') { o.native = false; continue; }
    if (a === '--bf16x3') { o.bf16x3 = true; continue; }
    if (!a.startsWith('--')) { o.model = a; continue; }
    const v = argv[++i];
    if (a === '--onnx') o.onnx = v;
    else if (a === '--threads') o.threads = Number(v);
    else if (a === '--rounds') o.rounds = Number(v);
    else if (a === '--seconds') o.seconds = Number(v);
    else if (a === '--clip') o.clip = v;
    else if (a === '--variant') o.variant = v;
    else if (a === '--out') o.out = v;
    else throw new Error(`unknown option ${a}`);
  }
  if (!o.model) throw new Error('usage: node bench/parakeet.mjs MODEL_DIR [--onnx DIR] [--threads N] [--rounds R] [--browser] [--out FILE]');
  o.onnx ??= join(o.model, 'onnx');
  if (!(o.threads >= 1 && o.rounds >= 1)) throw new Error('--threads and --rounds must be >= 1');
  return o;
}

// sotto_parakeet_bench --serve: one JSON line per "run".
async function startOurs(o, dumpDir) {
  const args = [o.model, '--threads', String(o.threads), '--seconds', String(o.seconds), '--wav', o.clip, '--dump', dumpDir, '--serve', ...(o.bf16x3 ? ['--bf16x3'] : [])];
  const child = spawn(benchTool, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${benchTool} ended early`);
    return value;
  };
  let line;
  while (!(line = await next()).startsWith('wrote ')) console.log(`  sotto: ${line}`);
  return {
    args,
    async run() {
      child.stdin.write('run\n');
      return JSON.parse(await next());
    },
    close() {
      child.stdin.end();
    },
  };
}

function readDump(dumpDir) {
  const f32 = (name) => { const b = readFileSync(join(dumpDir, name)); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
  return { ...JSON.parse(readFileSync(join(dumpDir, 'result.json'), 'utf8')), mel: f32('mel.f32'), encoder: f32('encoder.f32') };
}

// ONNX Runtime's encoder output [1, D, T'] against sotto's [T', D].
function compareEncoder(enc, ours) {
  const [, D, T] = enc.dims;
  if (T !== ours.encoder_frames || D !== ours.d_model) throw new Error(`encoder shapes differ: ORT [${T}, ${D}], sotto [${ours.encoder_frames}, ${ours.d_model}]`);
  let worst = 0, peak = 0;
  for (let t = 0; t < T; t++)
    for (let d = 0; d < D; d++) {
      worst = Math.max(worst, Math.abs(enc.data[d * T + t] - ours.encoder[t * D + d]));
      peak = Math.max(peak, Math.abs(ours.encoder[t * D + d]));
    }
  return { worst, peak };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function nativeRounds(o, ours, ref) {
  const ort = await import('onnxruntime-node');
  const config = JSON.parse(readFileSync(join(o.onnx, 'config.json'), 'utf8'));
  const t0 = performance.now();
  const p = await OrtParakeet.create(ort, { encoder: join(o.onnx, 'encoder.onnx'), decoderJoint: join(o.onnx, 'decoder_joint.onnx'), config, threads: o.threads });
  const loadMs = performance.now() - t0;
  const first = await p.transcribeMel(ref.mel, ref.mel_frames);  // also the warm-up
  const check = compareEncoder(first.encoder, ref);
  if (!same(first.tokens, ref.tokens)) throw new Error(`tokens differ: onnxruntime-node ${JSON.stringify(first.tokens)} vs sotto ${JSON.stringify(ref.tokens)}`);
  const warm = await ours.run();
  if (!same(warm.tokens, ref.tokens)) throw new Error('sotto --serve tokens differ from its --dump tokens');
  const s = [], t = [];
  for (let r = 0; r < o.rounds; r++) {
    // Wall and CPU time (this process: ORT's threads and the JS greedy loop) of each phase.
    const runOrt = async () => {
      const cpu = (c) => (c.user + c.system) / 1000;
      let c0 = process.cpuUsage(), t0 = performance.now();
      const enc = await p.runEncoder(ref.mel, ref.mel_frames);
      const encodeMs = performance.now() - t0, encodeCpuMs = cpu(process.cpuUsage(c0));
      c0 = process.cpuUsage();
      t0 = performance.now();
      const x = await p.decode(enc);
      t.push({ ...x, encodeMs, encodeCpuMs, decodeMs: performance.now() - t0, decodeCpuMs: cpu(process.cpuUsage(c0)) });
    };
    if (r % 2) { await runOrt(); s.push(await ours.run()); } else { s.push(await ours.run()); await runOrt(); }
  }
  await p.release();
  return { check, loadMs, ours: s, theirs: t };
}

async function browserRounds(o, ref, dumpDir) {
  // A fixtures root for the page: the model, its export and the clip's samples and mel (symlinks).
  const www = mkdtempSync(join(tmpdir(), 'sotto-parakeet-www-'));
  symlinkSync(resolve(o.model), join(www, 'model'));
  symlinkSync(resolve(o.onnx), join(www, 'onnx'));
  symlinkSync(resolve(dumpDir), join(www, 'dump'));
  process.env.SOTTO_FIXTURES = www;
  const { startServer } = await import('../web/serve.mjs');
  const { chromium } = await import('playwright-core');
  const { server, url } = await startServer(0);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
  try {
    const { page, crashed } = await openBenchPage(browser, url);
    return await Promise.race([crashed, page.evaluate(async ({ threads, rounds, melFrames, variant }) => {
      const f32 = async (u) => new Float32Array(await (await fetch(u)).arrayBuffer());
      const audio = await f32('/fixtures/dump/audio.f32');
      const mel = await f32('/fixtures/dump/mel.f32');
      const out = { ours: [], theirs: [], crossOriginIsolated };
      let t0 = performance.now();
      const { Asr } = await import('/web/asr.js');
      const asr = await Asr.load('/fixtures/model', { threads, variant });
      out.oursLoadMs = performance.now() - t0;
      console.log(`sotto loaded in ${out.oursLoadMs.toFixed(0)} ms`);
      out.oursTokens = (await asr.transcribe(audio)).tokens;  // warm-up
      console.log('sotto warm-up done');
      const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
      ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
      ort.env.wasm.numThreads = threads;
      ort.env.wasm.proxy = false;
      const { OrtParakeet } = await import('/bench/parakeet_ort.mjs');
      const config = await (await fetch('/fixtures/onnx/config.json')).json();
      t0 = performance.now();
      const p = await OrtParakeet.create(ort, {
        encoder: '/fixtures/onnx/encoder.onnx', decoderJoint: '/fixtures/onnx/decoder_joint.onnx', config, threads, providers: ['wasm'],
        externalData: {
          encoder: [{ path: 'encoder.onnx.data', data: '/fixtures/onnx/encoder.onnx.data' }],
          decoderJoint: [{ path: 'decoder_joint.onnx.data', data: '/fixtures/onnx/decoder_joint.onnx.data' }],
        },
      });
      out.ortLoadMs = performance.now() - t0;
      console.log(`onnxruntime-web loaded in ${out.ortLoadMs.toFixed(0)} ms`);
      out.ortTokens = (await p.transcribeMel(mel, melFrames)).tokens;  // warm-up
      for (let r = 0; r < rounds; r++) {
        const runOurs = async () => {
          const t = performance.now();
          const x = await asr.transcribe(audio);
          out.ours.push({ totalMs: performance.now() - t, tokens: x.tokens });
        };
        const runOrt = async () => {
          const x = await p.transcribeMel(mel, melFrames);
          out.theirs.push({ encodeMs: x.encodeMs, decodeMs: x.decodeMs, tokens: x.tokens });
        };
        if (r % 2) { await runOrt(); await runOurs(); } else { await runOurs(); await runOrt(); }
      }
      await p.release();
      await asr.dispose?.();
      return out;
    }, { threads: o.threads, rounds: o.rounds, melFrames: ref.mel_frames, variant: o.variant })]);
  } finally {
    await browser.close();
    server.close();
    rmSync(www, { recursive: true, force: true });
  }
}

const o = parseArgs(process.argv.slice(2));
for (const f of [benchTool, o.clip, join(o.model, 'model.safetensors'), join(o.onnx, 'encoder.onnx')])
  if (!existsSync(f)) throw new Error(`missing ${f}`);
const cfg = JSON.parse(readFileSync(join(o.model, 'config.json'), 'utf8'));
const e = cfg.encoder_config;
const load0 = loadavg().map((x) => x.toFixed(2)).join(' ');
const dumpDir = mkdtempSync(join(tmpdir(), 'sotto-parakeet-dump-'));
const lines = [];
const say = (s = '') => { lines.push(s); console.log(s); };
try {
  const ours = await startOurs(o, dumpDir);
  const ref = readDump(dumpDir);
  let native = null, web = null;
  if (o.native) native = await nativeRounds(o, ours, ref);
  ours.close();
  if (o.browser) {
    web = await browserRounds(o, ref, dumpDir);
    for (const x of [web.oursTokens, web.ortTokens, ...web.ours.map((y) => y.tokens), ...web.theirs.map((y) => y.tokens)])
      if (!same(x, ref.tokens)) throw new Error(`browser tokens differ from sotto native's: ${JSON.stringify(x)} vs ${JSON.stringify(ref.tokens)}`);
  }
  const date = new Date().toISOString().slice(0, 10);
  const f = (x) => x.toFixed(1);
  say(`# Parakeet TDT: sotto vs ONNX Runtime on the same random-weight model (${date})`);
  say();
  say(`Model: ${o.model} (d_model ${e.hidden_size}, ${e.num_hidden_layers} layers, ${e.num_attention_heads} heads, FF ${e.intermediate_size}, ` +
      `vocab ${cfg.vocab_size - 1} + blank, decoder ${cfg.decoder_hidden_size}); ONNX export ${o.onnx} (tools/parakeet_export_onnx.py). ` +
      `Clip: first ${o.seconds} s of ${o.clip} (${ref.mel_frames} mel frames, ${ref.encoder_frames} encoder frames), ${ref.tokens.length} tokens on random weights. ` +
      `${o.threads} threads each; ${o.rounds} interleaved rounds after a warm-up, medians. ${cpus().length} CPUs (${cpus()[0].model}); ` +
      `load average ${load0} before, ${loadavg().map((x) => x.toFixed(2)).join(' ')} after. ratio = ORT / sotto (> 1: sotto faster).`);
  if (native) {
    const n = native;
    say();
    say(`## Native: sotto_parakeet_bench --serve${o.bf16x3 ? ' --bf16x3 (split-bf16 products on AMX tiles)' : ''} vs onnxruntime-node ${(await import('onnxruntime-node/package.json', { with: { type: 'json' } })).default.version}`);
    say();
    say(`Check: onnxruntime-node's encoder output against sotto's: max |diff| ${n.check.worst.toExponential(2)} (largest |value| ${n.check.peak.toFixed(2)}); ` +
        `tokens identical (${ref.tokens.length}) in every round.`);
    say();
    const med = (xs, k) => median(xs.map((x) => (typeof k === 'function' ? k(x) : x[k])));
    const rows = [
      ['encoder', med(n.ours, 'encode_ms'), med(n.theirs, 'encodeMs')],
      [`decoder (greedy TDT, ${ref.tokens.length} tokens over ${ref.encoder_frames} frames)`, med(n.ours, 'decode_ms'), med(n.theirs, 'decodeMs')],
      ['encoder + decoder', med(n.ours, (x) => x.encode_ms + x.decode_ms), med(n.theirs, (x) => x.encodeMs + x.decodeMs)],
      ['CPU time (all threads), encoder', med(n.ours, 'encode_cpu_ms'), med(n.theirs, 'encodeCpuMs')],
      ['CPU time (all threads), decoder', med(n.ours, 'decode_cpu_ms'), med(n.theirs, 'decodeCpuMs')],
      ['CPU time (all threads), encoder + decoder', med(n.ours, (x) => x.encode_cpu_ms + x.decode_cpu_ms), med(n.theirs, (x) => x.encodeCpuMs + x.decodeCpuMs)],
    ];
    say('| ms (median) | sotto | onnxruntime-node | ratio |');
    say('|---|---:|---:|---:|');
    for (const [name, a, b] of rows) say(`| ${name} | ${f(a)} | ${f(b)} | ${(b / a).toFixed(2)}x |`);
    say(`| mel front end (sotto's; ORT is fed its output): wall / CPU | ${f(med(n.ours, 'mel_ms'))} / ${f(med(n.ours, 'mel_cpu_ms'))} | - | - |`);
    say();
    say(`Per round (sotto encoder / ORT encoder, ms): ${n.ours.map((x, i) => `${f(x.encode_ms)}/${f(n.theirs[i].encodeMs)}`).join(', ')}`);
  }
  if (web) {
    say();
    say(`## Browser (headless Chromium ${CHROMIUM}): sotto wasm ${o.variant} (web/asr.js, speech worker, ${o.threads}-thread pool) vs onnxruntime-web (wasm, numThreads ${o.threads})`);
    say();
    say(`Cross-origin isolated: ${web.crossOriginIsolated}; load: sotto ${f(web.oursLoadMs)} ms, ORT ${f(web.ortLoadMs)} ms. Tokens identical to sotto native's in every run.`);
    say();
    const so = median(web.ours.map((x) => x.totalMs));
    const th = { enc: median(web.theirs.map((x) => x.encodeMs)), dec: median(web.theirs.map((x) => x.decodeMs)), tot: median(web.theirs.map((x) => x.encodeMs + x.decodeMs)) };
    say('| ms (median) | sotto wasm | onnxruntime-web | ratio |');
    say('|---|---:|---:|---:|');
    say(`| whole transcription (sotto: mel + encoder + decoder, through the worker; ORT: encoder + decoder) | ${f(so)} | ${f(th.tot)} | ${(th.tot / so).toFixed(2)}x |`);
    say(`| ORT encoder / decoder | | ${f(th.enc)} / ${f(th.dec)} | |`);
    say();
    say(`Per round (sotto / ORT, ms): ${web.ours.map((x, i) => `${f(x.totalMs)}/${f(web.theirs[i].encodeMs + web.theirs[i].decodeMs)}`).join(', ')}`);
  }
  say();
  say(`Command: node bench/parakeet.mjs ${process.argv.slice(2).join(' ')}`);
  if (o.out) {
    mkdirSync(dirname(o.out), { recursive: true });
    writeFileSync(o.out, `${lines.join('\n')}\n`);
    console.log(`wrote ${o.out}`);
  }
} finally {
  rmSync(dumpDir, { recursive: true, force: true });
}
