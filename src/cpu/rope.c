// Threaded CPU kernels for RoPE (math as in src/ref/rope.c), hot loops
// compiled per ISA level. First a table of cos and sin for every (t, pair)
// in the workspace: the angle p inv_freq[i] in f64 (inv_freq[i] =
// gk_rope_angle(d, 1, i) once per pair, so the product is gk_rope_angle's
// bit for bit), rounded to f32 (kept f64 for f64); tasks of runs of
// positions. Rotate-half pairs use cos [T][h] and sin [T][h] (h = Dh/2);
// interleaved pairs use them spread over [T][Dh]: cos on both members, sin
// with the sign of its term (-s on 2i, +s on 2i+1), so y = x cos + swap(x) sin.
// Then tasks of runs of rows (b, t, h) rotate their pairs in vectors of LANES
// (gcc's vector extension), each vector read whole before it is written, so
// y may be x: rows of tensors contiguous in the accumulator type in place,
// other contiguous tensors (f16, bf16) in blocks of rows converted by one
// chunk of BLOCK elements, an input whose every stride is 0 (y.sum()'s dy)
// from one row of its value converted once a task, others row by row
// through chunks of PAIRS pairs.
#include "../ops/transformer.h"

#include <math.h>
#include <string.h>

enum { PAIRS = 256, BLOCK = 2048, TASK_ELEMS = 32768, TABLE_ELEMS = 4096 };

typedef struct rope_job {
  const gk_op_desc *d;
  const gk_tensor *in, *out;
  void *in_flat, *out_flat;  // the data when contiguous in the accumulator type, else NULL
  int64_t T, h, Dh, rows, rows_per_task, t_per_task;
  int64_t block_rows;        // rows per chunk of BLOCK elements: x and y contiguous; 0 when not
  bool half;
  double sign;
  const double *inv_freq;    // [h]
  void *cs, *sn;             // cos, sin tables
  // Every stride of in 0 (the dy autograd hands over for y.sum()), a row
  // fits in BLOCK and out is flat: one row of its value serves every row.
  bool in_one_value;
} rope_job;

#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define STORE(p, v) memcpy((p), &(v), sizeof(v))

