#!/usr/bin/env node
// Builds the voice agent into one HTML file, build/agent/index.html (+ sw.js, the service worker that makes
// it cross-origin isolated on hosts that cannot send headers), with esbuild:
//   - the page's modules (web/agent/*.js, web/llm.js, web/vad.js, web/engine.js, ...) as one inline module
//     script, the stylesheet as one inline style, both allowed by their sha256 in the page's CSP;
//   - the engine worker and its pool helper (web/worker.js, web/helper-worker.js) bundled as strings the page
//     starts from Blob URLs, where the unbundled engine uses `new URL('./worker.js', import.meta.url)`;
//   - both wasm builds (build/wasm-simd128, build/wasm-relaxed; or $SOTTO_WASM_DIR/wasm-*) and the Silero VAD
//     model in base64, turned into Blob URLs / Blobs on first use;
//   - web/asr.js and web/tts.js when they exist (speech.js's optional imports become static ones), and the
//     dedicated speech worker they run in (web/speech-worker.js), bundled as a string like the engine worker.
// The language model is not inlined (hundreds of MB): the page loads it from models/ beside it.
//   node web/agent/build.mjs [OUT_DIR]    (npm run build:agent) -> prints the file and its size
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../..');
const web = join(repo, 'web');
const wasmDir = resolve(process.env.SOTTO_WASM_DIR ?? join(repo, 'build'));
const fixtures = resolve(process.env.SOTTO_FIXTURES ?? join(repo, 'tests', 'fixtures'));
const VAD_FILE = 'silero_vad_v5.1.onnx';
const TARGET = ['chrome120', 'firefox128', 'safari18'];

// Text substitutions in the engine's modules, each required to match: a change there must fail the build, not
// leave a page that requests files it does not have.
function substitute(file, source, replacements) {
  for (const [pattern, replacement] of replacements) {
    if (!pattern.test(source)) throw new Error(`build-agent: ${file}: expected ${pattern} (did its asset loading change?)`);
    source = source.replace(pattern, replacement);
  }
  return source;
}

const WASM_URLS = /const WASM_URLS = \{\n\s*simd128: new URL\('\.\.\/build\/wasm-simd128\/sotto\.wasm', import\.meta\.url\),\n\s*relaxed: new URL\('\.\.\/build\/wasm-relaxed\/sotto\.wasm', import\.meta\.url\),\n\};/;
const WASM_GETTERS = `const WASM_URLS = {
  get simd128() { return new URL(globalThis.__sottoAssets.wasmUrl('simd128')); },
  get relaxed() { return new URL(globalThis.__sottoAssets.wasmUrl('relaxed')); },
};`;

function plugin(name, loads) {
  return {
    name,
    setup(build) {
      for (const [file, make] of Object.entries(loads)) {
        const filter = new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
        build.onLoad({ filter }, (args) => ({ contents: make(readFileSync(args.path, 'utf8')), loader: 'js', resolveDir: dirname(args.path) }));
      }
    },
  };
}

async function bundle(entry, plugins = [], define = {}) {
  const r = await esbuild.build({
    entryPoints: [entry], bundle: true, format: 'esm', platform: 'browser', target: TARGET, minify: true, write: false,
    external: ['webgpu', 'node:*'], plugins, define, legalComments: 'none', logLevel: 'silent',
  });
  return r.outputFiles[0].text;
}

function readRequired(path, what) {
  if (!existsSync(path)) throw new Error(`build-agent: ${path} is missing (${what})`);
  return readFileSync(path);
}

