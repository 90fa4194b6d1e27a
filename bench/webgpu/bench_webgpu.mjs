// gradkern's WebGPU kernels against TensorFlow.js's WebGPU backend
// (@tensorflow/tfjs-backend-webgpu), in one run on the same adapter: Dawn
// (npm `webgpu`) on its OpenGL ES backend over Mesa's llvmpipe, or
// GK_DAWN_BACKEND=vulkan. gradkern: build/wasm/tests/webgpu_ops_bench.wasm
// (make wasm) in a worker through tests/wasm/webgpu_ops.mjs; tfjs: the
// same ops, shapes and run counts on this thread. Each op: 3 warm-up runs,
// then N runs issued back to back and one wait (gradkern: synchronize;
// tfjs: reading the last result, 4 MB at most). f32 throughout. tfjs's
// backward passes are written with the ops its gradient functions use
// (its gradient registry does not load under Node's ES modules).
// --gpu-times: also gradkern's GPU time per run (the sum of its dispatches'
// timestamp-query times) next to its wall time, where the adapter has the
// feature (Dawn's Vulkan backend; not its OpenGL ES one: the table then
// says so); off by default, as timing costs.
//
//   make bench-webgpu [BENCH_ARGS=--gpu-times]   (or: cd bench/webgpu && npm ci && node bench_webgpu.mjs)
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const backend = process.env.GK_DAWN_BACKEND || 'opengles';
const gpuTimes = process.argv.includes('--gpu-times');

// gradkern first (its own process: a worker and a device of its own).
const out = execFileSync('node', [join(root, 'tests/wasm/webgpu_ops.mjs'),
                                  join(root, 'build/wasm/tests/webgpu_ops_bench.wasm'),
                                  ...(gpuTimes ? ['--timestamps'] : [])],
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

async function time(fn, runs) {
  for (let i = 0; i < 3; i++) {
    const r = tf.tidy(fn);
    await (Array.isArray(r) ? r[0] : r).data();
    tf.dispose(r);
  }
  const t0 = performance.now();
  const results = [];
  for (let i = 0; i < runs; i++) results.push(tf.tidy(fn));
  const last = results[runs - 1];
  await (Array.isArray(last) ? last[0] : last).data();
  const ms = (performance.now() - t0) / runs;
  tf.dispose(results);
  return ms;
}

const rand = (shape) => tf.randomUniform(shape, -0.5, 0.5);
const cases = [];
for (const s of [256, 512]) {
  const a = rand([s, s]), b = rand([s, s]), dy = rand([s, s]);
  cases.push([`matmul_${s}`, () => tf.matMul(a, b)]);
  cases.push([`matmul_${s}_bwd`, () => [tf.matMul(dy, b, false, true), tf.matMul(a, dy, true, false)]]);
}
const x = rand([1024, 1024]), dx = rand([1024, 1024]), v = rand([1 << 20]), dv = rand([1 << 20]);
cases.push(['softmax_1024x1024', () => tf.softmax(x)]);
const sx = tf.softmax(x), sv = tf.sigmoid(v);
cases.push(['softmax_1024x1024_bwd', () => tf.mul(sx, tf.sub(dx, tf.sum(tf.mul(dx, sx), -1, true)))]);
cases.push(['relu_1M', () => tf.relu(v)]);
cases.push(['relu_1M_bwd', () => tf.mul(dv, tf.step(v))]);
cases.push(['sigmoid_1M', () => tf.sigmoid(v)]);
cases.push(['sigmoid_1M_bwd', () => tf.mul(dv, tf.mul(sv, tf.sub(1, sv)))]);

console.log(`adapter: ${adapter} (Dawn ${backend}, compatibility mode); ms per run, ${10} runs after 3 warm-up`);
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
for (const name of ['layernorm_1024x1024', 'layernorm_1024x1024_bwd'])
  console.log(`| ${name} | ${gradkern.get(name)?.toFixed(2) ?? '-'} |${gpuCell(name)} (no op in tfjs) | - |`);
process.exit(0);
