// One benchmark page in headless Chromium on web/serve.mjs (cross-origin isolated): SOTTO_WASM_DIR's builds
// served in place of build/'s, the page's console echoed, and a crash (out of memory) turned into a rejection.
// Shared by bench/moonshine_web.mjs and bench/parakeet.mjs --browser.
import { dirname, join, resolve } from 'node:path';

const repo = resolve(dirname(new URL(import.meta.url).pathname), '..');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];
export const wasmDir = process.env.SOTTO_WASM_DIR ?? join(repo, 'build');  // holding wasm-relaxed/ and wasm-simd128/

// -> { page, crashed }: race crashed (never resolves) against page.evaluate.
export async function openBenchPage(browser, url) {
  const page = await browser.newPage();
  if (wasmDir !== join(repo, 'build'))
    await page.route(/\/build\/wasm-(simd128|relaxed)\/sotto\.wasm$/, (route) =>
      route.fulfill({ path: join(wasmDir, `wasm-${route.request().url().match(/wasm-(simd128|relaxed)/)[1]}/sotto.wasm`), contentType: 'application/wasm' }));
  page.on('console', (m) => console.log(`  page: ${m.text()}`));
  const crashed = new Promise((_, reject) => page.on('crash', () => reject(new Error('the page crashed (out of memory?)'))));
  await page.goto(`${url}web/serve.mjs`);
  return { page, crashed };
}
