// One headless Chromium and one test server (web/serve.mjs: COOP/COEP on every response, so pages are
// cross-origin isolated and wasm threads work) per test file, for the tests that run our engine on the CPU.
// (browser.test.mjs and gpu_browser.test.mjs launch with WebGPU flags of their own.)
import { after, before } from 'node:test';
import { chromium } from 'playwright-core';

import { startServer } from '../../web/serve.mjs';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const CPU_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

// Registers the file's before/after hooks; -> {browser, url} filled in once `before` has run. skip: a reason
// the file's tests are skipped (nothing is started).
export function useBrowser({ args = CPU_ARGS, skip = false } = {}) {
  const chrome = { browser: null, url: '', server: null };
  before(async () => {
    if (skip) return;
    ({ server: chrome.server, url: chrome.url } = await startServer(0));
    chrome.browser = await chromium.launch({ executablePath: CHROMIUM, args, timeout: 60000 });
  });
  after(async () => {
    await chrome.browser?.close();
    chrome.server?.close();
  });
  return chrome;
}

// Opens `path` of the test server in a new page of chrome's browser, checks it is cross-origin isolated (wasm
// threads need it), runs fn(page, logs) and closes the page; a failure's message ends with the page's console
// log and errors (logs collects them as they come). setup(page), if given, runs before the page loads (routes).
export async function onPage(chrome, path, fn, setup = null) {
  const page = await chrome.browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  try {
    await setup?.(page);
    await page.goto(`${chrome.url}${path}`);
    if (!(await page.evaluate(() => crossOriginIsolated))) throw new Error(`${path} is not cross-origin isolated`);
    return await fn(page, logs);
  } catch (e) {
    e.message += `\npage log:\n${logs.join('\n')}`;
    throw e;
  } finally {
    await page.close();
  }
}
