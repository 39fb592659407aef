// The language model in headless Chromium: sotto's wasm builds (relaxed SIMD and SIMD128) against wllama
// 3.13 (@wllama/wllama) and wllama 2.3.7 (wllama-2, its multi-thread build) on the same GGUF file, with the
// same thread count, measured the same way by the page's clock. See bench/README.md for the method.
//
//   node bench/llm_browser.mjs [--threads 2] [--repeats 3] [--decode 64] [--wasm-dir build]
//        [--engines sotto-relaxed,sotto-simd128,wllama-3.13,wllama-2.3.7,sotto-relaxed@DIR]
//        [--prefill 64,256 (prompt sizes timed; '' for none)] [--out bench/results/browser-DATE.md]
//        [FILE.gguf ...]
//
// Without files it uses build/models/qwen2.5-0.5b-random-q4_0.gguf (build/bin/sotto_make_random_gguf makes
// it). Files must lie under the repository root (the page fetches them from the test server). --wasm-dir
// (under the repository root too) holds wasm-relaxed/sotto.wasm and wasm-simd128/sotto.wasm.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer } from '../web/serve.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from './bench_page.mjs';
import { loadLine, markdownTable, median, randomIds, rawDetails, writeReport } from './report.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ENGINES = ['sotto-relaxed', 'sotto-simd128', 'wllama-3.13', 'wllama-2.3.7'];
let PREFILL_SIZES = [64, 256];  // --prefill
const DECODE_PROMPT = 16;
const N_CTX = 512;
// Qwen2's special tokens start at 151643: prompts use ordinary ids below it (as bench/llm_native.mjs).
const ORDINARY_VOCAB = 151643;

function parseArgs(argv) {
  const opts = { threads: 2, repeats: 3, decode: 64, wasmDir: 'build', engines: ENGINES, out: null, models: [] };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--threads') opts.threads = Number(argv[++i]);
    else if (a === '--repeats') opts.repeats = Number(argv[++i]);
    else if (a === '--decode') opts.decode = Number(argv[++i]);
    else if (a === '--wasm-dir') opts.wasmDir = argv[++i];
    else if (a === '--engines') opts.engines = argv[++i].split(',');
    else if (a === '--prefill') PREFILL_SIZES = argv[++i].split(',').filter(Boolean).map(Number);
    else if (a === '--out') opts.out = argv[++i];
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else opts.models.push(a);
  }
  if (!(opts.threads >= 1) || !(opts.repeats >= 1) || !(opts.decode >= 1)) throw new Error('--threads, --repeats and --decode must be >= 1');
  // sotto-relaxed@DIR: that build from another --wasm-dir (e.g. a copy of the build before a change, to compare
  // the two in the same browser under the same load).
  for (const e of opts.engines) if (!ENGINES.includes(e.split('@')[0])) throw new Error(`unknown engine ${e} (known: ${ENGINES.join(', ')}, sotto-*@DIR)`);
  if (opts.models.length === 0) opts.models = [join(ROOT, 'build', 'models', 'qwen2.5-0.5b-random-q4_0.gguf')];
  return opts;
}


// Repository path -> URL path of the test server (which serves the repository root).
function urlPath(file) {
  const rel = relative(ROOT, resolve(file));
  if (rel.startsWith('..')) throw new Error(`${file} is not under the repository root ${ROOT}`);
  return `/${rel.split('\\').join('/')}`;
}

