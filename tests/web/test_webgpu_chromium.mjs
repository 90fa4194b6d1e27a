// The WebGPU backend in headless Chromium (SwiftShader's adapter, with
// --enable-unsafe-webgpu): tests/test_webgpu_ops.wasm with --quick (the
// first configuration of every op, forward and backward, contiguous)
// in a module Worker, its GPUDevice on the page, linked by wasm/webgpu.mjs
// exactly as in Node. The page is the project's server (web/serve.mjs,
// cross-origin isolated, so SharedArrayBuffer works). Fails with the reason
// when Chromium, puppeteer-core or a WebGPU adapter is missing.
//
//   node tests/web/test_webgpu_chromium.mjs [--root DIR] [families...]
import { dirname, join, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { launchChromium } from './browser.mjs';

const argv = process.argv.slice(2);
let root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
if (argv[0] === '--root') root = resolve(argv.splice(0, 2)[1]);
const program = join(root, 'build/wasm/tests/test_webgpu_ops.wasm');
if (!existsSync(program)) {
  console.log(`FAIL: ${program} is missing (make wasm)`);
  process.exit(1);
}

// The worker: a WASI command with the WASI functions the test program
// imports (output collected, arguments given, an empty environment) and the
// gk_webgpu imports.
const workerSource = (origin) => `
import { webgpuImports, workerLink } from '${origin}/wasm/webgpu.mjs';
self.onmessage = async ({ data }) => {
  let instance, out = '';
  const mem = () => new DataView(instance.exports.memory.buffer);
  const args = data.args.map((a) => new TextEncoder().encode(a + '\\0'));
  class Exit { constructor(code) { this.code = code; } }
  const wasi = {
    args_sizes_get(n, size) { mem().setUint32(n, args.length, true); mem().setUint32(size, args.reduce((s, a) => s + a.length, 0), true); return 0; },
    args_get(ptrs, buf) {
      for (const [i, a] of args.entries()) {
        mem().setUint32(ptrs + 4 * i, buf, true);
        new Uint8Array(instance.exports.memory.buffer).set(a, buf);
        buf += a.length;
      }
      return 0;
    },
    fd_write(fd, iovs, n, written) {
      let total = 0;
      for (let i = 0; i < n; i++) {
        const ptr = mem().getUint32(iovs + 8 * i, true), len = mem().getUint32(iovs + 8 * i + 4, true);
        out += new TextDecoder().decode(new Uint8Array(instance.exports.memory.buffer, ptr, len));
        total += len;
      }
      mem().setUint32(written, total, true);
      return 0;
    },
    environ_sizes_get(count, size) { mem().setUint32(count, 0, true); mem().setUint32(size, 0, true); return 0; },
    environ_get() { return 0; },
    fd_close() { return 0; },
    fd_seek() { return 70; },
    fd_fdstat_get(fd, stat) { mem().setUint8(stat, 2); return 0; },
    proc_exit(code) { throw new Exit(code); },
  };
  const link = workerLink(data.link, (m) => self.postMessage(m));
  try {  // a module that does not load (an import missing here) ends the test, not hangs it
    const module = await WebAssembly.compileStreaming(fetch(data.wasm));
    instance = await WebAssembly.instantiate(module, {
      wasi_snapshot_preview1: wasi, gk_webgpu: webgpuImports(() => instance.exports.memory, link) });
  } catch (e) {
    self.postMessage({ exit: 1, out: 'the test module did not load: ' + e.message });
    return;
  }
  let code = 0;
  try { instance.exports._start(); } catch (e) { if (e instanceof Exit) code = e.code; else { out += e.stack; code = 1; } }
  self.postMessage({ exit: code, out });
};`;

const { startServer } = await import(pathToFileURL(join(root, 'web', 'serve.mjs')).href);
const { server, url } = await startServer({ port: 0, root });
let browser, status = 1;
try {
  browser = await launchChromium({ webgpu: true });
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  await page.goto(url);
  const origin = new URL(url).origin;
  const result = await page.evaluate(async (origin, source, args) => {
    if (!crossOriginIsolated) return { error: 'the page is not cross-origin isolated' };
    if (!navigator.gpu) return { error: 'navigator.gpu is missing (no WebGPU in this browser)' };
    const { WebGpuHost, adapterDescription, requestDevice } = await import(`${origin}/wasm/webgpu.mjs`);
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { error: 'navigator.gpu.requestAdapter() gave no adapter' };
    const device = await requestDevice(adapter);
    const host = new WebGpuHost(device);
    const worker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })), { type: 'module' });
    host.serve(worker);
    const done = new Promise((resolve) => {
      worker.addEventListener('message', (e) => { if (e.data && e.data.exit !== undefined) resolve(e.data); });
      worker.addEventListener('error', (e) => resolve({ exit: 1, out: `worker error: ${e.message}` }));
    });
    worker.postMessage({ link: host.linkData(), wasm: `${origin}/build/wasm/tests/test_webgpu_ops.wasm`, args });
    const r = await done;
    return { ...r, adapter: adapterDescription(adapter.info),
             deviceError: host.error };
  }, origin, workerSource(origin), ['test_webgpu_ops', '--quick', ...argv]);
  if (result.error) {
    console.log(`FAIL: ${result.error}`);
  } else {
    console.log(`WebGPU adapter in Chromium: ${result.adapter}`);
    process.stdout.write(result.out);
    if (result.deviceError) console.log(`device error: ${result.deviceError}`);
    const ran = /configurations x layouts: (\d+)/.exec(result.out);
    if (result.exit === 0 && ran && Number(ran[1]) > 0) status = 0;
    else console.log(`FAIL: the test program exited with ${result.exit}${ran ? '' : ' and ran no configuration'}`);
  }
  for (const e of errors) console.log(`page error: ${e}`);
} catch (err) {
  console.log(`FAIL: ${err.stack}`);
} finally {
  await browser?.close();
  server.close();
}
process.exit(status);
