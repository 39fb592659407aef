// What the agent page's tests share: building the one-file page once, opening it with every request recorded
// and checked against what the page may ask for, and waiting for it to be ready.
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { wavHeader } from '../../web/wav.mjs';
import { CHROMIUM, CPU_ARGS, launchChromium, useBrowser } from './browser_support.mjs';
import { readWav16 } from './vad_support.mjs';

export const repo = fileURLToPath(new URL('../../', import.meta.url));
// Resolved: Chromium refuses a fake-capture file whose path holds '..'.
export const fixtures = resolve(process.env.SOTTO_FIXTURES ?? `${repo}tests/fixtures`);
export const wasmDir = process.env.SOTTO_WASM_DIR ?? `${repo}build`;
export const REAL_MODEL = `${repo}models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;
export const SMALL_MODEL = '/fixtures/llm/stories260K.gguf';
export const AGENT_ARGS = ['--autoplay-policy=no-user-gesture-required'];

export function skipReason() {
  if (!existsSync(CHROMIUM)) return `no browser at ${CHROMIUM}`;
  if (!['simd128', 'relaxed'].every((v) => existsSync(`${wasmDir}/wasm-${v}/sotto.wasm`))) return `build the wasm first (${wasmDir})`;
  if (!existsSync(`${fixtures}/vad/silero_vad_v5.1.onnx`) || !existsSync(`${fixtures}/llm/stories260K.gguf`)) return 'fixtures missing';
  return false;
}

let built = null;
// Builds build/agent/index.html once per process (esbuild: about a second).
export async function buildOnce() {
  const { buildAgent } = await import('../../web/agent/build.mjs');
  built ??= buildAgent();
  return built;
}

let builtStandins = null;
// Builds build/agent-standins/: the page with the stand-in speech modules (agent_standins.mjs), once per process.
export async function buildStandinsOnce() {
  const { buildAgent } = await import('../../web/agent/build.mjs');
  const standins = fileURLToPath(new URL('./agent_standins.mjs', import.meta.url));
  builtStandins ??= buildAgent(`${repo}build/agent-standins`, { speech: { asr: standins, tts: standins } });
  return builtStandins;
}

// Chromium's flags for a fake microphone that plays `wav` once, granted without asking.
export const micArgs = (wav) => ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}%noloop`];

// browser_support's useBrowser with the agent's flags (autoplay) added to `args` (e.g. micArgs(clip)). A file
// that prepares something the launch needs (a build, a clip) registers that before() first: hooks run in order.
export function useAgentBrowser({ args = [], webgpu = false, ...options } = {}) {
  return useBrowser({ args: [...CPU_ARGS, ...AGENT_ARGS, ...args], webgpu, ...options });
}

// A Chromium of its own with the agent's flags and `args` (for a test that needs a fresh fake microphone).
export const launchAgentBrowser = (args = []) => launchChromium({ args: [...CPU_ARGS, ...AGENT_ARGS, ...args] });

// The requests the agent may make: its own page and service worker, the engine's Blob URLs, and model files.
export function allowedRequest(url, origin) {
  if (url.startsWith('blob:') || url.startsWith('data:')) return true;
  const u = new URL(url);
  if (u.origin !== origin) return false;
  return /^\/(agent|build\/agent-standins)\/(index\.html|sw\.js)?$/.test(u.pathname) || /^\/(agent\/)?models\/[\w./-]+$/.test(u.pathname) && !u.pathname.includes('..') ||
    /^\/fixtures\/(llm|vad)\/[^/]+\.(gguf|onnx)$/.test(u.pathname) || /^\/models\//.test(u.pathname);
}

// Opens `path` (e.g. '/agent/?model=...') in a fresh context; -> {page, logs, requests, context}. Every request
// of the page, its workers and its service worker is recorded.
export async function openAgent(browser, base, path) {
  const context = await browser.newContext();
  const logs = [];
  const requests = [];
  context.on('request', (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') logs.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('worker', (w) => w.on('console', (m) => m.type() === 'error' && logs.push(`worker error: ${m.text()}`)));
  await page.goto(new URL(path, base).href);
  return { page, logs, requests, context };
}

export async function waitReady(page, timeout = 60000) {
  await page.waitForFunction(() => window.sottoAgent?.ready || window.sottoAgent?.status === 'error', null, { timeout, polling: 100 });
  const errors = await page.evaluate(() => window.sottoAgent.errors);
  assert.deepEqual(errors, [], `the page failed to load: ${errors.join('; ')}`);
}

export function assertOnlyAllowed(requests, base) {
  const origin = new URL(base).origin;
  const bad = requests.filter((u) => !allowedRequest(u, origin));
  assert.deepEqual(bad, [], 'the page requested something other than itself and the model files');
}

// A 16 kHz mono 16-bit WAV of the given PCM bytes (a fake microphone's clip).
export function writeWav(out, pcm) {
  writeFileSync(out, Buffer.concat([wavHeader(16000, 16, pcm.length), pcm]));
}

// capital.wav with `pauseMs` of silence cut into the middle of its speech, as a 16 kHz WAV file.
export function pausedClip(dir, pauseMs) {
  const { samples } = readWav16(`${repo}bench/data/questions/capital.wav`);
  const loud = [];
  for (let i = 0; i < samples.length; i += 320) {
    let e = 0;
    for (let j = i; j < Math.min(samples.length, i + 320); j++) e += samples[j] * samples[j];
    if (e / 320 > 1e-4) loud.push(i);
  }
  const cut = loud[Math.floor(loud.length / 2)];
  const pause = Math.round((pauseMs / 1000) * 16000);
  const out = new Int16Array(samples.length + pause);
  const pcm = (x) => Math.max(-32768, Math.min(32767, Math.round(x * 32768)));
  for (let i = 0; i < cut; i++) out[i] = pcm(samples[i]);
  for (let i = cut; i < samples.length; i++) out[i + pause] = pcm(samples[i]);
  const path = join(dir, `capital-pause-${pauseMs}.wav`);
  writeWav(path, Buffer.from(out.buffer));
  return path;
}