// Runs in the page. Every engine gets the same interface, run(ids, nTokens): from an empty KV cache, prefill
// `ids`, then pick nTokens tokens greedily (decoding each but the last), never stopping early; it resolves
// once the last token is known, with {tokens, own} (own: the engine's own timings, where it reports them).
// The page's clock times each call, so message latency and the greedy pick count alike for every engine.
async function pageSetup({ engine, modelUrl, threads, nCtx, wasmUrls, prompt, prefillSizes, decodePrompt, nDecode }) {
  // prompt: {ids, pieces}; pieces[i] is the text of ids[i] and the text of ids[0..n) tokenizes back to them.
  const textOf = (ids) => prompt.pieces.slice(0, ids.length).join('');
  const fetchBlob = async (url) => {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return r.blob();
  };
  let session;
  const t0 = performance.now();
  if (engine.startsWith('sotto-')) {
    const { Llm } = await import('/web/llm.js');
    const { Engine } = await import('/web/engine.js');
    const variant = engine.slice('sotto-'.length).split('@')[0];
    const eng = await Engine.create({ threads, variant, wasmUrl: wasmUrls[variant] });
    const llm = await Llm.load(modelUrl, { engine: eng, nCtx });
    session = {
      info: `${variant} (${eng.info.wasmUrl.replace(location.origin, '')})`,
      async run(ids, nTokens) {
        // ignoreEos, as the wllama runs: a real model's end of turn must not cut the decode short.
        const r = await llm.generate(ids, { maxTokens: nTokens, greedy: true, ignoreEos: true });
        return { tokens: r.ids.length, own: { prefill_ms: r.prefillMs, decode_tok_s: r.decodeTokensPerS } };
      },
      dispose: async () => {
        await llm.dispose();
        eng.terminate();
      },
    };
  } else if (engine === 'wllama-3.13') {
    const base = '/node_modules/@wllama/wllama/esm';
    const { Wllama } = await import(`${base}/index.js`);
    const w = new Wllama({ default: `${base}/wasm/wllama.wasm` }, { suppressNativeLog: true });
    await w.loadModel([await fetchBlob(modelUrl)], { n_ctx: nCtx, n_batch: nCtx, n_ubatch: nCtx, n_threads: threads, n_gpu_layers: 0 });
    session = {
      info: `multi-thread ${w.isMultithread()}, ${w.getNumThreads()} threads`,
      async run(ids, nTokens) {
        // llama-server's completion (its prompt must be text here: the text of exactly these ids), no
        // prompt cache, EOG tokens banned (ignore_eos).
        const r = await w.createCompletion({ prompt: textOf(ids), max_tokens: nTokens, temperature: 0, cache_prompt: false, ignore_eos: true, stream: false });
        const t = r.timings ?? {};
        if (r.usage?.prompt_tokens !== ids.length) throw new Error(`wllama: the prompt became ${r.usage?.prompt_tokens} tokens, not ${ids.length}`);
        return { tokens: r.usage?.completion_tokens ?? t.predicted_n, own: { prefill_ms: t.prompt_ms, decode_tok_s: t.predicted_per_second } };
      },
      dispose: () => w.exit(),
    };
  } else if (engine === 'wllama-2.3.7') {
    const base = '/node_modules/wllama-2/esm';
    const { Wllama } = await import(`${base}/index.js`);
    const w = new Wllama({ 'single-thread/wllama.wasm': `${base}/single-thread/wllama.wasm`, 'multi-thread/wllama.wasm': `${base}/multi-thread/wllama.wasm` },
      { suppressNativeLog: true });
    await w.loadModel([await fetchBlob(modelUrl)], { n_ctx: nCtx, n_batch: nCtx, n_threads: threads });
    // Its createCompletion takes text; its own loop is kvClear/decode/samplingSample/samplingAccept, which
    // this does with the prompt ids (and EOG tokens banned, though this loop would not stop on them anyway).
    const eog = [w.getEOS(), w.getEOT()].filter((id) => id >= 0);
    session = {
      info: `multi-thread ${w.isMultithread()}, ${w.getNumThreads()} threads`,
      async run(ids, nTokens) {
        await w.kvClear();
        await w.samplingInit({ temp: 0, logit_bias: eog.map((token) => ({ token, bias: -1e9 })) });
        await w.decode(ids, {});
        let { token } = await w.samplingSample();
        for (let n = 1; n < nTokens; ++n) {
          await w.samplingAccept([token]);
          await w.decode([token], {});
          ({ token } = await w.samplingSample());
        }
        return { tokens: nTokens, own: {} };
      },
      dispose: () => w.exit(),
    };
  } else {
    throw new Error(`unknown engine ${engine}`);
  }
  const loadMs = performance.now() - t0;
  const timed = async (n, nTokens) => {
    const ids = prompt.ids.slice(0, n);
    const start = performance.now();
    const r = await session.run(ids, nTokens);
    if (r.tokens !== nTokens) throw new Error(`${engine}: asked for ${nTokens} tokens, got ${r.tokens}`);
    return { ms: performance.now() - start, own: r.own };
  };
  await timed(decodePrompt, 4); // warm-up: memory touched, threads started
  // One round of measurements, called later (rounds of the engines interleave, each in its own page).
  globalThis.benchRound = async () => {
    const round = {};
    for (const n of prefillSizes) {
      const x = await timed(n, 1);
      round[`prefill_${n}_ms`] = x.ms;
      round[`own_prefill_${n}_ms`] = x.own.prefill_ms;
    }
    const one = await timed(decodePrompt, 1);
    const many = await timed(decodePrompt, 1 + nDecode);
    round.decode_ms_per_token = (many.ms - one.ms) / nDecode;
    round.own_decode_tok_s = many.own.decode_tok_s;
    return round;
  };
  globalThis.benchDispose = () => session.dispose();
  return { info: session.info, loadMs };
}

