// Headless Chromium for the web tests, driven by npm puppeteer-core: the
// flags that work on this project's machines (as root, no GPU, a fresh
// profile), the training page's run as a user makes it, and the check of
// its screenshot.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { imageStats, readPng } from './png.mjs';

// Throws an Error naming what is missing when Chromium or puppeteer-core is.
// webgpu: with WebGPU on (SwiftShader's adapter: --enable-unsafe-webgpu).
export async function launchChromium({ webgpu = false } = {}) {
  const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(executablePath))
    throw new Error(`no Chromium at ${executablePath} (scripts/install-deps.sh test installs Debian's chromium; ` +
                    'CHROMIUM=path names another)');
  let puppeteer;
  try {
    puppeteer = (await import('puppeteer-core')).default;
  } catch (err) {
    throw new Error('npm package puppeteer-core is not installed (npm ci at the repository root; make test does it): ' +
                    err.message);
  }
  const profile = mkdtempSync(join(tmpdir(), 'gradkern-chromium-'));
  const browser = await puppeteer.launch({
    executablePath,
    headless: true,
    // SwiftShader's WebGPU runs a whole op test inside one evaluate(): on a
    // loaded 2-core machine that outlasts puppeteer's default 180 s (370 s
    // measured at a load of 2, with the split tests).
    protocolTimeout: 1_080_000,
    args: ['--headless=new', '--no-sandbox', '--disable-background-networking', '--no-first-run',
           ...(webgpu ? ['--enable-unsafe-webgpu'] : ['--disable-gpu']), `--user-data-dir=${profile}`],
  });
  // Chromium's last processes may still write to the profile as it disconnects.
  browser.on('disconnected', () => {
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } catch (err) {
      console.log(`note: the Chromium profile ${profile} was not removed: ${err.message}`);
    }
  });
  return browser;
}

// What a test of the training page needs before it starts, else
// fatal(reason): the native command (opts.gradkern), opts.out (made here),
// opts.steps of at least minSteps, the page and the module under opts.root.
// Returns web/serve.mjs's startServer.
export async function pagePrerequisites(opts, fatal, minSteps) {
  if (!opts.gradkern || !existsSync(opts.gradkern))
    fatal(`cannot run: --gradkern '${opts.gradkern}' (the native command) is missing`);
  if (!opts.out) fatal('cannot run: --out DIR (where the screenshots go) is missing');
  if (!Number.isInteger(opts.steps) || opts.steps < minSteps)
    fatal(`--steps ${opts.steps}: must be a whole number of at least ${minSteps}`);
  for (const file of ['web/index.html', 'wasm/gradkern.mjs', 'build/wasm/gradkern.wasm'])
    if (!existsSync(join(opts.root, file))) fatal(`cannot run: ${join(opts.root, file)} is missing (make wasm builds the module)`);
  mkdirSync(opts.out, { recursive: true });
  return (await import(pathToFileURL(join(opts.root, 'web', 'serve.mjs')).href)).startServer;
}

// Opens the training page at `url` in a new tab of `browser` with the form
// filled from `params` (steps, seed, eval-every, backend) and waits for the
// module to load. Returns { page, env: { state, error, isolated, text,
// backend, webgpu, note }, errors }: text is the page's line on its
// environment, backend and webgpu the page's choice and what it found
// (window.gradkernPage), note the line on the backend; errors collects the
// page's uncaught exceptions and console errors.
export async function openTrainingPage(browser, url, params) {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 1100 });
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
  await page.goto(`${url}?${new URLSearchParams(params)}`);
  await page.waitForFunction(() => ['ready', 'error'].includes(window.gradkernPage?.state), { timeout: 30_000 });
  const env = await page.evaluate(() => ({
    state: gradkernPage.state, error: gradkernPage.error, isolated: crossOriginIsolated,
    text: document.getElementById('env').textContent, backend: gradkernPage.backend, webgpu: gradkernPage.webgpu,
    note: document.getElementById('backend-note').textContent,
  }));
  return { page, env, errors };
}

// Presses Train and waits (at most `timeout` ms) for the run to end;
// returns window.gradkernPage.
export async function trainInPage(page, { timeout = 120_000 } = {}) {
  const runs = await page.evaluate(() => window.gradkernPage.runs);
  await page.click('#train');
  await page.waitForFunction((n) => window.gradkernPage.runs > n && ['done', 'error'].includes(window.gradkernPage.state),
                             { timeout, polling: 250 }, runs);
  return page.evaluate(() => ({ ...window.gradkernPage }));
}

// Saves the page's screenshot to `path` and checks, through check(ok, what),
// that it is not blank (luminance variance, number of colours) and shows
// the plot's training-loss line (drawn in #2563eb).
export async function checkScreenshot(page, path, check) {
  await page.screenshot({ path, fullPage: true });
  const image = readPng(readFileSync(path));
  const stats = imageStats(image);
  check(stats.variance > 200 && stats.colours >= 32,
        `the screenshot ${path} is not blank: ${image.width}x${image.height}, luminance variance ` +
        `${stats.variance.toFixed(0)} (> 200), ${stats.colours} colours (>= 32)`);
  let linePixels = 0;
  for (let i = 0; i < image.width * image.height; i++) {
    const p = i * image.channels;
    if (Math.abs(image.pixels[p] - 0x25) + Math.abs(image.pixels[p + 1] - 0x63) + Math.abs(image.pixels[p + 2] - 0xeb) < 40)
      linePixels++;
  }
  check(linePixels > 300, `the plot shows the loss line (${linePixels} pixels of its colour)`);
}
