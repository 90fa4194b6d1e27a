// The training page in headless Chromium: opens web/ from the project's
// server (web/serve.mjs), trains the default Mamba on selective copying for
// --steps steps by pressing Train, and checks that
//   - the page is cross-origin isolated and runs the module with SIMD;
//   - every step reported a finite loss, and the loss fell: the mean of the
//     last 10 steps is below --max-loss (the first step's loss is about
//     ln 10 = 2.30, uniform over the vocabulary; ln 8 = 2.08 is chance among
//     the 8 values);
//   - the browser's run is the native one: the same options given to the
//     native `gradkern train` end at the same training loss (1e-3 relative);
//   - the checkpoint downloaded with the page's button loads natively:
//     `gradkern train --resume` reports the finished run and continues it
//     for 10 more steps;
//   - the same page learns a text file's bytes (the text task), and the
//     native `gradkern sample` continues text with its downloaded checkpoint;
//     so does a LLaMA chosen with the model control;
//   - the page's sampler continues a prompt with that LLaMA, writing the
//     text the module's `gradkern sample` writes from the downloaded
//     checkpoint (node wasm/gradkern.mjs sample, the same options);
//   - "continue from" takes the LLaMA's checkpoint back: Train resumes it
//     (steps 13..16) and ends at the loss of the native `gradkern train
//     --resume` of the same checkpoint (1e-3 relative);
//   - the screenshot saved to --out is not blank (luminance variance, number
//     of colours) and shows the plotted loss line.
// Anything that keeps it from running (no Chromium, no puppeteer-core, no
// build/wasm/gradkern.wasm) is a failure that names what is missing.
//
//   node tests/web/test_training_page.mjs --gradkern build/gradkern --out DIR
//        [--root DIR] [--steps N] [--max-loss X]
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { checkScreenshot, launchChromium, openTrainingPage, pagePrerequisites, trainInPage } from './browser.mjs';
import { finalLoss, readOptions, sameLoss, tally } from './cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);

const opts = readOptions({ root: resolve(here, '..', '..'), steps: 40, maxLoss: 2.15, gradkern: null, out: null });
const { check, fatal, finish } = tally();

// ------------------------------------------------------------ prerequisites

const startServer = await pagePrerequisites(opts, fatal, 11);
const textFile = join(opts.root, 'README.md');
if (!existsSync(textFile)) fatal(`cannot run: ${textFile} (the text the text task learns) is missing`);
const downloads = join(opts.out, 'downloads');
rmSync(downloads, { recursive: true, force: true });
mkdirSync(downloads);
const started = Date.now();
const seconds = () => ((Date.now() - started) / 1000).toFixed(1);
let browser;
try {
  browser = await launchChromium();
} catch (err) {
  fatal(`cannot run: ${err.message}`);
}
const { server, url } = await startServer({ port: 0, root: opts.root });

