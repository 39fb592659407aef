// The language model yields to the voice (issue #32): a chat stream's pause() holds worker.js's token loop
// between two tokens until resume(), and the reply is the same as without the pause (greedy, the same tokens).
// The agent page pauses the writing while the first spoken piece is synthesised (web/agent/agent.js).
// Run: node --test tests/web/agent_yield.test.mjs   (needs build/wasm-simd128)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Llm } from '../../web/llm.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`;
const wasm = process.env.SOTTO_TEST_WASM ?? `${repo}build/wasm-simd128/sotto.wasm`;
const skip = !existsSync(wasm) && `no wasm build at ${wasm} (cmake --build --preset wasm-simd128)`;
const TOKENS = 200;

test('a paused chat stream writes no token until resumed, then finishes the same reply', { skip }, async () => {
  const llm = await Llm.load(`${fixtures}/llm/stories260K.gguf`, { threads: 1, variant: 'simd128', wasmUrl: wasm, nCtx: 512 });
  try {
    const messages = [{ role: 'user', content: 'Once upon a time' }];
    const options = { greedy: true, maxTokens: TOKENS, ignoreEos: true };
    const plain = (await llm.chat(messages, options)).choices[0].message.content;

    let tokens = 0;
    const stream = llm.chat(messages, { ...options, stream: true, onToken: () => tokens++ });
    let text = '';
    let paused = null;
    for await (const c of stream) {
      text += c.choices[0].delta.content ?? '';
      if (paused === null && tokens >= 5) {
        stream.pause();
        await sleep(100);  // the token being computed, and the messages in flight, arrive
        paused = tokens;
        await sleep(500);  // stories260K writes hundreds of tokens in this time when not held
        assert.equal(tokens, paused, `${tokens - paused} tokens written while paused`);
        assert.ok(paused < TOKENS, 'the reply was finished before the pause took effect');
        stream.resume();
      }
    }
    assert.ok(paused !== null, 'the stream ended before five tokens');
    assert.equal(tokens, TOKENS);
    assert.equal(text, plain, 'the paused reply differs from the same reply written without a pause');
  } finally {
    await llm.dispose();
  }
});

test('cancelling a paused chat stream ends it', { skip }, async () => {
  const llm = await Llm.load(`${fixtures}/llm/stories260K.gguf`, { threads: 1, variant: 'simd128', wasmUrl: wasm, nCtx: 512 });
  try {
    const stream = llm.chat([{ role: 'user', content: 'Once upon a time' }], { greedy: true, maxTokens: TOKENS, ignoreEos: true, stream: true });
    await stream.next();
    stream.pause();
    await sleep(100);
    await stream.return();
    // The engine answers the next call only once the cancelled one has left its loop.
    const r = await Promise.race([llm.generate('One day', { maxTokens: 4 }), sleep(5000).then(() => null)]);
    assert.ok(r && r.ids.length === 4, 'the engine stayed held by the paused, cancelled stream');
  } finally {
    await llm.dispose();
  }
});
