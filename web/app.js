// The training page: runs `gradkern train` (selective copying or a file's
// bytes; the default Mamba or a LLaMA of its size) in a worker
// (train-worker.js) and shows its progress, the loss on a live plot, the
// held-out accuracy, and offers the checkpoint for download. "continue from"
// takes a checkpoint back (the next Train resumes it); the sampler continues
// a prompt with a text model (the last run's, else the one taken back).
// The backend: WebGPU when the browser gives an adapter (the device is held
// here, and the worker's module is linked to it: wasm/webgpu.mjs), else
// WebAssembly on the CPU; chosen automatically, shown, and the form's
// backend control picks another.
//
// URL parameters fill the form: ?model=mamba|llama&task=copy|text&steps=N
// &seed=S&eval-every=K&backend=webgpu|wasm (the text task needs a file
// chosen in the form).
// window.gradkernPage holds the run's state for scripts (the browser test):
// { state: 'loading'|'ready'|'training'|'done'|'error', runs (Train presses),
//   backend: 'webgpu'|'wasm' (chosen; of the run, once it started),
//   webgpu: { available, reason, device }, losses: [{step, loss}],
//   evals: [{step, loss, accuracy}], exitCode, seconds, error, checkpointName,
//   resumed (the file name a run continued, or null),
//   samples: [{prompt, tokens, exitCode, text, stderr}] }.
import { WebGpuHost, requestDevice } from '../wasm/webgpu.mjs';

const $ = (id) => document.getElementById(id);
const CHECKPOINT = 'mamba.safetensors';
// The loss of a uniform guess: over the 8 values, over the 256 bytes.
const CHANCE = { copy: [Math.log(8), 'chance (ln 8)'], text: [Math.log(256), 'uniform (ln 256)'] };

const page = {
  state: 'loading', runs: 0, backend: null, webgpu: null, losses: [], evals: [], exitCode: null, seconds: 0,
  error: null, checkpointName: null, resumed: null, samples: [],
};
const BACKEND_NAMES = { webgpu: 'WebGPU', wasm: 'WebAssembly' };
window.gradkernPage = page;
let steps = 1;
let task = 'copy'; // of the run shown
let model = 'mamba'; // of the run shown
let checkpoint = null; // Uint8Array of the last finished run
let stopFlag = null; // Int32Array over a SharedArrayBuffer (cross-origin isolated pages only)
let stateBeforeSampling = 'ready'; // the state a finished sample returns to

function setState(state) {
  page.state = state;
  document.body.dataset.state = state;
  $('train').disabled = state !== 'ready' && state !== 'done' && state !== 'error';
  $('backend').disabled = page.webgpu === null || state === 'training';
  $('stop').disabled = state !== 'training' || stopFlag === null;
  $('download').disabled = checkpoint === null || state === 'training';
  $('sample').disabled = state === 'training' || state === 'sampling' || samplerSource() === null;
  $('sampler').hidden = samplerSource() === null;
}

// The model the sampler continues text with: the last run's checkpoint when
// it learned text, else the one chosen in "continue from"; null: none.
function samplerSource() {
  if (checkpoint !== null && task === 'text') return { name: page.checkpointName, bytes: checkpoint };
  const file = $('resume').files[0];
  return file ? { name: file.name, file } : null;
}
$('resume').addEventListener('change', () => setState(page.state));

function fail(message) {
  page.error = message;
  $('error').textContent = message;
  setState('error');
}

// Fill the form from the URL's parameters (same names as the inputs).
for (const [name, value] of new URLSearchParams(location.search)) {
  const input = $(name);
  if ((input instanceof HTMLInputElement && input.type !== 'file') || input instanceof HTMLSelectElement)
    input.value = value;
}
const showDataInput = () => { $('data-label').hidden = $('task').value !== 'text'; };
$('task').addEventListener('change', showDataInput);
showDataInput();

const formatTime = (s) => (s < 60 ? `${s.toFixed(0)} s` : `${Math.floor(s / 60)} min ${(s % 60).toFixed(0)} s`);

// ----------------------------------------------------------------- the plot

