// The trainer in WebAssembly against native (the same C code, tools/train.c):
// the default task (selective copying, default model and seed), shortened to
// 60 steps with an evaluation every 30 so that the test takes well under a
// minute on a 2-core machine (the default 1500 steps take several minutes in
// wasm there; the model is then still near chance, so the accuracy check
// compares two runs, not a trained model). The first 50 losses must agree
// within 1e-3 relative and the final held-out accuracy within 2 points. Then `node wasm/gradkern.mjs train`
// must print what `gradkern train` prints (numbers aside), and its
// checkpoint must load in the native command; on 2 threads (the module with
// threads) it must print the same losses and write the same checkpoint, byte
// for byte, as on 1. `node wasm/gradkern.mjs
// train --device webgpu` (Dawn, the npm package webgpu, on this machine's
// adapter: Mesa's llvmpipe through OpenGL ES here) trains a tiny model 20
// steps on WebGPU and must end at the native CPU command's final loss within
// 1e-3 relative; with no adapter it fails, with the reason; a device lost
// mid-run stops it with an error naming the step.
// Run by ctest (wasm_train): GK_WASM_DIR, GK_TRAIN_TRACE (tests/train_trace.c)
// and GK_GRADKERN (the native command) come from there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from '../../wasm/gradkern.mjs';

const wasmDir = process.env.GK_WASM_DIR, trace = process.env.GK_TRAIN_TRACE, gradkern = process.env.GK_GRADKERN;
const program = fileURLToPath(new URL('../../wasm/gradkern.mjs', import.meta.url));
const OPTIONS = ['--steps', '60', '--eval-every', '30'];

test('the native programs and the module are there', () => {
  assert.ok(wasmDir && trace && gradkern, 'GK_WASM_DIR, GK_TRAIN_TRACE and GK_GRADKERN must be set (ctest sets them)');
  for (const f of [join(wasmDir, 'gradkern.wasm'), trace, gradkern]) assert.ok(existsSync(f), `${f} is missing`);
});

