// The real models' checks against llama.cpp, shared by tests/web/llm_real.test.mjs (CPU, natively and in
// wasm, live) and tools/real_reference.mjs (which records llama.cpp's side for machines without Node, such as
// the GPU machine bench/gpu_real_check.py runs on): the prompts, the chat formats, and llama.cpp's greedy
// continuation with its two best tokens at every step.
//
// Why two best tokens: both engines quantize activations the same way and use the same f16 attention
// arithmetic, but add the float terms of the matrix products in another order, so logits differ by rounding
// amplified through 18-24 layers (first-step log-probabilities up to ~0.1 apart on these models). Where
// llama.cpp's two best tokens are closer than that, either engine may rightly pick the other one. So a run
// must match llama.cpp token for token up to the first step where llama.cpp's top-2 margin is below NEAR_TIE,
// and there ours must be one of llama.cpp's tokens within NEAR_TIE of its best: usually its second choice,
// but three can tie (seen: Gemma 3 270M, "The capital of France is", step 21 on an AVX2-only machine, where
// llama.cpp's own kernels differ from an AVX-512 machine's: its best three within 0.07, ours its third).

export const N_GENERATE = 64;
// nats: the first-step differences plus room for the drift over up to 64 steps. Machines differ: on AVX-512
// ones the first-step differences stayed <= 0.1 and the largest margin at a divergence was 0.19 (Gemma 3 270M,
// step 18); on a 2-core AVX2-only one (2026-12-01), where llama.cpp runs other kernels, Gemma 3 270M's
// first-step differences reached 0.17 and its divergences came at margins of 0.30 (step 29) and 0.32 (step 23).
// A real mistake (a wrong norm, RoPE base, window or template) moves first-step logprobs by whole nats, which
// the tests check separately (FIRST_STEP_TOLERANCE).
export const NEAR_TIE = 0.5;
export const FIRST_STEP_TOLERANCE = 0.5;
// An undecided step: llama.cpp's best token is below this probability (logprob -3). There the distribution is
// flat and single tokens' logprobs move by more than NEAR_TIE between kernel paths, llama.cpp's own included.
// Measured (Gemma 3 270M, chat "...reverses a string.", step 11, best token at -4.51): token 148178 is at
// -5.18 on llama.cpp's decode path and -4.94 when the same 11 tokens go through its batch path; ours, on the
// AVX2 kernels of a CPU without AVX-512 VNNI, made it our best by 0.06. So at an undecided step ours may be
// any of llama.cpp's UNDECIDED_TOP best tokens, and the comparison ends there: the texts have parted where
// neither engine was sure.
export const UNDECIDED_LOGPROB = -3;
export const UNDECIDED_TOP = 8;

// The chat formats, as the models' templates write one user turn (Qwen2.5's Jinja template with its default
// system prompt; Gemma 3's turn markers; the Gemma 3 270M file is the base model and has no template).
const chatml = (user) => '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.' +
  `<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`;
const gemmaTurn = (user) => `<start_of_turn>user\n${user}<end_of_turn>\n<start_of_turn>model\n`;

export const REAL_MODELS = [
  { file: 'qwen2.5-coder-0.5b-instruct-q4_k_m.gguf', chat: chatml },
  { file: 'gemma-3-270m-q4_k_m.gguf', chat: gemmaTurn },
];
// Two of each keep the test to a few minutes on a 2-core machine (llama.cpp runs on one thread).
export const PLAIN = ['The capital of France is', 'Once upon a time, in a small village,'];
export const CHAT = ['What is the capital of France?', 'Write a Python function that reverses a string.'];

// [text, parse special tokens] for every prompt of a model.
export const cases = ({ chat }) => [...PLAIN.map((p) => [p, false]), ...CHAT.map((p) => [chat(p), true])];

// llama.cpp's greedy continuation: prompt ids (its tokenizer, BOS as the file says), the ids it picks, and at
// each step its two best tokens with their logprobs (top2), every token within NEAR_TIE of its best (near,
// best first; at most 8), and its UNDECIDED_TOP best tokens (top, best first).
export async function reference(model, text, special) {
  const promptIds = [...(model.tokens.shouldPrependBosToken ? [model.tokens.bos] : []), ...model.tokenize(text, special)];
  const ctx = await model.createContext({ contextSize: 256, threads: 1 });
  const ids = [], top2 = [], near = [], top = [];
  try {
    const seq = ctx.getSequence();
    for await (const step of seq.evaluateWithMetadata(promptIds, { probabilities: true }, { temperature: 0 })) {
      const best = [...step.probabilities.entries()].slice(0, Math.max(8, UNDECIDED_TOP)).map(([id, p]) => ({ id, logprob: Math.log(p) }))
        .sort((a, b) => b.logprob - a.logprob);
      top2.push(best.slice(0, 2));
      near.push(best.filter((t) => best[0].logprob - t.logprob < NEAR_TIE).slice(0, 8));
      top.push(best.slice(0, UNDECIDED_TOP));
      ids.push(step.token);
      if (ids.length >= N_GENERATE) break;
    }
  } finally {
    await ctx.dispose();
  }
  return { text, promptIds, ids, top2, near, top };
}

// Token for token up to the first near tie or undecided step: {at (-1: all equal), margin (of llama.cpp's best
// over the token we took), rank (of that token in llama.cpp's order: 2 = its second choice), undecided (true
// where llama.cpp's best was below UNDECIDED_LOGPROB)} or an error message. Recorded references without `near`
// (tools/real_reference.mjs's older files) allow the second choice only; without `top`, no undecided steps.
export function nearTieMatch(oursIds, ref) {
  const at = ref.ids.findIndex((id, i) => oursIds[i] !== id);
  if (at === -1) return { at };
  const [best, second] = ref.top2[at];
  const near = ref.near?.[at] ?? [best, second].filter((t) => best.logprob - t.logprob < NEAR_TIE);
  const rank = near.findIndex((t) => t.id === oursIds[at]);
  if (rank > 0) return { at, margin: best.logprob - near[rank].logprob, rank: rank + 1 };
  const top = best.logprob < UNDECIDED_LOGPROB ? ref.top?.[at] ?? [] : [];
  const topRank = top.findIndex((t) => t.id === oursIds[at]);
  if (topRank > 0) return { at, margin: best.logprob - top[topRank].logprob, rank: topRank + 1, undecided: true };
  return { at, margin: best.logprob - second.logprob,
           error: `token ${at} is ${oursIds[at]}, llama.cpp's is ${best.id} with a margin of ` +
                  `${(best.logprob - second.logprob).toFixed(4)} over its second choice ${second.id}, and ours is ` +
                  `not among its tokens within ${NEAR_TIE} of the best (${near.map((t) => t.id).join(', ')})` };
}
