// The WebGPU backend's host (wasm/webgpu.mjs, WebGpuHost) driven directly,
// as a worker's batches and requests would drive it, on the device Node gets
// (Dawn, the npm package `webgpu`; Mesa's llvmpipe through OpenGL ES here):
// a read returns the bytes written, and a read whose copy the device rejects
// (a range past the buffer's end) answers with the device's error instead
// of the staging buffer's zeros; a pipeline asked for again after its plan
// is gone is the one compiled before, while other constants compile anew,
// and at most PIPELINE_CACHE are kept. Run by ctest (wasm_webgpu_host).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PIPELINE_CACHE, WebGpuHost, nodeDevice } from '../../wasm/webgpu.mjs';

const { device, reason } = await nodeDevice();

// Run one batch with a request on `host` as a worker's request() would post
// it; the status word and the answer's bytes (or the error's text).
async function request(host, batch, sync, bytes) {
  const control = new SharedArrayBuffer(16), data = new SharedArrayBuffer(Math.max(bytes, 1024));
  await host.run({ gkWebgpu: true, batch, sync, control, data });
  const words = new Int32Array(control);
  assert.equal(words[0], 1, 'the request was answered');
  const status = words[1];
  return { status, bytes: new Uint8Array(data).slice(0, status ? words[2] : bytes) };
}

test('a read returns the bytes written; a read past the buffer fails with the device error', async () => {
  assert.ok(device, `no WebGPU device: ${reason}`);
  const host = new WebGpuHost(device);
  const written = Uint8Array.from({ length: 256 }, (_, i) => (i * 7 + 3) & 255);
  const ok = await request(host, [['create', 1, 256], ['write', 1, 0, written]], { op: 'read', id: 1, offset: 16, bytes: 64 }, 64);
  assert.equal(ok.status, 0, new TextDecoder().decode(ok.bytes));
  assert.deepEqual(ok.bytes, written.slice(16, 80));
  const past = await request(host, [], { op: 'read', id: 1, offset: 192, bytes: 128 }, 128);
  assert.equal(past.status, 1, 'a read past the end of the buffer must fail');
  assert.match(new TextDecoder().decode(past.bytes), /reading buffer 1/);
});

test('pipelines stay compiled for plans made again, the most recently used PIPELINE_CACHE of them', () => {
  assert.ok(device, `no WebGPU device: ${reason}`);
  const host = new WebGpuHost(device);
  const wgsl = `override k: u32 = 1u;
@group(0) @binding(0) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(1) fn main() { b[0] = k; }`;
  const make = (id, k) => {
    host.command(['pipeline', id, wgsl, 'main', `k=${k}`]);
    return host.pipelines.get(id).pipeline;
  };
  const first = make(1, 2);
  host.command(['unpipeline', 1]);
  assert.equal(host.pipelines.size, 0, "the plan's pipeline id is gone");
  assert.equal(make(2, 2), first, 'the same shader and constants: the compiled pipeline');
  assert.notEqual(make(3, 3), first, 'other constants: another pipeline');
  for (let i = 0; i < PIPELINE_CACHE; i++) make(10 + i, 100 + i);
  assert.equal(host.compiled.size, PIPELINE_CACHE, 'no more than PIPELINE_CACHE kept');
  assert.equal(host.pipelines.get(2).pipeline, first, 'a live plan keeps its pipeline when the cache drops it');
  assert.notEqual(make(4, 2), first, 'dropped from the cache (least recently used): compiled again');
});
