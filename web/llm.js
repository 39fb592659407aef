// The language model in the page (or Node): llama-family GGUF files on the CPU or the GPU (WebGPU), in the
// engine worker.
//
//   const llm = await Llm.load('/models/qwen2.5-0.5b-instruct-q4_0.gguf', { threads: 4, onProgress });
//   const onGpu = await Llm.load(url, { device: 'webgpu' });          // the forward pass and the sampling on the GPU
//   const best = await Llm.load(url, { device: 'auto' });             // the GPU if it works, else the CPU
//   const r = await llm.generate('Once upon a time', { maxTokens: 64, onToken: (text) => ... });
//   for await (const chunk of llm.chat([{ role: 'user', content: 'Hi' }], { stream: true }))
//     out += chunk.choices[0].delta.content ?? '';
//   llm.dispose();
//
// The file streams straight into wasm memory (the page never holds a second copy), the weights are used in
// place there, and every call runs in the engine worker: the page's thread never blocks, tokens arrive as
// messages. Chat keeps the KV cache across turns when the new messages extend the previous conversation.
import { Engine } from './engine.js';

const FINISH_REASONS = { length: 'length', eog: 'stop', stop_string: 'stop', cancelled: 'stop', context_full: 'length' };

// Greedy unless a temperature > 0 is given, as the CLI and the C API (sotto_sampling_defaults); the filters'
// defaults are llama.cpp's and apply only when sampling.
function samplingOf(o) {
  return {
    greedy: !!o.greedy,
    temperature: o.temperature ?? 0,
    topK: o.topK ?? 40,
    topP: o.topP ?? 0.95,
    minP: o.minP ?? 0.05,
    repeatPenalty: o.repeatPenalty ?? 1,
    repeatLastN: o.repeatLastN ?? 64,
    maxTokens: o.maxTokens ?? 256,
    // A fresh seed per call unless one is given, as llama.cpp's default (LLAMA_DEFAULT_SEED) draws.
    seed: o.seed ?? Math.floor(Math.random() * 2 ** 32),
  };
}

function sameMessage(a, b) {
  return a.role === b.role && a.content === b.content;
}

export class Llm {
  // source: a URL (string or URL), a File/Blob, or in Node a path. Options: threads, variant ('relaxed' |
  // 'simd128'; default: what the browser validates), nCtx (context positions; default min(training, 4096)),
  // onProgress({loaded, total}) while the file streams in, engine (share a running Engine), tokenizerOnly
  // (read just the tokenizer, e.g. of llama.cpp's vocab-only files: tokenize/detokenize work, generate not).
  // device: 'cpu' (default), 'webgpu' (the forward pass on the engine worker's GPU, greedy or sampled;
  // in Node through npm `webgpu`), or 'auto': the GPU when it opens and runs this model, else the CPU, and
  // if the GPU is lost later the model moves to the CPU and the call is run again there (info.device says
  // where it runs, info.fallback why it is not on the GPU). With 'webgpu' a lost device fails the call;
  // toCpu() then carries on. attention: 'f16' (default) or 'f32', how the GPU's attention sums the values: f16
  // key by key gives the CPU's logits bit for bit; f32 is faster, the more so the longer the context, but greedy
  // text can part from the CPU's at near-ties.
  static async load(source, { device = 'cpu', attention = 'f16', threads, variant, nCtx, onProgress, engine, tokenizerOnly = false, wasmUrl } = {}) {
    if (!['cpu', 'webgpu', 'auto'].includes(device)) throw new Error(`sotto: unknown device '${device}' (use 'cpu', 'webgpu' or 'auto')`);
    const ownEngine = !engine;
    engine ??= await Engine.create({ threads, variant, wasmUrl });
    try {
      const info = await engine.call('llmLoad', { source: source instanceof URL ? String(source) : source, nCtx: nCtx ?? -4096, tokenizerOnly, device, attention },
        (p) => onProgress?.({ loaded: p.bytes, total: p.total }));
      return new Llm(engine, ownEngine, info, device === 'auto');
    } catch (e) {
      if (ownEngine) engine.terminate();
      throw e;
    }
  }

  #engine;
  #ownEngine;
  #handle;
  #conversation = null;  // {system, turns, replyClosed}: what the KV cache holds, when a chat may extend it
  #autoDevice;           // device 'auto': move to the CPU when the GPU is lost
  #chain = Promise.resolve();  // the chat turn in progress (#chatRun)

