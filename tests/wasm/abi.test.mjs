// The WebAssembly kernel-ABI modules (build/wasm/<op>_<dtype>.wasm) in Node:
// - each module imports nothing and exports its memory and the five functions;
// - every op x direction x dtype case against the native library: the inputs
//   and the native results come from `test_wasm_abi --write-cases` run just
//   before (GK_ABI_CASES), compared with the C tests' tolerances, and every
//   byte outside the outputs unchanged;
// - the bad inputs on every f32 module: each returns its code, and the
//   memory (all of it but the shadow stack) and its size are unchanged; with
//   the bad values of the extended forms' fields and the optimizers' params
//   that test_wasm_abi lists in cases.json (where the library itself refuses
//   one, the host's memory unchanged);
// - SwiGLU and RMSNorm forward called exactly as a host of the ABI's first
//   kernels calls them (their params structs, their layouts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const wasmDir = process.env.GK_WASM_DIR;
const casesDir = process.env.GK_ABI_CASES;
if (!wasmDir || !casesDir) throw new Error('GK_WASM_DIR and GK_ABI_CASES must name the modules and the cases');
const manifest = JSON.parse(fs.readFileSync(path.join(casesDir, 'cases.json'), 'utf8'));

const OPS = ['relu', 'gelu', 'silu', 'sigmoid', 'softplus', 'glu', 'reglu', 'swiglu', 'geglu', 'rmsnorm', 'layernorm',
  'linear', 'matmul', 'softmax', 'log_softmax', 'cross_entropy', 'embedding', 'rope', 'attention', 'add', 'mul',
  'conv1d', 'selective_scan', 'adamw', 'sgd', 'clip_grad_norm'];
const OPTIMIZERS = ['adamw', 'sgd', 'clip_grad_norm'];  // forward only
const DTYPES = ['f32', 'f64', 'f16', 'bf16'];
const STACK_BYTES = 1 << 20;  // the shadow stack, first in memory (wasm/abi/CMakeLists.txt)
const CODE = { OK: 0, INVALID_INPUT: 1, INVALID_OUTPUT: 2, INVALID_PARAMS: 3, OUT_OF_BOUNDS: 4, OVERLAP: 5,
  UNKNOWN_DTYPE: 6, WRONG_DTYPE: 7, MISALIGNED: 8, UNSUPPORTED: 9 };

const compiled = new Map();
function moduleOf(name) {
  if (!compiled.has(name)) {
    const file = path.join(wasmDir, `${name}.wasm`);
    if (!fs.existsSync(file)) throw new Error(`${file} is missing (make wasm builds it)`);
    compiled.set(name, new WebAssembly.Module(fs.readFileSync(file)));
  }
  return compiled.get(name);
}
function instance(name) {
  return new WebAssembly.Instance(moduleOf(name), {}).exports;  // an empty import object
}

// Room for the host: pages of its own, grown after instantiation.
function hostRoom(e, bytes) {
  const start = e.memory.grow(Math.ceil(bytes / 65536) + 1) * 65536;
  return start;
}

function f16ToNumber(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
function readValues(bytes, dtype) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), out = [];
  const size = { f32: 4, f64: 8, f16: 2, bf16: 2 }[dtype];
  for (let i = 0; i + size <= bytes.length; i += size) {
    if (dtype === 'f32') out.push(dv.getFloat32(i, true));
    else if (dtype === 'f64') out.push(dv.getFloat64(i, true));
    else if (dtype === 'f16') out.push(f16ToNumber(dv.getUint16(i, true)));
    else { const b = new DataView(new ArrayBuffer(4)); b.setUint32(0, dv.getUint16(i, true) << 16, true); out.push(b.getFloat32(0, true)); }
  }
  return out;
}

