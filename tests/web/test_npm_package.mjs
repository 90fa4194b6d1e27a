// The npm package of the WebAssembly build, used the way another project
// uses it:
//   - package.json's version is the header's (GK_VERSION_MAJOR/MINOR/PATCH of
//     include/gradkern.h, where the version is defined);
//   - `npm pack` at the repository root makes gradkern-X.Y.Z.tgz holding the
//     ES module, its TypeScript declarations, every build/wasm/*.wasm and the
//     web page with its server;
//   - a new project in --out installs the tarball offline
//     (`npm install ./gradkern-X.Y.Z.tgz`) and, in Node, imports 'gradkern'
//     and runs RMSNorm forward and backward, checked against the formulas in
//     f64;
//   - the installed package's server (its `gradkern-web` bin) serves the
//     training page cross-origin isolated, and in headless Chromium it
//     trains, and its Stop button ends the run early with a checkpoint.
// Anything that keeps it from running is a failure naming what is missing.
//
//   node tests/web/test_npm_package.mjs --out DIR [--root DIR]
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { launchChromium, openTrainingPage, trainInPage } from './browser.mjs';
import { readOptions, tally } from './cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const execFileP = promisify(execFile);
const opts = readOptions({ root: resolve(here, '..', '..'), out: null });
const { check, fatal, finish } = tally();
const sh = async (cmd, args, cwd) => {
  try {
    const { stdout, stderr } = await execFileP(cmd, args, { cwd, maxBuffer: 1 << 24 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: (err.stderr ?? '') + err.message };
  }
};

if (!opts.out) fatal('cannot run: --out DIR (the scratch directory) is missing');
if (!existsSync(join(opts.root, 'build/wasm/gradkern.wasm')))
  fatal(`cannot run: ${join(opts.root, 'build/wasm/gradkern.wasm')} is missing (make wasm builds it)`);
rmSync(opts.out, { recursive: true, force: true });
mkdirSync(opts.out, { recursive: true });

// ------------------------------------------------------------------ version
const header = readFileSync(join(opts.root, 'include/gradkern.h'), 'utf8');
const part = (name) => header.match(new RegExp(`^#define GK_VERSION_${name} (\\d+)$`, 'm'))?.[1];
const headerVersion = ['MAJOR', 'MINOR', 'PATCH'].map(part).join('.');
const manifest = JSON.parse(readFileSync(join(opts.root, 'package.json'), 'utf8'));
check(manifest.version === headerVersion,
      `package.json's version ${manifest.version} is include/gradkern.h's ${headerVersion}`);

// --------------------------------------------------------------------- pack
const packed = await sh('npm', ['pack', '--json', '--pack-destination', opts.out], opts.root);
if (!check(packed.code === 0, `npm pack${packed.code ? ': ' + packed.stderr : ''}`)) process.exit(1);
const [info] = JSON.parse(packed.stdout);
const tarball = join(opts.out, info.filename);
const inTarball = new Set(info.files.map((f) => f.path));
const wasmFiles = readdirSync(join(opts.root, 'build/wasm')).filter((f) => f.endsWith('.wasm')).map((f) => `build/wasm/${f}`);
const expected = ['package.json', 'wasm/gradkern.mjs', 'wasm/webgpu.mjs', 'wasm/gradkern.d.ts', 'web/index.html', 'web/app.js',
                  'web/train-worker.js', 'web/serve.mjs', ...wasmFiles];
const missing = expected.filter((f) => !inTarball.has(f));
check(missing.length === 0, `${info.filename} (${(info.size / 1024).toFixed(0)} KiB, ${info.entryCount} files) ` +
      `holds the module, its types, ${wasmFiles.length} .wasm files and the page` +
      (missing.length ? `; missing: ${missing.join(', ')}` : ''));

// ------------------------------------------------------------------ install
const project = join(opts.out, 'consumer');
mkdirSync(project);
writeFileSync(join(project, 'package.json'),
              JSON.stringify({ name: 'gradkern-consumer', private: true, type: 'module' }, null, 2));
const installed = await sh('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], project);
if (!check(installed.code === 0, `npm install --offline ${info.filename} in a new project` +
           (installed.code ? `: ${installed.stderr}` : '')))
  process.exit(1);
const pkgDir = join(project, 'node_modules', 'gradkern');
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
check(existsSync(join(pkgDir, pkg.types)) && existsSync(join(pkgDir, pkg.exports['.'].types)) &&
      existsSync(join(pkgDir, pkg.exports['.'].import)),
      `the installed package's exports and types name its files (${pkg.exports['.'].import}, ${pkg.types})`);

// ---------------------------------------------------------------- run an op
// RMSNorm over rows of 8: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps);
// backward dx = rstd * (w dy - x rstd^2 mean(x w dy)), dw = sum_rows dy x rstd.
writeFileSync(join(project, 'use.mjs'), `
import { load } from 'gradkern';
const gk = await load();
const rows = 3, n = 8, eps = 1e-6;
const x = Float32Array.from({ length: rows * n }, (_, i) => Math.sin(i + 1));
const weight = Float32Array.from({ length: n }, (_, i) => 0.5 + i / 8);
const dy = Float32Array.from({ length: rows * n }, (_, i) => Math.cos(3 * i));
const fwd = gk.run({ op: 'rmsnorm', direction: 'forward', dtype: 'f32', shape: [rows, n], norm: { eps } }, { x, weight });
const bwd = gk.run({ op: 'rmsnorm', direction: 'backward', dtype: 'f32', shape: [rows, n], norm: { eps } },
                   { dy, x, weight, rstd: fwd.rstd });
let err = 0;
const dw = new Float64Array(n);
for (let r = 0; r < rows; r++) {
  let ss = 0, dot = 0;
  for (let j = 0; j < n; j++) ss += x[r * n + j] ** 2;
  const rstd = 1 / Math.sqrt(ss / n + eps);
  for (let j = 0; j < n; j++) dot += x[r * n + j] * weight[j] * dy[r * n + j];
  for (let j = 0; j < n; j++) {
    const i = r * n + j;
    err = Math.max(err, Math.abs(fwd.y[i] - x[i] * rstd * weight[j]));
    err = Math.max(err, Math.abs(bwd.dx[i] - rstd * (weight[j] * dy[i] - x[i] * rstd * rstd * dot / n)));
    dw[j] += dy[i] * x[i] * rstd;
  }
}
for (let j = 0; j < n; j++) err = Math.max(err, Math.abs(bwd.dweight[j] - dw[j]));
console.log(JSON.stringify({ version: gk.version, simd: gk.simd, maxError: err }));
`);
const used = await sh(process.execPath, ['use.mjs'], project);
let out = null;
try {
  out = JSON.parse(used.stdout);
} catch {
  // reported below
}
check(used.code === 0 && out && out.version === headerVersion && out.maxError < 1e-5,
      `import 'gradkern' in Node runs RMSNorm forward and backward: ` +
      (out ? `version ${out.version}, SIMD ${out.simd}, largest error vs f64 ${out.maxError.toExponential(2)} (< 1e-5)`
           : `${used.stdout}${used.stderr}`));

// ------------------------------------------------ the page from the package
const bin = join(project, 'node_modules', '.bin', 'gradkern-web');
const server = spawn(bin, ['--port', '0'], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] });
const serverExit = new Promise((r) => server.on('exit', r));
try {
  const url = await new Promise((resolveUrl, reject) => {
    let text = '';
    server.stdout.on('data', (d) => {
      text += d;
      const m = /serving (\S+)/.exec(text);
      if (m) resolveUrl(m[1]);
    });
    server.stderr.on('data', (d) => { text += d; });
    server.on('exit', (code) => reject(new Error(`gradkern-web exited with ${code}: ${text}`)));
    setTimeout(() => reject(new Error(`gradkern-web printed no address in 10 s: ${text}`)), 10_000);
  });
  const res = await fetch(new URL('../build/wasm/gradkern.wasm', url));
  const served = Buffer.from(await res.arrayBuffer());
  check(res.ok && res.headers.get('content-type') === 'application/wasm' &&
        res.headers.get('cross-origin-embedder-policy') === 'require-corp' &&
        res.headers.get('cross-origin-opener-policy') === 'same-origin' &&
        served.equals(readFileSync(join(pkgDir, 'build/wasm/gradkern.wasm'))),
        `the installed package's gradkern-web serves its gradkern.wasm as application/wasm with COOP/COEP at ${url}`);

  const browser = await launchChromium();
  try {
    const { page, env, errors } = await openTrainingPage(browser, url, { steps: 1000, 'eval-every': 0 });
    check(env.state === 'ready' && env.isolated, `the page from the package loads the module, cross-origin isolated: ` +
          (env.error ?? env.text));
    // Stop after a few of the 1000 steps: the run ends there with a checkpoint.
    const finished = trainInPage(page);
    await page.waitForFunction(() => window.gradkernPage.losses.length >= 3, { timeout: 60_000, polling: 50 });
    await page.click('#stop');
    const result = await finished;
    const n = result.losses.length;
    check(result.state === 'done' && n >= 3 && n < 1000 && result.losses.every((p) => Number.isFinite(p.loss)) &&
          result.checkpointName?.endsWith(`-step${n}.safetensors`) && errors.length === 0,
          `it trains, and Stop ends the run at step ${n} of 1000 with a checkpoint: ` +
          `${result.error ?? result.losses.map((p) => p.loss.toFixed(4)).join(' ')}` +
          (errors.length ? `; page errors: ${errors.join('; ')}` : ''));
  } finally {
    await browser.close();
  }
} catch (err) {
  check(false, `the page from the package: ${err.message}`);
} finally {
  server.kill();
  await serverExit;
}
finish();
