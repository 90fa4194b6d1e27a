// What the timing programs of bench/ share: wall and CPU clocks, buffers
// of random values in a dtype (f32, bf16 or f16), a forward and backward
// plan timed as the best of a few runs.
#ifndef GK_BENCH_TIMING_H
#define GK_BENCH_TIMING_H

#include "gradkern.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// CPU time of the whole process (all threads): on a shared machine it
// moves less than wall time.
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// n elements of dtype dt (f32, bf16 or f16), uniform in [lo, hi].
static void *filled(gk_dtype dt, int64_t n, float lo, float hi) {
  void *p = malloc(gk_dtype_size(dt) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    float v = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    if (dt == GK_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = dt == GK_BF16 ? gk_f32_to_bf16(v) : gk_f32_to_f16(v);
  }
  return p;
}

// The best of `reps` runs of a forward plan then a backward plan on one
// workspace: wall and CPU seconds of each, best[0..3] = forward wall,
// backward wall, forward CPU, backward CPU. False (the error printed) when a
// run fails.
static bool best_of(int reps, gk_plan *fwd, const gk_arg *fa, int nf, gk_plan *bwd, const gk_arg *ba, int nb,
                    void *ws, size_t wsize, double best[4]) {
  for (int q = 0; q < 4; q++) best[q] = 1e30;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = now(), c0 = cpu_now();
    gk_status s1 = gk_plan_run(fwd, fa, nf, ws, wsize);
    double t1 = now(), c1 = cpu_now();
    gk_status s2 = gk_plan_run(bwd, ba, nb, ws, wsize);
    double t2 = now(), c2 = cpu_now();
    if (s1 != GK_SUCCESS || s2 != GK_SUCCESS) {
      fprintf(stderr, "%s\n", gk_last_error());
      return false;
    }
    double got[4] = {t1 - t0, t2 - t1, c1 - c0, c2 - c1};
    for (int q = 0; q < 4; q++)
      if (got[q] < best[q]) best[q] = got[q];
  }
  return true;
}

#endif
