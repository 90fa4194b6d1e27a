// make bench-wasm: every op forward and backward in Node, gradkern's
// WebAssembly modules (build/wasm/gradkern.wasm, SIMD128, one thread;
// gradkern-threads.wasm on every processor; and, where relaxed SIMD
// validates, gradkern-relaxed.wasm on one thread) side by side with the native
// library on one thread (`gradkern bench --json`, run
// from here in the same session, GK_NUM_THREADS=1; for the products also
// with GK_ISA=avx2) and with TensorFlow.js's
// WebAssembly backend (XNNPACK, SIMD, one thread) on the ops it has, at the
// shapes of `gradkern bench` (f32; rows of 4096 x 2048, attention at T = 1024),
// and a training step of the default Mamba.
//
//   node --no-liftoff [--experimental-wasm-relaxed-simd] bench/wasm/bench_wasm.mjs --gradkern build/gradkern
//        [--json] [--quick] [--op NAME[,NAME...]]
//
// --no-liftoff (make bench-wasm passes it): V8 compiles each WebAssembly
// function with its optimizing compiler on first call. By default a
// function first runs baseline code and is recompiled once hot, so the first
// several runs of an op measured right after its module was loaded are up
// to 2x slower than the steady state a training loop runs in.
//
// Each figure is the median of up to 10 runs (3 with --quick) after a
// warm-up, as gradkern bench takes them; the relaxed module's figure and the
// SIMD one's it is compared with are the best of runs of the two taken in
// turn (A B A B ..., 3 to 10 each), so that other processes' load on a
// shared machine falls on both alike. The wasm runs call gk_plan_run on
// tensors that stay in the module's memory (no copies in the timing).
// TensorFlow.js gives gradients through tf.grads (the forward pass runs
// again inside it): its backward figure is the tf.grads time minus its
// forward time. Benchmarks measure; nothing here asserts a time.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '..', '..');
const require = createRequire(import.meta.url);

const usage = 'usage: node bench/wasm/bench_wasm.mjs --gradkern PATH [--json] [--quick] [--op NAME[,NAME...]]\n';
const opts = { gradkern: null, json: false, quick: false, only: null };
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === '--json') opts.json = true;
  else if (arg === '--quick') opts.quick = true;
  else if (arg === '--op' && process.argv[i + 1]) opts.only = new Set(process.argv[++i].split(','));
  else if (arg === '--gradkern' && process.argv[i + 1]) opts.gradkern = resolve(process.argv[++i]);
  else {
    process.stderr.write(`bench_wasm: bad option '${arg}'\n${usage}`);
    process.exit(2);
  }
}
if (!opts.gradkern) {
  process.stderr.write(`bench_wasm: --gradkern (the native command) is needed\n${usage}`);
  process.exit(2);
}
const repeat = opts.quick ? 3 : 10, budgetS = opts.quick ? 0.6 : 4.0;
const log = (text) => process.stderr.write(text + '\n');

