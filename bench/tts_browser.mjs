// Kokoro in wasm (web/tts.js) in headless Chromium: load, then the short and the long sentence of
// bench/kokoro.mjs as phonemes, on 1 and 2 pool threads (the page is cross-origin isolated: web/serve.mjs);
// prints the real-time factor of each (audio seconds per compute second; the first call of each is a warm-up).
//   node bench/tts_browser.mjs [--threads 1,2] [--repeats 3] [--variant simd128|relaxed]
// (needs build/wasm-*, models/kokoro).
import { chromium } from 'playwright-core';
import { startServer } from '../web/serve.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const threadsList = arg('--threads', '1,2').split(',').map(Number);
const repeats = Number(arg('--repeats', '3'));
const variant = arg('--variant', 'simd128');
const PHRASES = [
  'ðə kˈæt sˈæt.',
  'həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.',
];
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const page = await browser.newPage();
  await page.goto(new URL('/web/lab/', url).href).catch(() => {});
  for (const threads of threadsList) {
    const r = await page.evaluate(async ({ threads, repeats, variant, PHRASES }) => {
      const { Tts } = await import('/web/tts.js');
      const t0 = performance.now();
      const tts = await Tts.load('/models/kokoro/kokoro-v1.0.int8.onnx', { threads, variant });
      const loadMs = performance.now() - t0;
      const out = [];
      for (const p of PHRASES) {
        await tts.speakPhonemes(p);  // warm-up: the first call sizes the tensor pool
        const ms = [];
        let samples = 0;
        for (let i = 0; i < repeats; i++) {
          const a = await tts.speakPhonemes(p);
          ms.push(a.ms);
          samples = a.audio.length;
        }
        ms.sort((x, y) => x - y);
        out.push({ phonemes: [...p].length, samples, ms: ms[ms.length >> 1] });
      }
      const info = { threads: tts.threads, worker: tts.worker };
      await tts.dispose();
      return { loadMs, crossOriginIsolated, info, out };
    }, { threads, repeats, variant, PHRASES });
    for (const o of r.out) {
      console.log(`threads ${threads} (engine ${r.info.threads}, isolated ${r.crossOriginIsolated}), ${variant}, ${o.phonemes} phonemes: ` +
        `${(o.samples / 24000).toFixed(2)} s audio in ${o.ms.toFixed(0)} ms = ${((o.samples / 24000) / (o.ms / 1000)).toFixed(2)}x real time`);
    }
  }
} finally {
  await browser.close();
  server.close();
}