let plotQueued = false;
function queuePlot() {
  if (plotQueued) return;
  plotQueued = true;
  requestAnimationFrame(() => {
    plotQueued = false;
    drawPlot();
  });
}

// Training loss by step (line), held-out loss (dots) and chance (dashed).
function drawPlot() {
  const canvas = $('plot');
  const ctx = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, px = W / canvas.clientWidth || 2;
  const left = 64 * px, right = 16 * px, top = 16 * px, bottom = 40 * px;
  const [chanceLoss, chanceLabel] = CHANCE[task];
  const yMax = Math.max(2.4, ...page.losses.map((p) => p.loss).filter(Number.isFinite));
  const x = (step) => left + (step / steps) * (W - left - right);
  const y = (loss) => top + (1 - Math.min(loss, yMax) / yMax) * (H - top - bottom);

  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, H);
  ctx.font = `${12 * px}px system-ui, sans-serif`;
  ctx.lineWidth = px;
  ctx.strokeStyle = '#e4e7ee';
  ctx.fillStyle = '#4a5366';
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let v = 0; v <= yMax + 1e-9; v += yMax > 4 ? 1 : 0.5) {
    ctx.beginPath();
    ctx.moveTo(left, y(v));
    ctx.lineTo(W - right, y(v));
    ctx.stroke();
    ctx.fillText(v.toFixed(1), left - 6 * px, y(v));
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (let i = 0; i <= 5; i++) {
    const step = Math.round((steps * i) / 5);
    ctx.fillText(String(step), x(step), H - bottom + 6 * px);
  }
  ctx.fillText('step', (left + W - right) / 2, H - bottom + 22 * px);
  ctx.save();
  ctx.translate(16 * px, (top + H - bottom) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText('loss', 0, -6 * px);
  ctx.restore();

  ctx.setLineDash([6 * px, 4 * px]);
  ctx.strokeStyle = '#8a93a6';
  ctx.beginPath();
  ctx.moveTo(left, y(chanceLoss));
  ctx.lineTo(W - right, y(chanceLoss));
  ctx.stroke();
  ctx.setLineDash([]);

  ctx.strokeStyle = '#2563eb';
  ctx.lineWidth = 1.5 * px;
  ctx.beginPath();
  page.losses.forEach((p, i) => (i ? ctx.lineTo(x(p.step), y(p.loss)) : ctx.moveTo(x(p.step), y(p.loss))));
  ctx.stroke();

  ctx.fillStyle = '#ea580c';
  for (const e of page.evals) {
    ctx.beginPath();
    ctx.arc(x(e.step), y(e.loss), 4 * px, 0, 2 * Math.PI);
    ctx.fill();
  }

  const legend = [['#2563eb', 'training loss'], ['#ea580c', 'held-out loss'], ['#8a93a6', chanceLabel]];
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  // Bottom left: below the loss early in a run, left of it late.
  legend.forEach(([color, label], i) => {
    const ly = H - bottom - (14 + 18 * (legend.length - 1 - i)) * px;
    ctx.fillStyle = color;
    ctx.fillRect(left + 14 * px, ly - 2 * px, 18 * px, 4 * px);
    ctx.fillStyle = '#1d2330';
    ctx.fillText(label, left + 38 * px, ly);
  });
}

// --------------------------------------------------------------- the worker

const worker = new Worker(new URL('train-worker.js', import.meta.url), { type: 'module' });
worker.onerror = (event) => fail(`the training worker failed: ${event.message ?? 'could not load it'}`);

// A WebGPU device for the worker's module: { link } (WebGpuHost.linkData()),
// or { link: null, reason }.
async function linkWebgpu() {
  if (!navigator.gpu) return { link: null, reason: 'this browser has no WebGPU (navigator.gpu)' };
  if (!window.crossOriginIsolated)
    return { link: null, reason: 'the page is not cross-origin isolated (the link to the device needs SharedArrayBuffer)' };
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { link: null, reason: 'navigator.gpu.requestAdapter() gave no adapter' };
    const host = new WebGpuHost(await requestDevice(adapter));
    host.serve(worker);
    return { link: host.linkData() };
  } catch (err) {
    return { link: null, reason: `WebGPU: ${err.message}` };
  }
}

