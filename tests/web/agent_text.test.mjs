// The agent page's pure pieces in Node: the sentence splitter the voice starts from (the same sentences however
// the reply is streamed; decimals, abbreviations and initials do not end a sentence), the text a voice reads,
// what a listener heard of a sentence cut short, and the incremental SHA-256 that checks model downloads
// (against node:crypto on random data of odd sizes fed in random pieces).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { modelUrl } from '../../web/agent/models.js';
import { SentenceSplitter, heardPart, speakable } from '../../web/agent/sentences.js';
import { Sha256 } from '../../web/agent/sha256.js';

function splitStreamed(text, random, options = {}) {
  const split = new SentenceSplitter(options);
  const out = [];
  for (let i = 0; i < text.length;) {
    const n = 1 + Math.floor(random() * 7);
    out.push(...split.push(text.slice(i, i + n)));
    i += n;
  }
  const rest = split.flush();
  return rest ? [...out, rest] : out;
}

function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const REPLY = 'Paris is the capital of France. It has about 2.1 million people, e.g. in the centre! Dr. Smith said so. ' +
  'J. R. R. Tolkien wrote books? Yes: many of them.\nA new line ends one too';
const SENTENCES = [
  'Paris is the capital of France.', 'It has about 2.1 million people, e.g. in the centre!', 'Dr. Smith said so.',
  'J. R. R. Tolkien wrote books?', 'Yes: many of them.', 'A new line ends one too',
];

test('sentences: the same split however the reply is streamed', () => {
  for (let seed = 1; seed <= 50; seed++) assert.deepEqual(splitStreamed(REPLY, lcg(seed)), SENTENCES, `seed ${seed}`);
});

test('sentences: a short one waits for the next, and a quote or bracket stays with its sentence', () => {
  const split = new SentenceSplitter();
  assert.deepEqual(split.push('Yes. '), []);
  assert.deepEqual(split.push('That is right. '), ['Yes. That is right.']);
  assert.deepEqual(split.push('He said "stop now." Then left'), ['He said "stop now."']);
  assert.equal(split.flush(), 'Then left');
  assert.equal(split.flush(), '');
});

test('sentences: a line with nothing to say (a lone quote mark, a rule) is no piece: it stays with the next', () => {
  const reply = '"\nTrue said, "I won\'t go now." Then left.\n***\nBye now, friend.';
  for (let seed = 1; seed <= 30; seed++) {
    assert.deepEqual(splitStreamed(reply, lcg(seed)), ['"\nTrue said, "I won\'t go now."', 'Then left.', '***\nBye now, friend.'], `seed ${seed}`);
    assert.deepEqual(splitStreamed(reply, lcg(seed), { firstWords: 4 }), ['"\nTrue said,', '"I won\'t go now."', 'Then left.', '***\nBye now, friend.'], `seed ${seed}`);
  }
});

test('sentences: the first piece is a short clause, cut at a comma or after N whole words, however streamed', () => {
  const cases = [
    ['The capital of France is Paris, a city on the Seine. It is lovely.', ['The capital of France is', 'Paris, a city on the Seine.', 'It is lovely.']],
    ['Sure, I can help with that one, it is easy. Ask away.', ['Sure, I can help with', 'that one, it is easy.', 'Ask away.']],
    ['Well, honestly, I think so. Yes.', ['Well, honestly, I think so.', 'Yes.']], ['Well, honestly, I do think so. Yes.', ['Well, honestly, I do think', 'so. Yes.']],
    ['Paris is the capital. It is big.', ['Paris is the capital.', 'It is big.']],
    ['Yes. That is right, of course. More.', ['Yes. That is right,', 'of course. More.']],
    [REPLY, ['Paris is the capital of', `France. ${SENTENCES[1]}`, ...SENTENCES.slice(2)]],
    // A number counts as the words it is read as: one that would make the first piece long starts the next.
    ['The moon is approximately 384,400 kilometers away. That is far.', ['The moon is approximately', '384,400 kilometers away.', 'That is far.']],
    ['It was built in 1990 by them. Yes.', ['It was built in', '1990 by them.', 'Yes.']],
    ['I have 2 cats and 3 dogs here. Yes.', ['I have 2 cats and', '3 dogs here.', 'Yes.']],
    ['About 12 people came, more or less.', ['About 12 people came,', 'more or less.']],
  ];
  for (const [reply, pieces] of cases) {
    for (let seed = 1; seed <= 30; seed++) {
      const out = splitStreamed(reply, lcg(seed), { firstWords: 5 });
      assert.deepEqual(out, pieces, `${JSON.stringify(reply)}, seed ${seed}`);
      // Nothing lost or cut inside a word: the pieces joined by spaces are the reply.
      assert.equal(out.join(' '), reply.replace(/\s+/g, ' ').trim());
    }
  }
  // The cut waits for the word to end: a streamed "Paris" may become "Parisian".
  const split = new SentenceSplitter({ firstWords: 3 });
  assert.deepEqual(split.push('I like Paris'), []);
  assert.deepEqual(split.push('ian food'), ['I like Parisian']);
  assert.deepEqual(split.push(' a lot.'), []);
  assert.equal(split.flush(), 'food a lot.');
  // firstWords 0 (the default): sentences only.
  assert.deepEqual(splitStreamed(cases[0][0], lcg(1)), ['The capital of France is Paris, a city on the Seine.', 'It is lovely.']);
});

