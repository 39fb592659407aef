#!/usr/bin/env node
// Screenshots of the voice-agent page after a spoken turn, for looking at it: the one-file build (build/agent,
// built first) served by web/serve.mjs, headless Chromium with CLIP.wav as its fake microphone, the real models
// (CPU profile). Writes OUT_DIR/agent-{wide,narrow}-{light,dark}.png once the turn's reply has been spoken.
//
//   node tools/agent_screenshots.mjs [--out DIR] [CLIP.wav]   (default: /tmp/sotto-screenshots, bench/data/questions/capital.wav)
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

import { buildAgent } from '../web/agent/build.mjs';
import { startServer } from '../web/serve.mjs';

const { values: opts, positionals } = parseArgs({ allowPositionals: true, options: { out: { type: 'string', default: '/tmp/sotto-screenshots' } } });
const clip = positionals[0] ?? fileURLToPath(new URL('../bench/data/questions/capital.wav', import.meta.url));
mkdirSync(opts.out, { recursive: true });
await buildAgent();
const { server, url } = await startServer(0);
const profile = mkdtempSync(join(tmpdir(), 'sotto-shots-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, viewport: { width: 1280, height: 860 },
  args: ['--no-sandbox', '--autoplay-policy=no-user-gesture-required', '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${clip}%noloop`],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${url}agent/?profile=cpu`);
  await page.waitForFunction(() => window.sottoAgent?.ready || window.sottoAgent?.status === 'error', null, { timeout: 600000 });
  await page.evaluate(() => window.sottoAgent.toggleMic());
  await page.waitForFunction(() => window.sottoAgent.turns.some((t) => t.stages?.first_sound_ms > 0 && t.stages.reply_done_ms > 0), null, { timeout: 300000 });
  await page.waitForTimeout(1500);
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [name, width] of [['wide', 1280], ['narrow', 420]]) {
      await page.setViewportSize({ width, height: 860 });
      await page.waitForTimeout(300);
      const file = join(opts.out, `agent-${name}-${scheme}.png`);
      await page.screenshot({ path: file, fullPage: name === 'narrow' });
      console.log(file);
    }
  }
} finally {
  await context.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
