// Threaded CPU kernels for RMSNorm and LayerNorm (math as in src/ref/norm.c),
// f32 math (f64 for f64), hot loops compiled per ISA level (isa.h).
//   x (rows, C) through the trailing normalized dims; w, b (C).
//   Forward, tasks of whole rows: mean = sum x / C (LayerNorm; 0 for
//   RMSNorm), rstd = 1/sqrt(sum (x - mean)^2 / C + eps),
//   y = (x - mean) rstd w + b.
//   Backward: g = dy w, xhat = (x - mean) rstd; a first pass sums g and
//   g xhat, a second writes dx = rstd (g - sum g / C - xhat sum(g xhat) / C)
//   (no sum g term for RMSNorm) and adds dy xhat, dy to the dweight, dbias
//   partial rows of the row's group. Rows are cut into at most GROUPS groups
//   (by row count only); each group sums its partials in the workspace, then
//   the partials are added group by group in order, so every thread count
//   gives the same bits.
// A row of up to ROW_MAX elements is taken once (a contiguous row of the
// compute type in place, others converted into a buffer) and every pass reads
// it from the cache (the row buffers take 128 KiB of stack in f32, 256 KiB in
// f64); w and b are taken once per task. Longer rows are walked
// in CHUNK pieces, taken again in each pass. Forward rows of more than
// LONG_ROW_BYTES read and written in place (8192 f32: 32 KiB, where x, w, b
// and y of a row no longer fit L1 together) go in blocks of ROW_BLOCK rows:
// the statistics of each, then y COLUMN_BLOCK columns at a time across the
// block, so each piece of w and b is read from L1 for all its rows. Row
// sums run over LANES partial sums (lane = column % LANES), which the
// compiler keeps in vector registers.
// While backward writes dx of a row, it prefetches the next row of x and dy.
// When x and y (backward: x, dy and dx) have contiguous rows of bf16 (or all
// of f16), every pass reads the 16-bit row in place, widening each element
// to f32 in a register, and the results are narrowed (round to nearest
// even) as they are stored (row_access.h): the same bits as through buffers.
#include "../core/convert.h"
#include "../core/internal.h"
#include "row_access.h"

#include <math.h>
#include <string.h>

enum { CHUNK = 512, ROW_MAX = 8192, LANES = 32, ROW_TASK_ELEMS = 32768, GROUPS = 64, LINE = 64 };
// Forward rows of more than LONG_ROW_BYTES that are read and written in place
// go in blocks of ROW_BLOCK rows, their outputs COLUMN_BLOCK columns at a time.
enum { LONG_ROW_BYTES = 8192, ROW_BLOCK = 4, COLUMN_BLOCK = 1024 };

// The rows of a tensor (its trailing nr dims): the view of row 0 and the
// bytes from one row to the next, 0 when the leading dims do not step evenly.
typedef struct row_walk {
  const gk_tensor *t;
  gk_tensor row0;
  int64_t step;
} row_walk;

typedef struct norm_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  bool layer;
  int nr;
  int64_t rows, C, rows_per_task;
  row_walk x, y, dy, dx;
  void *partials;      // backward: [groups][nparams][C] accumulator-typed sums
  int nparams;
  gk_dtype half16;     // GK_BF16 or GK_F16 when the rows of x, y / x, dy, dx are contiguous in it, else GK_F32
  bool long_rows;      // forward: rows of more than LONG_ROW_BYTES, read and written in place
} norm_job;

static row_walk row_walk_of(const gk_tensor *t, int nr) {
  row_walk w = {t, {0}, 0};
  if (!t) return w;
  int lead = t->rank - nr;
  w.row0 = *t;  // row 0 starts at the tensor's data
  w.row0.rank = nr;
  for (int i = 0; i < nr; i++) {
    w.row0.shape[i] = t->shape[lead + i];
    w.row0.strides[i] = t->strides[lead + i];
  }
  int64_t step = 0, span = 0;  // stride of the innermost leading dim of size > 1, and what the next must have
  bool first = true;           // not span == 0: a broadcast dim (stride 0) has span 0 too
  for (int i = lead - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (!first && t->strides[i] != span) return w;
    if (first) step = t->strides[i];
    first = false;
    span = t->strides[i] * t->shape[i];
  }
  w.step = step * (int64_t)gk_dtype_size(t->dtype);
  return w;
}

