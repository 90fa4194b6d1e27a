// gradkern.wasm against the native library: every op, direction and dtype
// that tests/wasm_reference.c wrote (inputs and native outputs, at test time)
// runs through wasm/gradkern.mjs on the same inputs, in the SIMD module, the
// plain one and the one with threads (on two); each output must agree within
// the case's tolerance (those of the C op tests):
// |wasm - native| <= atol + rtol |native|. Then every op and direction at
// sizes that split into many tasks gives the same bits in the module with
// threads, on one thread and on two, as in the SIMD module.
// With GK_WASM_RELAXED=1, under node --experimental-wasm-relaxed-simd
// (wasm_ops_relaxed), the same in the relaxed-SIMD modules instead
// (gradkern-relaxed.wasm, and gradkern-relaxed-threads.wasm on two threads:
// the same bits as gradkern-relaxed.wasm on one thread and on two), and
// load()'s choice of them; without it, load() falling back to the SIMD
// modules where relaxed SIMD does not validate (Node without the flag).
// Run by ctest (wasm_ops, wasm_ops_relaxed), which sets GK_WASM_DIR (the
// modules) and GK_WASM_REFERENCE (the reference files).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { hasRelaxedSimd, load } from '../../wasm/gradkern.mjs';

const wasmDir = process.env.GK_WASM_DIR;
const refDir = process.env.GK_WASM_REFERENCE;
const relaxed = process.env.GK_WASM_RELAXED === '1';
// The modules against native: file, SIMD, the CPU level, threads.
const MODULES = relaxed
  ? [['gradkern-relaxed.wasm', true, 'simd128-relaxed', 1],
     ['gradkern-relaxed-threads.wasm', true, 'simd128-relaxed', 2]]
  : [['gradkern.wasm', true, 'simd128', 1], ['gradkern-plain.wasm', false, 'scalar', 1],
     ['gradkern-threads.wasm', true, 'simd128', 2]];
// The single-threaded module and the one with threads whose bits must agree.
const [SINGLE, THREADED] = relaxed ? ['gradkern-relaxed.wasm', 'gradkern-relaxed-threads.wasm']
  : ['gradkern.wasm', 'gradkern-threads.wasm'];

// f16 / bf16 bit patterns to numbers (written here, not taken from the library under test).
function f16ToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}
function bf16ToNumber(h) {
  const v = new DataView(new ArrayBuffer(4));
  v.setUint32(0, h << 16);
  return v.getFloat32(0);
}
const ARRAYS = { f32: Float32Array, f64: Float64Array, f16: Uint16Array, bf16: Uint16Array, i32: Int32Array,
                 i64: BigInt64Array };
function numbers(dtype, arr) {
  if (dtype === 'f16') return Array.from(arr, f16ToNumber);
  if (dtype === 'bf16') return Array.from(arr, bf16ToNumber);
  return Array.from(arr, Number);
}

// The worst |got - want| / (atol + rtol |want|) over the elements (NaN = NaN, inf = inf).
function worstError(got, want, rtol, atol) {
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const a = got[i], b = want[i];
    if (Number.isNaN(a) && Number.isNaN(b)) continue;
    if (!Number.isFinite(b) && a === b) continue;
    const r = Math.abs(a - b) / (atol + rtol * Math.abs(b));
    if (!(r <= worst)) worst = Number.isNaN(r) ? Infinity : r;
  }
  return worst;
}

test('the reference files and modules are there', () => {
  assert.ok(wasmDir && refDir, 'GK_WASM_DIR and GK_WASM_REFERENCE must be set (ctest sets them)');
  for (const f of [join(refDir, 'manifest.json'), join(refDir, 'data.bin'), ...MODULES.map(([f]) => join(wasmDir, f))])
    assert.ok(existsSync(f), `${f} is missing (make wasm builds the modules; wasm_reference writes the rest)`);
});

