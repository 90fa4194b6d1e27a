// `gradkern train --eval-lengths`: after training, the model's held-out
// accuracy at each test length (see eval_lengths.c).
#ifndef GK_EVAL_LENGTHS_H
#define GK_EVAL_LENGTHS_H

#include "nn/data.h"
#include "nn/model.h"
#include "train_args.h"

// Every length of a->eval_lengths in turn, a line on stdout each (and the
// JSON file a->eval_out at the end): for `task`'s held-out sequences of that
// length, the share of answers (the positions with a target) the model
// gets right. trained_len: the training sequences' length, for the record.
gk_status gk_eval_lengths(gk_model *m, const gk_task *task, const gk_train_args *a, int trained_len);

#endif
