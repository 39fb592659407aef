// The lab's "WebGPU" section: opens the GPU in the lab's engine worker (web/gpu.js), runs the device-seam smoke
// test and the op-by-op harness (src/models/llm/gpu/op_check.h: every kernel against the CPU's arithmetic, as natively),
// and shows the GPU time of each kernel of the last timed run (timestamp queries, when the adapter has them).
// window.sottoLab.gpuLab exposes the steps to tests.
const $ = (id) => document.getElementById(id);

function showError(where, e) {
  where.textContent = '';
  where.append(Object.assign(document.createElement('span'), { className: 'bad', textContent: String(e?.message ?? e) }));
}

function table(headers, rows, classOf = () => '') {
  const t = document.createElement('table');
  t.insertRow().append(...headers.map((h) => Object.assign(document.createElement('th'), { textContent: h })));
  for (const r of rows) {
    const tr = t.insertRow();
    tr.className = classOf(r);
    for (const v of r) tr.insertCell().textContent = v;
  }
  return t;
}

async function engine() {
  await window.sottoLab.ready;
  if (!window.sottoLab.engine) throw new Error('the engine did not start');
  return window.sottoLab.engine;
}

async function open() {
  const e = await engine();
  const a = await e.gpu();
  const l = a.limits;
  $('gpu-info').textContent = `${a.description} (${a.backend}); features: ${a.features.join(', ') || 'none'}; ` +
    `maxBufferSize ${(l.maxBufferSize / 2 ** 20).toFixed(0)} MiB, maxStorageBufferBindingSize ` +
    `${(l.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB; timestamps ${a.timestamps ? 'yes' : 'no'}`;
  for (const id of ['gpu-selftest', 'gpu-opcheck', 'gpu-timings']) $(id).disabled = false;
  return a;
}

async function selftest() {
  const e = await engine();
  const r = await e.gpuSelftest({ n: 65536 });
  $('gpu-out').className = r.passed ? 'good' : 'bad';
  $('gpu-out').textContent = r.status !== 'ok' ? `FAILED: ${r.message}` :
    `${r.passed ? 'passed' : 'FAILED'}: y = a(ax + b) + b over ${r.n} floats, max |gpu - cpu| ${r.maxAbsError} ` +
    `(tolerance ${r.tolerance.toExponential(2)}), ${r.ms.toFixed(1)} ms; ${r.message}`;
  await timings();
  return r;
}

async function opCheck() {
  const e = await engine();
  $('gpu-out').className = '';
  $('gpu-out').textContent = 'running every kernel against the CPU…';
  const r = await e.gpuOpCheck({ seed: (Math.random() * 2 ** 32) >>> 0 });
  $('gpu-out').textContent = '';
  if (!r.ok) return showError($('gpu-out'), r.error), r;
  const failed = r.checks.filter((c) => !c.passed).length;
  $('gpu-out').append(
    Object.assign(document.createElement('div'), { className: failed ? 'bad' : 'good',
      textContent: `${failed ? `${failed} FAILED` : 'all passed'}: ${r.checks.length} checks on ${r.adapter}, ${r.ms.toFixed(0)} ms` }),
    table(['op', 'shape', 'error', 'tolerance', ''], r.checks.map((c) => [c.op, c.shape, c.error === null ? 'NaN' : c.error.toExponential(2),
      c.tolerance.toExponential(1), c.passed ? 'ok' : 'FAILED']), (row) => (row[4] === 'ok' ? '' : 'bad')));
  return r;
}

// Per-kernel GPU time of the last timed run, summed by kernel (a decode step repeats each kernel per layer).
async function timings() {
  const e = await engine();
  const { timestamps, timings: list } = await e.gpuTimings();
  const out = $('gpu-timings-out');
  if (!timestamps) return (out.textContent = 'this adapter has no timestamp queries'), null;
  if (!list.length) return (out.textContent = 'no timed run yet'), null;
  const byLabel = new Map();
  for (const { label, ns } of list) {
    const s = byLabel.get(label) ?? { label, count: 0, ns: 0 };
    s.count++;
    s.ns += ns;
    byLabel.set(label, s);
  }
  const total = list.reduce((a, x) => a + x.ns, 0);
  const rows = [...byLabel.values()].sort((a, b) => b.ns - a.ns);
  out.textContent = '';
  out.append(`${list.length} commands, ${(total / 1e3).toFixed(1)} µs of GPU time`,
    table(['kernel', 'runs', 'µs', 'share'], rows.map((s) => [s.label, s.count, (s.ns / 1e3).toFixed(1), `${((100 * s.ns) / (total || 1)).toFixed(1)}%`])));
  return rows;
}

$('gpu-open').onclick = () => open().catch((e) => showError($('gpu-info'), e));
$('gpu-selftest').onclick = () => selftest().catch((e) => showError($('gpu-out'), e));
$('gpu-opcheck').onclick = () => opCheck().catch((e) => showError($('gpu-out'), e));
$('gpu-timings').onclick = () => timings().catch((e) => showError($('gpu-timings-out'), e));
if (!navigator.gpu) $('gpu-info').textContent = 'this browser has no WebGPU (navigator.gpu is missing)';

window.sottoLab.gpuLab = { open, selftest, opCheck, timings };
