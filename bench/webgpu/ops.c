// gradkern's WebGPU kernels timed on device buffers, for the side-by-side
// with TensorFlow.js's WebGPU backend (bench/webgpu/bench_webgpu.mjs runs
// this module in a worker and tfjs on the same adapter). Each case: random
// inputs uploaded once, 3 warm-up runs, then `runs` runs issued back to
// back and one gk_backend_synchronize; prints "name ms-per-run".
#include "gradkern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Time desc on WebGPU: every argument a device buffer of random f32.
static int time_case(const char *name, gk_op_desc d, int runs) {
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan;
  if (gk_plan_create(&d, &plan)) {
    fprintf(stderr, "%s: %s\n", name, gk_last_error());
    return 1;
  }
  gk_arg args[GK_ARG_COUNT_];
  gk_buffer *bufs[GK_ARG_COUNT_];
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    gk_tensor t;
    gk_tensor_init(&t, NULL, GK_F32, rank, shape);
    size_t count = (size_t)gk_tensor_numel(&t), bytes = count * 4 ? count * 4 : 4;
    float *v = malloc(bytes);
    for (size_t i = 0; i < count; i++) v[i] = (float)((double)rand() / RAND_MAX) - 0.5f + (k == GK_ARG_RSTD ? 1.0f : 0.0f);
    gk_buffer_alloc(GK_BACKEND_WEBGPU, bytes, &bufs[n]);
    gk_buffer_upload(bufs[n], 0, v, bytes);
    free(v);
    t.data = gk_buffer_address(bufs[n]);
    t.device = GK_DEVICE_WEBGPU;
    args[n++] = (gk_arg){(gk_arg_kind)k, t};
  }
  for (int i = 0; i < 3; i++) gk_plan_run(plan, args, n, NULL, 0);
  gk_backend_synchronize(GK_BACKEND_WEBGPU);
  double t0 = now();
  for (int i = 0; i < runs; i++)
    if (gk_plan_run(plan, args, n, NULL, 0)) {
      fprintf(stderr, "%s: %s\n", name, gk_last_error());
      return 1;
    }
  gk_backend_synchronize(GK_BACKEND_WEBGPU);
  printf("%s %.4f\n", name, (now() - t0) / runs * 1e3);
  fflush(stdout);
  for (int i = 0; i < n; i++) gk_buffer_free(bufs[i]);
  gk_plan_destroy(plan);
  return 0;
}

static gk_op_desc desc(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, GK_F32, rank, shape);
  return d;
}

int main(void) {
  int bad = 0;
  for (int dir = 0; dir < 2; dir++) {
    const char *suffix = dir ? "_bwd" : "";
    char name[64];
    for (int64_t s = 256; s <= 512; s *= 2) {
      int64_t shape[2] = {s, s};
      gk_op_desc d = desc(GK_OP_MATMUL, (gk_direction)dir, 2, shape);
      snprintf(name, sizeof name, "matmul_%lld%s", (long long)s, suffix);
      bad |= time_case(name, d, 10);
    }
    int64_t rows[2] = {1024, 1024}, flat = 1 << 20;
    snprintf(name, sizeof name, "softmax_1024x1024%s", suffix);
    bad |= time_case(name, desc(GK_OP_SOFTMAX, (gk_direction)dir, 2, rows), 10);
    // Backward from the output y (act.from_output), as torch's autograd
    // runs it; tfjs's sigmoid side takes the output too (dv * sv * (1 - sv)).
    const gk_op acts[] = {GK_OP_RELU, GK_OP_SIGMOID};
    for (int a = 0; a < 2; a++) {
      snprintf(name, sizeof name, "%s_1M%s", gk_op_name(acts[a]), suffix);
      gk_op_desc act = desc(acts[a], (gk_direction)dir, 1, &flat);
      act.act.from_output = dir;
      bad |= time_case(name, act, 10);
    }
    gk_op_desc ln = desc(GK_OP_LAYERNORM, (gk_direction)dir, 2, rows);
    snprintf(name, sizeof name, "layernorm_1024x1024%s", suffix);
    bad |= time_case(name, ln, 10);
  }
  return bad;
}
