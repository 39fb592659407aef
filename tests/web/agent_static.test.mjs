// The one-file agent from a plain static host: a server that sends no COOP/COEP headers (as GitHub Pages or
// `python3 -m http.server` would), holding only build/agent/index.html, sw.js and models/. The page's service
// worker adds the headers, the page reloads once and runs cross-origin isolated (the engine's threads), and it
// answers a typed question with the model beside it — requesting nothing but those files.
// Run: node --test tests/web/agent_static.test.mjs
import assert from 'node:assert/strict';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { assertOnlyAllowed, buildOnce, fixtures, openAgent, repo, skipReason, useAgentBrowser, waitReady } from './agent_support.mjs';

const skip = skipReason();
let server = null;
let base = '';
const served = [];

// The language model from the fixtures; the speech models (web/asr.js and web/tts.js are in the build) from the
// repository's models/.
function modelFile(models, rel) {
  const fixture = join(models, rel);
  return existsSync(fixture) ? fixture : join(repo, 'models', rel);
}

// Plain files, no special headers, no Range support: the page must cope with a 200 to its Range request.
function staticHost(dir, models) {
  return createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    served.push(path);
    const file = path === '/agent/' ? join(dir, 'index.html') : path === '/agent/sw.js' ? join(dir, 'sw.js')
      : path.startsWith('/agent/models/') ? modelFile(models, path.slice('/agent/models/'.length)) : null;
    if (!file || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    const type = file.endsWith('.html') ? 'text/html' : file.endsWith('.js') ? 'text/javascript' : 'application/octet-stream';
    res.writeHead(200, { 'Content-Type': type, 'Content-Length': statSync(file).size });
    createReadStream(file).pipe(res);
  });
}

before(async () => {
  if (skip) return;
  const build = await buildOnce();
  server = staticHost(join(build.file, '..'), `${fixtures}/llm`);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}/`;
});
// The browser only: this file's pages come from its own static host.
const chrome = useAgentBrowser({ serve: false, skip });

after(async () => {
  server?.close();
});

test('from a static host without COOP/COEP, the service worker isolates the page and it answers', { skip }, async () => {
  const { page, logs, requests, context } = await openAgent(chrome.browser, base, '/agent/?model=models/stories260K.gguf&tokens=4&warmup=0');
  try {
    await waitReady(page);
    assert.equal(await page.evaluate(() => crossOriginIsolated), true);
    assert.ok(await page.evaluate(() => !!navigator.serviceWorker.controller), 'no service worker controls the page');
    await page.evaluate(() => window.sottoAgent.ask('Once upon a time'));
    const turn = await page.evaluate(() => window.sottoAgent.turns[0]);
    assert.ok(turn.reply.length > 0);
    assert.match(await page.evaluate(() => window.sottoAgent.models.llm.detail), /kept in this browser/);
    assert.deepEqual(logs, []);
    assertOnlyAllowed(requests, base);
    // Only the page, its service worker and model files (the speech models' when the build has web/asr.js, web/tts.js).
    assert.deepEqual([...new Set(served)].filter((p) => !/^\/agent\/models\/(moonshine-base-en|kokoro)\/|^\/agent\/models\/g2p-en-(us|gb)\.bin$/.test(p)).sort(),
      ['/agent/', '/agent/models/stories260K.gguf', '/agent/sw.js']);
  } finally {
    await context.close();
  }
});
