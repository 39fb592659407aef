// Kokoro in WebAssembly (web/tts.js, `node web/cli.mjs speak`) against the native CLI (`sotto speak`) on one
// short sentence: the same C++ code, so the same length and nearly the same samples. The kernels differ
// (SIMD128 vs AVX2 sum floats in other orders) and the int8 dynamic quantization turns those last-bit
// differences into whole quantization steps now and then, so the comparison is spectral: the log-magnitude
// spectrograms (1024-sample Hann frames, hop 256) may differ by at most 2 dB on average (1.25 measured) over bins within 50 dB
// of the peak, and the length by at most one 600-sample frame. Text through our G2P gives the same phonemes and
// the same samples as those phonemes, and Moonshine (`sotto transcribe`) hears the words back.
// Run: node --test tests/web/tts.test.mjs   (needs build/wasm-simd128, build/bin/sotto, models/kokoro and
// models/g2p-en-us.bin from scripts/get-models.sh; skips without them)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { speechStart, Tts } from '../../web/tts.js';
import { floatWav } from '../../web/wav.mjs';
import { nativeCli, repo, wasmPath } from './vad_support.mjs';

const model = `${repo}models/kokoro/kokoro-v1.0.int8.onnx`;
const voice = `${repo}models/kokoro/voices/af_heart.bin`;
const lexicon = `${repo}models/g2p-en-us.bin`;
const moonshine = `${repo}models/moonshine-base-en`;
const TEXT = 'Hello world.';
const PHONEMES = 'həlˈO wˈɜɹld.';  // what our G2P reads TEXT as (checked below)
const MAX_MEAN_DB = 2;  // 1.25 dB measured

const skip = !existsSync(wasmPath('simd128')) ? 'build the wasm first (build/wasm-simd128)'
  : !existsSync(nativeCli) ? `no native CLI at ${nativeCli}`
  : !existsSync(model) || !existsSync(voice) ? 'models/kokoro missing (bash scripts/get-models.sh kokoro)'
  : !existsSync(lexicon) ? 'models/g2p-en-us.bin missing (bash scripts/get-models.sh g2p)' : false;

const dir = mkdtempSync(join(tmpdir(), 'sotto-tts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function readFloatWav(path) {
  const b = readFileSync(path);
  assert.equal(b.toString('latin1', 0, 4), 'RIFF');
  assert.equal(b.readUInt16LE(20), 3, 'float32 WAV');
  assert.equal(b.readUInt32LE(24), 24000);
  const n = b.readUInt32LE(40) / 4;
  return new Float32Array(b.buffer.slice(b.byteOffset + 44, b.byteOffset + 44 + n * 4));
}

function fft(re, im) {  // in place, radix 2
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) [re[i], re[j], im[i], im[j]] = [re[j], re[i], im[j], im[i]];
  }
  for (let len = 2; len <= n; len <<= 1) {
    const a = (-2 * Math.PI) / len;
    for (let i = 0; i < n; i += len)
      for (let k = 0; k < len / 2; k++) {
        const wr = Math.cos(a * k), wi = Math.sin(a * k);
        const xr = re[i + k + len / 2] * wr - im[i + k + len / 2] * wi;
        const xi = re[i + k + len / 2] * wi + im[i + k + len / 2] * wr;
        re[i + k + len / 2] = re[i + k] - xr;
        im[i + k + len / 2] = im[i + k] - xi;
        re[i + k] += xr;
        im[i + k] += xi;
      }
  }
}

function logSpectrogram(x, n = 1024, hop = 256) {
  const frames = [];
  for (let at = 0; at + n <= x.length; at += hop) {
    const re = new Float64Array(n), im = new Float64Array(n);
    for (let i = 0; i < n; i++) re[i] = x[at + i] * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
    fft(re, im);
    const db = new Float64Array(n / 2 + 1);
    for (let k = 0; k <= n / 2; k++) db[k] = 10 * Math.log10(re[k] * re[k] + im[k] * im[k] + 1e-12);
    frames.push(db);
  }
  return frames;
}