test('gk.train follows native: first 50 losses within 1e-3, final accuracy within 2 points', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-wasm-train-'));
  try {
    execFileSync(trace, [join(dir, 'native.json'), ...OPTIONS], { stdio: ['ignore', 'ignore', 'inherit'] });
    const native = JSON.parse(readFileSync(join(dir, 'native.json'), 'utf8'));
    assert.equal(native.exit, 0);
    const gk = await load({ module: join(wasmDir, 'gradkern.wasm') });
    const losses = [], evals = [];
    const r = gk.train({ args: OPTIONS, onStep: (p) => { losses.push(p.loss); }, onEval: (e) => { evals.push(e); } });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /final train loss [0-9.]+, eval loss [0-9.]+, eval accuracy [0-9.]+%/);
    assert.equal(losses.length, 60);
    assert.equal(native.loss.length, 60);
    for (let i = 0; i < 50; i++) {
      const rel = Math.abs(losses[i] - native.loss[i]) / Math.abs(native.loss[i]);
      assert.ok(rel <= 1e-3, `step ${i + 1}: wasm loss ${losses[i]}, native ${native.loss[i]} (relative ${rel})`);
    }
    assert.deepEqual(evals.map((e) => e.step), native.eval.map((e) => e.step));
    const wasmAcc = evals.at(-1).accuracy, nativeAcc = native.eval.at(-1).accuracy;
    assert.ok(Math.abs(wasmAcc - nativeAcc) <= 0.02, `final accuracy: wasm ${wasmAcc}, native ${nativeAcc}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('node wasm/gradkern.mjs train prints what gradkern train prints; its checkpoint loads natively', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-wasm-cli-'));
  try {
    const args = ['--steps', '3', '--eval-every', '2', '--checkpoint'];
    const env = { ...process.env, GK_NUM_THREADS: '1', GK_WASM_DIR: wasmDir };
    const wasm = spawnSync(process.execPath, [program, 'train', ...args, 'wasm.safetensors'], { cwd: dir, env,
                                                                                              encoding: 'utf8' });
    const native = spawnSync(gradkern, ['train', ...args, 'native.safetensors'], { cwd: dir, env, encoding: 'utf8' });
    assert.equal(wasm.status, 0, wasm.stderr);
    assert.equal(native.status, 0, native.stderr);
    const shape = (text) => text.replace(/-?[0-9][0-9.e+-]*[kMG]?/g, '#').replace(/native|wasm/g, 'NAME');
    assert.equal(shape(wasm.stdout), shape(native.stdout));
    assert.equal(wasm.stderr, '');
    const resumed = spawnSync(gradkern, ['train', ...args, 'wasm.safetensors', '--resume', 'wasm.safetensors'],
                              { cwd: dir, env, encoding: 'utf8' });
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /is finished: step 3 of --steps 3/);
    const bad = spawnSync(process.execPath, [program, 'train', '--steps', '0'], { cwd: dir, env, encoding: 'utf8' });
    const nativeBad = spawnSync(gradkern, ['train', '--steps', '0'], { cwd: dir, env, encoding: 'utf8' });
    assert.equal(bad.status, nativeBad.status);
    assert.equal(bad.stderr, nativeBad.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('node wasm/gradkern.mjs train on 2 threads (gradkern-threads.wasm): the same losses and checkpoint as on 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-wasm-threads-'));
  try {
    const env = { ...process.env, GK_WASM_DIR: wasmDir };
    delete env.GK_NUM_THREADS;
    const runs = [1, 2].map((n) => {
      const r = spawnSync(process.execPath, [program, 'train', '--steps', '20', '--eval-every', '10', '--threads', String(n),
                                             '--checkpoint', `t${n}.safetensors`], { cwd: dir, env, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`\\b${n} threads?\\b`), `the run says it used ${n} thread(s)`);
      return r.stdout;
    });
    const losses = (text) => text.split('\n').filter((l) => /loss/.test(l)).map((l) => l.replace(/ +[0-9.]+k? tok(ens)?\/s.*$/, ''));
    assert.equal(losses(runs[0]).length, 4);  // 2 evaluations, the last step, the final line
    assert.deepEqual(losses(runs[1]), losses(runs[0]));
    assert.ok(readFileSync(join(dir, 't2.safetensors')).equals(readFileSync(join(dir, 't1.safetensors'))),
              'the checkpoints of the two runs differ');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('node wasm/gradkern.mjs train --device webgpu ends at the native CPU loss; without an adapter it fails', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-wasm-webgpu-'));
  try {
    const args = ['--steps', '20', '--width', '16', '--batch', '4', '--warmup', '2', '--eval-every', '0',
                  '--eval-batches', '1', '--checkpoint'];
    const env = { ...process.env, GK_NUM_THREADS: '1', GK_WASM_DIR: wasmDir };
    const webgpu = spawnSync(process.execPath, [program, 'train', ...args, 'webgpu.safetensors', '--device', 'webgpu'],
                             { cwd: dir, env, encoding: 'utf8' });
    const native = spawnSync(gradkern, ['train', ...args, 'native.safetensors'], { cwd: dir, env, encoding: 'utf8' });
    assert.equal(webgpu.status, 0, webgpu.stderr);
    assert.equal(native.status, 0, native.stderr);
    assert.match(webgpu.stdout, /^device: webgpu, .+: weights, gradients, AdamW moments and training activations on it/m);
    const finalLoss = (text) => Number(/final train loss ([0-9.]+)/.exec(text)?.[1]);
    const [gpuLoss, cpuLoss] = [finalLoss(webgpu.stdout), finalLoss(native.stdout)];
    assert.ok(Math.abs(gpuLoss - cpuLoss) <= 1e-3 * cpuLoss, `final loss: webgpu ${gpuLoss}, native cpu ${cpuLoss}`);
    const resumed = spawnSync(gradkern, ['train', ...args, 'webgpu.safetensors', '--resume', 'webgpu.safetensors'],
                              { cwd: dir, env, encoding: 'utf8' });
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /is finished: step 20 of --steps 20/);
    // Dawn here has no D3D12: no adapter, so the run must fail and say why (never train on the CPU instead).
    const none = spawnSync(process.execPath, [program, 'train', ...args, 'none.safetensors', '--device', 'webgpu'],
                           { cwd: dir, env: { ...env, GK_DAWN_BACKEND: 'd3d12' }, encoding: 'utf8' });
    assert.equal(none.status, 1, none.stdout + none.stderr);
    assert.match(none.stderr, /--device webgpu: no WebGPU device: Dawn's d3d12 backend found no adapter/);
    assert.doesNotMatch(none.stdout, /step|loss/);
    assert.ok(!existsSync(join(dir, 'none.safetensors')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A WebGPU device lost in the middle of a run (destroyed once the device
// thread has run 1000 of the worker's batches, about ten steps of this model;
// the trainer's output is buffered until it ends): the run must stop with an
// error that names the step and the loss of the device, within the test's
// minute (no wait that never returns), and write no checkpoint.
test('a WebGPU device lost mid-run stops the run, naming the step', async () => {
  const { nodeDevice, WebGpuHost } = await import('../../wasm/webgpu.mjs');
  const { Worker } = await import('node:worker_threads');
  const dir = mkdtempSync(join(tmpdir(), 'gk-wasm-lost-'));
  try {
    const { device, reason } = await nodeDevice();
    assert.ok(device, `no WebGPU device: ${reason}`);
    const host = new WebGpuHost(device);
    const run = {
      command: 'train', cwd: dir, terminal: false, env: { GK_NUM_THREADS: '1' }, threads: 1,
      module: join(wasmDir, 'gradkern.wasm'),
      args: ['--steps', '100000', '--width', '16', '--batch', '4', '--eval-every', '0', '--device', 'webgpu',
             '--checkpoint', 'lost.safetensors'],
    };
    const worker = new Worker(new URL('../../wasm/gradkern.mjs', import.meta.url),
                              { workerData: { gkTrain: run, link: host.linkData() }, stdout: true, stderr: true });
    host.serve(worker);
    let out = '', err = '', status = null;
    worker.stdout.on('data', (d) => { out += d; });
    worker.stderr.on('data', (d) => { err += d; });
    worker.on('message', (m) => { if (m && m.exit !== undefined) status = m.exit; });
    const watch = setInterval(() => {
      if (host.batches < 1000) return;
      clearInterval(watch);
      device.destroy();
    }, 5);
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no end within a minute:\n${out}${err}`)), 60000);
      worker.on('exit', () => { clearTimeout(timer); clearInterval(watch); resolve(); });
    });
    assert.equal(status, 1, out + err);
    assert.match(err, /gradkern train: step \d+, forward and backward: webgpu: .*the device was lost \(destroyed\)/, err);
    assert.ok(!existsSync(join(dir, 'lost.safetensors')), 'a checkpoint was written after the device was lost');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
