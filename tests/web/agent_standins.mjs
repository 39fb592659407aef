// Stand-ins for web/asr.js and web/tts.js with the interfaces the agent page expects (web/agent/speech.js), for
// testing the page's voice path before the real models reach the browser: the "recognizer" answers every
// utterance with one fixed question (or the page's ?asrtext=), the "voice" is a 440 Hz tone 60 ms per character of each sentence. They
// load nothing and compute nothing worth measuring; only the page's plumbing is under test.
export const STANDIN_QUESTION = 'What is the capital of France?';

export class Asr {
  static async load(_url, { onProgress } = {}) {
    onProgress?.({ loaded: 1, total: 1 });
    return new Asr();
  }
  async transcribe(samples) {
    if (!(samples instanceof Float32Array) || samples.length < 1600) throw new Error('stand-in ASR: expected 16 kHz samples');
    // ?asrtext=... on the page answers that instead (asrtext= : speech that holds no words).
    const text = new URLSearchParams(globalThis.location?.search ?? '').get('asrtext');
    return { text: text ?? STANDIN_QUESTION, samples: samples.length };
  }
}

export class Tts {
  static async load(_url, { onProgress } = {}) {
    onProgress?.({ loaded: 1, total: 1 });
    return new Tts();
  }
  voices = ['tone_a', 'tone_b'];
  // With { chunks } (web/tts.js's streamed voice, the page's default) each sentence's tone comes as chunks of
  // firstChunkMs at once, then chunks of twice the one before, each made in 0.8x the length of the one before
  // it (a vocoder just faster than real time, as Kokoro's chunks are on a quiet machine: no gap in the voice,
  // which would restart the echo gate's count): while one plays the next is not made yet, so a barge-in lands
  // on a sentence whose later chunks do not exist. total: the sentence's samples, as web/tts.js gives.
  async *stream(textOrSentences, { chunks = false } = {}) {
    const rate = 24000;
    const sentences = typeof textOrSentences === 'string' ? [textOrSentences] : textOrSentences;
    for await (const text of sentences) {
      const audio = new Float32Array(Math.round(rate * 0.06 * text.length));
      for (let i = 0; i < audio.length; i++) audio[i] = 0.2 * Math.sin((2 * Math.PI * 440 * i) / rate);
      if (!chunks) {
        yield { audio, sampleRate: rate, text };
        continue;
      }
      let size = Math.round((rate * (chunks.firstChunkMs ?? 300)) / 1000);
      for (let at = 0, chunk = 0; at < audio.length; at += size, size *= 2, chunk++) {
        const part = audio.slice(at, at + size);
        if (chunk) await new Promise((r) => setTimeout(r, (0.8 * (size / 2) * 1000) / rate));
        yield { audio: part, sampleRate: rate, text, chunk, last: at + size >= audio.length, total: audio.length };
      }
    }
  }
}
