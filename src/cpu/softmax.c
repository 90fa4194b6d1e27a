// Threaded CPU kernels for softmax and log_softmax (math as in
// src/ref/softmax.c). The dim is moved last in a view; tasks are runs of
// whole rows (cut by size only). A row is walked in chunks of CHUNK elements
// (loaded as f32, f64 for f64). Forward, y contiguous in the compute dtype
// (or a row that fits a ROW_BYTES buffer of the compute dtype, 8192 f32,
// kept there and stored once):
// the row max m, then y = exp(x - m) while s = sum y accumulates, then
// y *= 1 / s (one exponential per element; the row stays in cache after its
// first read). Otherwise (log_softmax, other long rows) it
// keeps a running max m and sum s, rescaling s when m grows
// (s = s exp(m_old - m_new) + sum exp(x - m_new)), then writes y in a second
// pass. Backward sums dy y (or dy), then writes dx (a dy of one value,
// autograd's dy of y.sum(), filled into a chunk buffer once a task); an f32
// (f64) dx over 16 MiB with rows over STREAM_ROW_BYTES goes chunk by chunk
// through the chunk buffer by non-temporal stores (stream_store.h).
// Sums run over LANES partial sums; exp is gk_exp_nonpos_f32 in f32 (every
// exponent is x - max <= 0), libm in f64. When every tensor's rows are
// contiguous bf16 (or every one's f16), the loops read and write the 16-bit
// elements in place, widening to f32 in registers and narrowing each result
// (round to nearest even) as they store it: the same bits as converting
// through buffers.
#include "../ops/transformer.h"
#include "row_lse.h"
#include "stream_store.h"

#include <string.h>

enum { CHUNK = 1024, LANES = 16, TASK_ELEMS = 16384, ROW_BYTES = 32768, STREAM_ROW_BYTES = 8192 };

typedef struct sm_job {
  gk_tensor x, y, dy, dx;      // views with the dim last
  int64_t n, rows, rows_per_task;
  bool log_form;
  bool stream;                 // dx rows contiguous f32 (f64) of over STREAM_ROW_BYTES: non-temporal stores
  gk_dtype half16;             // GK_BF16 or GK_F16 when every row is contiguous in it, else GK_F32
} sm_job;

GK_DEFINE_ROW_LSE(float, f32)
GK_DEFINE_ROW_LSE(double, f64)
GK_DEFINE_ROW_LSE_16()

