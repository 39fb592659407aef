// Greedy continuations and first-step probabilities from llama.cpp (through node-llama-cpp, CPU only, one
// thread, its default context settings: F16 KV cache, flash attention "auto" = on for the CPU), for the
// stories260K fixtures. Writes tests/data/llm_reference.json, which tests/web/llm_reference.test.mjs compares
// `sotto generate --json` against when node-llama-cpp is not installed.
//
//   node tools/llama_reference.mjs [FIXTURES_DIR] [--out FILE]
//   (NODE_LLAMA_CPP=/path/to/node-llama-cpp/dist/index.js when it is not in node_modules)
//
// The prompt ids are llama.cpp's own tokenization with its BOS in front (the model's add_bos_token), so the
// model is checked independently of our tokenizer; `text` lets the tokenizer be checked too.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const MODELS = ['stories260K.gguf', 'stories260K-q8_0.gguf', 'stories260K-q4_0.gguf'];
// Derived from stories260K.gguf by writeVariant(): the same trained weights run as another architecture, so
// llama.cpp checks our NeoX RoPE, Qwen2's q/k/v biases, tied output and Qwen3's q/k norms.
export const VARIANTS = ['qwen2', 'qwen3'];
export const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park.', 'One day, a bird'];
export const N_GENERATE = 64;
export const TOP_N = 10;

// node-llama-cpp from the repo's node_modules, or from NODE_LLAMA_CPP (a path to its dist/index.js).
export async function loadLlama() {
  const where = process.env.NODE_LLAMA_CPP;
  const { getLlama } = await import(where ? pathToFileURL(where).href : 'node-llama-cpp');
  return getLlama({ gpu: false, build: 'never', logLevel: 'error' });
}

// {prompt, prompt_ids, ids (generated), text (their detokenized text), top: [{id, logprob}] of the first step}
export async function reference(llama, modelPath, prompts = PROMPTS, nGenerate = N_GENERATE) {
  const model = await llama.loadModel({ modelPath });
  const out = [];
  for (const prompt of prompts) {
    const promptIds = [model.tokens.bos, ...model.tokenize(prompt)];
    const ctx = await model.createContext({ contextSize: 256, threads: 1 });
    const seq = ctx.getSequence();
    const ids = [];
    let top = null;
    const gen = seq.evaluateWithMetadata(promptIds, { probabilities: true }, { temperature: 0 });
    for await (const step of gen) {
      if (!top)
        top = [...step.probabilities.entries()].slice(0, TOP_N).map(([id, p]) => ({ id, logprob: Math.log(p) }));
      ids.push(step.token);
      if (ids.length >= nGenerate) break;
    }
    await ctx.dispose();
    // The continuation's text as it follows the prompt (a SentencePiece leading space stays).
    const promptText = model.detokenize(promptIds);
    const text = model.detokenize([...promptIds, ...ids]).slice(promptText.length);
    out.push({ prompt, prompt_ids: promptIds, ids, text, top });
  }
  await model.dispose();
  return out;
}

// ---------------------------------------------------------------- architecture variants of an F32 GGUF

// mulberry32: a tiny seeded PRNG so the variant files are the same bytes on every run.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Reads a GGUF v3 file whose tensors are all F32: raw metadata entries and tensors.
function readGguf(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const u32 = () => { pos += 4; return view.getUint32(pos - 4, true); };
  const u64 = () => { pos += 8; return Number(view.getBigUint64(pos - 8, true)); };
  const str = () => { const n = u64(); pos += n; return Buffer.from(bytes.subarray(pos - n, pos)).toString('utf8'); };
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skipValue = (type) => {
    if (type === 8) { str(); return; }
    if (type === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; ++i) skipValue(et); return; }
    pos += SIZES[type];
  };
  if (u32() !== 0x46554747) throw new Error('not a GGUF file');
  const version = u32(), nTensors = u64(), nKv = u64();
  const kv = [];
  for (let i = 0; i < nKv; ++i) {
    const key = str();
    const type = u32();
    const start = pos;
    skipValue(type);
    kv.push({ key, type, raw: bytes.subarray(start, pos) });
  }
  const infos = [];
  for (let i = 0; i < nTensors; ++i) {
    const name = str();
    const ne = Array.from({ length: u32() }, u64);
    const type = u32();
    const offset = u64();
    if (type !== 0) throw new Error(`${name}: only F32 sources are supported`);
    infos.push({ name, ne, offset });
  }
  const dataStart = Math.ceil(pos / 32) * 32;
  const tensors = infos.map(({ name, ne, offset }) => {
    const count = ne.reduce((a, b) => a * b, 1);
    const copy = Uint8Array.prototype.slice.call(bytes, dataStart + offset, dataStart + offset + 4 * count);
    return { name, ne, data: new Float32Array(copy.buffer) };
  });
  return { version, kv, tensors };
}

