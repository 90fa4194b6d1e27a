#!/usr/bin/env node
// The static server of gradkern's training page: serves web/, wasm/ and
// build/wasm/ of the directory above this file (the source tree, or an
// installed npm package, which has the same layout), with the headers that
// make the page cross-origin isolated (COOP same-origin, COEP require-corp),
// so that it may use SharedArrayBuffer and shared WebAssembly memory.
//
//   node web/serve.mjs [--port N] [--host ADDR] [--root DIR]
//
// The page is at /web/ (/ redirects there). Prints "serving
// http://ADDR:PORT/web/" once it listens. `startServer` does the
// same from JavaScript (the browser test uses it).
import { createServer } from 'node:http';
import { existsSync, realpathSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// Only these directories of the root are served; everything else is 404.
const servedDirs = ['web', 'wasm', join('build', 'wasm')];

const contentTypes = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.ts': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

const isolationHeaders = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

// The file that URL path `urlPath` names under `root`, or null when it is
// outside the served directories (including by "..", encoded or not).
function servedFile(root, urlPath) {
  let path;
  try {
    path = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (path.endsWith('/')) path += 'index.html';
  if (path.includes('\0')) return null;
  const file = resolve(root, '.' + path);
  for (const dir of servedDirs) {
    if (file.startsWith(resolve(root, dir) + sep)) return file;
  }
  return null;
}

async function handle(root, req, res) {
  const send = (status, body, type = 'text/plain; charset=utf-8') => {
    res.writeHead(status, { ...isolationHeaders, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'only GET and HEAD\n');
  const url = new URL(req.url, 'http://localhost');
  // The page is web/index.html; its scripts are beside it, under /web/.
  if (url.pathname === '/' || url.pathname === '/index.html') {
    res.writeHead(302, { ...isolationHeaders, Location: '/web/' + url.search, 'Content-Length': 0 });
    return res.end();
  }
  const file = servedFile(root, url.pathname);
  if (!file) return send(404, `not served: ${url.pathname}\n`);
  let info;
  try {
    info = await stat(file);
  } catch {
    return send(404, `no such file: ${url.pathname}\n`);
  }
  if (!info.isFile()) return send(404, `not a file: ${url.pathname}\n`);
  const body = await readFile(file);
  send(200, body, contentTypes[extname(file)] ?? 'application/octet-stream');
}

/// Starts the server on `host`:`port` (port 0: any free port) serving
/// `root` (default: the directory above web/). Resolves to
/// { server, url } once it listens (url: the page's address).
export function startServer({ port = 8080, host = '127.0.0.1', root = packageRoot } = {}) {
  const server = createServer((req, res) => {
    handle(root, req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500, { ...isolationHeaders, 'Content-Type': 'text/plain' });
      res.end(`server error: ${err.message}\n`);
    });
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: bound } = server.address();
      const shownHost = host.includes(':') ? `[${host}]` : host;
      resolvePromise({ server, url: `http://${shownHost}:${bound}/web/` });
    });
  });
}

const usage = 'usage: node web/serve.mjs [--port N] [--host ADDR] [--root DIR]\n' +
  '  --port N     port to listen on, 0..65535 (default 8080; 0 picks a free one)\n' +
  '  --host ADDR  address to listen on (default 127.0.0.1)\n' +
  '  --root DIR   directory holding web/, wasm/ and build/wasm/ (default: the one above this file)\n';

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(usage);
      process.exit(0);
    }
    if (!['--port', '--host', '--root'].includes(arg)) throw new Error(`unknown option '${arg}'`);
    const value = argv[++i];
    if (value === undefined) throw new Error(`${arg} needs a value`);
    if (arg === '--port') {
      if (!/^\d+$/.test(value) || Number(value) > 65535) throw new Error(`--port '${value}' is not a port (0..65535)`);
      opts.port = Number(value);
    } else if (arg === '--host') {
      opts.host = value;
    } else {
      opts.root = resolve(value);
    }
  }
  return opts;
}

// Run as a program (directly or through npm's bin link), not imported.
const runAsProgram = () => {
  try {
    return import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
};

if (runAsProgram()) {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`serve.mjs: ${err.message}\n${usage}`);
    process.exit(2);
  }
  const root = opts.root ?? packageRoot;
  if (!existsSync(join(root, 'web', 'index.html'))) {
    process.stderr.write(`serve.mjs: --root '${root}' has no web/index.html\n`);
    process.exit(2);
  }
  if (!existsSync(join(root, 'build', 'wasm', 'gradkern.wasm')))
    process.stderr.write(`serve.mjs: note: ${join(root, 'build', 'wasm', 'gradkern.wasm')} is missing ` +
                         '(make wasm builds it); the page cannot train without it\n');
  startServer(opts).then(
    ({ url }) => console.log(`serving ${url}`),
    (err) => {
      process.stderr.write(`serve.mjs: cannot listen: ${err.message}\n`);
      process.exit(1);
    });
}