// The backend control after the module loaded: WebGPU when it has a device
// (unless the URL asks for wasm), else WebAssembly.
function chooseBackend(webgpu) {
  page.webgpu = { ...webgpu, reason: webgpu.available ? '' : gpu.reason ?? webgpu.reason };
  const option = $('backend').querySelector('option[value=webgpu]');
  option.disabled = !webgpu.available;
  option.textContent = webgpu.available ? 'WebGPU' : 'WebGPU (not available)';
  const asked = new URLSearchParams(location.search).get('backend');
  $('backend').value = webgpu.available && asked !== 'wasm' ? 'webgpu' : 'wasm';
  showBackend();
}

function showBackend() {
  page.backend = $('backend').value;
  $('backend-note').textContent = page.backend === 'webgpu'
    ? `training on the GPU through WebGPU: ${page.webgpu.device}`
    : `training on the CPU in WebAssembly${page.webgpu.available ? '' : ` (WebGPU is not available: ${page.webgpu.reason})`}`;
}
$('backend').addEventListener('change', showBackend);

worker.onmessage = ({ data }) => {
  switch (data.type) {
    case 'ready':
      $('env').textContent = `WebAssembly SIMD: ${data.simd ? 'yes' : 'no'} · build: ${data.build} · ` +
        `threads: ${data.threads} · ` +
        `cross-origin isolated: ${window.crossOriginIsolated ? 'yes' : 'no (the Stop button and WebGPU need it)'} · ` +
        `WebGPU: ${data.webgpu.available ? data.webgpu.device : 'no'}`;
      chooseBackend(data.webgpu);
      setState('ready');
      $('status').textContent = 'ready';
      break;
    case 'step': {
      page.losses.push({ step: data.step, loss: data.loss });
      steps = data.steps;
      const bar = $('progress');
      bar.max = data.steps;
      bar.value = data.step;
      const rate = data.step / Math.max(data.seconds, 1e-9);
      $('status').textContent = `step ${data.step}/${data.steps} · loss ${data.loss.toFixed(4)} · ` +
        `${rate.toFixed(1)} steps/s · ETA ${formatTime((data.steps - data.step) / rate)}`;
      queuePlot();
      break;
    }
    case 'eval': {
      page.evals.push({ step: data.step, loss: data.loss, accuracy: data.accuracy });
      const row = $('evals').insertRow();
      const accuracy = Number.isFinite(data.accuracy) ? `${(100 * data.accuracy).toFixed(1)}%`
        : `- (${(data.loss / Math.LN2).toFixed(3)} bits per byte)`;
      for (const text of [String(data.step), data.loss.toFixed(4), accuracy])
        row.insertCell().textContent = text;
      queuePlot();
      break;
    }
    case 'output':
      $('log').textContent += data.text;
      break;
    case 'done':
      page.exitCode = data.exitCode;
      page.seconds = data.seconds;
      // A failed run leaves the last run's file in the module: never offer it.
      checkpoint = data.exitCode === 0 && data.checkpoint ? new Uint8Array(data.checkpoint) : null;
      if (data.exitCode !== 0) return fail(`gradkern train exited with status ${data.exitCode}:\n${$('log').textContent}`);
      if (!checkpoint) return fail('the run wrote no checkpoint');
      {
        const last = page.evals.at(-1);
        const lastStep = page.losses.at(-1)?.step ?? 0;
        page.checkpointName = `gradkern-${model}-${task}-seed${$('seed').value}-step${lastStep}.safetensors`;
        const figure = !last ? '' : Number.isFinite(last.accuracy)
          ? `, held-out accuracy ${(100 * last.accuracy).toFixed(1)}% (loss ${last.loss.toFixed(4)})`
          : `, held-out loss ${last.loss.toFixed(4)} (${(last.loss / Math.LN2).toFixed(3)} bits per byte)`;
        $('summary').textContent = `done: ${lastStep} steps on ${BACKEND_NAMES[page.backend]} in ` +
          `${formatTime(data.seconds)}${figure}`;
        $('status').textContent = `done: step ${lastStep}/${steps}`;
      }
      setState('done');
      break;
    case 'sampled': {
      const last = page.samples.at(-1);
      Object.assign(last, { exitCode: data.exitCode, text: data.text, stderr: data.stderr });
      $('sample-output').hidden = false;
      $('sample-output').textContent = data.exitCode === 0 ? last.prompt + data.text
        : `gradkern sample exited with status ${data.exitCode}:\n${data.stderr}`;
      setState(stateBeforeSampling);
      break;
    }
    case 'error':
      fail(data.message);
      break;
  }
};

