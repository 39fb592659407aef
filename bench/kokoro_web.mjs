// Kokoro-82M v1.0 in headless Chromium, three ways in one run, on the same phonemes (the short and the long
// sentence of bench/kokoro.mjs), voice and thread count:
//   ours       web/tts.js (Tts.speakPhonemes, the wasm build of --variant, default relaxed: build/wasm-relaxed);
//   kokoro-js  1.2.1 (KokoroTTS.generate_from_ids on transformers.js 3.x, dtype q8, device wasm: what users pick),
//              fed the same token ids (its espeak phonemizer bypassed) and the same af_heart rows;
//   ORT-web    onnxruntime-web 1.30 wasm EP, session.run on models/kokoro/kokoro-v1.0.int8.onnx.
// kokoro-js loads `onnx/model_quantized.onnx` of a model directory; its own q8 export (onnx-community) is not
// reachable here, so it runs OUR int8 file with the graph inputs/outputs renamed (tools/kokoro_rename_io.py,
// tokens -> input_ids, audio -> waveform): the same graph as ORT-web, on transformers.js' onnxruntime-web.
// Times are wall time in the page from the call to the audio (ours: speakPhonemes, through its worker pool;
// kokoro-js: generate_from_ids; ORT-web: session.run). Each round opens each engine's page in turn (its own wasm
// instance and threads; the others' pages closed, since an idle peer's threads spin), warms it up, times each
// sentence once and closes it; medians over rounds.
//
//   node bench/kokoro_web.mjs [--threads 1,2] [--repeats 5] [--variant relaxed|simd128] [--out FILE.md]
//
// Needs build/wasm-relaxed (cmake --preset wasm-relaxed), models/kokoro/, python3 with `onnx` (the rename, done
// once into build/kokoro_web/) and kokoro-js in node_modules (npm ci). NODE_PATH may name another node_modules
// that holds kokoro-js. A benchmark, not a test.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

import { BENCH_PHRASES, kokoroTokenIds } from '../tools/kokoro_inputs.mjs';
import { startServer } from '../web/serve.mjs';
import { markdownTable, median } from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = 'models/kokoro/kokoro-v1.0.int8.onnx';
const OUT = join(ROOT, 'build/kokoro_web');  // served: the bundle, the renamed model, transformers.js' ORT files
const VOICE = 'af_heart';

const PHRASES = BENCH_PHRASES;  // bench/kokoro.mjs's sentences
const tokenIds = kokoroTokenIds;

const o = { threads: [1, 2], repeats: 5, variant: 'relaxed', out: null };
for (let i = 2; i < process.argv.length; i += 2) {
  const [a, v] = [process.argv[i], process.argv[i + 1]];
  if (a === '--threads') o.threads = v.split(',').map(Number);
  else if (a === '--repeats') o.repeats = Number(v);
  else if (a === '--variant') o.variant = v;
  else if (a === '--out') o.out = v;
  else throw new Error(`unknown option ${a}`);
}

// kokoro-js's model directory (config.json + onnx/model_quantized.onnx, renamed once), its page bundle, and
// transformers.js' own onnxruntime-web files (what its default CDN wasmPaths would serve).
function prepareKokoroJs() {
  const nodePaths = (process.env.NODE_PATH ?? '').split(':').filter(Boolean);
  const require = createRequire(join(ROOT, 'package.json'));
  const where = (name) => {
    try {
      return require.resolve(name, { paths: [ROOT, ...nodePaths] });
    } catch {
      throw new Error(`bench/kokoro_web.mjs: ${name} is not installed (npm ci, or NODE_PATH=DIR/node_modules)`);
    }
  };
  const tjsDist = dirname(where('@huggingface/transformers'));
  const kjsVersion = JSON.parse(readFileSync(join(dirname(dirname(where('kokoro-js'))), 'package.json'), 'utf8')).version;
  const tjsVersion = JSON.parse(readFileSync(join(dirname(tjsDist), 'package.json'), 'utf8')).version;
  mkdirSync(join(OUT, 'model/onnx'), { recursive: true });
  writeFileSync(join(OUT, 'model/config.json'), JSON.stringify({ model_type: 'style_text_to_speech_2' }));
  const renamed = join(OUT, 'model/onnx/model_quantized.onnx');
  if (!existsSync(renamed) || statSync(renamed).mtimeMs < statSync(join(ROOT, MODEL)).mtimeMs)
    execFileSync('python3', [join(ROOT, 'tools/kokoro_rename_io.py'), join(ROOT, MODEL), renamed], { stdio: 'inherit' });
  rmSync(join(OUT, 'tjs-dist'), { force: true });
  symlinkSync(tjsDist, join(OUT, 'tjs-dist'));
  writeFileSync(join(OUT, 'entry.mjs'), "export { KokoroTTS } from 'kokoro-js';\n" +
    "export { env, StyleTextToSpeech2Model, Tensor } from '@huggingface/transformers';\n");
  return build({
    entryPoints: [join(OUT, 'entry.mjs')], bundle: true, format: 'esm', platform: 'browser', nodePaths,
    outfile: join(OUT, 'kokoro-js.bundle.mjs'), logLevel: 'warning',
  }).then(() => ({ kjsVersion, tjsVersion }));
}

