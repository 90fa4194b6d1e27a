// Threaded CPU kernels for RoPE (math as in src/ref/rope.c). First a table
// of cos and sin for every (t, pair) in the workspace, angles in f64 and
// rounded to f32 (kept f64 for f64), tasks of runs of positions; then tasks
// of runs of rows (b, t, h) rotate their pairs in chunks of PAIRS, reading
// both members of a chunk's pairs before writing, so y may be x.
#include "../ops/transformer.h"

#include <math.h>

enum { PAIRS = 256, TASK_ELEMS = 32768 };

typedef struct rope_job {
  const gk_op_desc *d;
  const gk_tensor *in, *out;
  int64_t T, h, rows, rows_per_task, t_per_task;
  bool half;
  double sign;
  void *table;  // cos [T][h], then sin [T][h]
} rope_job;

#define GK_DEFINE_ROPE(T_, S)                                                                \
  static void table_task_##S(const rope_job *j, int64_t task) {                               \
    T_ *cs = j->table, *sn = cs + j->T * j->h;                                                \
    int64_t end = gk_min64(j->T, (task + 1) * j->t_per_task);                                 \
    for (int64_t t = task * j->t_per_task; t < end; t++)                                      \
      for (int64_t i = 0; i < j->h; i++) {                                                    \
        double angle = gk_rope_angle(j->d, j->d->rope.offset + t, i);                         \
        cs[t * j->h + i] = (T_)cos(angle);                                                    \
        sn[t * j->h + i] = (T_)(j->sign * sin(angle));                                        \
      }                                                                                       \
  }                                                                                           \
  static void rope_task_##S(const rope_job *j, int64_t task) {                                \
    T_ ab[2 * PAIRS], bb[PAIRS], oa[2 * PAIRS], ob[PAIRS];                                    \
    const T_ *cs = j->table, *sn = cs + j->T * j->h;                                          \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                           \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                                 \
      gk_tensor x = gk_tensor_row(j->in, 1, r), y = gk_tensor_row(j->out, 1, r);              \
      int64_t t = gk_rope_position(j->d, r) - j->d->rope.offset;                              \
      const T_ *c = cs + t * j->h, *s = sn + t * j->h;                                        \
      for (int64_t i0 = 0; i0 < j->h; i0 += PAIRS) {                                          \
        int64_t n = gk_min64(PAIRS, j->h - i0);                                               \
        if (j->half) {                                                                        \
          const T_ *xa = gk_chunk_in_##S(&x, i0, n, ab), *xb = gk_chunk_in_##S(&x, j->h + i0, n, bb); \
          T_ *ya = gk_chunk_out_##S(&y, i0, oa), *yb = gk_chunk_out_##S(&y, j->h + i0, ob);   \
          for (int64_t i = 0; i < n; i++) {                                                   \
            T_ a = xa[i], b = xb[i], ci = c[i0 + i], si = s[i0 + i];                          \
            ya[i] = a * ci - b * si;                                                          \
            yb[i] = b * ci + a * si;                                                          \
          }                                                                                   \
          gk_chunk_commit_##S(&y, i0, n, ya, oa);                                             \
          gk_chunk_commit_##S(&y, j->h + i0, n, yb, ob);                                      \
        } else {                                                                              \
          const T_ *xp = gk_chunk_in_##S(&x, 2 * i0, 2 * n, ab);                              \
          T_ *yp = gk_chunk_out_##S(&y, 2 * i0, oa);                                          \
          for (int64_t i = 0; i < n; i++) {                                                   \
            T_ a = xp[2 * i], b = xp[2 * i + 1], ci = c[i0 + i], si = s[i0 + i];              \
            yp[2 * i] = a * ci - b * si;                                                      \
            yp[2 * i + 1] = b * ci + a * si;                                                  \
          }                                                                                   \
          gk_chunk_commit_##S(&y, 2 * i0, 2 * n, yp, oa);                                     \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
  }

GK_DEFINE_ROPE(float, f32)
GK_DEFINE_ROPE(double, f64)

static void table_task(void *ctx, int64_t t) {
  const rope_job *j = ctx;
  if (j->d->dtype == GK_F64) table_task_f64(j, t);
  else table_task_f32(j, t);
}

static void rope_task(void *ctx, int64_t t) {
  const rope_job *j = ctx;
  if (j->d->dtype == GK_F64) rope_task_f64(j, t);
  else rope_task_f32(j, t);
}

static int64_t seq_len(const gk_op_desc *d) { return d->shape[d->rope.layout == GK_ROPE_BTHD ? 1 : 2]; }

static size_t cpu_rope_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  size_t es = d->dtype == GK_F64 ? sizeof(double) : sizeof(float);
  return (size_t)(2 * seq_len(d) * (d->shape[3] / 2)) * es;
}

static gk_status cpu_rope(const gk_plan *plan, const gk_tensor *in, const gk_tensor *out, double sign, void *ws) {
  const gk_op_desc *d = &plan->desc;
  rope_job j = {d, in, out, seq_len(d), d->shape[3] / 2, d->shape[0] * d->shape[1] * d->shape[2], 0, 0,
                d->rope.pairing == GK_ROPE_HALF, sign, ws};
  if (j.h == 0 || j.rows == 0) return GK_SUCCESS;
  j.rows_per_task = gk_ceil_div(TASK_ELEMS, 2 * j.h);
  j.t_per_task = gk_ceil_div(4096, j.h);
  gk_parallel_for(gk_ceil_div(j.T, j.t_per_task), table_task, &j);
  gk_parallel_for(gk_ceil_div(j.rows, j.rows_per_task), rope_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_rope_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  return cpu_rope(plan, a[GK_ARG_X], a[GK_ARG_Y], 1.0, ws);
}

static gk_status cpu_rope_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  return cpu_rope(plan, a[GK_ARG_DY], a[GK_ARG_DX], -1.0, ws);
}

const gk_kernel gk_cpu_rope_fwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, cpu_rope_workspace, cpu_rope_fwd};
const gk_kernel gk_cpu_rope_bwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, cpu_rope_workspace, cpu_rope_bwd};