test('speakable text drops markdown, code and links', () => {
  assert.equal(speakable('**Paris** is `the` capital. See https://x.org/a for more.\n- one\n```js\ncode()\n```'), 'Paris is the capital. See a link for more. one');
});

test('heard part: whole words up to the fraction played', () => {
  const s = 'The capital of France is Paris.';
  assert.equal(heardPart(s, 1), s);
  assert.equal(heardPart(s, 0), '');
  assert.equal(heardPart(s, 0.5), 'The capital of…');
  assert.equal(heardPart(s, 0.05), '');
});

test('sha256: matches node:crypto on random data of odd sizes, fed in random pieces', () => {
  const random = lcg(7);
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 1000, 65537, 300007]) {
    const data = randomBytes(n);
    const h = new Sha256();
    for (let i = 0; i < n;) {
      const k = 1 + Math.floor(random() * 200);
      h.update(data.subarray(i, i + k));
      i += k;
    }
    assert.equal(h.digest(), createHash('sha256').update(data).digest('hex'), `${n} bytes`);
  }
});

test('model locations: Hugging Face shorthand and page URLs become download URLs; other hosts are refused by name', () => {
  const base = 'http://127.0.0.1:8080/agent/';
  assert.deepEqual(modelUrl('Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_0.gguf', base),
    { url: 'https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_0.gguf' });
  assert.deepEqual(modelUrl('https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/blob/main/q.gguf', base),
    { url: 'https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/q.gguf' });
  assert.deepEqual(modelUrl('models/x.gguf', base), { url: 'http://127.0.0.1:8080/agent/models/x.gguf' });
  assert.deepEqual(modelUrl('/fixtures/llm/stories260K.gguf', base), { url: 'http://127.0.0.1:8080/fixtures/llm/stories260K.gguf' });
  assert.match(modelUrl('https://example.com/m.gguf', base).error, /only from its own site or Hugging Face.*https:\/\/example\.com/);
  assert.match(modelUrl('http://huggingface.co/a/b/resolve/main/m.gguf', base).error, /Content-Security-Policy/);
});

test('trimSilence: the voice clip without the silence around it, the lead kept and reported', async () => {
  const { trimSilence } = await import('../../web/agent/audio.js');
  const rate = 24000;
  // Random odd lengths: silence (exact zeros and sub-threshold noise), a tone, silence again.
  for (let k = 0; k < 20; k++) {
    const lead = 1 + Math.floor(Math.random() * 9000), body = 1 + Math.floor(Math.random() * 5000), tail = Math.floor(Math.random() * 9000);
    const a = new Float32Array(lead + body + tail);
    for (let i = 0; i < a.length; i++) a[i] = (Math.random() - 0.5) * 0.01;  // |x| < 0.005: under the threshold
    for (let i = 0; i < body; i++) a[lead + i] = 0.3 * (i % 2 ? 1 : -1);
    const r = trimSilence(a, rate, { leadMs: 20, tailMs: 60 });
    const keepLead = Math.min(lead, Math.round(0.02 * rate)), keepTail = Math.min(tail, Math.round(0.06 * rate));
    assert.equal(r.samples.length, keepLead + body + keepTail, `lead ${lead} body ${body} tail ${tail}`);
    assert.equal(r.samples[keepLead], a[lead]);
    assert.equal(r.samples.byteOffset, (lead - keepLead) * 4);
    assert.ok(Math.abs(r.leadMs - (keepLead / rate) * 1000) < 1e-9);
    // tailMs null: the tail as it is; an unbounded lead: nothing cut in front, its length reported.
    assert.equal(trimSilence(a, rate, { tailMs: null }).samples.length, keepLead + body + tail);
    const whole = trimSilence(a, rate, { leadMs: Infinity });
    assert.equal(whole.samples.length, a.length);
    assert.ok(Math.abs(whole.leadMs - (lead / rate) * 1000) < 1e-9);
  }
  // Nothing audible (zeros, NaN): played as it is.
  for (const a of [new Float32Array(100), Float32Array.from([NaN, 0, NaN])]) {
    const r = trimSilence(a, rate, { tailMs: 60 });
    assert.equal(r.samples.length, a.length);
    assert.equal(r.leadMs, 0);
  }
});