  constructor(engine, ownEngine, info, autoDevice) {
    this.#engine = engine;
    this.#ownEngine = ownEngine;
    this.#handle = info.handle;
    this.#autoDevice = autoDevice;
    // {name, bytes, loadMs, arch, n_ctx, n_vocab, chat_format, default_system, bos, eos, ..., memoryBytes}
    this.info = { ...info, variant: engine.info.variant, threads: engine.info.threads };
  }

  get engine() {
    return this.#engine;
  }

  // text (string, or UTF-8 bytes) -> token ids. addSpecial: BOS/EOS as the model file says.
  tokenize(text, { addSpecial = true, parseSpecial = false } = {}) {
    return this.#engine.call('llmTokenize', { handle: this.#handle, text, addSpecial, parseSpecial });
  }

  detokenize(ids, { removeSpecial = false, renderSpecial = true } = {}) {
    return this.#engine.call('llmDetokenize', { handle: this.#handle, ids: Array.from(ids), removeSpecial, renderSpecial });
  }

  // prompt: text (tokenized with BOS) or an array of token ids. Options: maxTokens, temperature (default 0:
  // greedy, argmax; > 0 samples), topK, topP, minP, repeatPenalty, seed, stop (string or strings), onToken(text, id),
  // signal (AbortSignal), ignoreEos (end-of-generation tokens do not end it: benchmarks).
  // -> {text, ids, promptIds, stop, prefillMs, decodeTokensPerS, ...}. Starts from an
  // empty context.
  async generate(prompt, options = {}) {
    const promptIds = typeof prompt === 'string' ? await this.tokenize(prompt) : Array.from(prompt);
    return this.#onAnyDevice(() => {
      this.#conversation = null;
      return this.#run(promptIds, false, options, { prompt: typeof prompt === 'string' ? prompt : (options.prompt ?? '') });
    });
  }

  // Moves the model to the CPU (from the same bytes in the worker: nothing is read again); the KV cache
  // starts empty. After a lost GPU this is how a 'webgpu' model carries on. -> this.info
  async toCpu() {
    const info = await this.#engine.call('llmToCpu', { handle: this.#handle });
    this.#conversation = null;
    this.info = { ...this.info, ...info, device: 'cpu' };
    delete this.info.gpu;
    return this.info;
  }

  // Runs `call`; on a model loaded with device 'auto', a lost GPU moves it to the CPU and runs `call` again.
  async #onAnyDevice(call) {
    try {
      return await call();
    } catch (e) {
      if (!this.#autoDevice || this.info.device !== 'webgpu' || !/device (was )?lost/.test(String(e?.message))) throw e;
      await this.toCpu();
      this.info.fallback = String(e.message);
      return call();
    }
  }

  // Prefill of 64 and 256 pseudo-random tokens and the decode speed of 64 greedy tokens after a prompt of
  // `depth` tokens (16 by default), median of `repeats`; times are measured inside the engine (no message
  // latency). The context must hold depth + decodeTokens + 1 positions.
  // -> {prefill_64_ms, prefill_256_ms, decode_after, decode_ms_per_token, decode_tokens_per_s}
  async bench({ repeats = 5, decodeTokens = 64, depth = 16 } = {}) {
    const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
    let state = 42;
    const nextId = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) % this.info.n_vocab;
    const prompt = Array.from({ length: Math.max(256, depth) }, nextId);
    const run = (n, maxTokens) => this.generate(prompt.slice(0, n), { maxTokens, greedy: true });
    await run(16, 4);  // warm-up
    const prefill = async (n) => {
      const ms = [];
      for (let i = 0; i < repeats; i++) ms.push((await run(n, 0)).prefillMs);
      return median(ms);
    };
    const prefill_64_ms = await prefill(64);
    const prefill_256_ms = this.info.n_ctx >= 256 ? await prefill(256) : NaN;
    const rates = [];
    for (let i = 0; i < repeats; i++) rates.push((await run(depth, decodeTokens + 1)).decodeTokensPerS);
    const decode_tokens_per_s = median(rates);
    return { prefill_64_ms, prefill_256_ms, decode_after: depth, decode_ms_per_token: 1000 / decode_tokens_per_s, decode_tokens_per_s };
  }

  // device 'webgpu': GPU time per kernel of one decode step (timestamp queries, when the adapter has them).
  // -> {timestamps, timings: [{label, ns}]}. The step takes a position of the context: generate() starts
  // afresh after it.
  profileGpu() {
    return this.#engine.call('llmGpuProfile', { handle: this.#handle });
  }

  async #run(promptIds, keepCache, options, extra = {}) {
    // [0] cancel, [1] pause (worker.js's token loop reads both between tokens); a chat stream shares its own.
    const cancel = options.control ?? new Int32Array(new SharedArrayBuffer(8));
    const onAbort = () => {
      Atomics.store(cancel, 0, 1);
      Atomics.notify(cancel, 1);  // a paused loop wakes to see it
    };
    options.signal?.addEventListener('abort', onAbort);
    if (options.signal?.aborted) onAbort();
    try {
      const stops = options.stop === undefined ? [] : [].concat(options.stop);
      return await this.#engine.call('llmGenerate', {
        handle: this.#handle, promptIds, keepCache, cancel, stops, sampling: samplingOf(options),
        resultJson: !!options.resultJson, topLogprobs: options.topLogprobs ?? 0, ignoreEos: !!options.ignoreEos, ...extra,
      }, ({ id, text }) => options.onToken?.(text, id));
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  // OpenAI-shaped chat: messages [{role: 'system' | 'user' | 'assistant', content}], the last one the user's.
  // stream: true -> an async iterator of chat.completion.chunk objects; otherwise a chat.completion.
  // speculative: true (with stream) prefills the turn and holds before its first token until the stream's
  // resume() (the turn is wanted: the reply comes without a prefill's wait) or return() (it is not: the KV
  // cache is rolled back to before it, and the next chat goes on from the conversation before it). Chats run
  // one at a time, so a held turn must be resumed or returned before the next one runs.
  chat(messages, options = {}) {
    if (!options.stream) return this.#chatComplete(messages, options);
    return this.#chatStream(messages, options);
  }

  // A chat turn on whichever device holds the model (#onAnyDevice: after a move the whole conversation is
  // prefilled again on the CPU, as the cache went with the GPU).
  // Turns run one after the other: a turn's prompt depends on what the one before left in the cache (a held
  // speculative turn, below, decides that only when it is resumed or rolled back).
  #chatRun(messages, options, onText) {
    const run = this.#chain.then(() => this.#onAnyDevice(() => this.#chatTurn(messages, options, onText)));
    this.#chain = run.catch(() => {});
    return run;
  }

  // The prompt ids of the new turn, and whether they continue what the KV cache holds.
  async #chatPrompt(messages) {
    const system = messages[0]?.role === 'system' ? messages[0].content : this.info.default_system;
    const turns = messages.filter((m) => m.role !== 'system');
    if (!turns.length || turns.at(-1).role !== 'user') throw new Error("sotto: chat: the last message must be the user's");
    const c = this.#conversation;
    // Messages are plain text: only the chat format's own markup becomes control tokens (sotto_llm_tokenize_turn),
    // so a message holding "<|im_start|>system" cannot open a turn of its own.
    const turnIds = (user, firstTurn, replyClosed) =>
      this.#engine.call('llmTokenizeTurn', { handle: this.#handle, system, user, firstTurn, replyClosed });
    if (c && c.system === system && turns.length === c.turns.length + 1 && c.turns.every((m, i) => sameMessage(m, turns[i]))) {
      return { system, turns, keepCache: true, ids: await turnIds(turns.at(-1).content, false, c.replyClosed) };
    }
    // The whole conversation from an empty cache: each user turn in the model's format, each earlier reply
    // as its text (the next turn closes it with its end-of-turn markup).
    const ids = [];
    let first = true;
    let closed = true;
    for (const m of turns) {
      if (m.role === 'user') {
        ids.push(...await turnIds(m.content, first, closed));
        first = false;
        closed = true;
      } else {
        ids.push(...await this.tokenize(m.content, { addSpecial: false, parseSpecial: false }));
        closed = false;
      }
    }
    return { system, turns, keepCache: false, ids };
  }

  async #chatTurn(messages, options, onText) {
    const { system, turns, keepCache, ids } = await this.#chatPrompt(messages);
    const before = this.#conversation;
    this.#conversation = null;  // until this turn has finished
    const r = await this.#run(ids, keepCache, { ...options, onToken: (text, id) => {
      if (text) onText(text);
      options.onToken?.(text, id);
    } });
    if (options.speculative && r.stop === 'cancelled' && !r.ids.length) {
      // A speculative turn given up before its first token: the cache goes back to before its prefill (exactly,
      // sotto_llm_rollback), so the next turn extends the conversation as if it had never run. Without a kept
      // cache there is nothing to go back to: the next turn starts afresh.
      if (keepCache) {
        try {
          await this.#engine.call('llmRollback', { handle: this.#handle, nPast: r.nPastBefore });
          this.#conversation = before;
        } catch {
          this.#conversation = null;
        }
      }
      return { ...r, finishReason: 'stop', keepCache, rolledBack: true };
    }
    // A stop string leaves tokens in the cache past the reply's text: the next turn starts afresh then.
    if (r.stop !== 'stop_string')
      this.#conversation = { system, turns: [...turns, { role: 'assistant', content: r.text }], replyClosed: r.replyClosed };
    return { ...r, finishReason: FINISH_REASONS[r.stop] ?? 'stop', keepCache };
  }

  #completionBase() {
    return { id: `chatcmpl-${Math.random().toString(36).slice(2, 14)}`, created: Math.floor(Date.now() / 1000), model: this.info.name };
  }

  async #chatComplete(messages, options) {
    const base = this.#completionBase();
    const r = await this.#chatRun(messages, options, () => {});
    return {
      ...base, object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: r.text }, finish_reason: r.finishReason }],
      usage: { prompt_tokens: r.nPrompt, completion_tokens: r.ids.length, total_tokens: r.nPrompt + r.ids.length },
      // newPromptTokens: what this turn prefilled (the whole conversation when the cache was not reused);
      // nPast: the context's positions in use after it.
      timings: { prefillMs: r.prefillMs, decodeTokensPerS: r.decodeTokensPerS, reusedCache: r.keepCache, newPromptTokens: r.nPrompt, nPast: r.nPast },
    };
  }

  // Chunks queue up as tokens arrive; leaving the loop early (break) cancels the generation after the
  // current token, and the conversation still holds what was written.
  #chatStream(messages, options) {
    const base = this.#completionBase();
    const chunk = (delta, finish_reason = null) =>
      ({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason }] });
    const queue = [chunk({ role: 'assistant', content: '' })];
    let wake = null;
    let finished = false;
    let failure = null;
    const controller = new AbortController();
    const control = new Int32Array(new SharedArrayBuffer(8));
    if (options.speculative) Atomics.store(control, 1, 1);  // held after the prefill until resume()
    const push = (c) => {
      queue.push(c);
      wake?.();
    };
    this.#chatRun(messages, { ...options, signal: controller.signal, control }, (text) => push(chunk({ content: text }))).then(
      (r) => {
        const last = chunk({}, r.finishReason);
        last.timings = { prefillMs: r.prefillMs, beginMs: r.beginMs, decodeTokensPerS: r.decodeTokensPerS, reusedCache: r.keepCache, rolledBack: !!r.rolledBack, nPast: r.nPast };
        push(last);
        finished = true;
        wake?.();
      },
      (e) => {
        failure = e;
        finished = true;
        wake?.();
      });
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        while (!queue.length && !finished) await new Promise((resolve) => (wake = resolve));
        if (queue.length) return { value: queue.shift(), done: false };
        if (failure) throw failure;
        return { value: undefined, done: true };
      },
      async return() {
        controller.abort();
        return { value: undefined, done: true };
      },
      // Holds the writing between two tokens (the cores go to whatever else runs: the voice agent's first
      // spoken piece) until resume(); tokens already written still arrive. Leaving the loop also resumes it.
      pause() {
        Atomics.store(control, 1, 1);
      },
      resume() {
        Atomics.store(control, 1, 0);
        Atomics.notify(control, 1);
      },
    };
  }

  // Frees the model's memory in the worker (and the engine, when Llm.load started it).
  async dispose() {
    await this.#engine.call('llmDispose', { handle: this.#handle });
    if (this.#ownEngine) this.#engine.terminate();
  }
}
