// The lab's "Language model" section: load a GGUF by URL or file (progress bar) on the CPU or the GPU
// (WebGPU; then also GPU time per kernel), generate and chat with streaming, tokens/s and
// prefill time, a check of greedy tokens against llama.cpp's recorded ones (tests/data/llm_reference.json)
// and a small benchmark. It runs on the lab's engine (same threads and wasm build). window.sottoLab.llmLab
// exposes the steps to tests.
import { Llm } from '../llm.js';

const $ = (id) => document.getElementById(id);
const REFERENCE_URL = new URL('../../tests/data/llm_reference.json', import.meta.url);

// The model the page offers first: the best instruction-tuned model scripts/get-models.sh fetches (served
// from the repository's models/ by web/serve.mjs).
const DEFAULT_MODEL = {
  url: '/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf',
  about: 'Default model: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (491 MB, Apache 2.0), the best instruction-tuned ' +
    'model scripts/get-models.sh fetches (its other model, Gemma 3 270M, is a base model: it continues text but ' +
    'was not tuned to chat). Not there yet? Run bash scripts/get-models.sh. /fixtures/llm/stories260K.gguf is a ' +
    '260K-parameter story model for quick checks.',
};
$('llm-url').value = DEFAULT_MODEL.url;
$('llm-default').textContent = DEFAULT_MODEL.about;

let llm = null;
let abort = null;
let messages = [];

function mib(n) {
  return `${(n / 2 ** 20).toFixed(2)} MiB`;
}

function enable(on) {
  for (const id of ['llm-generate', 'llm-check', 'llm-bench', 'chat-input', 'chat-send', 'chat-new']) $(id).disabled = !on;
}

function showError(where, e) {
  where.textContent = '';
  where.append(Object.assign(document.createElement('span'), { className: 'bad', textContent: String(e?.message ?? e) }));
}

async function load(source) {
  enable(false);
  await window.sottoLab.ready;
  await llm?.dispose();
  llm = null;
  $('llm-progress').value = 0;
  $('llm-info').textContent = 'loading…';
  try {
    llm = await Llm.load(source, {
      engine: window.sottoLab.engine,
      device: $('llm-device').value,
      onProgress: ({ loaded, total }) => {
        $('llm-progress').value = total ? loaded / total : 0;
        $('llm-info').textContent = `loading… ${mib(loaded)} of ${total ? mib(total) : '?'}`;
      },
    });
  } catch (e) {
    $('llm-progress').value = 0;  // a failed load must not show a full bar beside its error
    const missingDefault = source === DEFAULT_MODEL.url ? ' (the default model: fetch it with bash scripts/get-models.sh)' : '';
    showError($('llm-info'), `${e?.message ?? e}${missingDefault}`);
    return null;
  }
  const i = llm.info;
  $('llm-progress').value = 1;
  $('llm-info').textContent = `${i.name.split('/').pop()}: ${i.arch}, ${i.n_layer} layers, n_embd ${i.n_embd}, ` +
    `vocabulary ${i.n_vocab}, context ${i.n_ctx}, chat format ${i.chat_format}; ${mib(i.bytes)} read in ` +
    `${i.loadMs.toFixed(0)} ms; wasm memory ${mib(i.memoryBytes)}; ` +
    (i.device === 'webgpu' ? `GPU: ${i.gpu.adapter}, ${i.gpu.dispatches_per_token} dispatches per token` : `${i.variant}, ${i.threads} threads`) +
    (i.fallback ? ` (on the CPU: ${i.fallback})` : '');
  messages = [];
  $('chat-log').textContent = '';
  enable(true);
  $('llm-profile').disabled = i.device !== 'webgpu';
  window.sottoLab.llm = llm;
  return llm;
}

function stats(r) {
  return `prompt ${r.nPrompt} tokens, prefill ${r.prefillMs.toFixed(1)} ms; wrote ${r.ids.length} tokens, ` +
    `${r.decodeTokensPerS.toFixed(1)} tokens/s (stop: ${r.stop})`;
}

async function generate() {
  const temperature = Number($('llm-temp').value);
  $('llm-out').textContent = '';
  abort = new AbortController();
  $('llm-stop').disabled = false;
  try {
    const r = await llm.generate($('llm-prompt').value, {
      maxTokens: Number($('llm-n').value), temperature, greedy: temperature <= 0, seed: Number($('llm-seed').value),
      signal: abort.signal, onToken: (text) => $('llm-out').append(text),
    });
    $('llm-stats').textContent = stats(r);
    return r;
  } catch (e) {
    showError($('llm-stats'), e);
    return null;
  } finally {
    $('llm-stop').disabled = true;
  }
}

function chatLine(role, text) {
  const div = Object.assign(document.createElement('div'), { className: role });
  div.append(Object.assign(document.createElement('b'), { textContent: role === 'user' ? 'you: ' : 'model: ' }), text);
  $('chat-log').append(div);
  return div;
}

