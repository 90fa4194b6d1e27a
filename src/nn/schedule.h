// The learning-rate schedule: linear warmup, then cosine decay to a floor.
//
// For step s = 0, 1, ..., total - 1 (the optimizer step about to be taken):
//   s <  warmup:          lr(s) = lr * (s + 1) / warmup
//   warmup <= s < total:  p = (s - warmup) / (total - warmup)      in [0, 1)
//                         lr(s) = min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
//   s >= total:           lr(s) = min_lr
// So the first step already moves (lr / warmup), the peak lr is reached at
// the last warmup step, and the rate falls smoothly to min_lr at the end.
// warmup = 0 starts the cosine at once; min_lr = lr gives a constant rate
// after warmup.
#ifndef GK_NN_SCHEDULE_H
#define GK_NN_SCHEDULE_H

#include "nn.h"

#include <stdint.h>

typedef struct gk_lr_schedule {
  double lr;        // peak learning rate, > 0
  double min_lr;    // floor, in [0, lr]
  int64_t warmup;   // warmup steps, in [0, total]
  int64_t total;    // total steps, >= 1
} gk_lr_schedule;

// Check the values and fill *s; the message names the value that is wrong.
gk_status gk_lr_schedule_init(gk_lr_schedule *s, double lr, double min_lr, int64_t warmup, int64_t total);
// The learning rate for step `step` (>= 0; a negative step counts as 0).
double gk_lr_at(const gk_lr_schedule *s, int64_t step);

#endif