// T_ = float (S = f32, LANES 16) or double (S = f64, LANES 8); SWAP: the
// shuffle mask that swaps the members of each pair.
#define GK_DEFINE_ROPE(T_, S, LANES, SWAP)                                                      \
  typedef T_ vec_##S __attribute__((vector_size(LANES * sizeof(T_))));                          \
  static void table_task_##S(const rope_job *j, int64_t task) {                                 \
    T_ *cs = j->cs, *sn = j->sn;                                                                \
    int64_t end = gk_min64(j->T, (task + 1) * j->t_per_task);                                   \
    for (int64_t t = task * j->t_per_task; t < end; t++)                                        \
      for (int64_t i = 0; i < j->h; i++) {                                                      \
        double angle = (double)(j->d->rope.offset + t) * j->inv_freq[i];                        \
        T_ c = (T_)cos(angle), s = (T_)(j->sign * sin(angle));                                  \
        if (j->half) {                                                                          \
          cs[t * j->h + i] = c;                                                                 \
          sn[t * j->h + i] = s;                                                                 \
        } else {                                                                                \
          cs[t * j->Dh + 2 * i] = cs[t * j->Dh + 2 * i + 1] = c;                                \
          sn[t * j->Dh + 2 * i] = -s;                                                           \
          sn[t * j->Dh + 2 * i + 1] = s;                                                        \
        }                                                                                       \
      }                                                                                         \
  }                                                                                             \
  /* (ya, yb)[i] = (a c - b s, b c + a s), i < n */                                             \
  GK_INLINE void rot_half_##S(T_ *ya, T_ *yb, const T_ *xa, const T_ *xb, const T_ *c,          \
                              const T_ *s, int64_t n) {                                         \
    int64_t i = 0;                                                                              \
    for (; i + LANES <= n; i += LANES) {                                                        \
      vec_##S a, b, cv, sv;                                                                     \
      LOAD(a, xa + i);                                                                          \
      LOAD(b, xb + i);                                                                          \
      LOAD(cv, c + i);                                                                          \
      LOAD(sv, s + i);                                                                          \
      vec_##S ra = a * cv - b * sv, rb = b * cv + a * sv;                                       \
      STORE(ya + i, ra);                                                                        \
      STORE(yb + i, rb);                                                                        \
    }                                                                                           \
    for (; i < n; i++) {                                                                        \
      T_ a = xa[i], b = xb[i];                                                                  \
      ya[i] = a * c[i] - b * s[i];                                                              \
      yb[i] = b * c[i] + a * s[i];                                                              \
    }                                                                                           \
  }                                                                                             \
  /* y[k] = x[k] c[k] + x[k ^ 1] s[k], k < m (m even) */                                        \
  GK_INLINE void rot_pairs_##S(T_ *y, const T_ *x, const T_ *c, const T_ *s, int64_t m) {       \
    int64_t k = 0;                                                                              \
    for (; k + LANES <= m; k += LANES) {                                                        \
      vec_##S v, cv, sv;                                                                        \
      LOAD(v, x + k);                                                                           \
      LOAD(cv, c + k);                                                                          \
      LOAD(sv, s + k);                                                                          \
      vec_##S r = v * cv + __builtin_shufflevector(v, v, SWAP) * sv;                            \
      STORE(y + k, r);                                                                          \
    }                                                                                           \
    for (; k < m; k += 2) {                                                                     \
      T_ a = x[k], b = x[k + 1];                                                                \
      y[k] = a * c[k] + b * s[k];                                                               \
      y[k + 1] = b * c[k + 1] + a * s[k + 1];                                                   \
    }                                                                                           \
  }                                                                                             \
  /* one row whose x and y are arrays (y may be x) */                                          \
  GK_INLINE void rope_rot_##S(const rope_job *j, T_ *y, const T_ *x, const T_ *c, const T_ *s) { \
    if (j->half) rot_half_##S(y, y + j->h, x, x + j->h, c, s, j->h);                            \
    else rot_pairs_##S(y, x, c, s, j->Dh);                                                      \
  }                                                                                             \
  /* one row of any other tensors, through chunks of PAIRS pairs */                             \
  GK_INLINE void rope_row_##S(const rope_job *j, int64_t r, const T_ *c, const T_ *s) {          \
    T_ ab[PAIRS * 2], bb[PAIRS], oa[PAIRS * 2], ob[PAIRS];                                      \
    int64_t h = j->h;                                                                           \
    gk_tensor x = gk_tensor_row(j->in, 1, r), y = gk_tensor_row(j->out, 1, r);                  \
    for (int64_t i0 = 0; i0 < h; i0 += PAIRS) {                                                 \
      int64_t n = gk_min64(PAIRS, h - i0);                                                      \
      if (j->half) {                                                                            \
        const T_ *xa = gk_chunk_in_##S(&x, i0, n, ab), *xb = gk_chunk_in_##S(&x, h + i0, n, bb); \
        T_ *ya = gk_chunk_out_##S(&y, i0, oa), *yb = gk_chunk_out_##S(&y, h + i0, ob);          \
        rot_half_##S(ya, yb, xa, xb, c + i0, s + i0, n);                                        \
        gk_chunk_commit_##S(&y, i0, n, ya, oa);                                                 \
        gk_chunk_commit_##S(&y, h + i0, n, yb, ob);                                             \
      } else {                                                                                  \
        const T_ *xp = gk_chunk_in_##S(&x, 2 * i0, 2 * n, ab);                                  \
        T_ *yp = gk_chunk_out_##S(&y, 2 * i0, oa);                                              \
        rot_pairs_##S(yp, xp, c + 2 * i0, s + 2 * i0, 2 * n);                                   \
        gk_chunk_commit_##S(&y, 2 * i0, 2 * n, yp, oa);                                         \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  GK_INLINE void rope_task_##S(const rope_job *j, int64_t task) {                               \
    T_ xbuf[BLOCK], ybuf[BLOCK];                                                                \
    int64_t r0 = task * j->rows_per_task, end = gk_min64(j->rows, r0 + j->rows_per_task);       \
    const T_ *one_row = j->in_one_value ? gk_chunk_in_##S(j->in, 0, j->Dh, xbuf) : NULL;         \
    int64_t tw = j->half ? j->h : j->Dh, Dh = j->Dh;  /* table row width */                     \
    /* t of row r, advanced row by row: rows (B, T, H) keep their t for H rows */               \
    int64_t per_t = j->d->rope.layout == GK_ROPE_BTHD ? j->d->shape[2] : 1;                     \
    int64_t t = gk_rope_position(j->d, r0) - j->d->rope.offset, left = per_t - r0 % per_t;      \
    for (int64_t r = r0; r < end;) {                                                            \
      /* a block of rows: one chunk of contiguous x and y, or single rows */                   \
      int64_t nb = j->block_rows ? gk_min64(j->block_rows, end - r) : 1, rb = r;                \
      const T_ *x = NULL;                                                                       \
      T_ *y = NULL;                                                                             \
      int64_t x_row = Dh; /* x's row stride: 0 for one_row */                                   \
      if (j->in_flat && j->out_flat) {                                                          \
        x = (const T_ *)j->in_flat + r * Dh;                                                    \
        y = (T_ *)j->out_flat + r * Dh;                                                         \
      } else if (one_row) {                                                                     \
        x = one_row, x_row = 0;                                                                 \
        y = (T_ *)j->out_flat + r * Dh;                                                         \
      } else if (j->block_rows) {                                                               \
        x = gk_chunk_in_##S(j->in, r * Dh, nb * Dh, xbuf);                                      \
        y = gk_chunk_out_##S(j->out, r * Dh, ybuf);                                             \
      }                                                                                         \
      for (int64_t q = 0; q < nb; q++, r++) {                                                   \
        const T_ *c = (const T_ *)j->cs + t * tw, *s = (const T_ *)j->sn + t * tw;              \
        if (x) rope_rot_##S(j, y + q * Dh, x + q * x_row, c, s);                                \
        else rope_row_##S(j, r, c, s);                                                          \
        if (--left == 0) {                                                                      \
          left = per_t;                                                                         \
          t = t + 1 == j->T ? 0 : t + 1;                                                        \
        }                                                                                       \
      }                                                                                         \
      if (x && !(j->in_flat && j->out_flat)) gk_chunk_commit_##S(j->out, rb * Dh, nb * Dh, y, ybuf); \
    }                                                                                           \
  }

// __builtin_shufflevector (gcc >= 12, clang) with the lane indices.
#define SWAP_f32 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14
#define SWAP_f64 1, 0, 3, 2, 5, 4, 7, 6
GK_DEFINE_ROPE(float, f32, 16, SWAP_f32)
GK_DEFINE_ROPE(double, f64, 8, SWAP_f64)

static void table_task(void *ctx, int64_t t) {
  const rope_job *j = ctx;
  if (j->d->dtype == GK_F64) table_task_f64(j, t);
  else table_task_f32(j, t);
}

GK_INLINE void rope_task_body(void *ctx, int64_t t) {
  const rope_job *j = ctx;
  if (j->d->dtype == GK_F64) rope_task_f64(j, t);
  else rope_task_f32(j, t);
}
GK_ISA_VARIANTS(rope_task, (void *ctx, int64_t task), (ctx, task))

static int64_t seq_len(const gk_op_desc *d) { return d->shape[d->rope.layout == GK_ROPE_BTHD ? 1 : 2]; }

// Workspace: inv_freq [h] (f64), then cos and sin, [T][Dh] each.
static size_t table_bytes(const gk_op_desc *d) {
  size_t es = d->dtype == GK_F64 ? sizeof(double) : sizeof(float);
  return (size_t)(seq_len(d) * d->shape[3]) * es;
}

static size_t cpu_rope_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  return (size_t)(d->shape[3] / 2) * sizeof(double) + 2 * table_bytes(d);
}