// Runs in the page: a prompt every engine sees as the same token ids, whether it takes ids or text (wllama
// 3.13's completion takes text). Candidates are pseudo-random ordinary ids; those whose text is a space and
// lowercase letters are kept (the pre-tokenizer splits such text at each space, so each piece stays one
// token), and the whole text must tokenize back to exactly the kept ids.
async function pagePrompt({ modelUrl, candidates, n }) {
  const { Llm } = await import('/web/llm.js');
  const llm = await Llm.load(modelUrl, { threads: 1, tokenizerOnly: true });
  try {
    const ids = [], pieces = [];
    for (const id of candidates) {
      const piece = await llm.detokenize([id]);
      if (/^ [a-z]{2,}$/.test(piece)) {
        ids.push(id);
        pieces.push(piece);
        if (ids.length === n) break;
      }
    }
    const back = await llm.tokenize(pieces.join(''), { addSpecial: false });
    if (ids.length !== n || back.length !== n || back.some((id, i) => id !== ids[i]))
      throw new Error(`the prompt text does not tokenize back to its ${n} ids`);
    return { ids, pieces };
  } finally {
    await llm.dispose();
  }
}

async function openPage(browser, baseUrl) {
  const page = await browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(`${baseUrl}web/serve.mjs`); // any same-origin page of the server: cross-origin isolated
  if (!(await page.evaluate(() => crossOriginIsolated))) throw new Error('the page is not cross-origin isolated');
  return { page, logs };
}

async function makePrompt(browser, baseUrl, file) {
  const { page } = await openPage(browser, baseUrl);
  try {
    return await page.evaluate(pagePrompt, { modelUrl: urlPath(file), candidates: randomIds(8192, 42, ORDINARY_VOCAB), n: 256 });
  } finally {
    await page.close();
  }
}

// Opens a page with `engine` loaded and warmed up -> {info, loadMs, round(), close()}.
async function openEngine(browser, baseUrl, engine, file, prompt, opts) {
  const { page, logs } = await openPage(browser, baseUrl);
  const withLogs = async (f) => {
    try {
      return await f();
    } catch (e) {
      e.message += `\nconsole: ${logs.slice(-20).join(' | ')}`;
      throw e;
    }
  };
  try {
    const wasmDir = engine.includes('@') ? resolve(ROOT, engine.split('@')[1]) : opts.wasmDir;
    const wasmUrls = Object.fromEntries(['relaxed', 'simd128'].map((v) => [v, urlPath(join(wasmDir, `wasm-${v}`, 'sotto.wasm'))]));
    const setup = await withLogs(() => page.evaluate(pageSetup, {
      engine, modelUrl: urlPath(file), threads: opts.threads, nCtx: N_CTX, wasmUrls, prompt,
      prefillSizes: PREFILL_SIZES, decodePrompt: DECODE_PROMPT, nDecode: opts.decode,
    }));
    return {
      ...setup,
      round: () => withLogs(() => page.evaluate(() => globalThis.benchRound())),
      close: async () => {
        await page.evaluate(() => globalThis.benchDispose()).catch(() => {});
        await page.close();
      },
    };
  } catch (e) {
    await page.close();
    throw e;
  }
}

