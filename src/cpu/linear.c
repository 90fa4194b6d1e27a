// Threaded CPU kernels for linear and matmul (math as in src/ref/linear.c):
// every product runs through gk_gemm (packed, cache-blocked, threaded over
// output tiles; see gemm.c), transposes being views with swapped strides.
//   linear  forward:  y = x W^T + b
//           backward: dx = dy W (=); dW = dy^T x (= or +=); db = column sums
//                     of dy (= or +=), one task per block of DB_COLS columns
//                     adding the rows in order
//   matmul  forward:  C = op(A) op(B)
//           backward: op(dA) = dC op(B)^T; op(dB) = op(A)^T dC (=), with the
//                     batch folded into the sum when B is shared
#include "gemm.h"

enum { DB_COLS = 256 };

// m with its batch dims moved to the front of its rows or columns.
static gk_mat fold_batch(gk_mat m, bool into_rows) {
  gk_index *dst = into_rows ? &m.row : &m.col;
  gk_index f = m.batch;
  for (int d = 0; d < dst->n; d++) {
    f.shape[f.n] = dst->shape[d];
    f.stride[f.n] = dst->stride[d];
    f.n++;
  }
  *dst = f;
  m.batch.n = 0;
  return m;
}

static int64_t lead_rows(const gk_op_desc *d) {
  int64_t r = 1;
  for (int i = 0; i < d->rank - 1; i++) r *= d->shape[i];
  return r;
}

// ---------------------------------------------------------------- linear

static gk_gemm linear_fwd_gemm(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  gk_gemm g = {gk_mat_of(a[GK_ARG_X], 0, d->rank - 1), gk_mat_t(gk_mat_of(a[GK_ARG_WEIGHT], 0, 1)),
               gk_mat_of(a[GK_ARG_Y], 0, d->rank - 1), 1, lead_rows(d), d->linear.out_features,
               d->shape[d->rank - 1], a[GK_ARG_BIAS], false};
  return g;
}

static size_t cpu_linear_fwd_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  return gk_gemm_workspace(d->dtype, 1, lead_rows(d), d->linear.out_features, d->shape[d->rank - 1]);
}

static gk_status cpu_linear_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  gk_gemm g = linear_fwd_gemm(plan, a);
  gk_gemm_run(&g, ws, plan->workspace_bytes);
  return GK_SUCCESS;
}

typedef struct db_job {
  const gk_tensor *dy, *db;
  int64_t rows, n;
  bool accumulate;
} db_job;

#define GK_DEFINE_DB(T, S)                                                               \
  GK_INLINE void db_task_##S(const db_job *j, int64_t task) {                            \
    int64_t j0 = task * DB_COLS, n = gk_min64(DB_COLS, j->n - j0);                        \
    T acc[DB_COLS], buf[DB_COLS];                                                        \
    if (j->accumulate) gk_load_##S(j->db, j0, n, acc);                                   \
    else                                                                                 \
      for (int64_t c = 0; c < n; c++) acc[c] = 0;                                        \
    T sum[DB_COLS];                                                                      \
    for (int64_t c = 0; c < n; c++) sum[c] = 0;                                          \
    for (int64_t r = 0; r < j->rows; r++) {                                              \
      gk_tensor row = gk_tensor_row(j->dy, 1, r);                                        \
      const T *p = gk_chunk_in_##S(&row, j0, n, buf);                                    \
      for (int64_t c = 0; c < n; c++) sum[c] += p[c];                                    \
    }                                                                                    \
    for (int64_t c = 0; c < n; c++) acc[c] += sum[c];                                    \
    gk_store_##S(j->db, j0, n, acc);                                                     \
  }
GK_DEFINE_DB(float, f32)
GK_DEFINE_DB(double, f64)

GK_INLINE void db_task_body(void *ctx, int64_t task) {
  const db_job *j = ctx;
  if (j->db->dtype == GK_F64) db_task_f64(j, task);
  else db_task_f32(j, task);
}
GK_ISA_VARIANTS(db_task, (void *ctx, int64_t task), (ctx, task))

static void linear_bwd_gemms(const gk_plan *plan, const gk_kernel_args a, gk_gemm g[2]) {
  const gk_op_desc *d = &plan->desc;
  int64_t rows = lead_rows(d), K = d->shape[d->rank - 1], N = d->linear.out_features;
  gk_mat dy = gk_mat_of(a[GK_ARG_DY], 0, d->rank - 1);
  // dx (rows x K) = dy (rows x N) W (N x K)
  g[0] = (gk_gemm){dy, gk_mat_of(a[GK_ARG_WEIGHT], 0, 1), gk_mat_of(a[GK_ARG_DX], 0, d->rank - 1), 1, rows, K, N,
                   NULL, false};
  // dW (N x K) = dy^T (N x rows) x (rows x K)
  g[1] = (gk_gemm){gk_mat_t(dy), gk_mat_of(a[GK_ARG_X], 0, d->rank - 1), gk_mat_of(a[GK_ARG_DWEIGHT], 0, 1), 1, N,
                   K, rows, NULL, d->accumulate != 0};
}