try {
  // ------------------------------------------------------------- training
  const { page, env, errors } = await openTrainingPage(browser, url, { steps: opts.steps, 'eval-every': 0, seed: 1,
                                                                        backend: 'wasm' });
  const cdp = await page.createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
  if (!check(env.state === 'ready', `the page loaded the module (${seconds()} s): ${env.error ?? env.text}`))
    throw new Error('the page did not load');
  check(env.isolated, 'the page is cross-origin isolated (COOP/COEP headers)');
  check(env.text.includes('SIMD: yes'), 'the page runs the SIMD module');
  const threads = Number(/threads: (\d+)/.exec(env.text)?.[1]);
  const processors = await page.evaluate(() => navigator.hardwareConcurrency);
  check(threads === processors,
        `the page's worker runs the module with threads (gradkern-threads.wasm): ${threads} of ${processors} processors`);
  // Chromium has relaxed SIMD on: the worker loads the relaxed-SIMD module with threads where it validates.
  const relaxed = await page.evaluate(async () => (await import(new URL('../wasm/gradkern.mjs', location.href)))
    .hasRelaxedSimd());
  const build = /build: ([a-z-]+)/.exec(env.text)?.[1];
  check(relaxed && build === 'relaxed-threads',
        `the page's worker runs the relaxed-SIMD module (Chromium validates relaxed SIMD: ${relaxed}): build ${build}`);
  check(env.backend === 'wasm' && /on the CPU in WebAssembly/.test(env.note),
        `the page trains in WebAssembly, as ?backend=wasm asks: ${env.note}`);

  const result = await trainInPage(page);
  if (!check(result.state === 'done', `training finished in the page (${result.seconds.toFixed(1)} s): ` +
             `${result.error ?? `exit code ${result.exitCode}`}`))
    throw new Error('training failed');
  const losses = result.losses.map((p) => p.loss);
  check(result.losses.length === opts.steps && result.losses.every((p, i) => p.step === i + 1),
        `one loss per step, steps 1..${opts.steps} (got ${result.losses.length})`);
  check(losses.every(Number.isFinite), 'every loss is finite');
  const tail = losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
  check(tail < opts.maxLoss, `the loss fell: first step ${losses[0].toFixed(4)}, mean of the last 10 ` +
        `${tail.toFixed(4)} < ${opts.maxLoss}`);
  const evals = result.evals;
  check(evals.length === 1 && evals[0].step === opts.steps && evals[0].accuracy >= 0 && evals[0].accuracy <= 1,
        `held-out accuracy shown at the end: ${evals.map((e) => (100 * e.accuracy).toFixed(1) + '%').join(', ')}`);
  check(errors.length === 0, `no errors on the page${errors.length ? ': ' + errors.join('; ') : ''}`);

  // ----------------------------------------------------------- screenshot
  await checkScreenshot(page, join(opts.out, 'training_page.png'), check);

  // ------------------------------------------------------------- download
  // Presses Download and waits for the file `name` to arrive; its path.
  const download = async (name) => {
    await page.click('#download');
    const file = join(downloads, name);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !(existsSync(file) && !readdirSync(downloads).some((f) => f.endsWith('.crdownload'))))
      await new Promise((r) => setTimeout(r, 100));
    if (!check(existsSync(file) && statSync(file).size > 0, `the checkpoint downloaded: ${file}`))
      throw new Error('no download');
    return file;
  };
  const file = await download(result.checkpointName);

  // --------------------------------------------------------------- native
  // The native command's exit code, stdout (bytes) and stdout + stderr (text).
  const native = async (args) => {
    try {
      const { stdout, stderr } = await run(opts.gradkern, args, { maxBuffer: 1 << 24, encoding: 'buffer' });
      return { code: 0, stdout, out: `${stdout}${stderr}` };
    } catch (err) {
      return { code: err.code ?? 1, stdout: err.stdout ?? Buffer.alloc(0),
               out: `${err.stdout ?? ''}${err.stderr ?? ''}${err.message}` };
    }
  };
  const common = ['--steps', String(opts.steps), '--seed', '1', '--eval-every', '0', '--threads', '1'];
  const nativeRun = await native(['train', ...common, '--quiet', '--checkpoint', join(opts.out, 'native.safetensors')]);
  const nativeLoss = finalLoss(nativeRun.out);
  const last = losses.at(-1);
  check(nativeRun.code === 0 && sameLoss(nativeLoss, last),
        `the native run with the same options ends at the same loss: native ${nativeLoss}, browser ${last.toFixed(4)}` +
        (nativeRun.code ? `\n${nativeRun.out}` : ''));

  const resumed = join(opts.out, 'resumed.safetensors');
  const finished = await native(['train', ...common, '--resume', file, '--checkpoint', resumed]);
  check(finished.code === 0 && finished.out.includes('is finished'),
        `gradkern train --resume reads the downloaded checkpoint as a finished run:\n${finished.out.trim()}`);
  const more = ['--steps', String(opts.steps + 10), '--seed', '1', '--eval-every', '0', '--threads', '1'];
  const continued = await native(['train', ...more, '--allow-changes', '--resume', file, '--checkpoint', resumed]);
  const continuedLoss = finalLoss(continued.out);
  check(continued.code === 0 && Number.isFinite(continuedLoss) && continuedLoss < opts.maxLoss,
        `gradkern train --resume continues it natively to step ${opts.steps + 10}: final train loss ${continuedLoss}` +
        (continued.code ? `\n${continued.out}` : ''));

  // ---------------------------------------------------------- text task
  // The same page learns a file's bytes (this repository's README); the
  // checkpoint is a text model that the native `gradkern sample` continues.
  await page.select('#task', 'text');
  const [dataInput] = await page.$$('#data');
  await dataInput.uploadFile(textFile);
  await page.$eval('#steps', (el) => { el.value = String(12); });
  const text = await trainInPage(page);
  const textLosses = text.losses.map((p) => p.loss);
  check(text.state === 'done' && textLosses.length === 12 && textLosses.every(Number.isFinite) &&
        textLosses.at(-1) < textLosses[0] - 0.5,
        `the text task trains 12 steps on ${textFile}: loss ${textLosses[0]?.toFixed(4)} -> ` +
        `${textLosses.at(-1)?.toFixed(4)}${text.error ? `: ${text.error}` : ''}`);
  const textCheckpoint = await download(text.checkpointName);
  const sampled = await native(['sample', '--checkpoint', textCheckpoint, '--prompt', 'gradkern ', '--tokens', '40',
                                '--seed', '1']);
  check(sampled.code === 0 && sampled.stdout.length === 40,
        `gradkern sample writes 40 bytes with the downloaded text model: ${JSON.stringify(sampled.out.slice(0, 120))}`);

  // ---------------------------------------------------------- LLaMA
  // The model control: a LLaMA learns the same bytes, and its checkpoint
  // (recording the architecture) samples natively too.
  await page.select('#model', 'llama');
  const llama = await trainInPage(page);
  const llamaLosses = llama.losses.map((p) => p.loss);
  check(llama.state === 'done' && llamaLosses.length === 12 && llamaLosses.every(Number.isFinite) &&
        llamaLosses.at(-1) < llamaLosses[0] - 0.5,
        `a LLaMA trains 12 steps on ${textFile}: loss ${llamaLosses[0]?.toFixed(4)} -> ` +
        `${llamaLosses.at(-1)?.toFixed(4)}${llama.error ? `: ${llama.error}` : ''}`);
  check(llama.checkpointName.startsWith('gradkern-llama-text-'), `the LLaMA's checkpoint is named for it: ` +
        llama.checkpointName);
  const llamaCheckpoint = await download(llama.checkpointName);
  const llamaSample = await native(['sample', '--checkpoint', llamaCheckpoint, '--prompt', 'gradkern ', '--tokens', '40',
                                  '--seed', '1']);
  check(llamaSample.code === 0 && llamaSample.stdout.length === 40,
        `gradkern sample writes 40 bytes with the downloaded LLaMA: ${JSON.stringify(llamaSample.out.slice(0, 120))}`);

  // ------------------------------------------------------- sampling in the page
  await page.$eval('#prompt', (el) => { el.value = 'gradkern '; });
  await page.$eval('#tokens', (el) => { el.value = '40'; });
  await page.$eval('#temperature', (el) => { el.value = '0.8'; });
  await page.click('#sample');
  await page.waitForFunction(() => window.gradkernPage.samples.at(-1)?.exitCode != null, { timeout: 60_000, polling: 250 });
  const pageSample = await page.evaluate(() => window.gradkernPage.samples.at(-1));
  let moduleSample = '';
  // Node runs the page's build: relaxed SIMD, fused or not, changes the logits' last bits.
  const relaxedFlag = build?.startsWith('relaxed') ? ['--experimental-wasm-relaxed-simd'] : [];
  try {
    moduleSample = (await run(process.execPath, [...relaxedFlag, join(opts.root, 'wasm', 'gradkern.mjs'), 'sample',
                                                 '--checkpoint', llamaCheckpoint, '--prompt', 'gradkern ',
                                                 '--tokens', '40', '--temperature', '0.8', '--seed', '1'],
                              { cwd: opts.root, env: { ...process.env, GK_WASM_DIR: join(opts.root, 'build', 'wasm') } })).stdout;
  } catch (err) {
    moduleSample = `(failed: ${err.message})`;
  }
  check(pageSample.exitCode === 0 && pageSample.text.length > 0 && pageSample.text === moduleSample,
        `the page's sampler writes what the module's gradkern sample writes from the downloaded LLaMA: ` +
        `${JSON.stringify(pageSample.text)} vs ${JSON.stringify(moduleSample)}` +
        (pageSample.exitCode ? `\n${pageSample.stderr}` : ''));

  // ----------------------------------------------------- resuming in the page
  const [resumeInput] = await page.$$('#resume');
  await resumeInput.uploadFile(llamaCheckpoint);
  await page.$eval('#steps', (el) => { el.value = '16'; });
  const resumedRun = await trainInPage(page);
  const resumedSteps = resumedRun.losses.map((p) => p.step);
  check(resumedRun.state === 'done' && resumedRun.resumed !== null &&
        resumedSteps.join(',') === '13,14,15,16' && resumedRun.losses.every((p) => Number.isFinite(p.loss)),
        `"continue from" resumes the LLaMA at step 13 and trains to 16: steps ${resumedSteps.join(',')}` +
        (resumedRun.error ? `: ${resumedRun.error}` : ''));
  const nativeResumed = await native(['train', '--steps', '16', '--seed', '1', '--eval-every', '0', '--threads', '1',
                                      '--model', 'llama', '--heads', '4', '--kv-heads', '2', '--task', 'text',
                                      '--data', textFile, '--allow-changes', '--resume', llamaCheckpoint,
                                      '--checkpoint', join(opts.out, 'llama-resumed.safetensors')]);
  const nativeResumedLoss = finalLoss(nativeResumed.out);
  const pageResumedLoss = resumedRun.losses.at(-1)?.loss;
  check(nativeResumed.code === 0 && sameLoss(nativeResumedLoss, pageResumedLoss),
        `the resumed run ends at the native resumed run's loss: page ${pageResumedLoss?.toFixed(4)}, native ` +
        `${nativeResumedLoss}` + (nativeResumed.code ? `\n${nativeResumed.out}` : ''));
} catch (err) {
  check(false, `the browser test stopped: ${err.stack ?? err}`);
} finally {
  await browser.close();
  server.close();
}
finish(` (${seconds()} s)`);
