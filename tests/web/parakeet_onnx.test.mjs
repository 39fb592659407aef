// The ONNX export of Parakeet TDT (tools/parakeet_export_onnx.py: NeMo's encoder.onnx + decoder_joint.onnx), run
// through onnxruntime-node by bench/parakeet_ort.mjs (the greedy loop bench/parakeet.mjs times), against
// transformers' reference on the CI model (tests/data/parakeet/tdt_ci/reference.safetensors): the encoder output
// within 1e-4 of transformers' on every clip, and the same tokens, frames and durations. Also that a broken export
// is caught: the rel-shift's direction reversed (positions j - i in place of i - j) moves the encoder output.
// Run: node --test tests/web/parakeet_onnx.test.mjs   (needs python3 with numpy and onnx)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';

import { OrtParakeet } from '../../bench/parakeet_ort.mjs';
import { repo } from './vad_support.mjs';

const modelDir = `${repo}tests/data/parakeet/tdt_ci`;
const haveOnnx = spawnSync('python3', ['-c', 'import numpy, onnx'], { encoding: 'utf8' }).status === 0;
const skip = haveOnnx ? false : 'needs python3 with numpy and onnx (pip install onnx)';

function readSafetensors(path) {
  const bytes = readFileSync(path);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  return (name) => {
    if (!header[name]) return null;
    const { dtype, shape, data_offsets: [a, b] } = header[name];
    const copy = new Uint8Array(bytes.subarray(8 + n + a, 8 + n + b)).buffer;
    return { shape, data: dtype === 'F32' ? new Float32Array(copy) : Array.from(new Int32Array(copy)) };
  };
}

function exportModel(extraArgs = []) {
  const out = mkdtempSync(join(tmpdir(), 'sotto-parakeet-onnx-'));
  const r = spawnSync('python3', [`${repo}tools/parakeet_export_onnx.py`, modelDir, out, ...extraArgs], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

async function session(dir) {
  return OrtParakeet.create(ort, {
    encoder: `${dir}/encoder.onnx`, decoderJoint: `${dir}/decoder_joint.onnx`,
    config: JSON.parse(readFileSync(`${dir}/config.json`, 'utf8')), threads: 1,
  });
}

// Largest |ours - reference| with ours [1, D, T'] (NeMo's layout) and the reference [T', D].
function worstDiff(enc, want) {
  const [, D, T] = enc.dims;
  assert.deepEqual([T, D], want.shape);
  let worst = 0;
  for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) worst = Math.max(worst, Math.abs(enc.data[d * T + t] - want.data[t * D + d]));
  return worst;
}

test('the ONNX export gives transformers\' encoder output and tokens on every CI clip', { skip }, async () => {
  const get = readSafetensors(`${modelDir}/reference.safetensors`);
  const dir = exportModel();
  const p = await session(dir);
  try {
    let clips = 0;
    for (let i = 0; get(`clip${i}.mel`); i++, clips++) {
      const mel = get(`clip${i}.mel`);
      const r = await p.transcribeMel(mel.data, mel.shape[1]);
      const worst = worstDiff(r.encoder, get(`clip${i}.encoder`));
      assert.ok(worst < 1e-4, `clip${i}: encoder max |diff| ${worst}`);
      assert.deepEqual(r.tokens, get(`clip${i}.tokens`).data, `clip${i}: tokens`);
      assert.deepEqual(r.frames, get(`clip${i}.frames`).data, `clip${i}: frames`);
      assert.deepEqual(r.durations, get(`clip${i}.durations`).data, `clip${i}: durations`);
      assert.ok(r.tokens.length > 0);
    }
    assert.ok(clips >= 3);
  } finally {
    await p.release();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a wrong rel-shift in the export is caught by the encoder check', { skip }, async () => {
  const get = readSafetensors(`${modelDir}/reference.safetensors`);
  const dir = exportModel(['--break-rel-shift']);
  const p = await session(dir);
  try {
    const mel = get('clip1.mel');
    const worst = worstDiff(await p.runEncoder(mel.data, mel.shape[1]), get('clip1.encoder'));
    assert.ok(worst > 1e-2, `broken export still within ${worst}`);
  } finally {
    await p.release();
    rmSync(dir, { recursive: true, force: true });
  }
});