// The tasks for rows of E (SFX: f32, f64, bf16, f16) computed in T (S),
// elements widened by LD and narrowed by ST, chunks taken by IN, OUT, COMMIT
// (row_lse.h); a whole row of T stored by STORE_ROW(y, n, e).
#define GK_DEFINE_SOFTMAX(T, S, SFX, E, LD, ST, IN, OUT, COMMIT, STORE_ROW)               \
  GK_INLINE void sm_fwd_task_##SFX(const sm_job *j, int64_t task) {                         \
    E buf[CHUNK], obuf[CHUNK];                                                              \
    T rowbuf[ROW_BYTES / sizeof(T)];                                                        \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                         \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                               \
      gk_tensor x = gk_tensor_row(&j->x, 1, r), y = gk_tensor_row(&j->y, 1, r);             \
      bool direct = sizeof(E) == sizeof(T) && y.dtype == (sizeof(T) == 4 ? GK_F32 : GK_F64) && \
                    gk_tensor_is_contiguous(&y);                                            \
      if (!j->log_form && (direct || j->n <= (int64_t)(ROW_BYTES / sizeof(T)))) {           \
        /* one exponential per element: max, e = exp(x - m) into y (or a row */             \
        /* buffer, stored once at the end), e *= 1 / sum e */                              \
        T m = gk_row_max_##SFX(&x, j->n, buf), acc[LANES] = {0}, s = 0;                     \
        T *e = direct ? (T *)y.data : rowbuf;                                               \
        for (int64_t c = 0; c < j->n; c += CHUNK) {                                         \
          int64_t len = gk_min64(CHUNK, j->n - c);                                          \
          const E *p = IN(&x, c, len, buf);                                                 \
          for (int64_t i = 0; i < len; i++) e[c + i] = GK_ROW_EXP_##S(LD(p[i]) - m);        \
          gk_lane_sum_##S(e + c, len, acc);                                                 \
        }                                                                                   \
        for (int l = 0; l < LANES; l++) s += acc[l];                                        \
        T inv = (T)1 / s;                                                                   \
        for (int64_t i = 0; i < j->n; i++) e[i] *= inv;                                     \
        if (!direct) STORE_ROW(&y, j->n, e);                                                \
        continue;                                                                           \
      }                                                                                     \
      T m, s;                                                                               \
      gk_row_lse_##SFX(&x, j->n, buf, &m, &s, NULL);                                        \
      T inv = (T)1 / s, log_s = log(s);                                                     \
      for (int64_t c = 0; c < j->n; c += CHUNK) {                                           \
        int64_t len = gk_min64(CHUNK, j->n - c);                                            \
        const E *p = IN(&x, c, len, buf);                                                   \
        E *o = OUT(&y, c, obuf);                                                            \
        if (j->log_form)                                                                    \
          for (int64_t i = 0; i < len; i++) o[i] = ST((LD(p[i]) - m) - log_s);              \
        else                                                                                \
          for (int64_t i = 0; i < len; i++) o[i] = ST(GK_ROW_EXP_##S(LD(p[i]) - m) * inv);  \
        COMMIT(&y, c, len, o, obuf);                                                        \
      }                                                                                     \
    }                                                                                       \
  }                                                                                         \
  /* a dy of one value (every stride 0: autograd's dy of y.sum()) is filled into gbuf */  \
  /* once a task, not once a chunk: the same loops, the same bits as a dense dy */          \
  GK_INLINE void sm_bwd_task_##SFX(const sm_job *j, int64_t task) {                         \
    E gbuf[CHUNK], ybuf[CHUNK], obuf[CHUNK];                                                \
    const E *one = gk_tensor_is_one_value(&j->dy) && j->n > 0                               \
                       ? IN(&j->dy, 0, gk_min64(CHUNK, j->n), gbuf) : NULL;                 \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                         \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                               \
      gk_tensor dy = gk_tensor_row(&j->dy, 1, r), y = gk_tensor_row(&j->y, 1, r);           \
      gk_tensor dx = gk_tensor_row(&j->dx, 1, r);                                           \
      T acc[LANES] = {0}, s = 0;                                                            \
      for (int64_t c = 0; c < j->n; c += CHUNK) {                                           \
        int64_t len = gk_min64(CHUNK, j->n - c);                                            \
        const E *g = one ? one : IN(&dy, c, len, gbuf);                                     \
        if (j->log_form)                                                                    \
          gk_lane_sum_##SFX(g, len, acc);                                                   \
        else                                                                                \
          gk_lane_dot_##SFX(g, IN(&y, c, len, ybuf), len, acc);                             \
      }                                                                                     \
      for (int l = 0; l < LANES; l++) s += acc[l];                                          \
      for (int64_t c = 0; c < j->n; c += CHUNK) {                                           \
        int64_t len = gk_min64(CHUNK, j->n - c);                                            \
        const E *g = one ? one : IN(&dy, c, len, gbuf), *v = IN(&y, c, len, ybuf);          \
        E *o = j->stream ? obuf : OUT(&dx, c, obuf);                                        \
        if (j->log_form)                                                                    \
          for (int64_t i = 0; i < len; i++) o[i] = ST(LD(g[i]) - GK_ROW_EXP_##S(LD(v[i])) * s); \
        else                                                                                \
          for (int64_t i = 0; i < len; i++) o[i] = ST(LD(v[i]) * (LD(g[i]) - s));          \
        if (j->stream)                                                                      \
          gk_put_bytes((E *)dx.data + c, obuf, (size_t)len * sizeof(E), true);              \
        else                                                                                \
          COMMIT(&dx, c, len, o, obuf);                                                     \
      }                                                                                     \
    }                                                                                       \
    gk_stream_fence(j->stream);                                                             \
  }

#define SM_STORE_f32(y, n, e) gk_store_f32(y, 0, n, e)
#define SM_STORE_f64(y, n, e) gk_store_f64(y, 0, n, e)
#define SM_STORE_16(y, n, e, ST)                                                            \
  do {                                                                                      \
    uint16_t *out = (uint16_t *)(y)->data;                                                  \
    for (int64_t i = 0; i < (n); i++) out[i] = ST((e)[i]);                                  \
  } while (0)
#define SM_STORE_bf16(y, n, e) SM_STORE_16(y, n, e, gk_f32_to_bf16_inline)
#define SM_STORE_f16(y, n, e) SM_STORE_16(y, n, e, gk_f32_to_f16_inline)