async function send() {
  const content = $('chat-input').value.trim();
  if (!content) return null;
  $('chat-input').value = '';
  messages.push({ role: 'user', content });
  chatLine('user', content);
  const line = chatLine('assistant', '');
  let reply = '';
  let last = null;
  try {
    for await (const chunk of llm.chat(messages, { stream: true, maxTokens: Number($('llm-n').value), temperature: Number($('llm-temp').value) })) {
      const piece = chunk.choices[0].delta.content;
      if (piece) {
        reply += piece;
        line.append(piece);
      }
      last = chunk;
    }
  } catch (e) {
    showError($('chat-stats'), e);
    return null;
  }
  messages.push({ role: 'assistant', content: reply });
  const t = last.timings;
  $('chat-stats').textContent = `finish: ${last.choices[0].finish_reason}; prefill ${t.prefillMs.toFixed(1)} ms` +
    `${t.reusedCache ? ' (new turn only: the KV cache held the conversation)' : ''}, ${t.decodeTokensPerS.toFixed(1)} tokens/s`;
  return reply;
}

// Greedy continuations of llama.cpp's reference prompt ids, token for token.
async function check() {
  const out = $('llm-check-out');
  out.textContent = 'checking…';
  const reference = await (await fetch(REFERENCE_URL)).json();
  const name = llm.info.name.split('/').pop();
  const cases = reference.models[name];
  if (!cases) {
    out.textContent = `no llama.cpp reference for ${name} (have: ${Object.keys(reference.models).join(', ')})`;
    return null;
  }
  const rows = [];
  for (const ref of cases) {
    const r = await llm.generate(ref.prompt_ids, { maxTokens: ref.ids.length, greedy: true });
    const firstDiff = ref.ids.findIndex((id, i) => r.ids[i] !== id);
    rows.push({ prompt: ref.prompt, match: firstDiff < 0 && r.ids.length === ref.ids.length, firstDiff, n: ref.ids.length, tokensPerS: r.decodeTokensPerS });
  }
  const table = document.createElement('table');
  table.insertRow().append(...['prompt', 'llama.cpp', 'tokens/s'].map((h) => Object.assign(document.createElement('th'), { textContent: h })));
  for (const row of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = row.prompt;
    Object.assign(tr.insertCell(), {
      className: row.match ? 'good' : 'bad',
      textContent: row.match ? `match (${row.n}/${row.n} tokens)` : `MISMATCH at token ${row.firstDiff}`,
    });
    tr.insertCell().textContent = row.tokensPerS.toFixed(0);
  }
  out.textContent = '';
  out.append(`${name} (reference: ${reference.llama_cpp})`, table);
  return rows;
}

async function bench() {
  $('llm-stats').textContent = 'benchmarking…';
  const r = await llm.bench({ repeats: 3 });
  $('llm-stats').textContent = `benchmark (${llm.info.variant}, ${llm.info.threads} threads, median of 3): prefill 64 tokens ` +
    `${r.prefill_64_ms.toFixed(1)} ms (${(64000 / r.prefill_64_ms).toFixed(0)} tokens/s); decode 64 tokens ${r.decode_tokens_per_s.toFixed(1)} tokens/s`;
  return r;
}

// GPU time per kernel of one decode step (timestamp queries), summed by kernel over the layers.
async function profile() {
  const out = $('llm-profile-out');
  const { timestamps, timings } = await llm.profileGpu();
  if (!timestamps) return (out.textContent = 'this adapter has no timestamp queries'), null;
  const byLabel = new Map();
  for (const { label, ns } of timings) {
    const k = byLabel.get(label) ?? { label, runs: 0, ns: 0 };
    k.runs++;
    k.ns += ns;
    byLabel.set(label, k);
  }
  const total = timings.reduce((a, x) => a + x.ns, 0);
  const table = document.createElement('table');
  table.insertRow().append(...['kernel', 'dispatches', 'µs', 'share'].map((h) => Object.assign(document.createElement('th'), { textContent: h })));
  for (const k of [...byLabel.values()].sort((a, b) => b.ns - a.ns)) {
    const tr = table.insertRow();
    for (const v of [k.label, k.runs, (k.ns / 1e3).toFixed(1), `${((100 * k.ns) / (total || 1)).toFixed(1)}%`]) tr.insertCell().textContent = v;
  }
  out.textContent = `one decode step: ${timings.length} dispatches, ${(total / 1e3).toFixed(1)} µs of GPU time`;
  out.append(table);
  return [...byLabel.values()];
}

$('llm-load-url').onclick = () => $('llm-url').value && load($('llm-url').value);
$('llm-file').onchange = () => $('llm-file').files[0] && load($('llm-file').files[0]);
$('llm-generate').onclick = generate;
$('llm-stop').onclick = () => abort?.abort();
$('llm-check').onclick = () => check().catch((e) => showError($('llm-check-out'), e));
$('llm-bench').onclick = () => bench().catch((e) => showError($('llm-stats'), e));
$('llm-profile').onclick = () => profile().catch((e) => showError($('llm-profile-out'), e));
$('chat-send').onclick = send;
$('chat-input').onkeydown = (e) => e.key === 'Enter' && send();
$('chat-new').onclick = () => {
  messages = [];
  $('chat-log').textContent = '';
  $('chat-stats').textContent = '';
};

window.sottoLab.llmLab = { load, generate, send, check, bench, profile };
