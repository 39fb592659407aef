// Randomized comparison of sotto's tokenizer with llama.cpp itself (through node-llama-cpp's bindings):
// thousands of seeded random strings — mixed scripts, emoji sequences, code, digit and whitespace runs,
// contractions, punctuation — must give exactly llama.cpp's token ids for every vocabulary, with special
// tokens parsed and not. Detokenizing our ids must give the string back wherever llama.cpp's does.
//
//   node --test tests/web/tokenizer_random.test.mjs
// Env: SOTTO_CLI (default build/bin/sotto), SOTTO_NODE_LLAMA_CPP (folder of the node-llama-cpp package when it
// is not installed in the repo, e.g. /tmp/nlc/node_modules/node-llama-cpp), SOTTO_TOKENIZER_N (strings per
// vocabulary and mode, default 2000), SOTTO_TOKENIZER_SEED (default 1234).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const fixtures = process.env.SOTTO_FIXTURES ?? new URL('../fixtures', import.meta.url).pathname;
const cli = process.env.SOTTO_CLI ?? join(repo, "build/bin/sotto");
const count = Number(process.env.SOTTO_TOKENIZER_N ?? 2000);
const seed = Number(process.env.SOTTO_TOKENIZER_SEED ?? 1234);

const vocabs = [
  `${fixtures}/tokenizer/ggml-vocab-qwen2.gguf`,
  `${fixtures}/tokenizer/ggml-vocab-llama-bpe.gguf`,
  `${fixtures}/tokenizer/ggml-vocab-llama-spm.gguf`,
  `${fixtures}/llm/stories260K.gguf`,
  // The real models from scripts/get-models.sh: Qwen2.5's byte-level BPE, and Gemma 3's 262k-token
  // SentencePiece vocabulary (no space prefix; runs of spaces and newlines are user-defined tokens).
  join(repo, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
  join(repo, "models/gemma-3-270m-q4_k_m.gguf"),
];

async function loadNodeLlamaCpp() {
  const dir = process.env.SOTTO_NODE_LLAMA_CPP;
  try {
    if (dir) return await import(pathToFileURL(join(dir, "dist/index.js")).href);
    return await import("node-llama-cpp");
  } catch {
    return null;
  }
}

// mulberry32: small, seeded, good enough to pick pieces.
function prng(s) {
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pieces = {
  latin: ["hello", "World", "naïve", "café", "Ünïcödé", "straße", "ÆØÅ", "résumé", "e\u0301", "ﬁne", "Ǆemal", "İstanbul"],
  cyrillic: ["Привет", "мир", "ёжик", "ЩИТ", "україна"],
  greek: ["Καλημέρα", "κόσμε", "ΣΊΣΥΦΟΣ", "ς"],
  cjk: ["你好世界", "日本語のテキスト", "한국어", "漢字", "カタカナ", "ｆｕｌｌｗｉｄｔｈ", "〇一二"],
  rtl_indic_thai: ["مرحبا بالعالم", "שלום", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ক্ষ", "தமிழ்"],
  emoji: ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇺🇸", "🫨", "🧑🏿‍💻", "✋🏻", "☕"],
  code: ["for (int i = 0; i < n; ++i) {", "def f(x):\n    return x**2", '<div class="a">', "x += y->z;",
         "#include <stdio.h>", "\tif (a && b) return;\n", "console.log(`${x}`);", "SELECT * FROM t;", "a_b_c = 0x1F"],
  digits: () => null,
  runs: () => null,
  whitespace: [" ", "  ", "   ", "\t", "\t\t", "\r\n", "\n", "\n\n\n", "\u00a0", "\u3000", " \n ", "\u2009", "\u0085",
               "\u200b", "\u2028", " \t\n", "\r", "\u000b\f"],
  contractions: ["'s", "'S", "'re", "'RE", "'ll", "'Ll", "'ve", "'VE", "'d", "'D", "'m", "'M", "'t", "'T", "don't",
                 "I'M", "we'LL", "'x", "''", "'", "’s"],
  punctuation: ["...", "!!!", "?!", "—", "«»", "“”", "()", "[]{}", "@#$%^&*", ";;", "-->", "::", ".", ",", "?", "~~~",
                "\u0001", "\u007f", "\u00ad", "¿¡", "§¶"],
  specials: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "[PAD151650]", "<|begin_of_text|>", "<|eot_id|>",
             "<|start_header_id|>", "<|reserved_special_token_5|>", "<s>", "</s>", "<unk>", "<|im_start", "<0x41>",
             "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<mask>", "[multimodal]", "<unused7>"],
};

function randomCodepoint(rand) {
  const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x52f], [0x590, 0x6ff], [0x900, 0xdff], [0x1100, 0x11ff],
                  [0x2000, 0x2bff], [0x3000, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xfe00, 0xffef],
                  [0x10000, 0x1ffff], [0x1f300, 0x1faff], [0x20000, 0x2a6df], [0xe0000, 0xe007f]];
  const [lo, hi] = ranges[Math.floor(rand() * ranges.length)];
  return String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
}

