// The lab's VAD page (web/lab/vad.html) in headless Chromium: it analyses its default clip, draws the plot with
// axes and a legend (pixels in the left and bottom margins, where only axis labels go, and in the legend row
// above the plot area), and the microphone (Chromium's fake device) runs through an AudioWorklet: the page
// fails if anything asks for the deprecated ScriptProcessorNode.
// Run: node --test tests/web/vad_lab_browser.test.mjs   (needs build/wasm-simd128, /usr/bin/chromium or $CHROMIUM)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';

import { CHROMIUM, CPU_ARGS, onPage, useBrowser } from './browser_support.mjs';
import { haveFixtures, wasmPath } from './vad_support.mjs';

const skip = !haveFixtures() ? 'fixtures missing' : !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}`
  : !existsSync(wasmPath('simd128')) && 'build wasm-simd128 first';
const chrome = useBrowser({ skip, args: [...CPU_ARGS, '--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
  '--autoplay-policy=no-user-gesture-required'] });

test('VAD lab: plot with axes and legend, microphone through an AudioWorklet', { skip, timeout: 180000 }, async () => {
  // The page asks for the relaxed build; a checkout with only the SIMD128 one serves that instead (the page's
  // drawing and audio are under test here, not the kernels).
  const relaxed = existsSync(wasmPath('relaxed')) ? wasmPath('relaxed') : wasmPath('simd128');
  const setup = async (page) => {
    await page.context().grantPermissions(['microphone']);
    await page.addInitScript(() => {
      window.scriptProcessorAsked = 0;
      BaseAudioContext.prototype.createScriptProcessor = function () {
        window.scriptProcessorAsked++;
        throw new Error('ScriptProcessorNode is deprecated');
      };
    });
    await page.route(/\/build\/wasm-relaxed\/sotto\.wasm$/, (route) => route.fulfill({
      path: relaxed, contentType: 'application/wasm', headers: { 'Cross-Origin-Resource-Policy': 'same-origin' } }));
  };
  await onPage(chrome, 'web/lab/vad.html', async (page, logs) => {
    await page.waitForFunction(() => /segments/.test(document.getElementById('summary').textContent), null, { timeout: 120000 });
    const ink = await page.evaluate(() => {
      const c = document.getElementById('plot');
      const { data, width, height } = c.getContext('2d').getImageData(0, 0, c.width, c.height);
      const count = (x0, y0, x1, y1) => {
        let n = 0;
        for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) if (data[4 * (y * width + x) + 3] > 0) n++;
        return n;
      };
      return { left: count(0, 30, 40, height - 30), bottom: count(50, height - 20, width - 10, height),
               legend: count(44, 0, width, 20), plot: count(50, 30, width - 20, height - 30),
               // between the probability labels (right-aligned at x 40) and the plot area (from x 44): a plot
               // that fills the whole canvas, as one without axes does, draws its waveform here
               gutter: count(42, 24, 44, height - 26) };
    });
    const { gutter, ...drawn } = ink;
    assert.equal(gutter, 0, 'the plot area should leave a margin for the axis labels');
    for (const [where, n] of Object.entries(drawn)) assert.ok(n > 50, `nothing drawn in the plot's ${where} (${n} pixels)`);
    await page.click('#mic');
    await page.waitForFunction(() => /^microphone: /.test(document.getElementById('summary').textContent), null, { timeout: 60000 });
    assert.equal(await page.evaluate(() => window.scriptProcessorAsked), 0);
    await page.click('#mic');
    await page.waitForFunction(() => /microphone off/.test(document.getElementById('events').textContent), null, { timeout: 30000 });
    assert.ok(!logs.some((l) => l.startsWith('pageerror')), 'an error in the page');
  }, setup);
});