// Warm-up, then up to `repeat` runs within the time budget; median in ms.
function medianMs(fn) {
  let t0 = performance.now();
  fn();
  const warm = (performance.now() - t0) / 1000;
  const reps = Math.max(1, Math.min(repeat, warm * repeat > budgetS ? Math.floor(budgetS / warm) : repeat));
  const times = [];
  for (let i = 0; i < reps; i++) {
    t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return reps % 2 ? times[reps >> 1] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
}

// The inputs gradkern bench uses (tools/bench.c, fill()).
function fillValue(i, kind) {
  let v = (((i * 7919) % 2001) - 1000) * 1e-3;
  if (kind === 'A') v = -0.5 - Math.abs(v);
  if (kind === 'rstd') v = 1 + 0.1 * v;
  if (kind === 'lse') v = 8;
  return v;
}
const filled = (n, kind = 'x') => Float32Array.from({ length: n }, (_, i) => fillValue(i, kind));

// ------------------------------------------------------------- the rows
// Each: gradkern bench's op name and shape text, the desc, the directions,
// the GEMM flops per direction (GFLOP/s column) and TensorFlow.js's version.
const R = [4096, 2048];
const gemm = 2 * 4096 * 2048 * 5632, attnHalf = (2 * 4 * 16 * 1024 * 1024 * 64) / 2;
const rows = [];
const row = (op, desc, extra = '', more = {}) =>
  rows.push({ op, desc: { op: desc.op ?? op, ...desc }, shapeText: desc.shape.join('x') + extra, dirs: ['forward', 'backward'], ...more });

// TensorFlow.js's versions; x, a, b... are tf tensors made by tfInputs.
const tfUnary = (f) => ({ inputs: [R], forward: (tf, [x]) => f(tf, x) });
const gelu = (tf, x) => tf.mul(tf.mul(x, 0.5), tf.add(tf.erf(tf.mul(x, Math.SQRT1_2)), 1));
// Layer norm from tfjs ops (tf.batchNorm's gradient takes only per-channel
// statistics): (x - mean) / sqrt(var + eps) * gamma + beta over the last axis.
const layerNorm = (tf, x, gamma, beta) => {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, 1e-5))), gamma), beta);
};
// relu's and sigmoid's backward take the forward's output y (act.from_output),
// as gradkern bench's rows do.
for (const op of ['relu', 'gelu', 'silu', 'sigmoid', 'softplus'])
  row(op, { shape: R }, '', {
    tf: { relu: tfUnary((tf, x) => tf.relu(x)), sigmoid: tfUnary((tf, x) => tf.sigmoid(x)),
          gelu: { ...tfUnary(gelu), note: 'composed from erf' } }[op],
    fromOutput: op === 'relu' || op === 'sigmoid',
  });
for (const op of ['glu', 'reglu', 'swiglu', 'geglu']) row(op, { shape: R, gated: { form: 'two_tensor' } }, ' (x, gate)');
row('rmsnorm', { shape: R });
row('layernorm', { shape: R }, '', {
  tf: { inputs: [R, [2048], [2048]], forward: (tf, [x, g, b]) => layerNorm(tf, x, g, b),
        note: 'composed from moments, sub, mul, rsqrt' },
});
row('softmax', { shape: R }, '', { tf: { inputs: [R], forward: (tf, [x]) => tf.softmax(x) } });
row('add', { shape: R }, '', { tf: { inputs: [R, R], forward: (tf, [a, b]) => tf.add(a, b) } });
row('mul', { shape: R }, '', { tf: { inputs: [R, R], forward: (tf, [a, b]) => tf.mul(a, b) } });
row('linear', { shape: R, linear: { out_features: 5632 } }, ' -> 5632', { flops: [gemm, 2 * gemm] });
row('matmul', { shape: R, matmul: { n: 5632 } }, ' @ 2048x5632', { flops: [gemm, 2 * gemm] });
// TensorFlow.js's matrix product at a quarter of the rows and a fifth of
// the columns (gradkern bench has no such row: wasm against TensorFlow.js
// only): at the full shape its runs took many minutes here.
const small = 2 * 1024 * 2048 * 1024;
row('matmul', { shape: [1024, 2048], matmul: { n: 1024 } }, ' @ 2048x1024', {
  flops: [small, 2 * small], tf: { inputs: [[1024, 2048], [2048, 1024]], forward: (tf, [a, b]) => tf.matMul(a, b) },
});
row('attention', { shape: [4, 16, 1024, 64] }, ' causal', { flops: [2 * attnHalf, 5 * attnHalf] });
row('cross_entropy', { shape: [2048, 32000], index_dtype: 'i32' });
row('cross_entropy_fused', { op: 'cross_entropy', shape: [2048, 32000], index_dtype: 'i32', ce: { fused_grad: 1 } },
    ' dlogits in place', { dirs: ['forward'], fusedInPlace: true });
row('embedding', { shape: [8, 1024], index_dtype: 'i32', embedding: { num_embeddings: 32000, dim: 2048 } }, ' V=32000 D=2048');
row('rope', { shape: [4, 1024, 16, 64] });
row('conv1d', { shape: [4, 1536, 1024], conv: { silu: 1 } }, ' W=4 silu');
row('selective_scan', { shape: [4, 1536, 1024], scan: { has_D: 1, has_z: 1, has_delta_bias: 1, delta_softplus: 1 } },
    ' N=16 D z softplus');