// One page per variant, set up once per thread count: globalThis.bench({ phonemes, ids }) -> { ms, samples, rms }.
const SETUP = {
  async ours({ threads, variant, voice }) {
    const { Tts } = await import('/web/tts.js');
    const tts = await Tts.load('/models/kokoro/kokoro-v1.0.int8.onnx', { threads, variant, voice });
    globalThis.bench = async ({ phonemes }) => {
      const t0 = performance.now();
      const a = await tts.speakPhonemes(phonemes, { voice });
      return { ms: performance.now() - t0, ...summary(a.audio) };
    };
    return { threads: tts.threads };
  },
  async ort({ threads, voice }) {
    const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
    ort.env.wasm.numThreads = threads;
    const session = await ort.InferenceSession.create('/models/kokoro/kokoro-v1.0.int8.onnx', { executionProviders: ['wasm'] });
    const rows = new Float32Array(await (await fetch(`/models/kokoro/voices/${voice}.bin`)).arrayBuffer());
    globalThis.bench = async ({ ids }) => {
      const n = ids.length - 2;
      const feeds = {
        tokens: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
        style: new ort.Tensor('float32', rows.slice(n * 256, n * 256 + 256), [1, 256]),
        speed: new ort.Tensor('float32', Float32Array.from([1]), [1]),
      };
      const t0 = performance.now();
      const out = await session.run(feeds);
      return { ms: performance.now() - t0, ...summary(out.audio.data) };
    };
    return { threads: ort.env.wasm.numThreads, ort: ort.env.versions?.web };
  },
  async kokoroJs({ threads, voice }) {
    const { KokoroTTS, env, StyleTextToSpeech2Model, Tensor } = await import('/build/kokoro_web/kokoro-js.bundle.mjs');
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = '/build/kokoro_web/';
    env.useBrowserCache = false;
    env.backends.onnx.wasm.wasmPaths = '/build/kokoro_web/tjs-dist/';
    env.backends.onnx.wasm.numThreads = threads;
    // KokoroTTS.from_pretrained(id, { dtype, device }) is this model load plus a tokenizer for its phonemizer's
    // output; the ids come in ready here, so the tokenizer (not in our model directory) is left out.
    const model = await StyleTextToSpeech2Model.from_pretrained('model', { dtype: 'q8', device: 'wasm' });
    const tts = new KokoroTTS(model, null);
    globalThis.bench = async ({ ids }) => {
      const input = new Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
      const t0 = performance.now();
      const audio = await tts.generate_from_ids(input, { voice });
      return { ms: performance.now() - t0, ...summary(audio.audio) };
    };
    return { threads: env.backends.onnx.wasm.numThreads };
  },
};
const VARIANTS = ['ours', 'kokoroJs', 'ort'];
// Defined in each page before its setup: the sample count and RMS of an output (sanity: not silent, not noise).
const SUMMARY = 'globalThis.summary = (x) => ({ samples: x.length, rms: Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length) });';

