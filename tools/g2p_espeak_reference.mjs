#!/usr/bin/env node
// espeak-ng's phonemes for lexicon words, written the way misaki's espeak fallback rewrites them into Kokoro's
// symbols (misaki/espeak.py: diphthongs to A I O W Y Q, dʒ tʃ to ʤ ʧ, r to ɹ, ...): the second reference for
// the G2P's letter-to-sound model, and what Kokoro's own pipeline says for words outside misaki's lexicon.
//
//   npm pack phonemizer@1.2.1 && tar xzf phonemizer-1.2.1.tgz      (espeak-ng in wasm, Apache-2.0; tool only)
//   node tools/g2p_espeak_reference.mjs PACKAGE_DIR tests/data/g2p/lts_heldout_us.tsv en-us OUT.tsv
//
// IN is word<TAB>phonemes lines (# comments); OUT is word<TAB>misaki-lexicon phonemes<TAB>espeak-ng phonemes,
// and the share of words where espeak-ng agrees with misaki's lexicon is printed.
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [dir, input, lang, output] = process.argv.slice(2);
if (!output || (lang !== 'en-us' && lang !== 'en-gb')) {
  console.error('usage: node tools/g2p_espeak_reference.mjs PHONEMIZER_PACKAGE_DIR IN.tsv en-us|en-gb OUT.tsv');
  process.exit(2);
}
const { phonemize } = await import(pathToFileURL(`${dir}/dist/phonemizer.js`));
const british = lang === 'en-gb';

// misaki's E2M table, for espeak output without tie marks; longest first.
const E2M = [
  ['ʔˌn̩', 'ʔn'], ['ʔn̩', 'ʔn'], ['aɪ', 'I'], ['aʊ', 'W'], ['dʒ', 'ʤ'], ['eɪ', 'A'], ['tʃ', 'ʧ'], ['ɔɪ', 'Y'],
  ['ʲo', 'jo'], ['ʲə', 'jə'], ['ʲ', ''], ['ɚ', 'əɹ'], ['r', 'ɹ'], ['x', 'k'], ['ç', 'k'], ['ɐ', 'ə'], ['ɬ', 'l'],
  ['\u0303', ''],
];
function toMisaki(ps) {
  if (british) ps = ps.replaceAll('əʊ', 'Q').replaceAll('eə', 'ɛː');
  else ps = ps.replaceAll('oʊ', 'O');
  for (const [a, b] of E2M) ps = ps.replaceAll(a, b);
  ps = ps.replaceAll('e', 'A').replace(/(\S)\u0329/g, 'ᵊ$1').replaceAll('\u0329', '');
  if (british) ps = ps.replaceAll('iə', 'ɪə');
  else ps = ps.replaceAll('ɜːɹ', 'ɜɹ').replaceAll('ɜː', 'ɜɹ').replaceAll('ɪə', 'iə').replaceAll('ː', '');
  return ps.replaceAll('o', 'ɔ').replaceAll('ɾ', 'T').replaceAll('ʔ', 't');
}

const rows = [];
let same = 0;
let n = 0;
for (const line of readFileSync(input, 'utf8').split('\n')) {
  if (!line || line.startsWith('#')) continue;
  const [word, lexicon] = line.split('\t');
  const espeak = toMisaki((await phonemize(word, lang === 'en-us' ? 'en-us' : 'en')).join(' ').trim());
  const reference = lexicon.replaceAll('ɾ', 'T');
  rows.push(`${word}\t${reference}\t${espeak}`);
  n++;
  same += espeak === reference;
}
writeFileSync(output, `${rows.join('\n')}\n`);
console.log(`g2p_espeak_reference: ${lang}: espeak-ng agrees with misaki's lexicon on ${same}/${n} words (${(100 * same / n).toFixed(1)}%)`);
