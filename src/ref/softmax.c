// Reference kernels for softmax and log_softmax: row by row along the dim
// (moved last in a view), f64 math.
//   forward:  m = max(x); s = sum(exp(x - m))
//             softmax y = exp(x - m) / s;  log_softmax y = x - m - log(s)
//   backward: softmax dx = y (dy - sum(dy y));  log_softmax dx = dy - exp(y) sum(dy)   (=)
#include "../ops/transformer.h"

#include <math.h>

static gk_status ref_softmax_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  bool log_form = d->op == GK_OP_LOG_SOFTMAX;
  gk_tensor x = gk_tensor_move_dim_last(a[GK_ARG_X], d->softmax.dim);
  gk_tensor y = gk_tensor_move_dim_last(a[GK_ARG_Y], d->softmax.dim);
  int64_t n = d->shape[d->softmax.dim], rows = n ? gk_tensor_numel(&x) / n : 0;
  for (int64_t r = 0; r < rows; r++) {
    gk_tensor xr = gk_tensor_row(&x, 1, r), yr = gk_tensor_row(&y, 1, r);
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = gk_get(&xr, i);
      m = isnan(v) || v > m ? v : m;
    }
    for (int64_t i = 0; i < n; i++) s += exp(gk_get(&xr, i) - m);
    for (int64_t i = 0; i < n; i++) {
      double v = gk_get(&xr, i) - m;
      gk_set(&yr, i, log_form ? v - log(s) : exp(v) / s);
    }
  }
  return GK_SUCCESS;
}

static gk_status ref_softmax_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  bool log_form = d->op == GK_OP_LOG_SOFTMAX;
  gk_tensor dy = gk_tensor_move_dim_last(a[GK_ARG_DY], d->softmax.dim);
  gk_tensor y = gk_tensor_move_dim_last(a[GK_ARG_Y], d->softmax.dim);
  gk_tensor dx = gk_tensor_move_dim_last(a[GK_ARG_DX], d->softmax.dim);
  int64_t n = d->shape[d->softmax.dim], rows = n ? gk_tensor_numel(&y) / n : 0;
  for (int64_t r = 0; r < rows; r++) {
    gk_tensor dyr = gk_tensor_row(&dy, 1, r), yr = gk_tensor_row(&y, 1, r), dxr = gk_tensor_row(&dx, 1, r);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += gk_get(&dyr, i) * (log_form ? 1.0 : gk_get(&yr, i));
    for (int64_t i = 0; i < n; i++) {
      double g = gk_get(&dyr, i), v = gk_get(&yr, i);
      gk_set(&dxr, i, log_form ? g - exp(v) * s : v * (g - s));
    }
  }
  return GK_SUCCESS;
}

const gk_kernel gk_ref_softmax_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                      .run = ref_softmax_fwd};
const gk_kernel gk_ref_softmax_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                      .run = ref_softmax_bwd};
