// The training page's worker: loads gradkern's WebAssembly module and runs
// `gradkern train` (and `gradkern sample`) in it (a synchronous call, hence off the page's thread),
// posting every step, evaluation and line of output to the page. With a
// WebGPU device on the page, the module is linked to it (wasm/webgpu.mjs:
// the module's WebGPU calls are posted to the page, which runs them), and
// `--device webgpu` in the options trains on it.
//
// Page -> worker: { type: 'init', webgpu: WebGpuHost.linkData() | null }   (first, once)
//                 { type: 'train', args: [...options of gradkern train],
//                   files: { 'NAME': Uint8Array } (the --data and --resume files),
//                   checkpoint: 'NAME.safetensors', stop: SharedArrayBuffer | null }
//                 { type: 'sample', args: [...options of gradkern sample but --checkpoint],
//                   checkpoint: ArrayBuffer (a text model's safetensors file) }
// Worker -> page: { type: 'ready', simd, threads, webgpu: { available, reason, device } }
//                 { type: 'step', step, steps, loss, lr, seconds }
//                 { type: 'eval', step, loss, accuracy }
//                 { type: 'output', text }
//                 { type: 'done', exitCode, seconds, checkpoint: ArrayBuffer | null }
//                 { type: 'sampled', exitCode, text (stdout), stderr }
//                 { type: 'error', message }
//                 and the WebGPU link's batches (gkWebgpu: true), for the page's WebGpuHost
// Setting stop[0] to 1 ends the run after the current step (it then
// evaluates and writes the checkpoint, as --stop-after does).
import { load, hasSimd } from '../wasm/gradkern.mjs';
import { workerLink } from '../wasm/webgpu.mjs';

const post = (message, transfer) => self.postMessage(message, transfer ?? []);
const failed = (err) => post({ type: 'error', message: err?.message ?? String(err) });

let gkPromise = null;

async function init({ webgpu }) {
  const gk = await load({ webgpu: webgpu ? workerLink(webgpu, post) : null });
  const { available, reason, device } = gk.backends().find((b) => b.name === 'webgpu');
  post({ type: 'ready', simd: hasSimd(), build: gk.build, threads: gk.getNumThreads(),
         webgpu: { available, reason, device } });
  return gk;
}

function train(gk, { args, files, checkpoint, stop }) {
  const stopFlag = stop ? new Int32Array(stop) : null;
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;
  const result = gk.train({
    args: [...args, '--checkpoint', checkpoint],
    files,
    onStep: ({ step, steps, loss, lr }) => {
      post({ type: 'step', step, steps, loss, lr, seconds: seconds() });
      return stopFlag !== null && Atomics.load(stopFlag, 0) !== 0;
    },
    onEval: ({ step, loss, accuracy }) => post({ type: 'eval', step, loss, accuracy }),
    onOutput: (text) => post({ type: 'output', text }),
  });
  const bytes = result.files[checkpoint] ?? result.files['/' + checkpoint] ?? null;
  const buffer = bytes ? bytes.slice().buffer : null;
  post({ type: 'done', exitCode: result.exitCode, seconds: seconds(), checkpoint: buffer }, buffer ? [buffer] : []);
}

// `gradkern sample` on the checkpoint's bytes (the text on stdout).
function sample(gk, { args, checkpoint }) {
  const name = 'sample.safetensors';
  const result = gk.sample({ args: ['--checkpoint', name, ...args], files: { [name]: new Uint8Array(checkpoint) } });
  post({ type: 'sampled', exitCode: result.exitCode, text: result.stdout, stderr: result.stderr });
}

self.onmessage = async ({ data }) => {
  try {
    if (data?.type === 'init' && !gkPromise) {
      gkPromise = init(data);
      await gkPromise;
    } else if (data?.type === 'train') {
      train(await gkPromise, data);
    } else if (data?.type === 'sample') {
      sample(await gkPromise, data);
    }
  } catch (err) {
    failed(err);
  }
};
