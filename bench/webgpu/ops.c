// gradkern's WebGPU kernels timed on device buffers, for the side-by-side
// with TensorFlow.js's WebGPU backend (bench/webgpu/bench_webgpu.mjs runs
// this module in a worker and tfjs on the same adapter). Each case: random
// inputs uploaded once, 3 warm-up runs, then `runs` runs issued back to
// back and one gk_backend_synchronize; prints "name ms-per-run".
//
// Options: f32, f16 or bf16: the tensors' dtype (the norms' statistics
// stay f32; default f32); --timestamps: also each run's GPU time (the sum of
// its dispatches' times, timestamp-query; gk_webgpu_timing), "name
// ms-per-run gpu-ms-per-run dispatches-per-run", or "# no timestamp-query
// on this adapter ..." first where the device lacks it; --plain-reductions:
// the plain row reductions where the device has subgroups (to compare
// them); --repeat N: the best of N batches of runs, each timed by itself
// (for a loaded machine); --large: 16x the elements (matrices of 1024 and
// 2048, rows of 4096 x 4096, 16M activations: for a real GPU, where the
// default sizes finish in about what a submit costs); other arguments: run
// only the cases so named.
#include "gradkern.h"
#include "webgpu/webgpu.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool timed;  // --timestamps, and the device has timestamp-query
static bool large;  // --large
static int repeats = 1;  // --repeat N
static char **only; // the case names asked for (NULL: all)
static int nonly;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static gk_dtype g_dtype = GK_F32;  // f32, f16 or bf16
static double last_ms;             // time_case's figure (wall time per run)

// The bits of v (|v| < 1) in dt, truncated (good enough for random inputs).
static uint32_t bits_of(float v, gk_dtype dt) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if (dt == GK_BF16) return u >> 16;
  int e = (int)((u >> 23) & 0xff) - 127 + 15;
  return ((u >> 16) & 0x8000) | (e > 0 ? (uint32_t)e << 10 | ((u >> 13) & 0x3ff) : 0);
}

// Time desc on WebGPU: every argument a device buffer of random values
// (the statistics f32, the rest g_dtype); when cases are named, only those.
// Printed unless quiet; kept in last_ms.
static int time_case_quiet(const char *name, gk_op_desc d, int runs, bool quiet) {
  last_ms = -1;
  bool wanted = !nonly;
  for (int i = 0; i < nonly; i++) wanted |= !strcmp(name, only[i]);
  if (!wanted) return 0;
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
    gk_dtype dt = k == GK_ARG_RSTD || k == GK_ARG_MEAN ? GK_F32 : d.dtype;
    gk_tensor_init(&t, NULL, dt, rank, shape);
    size_t count = (size_t)gk_tensor_numel(&t), es = gk_dtype_size(dt), bytes = count * es ? count * es : 4;
    unsigned char *v = malloc(bytes);
    for (size_t i = 0; i < count; i++) {
      float x = (float)((double)rand() / RAND_MAX) - 0.5f + (k == GK_ARG_RSTD ? 0.5f : 0.0f);
      uint32_t b = bits_of(x, dt);
      if (es == 4) memcpy(v + 4 * i, &x, 4);
      else memcpy(v + 2 * i, &b, 2);  // little-endian: the low 16 bits
    }
    gk_buffer_alloc(GK_BACKEND_WEBGPU, bytes, &bufs[n]);
    gk_buffer_upload(bufs[n], 0, v, bytes);
    free(v);
    t.data = gk_buffer_address(bufs[n]);
    t.device = GK_DEVICE_WEBGPU;
    args[n++] = (gk_arg){(gk_arg_kind)k, t};
  }
  for (int i = 0; i < 3; i++) gk_plan_run(plan, args, n, NULL, 0);
  gk_backend_synchronize(GK_BACKEND_WEBGPU);
  enum { MAX_TIMES = 1024 };
  static gk_webgpu_kernel_time times[MAX_TIMES];
  int count = 0;
  if (timed) gk_webgpu_kernel_times(times, MAX_TIMES, &count);  // the warm-up's, dropped
  // The best of `repeats` batches of `runs` (wall and GPU time apart).
  double wall = 1e30, gpu = 1e30;
  for (int rep = 0; rep < repeats; rep++) {
    double t0 = now(), gpu_ns = 0;
    for (int i = 0; i < runs; i++)
      if (gk_plan_run(plan, args, n, NULL, 0)) {
        fprintf(stderr, "%s: %s\n", name, gk_last_error());
        return 1;
      }
    gk_backend_synchronize(GK_BACKEND_WEBGPU);
    double ms = (now() - t0) / runs * 1e3;
    wall = ms < wall ? ms : wall;
    if (timed && gk_webgpu_kernel_times(times, MAX_TIMES, &count) == GK_SUCCESS) {
      for (int i = 0; i < count; i++) gpu_ns += times[i].end_ns - times[i].begin_ns;
      gpu = gpu_ns / runs * 1e-6 < gpu ? gpu_ns / runs * 1e-6 : gpu;
    }
  }
  last_ms = wall;
  if (!quiet && timed) printf("%s %.4f %.4f %d\n", name, wall, gpu, count / runs);
  else if (!quiet) printf("%s %.4f\n", name, wall);
  fflush(stdout);
  for (int i = 0; i < n; i++) gk_buffer_free(bufs[i]);
  gk_plan_destroy(plan);
  return 0;
}

