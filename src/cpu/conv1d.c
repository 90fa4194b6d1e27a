// Threaded CPU kernels for the causal depthwise conv1d (math as in
// src/ref/conv1d.c), f32 math (f64 for f64).
//   forward:  tasks of (rows, tile): a row is one (b, d), a tile TILE steps;
//             y over the tile as bias + sum_k w[k] xpad[t+k], k in blocks of
//             KB so any width works with fixed buffers.
//   backward: pass 1 (tasks as forward) writes g = dy * act'(pre) to the
//             workspace; pass 2, tasks (channel d, group of (b, tile) items),
//             writes dx and dinitial_state and sums dweight/dbias partials
//             per group; pass 3 adds the partials group by group in order, so
//             every thread count gives the same bits.
#include "../core/act_math.h"
#include "../ops/conv1d.h"

#include <string.h>

// conv1d_body.h is included once per accumulator type REAL (float,
// double) with suffix SFX (f32, f64): FN(name) is name_SFX.
#define GK_CAT2(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define FN(name) GK_CAT(name, SFX)

enum { TILE = 1024, KB = 64, TASK_ELEMS = 4096, GROUPS = 64, LANES = 8, REDUCE_ROWS = 64 };

typedef struct conv_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  gk_conv_dims s;
  gk_tensor x, y, dy, dx;   // (B, D, L) views
  int64_t ntiles;           // tiles per row (1 when L = 0)
  int64_t rows_per_task;    // forward and pass 1
  int64_t groups, per_group;// backward: groups of the B * ntiles (b, tile) items of a channel
  void *g;                  // backward: g (B, D, L), accumulator type
  void *partials;           // backward: [groups][D][W + 1] dweight | dbias sums
} conv_job;

static int64_t conv_groups(const gk_conv_dims *s, int64_t ntiles) {
  int64_t by_work = s->B * s->L / TASK_ELEMS;
  return gk_min64(gk_min64(s->B * ntiles, GROUPS), by_work > 1 ? by_work : 1);
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

static conv_job job_of(const gk_plan *plan, const gk_tensor *const *a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  conv_job j;
  memset(&j, 0, sizeof j);
  j.plan = plan;
  j.a = a;
  j.s = gk_conv_dims_of(d);
  j.ntiles = j.s.L > 0 ? gk_ceil_div(j.s.L, TILE) : 1;
  j.rows_per_task = j.ntiles > 1 ? 1 : gk_ceil_div(TASK_ELEMS, j.s.L > 0 ? j.s.L : 1);
  j.groups = conv_groups(&j.s, j.ntiles);
  j.per_group = gk_ceil_div(j.s.B * j.ntiles, j.groups);
  if (a) {
    j.x = gk_conv_view(a[GK_ARG_X], d);
    if (a[GK_ARG_Y]) j.y = gk_conv_view(a[GK_ARG_Y], d);
    if (a[GK_ARG_DY]) j.dy = gk_conv_view(a[GK_ARG_DY], d);
    if (a[GK_ARG_DX]) j.dx = gk_conv_view(a[GK_ARG_DX], d);
  }
  size_t acc = d->dtype == GK_F64 ? sizeof(double) : sizeof(float);
  j.g = ws;
  j.partials = ws ? (char *)ws + align64((size_t)(j.s.B * j.s.D * j.s.L) * acc) : NULL;
  return j;
}

static int64_t row_tasks(const conv_job *j) {
  return gk_ceil_div(j->s.B * j->s.D, j->rows_per_task) * j->ntiles;
}

#define REAL float
#define SFX f32
#include "conv1d_body.h"
#undef REAL
#undef SFX
#define REAL double
#define SFX f64
#include "conv1d_body.h"
#undef REAL
#undef SFX

static bool is_f64(const conv_job *j) { return j->plan->desc.dtype == GK_F64; }

static void fwd_task(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_fwd_task_f64(ctx, t);
  else conv_fwd_task_f32(ctx, t);
}

static void g_task(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_g_task_f64(ctx, t);
  else conv_g_task_f32(ctx, t);
}

static void bwd_task(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_bwd_task_f64(ctx, t);
  else conv_bwd_task_f32(ctx, t);
}

static void reduce_task(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_reduce_task_f64(ctx, t);
  else conv_reduce_task_f32(ctx, t);
}

static gk_status cpu_conv1d_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  conv_job j = job_of(plan, a, ws);
  gk_parallel_for(row_tasks(&j), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_conv1d_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  conv_job j = job_of(plan, a, ws);
  gk_parallel_for(row_tasks(&j), g_task, &j);
  gk_parallel_for(j.s.D * j.groups, bwd_task, &j);
  gk_parallel_for(gk_ceil_div(j.s.D, REDUCE_ROWS), reduce_task, &j);
  return GK_SUCCESS;
}

static size_t cpu_conv1d_bwd_workspace(const gk_plan *plan) {
  conv_job j = job_of(plan, NULL, NULL);
  size_t acc = plan->desc.dtype == GK_F64 ? sizeof(double) : sizeof(float);
  return align64((size_t)(j.s.B * j.s.D * j.s.L) * acc) + (size_t)(j.groups * j.s.D * (j.s.W + 1)) * acc;
}

const gk_kernel gk_cpu_conv1d_fwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, NULL, cpu_conv1d_fwd};
const gk_kernel gk_cpu_conv1d_bwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, cpu_conv1d_bwd_workspace,
                                     cpu_conv1d_bwd};
