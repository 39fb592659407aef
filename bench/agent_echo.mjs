#!/usr/bin/env node
// The agent's own voice fed back into its microphone (issue #32 item 4): what the VAD does with it, and whether
// the echo gate (web/agent/echo.js) keeps it from interrupting the agent or being taken for a question.
// Headless Chromium, the real page (CPU profile, the real ASR, LLM and TTS); the fake microphone plays digital
// silence, and the page adds its own voice to it (agent.setEcho: the played signal at GAIN, 60 ms late, as a
// speaker heard by a microphone with no echo canceller; the browser's canceller never sees this path). For each
// gain and gate setting one typed question is answered aloud; per turn: how many speech starts the echo caused
// while the voice played, whether it interrupted the voice (a false barge-in), how many echo segments were
// dropped, and how many were transcribed as questions (the agent answering itself).
//
//   node bench/agent_echo.mjs [--gains 0.03,0.1,0.3,1] [--json] [--tokens N]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

import { buildAgent } from '../web/agent/build.mjs';
import { startServer } from '../web/serve.mjs';

const { values: opts } = parseArgs({
  options: { gains: { type: 'string', default: '0.03,0.1,0.3,1' }, json: { type: 'boolean', default: false }, tokens: { type: 'string', default: '60' },
    question: { type: 'string', default: 'Describe the ocean in three sentences.' } },
});
const gains = opts.gains.split(',').map(Number);
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

await buildAgent();
const { server, url: base } = await startServer(0);
const dir = mkdtempSync(join(tmpdir(), 'sotto-agent-echo-'));
// Ten minutes of digital silence: only the page's own voice reaches the VAD.
const silence = join(dir, 'silence.wav');
const pcm = Buffer.alloc(16000 * 2 * 600);
const h = Buffer.alloc(44);
h.write('RIFF', 0); h.writeUInt32LE(36 + pcm.length, 4); h.write('WAVEfmt ', 8); h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20);
h.writeUInt16LE(1, 22); h.writeUInt32LE(16000, 24); h.writeUInt32LE(32000, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34);
h.write('data', 36); h.writeUInt32LE(pcm.length, 40);
writeFileSync(silence, Buffer.concat([h, pcm]));
const load = { before: loadavg()[0] };
const rows = [];
const context = await chromium.launchPersistentContext(join(dir, 'profile'), {
  executablePath: CHROMIUM, headless: true, timeout: 60000,
  args: ['--no-sandbox', '--autoplay-policy=no-user-gesture-required', '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${silence}%noloop`],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${base}agent/?profile=cpu&tokens=${opts.tokens}`);
  await page.waitForFunction(() => window.sottoAgent?.ready || window.sottoAgent?.status === 'error', null, { timeout: 600000 });
  await page.evaluate(() => window.sottoAgent.toggleMic());
  // The gate first: the runs without it leave interrupted turns and the agent's answers to itself in the
  // conversation, which make later replies odd.
  for (const gate of [true, false]) {
    for (const gain of gains) {
      const row = await page.evaluate(async ({ gain, gate, question }) => {
        const a = window.sottoAgent;
        const idle = async () => {
          while (a.status !== 'listening') await new Promise((r) => setTimeout(r, 200));
        };
        await idle();
        const e0 = a.events.length, t0 = a.turns.length, held0 = a.echo.held, dropped0 = a.echo.dropped;
        a.setEcho(gain, { gate });
        await a.ask(question);
        // The echo's last segment ends redemptionMs after the voice; then nothing more is fed back.
        await new Promise((r) => setTimeout(r, 1500));
        a.setEcho(0);
        await new Promise((r) => setTimeout(r, 500));
        await idle();
        const events = a.events.slice(e0);
        const turns = a.turns.slice(t0);
        const typed = turns.find((t) => t.source === 'typed');
        const voiced = turns.filter((t) => t.reply && t.heard !== null);
        return {
          gain, gate, voice_turns: voiced.length, speech_starts: events.filter((e) => e.type === 'speech-start').length,
          held: a.echo.held - held0, dropped: a.echo.dropped - dropped0,
          false_barge_in: !!typed?.cancelled, heard: typed?.heard ?? null, reply: typed?.reply ?? null,
          self_questions: turns.filter((t) => t.source === 'voice' && t.user).map((t) => t.user),
        };
      }, { gain, gate, question: opts.question });
      rows.push(row);
      if (!opts.json) {
        console.log(`gain ${gain} gate ${gate ? 'on ' : 'off'}: speech starts ${row.speech_starts}, held ${row.held}, dropped ${row.dropped}, ` +
          `false barge-in ${row.false_barge_in}, self-questions ${JSON.stringify(row.self_questions)}; heard ${row.heard?.length ?? 0}/${row.reply?.length ?? 0} chars`);
      }
    }
  }
} finally {
  await context.close();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
load.after = loadavg()[0];
if (opts.json) console.log(JSON.stringify({ rows, load }));
else console.log(`load average ${load.before.toFixed(1)} before, ${load.after.toFixed(1)} after`);
