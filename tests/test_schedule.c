// The learning-rate schedule: warmup values, the cosine's ends and middle,
// monotonicity, the floor after the end, and bad values.
#include "harness.h"
#include "nn/schedule.h"

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1, fabs(b)); }

int main(void) {
  gk_lr_schedule s;
  check(gk_lr_schedule_init(&s, 1e-3, 1e-4, 10, 110) == GK_SUCCESS, "init");
  check(close_to(gk_lr_at(&s, 0), 1e-4), "step 0: lr / warmup = %g", gk_lr_at(&s, 0));
  check(close_to(gk_lr_at(&s, 4), 5e-4), "step 4: 5 lr / warmup");
  check(close_to(gk_lr_at(&s, 9), 1e-3), "last warmup step reaches lr");
  check(close_to(gk_lr_at(&s, 10), 1e-3), "the cosine starts at lr");
  check(close_to(gk_lr_at(&s, 60), 5.5e-4), "cosine middle: (lr + min_lr) / 2 = %g", gk_lr_at(&s, 60));
  check(gk_lr_at(&s, 109) > 1e-4 && gk_lr_at(&s, 109) < 1.01e-4, "last step just above min_lr: %g",
        gk_lr_at(&s, 109));
  check(close_to(gk_lr_at(&s, 110), 1e-4) && close_to(gk_lr_at(&s, 1000), 1e-4), "min_lr after the end");
  check(close_to(gk_lr_at(&s, -5), 1e-4), "a negative step counts as 0");
  bool up = true, down = true;
  for (int64_t k = 1; k < 10; k++) up &= gk_lr_at(&s, k) > gk_lr_at(&s, k - 1);
  for (int64_t k = 11; k < 120; k++) down &= gk_lr_at(&s, k) <= gk_lr_at(&s, k - 1);
  check(up && down, "rises during warmup, never rises after");
  double formula = 1e-4 + (1e-3 - 1e-4) * 0.5 * (1 + cos(3.141592653589793 * 37.0 / 100));
  check(close_to(gk_lr_at(&s, 47), formula), "step 47 follows the formula");

  check(gk_lr_schedule_init(&s, 2e-3, 0, 0, 5) == GK_SUCCESS && close_to(gk_lr_at(&s, 0), 2e-3), "no warmup");
  check(gk_lr_schedule_init(&s, 2e-3, 2e-3, 3, 5) == GK_SUCCESS && close_to(gk_lr_at(&s, 4), 2e-3),
        "min_lr = lr: constant after warmup");
  check(gk_lr_schedule_init(&s, 1, 0, 5, 5) == GK_SUCCESS && close_to(gk_lr_at(&s, 4), 1) &&
            close_to(gk_lr_at(&s, 5), 0),
        "warmup = total");

  struct {
    double lr, min_lr;
    int64_t warmup, total;
    const char *needle;
  } bad[] = {
      {0, 0, 0, 10, "learning rate 0"},         {-1, 0, 0, 10, "learning rate -1"},
      {NAN, 0, 0, 10, "learning rate nan"},     {INFINITY, 0, 0, 10, "learning rate inf"},
      {1e-3, 2e-3, 0, 10, "minimum learning rate 0.002"}, {1e-3, -1, 0, 10, "minimum learning rate -1"},
      {1e-3, NAN, 0, 10, "minimum learning rate nan"},    {1e-3, 0, 0, 0, "total steps 0"},
      {1e-3, 0, 11, 10, "warmup steps 11"},     {1e-3, 0, -1, 10, "warmup steps -1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gk_status st = gk_lr_schedule_init(&s, bad[i].lr, bad[i].min_lr, bad[i].warmup, bad[i].total);
    check(st == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), bad[i].needle), "bad schedule %zu: %s", i,
          gk_last_error());
  }
  check(gk_lr_schedule_init(NULL, 1, 0, 0, 1) == GK_ERR_NULL_POINTER, "NULL schedule");
  return finish("test_schedule");
}
