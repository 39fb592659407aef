// Files the one-file build carries inside the page (the VAD model); served separately here. build.mjs
// replaces this module with one that holds them (and sets up the inlined wasm and workers).
export function inlineAsset() {
  return null;
}
