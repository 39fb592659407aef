// Stand-ins for web/asr.js and web/tts.js with the interfaces the agent page expects (web/agent/speech.js), for
// testing the page's voice path before the real models reach the browser: the "recognizer" answers every
// utterance with one fixed question, the "voice" is a 440 Hz tone 60 ms per character of each sentence. They
// load nothing and compute nothing worth measuring; only the page's plumbing is under test.
export const STANDIN_QUESTION = 'What is the capital of France?';

export class Asr {
  static async load(_url, { onProgress } = {}) {
    onProgress?.({ loaded: 1, total: 1 });
    return new Asr();
  }
  async transcribe(samples) {
    if (!(samples instanceof Float32Array) || samples.length < 1600) throw new Error('stand-in ASR: expected 16 kHz samples');
    return { text: STANDIN_QUESTION, samples: samples.length };
  }
}

export class Tts {
  static async load(_url, { onProgress } = {}) {
    onProgress?.({ loaded: 1, total: 1 });
    return new Tts();
  }
  voices = ['tone_a', 'tone_b'];
  async *stream(textOrSentences) {
    const rate = 24000;
    const sentences = typeof textOrSentences === 'string' ? [textOrSentences] : textOrSentences;
    for await (const text of sentences) {
      const audio = new Float32Array(Math.round(rate * 0.06 * text.length));
      for (let i = 0; i < audio.length; i++) audio[i] = 0.2 * Math.sin((2 * Math.PI * 440 * i) / rate);
      yield { audio, sampleRate: rate, text };
    }
  }
}
