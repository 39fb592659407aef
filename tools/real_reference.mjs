// Records llama.cpp's side of the real-model checks (tools/real_models.mjs: prompt ids, greedy ids, top-2 at
// every step) for each model in models/, so a machine without Node (the GPU machine of
// bench/gpu_real_check.py) can hold our output against it. Same runs as tests/web/llm_real.test.mjs.
//
//   node tools/real_reference.mjs [--out bench/data/real_reference.json]
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { loadLlama } from './llama_reference.mjs';
import { NEAR_TIE, N_GENERATE, REAL_MODELS, cases, reference } from './real_models.mjs';

const repo = fileURLToPath(new URL('../', import.meta.url));
const outArg = process.argv.indexOf('--out');
const out = outArg > 0 ? process.argv[outArg + 1] : `${repo}bench/data/real_reference.json`;
const llama = await loadLlama();
const result = { source: 'node-llama-cpp 3.21.1, CPU, 1 thread, context 256, greedy', near_tie: NEAR_TIE, n_generate: N_GENERATE, models: {} };
for (const m of REAL_MODELS) {
  const path = `${repo}models/${m.file}`;
  if (!existsSync(path)) {
    console.error(`skipping ${m.file}: not in models/ (bash scripts/get-models.sh)`);
    continue;
  }
  const model = await llama.loadModel({ modelPath: path });
  try {
    result.models[m.file] = [];
    for (const [text, special] of cases(m)) {
      const r = await reference(model, text, special);
      result.models[m.file].push({ text, special, prompt_ids: r.promptIds, ids: r.ids,
                                   top2: r.top2.map((t) => t.map(({ id, logprob }) => [id, logprob])),
                                   near: r.near.map((t) => t.map(({ id, logprob }) => [id, logprob])) });
      console.error(`${m.file}: ${JSON.stringify(text.slice(-40))}: ${r.ids.length} tokens`);
    }
  } finally {
    await model.dispose();
  }
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(result)}\n`);
console.error(`wrote ${out}`);
