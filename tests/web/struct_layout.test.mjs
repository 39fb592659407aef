// web/struct-layout.js (the byte offsets worker.js and vad-ops.js read and write) against the C header: every
// size and offset becomes a _Static_assert over api/sotto.h, compiled with clang-19 for wasm32 (the ABI the
// page runs: 4-byte pointers), so a field added or moved in C fails here.
// Run: node --test tests/web/struct_layout.test.mjs   (needs clang-19, as the wasm build does)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { LAYOUT } from '../../web/struct-layout.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const haveClang = spawnSync('clang-19', ['--version']).status === 0;

const TYPE_BYTES = { i32: 4, u32: 4, f32: 4, ptr: 4, i64: 8, u64: 8, f64: 8 };

test('struct-layout.js matches api/sotto.h in wasm32: every size, offset and field width',
     { skip: !haveClang && 'no clang-19' }, () => {
  const lines = ['#include <stddef.h>', '#include "api/sotto.h"'];
  for (const [name, { size, fields }] of Object.entries(LAYOUT)) {
    lines.push(`_Static_assert(sizeof(${name}) == ${size}, "${name}: size ${size}");`);
    for (const [field, [offset, type]] of Object.entries(fields)) {
      lines.push(`_Static_assert(offsetof(${name}, ${field}) == ${offset}, "${name}.${field}: offset ${offset}");`);
      lines.push(`_Static_assert(sizeof(((${name}*)0)->${field}) == ${TYPE_BYTES[type]}, "${name}.${field}: ${type}");`);
    }
    const covered = Object.values(fields).reduce((a, [, t]) => a + TYPE_BYTES[t], 0);
    assert.ok(covered <= size, `${name}: fields take ${covered} bytes, more than its size ${size}`);
  }
  const dir = mkdtempSync(`${tmpdir()}/sotto-layout-`);
  writeFileSync(`${dir}/layout.c`, lines.join('\n') + '\n');
  const r = spawnSync('clang-19', ['--target=wasm32', '-fsyntax-only', '-ffreestanding', `-I${repo}src`, `${dir}/layout.c`],
                      { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

test('a wrong offset is caught (the check can fail)', { skip: !haveClang && 'no clang-19' }, () => {
  const dir = mkdtempSync(`${tmpdir()}/sotto-layout-`);
  writeFileSync(`${dir}/bad.c`, '#include <stddef.h>\n#include "api/sotto.h"\n' +
                '_Static_assert(offsetof(SottoTimings, prefill_ms) == 20, "x");\n');
  const r = spawnSync('clang-19', ['--target=wasm32', '-fsyntax-only', '-ffreestanding', `-I${repo}src`, `${dir}/bad.c`]);
  assert.notEqual(r.status, 0);
});
