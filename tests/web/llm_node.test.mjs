// The language model in WebAssembly under Node against the native CLI and llama.cpp: `node web/cli.mjs`
// (the SIMD128 build on worker_threads) must print what `build/bin/sotto` prints for generate --json (ids
// and text; timings differ), tokenize and detokenize, and its greedy tokens must be llama.cpp's recorded ones
// (tests/data/llm_reference.json, written by tools/llama_reference.mjs).
// Run: node --test tests/web/llm_node.test.mjs   (needs build/bin/sotto or SOTTO_CLI, and build/wasm-simd128)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const nativeCli = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
const webCli = `${repo}web/cli.mjs`;
const skip = !existsSync(nativeCli) ? `no CLI at ${nativeCli}` : !existsSync(`${repo}build/wasm-simd128/sotto.wasm`) && 'build wasm-simd128 first';
const recorded = JSON.parse(readFileSync(`${repo}tests/data/llm_reference.json`, 'utf8'));
const MODELS = ['stories260K.gguf', 'stories260K-q8_0.gguf', 'stories260K-q4_0.gguf'];

function run(which, args, input) {
  const [cmd, argv] = which === 'native' ? [nativeCli, args] : [process.execPath, [webCli, ...args]];
  return execFileSync(cmd, argv, { input: input === undefined ? undefined : Buffer.from(input), encoding: 'buffer', timeout: 120000, stdio: ['pipe', 'pipe', 'pipe'] });
}

function withoutTimings(jsonText) {
  const { prefill_ms: _p, decode_tokens_per_s: _d, ...rest } = JSON.parse(jsonText);
  return rest;
}

for (const model of MODELS) {
  test(`${model}: generate --json --greedy -n 64 in wasm equals native and llama.cpp`, { skip }, () => {
    for (const ref of recorded.models[model]) {
      const args = ['generate', '-m', `${fixtures}/llm/${model}`, '-p', ref.prompt, '-n', '64', '--greedy', '--json', '--threads', '2'];
      const web = withoutTimings(run('web', args));
      const native = withoutTimings(run('native', args));
      assert.deepEqual(web, native, `${model} "${ref.prompt}": wasm and native differ`);
      assert.deepEqual(web.prompt_ids, ref.prompt_ids, `${model} "${ref.prompt}": prompt ids`);
      assert.deepEqual(web.ids, ref.ids, `${model} "${ref.prompt}": ids vs llama.cpp`);
      assert.equal(web.text, ref.text, `${model} "${ref.prompt}": text vs llama.cpp`);
    }
  });
}

// Sampled tokens are equal only while the logits round alike on both sides: the draw compares a cumulative
// probability with a uniform number, so a last-bit difference can (rarely) pick the neighbour. F32 weights
// with these seeds draw the same tokens on AVX2 and SIMD128 (measured); quantized types run different
// activation kernels per platform and are checked greedily above.
test('sampling (temperature, top-k/p, min-p, penalty, seed, stop string) and top logprobs: wasm equals native', { skip }, () => {
  const model = `${fixtures}/llm/stories260K.gguf`;
  for (const seed of ['1', '77', '5']) {
    const args = ['generate', '-m', model, '-p', 'One day, a bird', '-n', '48', '--temp', '0.9', '--top-k', '30',
                  '--top-p', '0.9', '--min-p', '0.02', '--repeat-penalty', '1.1', '--seed', seed, '--stop', 'park',
                  '--json', '--top-logprobs', '5'];
    const web = withoutTimings(run('web', args));
    const native = withoutTimings(run('native', args));
    const { top_logprobs: webTop, ...webRest } = web;
    const { top_logprobs: nativeTop, ...nativeRest } = native;
    assert.deepEqual(webRest, nativeRest, `seed ${seed}`);
    assert.deepEqual(webTop.map((t) => t.id), nativeTop.map((t) => t.id));
    // f32 sums in another order (SIMD128 vs AVX2 lanes): llm_reference.test.mjs measured up to 9e-4 against
    // llama.cpp for the same reason.
    for (let i = 0; i < webTop.length; i++) assert.ok(Math.abs(webTop[i].logprob - nativeTop[i].logprob) < 2e-3);
  }
  // The streamed (non --json) output, stop string included, is the same bytes.
  const args = ['generate', '-m', model, '-p', 'Lily and Tom', '-n', '40', '--temp', '0.7', '--seed', '5', '--stop', 'ball'];
  assert.equal(run('web', args).toString(), run('native', args).toString());
});