const cases = refDir && existsSync(join(refDir, 'manifest.json'))
  ? JSON.parse(readFileSync(join(refDir, 'manifest.json'), 'utf8')) : [];
const data = cases.length ? readFileSync(join(refDir, 'data.bin')) : null;

function tensorOf(t) {
  const Type = ARRAYS[t.dtype];
  const bytes = new Uint8Array(data.buffer, data.byteOffset + t.offset, t.bytes).slice();
  return new Type(bytes.buffer);
}

for (const [file, simd, isa, threads] of MODULES) {
  test(`${file}: every op and direction against native`, async (t) => {
    assert.ok(cases.length > 0, 'no reference cases were written');
    const gk = await load({ module: join(wasmDir, file), simd, threads });
    assert.equal(gk.getNumThreads(), threads);
    for (const c of cases) {
      await t.test(c.name, () => {
        const plan = gk.plan(c.desc);
        try {
          assert.match(plan.kernel, /__cpu_/, `${c.name}: kernel ${plan.kernel} is not the CPU backend's`);
          assert.equal(plan.isa, isa);
          const inputs = {};
          for (const tensor of c.tensors) if (!tensor.output) inputs[tensor.name] = tensorOf(tensor);
          const out = plan.run(inputs);
          for (const tensor of c.tensors.filter((x) => x.output)) {
            const got = numbers(tensor.dtype, out[tensor.name]), want = numbers(tensor.dtype, tensorOf(tensor));
            const e = worstError(got, want, tensor.rtol, tensor.atol);
            assert.ok(e <= 1, `${c.name}: ${tensor.name} differs from native by ${e.toPrecision(3)} tolerances`);
          }
        } finally {
          plan.destroy();
        }
      });
    }
  });
}

// Every op and direction at sizes that the CPU kernels split into many tasks
// (a few in bf16): descriptions in the reference cases' form.
const LARGE = [
  ...['relu', 'gelu', 'silu', 'sigmoid', 'softplus'].map((op) => ({ op, shape: [64, 4099] })),
  ...['glu', 'reglu', 'swiglu', 'geglu'].map((op) => ({ op, shape: [64, 4100] })),
  { op: 'rmsnorm', shape: [300, 1000] }, { op: 'layernorm', shape: [300, 1000] },
  { op: 'linear', shape: [2, 150, 96], 'linear.out_features': 200 },
  { op: 'matmul', shape: [4, 100, 70], 'matmul.n': 90, 'matmul.trans_b': 1 },
  { op: 'softmax', shape: [300, 1000] }, { op: 'log_softmax', shape: [300, 1000] },
  { op: 'cross_entropy', shape: [300, 1000], 'ce.label_smoothing': 0.1 },
  { op: 'embedding', shape: [40, 50], 'embedding.num_embeddings': 1000, 'embedding.dim': 64 },
  { op: 'rope', shape: [2, 100, 8, 64] },
  { op: 'attention', shape: [2, 8, 200, 32], 'attn.kv_heads': 4 },
  { op: 'add', shape: [64, 32, 100], 'binary.b_shape': [32, 1] },
  { op: 'mul', shape: [64, 32, 100], 'binary.b_shape': [32, 1] },
  { op: 'conv1d', shape: [4, 256, 300], 'conv.silu': 1, 'conv.has_initial_state': 1, 'conv.has_final_state': 1 },
  { op: 'selective_scan', shape: [2, 64, 300], 'scan.d_state': 16, 'scan.chunk_size': 64, 'scan.has_D': 1,
    'scan.has_z': 1, 'scan.has_delta_bias': 1, 'scan.delta_softplus': 1, 'scan.has_final_state': 1 },
].flatMap((d) => ['f32', ...(['gelu', 'rmsnorm', 'linear', 'softmax'].includes(d.op) ? ['bf16'] : [])].flatMap(
  (dtype) => ['forward', 'backward'].map((direction) => ({ ...d, dtype, direction }))));

