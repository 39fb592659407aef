// Writes tests/data/tokenizer/reference.json: token ids that llama.cpp itself (through node-llama-cpp's
// bindings, add_special = false) gives for a few strings, for the vocabularies that have no llama.cpp test
// vectors of their own (stories260K) and for special-token parsing. tests/unit/tokenizer_test.cpp checks
// sotto against it.
//   node tools/gen_tokenizer_reference.mjs [path/to/node-llama-cpp]   (default: the installed package)
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const fixtures = process.env.SOTTO_FIXTURES ?? new URL('../tests/fixtures', import.meta.url).pathname;
const nlc = process.argv[2] ? await import(pathToFileURL(join(process.argv[2], "dist/index.js")).href)
                            : await import("node-llama-cpp");
const llama = await nlc.getLlama({ gpu: false, build: "never", logLevel: "error" });

const strings = [
  "Once upon a time, there was a little girl named Lily.",
  "She liked to play with her ball in the park.  Tom said: \"Let's go!\"",
  "Hello world",
  " Hello world",
  "   leading spaces and trailing   ",
  "tabs\tand\nnewlines\n\n\r\n",
  "naïve café 日本語 😀 👨‍👩‍👧‍👦",
  "<s>not special</s>",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
  "don't I'M we'LL 12345678 3.14",
  "",
];
const vocabs = {
  "llm/stories260K.gguf": [false, true],
  "tokenizer/ggml-vocab-qwen2.gguf": [true],
  "tokenizer/ggml-vocab-llama-bpe.gguf": [true],
  "tokenizer/ggml-vocab-llama-spm.gguf": [true],
};
const cases = [];
for (const [file, modes] of Object.entries(vocabs)) {
  const model = await llama.loadModel({ modelPath: join(fixtures, file), vocabOnly: true });
  for (const special of modes)
    for (const text of strings) cases.push({ file, special, text, ids: Array.from(model.tokenize(text, special)) });
  await model.dispose();
}
const out = join(repo, "tests/data/tokenizer/reference.json");
mkdirSync(dirname(out), { recursive: true });
const source = "node-llama-cpp 3.21.1 (llama.cpp v0.4.0 bundle), model.tokenize(text, special), add_special=false";
writeFileSync(out, `{"source": ${JSON.stringify(source)},\n "cases": [\n` +
                   cases.map((c) => "  " + JSON.stringify(c)).join(",\n") + "\n]}\n");
console.log(`wrote ${cases.length} cases to ${out}`);