GK_DEFINE_SOFTMAX(float, f32, f32, float, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f32, GK_ROW_OUT_f32, GK_ROW_COMMIT_f32,
                  SM_STORE_f32)
GK_DEFINE_SOFTMAX(double, f64, f64, double, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f64, GK_ROW_OUT_f64,
                  GK_ROW_COMMIT_f64, SM_STORE_f64)
GK_DEFINE_SOFTMAX(float, f32, bf16, uint16_t, gk_bf16_to_f32_inline, gk_f32_to_bf16_inline, GK_ROW_IN_16,
                  GK_ROW_OUT_16, GK_ROW_COMMIT_16, SM_STORE_bf16)
GK_DEFINE_SOFTMAX(float, f32, f16, uint16_t, gk_f16_to_f32_inline, gk_f32_to_f16_inline, GK_ROW_IN_16,
                  GK_ROW_OUT_16, GK_ROW_COMMIT_16, SM_STORE_f16)

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  const sm_job *j = ctx;
  if (j->half16 == GK_BF16) sm_fwd_task_bf16(j, t);
  else if (j->half16 == GK_F16) sm_fwd_task_f16(j, t);
  else if (j->x.dtype == GK_F64) sm_fwd_task_f64(j, t);
  else sm_fwd_task_f32(j, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  const sm_job *j = ctx;
  if (j->half16 == GK_BF16) sm_bwd_task_bf16(j, t);
  else if (j->half16 == GK_F16) sm_bwd_task_f16(j, t);
  else if (j->y.dtype == GK_F64) sm_bwd_task_f64(j, t);
  else sm_bwd_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t t), (ctx, t))

// Whether view t (dim last) has contiguous rows of 16-bit dtype dt.
static bool rows_16(const gk_tensor *t, gk_dtype dt) {
  return !t->data || (t->dtype == dt && (t->shape[t->rank - 1] <= 1 || t->strides[t->rank - 1] == 1));
}

static sm_job job_of(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  int dim = d->softmax.dim;
  sm_job j;
  memset(&j, 0, sizeof j);
  const gk_tensor *any = a[GK_ARG_Y];
  j.y = gk_tensor_move_dim_last(any, dim);
  if (a[GK_ARG_X]) j.x = gk_tensor_move_dim_last(a[GK_ARG_X], dim);
  if (a[GK_ARG_DY]) j.dy = gk_tensor_move_dim_last(a[GK_ARG_DY], dim);
  if (a[GK_ARG_DX]) j.dx = gk_tensor_move_dim_last(a[GK_ARG_DX], dim);
  j.n = d->shape[dim];
  j.rows = j.n ? gk_tensor_numel(any) / j.n : 0;
  j.rows_per_task = gk_ceil_div(TASK_ELEMS, j.n ? j.n : 1);
  j.log_form = d->op == GK_OP_LOG_SOFTMAX;
  gk_dtype dt = j.y.dtype;
  bool all16 = (dt == GK_BF16 || dt == GK_F16) && j.y.rank > 0;
  j.half16 = all16 && rows_16(&j.y, dt) && rows_16(&j.x, dt) && rows_16(&j.dy, dt) && rows_16(&j.dx, dt) ? dt : GK_F32;
  // f32 (f64) rows over STREAM_ROW_BYTES only: measured, one thread, 4096x8192 f32 faster by streams
  // (26 -> 20-25 ms), 4096x2048 f32 not (6.0 -> 6.2-6.6 in later runs), 4096x2048 bf16 slower (2.8 -> 3.9)
  if (a[GK_ARG_DX] && j.half16 == GK_F32 && (dt == GK_F32 || dt == GK_F64) &&
      j.n * (int64_t)gk_dtype_size(dt) > STREAM_ROW_BYTES) {
    j.stream = j.dx.dtype == dt && j.dx.strides[j.dx.rank - 1] == 1 &&
               gk_stream_output((size_t)gk_tensor_numel(&j.dx) * gk_dtype_size(dt));
  }
  return j;
}

static gk_status cpu_softmax_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  sm_job j = job_of(plan, a);
  gk_parallel_for(gk_ceil_div(j.rows, j.rows_per_task), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_softmax_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  sm_job j = job_of(plan, a);
  gk_parallel_for(gk_ceil_div(j.rows, j.rows_per_task), bwd_task, &j);
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_softmax_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_softmax_fwd};
const gk_kernel gk_cpu_softmax_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_softmax_bwd};