static size_t cpu_linear_bwd_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  int64_t rows = lead_rows(d), K = d->shape[d->rank - 1], N = d->linear.out_features;
  size_t a = gk_gemm_workspace(d->dtype, 1, rows, K, N), b = gk_gemm_workspace(d->dtype, 1, N, K, rows);
  return a > b ? a : b;
}

static gk_status cpu_linear_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  gk_gemm g[2];
  linear_bwd_gemms(plan, a, g);
  gk_gemm_run(&g[0], ws, plan->workspace_bytes);
  gk_gemm_run(&g[1], ws, plan->workspace_bytes);
  if (a[GK_ARG_DBIAS]) {
    db_job j = {a[GK_ARG_DY], a[GK_ARG_DBIAS], lead_rows(&plan->desc), plan->desc.linear.out_features,
                plan->desc.accumulate != 0};
    gk_parallel_for(gk_ceil_div(j.n, DB_COLS), db_task, &j);
  }
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_linear_fwd = {.name = "cpu_gemm", .backend = GK_BACKEND_CPU, .workspace = cpu_linear_fwd_workspace,
                                     .run = cpu_linear_fwd};
const gk_kernel gk_cpu_linear_bwd = {.name = "cpu_gemm", .backend = GK_BACKEND_CPU, .workspace = cpu_linear_bwd_workspace,
                                     .run = cpu_linear_bwd};

// ---------------------------------------------------------------- matmul

typedef struct mm_dims {
  int nb;
  int64_t batch, M, K, N;
} mm_dims;

static mm_dims mm_dims_of(const gk_op_desc *d) {
  mm_dims m = {d->rank - 2, 1, d->shape[d->rank - 2 + d->matmul.trans_a],
               d->shape[d->rank - 1 - d->matmul.trans_a], d->matmul.n};
  for (int i = 0; i < m.nb; i++) m.batch *= d->shape[i];
  return m;
}

// op(t) as a batch of matrices (t has nb batch dims, or none when shared).
static gk_mat op_view(const gk_tensor *t, int nb, bool trans) {
  gk_mat m = gk_mat_of(t, nb, 1);
  return trans ? gk_mat_t(m) : m;
}

static size_t cpu_matmul_fwd_workspace(const gk_plan *plan) {
  mm_dims m = mm_dims_of(&plan->desc);
  return gk_gemm_workspace(plan->desc.dtype, m.batch, m.M, m.N, m.K);
}

static gk_status cpu_matmul_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  mm_dims m = mm_dims_of(d);
  gk_gemm g = {op_view(a[GK_ARG_A], m.nb, d->matmul.trans_a),
               op_view(a[GK_ARG_B], d->matmul.shared_b ? 0 : m.nb, d->matmul.trans_b),
               gk_mat_of(a[GK_ARG_Y], m.nb, 1), m.batch, m.M, m.N, m.K, NULL, false};
  gk_gemm_run(&g, ws, plan->workspace_bytes);
  return GK_SUCCESS;
}

static size_t cpu_matmul_bwd_workspace(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  mm_dims m = mm_dims_of(d);
  bool shared = d->matmul.shared_b;
  size_t da = gk_gemm_workspace(d->dtype, m.batch, m.M, m.K, m.N);
  size_t db = shared ? gk_gemm_workspace(d->dtype, 1, m.K, m.N, m.batch * m.M)
                     : gk_gemm_workspace(d->dtype, m.batch, m.K, m.N, m.M);
  return da > db ? da : db;
}

static gk_status cpu_matmul_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  mm_dims m = mm_dims_of(d);
  bool ta = d->matmul.trans_a, tb = d->matmul.trans_b, shared = d->matmul.shared_b;
  int nbb = shared ? 0 : m.nb;
  gk_mat opa = op_view(a[GK_ARG_A], m.nb, ta), opb = op_view(a[GK_ARG_B], nbb, tb);
  gk_mat dc = gk_mat_of(a[GK_ARG_DY], m.nb, 1);
  // op(dA) (M x K) = dC (M x N) op(B)^T (N x K)
  gk_gemm g = {dc, gk_mat_t(opb), op_view(a[GK_ARG_DA], m.nb, ta), m.batch, m.M, m.K, m.N, NULL, false};
  gk_gemm_run(&g, ws, plan->workspace_bytes);
  // op(dB) (K x N) = op(A)^T (K x M) dC (M x N), per batch or summed over it
  g = (gk_gemm){gk_mat_t(opa), dc, op_view(a[GK_ARG_DB], nbb, tb), m.batch, m.K, m.N, m.M, NULL, false};
  if (shared) {
    g.a = fold_batch(g.a, false);
    g.b = fold_batch(g.b, true);
    g.batch = 1;
    g.k = m.batch * m.M;
  }
  gk_gemm_run(&g, ws, plan->workspace_bytes);
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_matmul_fwd = {.name = "cpu_gemm", .backend = GK_BACKEND_CPU, .workspace = cpu_matmul_fwd_workspace,
                                     .run = cpu_matmul_fwd};
const gk_kernel gk_cpu_matmul_bwd = {.name = "cpu_gemm", .backend = GK_BACKEND_CPU, .workspace = cpu_matmul_bwd_workspace,
                                     .run = cpu_matmul_bwd};
