// Threaded CPU kernels for RMSNorm and LayerNorm (math as in src/ref/norm.c).
// Forward: tasks of whole rows. Backward: rows are cut into at most
// GROUPS groups (by row count only); each group sums its dweight/dbias
// partials in the workspace, then the partials are added group by group in
// order, so every thread count gives the same bits. Rows are walked in
// chunks of CHUNK elements, f32 math (f64 for f64), sums over 8 lanes.
#include "../core/internal.h"

#include <math.h>

enum { CHUNK = 512, LANES = 8, ROW_TASK_ELEMS = 32768, GROUPS = 64 };

typedef struct norm_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  bool layer;
  int nr;
  int64_t rows, C, rows_per_task;
  void *partials;      // backward: [groups][nparams][C] accumulator-typed sums
  int nparams;
} norm_job;

static norm_job job_of(const gk_plan *plan, const gk_tensor *const *a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  norm_job j = {plan, a, d->op == GK_OP_LAYERNORM, d->norm.normalized_rank, 1, 1, 1, ws, 0};
  for (int i = 0; i < d->rank; i++) {
    if (i < d->rank - j.nr) j.rows *= d->shape[i];
    else j.C *= d->shape[i];
  }
  j.nparams = plan->args[GK_ARG_DWEIGHT].used + plan->args[GK_ARG_DBIAS].used;
  return j;
}

static int64_t backward_groups(int64_t rows) { return gk_min64(rows, GROUPS); }