function randomString(rand, withSpecials) {
  const kinds = Object.keys(pieces).filter((k) => withSpecials || k !== "specials");
  const n = 1 + Math.floor(rand() * 12);
  let s = "";
  for (let i = 0; i < n; ++i) {
    const kind = rand() < 0.12 ? "random" : kinds[Math.floor(rand() * kinds.length)];
    if (kind === "random") {
      for (let k = 1 + Math.floor(rand() * 4); k > 0; --k) s += randomCodepoint(rand);
    } else if (kind === "runs") {
      const unit = [" ", "\t", "\n", "\r\n", "a", "Z", "7", ".", "!", "é", "日", "\u00a0", "'", "😀"][Math.floor(rand() * 14)];
      s += unit.repeat(1 + Math.floor(rand() * 40));
    } else if (kind === "digits") {
      const len = 1 + Math.floor(rand() * 12);
      for (let k = 0; k < len; ++k) s += rand() < 0.9 ? String(Math.floor(rand() * 10)) : "٣½①"[Math.floor(rand() * 3)];
    } else {
      const list = pieces[kind];
      s += list[Math.floor(rand() * list.length)];
    }
    const r = rand();
    if (r < 0.4) s += " ";
    else if (r < 0.45) s += "\n";
  }
  return s;
}

function runCli(args, lines) {
  const r = spawnSync(cli, args, { input: lines.map((x) => JSON.stringify(x)).join("\n") + "\n",
                                    maxBuffer: 1 << 30, encoding: "utf8" });
  assert.equal(r.status, 0, `sotto ${args.join(" ")} failed: ${r.stderr}`);
  return r.stdout.split("\n").filter((x) => x !== "").map((x) => JSON.parse(x));
}

const nlc = await loadNodeLlamaCpp();
const skip = !nlc ? "node-llama-cpp is not installed (npm i -D node-llama-cpp@3.21.1, or set SOTTO_NODE_LLAMA_CPP)"
  : !existsSync(cli) ? `no sotto binary at ${cli} (build it, or set SOTTO_CLI)` : false;
const llama = skip ? null : await nlc.getLlama({ gpu: false, build: "never", logLevel: "error" });

for (const [v, path] of vocabs.entries()) {
  const name = path.split("/").pop();
  test(`tokenizer ${name} matches llama.cpp on ${count} random strings (plain and with special tokens)`,
       { skip: skip || (!existsSync(path) && `missing ${path}${path.includes("/models/") ? " (run bash scripts/get-models.sh)" : ""}`) }, async (t) => {
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const special of [false, true]) {
        const rand = prng(seed + 17 * v + (special ? 1 : 0));
        const strings = Array.from({ length: count }, () => randomString(rand, special));
        const ours = runCli(["tokenize", "-m", path, "--no-bos", "--jsonl", ...(special ? ["--special"] : [])], strings);
        const theirs = strings.map((s) => model.tokenize(s, special));
        const mismatches = [];
        for (let i = 0; i < strings.length; ++i)
          if (JSON.stringify(ours[i]) !== JSON.stringify(theirs[i])) mismatches.push(i);
        const rate = (100 * (strings.length - mismatches.length)) / strings.length;
        t.diagnostic(`${name} special=${special}: ${strings.length - mismatches.length}/${strings.length} identical (${rate.toFixed(2)}%)`);
        for (const i of mismatches.slice(0, 5))
          t.diagnostic(`  ${JSON.stringify(strings[i])}\n    ours   ${JSON.stringify(ours[i])}\n    llama  ${JSON.stringify(theirs[i])}`);
        assert.equal(mismatches.length, 0, `${mismatches.length} strings tokenize differently`);

        if (special) continue;
        // Round trip: where llama.cpp gives the string back, so must we.
        const texts = runCli(["detokenize", "-m", path, "--jsonl"], ours);
        let theirsRoundTrip = 0, oursRoundTrip = 0, oursFailWhereTheirsOk = 0;
        for (let i = 0; i < strings.length; ++i) {
          const theirsOk = model.detokenize(theirs[i], false) === strings[i];
          const oursOk = texts[i] === strings[i];
          theirsRoundTrip += theirsOk;
          oursRoundTrip += oursOk;
          if (theirsOk && !oursOk) {
            if (oursFailWhereTheirsOk < 3) t.diagnostic(`  round trip lost ${JSON.stringify(strings[i])} -> ${JSON.stringify(texts[i])}`);
            ++oursFailWhereTheirsOk;
          }
        }
        t.diagnostic(`${name} round trip: ours ${oursRoundTrip}/${count}, llama.cpp ${theirsRoundTrip}/${count}`);
        assert.equal(oursFailWhereTheirsOk, 0, "strings that llama.cpp round-trips but we do not");
      }
    } finally {
      await model.dispose();
    }
  });
}