// Inputs for a plan, the same for every module: uniform values in [-1, 1)
// from a fixed sequence (16-bit ones rounded by the module), index and
// class arguments in range.
function largeInputs(gk, plan, desc) {
  let state = 12345;
  const uniform = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 31) - 1;
  const inputs = {};
  for (const a of plan.args.filter((x) => !x.output)) {
    const limit = desc.op === 'embedding' ? desc['embedding.num_embeddings'] : desc.shape[desc.shape.length - 1];
    if (a.dtype === 'i64') inputs[a.name] = BigInt64Array.from({ length: a.numel }, (_, i) => BigInt((i * 7919) % limit));
    else if (a.dtype === 'i32') inputs[a.name] = Int32Array.from({ length: a.numel }, (_, i) => (i * 7919) % limit);
    else {
      const values = Float32Array.from({ length: a.numel }, uniform);
      inputs[a.name] = a.dtype === 'f32' ? values : gk.toHalf(values, a.dtype);
    }
  }
  return inputs;
}

const bytesOf = (arr) => Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength);

test(`${THREADED} on 1 and 2 threads: the same bits as ${SINGLE}`, async (t) => {
  const simd = await load({ module: join(wasmDir, SINGLE), simd: true });
  const threaded = await load({ module: join(wasmDir, THREADED), threads: 2 });
  assert.equal(simd.build, relaxed ? 'relaxed' : 'simd');
  assert.equal(threaded.build, relaxed ? 'relaxed-threads' : 'threads');
  assert.equal(simd.getNumThreads(), 1);
  for (const desc of LARGE) {
    await t.test(`${desc.op} ${desc.direction} ${desc.dtype} [${desc.shape}]`, () => {
      const plan = simd.plan(desc);
      const inputs = largeInputs(simd, plan, desc);
      const want = plan.run(inputs);
      plan.destroy();
      for (const n of [1, 2]) {
        threaded.setNumThreads(n);
        assert.equal(threaded.getNumThreads(), n);
        const got = threaded.run(desc, inputs);
        for (const [name, arr] of Object.entries(want))
          assert.ok(bytesOf(got[name]).equals(bytesOf(arr)), `${name} on ${n} thread(s) differs from ${SINGLE}`);
      }
    });
  }
  threaded.setNumThreads(2);
  assert.throws(() => threaded.setNumThreads(0), /n = 0 is outside 1\.\.1024/);
});

// The build load() picks from build/wasm beside wasm/ (where make wasm puts
// the modules), the relaxed option forcing one or the other.
test('load() picks the relaxed-SIMD modules where relaxed SIMD validates, else the SIMD ones', async () => {
  assert.equal(hasRelaxedSimd(), relaxed,
               `hasRelaxedSimd() with${relaxed ? '' : 'out'} --experimental-wasm-relaxed-simd`);
  const prefix = relaxed ? 'relaxed-' : '';
  assert.equal((await load()).build, `${prefix}threads`);
  assert.equal((await load({ threads: 1 })).build, relaxed ? 'relaxed' : 'simd');
  assert.equal((await load({ relaxed: false })).build, 'threads');
  assert.equal((await load({ simd: false })).build, 'plain');
  if (relaxed) assert.equal((await load({ relaxed: true, threads: 1 })).build, 'relaxed');
  else await assert.rejects(load({ relaxed: true }), /relaxed-simd/);
});

test('threads: load() refuses what it cannot give, naming the reason', async () => {
  await assert.rejects(load({ module: join(wasmDir, 'gradkern.wasm'), threads: 2 }),
                       /threads = 2: the module is not gradkern-threads\.wasm/);
  await assert.rejects(load({ threads: 0 }), /threads = 0 is not an integer in 1\.\.1024/);
  await assert.rejects(load({ threads: 1.5 }), /threads = 1\.5 is not an integer/);
  const one = await load({ module: join(wasmDir, 'gradkern-threads.wasm'), threads: 1 });
  assert.equal(one.getNumThreads(), 1);
  one.setNumThreads(4);
  assert.equal(one.getNumThreads(), 1, 'no more threads than the pool has');
});

