// English text -> Kokoro phonemes in the page (or Node): the C++ G2P (src/text/g2p.h) on a wasm instance of
// its own, on the calling thread (a 1,000-word text takes about a millisecond natively: no worker round trip
// is worth it; in the page the TTS worker calls it).
//
//   const g2p = await G2p.load('/models/g2p-en-us.bin');   // or a File/Blob, or (Node) a path; en-gb likewise
//   g2p.phonemize('Dr. Smith paid $12.50.')               // -> 'dˈɑktəɹ smˈɪθ pˈAd twˈɛlv dˈɑləɹz ...'
//   g2p.sentences(text)                                   // -> [{ text, phonemes }], each <= 510 phonemes
//   g2p.lang                                              // 'en-us' | 'en-gb' (from the lexicon file)
//   g2p.lexiconMs                                         // time the engine took to take the lexicon in
//   g2p.dispose()
import { createSharedMemory, hasRelaxedSimd, instantiate, isNode, readCString } from './runtime.js';

const WASM_URLS = {
  simd128: new URL('../build/wasm-simd128/sotto.wasm', import.meta.url),
  relaxed: new URL('../build/wasm-relaxed/sotto.wasm', import.meta.url),
};

async function readBytes(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { bytes: new Uint8Array(await source.arrayBuffer()), name: source.name ?? 'blob' };
  const url = source instanceof URL ? source : null;
  if (isNode && ((typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)) || url?.protocol === 'file:')) {
    const { readFile } = await import('node:fs/promises');
    return { bytes: new Uint8Array(await readFile(source)), name: String(source) };
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`sotto: ${source}: HTTP ${response.status}`);
  return { bytes: new Uint8Array(await response.arrayBuffer()), name: String(source) };
}

export class G2p {
  #wasm;
  #memory;
  #handle;

  // source: the lexicon (models/g2p-en-us.bin or g2p-en-gb.bin, made by scripts/get-models.sh g2p).
  // Options: variant ('simd128' | 'relaxed'), wasmUrl (another build of the module).
  static async load(source, { variant, wasmUrl } = {}) {
    const chosen = variant ?? (!isNode && hasRelaxedSimd() ? 'relaxed' : 'simd128');
    if (!WASM_URLS[chosen]) throw new Error(`sotto: unknown wasm variant '${chosen}'`);
    const url = wasmUrl ? new URL(wasmUrl, isNode ? `file://${process.cwd()}/` : location.href) : WASM_URLS[chosen];
    const [{ bytes: module }, { bytes, name }] = await Promise.all([readBytes(url), readBytes(source)]);
    const memory = createSharedMemory();
    const wasm = await instantiate(await WebAssembly.compile(module), memory, 'g2p');
    wasm.__wasm_call_ctors();
    const ptr = wasm.sotto_alloc(bytes.length);
    if (!ptr) throw new Error(`sotto: cannot allocate ${bytes.length} bytes in wasm memory for ${name}`);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    const t0 = performance.now();
    const handle = wasm.sotto_g2p_load(ptr, bytes.length);  // copies and checks the image
    const lexiconMs = performance.now() - t0;
    wasm.sotto_free(ptr);
    if (!handle) {
      const e = wasm.sotto_g2p_error();
      const message = readCString(memory, e);
      wasm.sotto_free(e);
      throw new Error(`sotto: ${name}: ${message}`);
    }
    const g2p = new G2p(wasm, memory, handle);
    g2p.lexiconMs = lexiconMs;
    return g2p;
  }

  constructor(wasm, memory, handle) {
    this.#wasm = wasm;
    this.#memory = memory;
    this.#handle = handle;
    this.lang = wasm.sotto_g2p_lang(handle) === 1 ? 'en-gb' : 'en-us';
  }

  // { phonemes, sentences: [{ text, phonemes }], words: [{ text, phonemes, source }] } for the text.
  run(text) {
    return JSON.parse(this.json(text));
  }

  // The same as JSON text, byte for byte what `sotto phonemize --json` prints after its "lang" member.
  // `parts` (1 phonemes, 2 sentences, 4 words) leaves out what is not wanted; each is a pass over the text.
  json(text, parts = 7) {
    if (!this.#handle) throw new Error('sotto: the G2P was disposed');
    const bytes = text instanceof Uint8Array ? text : new TextEncoder().encode(String(text));  // raw bytes pass as they are
    const ptr = this.#wasm.sotto_alloc(bytes.length);
    if (!ptr) throw new Error(`sotto: cannot allocate ${bytes.length} bytes for the text`);
    new Uint8Array(this.#memory.buffer, ptr, bytes.length).set(bytes);
    const out = this.#wasm.sotto_g2p_phonemize(this.#handle, ptr, bytes.length, parts);
    this.#wasm.sotto_free(ptr);
    const json = readCString(this.#memory, out);
    this.#wasm.sotto_free(out);
    return json;
  }

  phonemize(text) {
    return JSON.parse(this.json(text, 1)).phonemes;
  }

  sentences(text) {
    return JSON.parse(this.json(text, 2)).sentences;
  }

  dispose() {
    if (this.#handle) this.#wasm.sotto_g2p_free(this.#handle);
    this.#handle = 0;
  }
}
