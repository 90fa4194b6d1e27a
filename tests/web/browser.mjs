// Headless Chromium for the web tests, driven by npm puppeteer-core: the
// flags that work on this project's machines (as root, no GPU, a fresh
// profile), and the training page's run as a user makes it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
    // loaded 2-core machine that outlasts puppeteer's default 180 s.
    protocolTimeout: 540_000,
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

// Opens the training page at `url` in a new tab of `browser` with the form
// filled from `params` (steps, seed, eval-every) and waits for the module to
// load. Returns { page, env: { state, error, isolated, text }, errors }:
// errors collects the page's uncaught exceptions and console errors.
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
    text: document.getElementById('env').textContent,
  }));
  return { page, env, errors };
}

// Presses Train and waits for the run to end; returns window.gradkernPage.
export async function trainInPage(page) {
  const runs = await page.evaluate(() => window.gradkernPage.runs);
  await page.click('#train');
  await page.waitForFunction((n) => window.gradkernPage.runs > n && ['done', 'error'].includes(window.gradkernPage.state),
                             { timeout: 120_000, polling: 250 }, runs);
  return page.evaluate(() => ({ ...window.gradkernPage }));
}
