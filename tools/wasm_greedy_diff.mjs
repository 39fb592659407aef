// Greedy tokens of one model from two wasm builds in headless Chromium (2 threads each), prompt by prompt: a
// kernel change that is meant to keep every float (src/cpu/quant_dot_fast_wasm.cpp) must give the same tokens
// as the build before it. Plain and chat-formatted prompts, 48 tokens each, end of turn ignored.
//
//   node tools/wasm_greedy_diff.mjs [--variant relaxed] [--tokens 48] DIR_A DIR_B FILE.gguf
//
// DIR_*: directories under the repository root holding wasm-<variant>/sotto.wasm; FILE under the root too.
// Exit status 1 when any prompt's tokens differ.
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer } from '../web/serve.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PROMPTS = [
  'The capital of Australia is',
  'def fibonacci(n):',
  'Once upon a time, in a small village by the sea,',
  'Write a haiku about autumn leaves.',
  'Explain in one sentence why the sky is blue.',
];

const opts = { variant: 'relaxed', tokens: 48, args: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === '--variant') opts.variant = argv[++i];
  else if (argv[i] === '--tokens') opts.tokens = Number(argv[++i]);
  else opts.args.push(argv[i]);
}
if (opts.args.length !== 3) throw new Error('usage: wasm_greedy_diff.mjs [--variant relaxed] [--tokens 48] DIR_A DIR_B FILE.gguf');
const [dirA, dirB, file] = opts.args;
const url = (p) => `/${relative(ROOT, resolve(ROOT, p))}`;

const { server, url: base } = await startServer(0);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  timeout: 60000,
});
let differ = 0;
try {
  const runs = [];
  for (const dir of [dirA, dirB]) {
    const page = await browser.newPage();
    await page.goto(`${base}web/serve.mjs`);
    runs.push(await page.evaluate(async ({ variant, wasmUrl, modelUrl, prompts, tokens }) => {
      const { Engine } = await import('/web/engine.js');
      const { Llm } = await import('/web/llm.js');
      const engine = await Engine.create({ threads: 2, variant, wasmUrl });
      const llm = await Llm.load(modelUrl, { engine, nCtx: 512 });
      const out = [];
      try {
        for (const p of prompts) {
          for (const chat of [false, true]) {
            // chat: Qwen2.5's template written out (the default chat model; other models read it as text).
            const ids = chat
              ? await llm.tokenize(`<|im_start|>user\n${p}<|im_end|>\n<|im_start|>assistant\n`, { parseSpecial: true })
              : await llm.tokenize(p);
            const r = await llm.generate(ids, { maxTokens: tokens, greedy: true, ignoreEos: true });
            out.push({ prompt: p, chat, ids: r.ids });
          }
        }
      } finally {
        await llm.dispose();
        engine.terminate();
      }
      return out;
    }, { variant: opts.variant, wasmUrl: url(`${dir}/wasm-${opts.variant}/sotto.wasm`), modelUrl: url(file), prompts: PROMPTS, tokens: opts.tokens }));
    await page.close();
  }
  const [a, b] = runs;
  for (let i = 0; i < a.length; ++i) {
    const first = a[i].ids.findIndex((id, k) => id !== b[i].ids[k]);
    const same = first < 0 && a[i].ids.length === b[i].ids.length;
    if (!same) differ++;
    console.log(`${same ? 'same' : `DIFFER at ${first}`}  ${a[i].chat ? 'chat ' : 'plain'} ${JSON.stringify(a[i].prompt)}: ${a[i].ids.length} tokens${same ? '' : ` ${JSON.stringify(a[i].ids)} vs ${JSON.stringify(b[i].ids)}`}`);
  }
  console.log(`${a.length - differ} of ${a.length} prompts give the same ${opts.tokens} greedy tokens in ${dirA} and ${dirB} (${opts.variant})`);
} finally {
  await browser.close();
  server.close();
}
process.exit(differ ? 1 : 0);
