// Threads need SharedArrayBuffer, which needs COOP/COEP headers. web/serve.mjs sends them; on a plain static
// host the page's service worker (sw.js beside it) adds them, which takes one reload after it is installed.
export async function ensureIsolation({ onError = () => {} } = {}) {
  if (globalThis.crossOriginIsolated) return true;
  if (!('serviceWorker' in navigator) || !window.isSecureContext) return false;
  const key = 'sotto-agent-sw-reload';
  try {
    const reg = await navigator.serviceWorker.register(new URL('sw.js', location.href).href);
    if (navigator.serviceWorker.controller && sessionStorage.getItem(key)) return false;  // it did not help
    await navigator.serviceWorker.ready;
    if (!reg.active) return false;
    sessionStorage.setItem(key, '1');
    location.reload();
    return new Promise(() => {});
  } catch (e) {
    onError(e);
    return false;
  }
}
