// Moonshine base with onnxruntime-node on the .ort files: the independent reference of tests/web/moonshine.test.mjs
// and bench/moonshine.mjs, decoding greedily as moonshine_ort.mjs says.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

import { pcm16Wav } from '../../web/wav.mjs';
import { ortGreedy } from './moonshine_ort.mjs';
import { fixtures, repo } from './vad_support.mjs';

export const modelDir = process.env.SOTTO_MOONSHINE ?? `${repo}models/moonshine-base-en`;
export const vadPath = `${fixtures}/vad/silero_vad_v5.1.onnx`;
export const haveMoonshine = () =>
  ['encoder_model.ort', 'decoder_model_merged.ort', 'tokenizer.bin'].every((f) => existsSync(`${modelDir}/${f}`));

export class OrtMoonshine {
  // dir / ext: another directory's graphs (the ONNX layout: ext 'onnx'); the text always from tokenizer.bin.
  static async create(ort, { threads = 2, dir = modelDir, ext = 'ort' } = {}) {
    const m = new OrtMoonshine();
    const options = { intraOpNumThreads: threads, interOpNumThreads: 1 };
    m.ort = ort;
    m.encoder = await ort.InferenceSession.create(`${dir}/encoder_model.${ext}`, options);
    m.decoder = await ort.InferenceSession.create(`${dir}/decoder_model_merged.${ext}`, options);
    m.vocab = readVocab(`${modelDir}/tokenizer.bin`);
    return m;
  }

  async release() {
    await this.encoder.release();
    await this.decoder.release();
  }

  // samples: Float32Array at 16 kHz -> {tokens (no BOS/EOS), text, encodeMs, decodeMs}
  async transcribe(samples) {
    const r = await ortGreedy(this.ort, this.encoder, this.decoder, samples);
    return { ...r, text: this.decode(r.tokens) };
  }

  decode(tokens) {
    const bytes = [];
    for (const t of tokens) if (t > 2 && t < this.vocab.length) bytes.push(...this.vocab[t]);
    return Buffer.from(bytes).toString('utf8').replaceAll('\u2581', ' ').trim();
  }
}

function readVocab(path) {
  const b = readFileSync(path);
  const vocab = [];
  for (let i = 0; i < b.length;) {
    vocab.push(b.subarray(i + 1, i + 1 + b[i]));
    i += 1 + b[i];
  }
  return vocab;
}

// 16-bit PCM mono WAV at `rate` of samples in [-1, 1] (rounded and clipped as sotto's reader expects).
export function writeWav16(path, samples, rate = 16000) {
  const b = pcm16Wav(samples, rate);
  writeFileSync(path, b);
  // What the file holds, as our reader and readWav16 read it back.
  const stored = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) stored[i] = b.readInt16LE(44 + 2 * i) / 32768;
  return stored;
}
