// End to end check of our G2P (issue #30): each sentence is spoken by our Kokoro twice — from our G2P's
// phonemes (`sotto speak --text`) and from misaki's (`--phonemes`, misaki 0.9.4's reading committed in
// tests/data/g2p/ by tools/g2p_misaki_reference.py) — and both recordings go back through our Moonshine. The
// word error rate of each against the written sentence says whether our phonemes are as intelligible as
// misaki's: the goal is ours no worse than misaki's + 1 point.
//
//   node bench/g2p_wer.mjs [--voice af_heart] [--prose N] [--numbers N] [--json] [--out FILE.md]
//
// Sentences: N prose lines the G2P was never tuned on (misaki_us.tsv's every fifth line, then the Python
// docstrings of misaki_us_docs.tsv, at most 30 words each) and the first N written-number pairs of
// misaki_us_pairs.tsv (numbers, dates, money, units: these the normaliser WAS tuned on, so they show only
// that the tuning holds through speech). Both hypotheses and the reference go through the
// same plain normaliser below (case, punctuation, digits to words), so Moonshine writing "3" or "three" counts
// the same for both phoneme sources; the comparison between the two is what matters, not the absolute WER.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const voice = opt('--voice', 'af_heart');
const nProse = Number(opt('--prose', 20));
const nNumbers = Number(opt('--numbers', 20));
const outFile = opt('--out', null);
const json = args.includes('--json');
const sotto = 'build/bin/sotto';
const kokoro = 'models/kokoro/kokoro-v1.0.int8.onnx';
const moonshine = 'models/moonshine-base-en';

function rows(file, tag) {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith(tag + '\t'))
    .map((l) => l.split('\t'));
}
const sentences = [
  ...[
    ...rows('tests/data/g2p/misaki_us.tsv', 'T').filter((r) => Number(r[1]) % 5 === 4),
    ...rows('tests/data/g2p/misaki_us_docs.tsv', 'T').filter((r) => r[2].split(' ').length <= 30),
  ]
    .slice(0, nProse)
    .map((r) => ({ kind: 'prose', text: r[2], misaki: r[3] })),
  ...rows('tests/data/g2p/misaki_us_pairs.tsv', 'P')
    .slice(0, nNumbers)
    .map((r) => ({ kind: 'numbers', text: r[1], misaki: r[3] })),
];

const ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven',
  'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen'];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];
function cardinal(n) {
  if (n < 20) return ONES[n];
  if (n < 100) return TENS[Math.floor(n / 10)] + (n % 10 ? ' ' + ONES[n % 10] : '');
  if (n < 1000) return ONES[Math.floor(n / 100)] + ' hundred' + (n % 100 ? ' ' + cardinal(n % 100) : '');
  for (const [size, name] of [[1e9, 'billion'], [1e6, 'million'], [1e3, 'thousand']]) {
    if (n >= size) {
      return cardinal(Math.floor(n / size)) + ' ' + name + (n % size ? ' ' + cardinal(n % size) : '');
    }
  }
  return String(n);
}
// Lower case, digits (with thousands commas) as words, hyphens as spaces, other punctuation dropped.
function words(text) {
  return text
    .toLowerCase()
    .replace(/(\d),(\d{3})/g, '$1$2')
    .replace(/\d+/g, (d) => (d.length > 12 ? d.split('').map((c) => ONES[c]).join(' ') : ` ${cardinal(Number(d))} `))
    .replace(/[-–—/]/g, ' ')
    .replace(/[^a-z' ]/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
}
function editDistance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; ++i) {
    const cur = [i];
    for (let j = 1; j <= b.length; ++j) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

const dir = mkdtempSync(join(tmpdir(), 'g2p-wer-'));
const run = (argv) => execFileSync(sotto, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
function speakAndHear(source, s, i) {
  const wav = join(dir, `${i}-${source}.wav`);
  const input = source === 'ours' ? ['--text', s.text] : ['--phonemes', s.misaki];
  const spoken = JSON.parse(run(['speak', '-m', kokoro, '--voice', voice, ...input, '-o', wav, '--json']));
  const heard = JSON.parse(run(['transcribe', '-m', moonshine, wav, '--json']));
  return { phonemes: spoken.phonemes, transcript: heard.text };
}

const results = [];
const totals = { ours: { errors: 0, words: 0 }, misaki: { errors: 0, words: 0 } };
sentences.forEach((s, i) => {
  const ref = words(s.text);
  const row = { kind: s.kind, text: s.text };
  for (const source of ['ours', 'misaki']) {
    const r = speakAndHear(source, s, i);
    const errors = editDistance(ref, words(r.transcript));
    totals[source].errors += errors;
    totals[source].words += ref.length;
    row[source] = { ...r, errors };
  }
  results.push(row);
  if (!json) {
    process.stderr.write(`${i + 1}/${sentences.length} ours ${row.ours.errors} misaki ${row.misaki.errors} errors: ${s.text}\n`);
  }
});
rmSync(dir, { recursive: true, force: true });

const wer = (t) => (100 * t.errors) / Math.max(t.words, 1);
const byKind = (kind, source) => {
  const t = results.filter((r) => r.kind === kind).reduce(
    (acc, r) => ({ errors: acc.errors + r[source].errors, words: acc.words + words(r.text).length }),
    { errors: 0, words: 0 });
  return wer(t);
};
const summary = {
  voice,
  sentences: results.length,
  wer_ours: wer(totals.ours),
  wer_misaki: wer(totals.misaki),
  wer_prose: { ours: byKind('prose', 'ours'), misaki: byKind('prose', 'misaki') },
  wer_numbers: { ours: byKind('numbers', 'ours'), misaki: byKind('numbers', 'misaki') },
};
if (json) {
  console.log(JSON.stringify({ ...summary, results }));
} else {
  const f = (x) => x.toFixed(1) + ' %';
  const lines = [
    `| sentences | our G2P → Kokoro → Moonshine | misaki → Kokoro → Moonshine | difference |`,
    `|---|---:|---:|---:|`,
    `| held-out prose (${results.filter((r) => r.kind === 'prose').length}) | ${f(summary.wer_prose.ours)} | ${f(summary.wer_prose.misaki)} | ${(summary.wer_prose.ours - summary.wer_prose.misaki).toFixed(1)} |`,
    `| numbers, dates, money, tuned (${results.filter((r) => r.kind === 'numbers').length}) | ${f(summary.wer_numbers.ours)} | ${f(summary.wer_numbers.misaki)} | ${(summary.wer_numbers.ours - summary.wer_numbers.misaki).toFixed(1)} |`,
    `| all (${results.length}, ${totals.ours.words} words) | ${f(summary.wer_ours)} | ${f(summary.wer_misaki)} | ${(summary.wer_ours - summary.wer_misaki).toFixed(1)} |`,
  ];
  const differing = results.filter((r) => r.ours.errors !== r.misaki.errors);
  const detail = differing.map((r) => `- "${r.text}": ours "${r.ours.transcript}" (${r.ours.errors}), misaki "${r.misaki.transcript}" (${r.misaki.errors})`);
  const text = [`Voice ${voice}; word error rate against the written sentence.`, '', ...lines, '',
    'Sentences where the two differ:', ...detail, ''].join('\n');
  console.log(text);
  if (outFile) writeFileSync(outFile, text);
}
