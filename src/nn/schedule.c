// Linear warmup then cosine decay (formula in schedule.h).
#include "schedule.h"

#include <math.h>

gk_status gk_lr_schedule_init(gk_lr_schedule *s, double lr, double min_lr, int64_t warmup, int64_t total) {
  if (!s) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_lr_schedule_init: s is NULL");
  if (!(isfinite(lr) && lr > 0)) return gk_nn_fail(GK_ERR_INVALID_VALUE, "learning rate %g must be finite and > 0", lr);
  if (!(isfinite(min_lr) && min_lr >= 0 && min_lr <= lr))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "minimum learning rate %g must be in [0, lr = %g]", min_lr, lr);
  if (total < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "total steps %lld must be at least 1", (long long)total);
  if (warmup < 0 || warmup > total)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "warmup steps %lld must be in [0, total steps = %lld]", (long long)warmup,
                   (long long)total);
  s->lr = lr;
  s->min_lr = min_lr;
  s->warmup = warmup;
  s->total = total;
  return GK_SUCCESS;
}

double gk_lr_at(const gk_lr_schedule *s, int64_t step) {
  if (step < 0) step = 0;
  if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
  if (step >= s->total) return s->min_lr;
  double p = (double)(step - s->warmup) / (double)(s->total - s->warmup);
  return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(3.141592653589793 * p));
}
