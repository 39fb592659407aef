// The side panels' pieces: a model's row (progress bar with bytes and speed, state, detail) and the VAD's
// probability trace.
import { mb } from './models.js';

const TRACE_FRAMES = 312;  // 10 s of 32 ms frames

// A row of the models list; `record` (the page's agent.models) mirrors what it shows, for tests.
export function modelRow(list, key, label, record) {
  let li = list.querySelector(`[data-model="${key}"]`);
  if (!li) {
    li = document.createElement('li');
    li.dataset.model = key;
    li.innerHTML = '<div class="head"><span class="name"></span><span class="state"></span></div><progress max="1" value="0"></progress><div class="detail"></div>';
    li.querySelector('.name').textContent = label;
    li.querySelector('progress').setAttribute('aria-label', `${label} download`);
    list.append(li);
    li.querySelector('.state').textContent = 'waiting…';
  }
  return {
    progress(loaded, total, text) {
      const p = li.querySelector('progress');
      p.hidden = false;
      if (total) {
        p.max = total;
        p.value = loaded;
      } else p.removeAttribute('value');
      this.state(text);
    },
    state(text, kind = '') {
      const el = li.querySelector('.state');
      el.textContent = text;
      el.className = `state ${kind}`;
      record[key] = { ...record[key], state: text, kind };
    },
    done(text, detail = '', kind = 'good') {
      li.querySelector('progress').hidden = true;
      this.state(text, kind);
      li.querySelector('.detail').textContent = detail;
      record[key] = { ...record[key], detail };
    },
    detail(text) {
      li.querySelector('.detail').textContent = text;
    },
  };
}

export function rate(bytesPerS) {
  return bytesPerS > 0 ? ` · ${mb(bytesPerS)}/s` : '';
}

// The speech probability of the last 10 s on a canvas, speech frames shaded (drawn at most once a frame).
export class VadTrace {
  #p = new Float32Array(TRACE_FRAMES);
  #speech = new Uint8Array(TRACE_FRAMES);
  #n = 0;
  #pending = false;

  constructor(canvas) {
    this.canvas = canvas;
    globalThis.matchMedia?.('(prefers-color-scheme: dark)').addEventListener?.('change', () => (this.colours = null));
  }

  push(probability, speaking) {
    this.#p[this.#n % TRACE_FRAMES] = probability;
    this.#speech[this.#n % TRACE_FRAMES] = speaking ? 1 : 0;
    this.#n++;
    if (!this.#pending) {
      this.#pending = true;
      requestAnimationFrame(() => this.#draw());
    }
  }

  #draw() {
    this.#pending = false;
    const c = this.canvas;
    const g = c.getContext('2d');
    const w = c.width, h = c.height;
    g.clearRect(0, 0, w, h);
    // The theme's colours, read once (getComputedStyle per frame would recompute the page's style 30 times a second).
    this.colours ??= (() => {
      const style = getComputedStyle(document.documentElement);
      return { speech: style.getPropertyValue('--speech').trim(), accent: style.getPropertyValue('--accent').trim() };
    })();
    const dx = w / TRACE_FRAMES;
    const at = (i) => this.#n - TRACE_FRAMES + i;  // the frame drawn at column i
    g.fillStyle = `${this.colours.speech}33`;
    for (let i = 0; i < TRACE_FRAMES; i++) if (at(i) >= 0 && this.#speech[at(i) % TRACE_FRAMES]) g.fillRect(i * dx, 0, dx + 0.5, h);
    g.strokeStyle = this.colours.accent;
    g.lineWidth = 1.5;
    g.beginPath();
    for (let i = 0; i < TRACE_FRAMES; i++) {
      const p = at(i) >= 0 ? this.#p[at(i) % TRACE_FRAMES] : 0;
      const y = h - 2 - p * (h - 4);
      if (i) g.lineTo(i * dx, y);
      else g.moveTo(0, y);
    }
    g.stroke();
  }
}
