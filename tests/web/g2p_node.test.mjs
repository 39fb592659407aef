// The G2P in wasm (web/g2p.js, SIMD128 build, Node) against the native one: `node web/cli.mjs phonemize`
// must print byte for byte what `build/bin/sotto phonemize` prints, plain, --sentences and --json, in both
// languages, for every text of tests/data/g2p/texts.txt and texts_license.txt, words in no lexicon and some bad
// input; and the lexicon loads in the page's engine quickly (the time is printed).
// Run: node --test tests/web/g2p_node.test.mjs   (needs build/wasm-simd128, build/bin/sotto or SOTTO_CLI,
// and models/g2p-en-*.bin from scripts/get-models.sh g2p; skips without them)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { G2p } from '../../web/g2p.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const cli = `${repo}web/cli.mjs`;
const nativeCli = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
const wasmPath = `${repo}build/wasm-simd128/sotto.wasm`;
const lexicon = (lang) => `${repo}models/g2p-${lang}.bin`;
const skip = !existsSync(wasmPath) ? 'build the wasm first (build/wasm-simd128)'
  : !existsSync(nativeCli) ? `no native CLI at ${nativeCli}`
  : !existsSync(lexicon('en-us')) || !existsSync(lexicon('en-gb')) ? 'models/g2p-en-*.bin missing (bash scripts/get-models.sh g2p)' : false;

function texts() {
  const lines = [];
  for (const f of ['texts.txt', 'texts_license.txt'])
    for (const l of readFileSync(`${repo}tests/data/g2p/${f}`, 'utf8').split('\n')) if (l && !l.startsWith('#')) lines.push(l);
  return lines;
}

test('wasm phonemize prints what the native CLI prints', { skip }, () => {
  const input = Buffer.concat([
    Buffer.from(texts().join('\n') + '\n'),
    Buffer.from('Emoji 🎉, other scripts 你好, invalid \xff\xfe bytes, 100% of $3.50 at 10:05.\n', 'latin1'),
    // Words in no lexicon: the affix rules (un-, over-, -ness, -ers, ...) and the letter-to-sound model.
    Buffer.from('Unfriendlinesses overgropedly nonsmokers blorfiness Snargers rezintleishly quandling.\n'),
  ]);
  for (const lang of ['en-us', 'en-gb']) {
    for (const flags of [[], ['--sentences'], ['--json']]) {
      const args = ['phonemize', '--lang', lang, '--lexicon', lexicon(lang), ...flags];
      const native = execFileSync(nativeCli, args, { input, encoding: 'utf8', maxBuffer: 1 << 26 });
      const wasm = execFileSync(process.execPath, [cli, ...args], { input, encoding: 'utf8', maxBuffer: 1 << 26 });
      assert.equal(wasm, native, `${lang} ${flags.join(' ')}`);
    }
  }
});

test('the lexicon loads in wasm quickly and answers', { skip }, async () => {
  const t0 = performance.now();
  const g2p = await G2p.load(lexicon('en-us'));
  const loadMs = performance.now() - t0;
  try {
    assert.equal(g2p.lang, 'en-us');
    const text = texts().join(' ');
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      const t1 = performance.now();
      assert.ok(g2p.phonemize(text).length > 1000);
      best = Math.min(best, performance.now() - t1);
    }
    console.log(`g2p wasm: module and lexicon ready in ${loadMs.toFixed(1)} ms (the lexicon itself ${g2p.lexiconMs.toFixed(1)} ms); ` +
                `${text.split(' ').length} words phonemized in ${best.toFixed(1)} ms, best of 5`);
  } finally {
    g2p.dispose();
  }
  await assert.rejects(G2p.load(`${repo}tests/data/g2p/texts.txt`), /SOTTOG2P/);
});