// The kernels for T = float (S = f32) and T = double (S = f64).
#define GK_DEFINE_NORM(T, S)                                                               \
  /* sum of (x - shift)^p over n elements, p = 1 or 2, in LANES partial sums */            \
  static T lane_sum_##S(const T *x, int64_t n, T shift, int p) {                           \
    T acc[LANES] = {0};                                                                    \
    int64_t i = 0;                                                                         \
    for (; i + LANES <= n; i += LANES)                                                     \
      for (int l = 0; l < LANES; l++) {                                                    \
        T v = x[i + l] - shift;                                                            \
        acc[l] += p == 2 ? v * v : v;                                                      \
      }                                                                                    \
    for (; i < n; i++) {                                                                   \
      T v = x[i] - shift;                                                                  \
      acc[0] += p == 2 ? v * v : v;                                                        \
    }                                                                                      \
    T s = 0;                                                                               \
    for (int l = 0; l < LANES; l++) s += acc[l];                                           \
    return s;                                                                              \
  }                                                                                        \
  static T row_sum_##S(const gk_tensor *x, int64_t C, T shift, int p) {                    \
    T buf[CHUNK], s = 0;                                                                   \
    for (int64_t c = 0; c < C; c += CHUNK) {                                               \
      int64_t m = gk_min64(CHUNK, C - c);                                                  \
      s += lane_sum_##S(gk_chunk_in_##S(x, c, m, buf), m, shift, p);                       \
    }                                                                                      \
    return s;                                                                              \
  }                                                                                        \
  static void norm_fwd_task_##S(const norm_job *j, int64_t task) {                         \
    const gk_tensor *const *a = j->a;                                                      \
    const gk_tensor *w = a[GK_ARG_WEIGHT], *b = a[GK_ARG_BIAS];                            \
    T eps = (T)j->plan->desc.norm.eps, xb[CHUNK], yb[CHUNK], wb[CHUNK], bb[CHUNK];         \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                        \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                              \
      gk_tensor x = gk_tensor_row(a[GK_ARG_X], j->nr, r), y = gk_tensor_row(a[GK_ARG_Y], j->nr, r); \
      T mean = j->layer ? row_sum_##S(&x, j->C, 0, 1) / (T)j->C : 0;                        \
      T rstd = (T)1 / sqrt(row_sum_##S(&x, j->C, mean, 2) / (T)j->C + eps);                \
      for (int64_t c = 0; c < j->C; c += CHUNK) {                                          \
        int64_t m = gk_min64(CHUNK, j->C - c);                                             \
        const T *xp = gk_chunk_in_##S(&x, c, m, xb);                                       \
        const T *wp = w ? gk_chunk_in_##S(w, c, m, wb) : NULL;                             \
        const T *bp = b ? gk_chunk_in_##S(b, c, m, bb) : NULL;                             \
        T *yp = gk_chunk_out_##S(&y, c, yb);                                               \
        for (int64_t i = 0; i < m; i++) {                                                  \
          T v = (xp[i] - mean) * rstd;                                                     \
          if (wp) v *= wp[i];                                                              \
          if (bp) v += bp[i];                                                              \
          yp[i] = v;                                                                       \
        }                                                                                  \
        gk_chunk_commit_##S(&y, c, m, yp, yb);                                             \
      }                                                                                    \
      gk_set(a[GK_ARG_RSTD], r, rstd);                                                     \
      if (j->layer) gk_set(a[GK_ARG_MEAN], r, mean);                                       \
    }                                                                                      \
  }                                                                                        \
  static void norm_bwd_task_##S(const norm_job *j, int64_t group) {                        \
    const gk_tensor *const *a = j->a;                                                      \
    const gk_tensor *w = a[GK_ARG_WEIGHT];                                                 \
    bool want_dw = a[GK_ARG_DWEIGHT] != NULL, want_db = a[GK_ARG_DBIAS] != NULL;           \
    /* this group's partial sums (no workspace when there are no parameters) */            \
    T *pdw = j->nparams ? (T *)j->partials + group * j->nparams * j->C : NULL;             \
    T *pdb = want_db ? pdw + (want_dw ? j->C : 0) : NULL;                                  \
    for (int64_t c = 0; c < j->nparams * j->C; c++) pdw[c] = 0;                            \
    T xb[CHUNK], dyb[CHUNK], wb[CHUNK], dxb[CHUNK];                                        \
    int64_t per = gk_ceil_div(j->rows, backward_groups(j->rows));                          \
    int64_t end = gk_min64(j->rows, (group + 1) * per);                                    \
    for (int64_t r = group * per; r < end; r++) {                                          \
      gk_tensor x = gk_tensor_row(a[GK_ARG_X], j->nr, r);                                  \
      gk_tensor dy = gk_tensor_row(a[GK_ARG_DY], j->nr, r);                                \
      gk_tensor dx = gk_tensor_row(a[GK_ARG_DX], j->nr, r);                                \
      T rstd = (T)gk_get(a[GK_ARG_RSTD], r);                                               \
      T mean = j->layer ? (T)gk_get(a[GK_ARG_MEAN], r) : 0;                                \
      T sg[LANES] = {0}, sgx[LANES] = {0};                                                 \
      for (int64_t c = 0; c < j->C; c += CHUNK) {                                          \
        int64_t m = gk_min64(CHUNK, j->C - c);                                             \
        const T *xp = gk_chunk_in_##S(&x, c, m, xb), *dyp = gk_chunk_in_##S(&dy, c, m, dyb); \
        const T *wp = w ? gk_chunk_in_##S(w, c, m, wb) : NULL;                             \
        for (int64_t i = 0; i < m; i++) {                                                  \
          T g = wp ? dyp[i] * wp[i] : dyp[i];                                              \
          sg[i % LANES] += g;                                                              \
          sgx[i % LANES] += g * ((xp[i] - mean) * rstd);                                   \
        }                                                                                  \
      }                                                                                    \
      T sum_g = 0, sum_gx = 0;                                                             \
      for (int l = 0; l < LANES; l++) {                                                    \
        sum_g += sg[l];                                                                    \
        sum_gx += sgx[l];                                                                  \
      }                                                                                    \
      T mean_g = j->layer ? sum_g / (T)j->C : 0, mean_gx = sum_gx / (T)j->C;               \
      for (int64_t c = 0; c < j->C; c += CHUNK) {                                          \
        int64_t m = gk_min64(CHUNK, j->C - c);                                             \
        const T *xp = gk_chunk_in_##S(&x, c, m, xb), *dyp = gk_chunk_in_##S(&dy, c, m, dyb); \
        const T *wp = w ? gk_chunk_in_##S(w, c, m, wb) : NULL;                             \
        T *dxp = gk_chunk_out_##S(&dx, c, dxb);                                            \
        for (int64_t i = 0; i < m; i++) {                                                  \
          T xhat = (xp[i] - mean) * rstd, g = wp ? dyp[i] * wp[i] : dyp[i];                \
          if (want_dw) pdw[c + i] += dyp[i] * xhat;                                        \
          if (want_db) pdb[c + i] += dyp[i];                                               \
          dxp[i] = rstd * (g - mean_g - xhat * mean_gx);                                   \
        }                                                                                  \
        gk_chunk_commit_##S(&dx, c, m, dxp, dxb);                                          \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  /* task = a CHUNK of columns: param grad = sum of group partials, in order */            \
  static void norm_reduce_task_##S(const norm_job *j, int64_t task) {                      \
    int64_t c0 = task * CHUNK, m = gk_min64(CHUNK, j->C - c0);                             \
    int64_t groups = backward_groups(j->rows);                                             \
    const gk_tensor *outs[2] = {j->a[GK_ARG_DWEIGHT], j->a[GK_ARG_DBIAS]};                 \
    int slot = 0;                                                                          \
    for (int o = 0; o < 2; o++) {                                                          \
      if (!outs[o]) continue;                                                              \
      T sum[CHUNK], old[CHUNK];                                                            \
      if (j->plan->desc.accumulate) gk_load_##S(outs[o], c0, m, old);                      \
      for (int64_t i = 0; i < m; i++) sum[i] = j->plan->desc.accumulate ? old[i] : 0;      \
      for (int64_t g = 0; g < groups; g++) {                                               \
        const T *p = (const T *)j->partials + (g * j->nparams + slot) * j->C + c0;         \
        for (int64_t i = 0; i < m; i++) sum[i] += p[i];                                    \
      }                                                                                    \
      gk_store_##S(outs[o], c0, m, sum);                                                   \
      slot++;                                                                              \
    }                                                                                      \
  }

GK_DEFINE_NORM(float, f32)
GK_DEFINE_NORM(double, f64)

static bool is_f64(const norm_job *j) { return j->plan->desc.dtype == GK_F64; }

static void fwd_task(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (is_f64(j)) norm_fwd_task_f64(j, t);
  else norm_fwd_task_f32(j, t);
}

static void bwd_task(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (is_f64(j)) norm_bwd_task_f64(j, t);
  else norm_bwd_task_f32(j, t);
}

static void reduce_task(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (is_f64(j)) norm_reduce_task_f64(j, t);
  else norm_reduce_task_f32(j, t);
}

static gk_status cpu_norm_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  norm_job j = job_of(plan, a, ws);
  j.rows_per_task = gk_ceil_div(ROW_TASK_ELEMS, j.C);
  gk_parallel_for(gk_ceil_div(j.rows, j.rows_per_task), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_norm_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  norm_job j = job_of(plan, a, ws);
  gk_parallel_for(backward_groups(j.rows), bwd_task, &j);
  if (j.nparams) gk_parallel_for(gk_ceil_div(j.C, CHUNK), reduce_task, &j);
  return GK_SUCCESS;
}

static size_t cpu_norm_bwd_workspace(const gk_plan *plan) {
  norm_job j = job_of(plan, NULL, NULL);
  size_t acc = plan->desc.dtype == GK_F64 ? sizeof(double) : sizeof(float);
  return (size_t)(backward_groups(j.rows) * j.nparams * j.C) * acc;
}

const gk_kernel gk_cpu_norm_fwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, NULL, cpu_norm_fwd};
const gk_kernel gk_cpu_norm_bwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, cpu_norm_bwd_workspace, cpu_norm_bwd};
