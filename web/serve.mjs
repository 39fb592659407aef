#!/usr/bin/env node
// A static server for the lab pages and tests. Serves the repository root (so web/ and build/wasm-*/ are
// reachable) with the two headers that make a page cross-origin isolated, which SharedArrayBuffer (the shared
// wasm memory) requires. /fixtures/ maps to ../shared/fixtures (or $SOTTO_FIXTURES); /agent/ is the one-file
// voice agent (build/agent/, `npm run build:agent`) with /agent/models/ the repository's models/. Range requests
// are answered (206), so the agent's model downloads can resume.
//   node web/serve.mjs [PORT]     (or PORT=...; 0 picks a free port) -> prints the URL
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const fixturesRoot = resolve(process.env.SOTTO_FIXTURES ?? join(repoRoot, '..', 'shared', 'fixtures'));

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.wgsl': 'text/plain; charset=utf-8',
};

// Maps a URL path to a file under one of the two roots, refusing anything that escapes them.
function resolvePath(urlPath) {
  let path = normalize(decodeURIComponent(urlPath));
  if (path.startsWith('/agent/')) path = path.startsWith('/agent/models/') ? path.slice('/agent'.length) : `/build${path}`;
  const [root, rest] = path.startsWith('/fixtures/') ? [fixturesRoot, path.slice('/fixtures/'.length)] : [repoRoot, path];
  const file = resolve(root, `.${sep}${rest}`);
  return file === root || file.startsWith(root + sep) ? file : null;
}

export function startServer(port = 0, host = '127.0.0.1') {
  const server = createServer((req, res) => {
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-store',
    };
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/agent') {
      // The page's relative URLs (sw.js, models/) need the trailing slash.
      res.writeHead(301, { ...headers, Location: `/agent/${url.search}` });
      res.end();
      return;
    }
    let file = resolvePath(url.pathname);
    let stat;
    try {
      stat = file && statSync(file);
      if (stat?.isDirectory()) {
        file = join(file, 'index.html');
        stat = statSync(file);
      }
    } catch {
      stat = null;
    }
    if (!stat || !stat.isFile()) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' });
      res.end('not found\n');
      return;
    }
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
    if (range && (range[1] || range[2])) {
      const start = range[1] ? Number(range[1]) : Math.max(0, stat.size - Number(range[2]));
      const end = range[1] && range[2] ? Math.min(Number(range[2]), stat.size - 1) : stat.size - 1;
      if (start > end || start >= stat.size) {
        res.writeHead(416, { ...headers, 'Content-Range': `bytes */${stat.size}` });
        res.end();
        return;
      }
      res.writeHead(206, { ...headers, 'Content-Type': type, 'Content-Length': end - start + 1, 'Content-Range': `bytes ${start}-${end}/${stat.size}`, 'Accept-Ranges': 'bytes' });
      if (req.method === 'HEAD') res.end();
      else createReadStream(file, { start, end }).pipe(res);
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': type, 'Content-Length': stat.size, 'Accept-Ranges': 'bytes' });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  });
  return new Promise((resolveStart, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolveStart({ server, url: `http://${host}:${server.address().port}/` }));
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
  const { url } = await startServer(port);
  console.log(`sotto voice agent: ${url}agent/   (the lab: ${url}web/lab/)`);
}
