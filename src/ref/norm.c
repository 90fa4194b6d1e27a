// Reference kernels for RMSNorm and LayerNorm: row by row, f64 math.
//   x (rows, C) viewed through the trailing normalized dims; w, b (C);
//   rstd, mean (rows) saved by forward for backward.
//   RMSNorm   forward:  rstd = 1/sqrt(sum(x^2)/C + eps); y = x rstd w
//             backward: g = dy w; dx = rstd (g - x rstd^2 sum(g x)/C);
//                       dw (=/+=) sum_rows dy x rstd
//   LayerNorm forward:  mean = sum(x)/C; rstd = 1/sqrt(sum((x-mean)^2)/C + eps);
//                       xhat = (x - mean) rstd; y = xhat w + b
//             backward: g = dy w; dx = rstd (g - sum(g)/C - xhat sum(g xhat)/C);
//                       dw (=/+=) sum_rows dy xhat; db (=/+=) sum_rows dy
#include "../core/internal.h"

#include <math.h>

typedef struct norm_shape {
  int nr;           // normalized rank
  int64_t rows, C;
} norm_shape;

static norm_shape shape_of(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  norm_shape s = {d->norm.normalized_rank, 1, 1};
  for (int i = 0; i < d->rank; i++) {
    if (i < d->rank - s.nr) s.rows *= d->shape[i];
    else s.C *= d->shape[i];
  }
  return s;
}

static gk_status ref_norm_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  bool layer = d->op == GK_OP_LAYERNORM;
  const gk_tensor *w = a[GK_ARG_WEIGHT], *b = a[GK_ARG_BIAS];
  norm_shape s = shape_of(plan);
  for (int64_t r = 0; r < s.rows; r++) {
    gk_tensor x = gk_tensor_row(a[GK_ARG_X], s.nr, r), y = gk_tensor_row(a[GK_ARG_Y], s.nr, r);
    double mean = 0, sq = 0;
    if (layer) {
      for (int64_t c = 0; c < s.C; c++) mean += gk_get(&x, c);
      mean /= (double)s.C;
    }
    for (int64_t c = 0; c < s.C; c++) {
      double v = gk_get(&x, c) - mean;
      sq += v * v;
    }
    double rstd = 1.0 / sqrt(sq / (double)s.C + d->norm.eps);
    for (int64_t c = 0; c < s.C; c++) {
      double v = (gk_get(&x, c) - mean) * rstd;
      if (w) v *= gk_get(w, c);
      if (b) v += gk_get(b, c);
      gk_set(&y, c, v);
    }
    gk_set(a[GK_ARG_RSTD], r, rstd);
    if (layer) gk_set(a[GK_ARG_MEAN], r, mean);
  }
  return GK_SUCCESS;
}

static gk_status ref_norm_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  bool layer = d->op == GK_OP_LAYERNORM;
  const gk_tensor *w = a[GK_ARG_WEIGHT], *dw = a[GK_ARG_DWEIGHT], *db = a[GK_ARG_DBIAS];
  norm_shape s = shape_of(plan);
  // Parameter gradients are summed over all rows in f64 (workspace) before one store.
  double *dw_acc = dw ? (double *)ws : NULL;
  double *db_acc = db ? (double *)ws + (dw ? s.C : 0) : NULL;
  for (int64_t c = 0; c < s.C; c++) {
    if (dw_acc) dw_acc[c] = 0;
    if (db_acc) db_acc[c] = 0;
  }
  for (int64_t r = 0; r < s.rows; r++) {
    gk_tensor x = gk_tensor_row(a[GK_ARG_X], s.nr, r), dy = gk_tensor_row(a[GK_ARG_DY], s.nr, r);
    gk_tensor dx = gk_tensor_row(a[GK_ARG_DX], s.nr, r);
    double rstd = gk_get(a[GK_ARG_RSTD], r), mean = layer ? gk_get(a[GK_ARG_MEAN], r) : 0.0;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < s.C; c++) {
      double g = gk_get(&dy, c) * (w ? gk_get(w, c) : 1.0), xhat = (gk_get(&x, c) - mean) * rstd;
      sum_g += g;
      sum_gx += g * xhat;
    }
    double mean_g = layer ? sum_g / (double)s.C : 0.0, mean_gx = sum_gx / (double)s.C;
    for (int64_t c = 0; c < s.C; c++) {
      double g = gk_get(&dy, c) * (w ? gk_get(w, c) : 1.0), xhat = (gk_get(&x, c) - mean) * rstd;
      gk_set(&dx, c, rstd * (g - mean_g - xhat * mean_gx));
      if (dw_acc) dw_acc[c] += gk_get(&dy, c) * xhat;
      if (db_acc) db_acc[c] += gk_get(&dy, c);
    }
  }
  for (int64_t c = 0; c < s.C; c++) {
    if (dw) gk_set(dw, c, dw_acc[c] + (d->accumulate ? gk_get(dw, c) : 0.0));
    if (db) gk_set(db, c, db_acc[c] + (d->accumulate ? gk_get(db, c) : 0.0));
  }
  return GK_SUCCESS;
}

static size_t ref_norm_bwd_workspace(const gk_plan *plan) {
  int nparams = plan->args[GK_ARG_DWEIGHT].used + plan->args[GK_ARG_DBIAS].used;
  return (size_t)(nparams * shape_of(plan).C) * sizeof(double);
}

const gk_kernel gk_ref_norm_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .run = ref_norm_fwd};
const gk_kernel gk_ref_norm_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_norm_bwd_workspace,
                                   .run = ref_norm_bwd};
