// The native side of the WebAssembly training test (tests/wasm/train.test.mjs):
// `gradkern train` (the same C code, tools/train.c) with the options given,
// recording every step's loss and every evaluation through the trainer's
// hooks into OUT as JSON: {"loss": [step 1, step 2, ...], "eval": [{"step",
// "loss", "accuracy"}, ...], "exit": status}.
//
// usage: train_trace OUT [gradkern train options]
#include "train.h"

#include <math.h>
#include <stdio.h>

static void put_number(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.17g", v);
  else fprintf(f, "null");
}

static int on_step(void *ctx, int64_t step, int64_t steps, double loss, double lr) {
  FILE *f = ctx;
  (void)steps, (void)lr;
  fprintf(f, "%s", step > 1 ? ", " : "");
  put_number(f, loss);
  return 0;
}

// Evaluations are kept apart and written after the losses.
static char evals[1 << 16];
static size_t evals_len;
static void on_eval(void *ctx, int64_t step, double loss, double accuracy) {
  (void)ctx;
  if (evals_len + 128 > sizeof evals) return;
  evals_len += (size_t)snprintf(evals + evals_len, sizeof evals - evals_len,
                                "%s{\"step\": %lld, \"loss\": %.17g, \"accuracy\": %.17g}", evals_len ? ", " : "",
                                (long long)step, loss, isnan(accuracy) ? -1.0 : accuracy);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: train_trace OUT [gradkern train options]\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "w");
  if (!f) {
    fprintf(stderr, "train_trace: cannot write %s\n", argv[1]);
    return 1;
  }
  fprintf(f, "{\"loss\": [");
  gk_train_hooks hooks = {on_step, on_eval, f};
  int rc = gk_train_run(argc - 2, argv + 2, &hooks);
  fprintf(f, "], \"eval\": [%s], \"exit\": %d}\n", evals, rc);
  return fclose(f) == 0 ? rc : 1;
}
