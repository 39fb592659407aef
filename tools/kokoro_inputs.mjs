// Kokoro v1.0's inputs for ONNX Runtime and the other peers, from phonemes: the phoneme -> id table (the same
// as src/models/tts/kokoro_vocab.cpp, which the engine uses), the padded token ids, the voice's style row n (the
// number of phoneme ids, as kokoro-js and kokoro-onnx pick) and the feeds of kokoro-v1.0.int8.onnx.
// Shared by bench/kokoro.mjs, bench/kokoro_web.mjs and tests/web/kokoro_reference.test.mjs.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SYMBOLS = ";:,.!?—…\"()“” ̃ʣʥʦʨᵝꭧAIOQSTWYᵊabcdefhijklmnopqrstuvwxyzɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ";
const IDS = [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 31, 33, 35, 36, 39, 41,
  42, 43, 44, 45, 46, 47, 48, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72,
  75, 76, 77, 78, 80, 81, 82, 83, 85, 86, 87, 90, 92, 99, 101, 102, 103, 110, 111, 112, 113, 114, 115, 116, 118, 119,
  120, 123, 125, 126, 128, 129, 130, 131, 132, 133, 135, 136, 138, 139, 140, 142, 143, 147, 148, 156, 157, 158, 162,
  164, 169, 171, 172, 173, 177];
const VOCAB = Object.fromEntries([...SYMBOLS].map((c, i) => [c, IDS[i]]));

// The benchmarks' two sentences: 13 and 77 phonemes.
export const BENCH_PHRASES = [
  'ðə kˈæt sˈæt.',
  'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.',
];

// Phonemes -> the model's `tokens`: the ids with a 0 at both ends; an unknown symbol throws.
export function kokoroTokenIds(phonemes) {
  return [0, ...[...phonemes].map((c) => {
    if (!(c in VOCAB)) throw new Error(`unknown phoneme ${c}`);
    return VOCAB[c];
  }), 0];
}

// models/kokoro/voices/NAME.bin (510 x 256 float32) -> the style row for n phoneme ids.
export function kokoroStyle(voice, n) {
  const rows = new Float32Array(readFileSync(`${ROOT}/models/kokoro/voices/${voice}.bin`).buffer.slice(0));
  return rows.slice(n * 256, n * 256 + 256);
}

// The feeds of kokoro-v1.0.int8.onnx for an onnxruntime module (node or web): tokens, style, speed.
export function kokoroFeeds(ort, phonemes, voice, speed = 1) {
  const ids = kokoroTokenIds(phonemes);
  return {
    tokens: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
    style: new ort.Tensor('float32', kokoroStyle(voice, ids.length - 2), [1, 256]),
    speed: new ort.Tensor('float32', Float32Array.from([speed]), [1]),
  };
}
