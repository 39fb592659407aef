// The voice agent's first spoken piece in headless Chromium, as the page makes it: Kokoro in wasm (web/tts.js)
// in a cross-origin isolated page (web/serve.mjs), the agent's short first pieces as text through our G2P.
// Each variant is one Tts of its own (threads, wasm build, whole piece or streamed chunks), all loaded side by
// side in one page and called interleaved, piece by piece, so a loaded machine slows each alike. Times are the
// page's, messaging included, from the call: to the first audio (the whole piece, or its first chunk), to the
// first audible sample were the chunks played on arrival, and to the piece's last sample.
//
//   node bench/tts_first_piece.mjs [--variants SPEC,...] [--repeats 5] [--pieces 1-4] [--first-chunk-ms 300] [--out FILE.md]
//
// A variant SPEC is threads[:whole|stream][:WASM] (WASM: a URL path under the repository, default the relaxed
// build the agent page picks in Chromium), e.g. 1:whole,2:whole,2:stream,1:whole:/build/base/sotto.wasm.
// Needs build/wasm-relaxed (or the given builds), models/kokoro and models/g2p-en-us.bin.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { chromium } from 'playwright-core';

import { markdownTable, median } from './report.mjs';
import { startServer } from '../web/serve.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const variants = arg('--variants', '1:whole,2:whole,2:stream').split(',').map((spec) => {
  const [threads, mode = 'whole', wasm = '/build/wasm-relaxed/sotto.wasm'] = spec.split(':');
  return { spec, threads: Number(threads), stream: mode === 'stream', wasm };
});
const repeats = Number(arg('--repeats', '5'));
const firstChunkMs = Number(arg('--first-chunk-ms', '300'));
const out = arg('--out', null);
// The agent's first pieces (web/agent: at most five words, or up to a comma).
const PIECES = ['The capital of France is', 'Sure, I can help!', 'Hello! How can I help', 'I am doing well,']
  .slice(0, Number(arg('--pieces', '4')));

const load0 = loadavg();
const { server, url } = await startServer(0);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
let rows;
try {
  const page = await browser.newPage();
  page.on('console', (m) => m.type() === 'error' && console.error(m.text()));
  await page.goto(new URL('/web/lab/', url).href).catch(() => {});
  rows = await page.evaluate(async ({ variants, repeats, firstChunkMs, PIECES }) => {
    if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated: no threads');
    const { Tts } = await import('/web/tts.js');
    const model = '/models/kokoro/kokoro-v1.0.int8.onnx';
    const engines = [];
    for (const v of variants) {
      engines.push(await Tts.load(model, { threads: v.threads, wasmUrl: v.wasm }));
    }
    const phonemes = [];
    for (const text of PIECES) phonemes.push((await engines[0].sentences(text)).map((s) => s.phonemes).join(' '));
    // Warm-up: the first call of each length sizes the tensor pool (the page warms up with 'Hello.').
    for (const tts of engines) await tts.speakPhonemes(phonemes[0]);
    const results = variants.map(() => PIECES.map(() => ({ first: [], audible: [], total: [], samples: 0 })));
    // When the first sample above -50 dBFS would be heard if each chunk were played on arrival, back to back:
    // Kokoro opens with ~0.3 s of its pad's silence, which the page plays (and counts as its "first sound").
    const audibleAt = (chunks) => {
      let playAt = 0;
      for (const { audio, arrived } of chunks) {
        playAt = Math.max(playAt, arrived);
        const k = audio.findIndex((x) => Math.abs(x) > 0.003);
        if (k >= 0) return playAt + (k / 24000) * 1000;
        playAt += (audio.length / 24000) * 1000;
      }
      return null;
    };
    for (let r = 0; r < repeats; r++) {
      for (let p = 0; p < PIECES.length; p++) {
        for (let i = 0; i < variants.length; i++) {
          const at = (i + r) % variants.length;  // rotate the order each round
          const v = variants[at], tts = engines[at], slot = results[at][p];
          const t0 = performance.now();
          const chunks = [];
          if (v.stream) {
            for await (const c of tts.streamPhonemes(phonemes[p], { firstChunkMs })) {
              chunks.push({ audio: c.audio, arrived: performance.now() - t0 });
            }
          } else {
            const a = await tts.speakPhonemes(phonemes[p]);
            chunks.push({ audio: a.audio, arrived: performance.now() - t0 });
          }
          slot.first.push(chunks[0].arrived);
          slot.audible.push(audibleAt(chunks));
          slot.total.push(chunks[chunks.length - 1].arrived);
          slot.samples = chunks.reduce((n, c) => n + c.audio.length, 0);
        }
      }
    }
    const threads = engines.map((t) => t.threads);
    for (const tts of engines) await tts.dispose();
    return { results, threads, phonemes };
  }, { variants, repeats, firstChunkMs, PIECES });
} finally {
  await browser.close();
  server.close();
}

const med = (xs) => median(xs);
const table = [];
PIECES.forEach((text, p) => {
  const base = med(rows.results[0][p].audible);
  variants.forEach((v, i) => {
    const r = rows.results[i][p];
    table.push([`"${text}"`, `${v.threads} (${rows.threads[i]})`, v.stream ? `stream ${firstChunkMs} ms` : 'whole',
      v.wasm, (r.samples / 24000).toFixed(2), med(r.first).toFixed(0), med(r.audible).toFixed(0), med(r.total).toFixed(0),
      (base / med(r.audible)).toFixed(2)]);
  });
});
const report = [
  `# Kokoro's first spoken piece in headless Chromium (${new Date().toISOString().slice(0, 10)})`, '',
  `${cpus()[0].model}, ${cpus().length} cores; load average ${load0.map((x) => x.toFixed(1)).join(' ')} at the start, ` +
  `${loadavg().map((x) => x.toFixed(1)).join(' ')} at the end; median of ${repeats}, variants interleaved (order rotated each round).`,
  `Command: node bench/tts_first_piece.mjs --variants ${variants.map((v) => v.spec).join(',')} --repeats ${repeats} --pieces ${PIECES.length} --first-chunk-ms ${firstChunkMs}`, '',
  markdownTable(['piece', 'threads (got)', 'mode', 'wasm', 'audio s', 'first audio ms', 'first audible ms', 'whole piece ms', 'audible: first variant / this'], table,
    { format: (x) => x }), '',
].join('\n');
if (out) writeFileSync(out, report);
console.log(report);