// A native case placed in a fresh instance: the image at the host's start,
// the descriptor's offsets moved with it.
function place(c) {
  const e = instance(c.module);
  const start = hostRoom(e, c.bytes);
  const shift = start - c.base;
  const image = new Uint8Array(fs.readFileSync(path.join(casesDir, `${c.name}.in.bin`)));
  new Uint8Array(e.memory.buffer, start, c.bytes).set(image);
  const dv = new DataView(e.memory.buffer);
  const descAt = c.desc + shift;
  for (let f = 0; f < 10; f += 2) dv.setUint32(descAt + 4 * f, dv.getUint32(descAt + 4 * f, true) + shift, true);
  const placed = new Uint8Array(e.memory.buffer, start, c.bytes).slice();
  return { e, start, shift, descAt, placed };
}

test('every module imports nothing and exports its memory and the five functions', () => {
  const want = ['kernel_backward', 'kernel_cleanup', 'kernel_forward', 'kernel_info', 'kernel_init', 'memory'];
  for (const op of OPS) for (const dt of DTYPES) {
    const m = moduleOf(`${op}_${dt}`);
    assert.deepEqual(WebAssembly.Module.imports(m), [], `${op}_${dt} imports`);
    assert.deepEqual(WebAssembly.Module.exports(m).map((x) => x.name).sort(), want, `${op}_${dt} exports`);
    const e = instance(`${op}_${dt}`);
    const initial = e.memory.buffer.byteLength;  // all of it the module's own
    assert.equal(e.kernel_info(initial - 16), 4, 'info in the module\'s memory');
    const at = hostRoom(e, 16);
    assert.equal(at, initial);
    assert.equal(e.kernel_info(at), 0);
    const dv = new DataView(e.memory.buffer);
    const name = new TextDecoder().decode(new Uint8Array(e.memory.buffer, dv.getUint32(at, true), dv.getUint32(at + 4, true)));
    assert.equal(name, `${op}_${dt}`);
    assert.equal(dv.getUint8(at + 14), OPTIMIZERS.includes(op) ? 0 : 1, 'supports_backward');
    assert.equal(e.kernel_init(0, 0), 0);
    assert.equal(e.kernel_cleanup(), 0);
  }
});

test('every op x direction x dtype matches the native library', () => {
  assert.ok(manifest.cases.length >= (OPS.length * 2 - OPTIMIZERS.length) * DTYPES.length, 'cases for every op, dtype and direction');
  const seen = new Set();
  for (const c of manifest.cases) {
    seen.add(`${c.module}_${c.direction}`);
    const { e, start, shift, descAt, placed } = place(c);
    const fn = c.direction === 'forward' ? e.kernel_forward : e.kernel_backward;
    assert.equal(fn(descAt), 0, `${c.name}: code`);
    const mem = new Uint8Array(e.memory.buffer, start, c.bytes);
    const want = new Uint8Array(fs.readFileSync(path.join(casesDir, `${c.name}.out.bin`)));
    const written = new Uint8Array(c.bytes);
    for (const o of c.outputs) {
      const lo = o.offset + shift - start;
      written.fill(1, lo, lo + o.bytes);
      const got = readValues(mem.subarray(lo, lo + o.bytes), o.dtype);
      const ref = readValues(want.subarray(o.offset - c.base, o.offset - c.base + o.bytes), o.dtype);
      for (let i = 0; i < got.length; i++) {
        const ok = Object.is(got[i], ref[i]) || Math.abs(got[i] - ref[i]) <= o.atol + o.rtol * Math.abs(ref[i]);
        if (!ok) assert.fail(`${c.name}: ${o.name}[${i}] = ${got[i]}, native ${ref[i]}`);
      }
    }
    for (let i = 0; i < c.bytes; i++)
      if (!written[i] && mem[i] !== placed[i]) assert.fail(`${c.name}: byte ${i} outside the outputs changed`);
  }
  for (const op of OPS) for (const dt of DTYPES) for (const dir of ['forward', 'backward'])
    if (!OPTIMIZERS.includes(op) || dir === 'forward') assert.ok(seen.has(`${op}_${dt}_${dir}`), `a case for ${op}_${dt} ${dir}`);
  // The optimizers have no backward: the code says so.
  for (const c of manifest.cases.filter((x) => OPTIMIZERS.includes(x.module.replace(/_(f32|f64|f16|bf16)$/, '')))) {
    const { e, descAt } = place(c);
    assert.equal(e.kernel_backward(descAt), CODE.UNSUPPORTED, `${c.name}: backward`);
  }
});