static int time_case(const char *name, gk_op_desc d, int runs) { return time_case_quiet(name, d, runs, false); }

static gk_op_desc desc(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, g_dtype, rank, shape);
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
// kernel and the ratio of the medians. shape_only >= 0: that shape alone.
static int bench_scan(int reps, int shape_only) {
  static const int64_t shapes[][3] = {{32, 128, 16}, {32, 128, 64}, {8, 128, 64},  {1, 64, 256},
                                      {1, 64, 1024}, {1, 64, 4096}, {1, 512, 1024}, {1, 1536, 256}};
  int bad = 0;
  printf("shape dir: sequential median (min-max) ms | parallel median (min-max) ms | seq/par\n");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int dir = 0; dir < 2 && (shape_only < 0 || (size_t)shape_only == s); dir++) {
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
          bad |= time_case_quiet("scan", d, runs, true);
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
  only = calloc((size_t)argc, sizeof *only);
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "f16") || !strcmp(argv[a], "bf16") || !strcmp(argv[a], "f32"))
      g_dtype = argv[a][0] == 'b' ? GK_BF16 : argv[a][1] == '1' ? GK_F16 : GK_F32;
    else if (argv[a][0] != '-') only[nonly++] = argv[a];
    if (!strcmp(argv[a], "--repeat") && a + 1 < argc) repeats = atoi(argv[++a]);
    if (!strcmp(argv[a], "--plain-reductions")) gk_webgpu_test_plain_reductions(true);
    if (!strcmp(argv[a], "--large")) large = true;
    if (strcmp(argv[a], "--timestamps")) continue;
    timed = gk_webgpu_timing(1) == GK_SUCCESS;
    if (!timed) printf("# %s\n", gk_last_error());
  }
  int64_t side = large ? 4096 : 1024, flat = large ? 1 << 24 : 1 << 20, rows[2] = {side, side};
  const char *flat_name = large ? "16M" : "1M";
  for (int dir = 0; dir < 2; dir++) {
    const char *suffix = dir ? "_bwd" : "";
    char name[64];
    for (int64_t s = side / 4; s <= side / 2; s *= 2) {
      int64_t shape[2] = {s, s};
      gk_op_desc d = desc(GK_OP_MATMUL, (gk_direction)dir, 2, shape);
      snprintf(name, sizeof name, "matmul_%lld%s", (long long)s, suffix);
      bad |= time_case(name, d, 10);
    }
    snprintf(name, sizeof name, "softmax_%lldx%lld%s", (long long)side, (long long)side, suffix);
    bad |= time_case(name, desc(GK_OP_SOFTMAX, (gk_direction)dir, 2, rows), 10);
    // Backward from the output y (act.from_output), as torch's autograd
    // runs it; tfjs's sigmoid side takes the output too (dv * sv * (1 - sv)).
    const gk_op acts[] = {GK_OP_RELU, GK_OP_SIGMOID};
    for (int a = 0; a < 2; a++) {
      snprintf(name, sizeof name, "%s_%s%s", gk_op_name(acts[a]), flat_name, suffix);
      gk_op_desc act = desc(acts[a], (gk_direction)dir, 1, &flat);
      act.act.from_output = dir;
      bad |= time_case(name, act, 10);
    }
    gk_op_desc add = desc(GK_OP_ADD, (gk_direction)dir, 1, &flat);
    add.binary.b_rank = 1;
    add.binary.b_shape[0] = flat;
    snprintf(name, sizeof name, "add_%s%s", flat_name, suffix);
    bad |= time_case(name, add, 10);
    gk_op_desc ln = desc(GK_OP_LAYERNORM, (gk_direction)dir, 2, rows);
    snprintf(name, sizeof name, "layernorm_%lldx%lld%s", (long long)side, (long long)side, suffix);
    bad |= time_case(name, ln, 10);
  }
  return bad;
}
