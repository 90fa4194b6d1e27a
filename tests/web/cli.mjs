// What the web tests share besides the browser: their options, their
// tally of checks, and how they read and compare the trainer's final loss.
import { resolve } from 'node:path';

// The options of process.argv, "--name value" pairs named by `defaults`
// (--max-loss is maxLoss), which gives their values when absent: a number
// default makes the option a number, any other a path (resolved).
export function readOptions(defaults) {
  const opts = { ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    const key = name.replace(/^--/, '').replace(/-(.)/g, (_, c) => c.toUpperCase());
    if (!name.startsWith('--') || !(key in defaults)) throw new Error(`unknown option ${name}`);
    if (value === undefined) throw new Error(`${name} needs a value`);
    opts[key] = typeof defaults[key] === 'number' ? Number(value) : resolve(value);
  }
  return opts;
}

// check(ok, what) prints the line after "ok" or "FAIL" and returns ok;
// fatal(message) fails the test at once; finish(note) prints the outcome
// (and the note) and exits, failing when a check failed.
export function tally() {
  let failed = 0;
  return {
    check: (ok, what) => {
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
      if (!ok) failed++;
      return ok;
    },
    fatal: (message) => {
      console.log(`FAIL ${message}`);
      process.exit(1);
    },
    finish: (note = '') => {
      console.log(`${failed ? `FAILED: ${failed} checks` : 'passed'}${note}`);
      process.exit(failed ? 1 : 0);
    },
  };
}

// The final training loss `gradkern train` prints (NaN when it printed none).
export const finalLoss = (output) => Number(/final train loss ([0-9.]+)/.exec(output)?.[1]);

// Whether a browser run's loss is the native run's: 1e-3 relative (the
// kernels round differently), with a floor for losses near 0.
export const sameLoss = (native, browser) => Math.abs(native - browser) <= 1e-3 * Math.abs(native) + 5e-5;
