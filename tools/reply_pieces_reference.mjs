// The agent page's reply splitter (web/agent/sentences.js) on a set of streamed replies: writes
// tests/fixtures/agent/reply_pieces.json, which the native splitter (src/text/reply_splitter.h) must reproduce
// piece for piece (tests/unit/reply_splitter_test.cpp) and the page's code must still produce
// (tests/web/reply_pieces.test.mjs).
//   node tools/reply_pieces_reference.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { SentenceSplitter } from '../web/agent/sentences.js';

const OUT = new URL('../tests/fixtures/agent/reply_pieces.json', import.meta.url);

const REPLIES = [
  'The capital of Australia is Canberra. It was chosen as a compromise between Sydney and Melbourne.',
  'Sure, I can help with that. What would you like to know?',
  'Yes. No. Maybe.',
  'Paris is the capital of France, and it is known for the Eiffel Tower.',
  'Dr. Smith lives on Main St. near the park. He works at Acme Inc. as an engineer.',
  'The value of pi is about 3.14159, which is close to 22/7. Interesting, right?',
  'Well — that depends: on the weather; on the time. Let me check!',
  'I said "hello there." Then I left.',
  'J. R. R. Tolkien wrote The Hobbit. It came out in 1937.',
  'One two three four five six seven eight nine ten eleven twelve.',
  'Line one without a stop\nLine two also without one\nAnd a third.',
  'Café au lait — très bon, n’est-ce pas? Oui!',
  'Emoji 😀 count twice in UTF-16. Like this one 🎉 here.',
  'e.g. this is an example, i.e. a test. Approx. ten items vs. twenty.',
  'Hi!',
  '',
  '   Leading spaces, then words. Trailing spaces.   ',
  '(Parenthetical sentence.) Another one follows [with brackets.] Done.',
  'A - dash after one word, then more words follow here.',
  'Short. Also short. This one is a bit longer. End',
  'The moon is about 384,400 kilometres away from the Earth.',
  'It was built in 1990 and rebuilt in 2005, after the fire.',
  'Call 555 0199 now for help. Or 911.',
  'About 3 or 4 people came, maybe 12.',
  '"\nTrue said, "I won\'t go to the house and look." Then he left.',
  'First line.\n***\n\nAfter a rule, more words here.\n"',
];

// Token-like chunks: a deterministic mix of 1- to 5-character pieces (whole code points, as the model's
// stream gives whole characters), and the whole text at once.
function chunks(text, seed) {
  const chars = Array.from(text);
  const out = [];
  let x = seed;
  for (let i = 0; i < chars.length; ) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const n = 1 + (x % 5);
    out.push(chars.slice(i, i + n).join(''));
    i += n;
  }
  return out;
}

const cases = [];
REPLIES.forEach((reply, k) => {
  for (const firstWords of [0, 5]) {
    for (const parts of [[reply], chunks(reply, k + 1)]) {
      const split = new SentenceSplitter({ firstWords });
      const pieces = [];
      for (const p of parts) pieces.push(...split.push(p));
      const rest = split.flush();
      if (rest) pieces.push(rest);
      cases.push({ first_words: firstWords, chunks: parts, pieces });
    }
  }
});
const text = JSON.stringify({ source: 'web/agent/sentences.js via tools/reply_pieces_reference.mjs', cases }, null, 1) + '\n';
if (process.argv.includes('--check')) {
  if (readFileSync(OUT, 'utf8') !== text) {
    console.error('reply_pieces.json differs from what web/agent/sentences.js writes now: run node tools/reply_pieces_reference.mjs');
    process.exit(1);
  }
} else {
  writeFileSync(OUT, text);
  console.log(`${cases.length} cases -> ${OUT.pathname}`);
}
