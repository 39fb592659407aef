// Kokoro in wasm (web/tts.js) in headless Chromium: load, then two sentences; prints the real-time factor of each
// (audio seconds per compute second). Run: node bench/tts_browser.mjs (needs build/wasm-*, models/kokoro, g2p).
import { chromium } from 'playwright-core';
import { startServer } from '../web/serve.mjs';
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage();
await page.goto(new URL('/web/lab/', url).href).catch(() => {});
const r = await page.evaluate(async () => {
  const { Tts } = await import('/web/tts.js');
  const t0 = performance.now();
  const tts = await Tts.load('/models/kokoro/kokoro-v1.0.int8.onnx');
  const loadMs = performance.now() - t0;
  const a = await tts.speak('Hello world.');
  const b = await tts.speak('The quick brown fox jumps over the lazy dog.');
  return { loadMs, crossOriginIsolated, a: [a.audio.length, a.ms], b: [b.audio.length, b.ms] };
});
console.log(JSON.stringify(r), 'rtf', (r.a[0] / 24000) / (r.a[1] / 1000), (r.b[0] / 24000) / (r.b[1] / 1000));
await browser.close(); server.close();
