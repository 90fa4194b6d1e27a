// gradkern's WebGPU kernels against TensorFlow.js's WebGPU backend
// (@tensorflow/tfjs-backend-webgpu), in one run on the same adapter: Dawn
// (npm `webgpu`) on its OpenGL ES backend over Mesa's llvmpipe, or
// GK_DAWN_BACKEND=vulkan. gradkern: build/wasm/tests/webgpu_ops_bench.wasm
// (make wasm) in a worker through tests/wasm/webgpu_ops.mjs; tfjs: the
// same ops, shapes and run counts on this thread. Each op: 3 warm-up runs,
// then N runs issued back to back and one wait (gradkern: synchronize;
// tfjs: reading one element of the last result, sliced on the GPU
// after it). f32 throughout. tfjs's
// backward passes are written with the ops its gradient functions use
// (its gradient registry does not load under Node's ES modules).
// --repeat N: each side's time is the best of N batches of 10 runs (on a
// real GPU, whose times over a few milliseconds of work vary from batch to
// batch). --large: 16x the elements (matrices of 1024 and 2048, rows of
// 4096 x 4096, 16M activations), for a real GPU, where the default sizes
// take about what a submit costs. --gpu-times: also gradkern's GPU time per
// run (the sum of its dispatches' timestamp-query times) next to its wall
// time, where the adapter has the
// feature (Dawn's Vulkan backend; not its OpenGL ES one: the table then
// says so); off by default, as timing costs.
//
//   make bench-webgpu [BENCH_ARGS='--gpu-times --large --repeat 5']   (or: cd bench/webgpu && npm ci && node bench_webgpu.mjs)
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const backend = process.env.GK_DAWN_BACKEND || 'opengles';
const gpuTimes = process.argv.includes('--gpu-times');
const large = process.argv.includes('--large');
const repeatAt = process.argv.indexOf('--repeat');
const repeats = repeatAt > 0 ? Math.max(1, Number(process.argv[repeatAt + 1]) || 1) : 1;

// gradkern first (its own process: a worker and a device of its own).
const out = execFileSync('node', [join(root, 'tests/wasm/webgpu_ops.mjs'),
                                  join(root, 'build/wasm/tests/webgpu_ops_bench.wasm'),
                                  ...(gpuTimes ? ['--timestamps'] : []), ...(large ? ['--large'] : []),
                                  '--repeat', String(repeats)],
                         { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
const gradkern = new Map(), gpu = new Map();
let adapter = '', noGpuTimes = '';
for (const line of out.split('\n')) {
  if (line.startsWith('WebGPU adapter:')) adapter = line.slice(16).trim();
  if (line.startsWith('# ')) noGpuTimes = line.slice(2);  // "webgpu: no timestamp-query on this adapter (...)"
  const m = /^(\S+) ([\d.]+)(?: ([\d.]+) (\d+))?$/.exec(line);
  if (m) gradkern.set(m[1], Number(m[2]));
  if (m?.[3]) gpu.set(m[1], `${Number(m[3]).toFixed(2)} (${m[4]} dispatch${m[4] === '1' ? '' : 'es'})`);
}

// tfjs on a device of the same adapter.
if (backend === 'opengles' && !process.env.EGL_PLATFORM) process.env.EGL_PLATFORM = 'surfaceless';
const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);
const dawn = create([`backend=${backend}`]);
const requestAdapter = dawn.requestAdapter.bind(dawn);
dawn.requestAdapter = (options = {}) => requestAdapter({ ...options, featureLevel: 'compatibility' });
globalThis.navigator = { gpu: dawn, userAgent: 'node' };
const tf = await import('@tensorflow/tfjs-core');
await import('@tensorflow/tfjs-backend-webgpu');
if (!(await tf.setBackend('webgpu'))) throw new Error('tfjs: the webgpu backend did not start');

// Waits for r (a result, or the first of several) and what was queued before
// it, reading back one element.
async function settle(r) {
  const first = tf.tidy(() => tf.slice(tf.reshape(Array.isArray(r) ? r[0] : r, [-1]), 0, 1));
  await first.data();
  first.dispose();
}

async function time(fn, runs) {
  for (let i = 0; i < 3; i++) {
    const r = tf.tidy(fn);
    await settle(r);
    tf.dispose(r);
  }
  let best = Infinity;
  for (let rep = 0; rep < repeats; rep++) {
    const t0 = performance.now();
    const results = [];
    for (let i = 0; i < runs; i++) results.push(tf.tidy(fn));
    await settle(results[runs - 1]);
    best = Math.min(best, (performance.now() - t0) / runs);
    tf.dispose(results);
  }
  return best;
}

const rand = (shape) => tf.randomUniform(shape, -0.5, 0.5);
const cases = [];
const side = large ? 4096 : 1024, flat = large ? 1 << 24 : 1 << 20, flatName = large ? '16M' : '1M';
const rows = `${side}x${side}`;
for (const s of [side / 4, side / 2]) {
  const a = rand([s, s]), b = rand([s, s]), dy = rand([s, s]);
  cases.push([`matmul_${s}`, () => tf.matMul(a, b)]);
  cases.push([`matmul_${s}_bwd`, () => [tf.matMul(dy, b, false, true), tf.matMul(a, dy, true, false)]]);
}
const x = rand([side, side]), dx = rand([side, side]), v = rand([flat]), dv = rand([flat]);
cases.push([`softmax_${rows}`, () => tf.softmax(x)]);
const sx = tf.softmax(x), sv = tf.sigmoid(v);
cases.push([`softmax_${rows}_bwd`, () => tf.mul(sx, tf.sub(dx, tf.sum(tf.mul(dx, sx), -1, true)))]);
cases.push([`relu_${flatName}`, () => tf.relu(v)]);
cases.push([`relu_${flatName}_bwd`, () => tf.mul(dv, tf.step(v))]);
cases.push([`sigmoid_${flatName}`, () => tf.sigmoid(v)]);
cases.push([`sigmoid_${flatName}_bwd`, () => tf.mul(dv, tf.mul(sv, tf.sub(1, sv)))]);

console.log(`adapter: ${adapter} (Dawn ${backend}, compatibility mode); ms per run, ${10} runs after 3 warm-up${repeats > 1 ? `, the best of ${repeats} batches` : ''}`);
if (gpuTimes && noGpuTimes) console.log(`gradkern GPU times: ${noGpuTimes}`);
const gpuColumn = gpuTimes && !noGpuTimes;
console.log(`| op | gradkern WebGPU |${gpuColumn ? ' gradkern GPU time |' : ''} tfjs WebGPU | gradkern / tfjs |`);
console.log(`|---|---|${gpuColumn ? '---|' : ''}---|---|`);
const gpuCell = (name) => (gpuColumn ? ` ${gpu.get(name) ?? '-'} |` : '');
for (const [name, fn] of cases) {
  const ms = await time(fn, 10);
  const g = gradkern.get(name);
  const ratio = g ? (g / ms).toFixed(2) : '-';
  console.log(`| ${name} | ${g?.toFixed(2) ?? '-'} |${gpuCell(name)} ${ms.toFixed(2)} | ${ratio} |`);
}
for (const name of [`layernorm_${rows}`, `layernorm_${rows}_bwd`])
  console.log(`| ${name} | ${gradkern.get(name)?.toFixed(2) ?? '-'} |${gpuCell(name)} (no op in tfjs) | - |`);
process.exit(0);
