// Model files for the page: downloaded once into Cache Storage in chunks fetched with Range requests (an
// interrupted download resumes at the first missing chunk), checked against their sha256 where it is known, and
// handed to the engine as one Blob assembled from the cached chunks (no copy in the page: the engine worker
// streams the Blob straight into wasm memory).
//
//   const blob = await fetchModel(url, { sha256, onProgress: ({ phase, loaded, total, bytesPerS }) => ... });
//
// Only the model's own URL is ever requested. Storage is checked first: when the browser's quota cannot hold
// the file, StorageShortError says how much is needed and free, and the caller may load it uncached.
import { Sha256 } from './sha256.js';

const CACHE_NAME = 'sotto-models-v1';
export const CHUNK_BYTES = 32 << 20;
const FULL_DIGEST_MAX_BYTES = 1 << 30;  // above this, hash chunk by chunk in JS rather than one buffer in WebCrypto

export class StorageShortError extends Error {
  constructor(url, neededBytes, freeBytes) {
    super(`not enough storage to keep ${url.split('/').pop()}: it needs ${mb(neededBytes)} and the browser allows ${mb(freeBytes)} more ` +
      '(free some space, or load it without saving it)');
    this.name = 'StorageShortError';
    this.neededBytes = neededBytes;
    this.freeBytes = freeBytes;
  }
}

// Hosts the page's Content-Security-Policy lets it fetch models from, besides its own origin.
const MODEL_HOSTS = [/^huggingface\.co$/, /\.huggingface\.co$/, /\.hf\.co$/];

