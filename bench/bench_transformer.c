// Timing of the transformer ops (a benchmark, not a test): linear at
// 4096 x 2048 -> 5632 and causal attention at B=4, H=16, T=1024, Dh=64, f32.
//   bench_transformer [threads]      (default: all processors)
#include "gradkern.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *filled(int64_t n) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 7919 % 2001) - 1000) * 1e-3f;
  return p;
}

typedef struct run {
  gk_plan *plan;
  gk_arg args[12];
  int nargs;
  void *ws;
  size_t ws_bytes;
} run;

static void setup(run *r, const gk_op_desc *d) {
  if (gk_plan_create(d, &r->plan) != GK_SUCCESS) {
    fprintf(stderr, "plan: %s\n", gk_last_error());
    exit(1);
  }
  r->nargs = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(r->plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    gk_arg *a = &r->args[r->nargs++];
    a->kind = (gk_arg_kind)k;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    gk_tensor_init(&a->tensor, filled(n), GK_F32, rank, shape);
  }
  gk_plan_workspace_size(r->plan, &r->ws_bytes);
  r->ws = r->ws_bytes ? aligned_alloc(64, (r->ws_bytes + 63) / 64 * 64) : NULL;
}

static double time_run(run *r, int reps) {
  double best = 1e30;
  for (int i = 0; i < reps; i++) {
    double t0 = now();
    if (gk_plan_run(r->plan, r->args, r->nargs, r->ws, r->ws_bytes) != GK_SUCCESS) {
      fprintf(stderr, "run: %s\n", gk_last_error());
      exit(1);
    }
    double t = now() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void teardown(run *r) {
  for (int i = 0; i < r->nargs; i++) free(r->args[i].tensor.data);
  free(r->ws);
  gk_plan_destroy(r->plan);
}

int main(int argc, char **argv) {
  if (argc > 1) gk_set_num_threads(atoi(argv[1]));
  printf("threads: %d\n", gk_get_num_threads());
  int64_t x[2] = {4096, 2048};
  for (int dir = 0; dir < 2; dir++) {
    gk_op_desc d;
    gk_op_desc_init(&d, GK_OP_LINEAR, (gk_direction)dir, GK_F32, 2, x);
    d.linear.out_features = 5632;
    run r;
    setup(&r, &d);
    double t = time_run(&r, 3), flops = 2.0 * 4096 * 2048 * 5632 * (dir ? 2 : 1);
    gk_plan_info info;
    gk_plan_get_info(r.plan, &info);
    printf("linear %s f32 4096x2048 -> 5632: %.1f ms, %.1f GFLOP/s (%s, workspace %.1f MiB)\n",
           dir ? "backward" : "forward ", 1e3 * t, flops / t * 1e-9, info.kernel, (double)r.ws_bytes / 1048576);
    teardown(&r);
  }
  int64_t q[4] = {4, 16, 1024, 64};
  double total = 0;
  for (int dir = 0; dir < 2; dir++) {
    gk_op_desc d;
    gk_op_desc_init(&d, GK_OP_ATTENTION, (gk_direction)dir, GK_F32, 4, q);
    run r;
    setup(&r, &d);
    double t = time_run(&r, 3);
    total += t;
    // causal: half of the 4 B H T^2 Dh flops of the two products (forward)
    double flops = 2.0 * 4 * 16 * 1024.0 * 1024 * 64 * (dir ? 2.5 : 1);
    printf("attention %s f32 causal B=4 H=16 T=1024 Dh=64: %.1f ms, %.1f GFLOP/s useful (workspace %.1f MiB)\n",
           dir ? "backward" : "forward ", 1e3 * t, flops / t * 1e-9, (double)r.ws_bytes / 1048576);
    teardown(&r);
  }
  printf("attention forward + backward: %.1f ms\n", 1e3 * total);
  return 0;
}
