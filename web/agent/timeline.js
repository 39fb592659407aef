// The per-turn latency timeline: the stages of a turn from its timestamps (all from the end of speech, or from
// sending a typed question), and their bars.
//   tl: {source: 'voice' | 'typed', endOfSpeech, detected, started, asrStart, transcript, firstToken,
//        firstSentence, firstSound, generated} (performance.now() times). With a voice, firstSentence is when the
//        reply's first spoken piece exists (a clause of a few words, sentences.js), the synthesis's start.
export function stagesOf(tl) {
  const t0 = tl.endOfSpeech;
  const at = (t) => (t === undefined ? undefined : Math.round(t - t0));
  const out = {};
  if (tl.source === 'voice') out.endpoint_ms = Math.round(tl.detected - t0);
  if (tl.started !== undefined && tl.started - tl.detected >= 20) out.queued_ms = Math.round(tl.started - t0);
  if (tl.source === 'typed' && tl.transcript - t0 >= 20) out.queued_ms = Math.round(tl.transcript - t0);
  if (tl.asrStart !== undefined) out.asr_ms = Math.round(tl.transcript - tl.asrStart);
  if (tl.transcript !== undefined) out.transcript_ms = at(tl.transcript);
  if (tl.firstToken !== undefined) out.first_token_ms = at(tl.firstToken);
  if (tl.firstSentence !== undefined) out.first_sentence_ms = at(tl.firstSentence);
  if (tl.firstSound !== undefined) out.first_sound_ms = at(tl.firstSound);
  if (tl.generated !== undefined) out.reply_done_ms = at(tl.generated);
  return out;
}

export function fmtMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

const STAGES = [
  ['endpoint', 'endpoint_ms', 'end of speech detected'],
  ['queued', 'queued_ms', 'previous turn finished'],
  ['asr', 'transcript_ms', 'transcript'],
  ['token', 'first_token_ms', 'first token'],
  ['sentence', 'first_sentence_ms', 'first sentence'],
  ['sound', 'first_sound_ms', 'first sound'],
];

export function renderTimeline(box, turns, { tts }) {
  box.replaceChildren();
  // Utterances without a transcript (no speech recognition) are in the segment list, not here.
  const shown = turns.filter((t) => t.user !== null).map((t, i) => ({ ...t, n: i + 1 }));
  const recent = shown.slice(-4).reverse();
  if (!recent.length) {
    box.innerHTML = '<p class="muted">After the first turn: end of speech → transcript → first token → first sentence → first sound.</p>';
    return;
  }
  const scale = Math.max(1000, ...recent.flatMap((t) => Object.values(t.stages).filter((v) => typeof v === 'number')));
  recent.forEach((t) => {
    const n = t.n;
    const div = document.createElement('div');
    div.className = 'turn';
    const st = t.stages;
    const total = st.first_sound_ms ?? st.first_sentence_ms ?? st.first_token_ms ?? st.transcript_ms ?? st.endpoint_ms ?? 0;
    div.innerHTML = '<div class="turn-head"><span></span><span></span></div><div class="bar" role="img"></div><div class="legend"></div>';
    div.querySelector('.turn-head span').textContent = `Turn ${n} · ${t.source === 'voice' ? 'spoken' : 'typed'}`;
    div.querySelector('.turn-head span:last-child').textContent =
      st.first_sound_ms !== undefined ? `voice to voice ${fmtMs(st.first_sound_ms)}` : t.note ?? `to first sentence ${fmtMs(total)}`;
    const bar = div.querySelector('.bar');
    const legend = div.querySelector('.legend');
    let prev = 0;
    const labels = [];
    for (const [cls, key, label] of STAGES) {
      const v = st[key];
      if (v === undefined || (cls === 'asr' && t.source === 'typed')) continue;
      const seg = document.createElement('span');
      seg.className = `s-${cls}`;
      seg.style.width = `${(Math.max(0, v - prev) / scale) * 100}%`;
      seg.title = `${label}: ${fmtMs(v)}`;
      bar.append(seg);
      const item = document.createElement('span');
      item.innerHTML = `<i class="s-${cls}"></i>`;
      item.append(`${label} ${fmtMs(v)}`);
      legend.append(item);
      labels.push(`${label} at ${fmtMs(v)}`);
      prev = Math.max(prev, v);
    }
    if (!tts && t.source !== 'voice') {
      const item = document.createElement('span');
      item.textContent = 'no sound: speech synthesis not in this build';
      legend.append(item);
    }
    bar.setAttribute('aria-label', labels.join(', ') || 'no stages');
    box.append(div);
  });
}
