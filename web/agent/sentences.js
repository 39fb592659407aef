// Cutting the language model's streamed reply into sentences, so speech synthesis can start on the first one
// while the rest is still being written, and turning written text into what a voice should say.
//
//   const split = new SentenceSplitter();
//   for (const piece of stream) for (const s of split.push(piece)) speak(s);
//   const last = split.flush();            // what is left when the reply ends ('' if nothing)
//   const queue = new SentenceQueue();     // sentences as an async iterable, for tts.stream()
//   new SentenceSplitter({ firstWords: 6 })  // the reply's first piece is a short clause (the first sound sooner)

// Words whose final period does not end a sentence.
const ABBREVIATIONS = new Set(['mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'e.g', 'i.e', 'approx', 'no', 'fig', 'inc', 'ltd']);

// A sentence shorter than this waits for the next one (a lone "Yes." sounds choppy when synthesised alone, and
// each synthesis call has a fixed cost), unless the reply ends.
const MIN_CHARS = 12;

// The first piece's clause cut: at a comma, semicolon, colon or dash after at least this many words.
const FIRST_CLAUSE_MIN_WORDS = 3;

// How many words a written word is read as, roughly: a number one per digit (384,400 is read as seven words,
// 1990 as two; the digit count is between), anything else one.
export function spokenWords(word) {
  const digits = word.replace(/[^0-9]/g, '').length;
  return Math.max(1, digits);
}

// Whether a piece has anything a voice would say: a letter or a digit.
const hasWord = (text) => /[\p{L}\p{N}]/u.test(text);

export class SentenceSplitter {
  #buffer = '';
  #first;

  // firstWords > 0: the reply's first piece ends early, where synthesis can start on it: at the first clause mark
  // (, ; : or a dash) after FIRST_CLAUSE_MIN_WORDS words, else after `firstWords` whole words, else at its
  // sentence's end, whichever comes first; never inside a word (a word is whole once whitespace follows it). The
  // voice's time to a first sound grows with the length of the first piece it synthesises, which is what it
  // says: a number counts as the words it is read as (spokenWords), and one that would take the piece past
  // `firstWords` starts the next piece instead, once the first has FIRST_CLAUSE_MIN_WORDS words.
  constructor({ minChars = MIN_CHARS, firstWords = 0 } = {}) {
    this.minChars = minChars;
    this.#first = firstWords > 0 ? firstWords : 0;
  }

  // Adds streamed text; -> the sentences it completed (trimmed), in order.
  push(text) {
    this.#buffer += text;
    const out = [];
    if (this.#first) {
      const clause = this.#firstClause();
      if (clause < 0) {
        // Still inside the first clause: a sentence end may yet come first.
        const sentences = this.#sentences();
        if (sentences.length) this.#first = 0;
        return sentences;
      }
      out.push(this.#buffer.slice(0, clause).trim());
      this.#buffer = this.#buffer.slice(clause);
      this.#first = 0;
    }
    out.push(...this.#sentences());
    return out;
  }

  // Where the first piece ends (an index into the buffer), or -1 while it is not known yet.
  #firstClause() {
    const b = this.#buffer;
    let words = 0;
    let inWord = false;
    let wordStart = 0;
    let lastEnd = -1;  // where the word before this one ended
    for (let i = 0; i < b.length; i++) {
      const c = b[i];
      if (/\s/.test(c)) {
        if (inWord) {
          const w = spokenWords(b.slice(wordStart, i));
          if (w > 1 && words + w > this.#first && words >= FIRST_CLAUSE_MIN_WORDS) return lastEnd;
          words += w;
          lastEnd = i;
          inWord = false;
          const mark = /[,;:\u2014\u2013]$/.test(b.slice(0, i)) || /\s[-\u2014\u2013]$/.test(b.slice(0, i));
          if ((mark && words >= FIRST_CLAUSE_MIN_WORDS) || words >= this.#first) return i;
          // A sentence end comes out of #sentences() as a whole sentence.
          if (/[.!?]["')\]]?$/.test(b.slice(0, i)) && b.slice(0, i).trim().length >= this.minChars) return -1;
        }
      } else if (!inWord) {
        inWord = true;
        wordStart = i;
      }
    }
    return -1;
  }

  #sentences() {
    const out = [];
    let from = 0;
    for (let i = 0; i < this.#buffer.length; i++) {
      const c = this.#buffer[i];
      let end = -1;
      if (c === '\n') end = i;
      else if ('.!?;:'.includes(c)) {
        // A boundary only once the next character is known to be whitespace (a streamed "3." may become "3.5").
        const next = this.#buffer[i + 1];
        if (next === undefined) break;
        if (!/\s/.test(next) && !(/["')\]]/.test(next) && /\s/.test(this.#buffer[i + 2] ?? ''))) continue;
        if (c === '.' && this.#isAbbreviation(from, i)) continue;
        if (c === ':' || c === ';') continue;  // clauses, kept with their sentence
        end = /["')\]]/.test(next) ? i + 1 : i;
      }
      if (end < 0) continue;
      const sentence = this.#buffer.slice(from, end + 1).trim();
      // A piece with nothing to say (a line that is only a quote mark or a rule) stays with the next one.
      if (hasWord(sentence) && (sentence.length >= this.minChars || c === '\n')) {
        out.push(sentence);
        from = end + 1;
      }
    }
    this.#buffer = this.#buffer.slice(from);
    return out;
  }

  flush() {
    this.#first = 0;
    const rest = this.#buffer.trim();
    this.#buffer = '';
    return rest;
  }

  #isAbbreviation(from, dot) {
    const word = /([A-Za-z.]+)$/.exec(this.#buffer.slice(from, dot))?.[1] ?? '';
    if (/^[A-Z]$/.test(word)) return true;  // an initial: "J. R. R."
    return ABBREVIATIONS.has(word.toLowerCase());
  }
}

// Written text -> text for a voice: markdown marks, code fences and URLs are not read out.
export function speakable(text) {
  return text
    .replace(/```[\s\S]*?(```|$)/g, ' ')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/https?:\/\/\S+/g, 'a link')
    .replace(/[*_#>~|]+/g, ' ')
    .replace(/^\s*[-+]\s+/gm, '')
    .replace(/\s+/g, ' ')
    .trim();
}

// The part of `sentence` a listener heard when its audio was cut after `fraction` (0..1) of it: whole words,
// proportionally (speech runs at a roughly even rate of characters).
export function heardPart(sentence, fraction) {
  if (fraction >= 1) return sentence;
  if (fraction <= 0) return '';
  const cut = Math.floor(sentence.length * fraction);
  const space = sentence.lastIndexOf(' ', cut);
  return space > 0 ? `${sentence.slice(0, space)}…` : '';
}

// Sentences for synthesis as they are written, as an async iterable (what tts.stream takes).
export class SentenceQueue {
  #items = [];
  #wake = null;
  #closed = false;
  push(x) {
    this.#items.push(x);
    this.#wake?.();
  }
  close() {
    this.#closed = true;
    this.#wake?.();
  }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#items.length) yield this.#items.shift();
      else if (this.#closed) return;
      else await new Promise((r) => (this.#wake = r));
    }
  }
}