// Set *row to row r: row 0 moved by the step, or gk_tensor_row's view.
GK_INLINE void row_seek(const row_walk *w, int nr, int64_t r, gk_tensor *row) {
  if (w->step) row->data = (char *)w->row0.data + r * w->step;
  else *row = gk_tensor_row(w->t, nr, r);
}

// Whether the rows of w (none: true) are contiguous, of dtype dt.
static bool rows_in(const row_walk *w, gk_dtype dt) {
  return !w->t || (w->t->dtype == dt && gk_tensor_is_contiguous(&w->row0));
}

static norm_job job_of(const gk_plan *plan, const gk_tensor *const *a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  norm_job j = {plan, a, d->op == GK_OP_LAYERNORM, d->norm.normalized_rank, 1, 1, 1, {0}, {0}, {0}, {0}, ws, 0,
                GK_F32, false};
  for (int i = 0; i < d->rank; i++) {
    if (i < d->rank - j.nr) j.rows *= d->shape[i];
    else j.C *= d->shape[i];
  }
  if (a) {
    j.x = row_walk_of(a[GK_ARG_X], j.nr);
    j.y = row_walk_of(a[GK_ARG_Y], j.nr);
    j.dy = row_walk_of(a[GK_ARG_DY], j.nr);
    j.dx = row_walk_of(a[GK_ARG_DX], j.nr);
  }
  j.nparams = plan->args[GK_ARG_DWEIGHT].used + plan->args[GK_ARG_DBIAS].used;
  gk_dtype dt = d->dtype;
  if (a && (dt == GK_BF16 || dt == GK_F16) && rows_in(&j.x, dt) && rows_in(&j.y, dt) && rows_in(&j.dy, dt) &&
      rows_in(&j.dx, dt))
    j.half16 = dt;
  // in place: 16-bit rows read as they are, or f32 (f64) rows contiguous in it
  bool in_place = j.half16 != GK_F32 || ((dt == GK_F32 || dt == GK_F64) && rows_in(&j.x, dt) && rows_in(&j.y, dt) &&
                                         rows_in(&j.dy, dt) && rows_in(&j.dx, dt));
  j.long_rows = a && in_place && j.C <= ROW_MAX && j.C * (int64_t)gk_dtype_size(dt) > LONG_ROW_BYTES;
  return j;
}

static int64_t backward_groups(int64_t rows) { return gk_min64(rows, GROUPS); }

// The piece a row is walked in: the whole row when it fits the buffers.
static int64_t piece_len(int64_t C) { return C <= ROW_MAX ? C : CHUNK; }

