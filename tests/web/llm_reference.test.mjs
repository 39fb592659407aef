// The language model against llama.cpp: `sotto generate --json` (native CLI) on the stories260K fixtures
// (F32, Q8_0, Q4_0, and the F32 weights rewritten as qwen2 and qwen3) must write the same 64 greedy tokens as llama.cpp for every prompt, and its first-step
// log-probabilities must be within LOGPROB_TOLERANCE of llama.cpp's.
//
// llama.cpp runs live through node-llama-cpp when it is installed (repo node_modules, or NODE_LLAMA_CPP =
// path to its dist/index.js); otherwise the recorded tests/data/llm_reference.json (tools/llama_reference.mjs)
// is used. Prompt ids come from llama.cpp's tokenizer, so the model is tested apart from ours; one extra test
// checks that our tokenizer gives the same ids.
//
// Tolerance: both sides compute in f32 with the same quantization of activations (q8_0 for q8_0/q4_0
// weights, f16 for f16 weights), the same f16 KV cache and the same flash-attention arithmetic, but sums run
// in a different order (SIMD lanes, tiling), so logits differ by float rounding amplified through 5 layers.
// Measured on x86-64 (AVX2 kernels): at most 9e-4 (F32 weights: f32 dot products summed in another order
// than ggml's) and 1e-6 (Q8_0 / Q4_0: integer dots, so only the final scaling rounds differently). 5e-3 leaves
// room for other CPUs' kernels; real mistakes (an f32 instead of an f16 KV cache, a wrong RoPE layout, a
// missing bias) move logprobs by far more.
//
// Run: node --test tests/web/llm_reference.test.mjs   (needs build/bin/sotto, or SOTTO_CLI=path)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

import { MODELS, N_GENERATE, PROMPTS, VARIANTS, loadLlama, reference, writeVariant } from '../../tools/llama_reference.mjs';

const LOGPROB_TOLERANCE = 0.005;
const repo = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const cliPath = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
const haveCli = existsSync(cliPath);

let llama = null;
try {
  llama = await loadLlama();
} catch (e) {
  console.log(`# node-llama-cpp not available (${e.code ?? e.message.split('\n')[0]}): comparing with the recorded ` +
              'tests/data/llm_reference.json instead of running llama.cpp live');
}
const recorded = JSON.parse(readFileSync(`${repo}tests/data/llm_reference.json`, 'utf8'));

// The fixtures, plus stories260K rewritten as qwen2 and qwen3 (deterministic bytes, made fresh in a temp dir).
const variantDir = mkdtempSync(`${tmpdir()}/sotto-llm-test-`);
const cases = MODELS.map((m) => [m, `${fixtures}/llm/${m}`]);
for (const arch of VARIANTS) {
  writeVariant(`${fixtures}/llm/stories260K.gguf`, arch, `${variantDir}/${arch}.gguf`);
  cases.push([`stories260K-as-${arch}`, `${variantDir}/${arch}.gguf`]);
}

async function expected(name, path) {
  return llama ? reference(llama, path, PROMPTS, N_GENERATE) : recorded.models[name];
}

function sotto(...args) {
  return execFileSync(cliPath, args, { encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'pipe', 'pipe'] });
}

for (const [modelFile, modelPath] of cases) {
  test(`${modelFile}: 64 greedy tokens identical to llama.cpp, first-step logprobs within ${LOGPROB_TOLERANCE}`,
       { skip: !haveCli && `no CLI at ${cliPath}` }, async () => {
    for (const ref of await expected(modelFile, modelPath)) {
      const out = JSON.parse(sotto('generate', '-m', modelPath, '--prompt-ids',
                                   ref.prompt_ids.join(','), '-n', String(ref.ids.length), '--greedy', '--json',
                                   '--top-logprobs', '10', '--ctx', '256'));
      const firstDiff = ref.ids.findIndex((id, i) => out.ids[i] !== id);
      assert.equal(firstDiff, -1, `${modelFile} "${ref.prompt}": first different token at ${firstDiff}: ` +
                   `ours ${out.ids.slice(firstDiff, firstDiff + 4)} vs llama.cpp ${ref.ids.slice(firstDiff, firstDiff + 4)}`);
      assert.deepEqual(out.ids, ref.ids);
      assert.equal(out.text, ref.text, `${modelFile} "${ref.prompt}": detokenized text`);
      const ours = new Map(out.top_logprobs.map((t) => [t.id, t.logprob]));
      let maxDiff = 0;
      for (const { id, logprob } of ref.top.slice(0, 5)) {
        assert.ok(ours.has(id), `${modelFile} "${ref.prompt}": llama.cpp's top token ${id} is not in our top 10`);
        maxDiff = Math.max(maxDiff, Math.abs(ours.get(id) - logprob));
      }
      assert.ok(maxDiff < LOGPROB_TOLERANCE, `${modelFile} "${ref.prompt}": logprob max diff ${maxDiff}`);
      console.log(`# ${modelFile} "${ref.prompt}": 64/64 tokens, logprob max diff ${maxDiff.toExponential(2)}`);
    }
  });
}

test('our tokenizer gives llama.cpp\'s prompt ids (BOS included)', { skip: !haveCli && `no CLI at ${cliPath}` },
     async () => {
  for (const ref of await expected('stories260K.gguf', `${fixtures}/llm/stories260K.gguf`)) {
    const out = JSON.parse(sotto('generate', '-m', `${fixtures}/llm/stories260K.gguf`, '-p', ref.prompt, '-n', '1',
                                 '--greedy', '--json'));
    assert.deepEqual(out.prompt_ids, ref.prompt_ids, ref.prompt);
  }
});

test('bad input: one-line error and a non-zero exit', { skip: !haveCli && `no CLI at ${cliPath}` }, () => {
  const cases = [
    [['generate', '-m', `${repo}README.md`, '--prompt-ids', '1'], /gguf/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`, '--prompt-ids', '1,2', '--ctx', '1'], /context/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`, '--prompt-ids', '1,999999'], /vocabulary/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`], /prompt/],
  ];
  for (const [args, pattern] of cases) {
    let failure = null;
    try {
      sotto(...args);
    } catch (e) {
      failure = e;
    }
    assert.ok(failure, `expected a failure: ${args.join(' ')}`);
    assert.ok(failure.status === 1 || failure.status === 2, `exit code ${failure.status}`);
    const firstLine = failure.stderr.split('\n')[0];
    assert.match(firstLine, pattern);
  }
});
