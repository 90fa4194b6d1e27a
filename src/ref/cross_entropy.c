// Reference kernels for cross-entropy: row by row, f64 math.
//   per row r with target t (eps = label smoothing, rows with ignore_index skipped):
//     lse = m + log(sum_j exp(x_j - m)), m = max_j x_j
//     loss_r = (1 - eps) (lse - x_t) + eps (lse - sum_j x_j / V)
//     loss = sum_r loss_r (/ rows not ignored for the mean)
//   gradient (forward with fused_grad, or backward; =):
//     dlogits_r,j = g (exp(x_j - lse) - eps / V - (1 - eps) [j == t]), 0 for ignored rows,
//     g = dloss (/ rows not ignored for the mean)
#include "../ops/transformer.h"

#include <math.h>

typedef struct ce_rows { int64_t rows, V, used; } ce_rows;

static ce_rows ce_rows_of(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  ce_rows c = {0, d->shape[d->rank - 1], gk_count_not_ignored(a[GK_ARG_TARGET], d->ce.ignore_index)};
  c.rows = gk_tensor_numel(a[GK_ARG_LOGITS]) / c.V;
  return c;
}

// The gradient of one row into dlogits (which may be the logits themselves).
static void ce_row_grad(const gk_tensor *x, const gk_tensor *dx, int64_t V, int64_t t, double lse, double g,
                        double eps) {
  for (int64_t j = 0; j < V; j++) {
    double p = exp(gk_get(x, j) - lse) - eps / (double)V - (j == t ? 1 - eps : 0);
    gk_set(dx, j, g * p);
  }
}

static double row_lse(const gk_tensor *x, int64_t V) {
  double m = -INFINITY, s = 0;
  for (int64_t j = 0; j < V; j++) {
    double v = gk_get(x, j);
    m = isnan(v) || v > m ? v : m;
  }
  for (int64_t j = 0; j < V; j++) s += exp(gk_get(x, j) - m);
  return m + log(s);
}

static gk_status ref_ce_run(const gk_plan *plan, const gk_kernel_args a, double dloss) {
  const gk_op_desc *d = &plan->desc;
  ce_rows c = ce_rows_of(plan, a);
  bool mean = d->ce.reduction == GK_REDUCTION_MEAN;
  double eps = d->ce.label_smoothing, g = mean ? (c.used ? dloss / (double)c.used : 0.0) : dloss, total = 0;
  const gk_tensor *dl = a[GK_ARG_DLOGITS];
  for (int64_t r = 0; r < c.rows; r++) {
    gk_tensor x = gk_tensor_row(a[GK_ARG_LOGITS], 1, r), dx;
    if (dl) dx = gk_tensor_row(dl, 1, r);
    int64_t t = gk_get_index(a[GK_ARG_TARGET], r);
    if (t == d->ce.ignore_index) {
      for (int64_t j = 0; dl && j < c.V; j++) gk_set(&dx, j, 0.0);
      continue;
    }
    double lse = row_lse(&x, c.V), sum = 0;
    for (int64_t j = 0; j < c.V; j++) sum += gk_get(&x, j);
    total += (1 - eps) * (lse - gk_get(&x, t)) + eps * (lse - sum / (double)c.V);
    if (dl) ce_row_grad(&x, &dx, c.V, t, lse, g, eps);
  }
  if (a[GK_ARG_LOSS]) gk_set(a[GK_ARG_LOSS], 0, !mean ? total : c.used ? total / (double)c.used : NAN);
  return GK_SUCCESS;
}

static gk_status ref_cross_entropy_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  return ref_ce_run(plan, a, plan->desc.ce.grad_scale);
}

static gk_status ref_cross_entropy_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  return ref_ce_run(plan, a, gk_get(a[GK_ARG_DLOSS], 0));
}

const gk_kernel gk_ref_cross_entropy_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                            .run = ref_cross_entropy_fwd};
const gk_kernel gk_ref_cross_entropy_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                            .run = ref_cross_entropy_bwd};