test('generate errors: one line, the same exit codes as native', { skip }, () => {
  const cases = [
    [['generate', '-m', `${repo}README.md`, '--prompt-ids', '1'], /gguf/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`, '--prompt-ids', '1,2', '--ctx', '1'], /context/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`, '--prompt-ids', '1,999999'], /vocabulary/],
    [['generate', '-m', `${fixtures}/llm/stories260K.gguf`], /prompt/],
  ];
  for (const [args, pattern] of cases) {
    const status = {};
    for (const which of ['web', 'native']) {
      try {
        run(which, args);
        assert.fail(`${which}: expected a failure: ${args.join(' ')}`);
      } catch (e) {
        if (e.code === 'ERR_ASSERTION') throw e;
        status[which] = e.status;
        assert.match(e.stderr.toString().split('\n')[0], pattern, `${which}: ${args.join(' ')}`);
      }
    }
    assert.equal(status.web, status.native, args.join(' '));
  }
});

// llama.cpp's tokenizer test strings for each vocab file, plus a few of our own (special tokens, broken UTF-8
// is not possible through JSON, emoji, long words).
function vocabStrings(vocab) {
  const extra = ['<|im_start|>user\nHi<|im_end|>', '<s> [INST] hi [/INST]', '👋🏽 ünïcødé  x\t\ty', 'a'.repeat(300), ''];
  return [...readFileSync(`${fixtures}/tokenizer/${vocab}.inp`, 'utf8').split('\n__ggml_vocab_test__\n'), ...extra];
}

for (const vocab of ['ggml-vocab-llama-spm.gguf', 'ggml-vocab-llama-bpe.gguf', 'ggml-vocab-qwen2.gguf']) {
  test(`${vocab}: tokenize and detokenize in wasm equal native`, { skip }, () => {
    const path = `${fixtures}/tokenizer/${vocab}`;
    const strings = vocabStrings(vocab);
    const input = strings.map((s) => JSON.stringify(s)).join('\n') + '\n';
    for (const flags of [[], ['--special'], ['--no-bos']]) {
      const web = run('web', ['tokenize', '-m', path, '--jsonl', ...flags], input).toString();
      const native = run('native', ['tokenize', '-m', path, '--jsonl', ...flags], input).toString();
      assert.equal(web.split('\n').length, strings.length + 1);
      assert.equal(web, native, `tokenize ${flags.join(' ')}`);
      if (flags[0] !== '--special') continue;
      for (const detokFlags of [[], ['--hide-special']]) {
        const webText = run('web', ['detokenize', '-m', path, '--jsonl', ...detokFlags], web).toString().trim().split('\n').map((l) => JSON.parse(l));
        const nativeText = run('native', ['detokenize', '-m', path, '--jsonl', ...detokFlags], web).toString().trim().split('\n').map((l) => JSON.parse(l));
        assert.deepEqual(webText, nativeText, `detokenize ${detokFlags.join(' ')}`);
      }
    }
    // Plain stdin in and out: the same bytes.
    const text = Buffer.from(strings.slice(0, 20).join('\n'));
    const ids = run('native', ['tokenize', '-m', path], text);
    assert.deepEqual(run('web', ['tokenize', '-m', path], text), ids);
    assert.deepEqual(run('web', ['detokenize', '-m', path], ids), run('native', ['detokenize', '-m', path], ids));
  });
}

// bench llm (a benchmark: its output is checked, not its speed): the same JSON keys in wasm as native (but the
// native process's CPU-time figures, which wasm has no clock for), every figure positive, decoding after the prompt --depth asks for, and a bad --depth a usage error (exit 2).
test('bench llm --json: the native keys, positive figures, --depth', { skip }, () => {
  const path = `${fixtures}/llm/stories260K.gguf`;
  for (const depth of [[], ['--depth', '300']]) {
    const args = ['bench', 'llm', '-m', path, '--threads', '1', '--repeats', '1', '--json', ...depth];
    const web = JSON.parse(run('web', args).toString());
    const native = JSON.parse(run('native', args).toString());
    const cpuTime = new Set(['turn_cpu_ms', 'decode_cpu_ms_per_token']);
    assert.deepEqual(Object.keys(web), Object.keys(native).filter((k) => !cpuTime.has(k)));
    assert.ok(native.decode_cpu_ms_per_token > 0, `decode_cpu_ms_per_token: ${native.decode_cpu_ms_per_token}`);
    assert.equal(web.decode_after, depth.length ? 300 : 16);
    assert.equal(native.decode_after, web.decode_after);
    for (const key of ['prefill_64_ms', 'prefill_256_ms', 'decode_ms_per_token', 'decode_tokens_per_s']) assert.ok(web[key] > 0, `${key}: ${web[key]}`);
  }
  for (const which of ['web', 'native']) {
    let failed = null;
    try {
      run(which, ['bench', 'llm', '-m', path, '--depth', '0']);
    } catch (e) {
      failed = e;
    }
    assert.equal(failed?.status, 2, which);
  }
});
