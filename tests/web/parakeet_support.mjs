// Shared by the Parakeet wasm tests: the CI model (tests/data/parakeet/tdt_ci, random weights) and its reference
// file (reference.safetensors: transformers' audio, mel, encoder output and tokens per clip, written by
// tools/parakeet_make_test_model.py).
import { readFileSync } from 'node:fs';

import { repo } from './vad_support.mjs';

export const ciModelDir = `${repo}tests/data/parakeet/tdt_ci`;

// safetensors: 8-byte little-endian header length, a JSON header of {name: {dtype, shape, data_offsets}}, data.
export function readSafetensors(path) {
  const bytes = readFileSync(path);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  const get = (name) => {
    const { dtype, data_offsets: [a, b] } = header[name];
    const raw = bytes.subarray(8 + n + a, 8 + n + b);
    const copy = new Uint8Array(raw).buffer;
    if (dtype === 'F32') return new Float32Array(copy);
    if (dtype === 'I64') return Array.from(new BigInt64Array(copy), Number);
    if (dtype === 'I32') return Array.from(new Int32Array(copy));
    throw new Error(`${path}: ${name} is ${dtype}`);
  };
  return { header, get };
}

// [{audio: Float32Array, tokens: number[]}] for every reference clip.
export function referenceClips() {
  const ref = readSafetensors(`${ciModelDir}/reference.safetensors`);
  const clips = [];
  for (let i = 0; ref.header[`clip${i}.audio`]; ++i) clips.push({ audio: ref.get(`clip${i}.audio`), tokens: ref.get(`clip${i}.tokens`) });
  return clips;
}