const wanted = rows.filter((r) => !opts.only || opts.only.has(r.op));
for (const name of opts.only ?? []) {
  if (name !== 'train_mamba' && !rows.some((r) => r.op === name)) {
    process.stderr.write(`bench_wasm: --op ${name}: no such op (${[...new Set(rows.map((r) => r.op))].join(', ')}, train_mamba)\n`);
    process.exit(2);
  }
}

// ------------------------------------------------------- gradkern, wasm
// The module's C API, as gradkern.mjs's Plan.run uses it, but with the
// tensors allocated once in the module's memory.
const DTYPE_CODES = ['f32', 'f64', 'f16', 'bf16', 'i32', 'i64']; // gk_dtype's values
const { load, threadsUnavailable, hasRelaxedSimd } =
  await import(pathToFileURL(resolve(repoRoot, 'wasm/gradkern.mjs')).href);
const gk = await load({ threads: 1, relaxed: false });
// gradkern-relaxed.wasm on one thread, where this Node runs relaxed SIMD
// (--experimental-wasm-relaxed-simd; make bench-wasm passes it).
const gkRelaxed = hasRelaxedSimd() ? await load({ threads: 1, relaxed: true }) : null;
// gradkern-threads.wasm on every processor (Node always has threads; the
// column is empty on a one-processor machine).
const gkAll = !threadsUnavailable() && cpus().length > 1 ? await load({ threads: cpus().length }) : null;

// A row's backward from y: its desc option and its shape text (gradkern bench's).
const fromY = (r, direction) => r.fromOutput && direction === 'backward';
const shapeTextOf = (r, direction) => r.shapeText + (fromY(r, direction) ? ' (dy, y) -> dx' : '');

// A plan of row r in module gk with its tensors in the module's memory:
// run() runs it once; release() frees it all.
function wasmRun(gk, r, direction) {
  const e = gk.exports;
  const plan = gk.plan({ ...r.desc, direction, dtype: 'f32', ...(fromY(r, direction) ? { act: { from_output: 1 } } : {}) });
  const ALIGN = 64, ptrs = [];
  const indexRange = r.desc.op === 'cross_entropy' ? r.desc.shape.at(-1) : r.desc.embedding?.num_embeddings ?? 1;
  const args = e.gkjs_args_new(plan.args.length);
  let bytes = 0;
  try {
    const at = {};
    for (const [i, a] of plan.args.entries()) {
      const size = a.numel * (a.dtype === 'i64' || a.dtype === 'f64' ? 8 : a.dtype === 'f16' || a.dtype === 'bf16' ? 2 : 4);
      let ptr;
      if (r.fusedInPlace && a.name === 'dlogits') {
        ptr = at.logits; // the very same memory as the logits
      } else {
        const base = gk.alloc(size + ALIGN);
        ptrs.push(base);
        ptr = Math.ceil(base / ALIGN) * ALIGN;
        if (a.dtype === 'i32') new Int32Array(gk.memory.buffer, ptr, a.numel).forEach((_, j, v) => { v[j] = (j * 7919) % indexRange; });
        else if (a.dtype === 'f32') new Float32Array(gk.memory.buffer, ptr, a.numel).set(filled(a.numel, a.name));
        else throw new Error(`${r.op}: argument ${a.name} has dtype ${a.dtype}, not one this benchmark fills`);
        bytes += size;
      }
      at[a.name] = ptr;
      const s = gk.withShape(a.shape, (sp) => e.gkjs_arg_set(args, i, a.kind, ptr, DTYPE_CODES.indexOf(a.dtype), a.shape.length, sp));
      if (s !== 0) throw gk.lastError(s);
    }
    let ws = 0;
    if (plan.workspaceBytes) {
      const base = gk.alloc(plan.workspaceBytes + ALIGN);
      ptrs.push(base);
      ws = Math.ceil(base / ALIGN) * ALIGN;
    }
    const release = () => {
      e.free(args);
      ptrs.forEach((p) => e.free(p));
      plan.destroy();
    };
    const run = () => {
      const status = e.gk_plan_run(plan.ptr, args, plan.args.length, ws, plan.workspaceBytes);
      if (status !== 0) throw gk.lastError(status);
    };
    return { run, release, kernel: plan.kernel };
  } catch (err) {
    e.free(args);
    ptrs.forEach((p) => e.free(p));
    plan.destroy();
    throw err;
  }
}

