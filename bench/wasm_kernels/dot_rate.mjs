// Times bench/wasm_kernels/dot_rate.c's int dot instructions in headless Chromium (build it first, see there):
// billions of multiply-adds per second on one thread, best of 3, and how the relaxed i8 dot is lowered.
//   node bench/wasm_kernels/dot_rate.mjs [/tmp/dot_rate.wasm]
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { chromium } from 'playwright-core';

import { CHROMIUM, CHROMIUM_ARGS } from '../bench_page.mjs';

const wasm = readFileSync(process.argv[2] ?? '/tmp/dot_rate.wasm');
const server = createServer((q, r) => {
  if (q.url === '/dot.wasm') r.writeHead(200, { 'Content-Type': 'application/wasm' }).end(wasm);
  else r.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html>');
}).listen(0, '127.0.0.1');
await new Promise((ok) => server.once('listening', ok));
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const out = await page.evaluate(async () => {
    const { instance } = await WebAssembly.instantiate(await (await fetch('/dot.wasm')).arrayBuffer());
    const e = instance.exports;
    e.fill(1);
    const r = { probe: e.probe(), browser: navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] };
    const fns = ['dot8', 'dot16', 'dot8t', 'dot16t'];
    for (let w = 0; w < 3; ++w) for (const f of fns) e[f](2000);
    for (const f of fns) {
      const macs = (f.endsWith('t') ? 12 : 8) * 1024 * 20000;
      let best = 0;
      for (let k = 0; k < 3; ++k) {
        const t = performance.now();
        e[f](20000);
        best = Math.max(best, macs / (performance.now() - t) / 1e6);
      }
      r[`${f} GMAC/s`] = Number(best.toFixed(1));
    }
    return r;
  });
  console.log(JSON.stringify(out, null, 1));
} finally {
  await browser.close();
  server.close();
}
