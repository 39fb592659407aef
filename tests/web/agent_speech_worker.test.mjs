// The speech worker path in Node (web/speech-worker.js through web/speech-client.js; worker_threads stand in for
// the page's Web Workers): Kokoro run in the worker gives the same audio, sample for sample, as on the calling
// thread, and every request after the model load answers (the handle once travelled as `id` and replaced the
// request's own id, so these calls hung). A short word only: a few seconds in all.
// Run: node --test tests/web/agent_speech_worker.test.mjs   (needs build/wasm-simd128, models/kokoro,
// models/g2p-en-us.bin; skips without them)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Tts } from '../../web/tts.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const model = `${repo}models/kokoro/kokoro-v1.0.int8.onnx`;
const need = [model, `${repo}models/kokoro/voices/af_heart.bin`, `${repo}models/g2p-en-us.bin`, `${repo}build/wasm-simd128/sotto.wasm`]
  .find((f) => !existsSync(f));

test('speech worker: Kokoro in the worker answers every request and matches the calling thread', { skip: need && `${need} missing`, timeout: 120_000 }, async () => {
  // Side by side (two cores): the worker's and this thread's instances load and speak at once.
  const [inWorker, inline] = await Promise.all([Tts.load(model, { worker: true }), Tts.load(model, { worker: false })]);
  try {
    assert.equal(inWorker.worker, true);
    assert.equal(inline.worker, false);
    const [a, b] = await Promise.all([inWorker.sentences('Hi, you.'), inline.sentences('Hi, you.')]);
    assert.deepEqual(a, b);
    assert.ok(a.length === 1 && a[0].phonemes.length > 0, JSON.stringify(a));
    const [w, i] = await Promise.all([inWorker.speakPhonemes('hˈI.'), inline.speakPhonemes('hˈI.')]);
    assert.ok(w.audio.length > 2400, `${w.audio.length} samples`);
    assert.equal(w.audio.length, i.audio.length);
    assert.deepEqual(w.audio, i.audio);  // the same module and code on both threads: bit for bit
  } finally {
    await inWorker.dispose();
    await inline.dispose();
  }
  await assert.rejects(inWorker.sentences('x'), /disposed/);
});

const asrDir = `${repo}models/moonshine-base-en`;
const needAsr = [`${asrDir}/encoder_model.ort`, `${repo}build/wasm-simd128/sotto.wasm`, `${repo}tests/fixtures/audio/beckett.wav`].find((f) => !existsSync(f));

test('speech worker: Moonshine on a pool of two threads in the worker writes what one thread writes', { skip: needAsr && `${needAsr} missing`, timeout: 120_000 }, async () => {
  const { Asr } = await import('../../web/asr.js');
  const [pooled, single] = await Promise.all([Asr.load(asrDir, { worker: true, threads: 2 }), Asr.load(asrDir, { worker: false })]);
  try {
    assert.equal(pooled.threads, 2, 'the worker did not start its pool');
    assert.equal(single.threads, 1);
    const samples = await single.decodeWav(`${repo}tests/fixtures/audio/beckett.wav`);
    const one = await single.transcribe(samples);
    const two = await pooled.transcribe(samples);
    assert.ok(one.text.trim().length > 10, JSON.stringify(one.text));
    // The pool splits rows of each product, not sums: the same logits, the same greedy text.
    assert.equal(two.text, one.text);
    console.log(`beckett.wav: one thread ${Math.round(one.encode_ms + one.decode_ms)} ms, two threads ${Math.round(two.encode_ms + two.decode_ms)} ms (encode ${Math.round(one.encode_ms)} / ${Math.round(two.encode_ms)})`);
  } finally {
    pooled.dispose();
    single.dispose();
  }
});