function writeGguf({ kv, tensors }) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
  u32(0x46554747); u32(3); u64(tensors.length); u64(kv.length);
  for (const { key, type, raw } of kv) { str(key); u32(type); parts.push(Buffer.from(raw)); }
  let offset = 0;
  for (const t of tensors) {
    str(t.name); u32(t.ne.length); t.ne.forEach(u64); u32(0); u64(offset);
    offset += Math.ceil(t.data.byteLength / 32) * 32;
  }
  const header = Buffer.concat(parts);
  const out = Buffer.alloc(Math.ceil(header.length / 32) * 32 + offset);
  header.copy(out);
  let at = Math.ceil(header.length / 32) * 32;
  for (const t of tensors) {
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).copy(out, at);
    at += Math.ceil(t.data.byteLength / 32) * 32;
  }
  return out;
}

// The F32 llama model at `srcPath` as `arch`: keys renamed, qwen2 gains random q/k/v biases and drops
// output.weight (tied to token_embd, as Qwen2.5 0.5B), qwen3 gains random per-head q/k norm weights.
export function writeVariant(srcPath, arch, outPath) {
  const g = readGguf(readFileSync(srcPath));
  const random = prng(arch === 'qwen2' ? 2 : 3);
  const kv = g.kv.map(({ key, type, raw }) => {
    if (key === 'general.architecture') {
      const b = Buffer.alloc(8 + arch.length); b.writeBigUInt64LE(BigInt(arch.length)); b.write(arch, 8);
      return { key, type, raw: b };
    }
    return { key: key.startsWith('llama.') ? arch + key.slice(5) : key, type, raw };
  });
  const tensors = [];
  const filled = (name, n, f) => ({ name, ne: [n], data: Float32Array.from({ length: n }, f) });
  for (const t of g.tensors) {
    if (arch === 'qwen2' && t.name === 'output.weight') continue;
    tensors.push(t);
    const m = /^blk\.(\d+)\.attn_([qkv])\.weight$/.exec(t.name);
    if (m && arch === 'qwen2') tensors.push(filled(`blk.${m[1]}.attn_${m[2]}.bias`, t.ne[1], () => random() - 0.5));
    if (m && arch === 'qwen3' && m[2] !== 'v') {
      const headDim = 8;  // stories260K: 64 / 8 heads
      tensors.push(filled(`blk.${m[1]}.attn_${m[2]}_norm.weight`, headDim, () => 0.5 + random()));
    }
  }
  writeFileSync(outPath, writeGguf({ kv, tensors }));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const repo = fileURLToPath(new URL('../', import.meta.url));
  const args = process.argv.slice(2);
  const outIndex = args.indexOf('--out');
  const outPath = outIndex >= 0 ? args.splice(outIndex, 2)[1] : `${repo}tests/data/llm_reference.json`;
  const fixtures = args[0] ?? process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
  const llama = await loadLlama();
  const result = { generator: 'tools/llama_reference.mjs', llama_cpp: 'node-llama-cpp 3.21.1 (llama.cpp v0.4.0 bundle, CPU)',
                   n_generate: N_GENERATE, models: {} };
  for (const m of MODELS) result.models[m] = await reference(llama, `${fixtures}/llm/${m}`);
  const dir = mkdtempSync(`${tmpdir()}/sotto-llm-`);
  for (const arch of VARIANTS) {
    writeVariant(`${fixtures}/llm/stories260K.gguf`, arch, `${dir}/${arch}.gguf`);
    result.models[`stories260K-as-${arch}`] = await reference(llama, `${dir}/${arch}.gguf`);
  }
  rmSync(dir, { recursive: true });
  writeFileSync(outPath, JSON.stringify(result, null, 1) + '\n');
  console.log(`wrote ${outPath}`);
}
