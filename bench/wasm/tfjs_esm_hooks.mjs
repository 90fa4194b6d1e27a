// Node ESM resolve hook for tfjs-core's ES module files, whose relative
// imports have no extension ("./ops/ops"): tries NAME.js, then NAME/index.js.
// Used to load tfjs-core's gradient definitions (dist/register_all_gradients.js),
// which its CommonJS bundle lacks.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export async function resolve(specifier, context, next) {
  if ((specifier.startsWith('./') || specifier.startsWith('../')) && context.parentURL?.includes('/@tensorflow/') &&
      !/\.[cm]?js$/.test(specifier)) {
    for (const candidate of [`${specifier}.js`, `${specifier}/index.js`])
      if (existsSync(fileURLToPath(new URL(candidate, context.parentURL)))) return next(candidate, context);
  }
  return next(specifier, context);
}
