// Speech recognition (web/asr.js, Moonshine) and synthesis (web/tts.js, Kokoro) when this tree has them. The
// page works without either: typing replaces the first, text the second. The one-file build (build.mjs)
// replaces this module with static imports of whichever of the two files exist when it runs.
//
// What the page expects of them:
//   const asr = await Asr.load(dirUrl, { device: 'cpu' | 'webgpu' | 'auto', engine, onProgress({ loaded, total }) });
//   (the real ones run in dedicated workers, web/speech-worker.js: asr.worker / tts.worker say so)
//   const { text } = await asr.transcribe(samples);     // Float32Array, mono, 16 kHz
//   const tts = await Tts.load(modelUrl, { device, voices: voicesDirUrl, engine, onProgress });
//   tts.voices                                            // ['af_heart', ...] (optional: the settings list)
//   for await (const { audio, sampleRate, text } of tts.stream(asyncIterableOfSentences, { voice, speed })) ...
async function optional(load) {
  try {
    return await load();
  } catch {
    return null;
  }
}

export async function loadSpeechModules() {
  const [asr, tts] = await Promise.all([optional(() => import('../asr.js')), optional(() => import('../tts.js'))]);
  return { Asr: asr?.Asr ?? null, Tts: tts?.Tts ?? null };
}