// Run `desc` (ten u32, written at a fresh place) and check the code and that
// nothing changed: the memory's size and every byte past the shadow stack
// (past `from`: the host's start, when the library refuses the call and
// sets its error message in the module's memory).
function expectRejected(e, at, desc, dirFn, want, what, from = STACK_BYTES) {
  const dv = new DataView(e.memory.buffer);
  desc.forEach((w, i) => dv.setUint32(at + 4 * i, w >>> 0, true));
  const before = Buffer.from(new Uint8Array(e.memory.buffer).slice(from));
  const pages = e.memory.buffer.byteLength;
  const got = dirFn(at);
  assert.equal(got, want, `${what}: code`);
  assert.equal(e.memory.buffer.byteLength, pages, `${what}: memory size changed`);
  const after = new Uint8Array(e.memory.buffer).subarray(from);
  if (!Buffer.from(after.buffer, after.byteOffset, after.length).equals(before))
    assert.fail(`${what}: byte ${from + after.findIndex((b, i) => b !== before[i])} changed`);
}

test('bad inputs: each returns its code and changes nothing', () => {
  const names = ['input a', 'input b', 'output', 'scratch'];
  let checked = 0, badChecked = 0;
  for (const c of manifest.cases) {
    if (!c.module.endsWith("_f32")) continue;
    const { e, start, descAt } = place(c);
    const fwd = c.direction === 'forward';
    const dirFn = fwd ? e.kernel_forward : e.kernel_backward;
    // One good call first: the library's one-time initialisation (its
    // backend registry) happens on the first call, whatever its outcome.
    assert.equal(dirFn(descAt), 0, `${c.name}: the good call`);
    // Room for the changed descriptors, params and misaligned regions, taken
    // before `end` is read: the rest of memory stays as it is.
    const spare = hostRoom(e, 3 * 65536), spareParams = spare + 256, spareRegion = spare + 65536;
    const dv = new DataView(e.memory.buffer);
    const d = Array.from({ length: 10 }, (_, i) => dv.getUint32(descAt + 4 * i, true));
    const end = e.memory.buffer.byteLength;
    const rmsScratch = c.module.startsWith('rmsnorm') && fwd;
    const tag = (s) => `${c.name}: ${s}`;
    for (let r = 0; r < 4; r++) {
      const size = d[2 * r + 1];
      if (!size) continue;
      const written = r === 2 || (r === 3 && fwd);
      const withOffset = (o) => { const x = d.slice(); x[2 * r] = o; return x; };
      const withSize = (s) => { const x = d.slice(); x[2 * r + 1] = s; return x; };
      expectRejected(e, spare, withOffset(end - Math.floor(size / 2)), dirFn, CODE.OUT_OF_BOUNDS, tag(`${names[r]} past the end`));
      expectRejected(e, spare, withOffset(0xFFFFFFFF - 3), dirFn, CODE.OUT_OF_BOUNDS, tag(`${names[r]} wraps around u32`));
      expectRejected(e, spare, withOffset(1024), dirFn, CODE.OUT_OF_BOUNDS, tag(`${names[r]} in the module's memory`));
      if (!(rmsScratch && r === 3)) {
        const code = written ? CODE.INVALID_OUTPUT : CODE.INVALID_INPUT;
        expectRejected(e, spare, withSize(0), dirFn, code, tag(`${names[r]} size 0`));
        expectRejected(e, spare, withSize(size + 8), dirFn, code, tag(`${names[r]} too large`));
        expectRejected(e, spare, withSize(0xFFFFFFFF), dirFn, code, tag(`${names[r]} size 2^32-1`));
      }
      if (written) {
        for (let o = 0; o < 4; o++)
          if (o !== r && d[2 * o + 1]) expectRejected(e, spare, withOffset(d[2 * o]), dirFn, CODE.OVERLAP, tag(`${names[r]} over ${names[o]}`));
        expectRejected(e, spare, withOffset(d[8] & ~7), dirFn, CODE.OVERLAP, tag(`${names[r]} over the params`));
        expectRejected(e, spare, withOffset(spareRegion + 2), dirFn, CODE.MISALIGNED, tag(`${names[r]} misaligned`));
      }
    }
    for (const at of [end - 20, 0xFFFFFFF8, 0, 1024]) {
      const before = new Uint8Array(e.memory.buffer).slice(STACK_BYTES);
      assert.equal(dirFn(at), CODE.OUT_OF_BOUNDS, tag(`descriptor at ${at}`));
      assert.deepEqual(new Uint8Array(e.memory.buffer).slice(STACK_BYTES), before, tag('descriptor checks changed memory'));
    }
    // (4 short is the short form, and of an extended form the base form: 2 short then)
    const shortBy = c.extended ? 2 : ['glu', 'reglu', 'swiglu', 'geglu', 'rmsnorm'].includes(c.module.replace(/_f32$/, '')) ? 8 : 4;
    const withParams = (off, size) => { const x = d.slice(); x[8] = off; x[9] = size; return x; };
    expectRejected(e, spare, withParams(d[8], d[9] - shortBy), dirFn, CODE.INVALID_PARAMS, tag('params short'));
    expectRejected(e, spare, withParams(d[8], 0), dirFn, CODE.INVALID_PARAMS, tag('params empty'));
    expectRejected(e, spare, withParams(end - 4, d[9]), dirFn, CODE.OUT_OF_BOUNDS, tag('params past the end'));
    expectRejected(e, spare, withParams(0xFFFFFFFC, d[9]), dirFn, CODE.OUT_OF_BOUNDS, tag('params wrap around'));
    const copyParams = (edit) => {
      const at = spareParams;
      const m = new DataView(e.memory.buffer);
      for (let i = 0; i < d[9]; i += 4) m.setUint32(at + i, m.getUint32(d[8] + i, true), true);
      edit(m, at);
      return at;
    };
    const last = c.dtype_at;  // the dtype field
    expectRejected(e, spare, withParams(copyParams((m, at) => m.setUint32(at + last, 7, true)), d[9]), dirFn, CODE.UNKNOWN_DTYPE, tag('dtype 7'));
    expectRejected(e, spare, withParams(copyParams((m, at) => m.setUint32(at + last, 1, true)), d[9]), dirFn, CODE.WRONG_DTYPE, tag('dtype f64 in an f32 module'));
    const dimAt = c.module.startsWith('rmsnorm') || c.module.startsWith('layernorm') ? 4 : 0;
    expectRejected(e, spare, withParams(copyParams((m, at) => m.setUint32(at + dimAt, 0, true)), d[9]), dirFn, CODE.INVALID_PARAMS, tag('a zero dim'));
    // The new fields' bad values (and clipping's non-finite gradients), each alone.
    for (const b of c.bad) {
      if (b.memory) {
        const at = start + b.at, was = dv.getUint32(at, true);
        dv.setUint32(at, b.value, true);
        expectRejected(e, spare, d, dirFn, b.code, tag(b.what), b.library ? start : STACK_BYTES);
        dv.setUint32(at, was, true);
      } else {
        expectRejected(e, spare, withParams(copyParams((m, at) => m.setUint32(at + b.at, b.value, true)), d[9]), dirFn, b.code, tag(b.what),
          b.library ? start : STACK_BYTES);
      }
      badChecked++;
    }
    checked++;
  }
  assert.ok(checked >= OPS.length * 2 - OPTIMIZERS.length, 'bad inputs on every f32 module, both directions');
  assert.ok(badChecked >= 60, `bad values of the new fields (${badChecked})`);
});

