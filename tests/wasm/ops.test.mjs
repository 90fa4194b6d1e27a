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