function sha256Source(text) {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

// speech: {asr, tts} module paths standing in for web/asr.js and web/tts.js (tests use a synthetic voice).
export async function buildAgent(outDir = join(repo, 'build', 'agent'), { speech: stand = {} } = {}) {
  const wasm = {
    simd128: readRequired(join(wasmDir, 'wasm-simd128', 'sotto.wasm'), 'build the wasm first: cmake --preset wasm-simd128 && cmake --build --preset wasm-simd128'),
    relaxed: readRequired(join(wasmDir, 'wasm-relaxed', 'sotto.wasm'), 'build the wasm first: cmake --preset wasm-relaxed && cmake --build --preset wasm-relaxed'),
  };
  const vadModel = readRequired(join(fixtures, 'vad', VAD_FILE), `the Silero VAD model, from tests/fixtures/vad (or $SOTTO_FIXTURES)`);
  const modulePath = (name) => stand[name] ?? (existsSync(join(web, `${name}.js`)) ? join(web, `${name}.js`) : null);
  const speech = { asr: modulePath('asr'), tts: modulePath('tts') };

  const helper = await bundle(join(web, 'helper-worker.js'));
  const HELPER_WORKER = /new URL\('\.\/helper-worker\.js', import\.meta\.url\)/;
  const HELPER_BLOB = "new URL(URL.createObjectURL(new Blob([__SOTTO_HELPER_SOURCE__], { type: 'text/javascript' })))";
  const worker = await bundle(join(web, 'worker.js'), [plugin('worker-assets', {
    'web/worker.js': (src) => substitute('web/worker.js', src, [[
      /new URL\('\.\/helper-worker\.js', import\.meta\.url\)/,
      "new URL(URL.createObjectURL(new Blob([__SOTTO_HELPER_SOURCE__], { type: 'text/javascript' })))",
    ]]),
  })], { __SOTTO_HELPER_SOURCE__: JSON.stringify(helper) });

  // The speech worker gets its wasm module from the page (a compiled WebAssembly.Module), so its copies of the
  // WASM_URLS blocks are never read; they are replaced only so that no import.meta.url is left.
  const SPEECH_WORKER = /new URL\('\.\/speech-worker\.js', import\.meta\.url\)/;
  const SPEECH_WORKER_URL = 'new URL(globalThis.__sottoAssets.speechWorkerUrl())';
  const speechWorker = (speech.asr || speech.tts) && existsSync(join(web, 'speech-worker.js'))
    ? await bundle(join(web, 'speech-worker.js'), [plugin('speech-worker-assets', {
      'web/asr.js': (src) => substitute('web/asr.js', src, [[WASM_URLS, WASM_GETTERS]]),
      'web/speech-client.js': (src) => substitute('web/speech-client.js', src, [[SPEECH_WORKER, SPEECH_WORKER_URL]]),
      'web/pool.js': (src) => substitute('web/pool.js', src, [[HELPER_WORKER, HELPER_BLOB]]),
    })], { __SOTTO_HELPER_SOURCE__: JSON.stringify(helper) })
    : '';

  const assetsModule = `
const WASM = ${JSON.stringify({ simd128: wasm.simd128.toString('base64'), relaxed: wasm.relaxed.toString('base64') })};
const WORKER = ${JSON.stringify(worker)};
const SPEECH_WORKER = ${JSON.stringify(speechWorker)};
const VAD = ${JSON.stringify(vadModel.toString('base64'))};
function bytes(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}
const urls = {};
globalThis.__sottoAssets = {
  wasmUrl: (v) => (urls[v] ??= URL.createObjectURL(new Blob([bytes(WASM[v])], { type: 'application/wasm' }))),
  workerUrl: () => (urls.worker ??= URL.createObjectURL(new Blob([WORKER], { type: 'text/javascript' }))),
  speechWorkerUrl: () => (urls.speech ??= URL.createObjectURL(new Blob([SPEECH_WORKER], { type: 'text/javascript' }))),
};
export function inlineAsset(name) {
  return name === ${JSON.stringify(VAD_FILE)} ? new File([bytes(VAD)], ${JSON.stringify(VAD_FILE)}) : null;
}`;
  const speechModule = `
${speech.asr ? `import { Asr } from ${JSON.stringify(speech.asr)};` : 'const Asr = null;'}
${speech.tts ? `import { Tts } from ${JSON.stringify(speech.tts)};` : 'const Tts = null;'}
export async function loadSpeechModules() { return { Asr, Tts }; }`;

  let js = await bundle(join(web, 'agent', 'agent.js'), [plugin('page-assets', {
    'web/engine.js': (src) => substitute('web/engine.js', src, [
      [WASM_URLS, WASM_GETTERS],
      [/new URL\('\.\/worker\.js', import\.meta\.url\)/, 'new URL(globalThis.__sottoAssets.workerUrl())'],
    ]),
    'web/vad.js': (src) => substitute('web/vad.js', src, [[WASM_URLS, WASM_GETTERS]]),
    'web/asr.js': (src) => substitute('web/asr.js', src, [[WASM_URLS, WASM_GETTERS]]),
    'web/tts.js': (src) => substitute('web/tts.js', src, [[WASM_URLS, WASM_GETTERS]]),
    'web/speech-client.js': (src) => substitute('web/speech-client.js', src, [[SPEECH_WORKER, SPEECH_WORKER_URL]]),
    'web/pool.js': (src) => substitute('web/pool.js', src, [[HELPER_WORKER, HELPER_BLOB]]),
    'web/agent/assets.js': () => assetsModule,
    'web/agent/speech.js': () => speechModule,
  })], { __SOTTO_HELPER_SOURCE__: JSON.stringify(helper) });
  for (const [what, text] of [['page', js], ['worker', worker], ['helper', helper], ['speech worker', speechWorker]]) {
    if (/import\.meta\.url/.test(text)) throw new Error(`build-agent: the ${what} bundle still loads something by import.meta.url`);
  }
  js = js.replace(/<\/script/gi, '<\\/script');
  const css = (await esbuild.transform(readFileSync(join(here, 'agent.css'), 'utf8'), { loader: 'css', minify: true, target: TARGET })).code;

  let html = readFileSync(join(here, 'index.html'), 'utf8');
  const csp = ["default-src 'none'", `script-src ${sha256Source(js)} 'wasm-unsafe-eval' blob:`, "worker-src 'self' blob:",
    `style-src ${sha256Source(css)}`, "img-src 'self' data:", "media-src 'self' blob:",
    "connect-src 'self' blob: https://huggingface.co https://*.huggingface.co https://*.hf.co", "manifest-src 'self'", "base-uri 'none'",
    "form-action 'none'"].join('; ');
  html = substitute('web/agent/index.html', html, [
    [/<meta http-equiv="Content-Security-Policy" content="[^"]*">/, `<meta http-equiv="Content-Security-Policy" content="${csp}">`],
    [/ data-models-base="[^"]*" data-vad-url="[^"]*"/, ' data-models-base="models/"'],
    [/<link rel="stylesheet" href="agent\.css">/, () => `<style>${css}</style>`],
    [/<script type="module" src="agent\.js"><\/script>/, () => `<script type="module">${js}</script>`],
  ]);
  mkdirSync(outDir, { recursive: true });
  // Written beside and renamed into place: a server (or a test in another process) never reads half a page.
  const put = (name, data) => {
    const tmp = join(outDir, `.${name}.${process.pid}.tmp`);
    writeFileSync(tmp, data);
    renameSync(tmp, join(outDir, name));
  };
  put('index.html', html);
  put('sw.js', readFileSync(join(here, 'sw.js')));
  return { file: join(outDir, 'index.html'), bytes: Buffer.byteLength(html), speech };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const out = process.argv[2] ? resolve(process.argv[2]) : undefined;
    const r = await buildAgent(out);
    const has = (x) => (x ? 'included' : 'not in this tree yet');
    console.log(`build-agent: ${r.file} (${(r.bytes / 1e6).toFixed(1)} MB; speech recognition ${has(r.speech.asr)}, speech synthesis ${has(r.speech.tts)})`);
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
