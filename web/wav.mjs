// Mono WAV files as sotto's CLIs write them (Node: Buffer): a 44-byte RIFF header, then 32-bit float samples
// (format 3, what `speak` writes) or 16-bit PCM (format 1). For web/cli.mjs and the tests and benches that make
// clips.

// The header of a mono WAV of `bits` 32 (float) or 16 (PCM) at `rate`, its data chunk saying dataBytes.
export function wavHeader(rate, bits, dataBytes) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(bits === 32 ? 3 : 1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE((rate * bits) / 8, 28);
  h.writeUInt16LE(bits / 8, 32);
  h.writeUInt16LE(bits, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

// samples (a Float32Array or numbers) -> the bytes of a 32-bit float WAV.
export function floatWav(samples, rate) {
  const f = samples instanceof Float32Array ? samples : Float32Array.from(samples);
  return Buffer.concat([wavHeader(rate, 32, f.byteLength), Buffer.from(f.buffer, f.byteOffset, f.byteLength)]);
}

// samples in [-1, 1] -> the bytes of a 16-bit PCM WAV: each sample times `scale`, rounded and clipped.
export function pcm16Wav(samples, rate, scale = 32768) {
  const b = Buffer.concat([wavHeader(rate, 16, samples.length * 2), Buffer.alloc(samples.length * 2)]);
  for (let i = 0; i < samples.length; i++)
    b.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i] * scale))), 44 + 2 * i);
  return b;
}