// ---------------------------------------------------------------- the first kernels' hosts

// Such a host instantiates with no imports and takes pages of its own.
function firstKernelsHost(name) {
  const e = new WebAssembly.Instance(moduleOf(name), {}).exports;
  const base = e.memory.grow(4) * 65536;
  return { e, base };
}

test('SwiGLU forward as a host of the first SwiGLU kernel calls it', () => {
  const { e, base } = firstKernelsHost('swiglu_f32');
  const numElements = 6, hiddenDim = 40, n = numElements * hiddenDim;
  const xOff = base, gateOff = base + 4 * n, yOff = base + 8 * n, paramsOff = base + 12 * n, descOff = paramsOff + 16;
  const f = new Float32Array(e.memory.buffer);
  for (let i = 0; i < n; i++) { f[xOff / 4 + i] = Math.sin(0.37 * i) * 3; f[gateOff / 4 + i] = Math.cos(0.11 * i) * 6; }
  const dv = new DataView(e.memory.buffer);
  dv.setUint32(paramsOff, numElements, true);   // SwiGluParams {num_elements, hidden_dim, beta}
  dv.setUint32(paramsOff + 4, hiddenDim, true);
  dv.setFloat32(paramsOff + 8, 1.0, true);
  [xOff, 4 * n, gateOff, 4 * n, yOff, 4 * n, 0, 0, paramsOff, 12].forEach((v, i) => dv.setUint32(descOff + 4 * i, v, true));
  assert.equal(e.kernel_init(0, 0), 0);
  assert.equal(e.kernel_forward(descOff), 0);
  const F = new Float32Array(e.memory.buffer);
  for (let i = 0; i < n; i++) {
    const x = F[xOff / 4 + i], g = F[gateOff / 4 + i];
    const want = Math.fround(g / (1 + Math.exp(-g)) * x);
    assert.ok(Math.abs(F[yOff / 4 + i] - want) <= 2e-6 * (1 + Math.abs(want)), `y[${i}] = ${F[yOff / 4 + i]}, want ${want}`);
  }
  assert.equal(e.kernel_cleanup(), 0);
});