// The kernels for rows of E (SFX: f32, f64, bf16, f16) computed in T (S:
// f32, f64), elements widened by LD and narrowed by ST, chunks taken by IN,
// OUT, COMMIT (row_access.h); the weight and bias are taken as T. A piece
// [c, c + m) of a row tensor t is `whole ? row_ptr : IN(t, c, m)`.
#define GK_DEFINE_NORM(T, S, SFX, E, LD, ST, IN, OUT, COMMIT)                               \
  /* sum of (x - shift)^p over n elements, p = 1 or 2, into LANES partial sums */          \
  GK_INLINE void lane_sum_##SFX(const E *restrict x, int64_t n, T shift, int p, T *restrict acc) { \
    int64_t i = 0;                                                                         \
    for (; i + LANES <= n; i += LANES)                                                     \
      for (int l = 0; l < LANES; l++) {                                                    \
        T v = LD(x[i + l]) - shift;                                                        \
        acc[l] += p == 2 ? v * v : v;                                                      \
      }                                                                                    \
    for (int l = 0; i < n; i++, l++) {                                                     \
      T v = LD(x[i]) - shift;                                                              \
      acc[l] += p == 2 ? v * v : v;                                                        \
    }                                                                                      \
  }                                                                                        \
  /* sum over the row of (x - shift)^p */                                                  \
  GK_INLINE T row_sum_##SFX(const gk_tensor *x, const E *xrow, int64_t C, T shift, int p, E *buf) { \
    T acc[LANES] = {0};                                                                    \
    for (int64_t c = 0, P = piece_len(C); c < C; c += P) {                                 \
      int64_t m = gk_min64(P, C - c);                                                      \
      lane_sum_##SFX(xrow ? xrow : IN(x, c, m, buf), m, shift, p, acc);                    \
    }                                                                                      \
    return lanes_total_##S(acc);                                                           \
  }                                                                                        \
  /* y = (x - mean) rstd w + b over one piece (w, b may be NULL; every pointer test */    \
  /* stays outside the loops, so none becomes a masked load through NULL) */               \
  GK_INLINE void norm_out_##SFX(const E *restrict x, const T *restrict w, const T *restrict b, \
                                E *restrict y, int64_t m, T mean, T rstd) {                \
    if (w && b)                                                                            \
      for (int64_t i = 0; i < m; i++) y[i] = ST((LD(x[i]) - mean) * rstd * w[i] + b[i]);   \
    else if (w)                                                                            \
      for (int64_t i = 0; i < m; i++) y[i] = ST((LD(x[i]) - mean) * rstd * w[i]);          \
    else if (b)                                                                            \
      for (int64_t i = 0; i < m; i++) y[i] = ST((LD(x[i]) - mean) * rstd + b[i]);          \
    else                                                                                   \
      for (int64_t i = 0; i < m; i++) y[i] = ST((LD(x[i]) - mean) * rstd);                 \
  }                                                                                        \
  GK_INLINE void norm_fwd_rows_##SFX(const norm_job *j, int64_t task) {                    \
    const gk_tensor *const *a = j->a;                                                      \
    const gk_tensor *w = a[GK_ARG_WEIGHT], *b = a[GK_ARG_BIAS];                            \
    int64_t C = j->C, P = piece_len(C);                                                    \
    bool whole = P == C;                                                                   \
    T eps = (T)j->plan->desc.norm.eps, wb[ROW_MAX], bb[ROW_MAX];                           \
    E xb[ROW_MAX], yb[ROW_MAX];                                                            \
    const T *wrow = whole && w ? gk_chunk_in_##S(w, 0, C, wb) : NULL;                      \
    const T *brow = whole && b ? gk_chunk_in_##S(b, 0, C, bb) : NULL;                      \
    gk_tensor x = j->x.row0, y = j->y.row0;                                                \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                        \
    for (int64_t r = task * j->rows_per_task; r < end; r++) {                              \
      row_seek(&j->x, j->nr, r, &x);                                                       \
      row_seek(&j->y, j->nr, r, &y);                                                       \
      const E *xrow = whole ? IN(&x, 0, C, xb) : NULL;                                     \
      T mean = j->layer ? row_sum_##SFX(&x, xrow, C, 0, 1, xb) / (T)C : 0;                 \
      T rstd = (T)1 / sqrt(row_sum_##SFX(&x, xrow, C, mean, 2, xb) / (T)C + eps);          \
      for (int64_t c = 0; c < C; c += P) {                                                 \
        int64_t m = gk_min64(P, C - c);                                                    \
        const E *xp = whole ? xrow : IN(&x, c, m, xb);                                     \
        const T *wp = whole || !w ? wrow : gk_chunk_in_##S(w, c, m, wb);                   \
        const T *bp = whole || !b ? brow : gk_chunk_in_##S(b, c, m, bb);                   \
        E *yp = OUT(&y, c, yb);                                                            \
        norm_out_##SFX(xp, wp, bp, yp, m, mean, rstd);                                     \
        COMMIT(&y, c, m, yp, yb);                                                          \
      }                                                                                    \
      gk_set(a[GK_ARG_RSTD], r, rstd);                                                     \
      if (j->layer) gk_set(a[GK_ARG_MEAN], r, mean);                                       \
    }                                                                                      \
  }                                                                                        \
  /* long rows read and written in place, in blocks of ROW_BLOCK rows: the statistics */  \
  /* of each, then the output COLUMN_BLOCK columns at a time over the block's rows, so a */ \
  /* piece of w and b serves them all from L1 (a whole row of x, w, b and y does not fit) */ \
  GK_INLINE void norm_fwd_long_rows_##SFX(const norm_job *j, int64_t task) {               \
    const gk_tensor *const *a = j->a;                                                      \
    const gk_tensor *w = a[GK_ARG_WEIGHT], *b = a[GK_ARG_BIAS];                            \
    int64_t C = j->C;                                                                      \
    T eps = (T)j->plan->desc.norm.eps, wb[ROW_MAX], bb[ROW_MAX];                           \
    const T *wrow = w ? gk_chunk_in_##S(w, 0, C, wb) : NULL;                               \
    const T *brow = b ? gk_chunk_in_##S(b, 0, C, bb) : NULL;                               \
    int64_t end = gk_min64(j->rows, (task + 1) * j->rows_per_task);                        \
    for (int64_t r0 = task * j->rows_per_task; r0 < end; r0 += ROW_BLOCK) {                \
      int64_t n = gk_min64(ROW_BLOCK, end - r0);                                           \
      const E *xrow[ROW_BLOCK];                                                            \
      E *yrow[ROW_BLOCK];                                                                  \
      T mean[ROW_BLOCK], rstd[ROW_BLOCK];                                                  \
      for (int64_t k = 0; k < n; k++) {                                                    \
        gk_tensor x = j->x.row0, y = j->y.row0;                                            \
        row_seek(&j->x, j->nr, r0 + k, &x);                                                \
        row_seek(&j->y, j->nr, r0 + k, &y);                                                \
        xrow[k] = (const E *)x.data;                                                       \
        yrow[k] = (E *)y.data;                                                             \
        mean[k] = j->layer ? row_sum_##SFX(&x, xrow[k], C, 0, 1, NULL) / (T)C : 0;         \
        rstd[k] = (T)1 / sqrt(row_sum_##SFX(&x, xrow[k], C, mean[k], 2, NULL) / (T)C + eps); \
        gk_set(a[GK_ARG_RSTD], r0 + k, rstd[k]);                                           \
        if (j->layer) gk_set(a[GK_ARG_MEAN], r0 + k, mean[k]);                             \
      }                                                                                    \
      for (int64_t c = 0; c < C; c += COLUMN_BLOCK) {                                      \
        int64_t m = gk_min64(COLUMN_BLOCK, C - c);                                         \
        for (int64_t k = 0; k < n; k++)                                                    \
          norm_out_##SFX(xrow[k] + c, wrow ? wrow + c : NULL, brow ? brow + c : NULL, yrow[k] + c, m, \
                         mean[k], rstd[k]);                                                \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  GK_INLINE void norm_fwd_task_##SFX(const norm_job *j, int64_t task) {                    \
    if (j->long_rows) norm_fwd_long_rows_##SFX(j, task);                                   \
    else norm_fwd_rows_##SFX(j, task);                                                     \
  }                                                                                        \
  /* backward pass 1 over a piece: sg += g, sgx += g xhat, per lane */                     \
  GK_INLINE void grad_sums_##SFX(const E *restrict x, const E *restrict dy, const T *restrict w, \
                                 int64_t m, T mean, T rstd, T *restrict sg, T *restrict sgx) { \
    int64_t i = 0;                                                                         \
    if (w) {                                                                               \
      for (; i + LANES <= m; i += LANES)                                                   \
        for (int l = 0; l < LANES; l++) {                                                  \
          T g = LD(dy[i + l]) * w[i + l];                                                  \
          sg[l] += g;                                                                      \
          sgx[l] += g * ((LD(x[i + l]) - mean) * rstd);                                    \
        }                                                                                  \
      for (int l = 0; i < m; i++, l++) {                                                   \
        T g = LD(dy[i]) * w[i];                                                            \
        sg[l] += g;                                                                        \
        sgx[l] += g * ((LD(x[i]) - mean) * rstd);                                          \
      }                                                                                    \
    } else {                                                                               \
      for (; i + LANES <= m; i += LANES)                                                   \
        for (int l = 0; l < LANES; l++) {                                                  \
          sg[l] += LD(dy[i + l]);                                                          \
          sgx[l] += LD(dy[i + l]) * ((LD(x[i + l]) - mean) * rstd);                        \
        }                                                                                  \
      for (int l = 0; i < m; i++, l++) {                                                   \
        sg[l] += LD(dy[i]);                                                                \
        sgx[l] += LD(dy[i]) * ((LD(x[i]) - mean) * rstd);                                  \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  /* backward pass 2 over a piece: dx; pdw += dy xhat, pdb += dy (each may be NULL). */   \
  /* dx goes a line at a time, prefetching the same line of the next row of x and dy */    \
  /* (at xn, dyn, es bytes an element; NULL when rows are not evenly spaced): memory */    \
  /* is busy while this row is written. Pointer tests stay outside the inner loops, */     \
  /* so none becomes a masked load through NULL. */                                        \
  GK_INLINE void grad_out_##SFX(const E *restrict x, const E *restrict dy, const T *restrict w, \
                                E *restrict dx, T *restrict pdw, T *restrict pdb, int64_t m, \
                                T mean, T rstd, T mean_g, T mean_gx, const char *xn,       \
                                const char *dyn, int64_t es) {                             \
    for (int64_t i0 = 0; i0 < m; i0 += LINE / (int64_t)sizeof(E)) {                        \
      int64_t i1 = gk_min64(m, i0 + LINE / (int64_t)sizeof(E));                            \
      /* each tested: x's rows may be evenly spaced and dy's not (NULL + i is UB) */       \
      if (xn) __builtin_prefetch(xn + i0 * es);                                            \
      if (dyn) __builtin_prefetch(dyn + i0 * es);                                          \
      if (w)                                                                               \
        for (int64_t i = i0; i < i1; i++)                                                  \
          dx[i] = ST(rstd * (LD(dy[i]) * w[i] - mean_g - (LD(x[i]) - mean) * rstd * mean_gx)); \
      else                                                                                 \
        for (int64_t i = i0; i < i1; i++)                                                  \
          dx[i] = ST(rstd * (LD(dy[i]) - mean_g - (LD(x[i]) - mean) * rstd * mean_gx));    \
    }                                                                                      \
    if (pdw)                                                                               \
      for (int64_t i = 0; i < m; i++) pdw[i] += LD(dy[i]) * ((LD(x[i]) - mean) * rstd);    \
    if (pdb)                                                                               \
      for (int64_t i = 0; i < m; i++) pdb[i] += LD(dy[i]);                                 \
  }                                                                                        \
  GK_INLINE void norm_bwd_task_##SFX(const norm_job *j, int64_t group) {                   \
    const gk_tensor *const *a = j->a;                                                      \
    const gk_tensor *w = a[GK_ARG_WEIGHT];                                                 \
    bool want_dw = a[GK_ARG_DWEIGHT] != NULL, want_db = a[GK_ARG_DBIAS] != NULL;           \
    int64_t C = j->C, P = piece_len(C), es = (int64_t)gk_dtype_size(j->plan->desc.dtype);  \
    bool whole = P == C;                                                                   \
    /* this group's partial sums (no workspace when there are no parameters) */            \
    T *pdw = want_dw ? (T *)j->partials + group * j->nparams * C : NULL;                   \
    T *pdb = want_db ? (T *)j->partials + (group * j->nparams + want_dw) * C : NULL;      \
    if (j->nparams) memset((T *)j->partials + group * j->nparams * C, 0, sizeof(T) * (size_t)(j->nparams * C)); \
    T wb[ROW_MAX];                                                                         \
    E xb[ROW_MAX], dyb[ROW_MAX], dxb[ROW_MAX];                                             \
    const T *wrow = whole && w ? gk_chunk_in_##S(w, 0, C, wb) : NULL;                      \
    int64_t per = gk_ceil_div(j->rows, backward_groups(j->rows));                          \
    int64_t end = gk_min64(j->rows, (group + 1) * per);                                    \
    gk_tensor x = j->x.row0, dy = j->dy.row0, dx = j->dx.row0;                             \
    for (int64_t r = group * per; r < end; r++) {                                          \
      row_seek(&j->x, j->nr, r, &x);                                                       \
      row_seek(&j->dy, j->nr, r, &dy);                                                     \
      row_seek(&j->dx, j->nr, r, &dx);                                                     \
      T rstd = (T)gk_get(a[GK_ARG_RSTD], r);                                               \
      T mean = j->layer ? (T)gk_get(a[GK_ARG_MEAN], r) : 0;                                \
      const E *xrow = whole ? IN(&x, 0, C, xb) : NULL;                                     \
      const E *dyrow = whole ? IN(&dy, 0, C, dyb) : NULL;                                  \
      T sg[LANES] = {0}, sgx[LANES] = {0};                                                 \
      for (int64_t c = 0; c < C; c += P) {                                                 \
        int64_t m = gk_min64(P, C - c);                                                    \
        const E *xp = whole ? xrow : IN(&x, c, m, xb);                                     \
        const E *dyp = whole ? dyrow : IN(&dy, c, m, dyb);                                 \
        const T *wp = whole || !w ? wrow : gk_chunk_in_##S(w, c, m, wb);                   \
        grad_sums_##SFX(xp, dyp, wp, m, mean, rstd, sg, sgx);                              \
      }                                                                                    \
      T mean_g = j->layer ? lanes_total_##S(sg) / (T)C : 0;                                \
      T mean_gx = lanes_total_##S(sgx) / (T)C;                                             \
      for (int64_t c = 0; c < C; c += P) {                                                 \
        int64_t m = gk_min64(P, C - c);                                                    \
        const E *xp = whole ? xrow : IN(&x, c, m, xb);                                     \
        const E *dyp = whole ? dyrow : IN(&dy, c, m, dyb);                                 \
        const T *wp = whole || !w ? wrow : gk_chunk_in_##S(w, c, m, wb);                   \
        E *dxp = OUT(&dx, c, dxb);                                                         \
        grad_out_##SFX(xp, dyp, wp, dxp, pdw ? pdw + c : NULL, pdb ? pdb + c : NULL, m, mean, rstd, \
                     mean_g, mean_gx, whole && j->x.step ? (const char *)x.data + j->x.step : NULL, \
                     whole && j->dy.step ? (const char *)dy.data + j->dy.step : NULL, es); \
        COMMIT(&dx, c, m, dxp, dxb);                                                       \
      }                                                                                    \
    }                                                                                      \
  }

