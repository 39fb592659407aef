// One headless Chromium and one test server (web/serve.mjs: COOP/COEP on every response, so pages are
// cross-origin isolated and wasm threads work) per test file, and the pages the browser tests open in it.
import { after, before } from 'node:test';
import { chromium } from 'playwright-core';

import { startServer } from '../../web/serve.mjs';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const CPU_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];
// Flags that give navigator.gpu a SwiftShader adapter on this GPU-less machine (measured: --enable-unsafe-webgpu
// alone already does, on a secure origin such as http://127.0.0.1; the Vulkan/ANGLE flags pin the path).
// With them, Playwright's --enable-unsafe-swiftshader default is dropped so WebGPU does not depend on it;
// Playwright's other defaults (headless, the debugging pipe) stay.
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader'];

// A headless Chromium with `args`; webgpu: WEBGPU_ARGS added to them (and Playwright's SwiftShader default dropped).
export function launchChromium({ args = CPU_ARGS, webgpu = false } = {}) {
  return chromium.launch({
    executablePath: CHROMIUM, args: webgpu ? [...args, ...WEBGPU_ARGS] : args,
    ...(webgpu && { ignoreDefaultArgs: ['--enable-unsafe-swiftshader'] }), timeout: 60000 });
}

// Registers the file's before/after hooks; -> {browser, url} filled in once the browser has started. args:
// Chromium's flags; webgpu: WEBGPU_ARGS added to them. skip: a reason the file's tests are skipped
// (nothing is started). onDemand: start at the first onPage instead of before the file's first test (for a
// file where one test of many needs the browser). serve: false for a file that serves its pages itself.
export function useBrowser({ args = CPU_ARGS, webgpu = false, skip = false, onDemand = false, serve = true } = {}) {
  const chrome = { browser: null, url: '', server: null };
  let started = null;
  chrome.start = () => (started ??= (async () => {
    if (serve) ({ server: chrome.server, url: chrome.url } = await startServer(0));
    chrome.browser = await launchChromium({ args, webgpu });
  })());
  before(async () => {
    if (!skip && !onDemand) await chrome.start();
  });
  after(async () => {
    await chrome.browser?.close();
    chrome.server?.close();
  });
  return chrome;
}

// Opens `path` of the test server in a new page of chrome's browser (a context of its own), checks it is
// cross-origin isolated (wasm threads need it), runs fn(page, logs) and closes the page; a failure's message
// ends with the page's console log and errors (logs collects them as they come). setup(page), if given, runs
// before the page loads (routes, init scripts, permissions through page.context()).
export async function onPage(chrome, path, fn, setup = null) {
  await chrome.start();
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

// onPage on the lab page (web/lab/?query) once it has started (window.sottoLab.ready).
export function onLab(chrome, query, fn) {
  return onPage(chrome, `web/lab/?${query}`, async (page, logs) => {
    await page.waitForFunction(() => window.sottoLab?.ready);
    await page.evaluate(() => window.sottoLab.ready);
    return fn(page, logs);
  });
}
