// The trainer in WebAssembly against native (the same C code, tools/train.c):
// the default task (selective copying, default model and seed), shortened to
// 60 steps with an evaluation every 30 so that the test takes well under a
// minute on a 2-core machine (the default 1500 steps take several minutes in
// wasm there; the model is then still near chance, so the accuracy check
// compares two runs, not a trained model). The first 50 losses must agree
// within 1e-3 relative and the final held-out accuracy within 2 points. Then `node wasm/gradkern.mjs train`
// must print what `gradkern train` prints (numbers aside), and its
// checkpoint must load in the native command.
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