// The sum of a row's LANES partial sums, and the backward's reduction:
#define GK_DEFINE_NORM_REDUCE(T, S)                                                        \
  GK_INLINE T lanes_total_##S(const T *acc) {                                              \
    T s = 0;                                                                               \
    for (int l = 0; l < LANES; l++) s += acc[l];                                           \
    return s;                                                                              \
  }                                                                                        \
  /* task = a CHUNK of columns: param grad = sum of group partials, in order */            \
  GK_INLINE void norm_reduce_task_##S(const norm_job *j, int64_t task) {                   \
    int64_t c0 = task * CHUNK, m = gk_min64(CHUNK, j->C - c0);                             \
    int64_t groups = backward_groups(j->rows);                                             \
    const gk_tensor *outs[2] = {j->a[GK_ARG_DWEIGHT], j->a[GK_ARG_DBIAS]};                 \
    int slot = 0;                                                                          \
    for (int o = 0; o < 2; o++) {                                                          \
      if (!outs[o]) continue;                                                              \
      T sum[CHUNK];                                                                        \
      if (j->plan->desc.accumulate) gk_load_##S(outs[o], c0, m, sum);                      \
      else memset(sum, 0, sizeof(T) * (size_t)m);                                          \
      for (int64_t g = 0; g < groups; g++) {                                               \
        const T *restrict p = (const T *)j->partials + (g * j->nparams + slot) * j->C + c0; \
        for (int64_t i = 0; i < m; i++) sum[i] += p[i];                                    \
      }                                                                                    \
      gk_store_##S(outs[o], c0, m, sum);                                                   \
      slot++;                                                                              \
    }                                                                                      \
  }

