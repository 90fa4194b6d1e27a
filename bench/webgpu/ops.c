// gradkern's WebGPU kernels timed on device buffers, for the side-by-side
// with TensorFlow.js's WebGPU backend (bench/webgpu/bench_webgpu.mjs runs
// this module in a worker and tfjs on the same adapter). Each case: random
// inputs uploaded once, 3 warm-up runs, then `runs` runs issued back to
// back and one gk_backend_synchronize; prints "name ms-per-run".
// `ops scan [reps [shape]]` times the selective scan's two kernels instead (below).
#include "gradkern.h"
#include "../../src/webgpu/webgpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double last_ms;  // time_case's figure

// Time desc on WebGPU: every argument a device buffer of random f32
// (printed unless quiet; kept in last_ms).
static int time_case_quiet(const char *name, gk_op_desc d, int runs, int quiet) {
  d.backend = GK_BACKEND_WEBGPU;
  last_ms = -1;
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
  last_ms = (now() - t0) / runs * 1e3;
  if (!quiet) printf("%s %.4f\n", name, last_ms);
  fflush(stdout);
  for (int i = 0; i < n; i++) gk_buffer_free(bufs[i]);
  gk_plan_destroy(plan);
  return 0;
}

static int time_case(const char *name, gk_op_desc d, int runs) { return time_case_quiet(name, d, runs, 0); }

static gk_op_desc desc(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, GK_F32, rank, shape);
  return d;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// The selective scan as Mamba runs it (D, z, delta_bias, softplus, per-batch
// B and C, d_state 16) at the default training shape, shorter and longer
// ones, forward and backward: the sequential kernel (1) and the parallel one
// (2) in turn, `reps` times each; prints each shape's median and range per
// kernel and the ratio of the medians. only >= 0: that shape alone.
static int bench_scan(int reps, int only) {
  static const int64_t shapes[][3] = {{32, 128, 16}, {32, 128, 64}, {8, 128, 64},  {1, 64, 256},
                                      {1, 64, 1024}, {1, 64, 4096}, {1, 512, 1024}, {1, 1536, 256}};
  int bad = 0;
  printf("shape dir: sequential median (min-max) ms | parallel median (min-max) ms | seq/par\n");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int dir = 0; dir < 2 && (only < 0 || (size_t)only == s); dir++) {
      gk_op_desc d = desc(GK_OP_SELECTIVE_SCAN, (gk_direction)dir, 3, shapes[s]);
      d.scan.d_state = 16;
      d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
      int64_t work = shapes[s][0] * shapes[s][1] * shapes[s][2];
      int runs = work >= (1 << 18) ? 2 : 5;
      double ms[2][64];
      int n = reps < 64 ? reps : 64;
      for (int i = 0; i < n; i++)
        for (int path = 1; path <= 2; path++) {
          gk_webgpu_test_scan_path(path);
          bad |= time_case_quiet("scan", d, runs, 1);
          ms[path - 1][i] = last_ms;
        }
      gk_webgpu_test_scan_path(0);
      for (int k = 0; k < 2; k++) qsort(ms[k], (size_t)n, sizeof **ms, cmp_double);
      printf("B%lld D%lld L%lld %s: %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2f\n", (long long)shapes[s][0],
             (long long)shapes[s][1], (long long)shapes[s][2], dir ? "bwd" : "fwd", ms[0][n / 2], ms[0][0],
             ms[0][n - 1], ms[1][n / 2], ms[1][0], ms[1][n - 1], ms[0][n / 2] / ms[1][n / 2]);
      fflush(stdout);
    }
  return bad;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "scan"))
    return bench_scan(argc > 2 ? atoi(argv[2]) : 5, argc > 3 ? atoi(argv[3]) : -1);
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