// Mean |dB difference| over the bins of `a` within 50 dB of its peak (quieter bins are noise either way), after
// aligning the two spectrograms in time (dynamic time warping, steps of one frame): this int8 model's durations
// are rounded from float sums, so two correct builds can place a phoneme a duration frame (25 ms) apart
// (issue #29: ONNX Runtime's CPU and wasm builds do), which shifts everything after it.
function meanDbDistance(a, b) {
  const sa = logSpectrogram(a), sb = logSpectrogram(b);
  const peak = Math.max(...sa.map((f) => Math.max(...f)));
  const cost = (i, j) => {
    let sum = 0, count = 0;
    for (let k = 0; k < sa[i].length; k++)
      if (sa[i][k] > peak - 50) {
        sum += Math.abs(sa[i][k] - sb[j][k]);
        count++;
      }
    return count ? sum / count : 0;
  };
  // best[i][j]: [total cost, frames on the path] of the cheapest alignment of sa[0..i] with sb[0..j].
  const best = sa.map(() => new Array(sb.length));
  for (let i = 0; i < sa.length; i++)
    for (let j = 0; j < sb.length; j++) {
      const c = cost(i, j);
      const from = i === 0 && j === 0 ? [0, 0]
        : [i > 0 && j > 0 ? best[i - 1][j - 1] : null, i > 0 ? best[i - 1][j] : null, j > 0 ? best[i][j - 1] : null]
          .filter(Boolean)
          .reduce((m, p) => (p[0] / p[1] < m[0] / m[1] ? p : m));
      best[i][j] = [from[0] + c, from[1] + 1];
    }
  const [total, frames] = best[sa.length - 1][sb.length - 1];
  return total / frames;
}

let wasmAudio = null;

test('node web/cli.mjs speak gives the native `sotto speak` audio for the same phonemes', { skip, timeout: 300_000 }, () => {
  const nativeWav = join(dir, 'native.wav');
  const wasmWav = join(dir, 'wasm.wav');
  const args = ['-m', model, '--voice', 'af_heart', '--phonemes', PHONEMES, '--json'];
  const n = spawnSync(nativeCli, ['speak', ...args, '-o', nativeWav, '--threads', '2'], { encoding: 'utf8' });
  assert.equal(n.status, 0, n.stderr);
  const w = spawnSync(process.execPath, [`${repo}web/cli.mjs`, 'speak', ...args, '-o', wasmWav], { encoding: 'utf8' });
  assert.equal(w.status, 0, w.stderr);
  const nj = JSON.parse(n.stdout), wj = JSON.parse(w.stdout);
  for (const key of ['samples', 'sample_rate', 'audio_s', 'compute_ms', 'first_audio_ms', 'phonemes', 'sentences', 'threads'])
    assert.ok(key in wj, `--json has ${key}`);
  assert.equal(wj.phonemes, nj.phonemes);
  assert.equal(wj.sentences, nj.sentences);
  const native = readFloatWav(nativeWav);
  wasmAudio = readFloatWav(wasmWav);
  assert.equal(wasmAudio.length, wj.samples);
  assert.ok(Math.abs(wasmAudio.length - native.length) <= 600, `lengths ${wasmAudio.length} vs ${native.length}`);
  const d = meanDbDistance(native, wasmAudio);
  console.log(`wasm vs native: ${wasmAudio.length} vs ${native.length} samples, mean log-spectral distance ${d.toFixed(3)} dB; ` +
              `wasm ${(wj.audio_s * 1000 / wj.compute_ms).toFixed(2)}x real time (native ${(nj.audio_s * 1000 / nj.compute_ms).toFixed(2)}x)`);
  assert.ok(d <= MAX_MEAN_DB, `mean log-spectral distance ${d} dB > ${MAX_MEAN_DB}`);
});