test('bad input: exceptions carry the library\'s message and status; nothing is run', async () => {
  const gk = await load({ module: join(wasmDir, 'gradkern.wasm') });
  const x = new Float32Array(32), weight = new Float32Array(8);
  const rms = { op: 'rmsnorm', direction: 'forward', dtype: 'f32', shape: [4, 8] };
  assert.throws(() => gk.plan({ ...rms, norm: { eps: -1 } }),
                (e) => e.name === 'GradKernError' && e.status === 2 && e.statusName === 'invalid value' &&
                       /desc\.norm\.eps = -1/.test(e.message));
  assert.throws(() => gk.plan({ ...rms, shape: [4, -8] }), (e) => e.name === 'GradKernError' && /-8/.test(e.message));
  assert.throws(() => gk.plan({ ...rms, op: 'rmsnorn' }), /desc\.op = "rmsnorn" is not one of/);
  assert.throws(() => gk.plan({ ...rms, dtype: 'f8' }), /desc\.dtype = "f8"/);
  assert.throws(() => gk.plan({ ...rms, norm: { epsilon: 1 } }), /desc\.norm\.epsilon is not a field/);
  assert.throws(() => gk.plan({ ...rms, norm: { has_weight: 0.5 } }), /an integer field takes an integer/);
  // act.from_output: relu and sigmoid backward only; such a plan takes y, not x.
  const act = { op: 'gelu', direction: 'backward', dtype: 'f32', shape: [4, 8], act: { from_output: 1 } };
  assert.throws(() => gk.plan(act), (e) => e.statusName === 'invalid value' &&
                                          /gelu: desc\.act\.from_output = 1/.test(e.message));
  assert.throws(() => gk.plan({ ...act, op: 'sigmoid', direction: 'forward' }),
                /sigmoid forward: desc\.act\.from_output = 1/);
  const fromY = gk.plan({ ...act, op: 'sigmoid' });
  assert.deepEqual(fromY.args.map((a) => a.name).sort(), ['dx', 'dy', 'y']);
  assert.throws(() => fromY.run({ dy: x, x }), /argument "x" is not one the plan takes/);
  const sig = new Float32Array(32).fill(0.25), dsig = fromY.run({ dy: new Float32Array(32).fill(2), y: sig }).dx;
  assert.ok(dsig.every((v) => v === 2 * 0.25 * 0.75), 'sigmoid dx from y = dy y (1 - y)');
  fromY.destroy();
  const plan = gk.plan(rms);
  assert.throws(() => plan.run({ x }), /input "weight" \(f32, shape \[8\]\) is missing/);
  assert.throws(() => plan.run({ x: new Float64Array(32), weight }), /"x" must be a Float32Array of 32 elements/);
  assert.throws(() => plan.run({ x, weight, dx: x }), /argument "dx" is not one the plan takes/);
  const y = new Float32Array(32).fill(7);
  plan.run({ x, weight, y });
  assert.ok(y.every((v) => v === 0), 'a given output is written in place');
  plan.destroy();
  assert.throws(() => plan.run({ x, weight }), /the plan was destroyed/);
  // An index out of range is found before anything is written.
  const emb = gk.plan({ op: 'embedding', shape: [2], embedding: { num_embeddings: 3, dim: 2 } });
  const out = new Float32Array(4).fill(5);
  assert.throws(() => emb.run({ weight: new Float32Array(6), index: new BigInt64Array([0n, 3n]), y: out }),
                (e) => e.name === 'GradKernError' && e.statusName === 'invalid value' && /3/.test(e.message));
  assert.ok(out.every((v) => v === 5), 'a rejected run writes nothing');
  emb.destroy();
  const r = gk.train({ args: ['--steps', '0'] });
  assert.equal(r.exitCode, 2);
  assert.match(r.stderr, /^gradkern train: .*--steps/);
});
