#!/usr/bin/env node
// How short the agent page's endpoint (the pause that ends a spoken turn: the segmenter's redemptionMs) can be
// before it cuts speakers off: each clip's Silero probabilities once (our VAD in wasm, as the page runs it), then
// the page's segmenter (web/agent/agent.js VAD_OPTIONS, the page's thresholds) at each pause length. A single
// spoken question (bench/data/questions/) that comes out as more than one segment is a false endpoint: the
// page would answer half a question. For the longer fixtures (several sentences) it prints the pauses inside
// speech, longest first, so the ones a shorter endpoint would newly cut can be read against the text.
//
//   node bench/agent_endpoint.mjs [--endpoints 560,480,400,320,240] [CLIP.wav...]
// Needs build/wasm-simd128 and tests/fixtures/vad/silero_vad_v5.1.onnx.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { Vad } from '../web/vad.js';

const { values: opts, positionals: clips } = parseArgs({
  allowPositionals: true,
  options: { endpoints: { type: 'string', default: '560,480,400,320,240,160' } },
});
const repo = fileURLToPath(new URL('../', import.meta.url));
if (!clips.length) {
  const dir = `${repo}bench/data/questions/`;
  clips.push(...readdirSync(dir).filter((f) => f.endsWith('.wav')).sort().map((f) => join(dir, f)));
  for (const f of ['beckett.wav', 'sample.wav', 'test.wav', 'two_cities_16k.wav']) clips.push(`${repo}tests/fixtures/audio/${f}`);
}
const endpoints = opts.endpoints.split(',').map(Number);
// The page's segmenter options (web/agent/agent.js VAD_OPTIONS), thresholds as web/vad.js defaults them.
const PAGE = { preSpeechPadMs: 320, minSpeechMs: 250 };

const vad = await Vad.load(`${repo}tests/fixtures/vad/silero_vad_v5.1.onnx`, { threads: 1, variant: 'simd128' });
const rows = [];
try {
  for (const clip of clips) {
    const samples = await vad.decodeWav(clip);
    const { probs } = await vad.processClip(samples);
    const counts = [];
    for (const redemptionMs of endpoints) counts.push((await vad.segmentsOf(probs, { ...PAGE, redemptionMs })).length);
    // Every pause inside speech: the gaps between segments at the shortest pause the segmenter allows.
    const fine = await vad.segmentsOf(probs, { ...PAGE, redemptionMs: 64, preSpeechPadMs: 0 });
    const pauses = fine.slice(1).map((s, i) => Math.round((s.start - fine[i].end) * 1000)).sort((a, b) => b - a);
    rows.push({ clip: clip.split('/').pop(), seconds: samples.length / 16000, counts, pauses });
  }
} finally {
  await vad.dispose();
}
console.log(`| clip | s | ${endpoints.map((e) => `segments at ${e} ms`).join(' | ')} | pauses inside speech, ms (longest first) |`);
console.log(`|---|---:|${endpoints.map(() => '---:').join('|')}|---|`);
for (const r of rows) console.log(`| ${r.clip} | ${r.seconds.toFixed(1)} | ${r.counts.join(' | ')} | ${r.pauses.slice(0, 12).join(', ') || '-'} |`);