// ------------------------------------------------------------------ controls

$('controls').addEventListener('submit', async (event) => {
  event.preventDefault();
  page.runs++;
  const value = (id) => $(id).value.trim();
  for (const id of ['steps', 'seed', 'eval-every'])
    if (!/^\d+$/.test(value(id))) return fail(`${id}: '${value(id)}' is not a whole number`);
  const file = $('data').files[0];
  if (value('task') === 'text' && !file) return fail('the text task learns a file: choose one');
  setState('training'); // before reading the file: the run has begun
  const args = ['--steps', value('steps'), '--seed', value('seed'), '--eval-every', value('eval-every')];
  if (page.backend === 'webgpu') args.push('--device', 'webgpu');
  if (value('model') === 'llama') args.push('--model', 'llama', '--heads', '4', '--kv-heads', '2');
  const files = {};
  if (value('task') === 'text') {
    files['data.txt'] = new Uint8Array(await file.arrayBuffer());
    args.push('--task', 'text', '--data', 'data.txt');
  }
  const resume = $('resume').files[0];
  page.resumed = resume ? resume.name : null;
  if (resume) {
    files['resume.safetensors'] = new Uint8Array(await resume.arrayBuffer());
    args.push('--resume', 'resume.safetensors', '--allow-changes');
  }
  task = value('task');
  model = value('model');
  page.losses = [];
  page.evals = [];
  page.error = null;
  page.exitCode = null;
  checkpoint = null;
  steps = Number(value('steps'));
  $('evals').replaceChildren();
  $('log').textContent = '';
  $('error').textContent = '';
  $('summary').textContent = '';
  $('progress').value = 0;
  $('status').textContent = 'starting';
  stopFlag = window.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;
  setState('training'); // again: the Stop button needs the flag
  queuePlot();
  worker.postMessage({
    type: 'train',
    args,
    files,
    checkpoint: CHECKPOINT,
    stop: stopFlag ? stopFlag.buffer : null,
  });
});

$('sampler').addEventListener('submit', async (event) => {
  event.preventDefault();
  const source = samplerSource();
  const tokens = $('tokens').value.trim(), temperature = $('temperature').value.trim();
  if (!source) return;
  if (!/^\d+$/.test(tokens) || Number(tokens) < 1) return fail(`bytes: '${tokens}' is not a whole number from 1`);
  const bytes = source.bytes ?? new Uint8Array(await source.file.arrayBuffer());
  const prompt = $('prompt').value;
  page.samples.push({ prompt, tokens: Number(tokens), exitCode: null, text: null, stderr: null });
  $('sample-source').textContent = `with ${source.name}`;
  stateBeforeSampling = page.state;
  setState('sampling');
  const copy = bytes.slice().buffer;
  worker.postMessage({
    type: 'sample', checkpoint: copy,
    args: ['--prompt', prompt, '--tokens', tokens, '--temperature', temperature || '0.8', '--seed', $('seed').value.trim() || '1'],
  }, [copy]);
});

$('stop').addEventListener('click', () => {
  if (stopFlag) Atomics.store(stopFlag, 0, 1);
  $('stop').disabled = true;
  $('status').textContent += ' · stopping';
});

$('download').addEventListener('click', () => {
  if (!checkpoint) return;
  const url = URL.createObjectURL(new Blob([checkpoint], { type: 'application/octet-stream' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = page.checkpointName;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
});

setState('loading');
$('status').textContent = 'loading the WebAssembly module';
drawPlot();
const gpu = await linkWebgpu();
worker.postMessage({ type: 'init', webgpu: gpu.link });