// A model location as the user may give it -> the URL to fetch, or an error naming what is wrong:
//   'owner/repo/file.gguf' (a Hugging Face repository, main branch), a Hugging Face page URL (.../blob/REV/file),
//   or any URL on this page's origin or Hugging Face. Relative URLs are resolved against `base`.
export function modelUrl(input, base) {
  const text = String(input).trim();
  const short = /^([\w.-]+)\/([\w.-]+)\/(.+\.(gguf|onnx|safetensors|bin))$/i.exec(text);
  if (short && !/^(https?:|\.|\/)/.test(text)) return { url: `https://huggingface.co/${short[1]}/${short[2]}/resolve/main/${short[3]}` };
  let url;
  try {
    url = new URL(text, base);
  } catch {
    return { error: `'${text}' is not a URL` };
  }
  if (url.origin !== new URL(base).origin) {
    if (url.protocol !== 'https:' || !MODEL_HOSTS.some((h) => h.test(url.hostname)))
      return { error: `this page loads models only from its own site or Hugging Face (its Content-Security-Policy keeps everything else out): ${url.origin}` };
    url.pathname = url.pathname.replace(/^(\/[^/]+\/[^/]+)\/blob\//, '$1/resolve/');
  }
  return { url: url.href };
}

export function mb(bytes) {
  return bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

const partKey = (url, i) => `${url}${url.includes('?') ? '&' : '?'}sotto-part=${i}`;
const manifestKey = (url) => `${url}${url.includes('?') ? '&' : '?'}sotto-manifest`;

// Speed over the last few seconds, for the progress bar.
class Speedometer {
  #samples = [];
  add(loaded) {
    const now = performance.now();
    this.#samples.push([now, loaded]);
    while (this.#samples.length > 2 && now - this.#samples[0][0] > 3000) this.#samples.shift();
    const [t0, b0] = this.#samples[0];
    return now > t0 ? ((loaded - b0) * 1000) / (now - t0) : 0;
  }
}

async function readManifest(cache, url) {
  const r = await cache.match(manifestKey(url));
  return r ? r.json() : null;
}

function writeManifest(cache, url, manifest) {
  return cache.put(manifestKey(url), new Response(JSON.stringify(manifest), { headers: { 'Content-Type': 'application/json' } }));
}

// Every model this page saved: -> bytes freed (the browser's estimate of its usage before and after).
export async function forgetAllModels() {
  const before = (await navigator.storage?.estimate?.())?.usage ?? 0;
  await caches.delete(CACHE_NAME);
  const after = (await navigator.storage?.estimate?.())?.usage ?? 0;
  return Math.max(0, before - after);
}

// -> bytes the saved models take (what the cache's manifests say).
export async function savedBytes() {
  if (!globalThis.caches || !(await caches.has(CACHE_NAME))) return 0;
  const cache = await caches.open(CACHE_NAME);
  let total = 0;
  for (const request of await cache.keys()) {
    if (!request.url.endsWith('sotto-manifest')) continue;
    const m = await (await cache.match(request)).json();
    total += m.done.filter(Boolean).length === m.parts ? m.size : m.done.filter(Boolean).length * m.chunkBytes;
  }
  return total;
}

export async function forgetModel(url) {
  const cache = await caches.open(CACHE_NAME);
  const manifest = await readManifest(cache, url);
  for (let i = 0; i < (manifest?.parts ?? 0); i++) await cache.delete(partKey(url, i));
  await cache.delete(manifestKey(url));
}

// Streams `response`'s body, reporting bytes; -> its bytes as a Blob-backed Response body for the cache.
async function drain(response, onBytes) {
  const reader = response.body.getReader();
  const pieces = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    pieces.push(value);
    onBytes(value.length);
  }
  return new Blob(pieces);
}

async function checkStorage(url, neededBytes) {
  const estimate = await navigator.storage?.estimate?.();
  if (!estimate?.quota) return;
  const free = estimate.quota - (estimate.usage ?? 0);
  if (free < neededBytes * 1.02) throw new StorageShortError(url, neededBytes, free);
}

// -> {blob, bytes, resumed (an unfinished earlier download was continued), verified (sha256 checked: true, or
// null when none known)}
export async function fetchModel(url, { sha256 = null, onProgress = () => {}, chunkBytes = CHUNK_BYTES, signal } = {}) {
  url = new URL(url, location.href).href;
  const cache = await caches.open(CACHE_NAME);
  let manifest = await readManifest(cache, url);
  // Resumed: chunks of an earlier, unfinished download were in the cache when this call began.
  const hadPart = Boolean(manifest && manifest.chunkBytes === chunkBytes && manifest.done.some(Boolean));
  const speed = new Speedometer();
  const report = (phase, loaded, total) => onProgress({ phase, loaded, total, bytesPerS: phase === 'download' ? speed.add(loaded) : 0 });

  if (!manifest || manifest.chunkBytes !== chunkBytes) {
    if (manifest) await forgetModel(url);
    // The first chunk tells the size (Content-Range) and whether the server takes Range requests at all.
    const first = await fetch(url, { headers: { Range: `bytes=0-${chunkBytes - 1}` }, signal, cache: 'no-store' });
    if (!first.ok) throw new Error(`${url}: HTTP ${first.status}`);
    const total = first.status === 206 ? Number(first.headers.get('Content-Range')?.split('/')[1]) : Number(first.headers.get('Content-Length') ?? 0);
    if (total) await checkStorage(url, total).catch((e) => {
      first.body?.cancel();
      throw e;
    });
    if (first.status !== 206 || !total) {
      // No Range support: one whole download, cached as a single part (an interruption starts it again).
      let loaded = 0;
      const blob = await drain(first, (n) => report('download', (loaded += n), total || loaded));
      manifest = { chunkBytes, size: blob.size, parts: 1, done: [true], sha256, verified: false };
      await cache.put(partKey(url, 0), new Response(blob));
      await writeManifest(cache, url, manifest);
    } else {
      manifest = { chunkBytes, size: total, parts: Math.ceil(total / chunkBytes), done: [], sha256, verified: false };
      let loaded = 0;
      const blob = await drain(first, (n) => report('download', (loaded += n), total));
      await cache.put(partKey(url, 0), new Response(blob));
      manifest.done[0] = true;
      await writeManifest(cache, url, manifest);
    }
  }

  // The missing chunks, in order (a resumed download starts here).
  const total = manifest.size;
  let loaded = 0;
  for (let i = 0; i < manifest.parts; i++) if (manifest.done[i]) loaded += Math.min(chunkBytes, total - i * chunkBytes);
  const resumed = hadPart && loaded < total;
  if (loaded < total) await checkStorage(url, total - loaded);
  for (let i = 0; i < manifest.parts; i++) {
    if (manifest.done[i]) continue;
    const start = i * chunkBytes;
    const end = Math.min(total, start + chunkBytes) - 1;
    const r = await fetch(url, { headers: { Range: `bytes=${start}-${end}` }, signal, cache: 'no-store' });
    if (r.status !== 206) throw new Error(`${url}: the server answered a Range request with HTTP ${r.status}`);
    const blob = await drain(r, (n) => report('download', (loaded += n), total));
    if (blob.size !== end - start + 1) throw new Error(`${url}: chunk ${i} has ${blob.size} bytes, expected ${end - start + 1}`);
    await cache.put(partKey(url, i), new Response(blob));
    manifest.done[i] = true;
    await writeManifest(cache, url, manifest);
  }

  const parts = [];
  for (let i = 0; i < manifest.parts; i++) {
    const r = await cache.match(partKey(url, i));
    if (!r) {
      await forgetModel(url);
      throw new Error(`${url}: a cached chunk disappeared (the browser evicted it); load again`);
    }
    parts.push(await r.blob());
  }
  const blob = new Blob(parts);
  if (blob.size !== total) throw new Error(`${url}: cached ${blob.size} bytes, expected ${total}`);

  const expected = sha256 ?? manifest.sha256;
  if (expected && !(manifest.verified && manifest.sha256 === expected)) {
    report('verify', 0, total);
    const actual = await digest(blob, (n) => report('verify', n, total));
    if (actual !== expected.toLowerCase()) {
      await forgetModel(url);
      throw new Error(`${url}: sha256 ${actual} is not the expected ${expected}; the download was discarded`);
    }
    manifest.sha256 = expected;
    manifest.verified = true;
    await writeManifest(cache, url, manifest);
  }
  report('ready', total, total);
  return { blob, bytes: total, resumed, verified: expected ? true : null, name: url.split('/').pop() };
}

// The sha256 of a Blob: WebCrypto on one buffer when that fits comfortably (native speed, one transient copy),
// else our incremental SHA-256 chunk by chunk.
async function digest(blob, onBytes) {
  if (blob.size <= FULL_DIGEST_MAX_BYTES && globalThis.crypto?.subtle) {
    const hash = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
    onBytes(blob.size);
    return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, '0')).join('');
  }
  const h = new Sha256();
  const reader = blob.stream().getReader();
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    h.update(value);
    onBytes((n += value.length));
  }
  return h.digest();
}