test('tts.stream of text: our G2P\'s phonemes, the same samples as those phonemes, speech Moonshine hears', { skip, timeout: 300_000 }, async () => {
  const tts = await Tts.load(model, { voices: `${repo}models/kokoro/voices/` });
  try {
    assert.ok(tts.voices.includes('af_heart') && tts.voices.includes('bm_george'));
    await assert.rejects(tts.speakPhonemes('h€llo', { voice: 'af_heart' }), /€|symbol/);
    await assert.rejects(tts.speakPhonemes(PHONEMES, { voice: 'zz_nobody' }), /zz_nobody/);
    async function* sentences() {
      yield TEXT;
    }
    const clips = [];
    for await (const clip of tts.stream(sentences(), { voice: 'af_heart' })) clips.push(clip);
    assert.equal(clips.length, 1);
    const [c] = clips;
    assert.equal(c.sampleRate, 24000);
    assert.equal(c.text, TEXT);
    assert.equal(c.phonemes, PHONEMES);
    let energy = 0;
    for (const v of c.audio) energy += v * v;
    const rms = Math.sqrt(energy / c.audio.length);
    assert.ok(c.audio.length > 0.5 * 24000 && rms > 0.01, `speech: ${c.audio.length} samples, rms ${rms}`);
    if (wasmAudio) assert.deepEqual(c.audio, wasmAudio, 'the same engine gives the same samples in-process and in the CLI');
    if (existsSync(`${moonshine}/encoder_model.ort`)) {
      const wav = join(dir, 'stream.wav');
      const { writeFileSync } = await import('node:fs');
      writeFileSync(wav, floatWav(c.audio, 24000));
      const r = spawnSync(nativeCli, ['transcribe', '-m', moonshine, wav, '--json'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const heard = JSON.parse(r.stdout).text;
      console.log(`Moonshine hears: ${JSON.stringify(heard)}`);
      assert.match(heard.toLowerCase(), /hello,? world/);
    } else {
      console.log(`skipped the transcription: no Moonshine model in ${moonshine}`);
    }
  } finally {
    await tts.dispose();
  }
});

// Streaming (tts.streamPhonemes, tts.stream with chunks): the generator runs window by window, so the chunks
// differ from the whole sentence's audio only by its AdaINs' normalisation over each window
// (models/tts/kokoro.h). Joined, they are exactly as long as the whole sentence, and Moonshine hears the same
// words in both. Not the same audio: 2.6 dB mean log-spectral distance measured here (the wasm build against
// the native one: ~1.3-1.6 dB, MAX_MEAN_DB above), SNR ~1.4 dB; the bound catches a misplaced window.
const MAX_STREAM_DB = 3.5;
test('tts.stream in chunks: the whole sentence\'s length, its spectrum within bounds, the same words heard', { skip, timeout: 300_000 }, async () => {
  const tts = await Tts.load(model, { voices: `${repo}models/kokoro/voices/` });
  try {
    const text = 'The quick brown fox jumps over the lazy dog.';
    const [{ phonemes }] = await tts.sentences(text);
    const whole = await tts.speakPhonemes(phonemes);
    const chunks = [];
    for await (const c of tts.stream(text, { chunks: { firstChunkMs: 250 } })) chunks.push(c);
    assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
    assert.deepEqual(chunks.map((c) => c.chunk), chunks.map((_, i) => i));
    assert.deepEqual(chunks.map((c) => c.last), chunks.map((_, i) => i === chunks.length - 1));
    // The first chunk is 250 ms (20 decoded frames) counted from the first phoneme: the opening pause (the
    // leading pad's frames) comes with it, so its extra length is about where the speech starts.
    const extra = chunks[0].audio.length - 20 * 300;
    assert.ok(extra % 300 === 0 && extra > 0, `the first chunk: ${chunks[0].audio.length} samples`);
    assert.ok(Math.abs(extra - speechStart(whole.audio)) < 0.15 * 24000, `the first chunk's pause ${extra} samples, speech at ${speechStart(whole.audio)}`);
    assert.equal(chunks[1].audio.length, 2 * chunks[0].audio.length, 'then twice that');
    for (const c of chunks) assert.equal(c.text, text);
    const joined = new Float32Array(chunks.reduce((n, c) => n + c.audio.length, 0));
    let at = 0;
    for (const c of chunks) {
      joined.set(c.audio, at);
      at += c.audio.length;
    }
    assert.equal(joined.length, whole.audio.length);
    // Each chunk knows its sentence's length from the first on (a player cut short needs it).
    assert.deepEqual(chunks.map((c) => c.total), chunks.map(() => whole.audio.length));
    let signal = 0, noise = 0, maxAbs = 0;
    for (let i = 0; i < joined.length; i++) {
      const d = joined[i] - whole.audio[i];
      signal += whole.audio[i] ** 2;
      noise += d * d;
      maxAbs = Math.max(maxAbs, Math.abs(d));
    }
    const d = meanDbDistance(whole.audio, joined);
    console.log(`streamed in ${chunks.length} chunks vs whole: SNR ${(10 * Math.log10(signal / noise)).toFixed(1)} dB, ` +
      `max |diff| ${maxAbs.toFixed(4)}, mean log-spectral distance ${d.toFixed(3)} dB`);
    assert.ok(d <= MAX_STREAM_DB, `mean log-spectral distance ${d} dB > ${MAX_STREAM_DB}`);
    // trimStart: the first sentence starts 30 ms before its first sample above -50 dBFS, the rest untouched.
    assert.equal(speechStart(new Float32Array(100)), -1);
    assert.equal(speechStart(Float32Array.from({ length: 3000 }, (_, i) => (i >= 2000 ? 0.5 : 0))), 2000 - 720);
    const lead = speechStart(whole.audio);
    assert.ok(lead > 0.1 * 24000, `Kokoro opens with silence: ${lead} samples`);
    const trimmed = [];
    for await (const c of tts.stream(text, { trimStart: true })) trimmed.push(c);
    assert.deepEqual(trimmed[0].audio, whole.audio.subarray(lead));
    // leadMs: the opening pause cut to its last 100 ms (8 decoded frames) before the vocoder. The first chunk is
    // those frames and the 250 ms, every chunk's total the sentence less the frames cut (whole frames of the
    // pause, never speech), and the audio the whole sentence's from there, within the same spectral bound.
    const cutChunks = [];
    for await (const c of tts.stream(text, { chunks: { firstChunkMs: 250, leadMs: 100 } })) cutChunks.push(c);
    assert.equal(cutChunks[0].audio.length, (20 + 8) * 300, 'the first chunk: 100 ms of the pause, then 250 ms');
    const cutJoined = new Float32Array(cutChunks.reduce((n, c) => n + c.audio.length, 0));
    at = 0;
    for (const c of cutChunks) {
      cutJoined.set(c.audio, at);
      at += c.audio.length;
    }
    const cut = whole.audio.length - cutJoined.length;
    assert.ok(cut % 300 === 0 && cut > 0 && cut <= speechStart(whole.audio), `${cut} samples cut, speech at ${speechStart(whole.audio)}`);
    assert.deepEqual(cutChunks.map((c) => c.total), cutChunks.map(() => cutJoined.length));
    const dCut = meanDbDistance(whole.audio.subarray(cut), cutJoined);
    console.log(`leading pause cut by ${cut} samples: mean log-spectral distance ${dCut.toFixed(3)} dB to the whole sentence's rest`);
    assert.ok(dCut <= MAX_STREAM_DB, `mean log-spectral distance ${dCut} dB > ${MAX_STREAM_DB}`);
    // One window (a first chunk longer than the sentence) is the whole computation: the same samples.
    const one = [];
    for await (const c of tts.streamPhonemes(phonemes, { firstChunkMs: 60_000 })) one.push(c);
    assert.equal(one.length, 1);
    assert.deepEqual(one[0].audio, whole.audio);
    if (existsSync(`${moonshine}/encoder_model.ort`)) {
      const { writeFileSync } = await import('node:fs');
      const hear = (audio, name) => {
        const wav = join(dir, name);
        writeFileSync(wav, floatWav(audio, 24000));
        const r = spawnSync(nativeCli, ['transcribe', '-m', moonshine, wav, '--json'], { encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
        return JSON.parse(r.stdout).text;
      };
      const words = (s) => s.toLowerCase().replace(/[^a-z ]/g, '').trim();
      const heardWhole = hear(whole.audio, 'whole.wav'), heardChunks = hear(joined, 'chunks.wav'), heardCut = hear(cutJoined, 'cut.wav');
      console.log(`Moonshine hears: whole ${JSON.stringify(heardWhole)}, chunks ${JSON.stringify(heardChunks)}, pause cut ${JSON.stringify(heardCut)}`);
      assert.equal(words(heardChunks), words(heardWhole));
      assert.equal(words(heardCut), words(heardWhole));
    }
  } finally {
    await tts.dispose();
  }
});