static void *flat_of(const gk_tensor *t) {
  return (t->dtype == GK_F32 || t->dtype == GK_F64) && gk_tensor_is_contiguous(t) ? t->data : NULL;
}

static gk_status cpu_rope(const gk_plan *plan, const gk_tensor *in, const gk_tensor *out, double sign, void *ws) {
  const gk_op_desc *d = &plan->desc;
  rope_job j = {d, in, out, flat_of(in), flat_of(out), seq_len(d), d->shape[3] / 2, d->shape[3],
                d->shape[0] * d->shape[1] * d->shape[2], 0, 0, 0, d->rope.pairing == GK_ROPE_HALF, sign, ws, NULL,
                NULL, false};
  if (j.h == 0 || j.rows == 0) return GK_SUCCESS;
  double *inv_freq = ws;
  for (int64_t i = 0; i < j.h; i++) inv_freq[i] = gk_rope_angle(d, 1, i);
  j.cs = inv_freq + j.h;
  j.sn = (char *)j.cs + table_bytes(d);
  j.rows_per_task = gk_ceil_div(TASK_ELEMS, j.Dh);
  if (j.Dh <= BLOCK && gk_tensor_is_contiguous(in) && gk_tensor_is_contiguous(out)) j.block_rows = BLOCK / j.Dh;
  j.in_one_value = j.Dh <= BLOCK && j.out_flat && !gk_tensor_is_contiguous(in);
  for (int k = 0; k < in->rank; k++) j.in_one_value = j.in_one_value && in->strides[k] == 0;
  j.t_per_task = gk_ceil_div(TABLE_ELEMS, j.h);
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

const gk_kernel gk_cpu_rope_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_rope_workspace,
                                   .run = cpu_rope_fwd};
const gk_kernel gk_cpu_rope_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_rope_workspace,
                                   .run = cpu_rope_bwd};