// Chromium starts its own session, hence its own autogroup on Linux kernels with autogroup scheduling, where
// nice on this process no longer reaches it. As root, give the browser's autogroup the priority this process
// has (see bench/README.md); elsewhere this does nothing.
function raiseBrowserPriority() {
  let own;
  try {
    own = readFileSync('/proc/self/autogroup', 'utf8').match(/nice (-?\d+)/)?.[1];
  } catch {
    return 'no autogroup scheduling';
  }
  if (own === undefined || Number(own) >= 0) return `autogroup nice ${own ?? '?'} (not raised)`;
  const raised = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      writeFileSync(`/proc/${pid}/autogroup`, own);
      raised.push(pid);
    } catch {
      // not ours, gone, or not permitted
    }
  }
  return `browser autogroup nice ${own} (${raised.length ? `pids ${raised.join(', ')}` : 'not permitted'})`;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  opts.wasmDir = resolve(ROOT, opts.wasmDir);
  for (const f of opts.models) if (!existsSync(f)) throw new Error(`no such model file: ${f} (build/bin/sotto_make_random_gguf makes the default one)`);
  const { server, url: baseUrl } = await startServer(0);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60000 });
  const version = (p) => JSON.parse(readFileSync(join(ROOT, 'node_modules', p, 'package.json'), 'utf8')).version;
  const chromiumVersion = browser.version();
  const priority = raiseBrowserPriority();
  console.error(priority);
  const loadBefore = loadavg();
  const rows = [], bestRows = [], ownRows = [], raw = {};
  try {
    for (const file of opts.models) {
      const name = basename(file);
      const results = {};
      const prompt = await makePrompt(browser, baseUrl, file);
      // Every engine loaded in its own page first, then rounds interleaved (engine A, B, C, D, A, ...) so
      // all see the same background load; an idle page's threads sleep.
      const open = [];
      try {
        for (const engine of opts.engines) {
          console.error(`${name}: loading ${engine} ...`);
          open.push([engine, await openEngine(browser, baseUrl, engine, file, prompt, opts)]);
          results[engine] = { info: open.at(-1)[1].info, loadMs: open.at(-1)[1].loadMs, rounds: [] };
        }
        for (let r = 0; r < opts.repeats; ++r) {
          for (const [engine, e] of open) {
            results[engine].rounds.push(await e.round());
            console.error(`${name} round ${r + 1}: ${engine} ${JSON.stringify(results[engine].rounds.at(-1))} (load ${loadavg()[0].toFixed(2)})`);
          }
        }
      } finally {
        for (const [, e] of open) await e.close();
      }
      raw[name] = results;
      // Medians over rounds for the main table, each engine's best round for the second one. Ratios: ours
      // (the relaxed build, else SIMD128) / that engine, so > 1 means sotto is faster.
      const oursKey = opts.engines.find((e) => e.startsWith('sotto-relaxed')) ?? opts.engines.find((e) => e.startsWith('sotto-'));
      const ours = results[oursKey];
      for (const [table, pick] of [[rows, median], [bestRows, (xs) => Math.min(...xs)]]) {
        const speeds = (r) => ({
          ...Object.fromEntries(PREFILL_SIZES.map((n) => [n, (1000 * n) / pick(r.rounds.map((x) => x[`prefill_${n}_ms`]))])),
          decode: 1000 / pick(r.rounds.map((x) => x.decode_ms_per_token)),
        });
        for (const [engine, r] of Object.entries(results)) {
          const s = speeds(r);
          const ratio = (key) => (ours && r !== ours ? `${(speeds(ours)[key] / s[key]).toFixed(2)}×` : '');
          table.push([name, engine, r.info, String(opts.threads), ...PREFILL_SIZES.map((n) => s[n]), s.decode, ...PREFILL_SIZES.map(ratio), ratio('decode')]);
        }
      }
      for (const [engine, r] of Object.entries(results)) {
        const own = (key) => median(r.rounds.map((x) => x[key]).filter((x) => typeof x === 'number'));
        ownRows.push([name, engine, ...PREFILL_SIZES.map((n) => (own(`own_prefill_${n}_ms`) ? (1000 * n) / own(`own_prefill_${n}_ms`) : '–')),
          own('own_decode_tok_s') ?? '–']);
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  const table = markdownTable;

  const head = ['file', 'engine', 'build', 'threads', ...PREFILL_SIZES.map((n) => `prefill ${n} (tok/s)`), 'decode (tok/s)',
    ...PREFILL_SIZES.map((n) => `ratio prefill ${n}`), 'ratio decode'];
  const report = [
    `# sotto vs wllama in headless Chromium, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical CPUs; Chromium ${chromiumVersion}; ${opts.threads} threads for every engine; ` +
      `median of ${opts.repeats} rounds; context ${N_CTX}, batch ${N_CTX}. wllama ${version('@wllama/wllama')} (@wllama/wllama) and ${version('wllama-2')} ` +
      `(wllama-2, multi-thread build). ${loadLine(loadBefore)}; ${priority}.`,
    '',
    'Page clock, the same for every engine: prefill N = N / time from the call to the first greedy token of an N-token prompt; ' +
      `decode = ${opts.decode} / (time for 1 + ${opts.decode} tokens − time for 1 token) after a ${DECODE_PROMPT}-token prompt. ` +
      'ratio = the first sotto-relaxed engine listed (or, without one, the first sotto engine) speed / that engine\'s: > 1 means it is faster.',
    '',
    table(head, rows),
    '',
    'Best round of each engine (the least disturbed one; on a busy machine the fairer comparison of what each can do):',
    '',
    table(head, bestRows),
    '',
    "Each engine's own timings (inside its worker; wllama 2 reports none), as a cross-check of the page clock:",
    '',
    table(['file', 'engine', ...PREFILL_SIZES.map((n) => `prefill ${n} (tok/s)`), 'decode (tok/s)'], ownRows),
    '',
    rawDetails(raw),
  ].join('\n');
  writeReport(report, opts.out);
}

await main();