GK_DEFINE_NORM_REDUCE(float, f32)
GK_DEFINE_NORM_REDUCE(double, f64)
GK_DEFINE_NORM(float, f32, f32, float, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f32, GK_ROW_OUT_f32, GK_ROW_COMMIT_f32)
GK_DEFINE_NORM(double, f64, f64, double, GK_ROW_SAME, GK_ROW_SAME, GK_ROW_IN_f64, GK_ROW_OUT_f64, GK_ROW_COMMIT_f64)
GK_DEFINE_NORM(float, f32, bf16, uint16_t, gk_bf16_to_f32_inline, gk_f32_to_bf16_inline, GK_ROW_IN_16, GK_ROW_OUT_16,
               GK_ROW_COMMIT_16)
GK_DEFINE_NORM(float, f32, f16, uint16_t, gk_f16_to_f32_inline, gk_f32_to_f16_inline, GK_ROW_IN_16, GK_ROW_OUT_16,
               GK_ROW_COMMIT_16)

static bool is_f64(const norm_job *j) { return j->plan->desc.dtype == GK_F64; }

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (j->half16 == GK_BF16) norm_fwd_task_bf16(j, t);
  else if (j->half16 == GK_F16) norm_fwd_task_f16(j, t);
  else if (is_f64(j)) norm_fwd_task_f64(j, t);
  else norm_fwd_task_f32(j, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (j->half16 == GK_BF16) norm_bwd_task_bf16(j, t);
  else if (j->half16 == GK_F16) norm_bwd_task_f16(j, t);
  else if (is_f64(j)) norm_bwd_task_f64(j, t);
  else norm_bwd_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void reduce_task_body(void *ctx, int64_t t) {
  const norm_job *j = ctx;
  if (is_f64(j)) norm_reduce_task_f64(j, t);
  else norm_reduce_task_f32(j, t);
}
GK_ISA_VARIANTS(reduce_task, (void *ctx, int64_t t), (ctx, t))

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

const gk_kernel gk_cpu_norm_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_norm_fwd};
const gk_kernel gk_cpu_norm_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_norm_bwd_workspace,
                                   .run = cpu_norm_bwd};
