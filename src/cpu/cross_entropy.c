// Threaded CPU kernel for cross-entropy (math as in src/ref/cross_entropy.c).
// The targets are checked first (nothing is written if one is bad). Tasks
// are runs of whole rows (cut by size only); x_t is read before anything is
// written, so dlogits may overwrite the logits. Rows are read in chunks of
// CHUNK logits (f32, f64 for f64), sums run over LANES partial sums:
// - dlogits contiguous in the compute dtype (f32; f64 for f64): the row max
//   m first, then e = exp(x - m) written to dlogits while s = sum e and
//   sum x accumulate, then dlogits scaled in place to
//   g (e / s - eps / V), less g (1 - eps) at the target: one exponential per
//   logit, the row in L2 after its first read;
// - otherwise pass 1 keeps a running max and sum (gk_row_lse) and pass 2
//   computes exp(x - m) again for the gradient.
// loss_r = (1 - eps)((m - x_t) + log s) + eps((m - mean x) + log s) goes to
// the workspace; the row losses are summed in row order in f64.
// Rows of contiguous bf16 (f16) logits and dlogits are read and written in
// place, widened to f32 in registers and each result narrowed (round to
// nearest even) as it is stored: the same bits as through buffers.
#include "../ops/transformer.h"
#include "row_lse.h"

#include <string.h>

enum { CHUNK = 1024, LANES = 16, TASK_ELEMS = 16384, ROW_BYTES = 32768 };

typedef struct ce_job {
  const gk_tensor *x, *t, *dx;
  int64_t rows, V, rows_per_task, ignore;
  double g, eps;
  double *row_loss;
  gk_dtype half16;  // GK_BF16 or GK_F16 when the logits' and dlogits' rows are contiguous in it, else GK_F32
} ce_job;

GK_DEFINE_ROW_LSE(float, f32)
GK_DEFINE_ROW_LSE(double, f64)
GK_DEFINE_ROW_LSE_16()

// The task for rows of E (SFX: f32, f64, bf16, f16) computed in T (S),
// elements widened by LD and narrowed by ST, chunks taken by IN, OUT, COMMIT
// (row_lse.h).
#define GK_DEFINE_CE(T, S, SFX, E, LD, ST, IN, OUT, COMMIT)                                   \
  GK_INLINE void ce_task_##SFX(const ce_job *j, int64_t task) {                               \
    E buf[CHUNK], obuf[CHUNK];                                                                \
    T rowbuf[ROW_BYTES / sizeof(T)];                                                          \
    T g = (T)j->g, eps = (T)j->eps, V = (T)j->V;                                              \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                           \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                                 \
      gk_tensor x = gk_tensor_row(j->x, 1, r);                                                \
      gk_tensor dx = j->dx ? gk_tensor_row(j->dx, 1, r) : x; /* x: unused without dlogits */  \
      int64_t t = gk_get_index(j->t, r);                                                      \
      if (t == j->ignore) {                                                                   \
        j->row_loss[r] = 0;                                                                   \
        for (int64_t c = 0; j->dx && c < j->V; c += CHUNK) {                                  \
          int64_t len = gk_min64(CHUNK, j->V - c);                                            \
          E *o = OUT(&dx, c, obuf);                                                           \
          for (int64_t i = 0; i < len; i++) o[i] = ST((T)0);                                  \
          COMMIT(&dx, c, len, o, obuf);                                                       \
        }                                                                                     \
        continue;                                                                             \
      }                                                                                       \
      T m, s, sumx, xt = (T)gk_get(&x, t); /* read before dlogits may overwrite it */           \
      bool direct = sizeof(E) == sizeof(T) && j->dx && dx.dtype == (sizeof(T) == 4 ? GK_F32 : GK_F64) && \
                    gk_tensor_is_contiguous(&dx);                                             \
      bool one_exp = direct || (j->dx && j->V <= (int64_t)(ROW_BYTES / sizeof(T)));            \
      if (one_exp) {                                                                          \
        /* one exponential per logit: max, then e = exp(x - m) into dlogits, */               \
        /* summed on the way; then the row is scaled in place (it is in L2) */                \
        m = gk_row_max_##SFX(&x, j->V, buf);                                                  \
        T acc[LANES] = {0}, sx[LANES] = {0};                                                  \
        T *e = direct ? (T *)dx.data : rowbuf;                                                \
        for (int64_t c = 0; c < j->V; c += CHUNK) {                                           \
          int64_t len = gk_min64(CHUNK, j->V - c);                                            \
          const E *p = IN(&x, c, len, buf);                                                   \
          T *ec = e + c;                                                                      \
          gk_lane_sum_##SFX(p, len, sx); /* before ec (maybe p itself) is overwritten */      \
          for (int64_t i = 0; i < len; i++) ec[i] = GK_ROW_EXP_##S(LD(p[i]) - m);             \
          gk_lane_sum_##S(ec, len, acc);                                                      \
        }                                                                                     \
        s = sumx = 0;                                                                         \
        for (int l = 0; l < LANES; l++) {                                                     \
          s += acc[l];                                                                        \
          sumx += sx[l];                                                                      \
        }                                                                                     \
      } else {                                                                                \
        gk_row_lse_##SFX(&x, j->V, buf, &m, &s, &sumx);                                       \
      }                                                                                       \
      T log_s = (T)log(s), inv = (T)1 / s;                                                    \
      j->row_loss[r] = (double)((1 - eps) * ((m - xt) + log_s) + eps * ((m - sumx / V) + log_s)); \
      if (!j->dx) continue;                                                                   \
      T off = eps / V;                                                                        \
      if (direct) {                                                                           \
        T *o = (T *)dx.data;                                                                  \
        for (int64_t i = 0; i < j->V; i++) o[i] = g * (o[i] * inv - off);                     \
        o[t] -= g * (1 - eps);                                                                \
        continue;                                                                             \
      }                                                                                       \
      if (one_exp) {                                                                          \
        for (int64_t c = 0; c < j->V; c += CHUNK) {                                           \
          int64_t len = gk_min64(CHUNK, j->V - c);                                            \
          E *o = OUT(&dx, c, obuf);                                                           \
          for (int64_t i = 0; i < len; i++) o[i] = ST(g * (rowbuf[c + i] * inv - off));       \
          if (t >= c && t < c + len) {                                                        \
            volatile T gt = g * (rowbuf[t] * inv - off);                                      \
            o[t - c] = ST(gt - g * (1 - eps));                                                \
          }                                                                                   \
          COMMIT(&dx, c, len, o, obuf);                                                       \
        }                                                                                     \
        continue;                                                                             \
      }                                                                                       \
      for (int64_t c = 0; c < j->V; c += CHUNK) {                                             \
        int64_t len = gk_min64(CHUNK, j->V - c);                                              \
        const E *p = IN(&x, c, len, buf);                                                     \
        E *o = OUT(&dx, c, obuf);                                                             \
        for (int64_t i = 0; i < len; i++) o[i] = ST(g * (GK_ROW_EXP_##S(LD(p[i]) - m) * inv - off)); \
        if (t >= c && t < c + len) {                                                          \
          /* the target's value, rounded to T, less g (1 - eps); from xt, as */               \
          /* dlogits may have overwritten the logit */                                        \
          volatile T gt = g * (GK_ROW_EXP_##S(xt - m) * inv - off);                           \
          o[t - c] = ST(gt - g * (1 - eps));                                                  \
        }                                                                                     \
        COMMIT(&dx, c, len, o, obuf);                                                         \
      }                                                                                       \
    }                                                                                         \
  }

GK_DEFINE_CE(float, f32, f32, float, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f32, GK_ROW_OUT_f32, GK_ROW_COMMIT_f32)
GK_DEFINE_CE(double, f64, f64, double, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f64, GK_ROW_OUT_f64, GK_ROW_COMMIT_f64)
GK_DEFINE_CE(float, f32, bf16, uint16_t, gk_bf16_to_f32_inline, gk_f32_to_bf16_inline, GK_ROW_IN_16, GK_ROW_OUT_16,
             GK_ROW_COMMIT_16)
GK_DEFINE_CE(float, f32, f16, uint16_t, gk_f16_to_f32_inline, gk_f32_to_f16_inline, GK_ROW_IN_16, GK_ROW_OUT_16,
             GK_ROW_COMMIT_16)

GK_INLINE void ce_task_body(void *ctx, int64_t task) {
  const ce_job *j = ctx;
  if (j->half16 == GK_BF16) ce_task_bf16(j, task);
  else if (j->half16 == GK_F16) ce_task_f16(j, task);
  else if (j->x->dtype == GK_F64) ce_task_f64(j, task);
  else ce_task_f32(j, task);
}
GK_ISA_VARIANTS(ce_task, (void *ctx, int64_t task), (ctx, task))

// Whether t (NULL: absent) has contiguous rows (the last dim) of 16-bit dtype dt.
static bool rows_16(const gk_tensor *t, gk_dtype dt) {
  return !t || (t->dtype == dt && (t->shape[t->rank - 1] <= 1 || t->strides[t->rank - 1] == 1));
}

static size_t cpu_ce_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  int64_t rows = 1;
  for (int i = 0; i < d->rank - 1; i++) rows *= d->shape[i];
  return (size_t)rows * sizeof(double);
}

