// The subcommands of the gradkern command that train and sample models.
#ifndef GK_TOOLS_TRAIN_H
#define GK_TOOLS_TRAIN_H

#include "train_args.h"

// `gradkern train ...`: argv[0] is the first
// option. Return the process exit status.
int gk_cmd_train(int argc, char **argv);

// What a program embedding the trainer (the WebAssembly module's JavaScript
// API) hears while it runs: after every optimizer step (step counts from 1;
// a nonzero return ends the run there, as --stop-after does: evaluation and
// checkpoint follow) and after every evaluation (accuracy is NaN for text).
typedef struct gk_train_hooks {
  int (*on_step)(void *ctx, int64_t step, int64_t steps, double loss, double lr);
  void (*on_eval)(void *ctx, int64_t step, double loss, double accuracy);
  void *ctx;
} gk_train_hooks;
// gk_cmd_train with hooks (NULL: none).
int gk_train_run(int argc, char **argv, const gk_train_hooks *hooks);
// `gradkern sample ...`: likewise.
int gk_cmd_sample(int argc, char **argv);

#endif
