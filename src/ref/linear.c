// Reference kernels for linear and matmul: one output element at a time,
// elements addressed by their row-major flat index, f64 sums.
//   linear  forward:  y[r, n] = sum_k x[r, k] W[n, k] + b[n]          x (R, K), W (N, K)
//           backward: dx[r, k] = sum_n dy[r, n] W[n, k]               (=)
//                     dW[n, k] (=/+=) sum_r dy[r, n] x[r, k]; db[n] (=/+=) sum_r dy[r, n]
//   matmul  forward:  C[b, i, j] = sum_k A(b, i, k) B(b, k, j)        (A, B through the transposes)
//           backward: dA(b, i, k) = sum_j dC[b, i, j] B(b, k, j)      (=)
//                     dB(b, k, j) = sum_i A(b, i, k) dC[b, i, j]      (=; also summed over b when B is shared)
#include "../core/internal.h"

typedef struct lin_shape { int64_t rows, K, N; } lin_shape;

static lin_shape lin_shape_of(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  lin_shape s = {1, d->shape[d->rank - 1], d->linear.out_features};
  for (int i = 0; i < d->rank - 1; i++) s.rows *= d->shape[i];
  return s;
}

static gk_status ref_linear_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  lin_shape s = lin_shape_of(plan);
  const gk_tensor *x = a[GK_ARG_X], *w = a[GK_ARG_WEIGHT], *b = a[GK_ARG_BIAS];
  for (int64_t r = 0; r < s.rows; r++)
    for (int64_t n = 0; n < s.N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; k++) acc += gk_get(x, r * s.K + k) * gk_get(w, n * s.K + k);
      if (b) acc += gk_get(b, n);
      gk_set(a[GK_ARG_Y], r * s.N + n, acc);
    }
  return GK_SUCCESS;
}

static gk_status ref_linear_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  lin_shape s = lin_shape_of(plan);
  bool acc_params = plan->desc.accumulate;
  const gk_tensor *x = a[GK_ARG_X], *w = a[GK_ARG_WEIGHT], *dy = a[GK_ARG_DY];
  const gk_tensor *dw = a[GK_ARG_DWEIGHT], *db = a[GK_ARG_DBIAS];
  for (int64_t r = 0; r < s.rows; r++)
    for (int64_t k = 0; k < s.K; k++) {
      double acc = 0;
      for (int64_t n = 0; n < s.N; n++) acc += gk_get(dy, r * s.N + n) * gk_get(w, n * s.K + k);
      gk_set(a[GK_ARG_DX], r * s.K + k, acc);
    }
  for (int64_t n = 0; n < s.N; n++) {
    for (int64_t k = 0; k < s.K; k++) {
      double acc = 0;
      for (int64_t r = 0; r < s.rows; r++) acc += gk_get(dy, r * s.N + n) * gk_get(x, r * s.K + k);
      gk_set(dw, n * s.K + k, acc + (acc_params ? gk_get(dw, n * s.K + k) : 0.0));
    }
    if (db) {
      double acc = 0;
      for (int64_t r = 0; r < s.rows; r++) acc += gk_get(dy, r * s.N + n);
      gk_set(db, n, acc + (acc_params ? gk_get(db, n) : 0.0));
    }
  }
  return GK_SUCCESS;
}

const gk_kernel gk_ref_linear_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_linear_fwd};
const gk_kernel gk_ref_linear_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_linear_bwd};

typedef struct mm_shape {
  int64_t batch, M, K, N;
  bool ta, tb, shared;
} mm_shape;

static mm_shape mm_shape_of(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  int nb = d->rank - 2;
  mm_shape s = {1, d->shape[nb + d->matmul.trans_a], d->shape[nb + 1 - d->matmul.trans_a], d->matmul.n,
                d->matmul.trans_a, d->matmul.trans_b, d->matmul.shared_b};
  for (int i = 0; i < nb; i++) s.batch *= d->shape[i];
  return s;
}

// Flat indices of A(b, i, k), B(b, k, j) and C(b, i, j).
static int64_t at_a(const mm_shape *s, int64_t b, int64_t i, int64_t k) {
  return b * s->M * s->K + (s->ta ? k * s->M + i : i * s->K + k);
}
static int64_t at_b(const mm_shape *s, int64_t b, int64_t k, int64_t j) {
  return (s->shared ? 0 : b * s->K * s->N) + (s->tb ? j * s->K + k : k * s->N + j);
}
static int64_t at_c(const mm_shape *s, int64_t b, int64_t i, int64_t j) { return (b * s->M + i) * s->N + j; }

static gk_status ref_matmul_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  mm_shape s = mm_shape_of(plan);
  for (int64_t b = 0; b < s.batch; b++)
    for (int64_t i = 0; i < s.M; i++)
      for (int64_t j = 0; j < s.N; j++) {
        double acc = 0;
        for (int64_t k = 0; k < s.K; k++) acc += gk_get(a[GK_ARG_A], at_a(&s, b, i, k)) * gk_get(a[GK_ARG_B], at_b(&s, b, k, j));
        gk_set(a[GK_ARG_Y], at_c(&s, b, i, j), acc);
      }
  return GK_SUCCESS;
}

static gk_status ref_matmul_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  mm_shape s = mm_shape_of(plan);
  const gk_tensor *dc = a[GK_ARG_DY];
  for (int64_t b = 0; b < s.batch; b++)
    for (int64_t i = 0; i < s.M; i++)
      for (int64_t k = 0; k < s.K; k++) {
        double acc = 0;
        for (int64_t j = 0; j < s.N; j++) acc += gk_get(dc, at_c(&s, b, i, j)) * gk_get(a[GK_ARG_B], at_b(&s, b, k, j));
        gk_set(a[GK_ARG_DA], at_a(&s, b, i, k), acc);
      }
  int64_t nbatch_db = s.shared ? 1 : s.batch, nsum = s.shared ? s.batch : 1;
  for (int64_t bo = 0; bo < nbatch_db; bo++)
    for (int64_t k = 0; k < s.K; k++)
      for (int64_t j = 0; j < s.N; j++) {
        double acc = 0;
        for (int64_t bi = 0; bi < nsum; bi++)
          for (int64_t i = 0; i < s.M; i++) {
            int64_t b = bo + bi;
            acc += gk_get(a[GK_ARG_A], at_a(&s, b, i, k)) * gk_get(dc, at_c(&s, b, i, j));
          }
        gk_set(a[GK_ARG_DB], at_b(&s, bo, k, j), acc);
      }
  return GK_SUCCESS;
}

const gk_kernel gk_ref_matmul_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_matmul_fwd};
const gk_kernel gk_ref_matmul_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_matmul_bwd};
