// Descriptions of linear and matmul: option checks and tensors.
#include "../core/internal.h"

static gk_status check_flag(const char *op, const char *name, int v) {
  if (v != 0 && v != 1) return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.%s = %d is neither 0 nor 1", op, name, v);
  return GK_SUCCESS;
}

// The element count of a shape must stay far from overflow.
static gk_status check_count(const char *op, const char *what, int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    if (__builtin_mul_overflow(n, shape[i], &n) || n > (INT64_MAX >> 4))
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: the element count of %s overflows", op, what);
  return GK_SUCCESS;
}

// x (..., K), W (N, K), b (N) -> y (..., N); b and db in desc.param_dtype
// (f32 with f16/bf16 x under autocast), the others in desc.dtype.
gk_status gk_describe_linear(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  gk_status s;
  if (d->rank < 1)
    return gk_fail(GK_ERR_BAD_RANK, "linear: desc.rank = 0, x needs a last dim K (x is (..., K))");
  if (d->linear.out_features < 0)
    return gk_fail(GK_ERR_INVALID_VALUE, "linear: desc.linear.out_features = %lld is negative",
                   (long long)d->linear.out_features);
  if ((s = check_flag("linear", "linear.has_bias", d->linear.has_bias)) != GK_SUCCESS) return s;
  if ((s = check_flag("linear", "accumulate", d->accumulate)) != GK_SUCCESS) return s;
  int64_t K = d->shape[d->rank - 1], N = d->linear.out_features;
  int64_t w[2] = {N, K}, y[GK_MAX_RANK];
  for (int i = 0; i < d->rank; i++) y[i] = d->shape[i];
  y[d->rank - 1] = N;
  if ((s = check_count("linear", "y", d->rank, y)) != GK_SUCCESS) return s;
  if ((s = check_count("linear", "weight", 2, w)) != GK_SUCCESS) return s;
  gk_spec_set(plan, GK_ARG_X, false, d->dtype, d->rank, d->shape);
  gk_spec_set(plan, GK_ARG_WEIGHT, false, d->dtype, 2, w);
  if (d->direction == GK_FORWARD) {
    if (d->linear.has_bias) gk_spec_set(plan, GK_ARG_BIAS, false, (gk_dtype)d->param_dtype, 1, &N);
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank, y);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank, y);
    gk_spec_set(plan, GK_ARG_DX, true, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_DWEIGHT, true, d->dtype, 2, w);
    if (d->linear.has_bias) gk_spec_set(plan, GK_ARG_DBIAS, true, (gk_dtype)d->param_dtype, 1, &N);
  }
  return GK_SUCCESS;
}

// A (..., M, K) or (..., K, M); B (..., K, N) or (..., N, K), or rank 2 when
// shared -> Y (..., M, N)
gk_status gk_describe_matmul(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  gk_status s;
  if (d->rank < 2)
    return gk_fail(GK_ERR_BAD_RANK, "matmul: desc.rank = %d, A needs at least 2 dims (..., M, K)", d->rank);
  if ((s = check_flag("matmul", "matmul.trans_a", d->matmul.trans_a)) != GK_SUCCESS) return s;
  if ((s = check_flag("matmul", "matmul.trans_b", d->matmul.trans_b)) != GK_SUCCESS) return s;
  if ((s = check_flag("matmul", "matmul.shared_b", d->matmul.shared_b)) != GK_SUCCESS) return s;
  if ((s = check_flag("matmul", "accumulate", d->accumulate)) != GK_SUCCESS) return s;
  if (d->accumulate)
    return gk_fail(GK_ERR_UNSUPPORTED, "matmul: desc.accumulate = 1, but da and db are input gradients, always "
                                       "overwritten");
  if (d->matmul.n < 0)
    return gk_fail(GK_ERR_INVALID_VALUE, "matmul: desc.matmul.n = %lld is negative", (long long)d->matmul.n);
  int nb = d->rank - 2;
  int64_t M = d->shape[nb + d->matmul.trans_a], K = d->shape[nb + 1 - d->matmul.trans_a], N = d->matmul.n;
  int64_t b[GK_MAX_RANK], y[GK_MAX_RANK];
  int brank = d->matmul.shared_b ? 2 : d->rank;
  for (int i = 0; i < nb; i++) b[i] = y[i] = d->shape[i];
  b[brank - 2] = d->matmul.trans_b ? N : K;
  b[brank - 1] = d->matmul.trans_b ? K : N;
  y[nb] = M;
  y[nb + 1] = N;
  if ((s = check_count("matmul", "b", brank, b)) != GK_SUCCESS) return s;
  if ((s = check_count("matmul", "y", d->rank, y)) != GK_SUCCESS) return s;
  gk_spec_set(plan, GK_ARG_A, false, d->dtype, d->rank, d->shape);
  gk_spec_set(plan, GK_ARG_B, false, d->dtype, brank, b);
  if (d->direction == GK_FORWARD) {
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank, y);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank, y);
    gk_spec_set(plan, GK_ARG_DA, true, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_DB, true, d->dtype, brank, b);
  }
  return GK_SUCCESS;
}
