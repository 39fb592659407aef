#!/usr/bin/env node
// The agent latency bench's spoken questions (bench/data/questions/*.wav): short questions synthesised once by
// our own Kokoro (`sotto speak`, int8 v1.0, several voices), resampled to 16 kHz 16-bit mono, with 0.3 s of
// silence before and 1.2 s after (the fake microphone plays the file once; the VAD's endpoint needs the pause).
// The files are committed; this script says how they were made and makes them again.
//
//   node bench/make_questions.mjs [--cli build/bin/sotto] [--model models/kokoro/kokoro-v1.0.int8.onnx] [--out bench/data/questions]
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { pcm16Wav } from '../web/wav.mjs';

const repo = fileURLToPath(new URL('../', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    cli: { type: 'string', default: `${repo}build/bin/sotto` },
    model: { type: 'string', default: `${repo}models/kokoro/kokoro-v1.0.int8.onnx` },
    out: { type: 'string', default: `${repo}bench/data/questions` },
  },
});

// name, voice, text: everyday questions a voice assistant gets, one to two seconds each.
export const QUESTIONS = [
  ['capital', 'af_heart', 'What is the capital of France?'],
  ['moon', 'am_adam', 'How far away is the moon?'],
  ['sky', 'bf_emma', 'Why is the sky blue?'],
  ['dinner', 'am_michael', 'What should I cook for dinner tonight?'],
  ['egg', 'af_bella', 'How long should I boil an egg?'],
  ['cat', 'bm_george', 'Can you suggest a name for my cat?'],
  ['sleep', 'af_sarah', 'How can I fall asleep faster?'],
  ['octopus', 'am_eric', 'Tell me a fun fact about octopuses.'],
];

const RATE_IN = 24000;
const RATE_OUT = 16000;
const LEAD_S = 0.3;
const TAIL_S = 1.2;

// A RIFF WAV's samples as floats (the CLI writes float32; 16-bit PCM is read too).
function readWav(path) {
  const b = readFileSync(path);
  let fmt = null;
  for (let o = 12; o + 8 <= b.length; o += 8 + b.readUInt32LE(o + 4)) {
    const id = b.toString('ascii', o, o + 4);
    if (id === 'fmt ') fmt = { format: b.readUInt16LE(o + 8), rate: b.readUInt32LE(o + 12), bits: b.readUInt16LE(o + 22) };
    if (id === 'data') {
      const data = b.subarray(o + 8, o + 8 + b.readUInt32LE(o + 4));
      if (fmt.format === 3 && fmt.bits === 32) return { rate: fmt.rate, samples: new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length)) };
      if (fmt.format === 1 && fmt.bits === 16) return { rate: fmt.rate, samples: Float32Array.from({ length: data.length / 2 }, (_, i) => data.readInt16LE(2 * i) / 32768) };
      throw new Error(`${path}: WAV format ${fmt.format}/${fmt.bits} bits not read here`);
    }
  }
  throw new Error(`${path}: no data chunk`);
}

// 24 kHz -> 16 kHz (2/3): a windowed-sinc low-pass at 7.2 kHz (Hann, 64 taps per side) evaluated at each
// output sample's place in the input.
function resample(x, from, to) {
  const n = Math.floor((x.length * to) / from);
  const out = new Float32Array(n);
  const cutoff = 0.45 * Math.min(from, to) / from;  // of the input's rate
  const half = 64;
  for (let i = 0; i < n; i++) {
    const t = (i * from) / to;
    const c = Math.floor(t);
    let sum = 0;
    for (let k = c - half + 1; k <= c + half; k++) {
      if (k < 0 || k >= x.length) continue;
      const d = t - k;
      const sinc = d === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * d) / (Math.PI * d);
      const w = 0.5 + 0.5 * Math.cos((Math.PI * d) / half);
      sum += x[k] * sinc * w;
    }
    out[i] = sum;
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  mkdirSync(opts.out, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), 'sotto-questions-'));
  try {
    for (const [name, voice, text] of QUESTIONS) {
      const raw = join(tmp, `${name}.wav`);
      execFileSync(opts.cli, ['speak', '-m', opts.model, '--voice', voice, '--text', text, '-o', raw], { stdio: ['ignore', 'ignore', 'inherit'] });
      const { rate, samples } = readWav(raw);
      if (rate !== RATE_IN) throw new Error(`${raw}: ${rate} Hz, expected ${RATE_IN}`);
      const speech = resample(samples, RATE_IN, RATE_OUT);
      const clip = new Float32Array(Math.round((LEAD_S + TAIL_S) * RATE_OUT) + speech.length);
      clip.set(speech, Math.round(LEAD_S * RATE_OUT));
      writeFileSync(join(opts.out, `${name}.wav`), pcm16Wav(clip, RATE_OUT, 32767));
      console.log(`${name}.wav: ${voice}, ${(clip.length / RATE_OUT).toFixed(2)} s, "${text}"`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