const { kjsVersion, tjsVersion } = await prepareKokoroJs();
const voiceBytes = readFileSync(join(ROOT, `models/kokoro/voices/${VOICE}.bin`));
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const load0 = loadavg();
const rows = [];
const lengths = [];
const rmsAll = [];
try {
  // One page at a time: an idle page's engine is not idle (onnxruntime-web's and transformers.js' worker
  // threads wait by spinning), so with all three open each one's figure paid for the others' waits (ours on
  // the long sentence: 3,232 ms with the two peers' pages open against 2,130 ms alone, 2026-12-06). Each round
  // opens each engine's page in turn, loads, warms up on the first sentence, times every sentence once, closes.
  const openPage = async (v, threads) => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('console', (m) => m.type() === 'error' && console.error(`[${v}] ${m.text()}`));
    // kokoro-js reads voices from the Hugging Face hub: answer that one URL with our af_heart.bin, refuse the
    // rest of the network.
    await context.route(/^https?:\/\/(?!127\.0\.0\.1)/, (route) => (
      route.request().url().endsWith(`/voices/${VOICE}.bin`)
        ? route.fulfill({ body: voiceBytes, headers: { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' } })
        : route.abort()));
    await page.goto(new URL('/web/lab/', url).href).catch(() => {});
    await page.evaluate(SUMMARY);
    const fn = SETUP[v].toString().replace(/^async \w+/, 'async function');
    const info = await page.evaluate(`(${fn})(${JSON.stringify({ threads, variant: o.variant, voice: VOICE })})`);
    if (!(await page.evaluate('crossOriginIsolated'))) throw new Error(`${v}: page not cross-origin isolated`);
    return { page, info };
  };
  for (const threads of o.threads) {
    const args = PHRASES.map((phonemes) => ({ phonemes, ids: tokenIds(phonemes) }));
    const runs = args.map(() => Object.fromEntries(VARIANTS.map((v) => [v, []])));
    for (let r = 0; r < o.repeats; r++) {
      for (const v of VARIANTS) {
        const { page, info } = await openPage(v, threads);
        if (r === 0) console.error(`threads ${threads}: ${v} loaded (${JSON.stringify(info)})`);
        await page.evaluate((a) => globalThis.bench(a), args[0]);  // warm-up
        for (let i = 0; i < args.length; i++) runs[i][v].push(await page.evaluate((a) => globalThis.bench(a), args[i]));
        await page.context().close();
      }
    }
    for (let i = 0; i < args.length; i++) {
      const ms = Object.fromEntries(VARIANTS.map((v) => [v, median(runs[i][v].map((x) => x.ms))]));
      const s = Object.fromEntries(VARIANTS.map((v) => [v, runs[i][v][0].samples / 24000]));
      const n = [...args[i].phonemes].length;
      rows.push([String(threads), `${n} phonemes`, VARIANTS.map((v) => s[v].toFixed(2)).join(' / '),
        ms.ours.toFixed(0), ms.kokoroJs.toFixed(0), ms.ort.toFixed(0), (s.ours * 1000 / ms.ours).toFixed(2),
        (ms.kokoroJs / ms.ours).toFixed(2), (ms.ort / ms.ours).toFixed(2)]);
      lengths.push(...VARIANTS.map((v) => s[v] / s.ort));
      rmsAll.push(...VARIANTS.map((v) => runs[i][v][0].rms));
      console.error(`threads ${threads}, ${n} phonemes: ours ${ms.ours.toFixed(0)} ms, kokoro-js ${
        ms.kokoroJs.toFixed(0)} ms, ORT-web ${ms.ort.toFixed(0)} ms`);
    }
  }
} finally {
  await browser.close();
  server.close();
}
const spread = Math.max(...lengths.map((x) => Math.abs(x - 1)));
const report = [
  `# Kokoro-82M v1.0 int8 in headless Chromium: sotto vs kokoro-js ${kjsVersion} vs onnxruntime-web 1.30 (${
    new Date().toISOString().slice(0, 10)})`, '',
  `${cpus()[0].model}, ${cpus().length} cores, load average ${load0.map((x) => x.toFixed(1)).join(' ')} at the start, ${
    loadavg().map((x) => x.toFixed(1)).join(' ')} at the end; voice ${VOICE}, ours the ${o.variant} wasm build; ` +
  `median of ${o.repeats} rounds; each round opens each engine's page alone (the others closed), warms it up on the first sentence and times each sentence once.`, '',
  `kokoro-js ${kjsVersion} (transformers.js ${tjsVersion}, dtype q8, device wasm) ran OUR int8 file with its ` +
  'inputs/outputs renamed (tools/kokoro_rename_io.py), not its own q8 export, fed the same token ids through ' +
  'generate_from_ids (its phonemizer bypassed). Audio lengths (ours / kokoro-js / ORT-web) differ by at most ' +
  `${(spread * 100).toFixed(1)}%; output RMS ${Math.min(...rmsAll).toFixed(3)}–${Math.max(...rmsAll).toFixed(3)}.`, '',
  `Command: \`node bench/kokoro_web.mjs ${process.argv.slice(2).join(' ')}\``, '',
  markdownTable(['threads', 'input', 'audio s (ours / kokoro-js / ORT-web)', 'ours ms', 'kokoro-js ms', 'ORT-web ms',
    'ours x real time', 'kokoro-js / ours', 'ORT-web / ours'], rows), '',
].join('\n');
if (o.out) writeFileSync(o.out, report);
console.log(report);
if (spread > 0.05) throw new Error(`audio lengths differ by ${(spread * 100).toFixed(1)}% (> 5%)`);
if (Math.min(...rmsAll) < 0.01 || Math.max(...rmsAll) > 0.5) throw new Error(`output RMS out of range: ${rmsAll}`);
