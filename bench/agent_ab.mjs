#!/usr/bin/env node
// The agent page's voice to voice, variants interleaved clip by clip (bench/agent_latency.mjs once per clip and
// variant, the order rotated each clip), so a shared machine's changing load falls on every variant alike. Prints
// per clip each variant's voice to voice, then per variant the median, p90, the median stages and the median of
// the per-clip ratio against the first variant, and the load average.
//
//   node bench/agent_ab.mjs [--variants 'ttschunks=0;ttschunks=1'] [--out FILE.md] [CLIP.wav...]
// A variant is agent_latency.mjs's options as k=v pairs joined by ',' (e.g. 'ttschunks=1,first-chunk=150');
// variants are separated by ';'; wasm=DIR builds that variant's page from DIR/wasm-* (another tree's build).
// Without clips: the eight questions of bench/data/questions/.
import { execFileSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts, positionals: clips } = parseArgs({
  allowPositionals: true,
  options: { variants: { type: 'string', default: 'ttschunks=0;ttschunks=1' }, out: { type: 'string' } },
});
const named = clips.length > 0;
if (!clips.length) {
  const dir = fileURLToPath(new URL('data/questions/', import.meta.url));
  clips.push(...readdirSync(dir).filter((f) => f.endsWith('.wav')).sort().map((f) => join(dir, f)));
}
const variants = opts.variants.split(';').map((v) => v.trim()).filter(Boolean);
// wasm=DIR is not the page's: that variant's page is built from DIR/wasm-* (SOTTO_WASM_DIR), e.g. an older build.
const argsOf = (v) => v.split(',').filter(Boolean).flatMap((kv) => {
  const [k, x] = kv.split('=');
  return k === 'wasm' ? [] : [`--${k}=${x}`];  // one argument: a value may start with a dash (ttslead=-1)
});
const envOf = (v) => {
  const dir = v.split(',').map((kv) => kv.split('=')).find(([k]) => k === 'wasm')?.[1];
  return dir ? { ...process.env, SOTTO_WASM_DIR: dir } : process.env;
};
const bench = fileURLToPath(new URL('agent_latency.mjs', import.meta.url));
const median = (xs) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : null;
};
const quantile = (xs, q) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.floor(q * v.length))] : null;
};

const load0 = loadavg();
const results = variants.map(() => []);  // per variant: per clip the turn
const lines = [];
const log = (s) => {
  lines.push(s);
  console.log(s);
};
clips.forEach((clip, c) => {
  for (let k = 0; k < variants.length; k++) {
    const i = (k + c) % variants.length;
    const out = execFileSync(process.execPath, [bench, '--json', ...argsOf(variants[i]), clip], { encoding: 'utf8', maxBuffer: 1 << 26, env: envOf(variants[i]) });
    const r = JSON.parse(out.trim().split('\n').at(-1));
    const t = r.turns[0];
    results[i][c] = { ...t, load: r.load };
    log(`${clip.split('/').pop()} [${variants[i]}] voice to voice ${t.voice_to_voice_ms} ms; load ${r.load.before.toFixed(1)} -> ${r.load.after.toFixed(1)}; ` +
      `first piece ${JSON.stringify(t.first_piece)}; gaps ${t.voice_gap_ms} ms; ${Object.entries(t.stages).map(([a, b]) => `${a} ${b}`).join(', ')}`);
  }
});
const stageNames = [...new Set(results.flat().flatMap((t) => Object.keys(t?.stages ?? {})))];
const header = ['variant', 'voice to voice median', 'p90', 'ratio to the first (median per clip)', ...stageNames.map((s) => `${s} median`), 'voice gaps median'];
const rows = variants.map((v, i) => {
  const v2v = results[i].map((t) => t?.voice_to_voice_ms);
  const ratio = median(results[0].map((t, c) => t?.voice_to_voice_ms / results[i][c]?.voice_to_voice_ms));
  return [v, median(v2v), quantile(v2v, 0.9), ratio?.toFixed(2), ...stageNames.map((s) => median(results[i].map((t) => t?.stages?.[s]))),
    median(results[i].map((t) => t?.voice_gap_ms))];
});
const load1 = loadavg();
const report = [
  '', `${cpus().length} CPUs; load average ${load0.map((x) => x.toFixed(1)).join(' ')} at the start, ${load1.map((x) => x.toFixed(1)).join(' ')} at the end; ${clips.length} clips, variants interleaved clip by clip.`,
  `Command: node bench/agent_ab.mjs --variants '${opts.variants}'${named ? ` ${clips.join(' ')}` : ''}`, '',
  `| ${header.join(' | ')} |`, `|${header.map((_, j) => (j ? '---:' : '---')).join('|')}|`,
  ...rows.map((r) => `| ${r.join(' | ')} |`), '',
];
for (const l of report) log(l);
if (opts.out) writeFileSync(opts.out, `${lines.join('\n')}\n`);
