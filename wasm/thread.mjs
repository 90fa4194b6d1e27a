// One thread of gradkern-threads.wasm's CPU pool: a Web Worker (browsers) or
// a worker_threads Worker (Node) that wasm/gradkern.mjs starts for each
// thread beyond the caller's. It instantiates the module on the caller's
// shared memory, sets this instance's stack pointer and thread-local storage
// to the blocks the caller allocated for it, says it is ready and enters
// gkjs_thread_main, which waits for the pool's jobs and never returns
// (src/core/threads.c). The thread runs only kernel tasks: the module's
// imported functions (files, the trainer's progress, WebGPU) answer here
// with an error, since no task calls them.
//
// Message in (or Node's workerData): { module, memory, stackTop, tls }.
// Message out: { gkThreadReady: true }, or { gkThreadError: message }.
const isNode = typeof process !== 'undefined' && !!process.versions?.node;

function unavailableImports(module) {
  const imports = {};
  for (const { module: from, name, kind } of WebAssembly.Module.imports(module)) {
    if (kind !== 'function') continue;
    imports[from] ??= {};
    imports[from][name] = () => {
      throw new Error(`gradkern thread: ${from}.${name} is not available on a pool thread`);
    };
  }
  return imports;
}

function start({ module, memory, stackTop, tls }, post) {
  let instance;
  try {
    instance = new WebAssembly.Instance(module, { ...unavailableImports(module), env: { memory } });
    instance.exports.__stack_pointer.value = stackTop;
    instance.exports.__wasm_init_tls(tls);
  } catch (err) {
    post({ gkThreadError: err?.message ?? String(err) });
    return;
  }
  post({ gkThreadReady: true });
  instance.exports.gkjs_thread_main();
}

if (isNode) {
  const { workerData, parentPort } = await import('node:worker_threads');
  start(workerData, (m) => parentPort.postMessage(m));
} else {
  self.onmessage = (e) => start(e.data, (m) => self.postMessage(m));
}
