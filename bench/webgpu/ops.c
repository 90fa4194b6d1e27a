// gradkern's WebGPU kernels timed on device buffers, for the side-by-side
// with TensorFlow.js's WebGPU backend (bench/webgpu/bench_webgpu.mjs runs
// this module in a worker and tfjs on the same adapter). Each case: random
// inputs uploaded once, 3 warm-up runs, then `runs` runs issued back to
// back and one gk_backend_synchronize; prints "name ms-per-run".
//
// Usage: webgpu_ops_bench [f32|f16|bf16 [NAME...]]: the tensors' dtype
// (the norms' statistics stay f32; default f32), and the cases to time
// (default: all).
#include "gradkern.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static gk_dtype g_dtype = GK_F32;
static int g_nnames;
static char **g_names;

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
static int time_case(const char *name, gk_op_desc d, int runs) {
  bool wanted = g_nnames == 0;
  for (int i = 0; i < g_nnames; i++) wanted |= !strcmp(g_names[i], name);
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
  gk_op_desc_init(&d, op, dir, g_dtype, rank, shape);
  return d;
}

int main(int argc, char **argv) {
  if (argc > 1) g_dtype = !strcmp(argv[1], "f16") ? GK_F16 : !strcmp(argv[1], "bf16") ? GK_BF16 : GK_F32;
  g_nnames = argc > 2 ? argc - 2 : 0;
  g_names = argv + 2;
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
    gk_op_desc add = desc(GK_OP_ADD, (gk_direction)dir, 1, &flat);
    add.binary.b_rank = 1;
    add.binary.b_shape[0] = flat;
    snprintf(name, sizeof name, "add_1M%s", suffix);
    bad |= time_case(name, add, 10);
    gk_op_desc ln = desc(GK_OP_LAYERNORM, (gk_direction)dir, 2, rows);
    snprintf(name, sizeof name, "layernorm_1024x1024%s", suffix);
    bad |= time_case(name, ln, 10);
  }
  return bad;
}