static gk_status cpu_ce_run(const gk_plan *plan, const gk_kernel_args a, void *ws, double dloss) {
  const gk_op_desc *d = &plan->desc;
  ce_job j = {a[GK_ARG_LOGITS], a[GK_ARG_TARGET], a[GK_ARG_DLOGITS], 0, d->shape[d->rank - 1], 0,
              d->ce.ignore_index, 0, d->ce.label_smoothing, ws, GK_F32};
  j.rows = gk_tensor_numel(j.x) / j.V;
  gk_dtype dt = j.x->dtype;
  if ((dt == GK_BF16 || dt == GK_F16) && rows_16(j.x, dt) && rows_16(j.dx, dt)) j.half16 = dt;
  int64_t used = gk_count_not_ignored(j.t, j.ignore);
  bool mean = d->ce.reduction == GK_REDUCTION_MEAN;
  j.g = mean ? (used ? dloss / (double)used : 0.0) : dloss;
  j.rows_per_task = gk_ceil_div(TASK_ELEMS, j.V);
  gk_parallel_for(gk_ceil_div(j.rows, j.rows_per_task), ce_task, &j);
  if (a[GK_ARG_LOSS]) {
    double total = 0;
    for (int64_t r = 0; r < j.rows; r++) total += j.row_loss[r];
    gk_set(a[GK_ARG_LOSS], 0, !mean ? total : used ? total / (double)used : NAN);
  }
  return GK_SUCCESS;
}

static gk_status cpu_cross_entropy_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  return cpu_ce_run(plan, a, ws, plan->desc.ce.grad_scale);
}

static gk_status cpu_cross_entropy_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  return cpu_ce_run(plan, a, ws, gk_get(a[GK_ARG_DLOSS], 0));
}

const gk_kernel gk_cpu_cross_entropy_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_ce_workspace,
                                            .run = cpu_cross_entropy_fwd};
const gk_kernel gk_cpu_cross_entropy_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_ce_workspace,
                                            .run = cpu_cross_entropy_bwd};