test('RMSNorm forward as a host of the first RMSNorm kernel calls it (rms in scratch, or none)', () => {
  for (const withScratch of [true, false]) {
    const { e, base } = firstKernelsHost('rmsnorm_f32');
    const numElements = 5, hiddenDim = 48, n = numElements * hiddenDim, eps = 1e-5;
    const xOff = base, wOff = base + 4 * n, yOff = wOff + 4 * hiddenDim, rmsOff = yOff + 4 * n;
    const paramsOff = rmsOff + 4 * numElements, descOff = paramsOff + 16;
    const f = new Float32Array(e.memory.buffer);
    for (let i = 0; i < n; i++) f[xOff / 4 + i] = Math.sin(0.7 * i + 1) * (1 + (i % 7));
    for (let j = 0; j < hiddenDim; j++) f[wOff / 4 + j] = 0.5 + 0.01 * j;
    const dv = new DataView(e.memory.buffer);
    dv.setFloat32(paramsOff, eps, true);          // RmsNormParams {eps, hidden_dim, num_elements}
    dv.setUint32(paramsOff + 4, hiddenDim, true);
    dv.setUint32(paramsOff + 8, numElements, true);
    const scratch = withScratch ? [rmsOff, 4 * numElements] : [0, 0];
    [xOff, 4 * n, wOff, 4 * hiddenDim, yOff, 4 * n, ...scratch, paramsOff, 12].forEach((v, i) => dv.setUint32(descOff + 4 * i, v, true));
    assert.equal(e.kernel_forward(descOff), 0);
    const F = new Float32Array(e.memory.buffer);
    for (let r = 0; r < numElements; r++) {
      let ss = 0;
      for (let j = 0; j < hiddenDim; j++) ss += F[xOff / 4 + r * hiddenDim + j] ** 2;
      const rms = Math.sqrt(ss / hiddenDim + Math.fround(eps));
      if (withScratch) assert.ok(Math.abs(F[rmsOff / 4 + r] - rms) <= 2e-6 * rms, `rms[${r}] = ${F[rmsOff / 4 + r]}, want ${rms}`);
      else assert.equal(F[rmsOff / 4 + r], 0, 'no scratch: nothing written there');
      for (let j = 0; j < hiddenDim; j++) {
        const i = r * hiddenDim + j, want = F[xOff / 4 + i] / rms * F[wOff / 4 + j];
        assert.ok(Math.abs(F[yOff / 4 + i] - want) <= 2e-6 * (1 + Math.abs(want)), `y[${i}] = ${F[yOff / 4 + i]}, want ${want}`);
      }
    }
  }
});

