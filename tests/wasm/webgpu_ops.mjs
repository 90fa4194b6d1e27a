// Runs a WASI test program built by `make wasm` (test_webgpu_ops.wasm,
// test_train_webgpu.wasm) on a WebGPU device: the device in this thread (Node, the npm package `webgpu`:
// Dawn, on Mesa's llvmpipe through OpenGL ES unless GK_DAWN_BACKEND says
// otherwise), the program in a worker thread linked to it by
// wasm/webgpu.mjs. Exits with the program's status; with 1 and the reason
// when no adapter is found.
//
//   node tests/wasm/webgpu_ops.mjs build/wasm/tests/test_webgpu_ops.wasm [program args...]
import { Worker, isMainThread, workerData, parentPort } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { WebGpuHost, adapterDescription, nodeDevice, webgpuImports, workerLink } from '../../wasm/webgpu.mjs';

if (isMainThread) {
  const [wasm, ...args] = process.argv.slice(2);
  if (!wasm) {
    process.stderr.write('usage: node tests/wasm/webgpu_ops.mjs PROGRAM.wasm [args...]\n');
    process.exit(2);
  }
  const { device, adapter, reason } = await nodeDevice();
  if (!device) {
    process.stderr.write(`FAIL: no WebGPU device: ${reason}\n`);
    process.exit(1);
  }
  process.stdout.write(`WebGPU adapter: ${adapterDescription(adapter.info)} ` +
                       `(backend ${process.env.GK_DAWN_BACKEND || 'opengles'}, compatibility mode)\n`);
  const host = new WebGpuHost(device);
  const worker = new Worker(new URL(import.meta.url), { workerData: { wasm, args, link: host.linkData() } });
  host.serve(worker);
  // The program's status, once its thread has ended (exiting the process
  // while the worker still runs crashes Dawn's teardown).
  // (Not awaited at the top level: Dawn crashes while the module's
  // evaluation is pending.)
  let status = 1;
  worker.on('message', (m) => { if (m && m.exit !== undefined) status = m.exit; });
  worker.on('error', (e) => process.stderr.write(`FAIL: ${e.stack}\n`));
  worker.on('exit', () => {
    if (host.error) process.stderr.write(`device error: ${host.error}\n`);
    process.exit(status);
  });
} else {
  const { WASI } = await import('node:wasi');
  const { wasm, args, link } = workerData;
  const wasi = new WASI({ version: 'preview1', args: [wasm, ...args], env: {}, returnOnExit: true });
  let instance;
  const imports = {
    wasi_snapshot_preview1: wasi.wasiImport,
    gk_webgpu: webgpuImports(() => instance.exports.memory, workerLink(link, (m) => parentPort.postMessage(m))),
  };
  instance = await WebAssembly.instantiate(await WebAssembly.compile(readFileSync(wasm)), imports);
  const code = wasi.start(instance);
  parentPort.postMessage({ exit: code });
}
