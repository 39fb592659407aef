#!/usr/bin/env node
// The wasm engine from the command line, in Node with worker_threads (always the SIMD128 build: Node 20
// mis-executes relaxed integer dot products).
//   node web/cli.mjs selftest [--threads N] [--rows R --cols C] [--wasm PATH]
//   node web/cli.mjs info FILE [--json] [--threads N] [--wasm PATH]
import { Engine } from './engine.js';

function parseArgs(argv) {
  const opts = { positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a.startsWith('--')) opts[a.slice(2)] = argv[++i];
    else opts.positional.push(a);
  }
  return opts;
}

function humanBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) (n /= 1024), u++;
  return `${u ? n.toFixed(1) : n} ${units[u]}`;
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const opts = parseArgs(rest);
  const threads = opts.threads ? Number(opts.threads) : command === 'info' ? 1 : 4;
  if (command !== 'selftest' && command !== 'info') {
    console.error('usage: node web/cli.mjs selftest [--threads N] | info FILE [--json]');
    return 2;
  }
  const engine = await Engine.create({ threads, variant: 'simd128', wasmUrl: opts.wasm });
  try {
    if (command === 'selftest') {
      const r = await engine.selftest({ rows: Number(opts.rows ?? 512), cols: Number(opts.cols ?? 1024) });
      console.log(
        `selftest ${r.passed ? 'passed' : 'FAILED'}: ${engine.info.variant}, ${r.threads} threads, ` +
          `${r.rows}x${r.cols}, max error ${r.maxAbsError} (tolerance ${r.tolerance}), ` +
          `checksum ${r.checksum.toString(16)} vs reference ${r.checksumRef.toString(16)}, ${r.ms.toFixed(2)} ms`,
      );
      return r.passed ? 0 : 1;
    }
    const file = opts.positional[0];
    if (!file) throw new Error('info: which file?');
    const d = await engine.describe(file);
    if (opts.json) {
      console.log(JSON.stringify(d));
      return d.ok ? 0 : 1;
    }
    if (!d.ok) {
      console.error(`sotto: ${d.error}`);
      return 1;
    }
    console.log(`${file}: ${d.format}, ${humanBytes(d.bytes)}, ${d.metadata.length} metadata, ${d.tensors.length} tensors`);
    for (const m of d.metadata) console.log(`  ${m.key} (${m.type}) = ${m.text}`);
    for (const t of d.tensors) console.log(`  ${t.name}  ${t.dtype}  [${t.shape.join(', ')}]  ${humanBytes(t.bytes)}`);
    return 0;
  } finally {
    engine.terminate();
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(String(e?.message ?? e));
    process.exit(1);
  },
);