test('a workspace larger than the module arena: memory grown once, those pages refused to the host', () => {
  const e = instance('embedding_f32');
  const V = 200000, D = 2, n = 5;  // the backward's workspace, (V + 1 + n) int64, passes 1 MiB
  const base = hostRoom(e, 4 * V * D + 4096);
  const dyOff = base, idxOff = base + 64, dwOff = base + 128, paramsOff = dwOff + 4 * V * D, descOff = paramsOff + 32;
  const dv = new DataView(e.memory.buffer);
  const index = [7, 199999, 7, 0, 12345];
  for (let p = 0; p < n; p++) {
    dv.setInt32(idxOff + 4 * p, index[p], true);
    for (let j = 0; j < D; j++) dv.setFloat32(dyOff + 4 * (p * D + j), p + 0.25 * j, true);
  }
  [n, V, D, -1, 0].forEach((v, i) => dv.setInt32(paramsOff + 4 * i, v, true));  // {num_indices, V, D, padding_idx, dtype}
  const desc = [dyOff, 4 * n * D, idxOff, 4 * n, dwOff, 4 * V * D, 0, 0, paramsOff, 20];
  desc.forEach((v, i) => dv.setUint32(descOff + 4 * i, v, true));
  const before = e.memory.buffer.byteLength;
  assert.equal(e.kernel_backward(descOff), 0);
  const grown = e.memory.buffer.byteLength;
  assert.ok(grown > before, 'the module grew the memory for its workspace');
  const want = new Float64Array(V * D);
  for (let p = 0; p < n; p++) for (let j = 0; j < D; j++) want[index[p] * D + j] += p + 0.25 * j;
  const F = new Float32Array(e.memory.buffer, dwOff, V * D);
  for (let i = 0; i < V * D; i++) if (F[i] !== want[i]) assert.fail(`dweight[${i}] = ${F[i]}, want ${want[i]}`);
  // Again: the module's pages are reused, not grown again.
  assert.equal(e.kernel_backward(descOff), 0);
  assert.equal(e.memory.buffer.byteLength, grown);
  // A region in the module's pages (between the host's and the end) is refused.
  const d2 = desc.slice();
  d2[0] = before + 64;
  d2.forEach((v, i) => new DataView(e.memory.buffer).setUint32(descOff + 4 * i, v, true));
  const snapshot = Buffer.from(new Uint8Array(e.memory.buffer).slice(STACK_BYTES));
  assert.equal(e.kernel_backward(descOff), CODE.OUT_OF_BOUNDS);
  assert.ok(Buffer.from(new Uint8Array(e.memory.buffer).slice(STACK_BYTES)).equals(snapshot), 'nothing changed');
});

test('an option the library refuses (RMSNorm eps 0, attention kv_heads not dividing heads): code 3, host memory unchanged', () => {
  for (const c of manifest.cases.filter((x) => x.name === 'rmsnorm_f32_fwd' || x.name === 'attention_causal_gqa_f32_fwd')) {
    const { e, start, descAt } = place(c);
    const dv = new DataView(e.memory.buffer);
    const paramsAt = dv.getUint32(descAt + 32, true);
    if (c.name.startsWith('rmsnorm')) dv.setFloat32(paramsAt, 0, true);  // eps
    else dv.setUint32(paramsAt + 8, 3, true);                            // kv_heads 3 of 4 heads
    const pages = e.memory.buffer.byteLength;
    const host = Buffer.from(new Uint8Array(e.memory.buffer).slice(start));
    assert.equal(e.kernel_forward(descAt), CODE.INVALID_PARAMS, c.name);
    assert.equal(e.memory.buffer.byteLength, pages);
    assert.ok(Buffer.from(new Uint8Array(e.memory.buffer).slice(start)).equals(host), `${c.name}: host memory changed`);
  }
});

