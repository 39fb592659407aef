// The page's reply splitter still writes tests/fixtures/agent/reply_pieces.json, the pieces the native
// splitter (`sotto agent`, tests/unit/reply_splitter_test.cpp) is held to: a change to web/agent/sentences.js
// must regenerate it (node tools/reply_pieces_reference.mjs), so the two stay one rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

test('the agent page splits replies into the pieces the native agent is checked against', () => {
  const tool = new URL('../../tools/reply_pieces_reference.mjs', import.meta.url).pathname;
  assert.doesNotThrow(() => execFileSync(process.execPath, [tool, '--check'], { stdio: 'pipe' }));
});