function timeWasm(gk, r, direction) {
  const w = wasmRun(gk, r, direction);
  try {
    return { ms: medianMs(w.run), kernel: w.kernel };
  } finally {
    w.release();
  }
}

// Row r in modules a and b taken in turn after a warm-up of each, 3 to
// `repeat` runs of each within the time budget: each one's best, in ms.
function timeWasmAB(a, b, r, direction) {
  const wa = wasmRun(a, r, direction), wb = wasmRun(b, r, direction);
  try {
    const timed = (fn) => {
      const t0 = performance.now();
      fn();
      return performance.now() - t0;
    };
    const warm = (timed(wa.run) + timed(wb.run)) / 1000;
    const reps = Math.max(3, Math.min(repeat, warm * repeat > budgetS ? Math.floor(budgetS / warm) : repeat));
    let bestA = Infinity, bestB = Infinity;
    for (let i = 0; i < reps; i++) {
      bestA = Math.min(bestA, timed(wa.run));
      bestB = Math.min(bestB, timed(wb.run));
    }
    return { a: bestA, b: bestB };
  } finally {
    wa.release();
    wb.release();
  }
}

// A training step of the default Mamba at gradkern bench's train_mamba
// shape (B=16 T=256): the median time between steps 2..N of a short
// `gradkern train` run in the module (so it includes AdamW and the data).
function timeWasmTrainStep(gk) {
  const stamps = [];
  const steps = opts.quick ? 8 : 20;
  const result = gk.train({
    args: ['--steps', String(steps), '--batch', '16', '--seq-len', '256', '--eval-every', '0', '--quiet'],
    onStep: () => { stamps.push(performance.now()); return 0; },
  });
  if (result.exitCode !== 0) throw new Error(`gk.train exited with ${result.exitCode}: ${result.stderr}`);
  const d = stamps.slice(1).map((t, i) => t - stamps[i]).sort((a, b) => a - b);
  return d.length % 2 ? d[d.length >> 1] : 0.5 * (d[d.length / 2 - 1] + d[d.length / 2]);
}

