// What every benchmark report shares: medians, the seeded prompt ids, number formatting, markdown tables,
// the load-average line, the raw rounds, and writing the report out.
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// mulberry32: the same ids on every run and in every benchmark.
export function randomIds(n, seed, vocab) {
  let a = seed >>> 0;
  const ids = [];
  for (let i = 0; i < n; ++i) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    ids.push(Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * vocab));
  }
  return ids;
}

// Two decimals below 10, one above; text as it is.
export const fmt = (x) => (typeof x === 'number' ? x.toFixed(x < 10 ? 2 : 1) : x);

// A markdown table; `align` per column ('r' right-aligns), left by default.
export function markdownTable(head, rows, { align = [], format = fmt } = {}) {
  return [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (align[i] === 'r' ? '---:' : '---')).join('|')}|`,
          ...rows.map((r) => `| ${r.map(format).join(' | ')} |`)].join('\n');
}

// "Load average before: a b c, after: d e f" (numbers taken while other jobs ran say little about either engine).
export const loadLine = (before) =>
  `Load average before: ${before.map((x) => x.toFixed(2)).join(' ')}, after: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`;

export const rawDetails = (raw) =>
  ['<details><summary>raw rounds (ms)</summary>', '', '```json', JSON.stringify(raw, null, 1), '```', '</details>', ''].join('\n');

// Prints the report and, with `out`, writes it there.
export function writeReport(report, out) {
  console.log(report);
  if (!out) return;
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, report);
  console.error(`wrote ${out}`);
}
