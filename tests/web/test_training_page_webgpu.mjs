// The training page on WebGPU in headless Chromium (SwiftShader's adapter,
// with --enable-unsafe-webgpu): opens web/ from the project's server with
// no backend asked for, and checks that
//   - the page found the adapter, chose WebGPU by itself and says so (a
//     page that fell back to WebAssembly fails, with its reason);
//   - pressing Train runs --steps steps on WebGPU (the trainer's output
//     names the device), every loss finite, and the loss fell: the mean of
//     the last 3 steps is at least 0.1 below the first step's;
//   - the run is the native one on the CPU: the same options given to the
//     native `gradkern train` end at the same training loss (1e-3 relative);
//   - the screenshot saved to --out is not blank and shows the loss line.
// SwiftShader takes seconds a step for the default model (batch 32 x 64),
// so the run is short. Anything that keeps it from running (no Chromium,
// no puppeteer-core, no build/wasm/gradkern.wasm) is a failure naming it.
//
//   node tests/web/test_training_page_webgpu.mjs --gradkern build/gradkern --out DIR [--root DIR] [--steps N]
import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { checkScreenshot, launchChromium, openTrainingPage, pagePrerequisites, trainInPage } from './browser.mjs';
import { finalLoss, readOptions, sameLoss, tally } from './cli.mjs';

const opts = readOptions({ root: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), steps: 6,
                          gradkern: null, out: null });
const { check, fatal, finish } = tally();

const startServer = await pagePrerequisites(opts, fatal, 4);

const started = Date.now();
const seconds = () => ((Date.now() - started) / 1000).toFixed(1);
let browser;
try {
  browser = await launchChromium({ webgpu: true });
} catch (err) {
  fatal(`cannot run: ${err.message}`);
}
const { server, url } = await startServer({ port: 0, root: opts.root });

try {
  const { page, env, errors } = await openTrainingPage(browser, url, { steps: opts.steps, 'eval-every': 0, seed: 1 });
  if (!check(env.state === 'ready', `the page loaded the module (${seconds()} s): ${env.error ?? env.text}`))
    throw new Error('the page did not load');
  if (!check(env.backend === 'webgpu' && env.webgpu?.available,
             `the page chose WebGPU by itself: ${env.note} (found: ${JSON.stringify(env.webgpu)})`))
    throw new Error('the page fell back to WebAssembly');

  const result = await trainInPage(page, { timeout: 270_000 });
  if (!check(result.state === 'done' && result.backend === 'webgpu',
             `training finished on ${result.backend} in the page (${result.seconds.toFixed(1)} s): ` +
             `${result.error ?? `exit code ${result.exitCode}`}`))
    throw new Error('training failed');
  const log = await page.$eval('#log', (el) => el.textContent);
  check(/^device: webgpu, /m.test(log), `the trainer ran on the WebGPU device: ${/^device: .*$/m.exec(log)?.[0]}`);
  const losses = result.losses.map((p) => p.loss);
  check(result.losses.length === opts.steps && result.losses.every((p, i) => p.step === i + 1) &&
        losses.every(Number.isFinite), `one finite loss per step, steps 1..${opts.steps} (got ${losses.length})`);
  const tail = losses.slice(-3).reduce((a, b) => a + b, 0) / 3;
  check(tail < losses[0] - 0.1, `the loss fell: ${losses.map((l) => l.toFixed(4)).join(' ')} (mean of the last 3 ` +
        `${tail.toFixed(4)}, first ${losses[0].toFixed(4)})`);
  check(errors.length === 0, `no errors on the page${errors.length ? ': ' + errors.join('; ') : ''}`);
  await checkScreenshot(page, join(opts.out, 'training_page_webgpu.png'), check);

  const args = ['train', '--steps', String(opts.steps), '--seed', '1', '--eval-every', '0', '--threads', '1', '--quiet'];
  let nativeOut;
  try {
    nativeOut = (await promisify(execFile)(opts.gradkern, args, { maxBuffer: 1 << 24 })).stdout;
  } catch (err) {
    nativeOut = `${err.stdout ?? ''}${err.stderr ?? ''}${err.message}`;
  }
  const nativeLoss = finalLoss(nativeOut);
  const last = losses.at(-1);
  check(sameLoss(nativeLoss, last),
        `the native run on the CPU with the same options ends at the same loss: native ${nativeLoss}, ` +
        `WebGPU in the browser ${last.toFixed(4)}${Number.isFinite(nativeLoss) ? '' : `\n${nativeOut}`}`);
} catch (err) {
  check(false, `the browser test stopped: ${err.stack ?? err}`);
} finally {
  await browser.close();
  server.close();
}
finish(` (${seconds()} s)`);