// ------------------------------------------------------ TensorFlow.js
// tfjs-core's CommonJS bundle lacks the gradient definitions: they are
// loaded from its ES module files (tfjs_esm_hooks.mjs resolves their
// extensionless imports); registries and engine are global, so both copies
// share them.
let tf = null, tfInfo = 'not loaded';
try {
  register('./tfjs_esm_hooks.mjs', import.meta.url);
  tf = require('@tensorflow/tfjs-core');
  const tfWasm = require('@tensorflow/tfjs-backend-wasm');
  await import('@tensorflow/tfjs-core/dist/register_all_gradients.js');
  tfWasm.setWasmPaths(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm')) + '/');
  tfWasm.setThreadsCount(1);
  if (!(await tf.setBackend('wasm'))) throw new Error('tf.setBackend("wasm") failed');
  const version = JSON.parse(readFileSync(require.resolve('@tensorflow/tfjs-backend-wasm/package.json'), 'utf8')).version;
  tfInfo = `TensorFlow.js ${version} wasm backend (XNNPACK), SIMD ${tf.env().getBool('WASM_HAS_SIMD_SUPPORT') ? 'yes' : 'no'}, ` +
    `${tfWasm.getThreadsCount()} thread`;
} catch (err) {
  tf = null;
  tfInfo = `TensorFlow.js not run: ${err.message} (npm ci in bench/wasm; make bench-wasm does it)`;
  log(tfInfo);
}

function timeTf(spec) {
  const inputs = spec.inputs.map((shape) => tf.tensor(filled(shape.reduce((a, b) => a * b, 1)), shape));
  try {
    const forward = medianMs(() => tf.tidy(() => { spec.forward(tf, inputs); }));
    const out = tf.tidy(() => spec.forward(tf, inputs));
    const dy = tf.tensor(filled(out.size, 'dy'), out.shape);
    out.dispose();
    const grads = tf.grads((...xs) => spec.forward(tf, xs));
    const withGrads = medianMs(() => tf.tidy(() => { grads(inputs, dy); }));
    dy.dispose();
    return { forward, backward: Math.max(0, withGrads - forward), grads: withGrads };
  } finally {
    inputs.forEach((t) => t.dispose());
  }
}

// ------------------------------------------------------------- native
const execFileP = promisify(execFile);
// gradkern bench's rows of op on one thread; isa: the GK_ISA level, or the best.
async function nativeRows(op, isa) {
  const env = { ...process.env, GK_NUM_THREADS: '1', ...(isa ? { GK_ISA: isa } : {}) };
  const { stdout } = await execFileP(opts.gradkern, ['bench', '--json', '--op', op, ...(opts.quick ? ['--quick'] : [])],
                                     { env, maxBuffer: 1 << 24 });
  return JSON.parse(stdout);
}

// ---------------------------------------------------------------- run
const results = [];
const ops = [...new Set(wanted.map((r) => r.op))];
for (const op of ops) {
  log(`${op}: native`);
  let native = [], nativeAvx2 = [];
  try {
    native = await nativeRows(op);
    if (wanted.some((w) => w.op === op && w.flops)) {
      log(`${op}: native, GK_ISA=avx2`);
      nativeAvx2 = await nativeRows(op, 'avx2');
    }
  } catch (err) {
    log(`${op}: gradkern bench failed: ${err.message}`);
  }
  for (const r of wanted.filter((w) => w.op === op)) {
    let tfTimes = null;
    if (r.tf && tf) {
      log(`${op}: TensorFlow.js`);
      try {
        tfTimes = timeTf(r.tf);
      } catch (err) {
        log(`${op}: TensorFlow.js failed: ${err.message}`);
      }
    }
    for (const [d, direction] of r.dirs.entries()) {
      log(`${op} ${direction}: wasm`);
      const same = (x) => x.direction === direction && x.dtype === 'f32' && x.shape === shapeTextOf(r, direction);
      const n = native.find(same), n2 = nativeAvx2.find(same);
      let wasm = null, wasmAll = null, ab = null, error = null;
      try {
        wasm = timeWasm(gk, r, direction);
        if (gkAll) {
          log(`${op} ${direction}: wasm, ${gkAll.getNumThreads()} threads`);
          wasmAll = timeWasm(gkAll, r, direction);
        }
        if (gkRelaxed) {
          log(`${op} ${direction}: wasm, SIMD and relaxed SIMD in turn`);
          ab = timeWasmAB(gk, gkRelaxed, r, direction);
        }
      } catch (err) {
        error = err.message;
      }
      const res = {
        op, direction, dtype: 'f32', shape: shapeTextOf(r, direction),
        native_ms: n && !n.error ? n.gradkern_ms : null,
        wasm_ms: wasm?.ms ?? null, wasm_all_ms: wasmAll?.ms ?? null, wasm_kernel: wasm?.kernel ?? null,
        tfjs_ms: tfTimes ? tfTimes[direction] : null, tfjs_note: r.tf?.note ?? null,
        gflop_s: wasm && r.flops ? r.flops[d] / (wasm.ms * 1e6) : null,
        native_gflop_s: n?.gflop_s ?? null, native_avx2_gflop_s: n2?.gflop_s ?? null,
        ab_simd_ms: ab?.a ?? null, relaxed_ms: ab?.b ?? null,
        relaxed_gflop_s: ab && r.flops ? r.flops[d] / (ab.b * 1e6) : null, error,
      };
      results.push(res);
      log(JSON.stringify(res));
    }
  }
}
if (!opts.only || opts.only.has('train_mamba')) {
  log('train_mamba: native');
  const native = (await nativeRows('train_mamba')).find((x) => x.dtype === 'f32') ?? null;
  log('train_mamba: wasm');
  let wasmMs = null, wasmAllMs = null, error = null;
  try {
    wasmMs = timeWasmTrainStep(gk);
    if (gkAll) wasmAllMs = timeWasmTrainStep(gkAll);
  } catch (err) {
    error = err.message;
  }
  results.push({ op: 'train_mamba', direction: 'step', dtype: 'f32', shape: native?.shape ?? 'default Mamba',
                 native_ms: native?.gradkern_ms ?? null, wasm_ms: wasmMs, wasm_all_ms: wasmAllMs, wasm_kernel: null,
                 tfjs_ms: null,
                 tfjs_note: null, note: 'wasm: a gradkern train step (with AdamW and the data); native: gk_run_step',
                 gflop_s: null, native_gflop_s: null, error });
  log(JSON.stringify(results.at(-1)));
}

// --------------------------------------------------------------- output
const tiering = process.execArgv.includes('--no-liftoff') ? 'V8 --no-liftoff (optimized code from the first call)'
  : 'V8 tiered compilation (early runs of an op may run baseline code: pass --no-liftoff)';
const conditions = `Node ${process.version}, ${tiering}, ${cpus()[0]?.model ?? 'unknown CPU'} (${cpus().length} cores, load average ` +
  `${loadavg()[0].toFixed(1)} at the end); gradkern ${gk.version} wasm ${gk.simd ? 'SIMD128' : 'without SIMD'}, 1 thread ` +
  `(gradkern.wasm) and ${gkAll ? `${gkAll.getNumThreads()} threads (gradkern-threads.wasm)` : 'no threads (one processor)'}; ` +
  `${gkRelaxed ? 'relaxed SIMD, 1 thread (gradkern-relaxed.wasm), best of runs in turn with gradkern.wasm' :
    'no relaxed SIMD (node --experimental-wasm-relaxed-simd runs gradkern-relaxed.wasm)'}; ` +
  `native gradkern bench with GK_NUM_THREADS=1 in the same run; ${tfInfo}; f32; ` +
  `median of up to ${repeat} runs after a warm-up`;
if (opts.json) {
  console.log(JSON.stringify({ conditions, rows: results }, null, 1));
} else {
  const f = (v, digits = 2) => (v === null || v === undefined ? '' : v.toFixed(digits));
  const pct = (a, b) => (a && b ? `${((100 * a) / b).toFixed(0)}%` : '');
  const ratio = (a, b) => (a !== null && b ? `${(a / b).toFixed(2)}x` : '');
  console.log(conditions + '\n');
  const nt = gkAll ? `${gkAll.getNumThreads()}T` : 'NT';
  console.log(`| op | dir | shape | native 1T ms | wasm 1T ms | wasm 1T speed of native 1T | wasm ${nt} ms | wasm ${nt} speedup over 1T | ` +
              'wasm 1T GFLOP/s | relaxed 1T ms | relaxed speedup over wasm 1T (in turn) | relaxed 1T GFLOP/s | ' +
              'native AVX2 1T GFLOP/s | relaxed 1T speed of native AVX2 1T | tfjs-wasm 1T ms | ' +
              'gradkern wasm 1T speedup vs tfjs | note |');
  console.log('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const r of results) {
    const note = [r.note ?? '', r.tfjs_note ? `tfjs: ${r.tfjs_note}` : '', r.error ? `failed: ${r.error}` : '']
      .filter(Boolean).join('; ');
    console.log(`| ${r.op} | ${r.direction} | ${r.shape} | ${f(r.native_ms)} | ${f(r.wasm_ms)} | ` +
                `${pct(r.native_ms, r.wasm_ms)} | ${f(r.wasm_all_ms)} | ${ratio(r.wasm_ms, r.wasm_all_ms)} | ` +
                `${f(r.gflop_s, 1)} | ${f(r.relaxed_ms)} | ${ratio(r.ab_simd_ms, r.relaxed_ms)} | ` +
                `${f(r.relaxed_gflop_s, 1)} | ${f(r.native_avx2_gflop_s, 1)} | ` +
                `${pct(r.relaxed_gflop_s, r.native_avx2_gflop_s)} | ${f(r.tfjs_ms)} | ` +
                `${ratio(r.tfjs_ms, r.wasm_ms)} | ` +
                `${note} |`);
  }
}
