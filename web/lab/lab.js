// The lab page: a thin shell over web/engine.js. Query parameters: ?variant=simd128|relaxed forces a build,
// ?threads=N sets the pool size, ?wasm=URL loads another build of the module. window.sottoLab exposes the
// engine to tests.
import { Engine, defaultThreads } from '../engine.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const variant = params.get('variant') || undefined;
const wasmUrl = params.get('wasm') || undefined;  // another build of the module (?wasm=/path/sotto.wasm)
$('threads').value = params.get('threads') || defaultThreads();

let engine = null;

function humanBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) (n /= 1024), u++;
  return `${u ? n.toFixed(1) : n} ${units[u]}`;
}

function cell(row, text) {
  const td = document.createElement('td');
  td.textContent = text;
  row.appendChild(td);
}

function table(headers, rows) {
  const t = document.createElement('table');
  const head = t.insertRow();
  for (const h of headers) {
    const th = document.createElement('th');
    th.textContent = h;
    head.appendChild(th);
  }
  for (const r of rows) {
    const row = t.insertRow();
    for (const v of r) cell(row, v);
  }
  return t;
}

async function start() {
  engine?.terminate();
  engine = null;
  $('status').textContent = 'starting the engine…';
  try {
    engine = await Engine.create({ threads: Number($('threads').value), variant, wasmUrl });
    const i = engine.info;
    $('status').textContent =
      `wasm ${i.variant} (${i.wasmUrl.split('/').slice(-2).join('/')}), ${i.threads} threads, ` +
      `crossOriginIsolated ${crossOriginIsolated}, WebGPU ${navigator.gpu ? 'present' : 'absent'}`;
  } catch (e) {
    $('status').innerHTML = '';
    $('status').append(Object.assign(document.createElement('span'), { className: 'bad', textContent: String(e.message ?? e) }));
  }
  window.sottoLab.engine = engine;
  return engine;
}

async function runSelftest() {
  const r = await engine.selftest();
  $('selftest-out').className = r.passed ? 'good' : 'bad';
  $('selftest-out').textContent =
    `${r.passed ? 'passed' : 'FAILED'} on ${r.threads} threads, ${r.rows}x${r.cols}, ${r.ms.toFixed(2)} ms\n` +
    `int8 dot: max error ${r.maxAbsError}, checksum ${r.checksum.toString(16)} (scalar reference ${r.checksumRef.toString(16)})\n` +
    `q8_0 matvec: max error ${r.q8MaxAbsError.toExponential(2)} (tolerance ${r.q8Tolerance.toExponential(2)}), ` +
    `checksum ${r.q8Checksum} (1 thread: ${r.q8Checksum1Thread})`;
  return r;
}

async function describe(source) {
  // The previous result goes first, so a failure (a bad file, or a read that throws) never sits beside it.
  const out = $('describe-out');
  out.textContent = '';
  $('progress').textContent = '';
  let d;
  try {
    d = await engine.describe(source, {
      onProgress: ({ bytes, total }) => ($('progress').textContent = `read ${humanBytes(bytes)} of ${humanBytes(total)}`),
    });
  } catch (e) {
    d = { ok: false, error: String(e?.message ?? e) };
  }
  if (!d.ok) {
    out.append(Object.assign(document.createElement('div'), { className: 'bad', textContent: d.error }));
    return d;
  }
  out.append(
    Object.assign(document.createElement('p'), {
      textContent: `${d.name}: ${d.format}, ${humanBytes(d.bytes)}, read in ${d.loadMs.toFixed(0)} ms, ` +
        `${d.metadata.length} metadata entries, ${d.tensors.length} tensors`,
    }),
    table(['key', 'type', 'value'], d.metadata.map((m) => [m.key, m.type, m.text])),
    table(['tensor', 'dtype', 'shape', 'bytes'], d.tensors.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, humanBytes(t.bytes)])),
  );
  return d;
}

window.sottoLab = { engine: null, start, runSelftest, describe, ready: null };
$('restart').onclick = start;
$('selftest').onclick = () => runSelftest().catch((e) => ($('selftest-out').textContent = String(e.message ?? e)));
$('file').onchange = () => $('file').files[0] && describe($('file').files[0]);
$('load-url').onclick = () => $('url').value && describe($('url').value);
window.sottoLab.ready = start();
