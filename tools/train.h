// The subcommands of the gradkern command that train and sample models.
#ifndef GK_TOOLS_TRAIN_H
#define GK_TOOLS_TRAIN_H

#include "train_args.h"

// `gradkern train ...`: argv[0] is the first
// option. Return the process exit status.
int gk_cmd_train(int argc, char **argv);
// `gradkern sample ...`: likewise.
int gk_cmd_sample(int argc, char **argv);

#endif
