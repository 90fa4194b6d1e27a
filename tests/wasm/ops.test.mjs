// gradkern.wasm against the native library: every op, direction and dtype
// that tests/wasm_reference.c wrote (inputs and native outputs, at test time)
// runs through wasm/gradkern.mjs on the same inputs, in the SIMD module and
// in the plain one; each output must agree within the case's tolerance
// (those of the C op tests): |wasm - native| <= atol + rtol |native|.
// Run by ctest (wasm_ops), which sets GK_WASM_DIR (the modules) and
// GK_WASM_REFERENCE (the reference files).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from '../../wasm/gradkern.mjs';

const wasmDir = process.env.GK_WASM_DIR;
const refDir = process.env.GK_WASM_REFERENCE;

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
  for (const f of [join(refDir, 'manifest.json'), join(refDir, 'data.bin'), join(wasmDir, 'gradkern.wasm'),
                   join(wasmDir, 'gradkern-plain.wasm')])
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

for (const [file, simd, isa] of [['gradkern.wasm', true, 'simd128'], ['gradkern-plain.wasm', false, 'scalar']]) {
  test(`${file}: every op and direction against native`, async (t) => {
    assert.ok(cases.length > 0, 'no reference cases were written');
    const gk = await load({ module: join(wasmDir, file), simd });
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