// ---------------------------------------------------------------- the extended forms, as a host writes them

test('GLU split form (torch.nn.functional.glu) and i64 embedding indices, computed here', () => {
  for (const splitDim of [0, 1]) {
    const e = instance('glu_f32');
    const rows = 4, cols = 6, n = rows * cols;
    const base = hostRoom(e, 4096);
    const xOff = base, yOff = base + 4 * n, paramsOff = yOff + 2 * n, descOff = paramsOff + 32;
    const F = new Float32Array(e.memory.buffer);
    for (let i = 0; i < n; i++) F[xOff / 4 + i] = Math.sin(0.9 * i + 0.3) * 2;
    const dv = new DataView(e.memory.buffer);
    // {num_elements, hidden_dim, f32 beta, dtype, split, split_dim}
    [rows, cols].forEach((v, i) => dv.setUint32(paramsOff + 4 * i, v, true));
    dv.setFloat32(paramsOff + 8, 1, true);
    [0, 1, splitDim].forEach((v, i) => dv.setUint32(paramsOff + 12 + 4 * i, v, true));
    [xOff, 4 * n, 0, 0, yOff, 2 * n, 0, 0, paramsOff, 24].forEach((v, i) => dv.setUint32(descOff + 4 * i, v, true));
    assert.equal(e.kernel_init(paramsOff, 24), 0);
    assert.equal(e.kernel_forward(descOff), 0);
    const hr = splitDim === 0 ? rows / 2 : rows, hc = splitDim === 1 ? cols / 2 : cols;
    for (let r = 0; r < hr; r++) for (let c = 0; c < hc; c++) {
      const a = F[xOff / 4 + r * cols + c];
      const b = splitDim === 0 ? F[xOff / 4 + (r + hr) * cols + c] : F[xOff / 4 + r * cols + c + hc];
      const want = a / (1 + Math.exp(-b)), got = F[yOff / 4 + r * hc + c];
      assert.ok(Math.abs(got - want) <= 2e-6 * (1 + Math.abs(want)), `split_dim ${splitDim}: y[${r}][${c}] = ${got}, want ${want}`);
    }
  }
  const e = instance('embedding_f32');
  const V = 5, D = 3, index = [4n, 0n, 2n, 4n];
  const base = hostRoom(e, 4096);
  const wOff = base, idxOff = base + 64, yOff = base + 128, paramsOff = base + 256, descOff = base + 320;
  const dv = new DataView(e.memory.buffer);
  for (let i = 0; i < V * D; i++) dv.setFloat32(wOff + 4 * i, i + 0.5, true);
  index.forEach((v, i) => dv.setBigInt64(idxOff + 8 * i, v, true));
  [index.length, V, D, -1, 0, 5].forEach((v, i) => dv.setInt32(paramsOff + 4 * i, v, true));  // ..., dtype, index_dtype i64
  [wOff, 4 * V * D, idxOff, 8 * index.length, yOff, 4 * index.length * D, 0, 0, paramsOff, 24].forEach((v, i) => dv.setUint32(descOff + 4 * i, v, true));
  assert.equal(e.kernel_forward(descOff), 0);
  index.forEach((v, p) => { for (let j = 0; j < D; j++) assert.equal(dv.getFloat32(yOff + 4 * (p * D + j), true), Number(v) * D + j + 0.5); });
  // The same indices declared i32: the index region is twice its size, code 1.
  dv.setInt32(paramsOff + 20, 4, true);
  assert.equal(e.kernel_forward(descOff), CODE.INVALID_INPUT);
});
