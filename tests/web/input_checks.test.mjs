// Input the wasm CLI must handle as the native one does (issue #33): a WAV cut short is read with the same
// warning, and a corrupted GGUF key prints escaped on one line.
// Run: node --test tests/web/input_checks.test.mjs   (needs build/wasm-simd128 and build/bin/sotto)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { wavHeader } from '../../web/wav.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const wasm = process.env.SOTTO_TEST_WASM ?? `${repo}build/wasm-simd128/sotto.wasm`;
const nativeCli = process.env.SOTTO_CLI ?? `${repo}build/bin/sotto`;
const skip = !existsSync(wasm) ? `no wasm build at ${wasm}` : !existsSync(nativeCli) && `no native CLI at ${nativeCli}`;

const run = (which, args) => (which === 'native'
  ? spawnSync(nativeCli, args, { encoding: 'utf8' })
  : spawnSync(process.execPath, [`${repo}web/cli.mjs`, ...args, '--wasm', wasm], { encoding: 'utf8' }));

test('a WAV whose header promises more data than the file holds: read, with the same warning', { skip }, () => {
  const dir = mkdtempSync(`${tmpdir()}/sotto-`);
  try {
    // 44-byte header + 1,000 bytes of 16 kHz s16 mono, its data chunk claiming 1,920,000 bytes.
    const wav = Buffer.concat([wavHeader(16000, 16, 1920000), Buffer.alloc(1000)]);
    wav.writeUInt32LE(36 + 1000, 4);  // the RIFF size says what the file holds; only the data chunk lies
    for (let i = 0; i < 500; i++) wav.writeInt16LE(Math.round(8000 * Math.sin(i / 10)), 44 + 2 * i);
    const path = `${dir}/cut.wav`;
    writeFileSync(path, wav);
    const args = ['vad', '-m', `${fixtures}/vad/silero_vad_v5.1.onnx`, path, '--json'];
    const web = run('web', args);
    const nat = run('native', args);
    assert.equal(web.status, 0, web.stderr);
    assert.equal(nat.status, 0, nat.stderr);
    const warning = (s) => s.split('\n').find((l) => l.includes('warning'));
    assert.match(warning(nat.stderr), /declares 1920000 bytes but the file holds 1000/);
    assert.equal(warning(web.stderr), warning(nat.stderr));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a corrupted GGUF key prints escaped, in full, on its line', { skip }, () => {
  const dir = mkdtempSync(`${tmpdir()}/sotto-`);
  try {
    const bytes = readFileSync(`${fixtures}/llm/stories260K.gguf`);
    const at = bytes.indexOf('llama.embedding_length');
    bytes[at + 3] = 0;
    bytes[at + 6] = 0x1b;
    const path = `${dir}/key.gguf`;
    writeFileSync(path, bytes);
    for (const which of ['web', 'native']) {
      const r = run(which, ['info', path]);
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.stdout.includes("'lla\\x00a.\\x1bmbedding_length'"), `${which}: ${r.stdout}`);
      assert.ok(!/[\x00\x1b]/.test(r.stdout), which);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
