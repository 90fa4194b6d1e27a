// Description of add and mul with broadcasting: shapes and tensors.
#include "transformer.h"

#include <math.h>

gk_tensor gk_broadcast_view(const gk_tensor *x, int rank, const int64_t *shape) {
  gk_tensor v = *x;
  v.rank = rank;
  int lead = rank - x->rank;
  for (int d = 0; d < rank; d++) {
    int xd = d - lead;
    v.shape[d] = shape[d];
    v.strides[d] = xd < 0 || x->shape[xd] != shape[d] ? 0 : x->strides[xd];
  }
  return v;
}

// A (desc shape), B (binary.b_shape) -> Y (broadcast shape).
gk_status gk_describe_binary(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  const char *op = gk_op_name(d->op);
  int rb = d->binary.b_rank, ry = d->rank > rb ? d->rank : rb;
  if (rb < 0 || rb > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "%s: desc.binary.b_rank = %d is outside 0..%d", op, rb, GK_MAX_RANK);
  if (!isfinite(d->binary.alpha))
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.binary.alpha = %g is not finite", op, d->binary.alpha);
  int64_t y[GK_MAX_RANK], n = 1;
  for (int i = 0; i < rb; i++)
    if (d->binary.b_shape[i] < 0)
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: desc.binary.b_shape[%d] = %lld is negative", op, i,
                     (long long)d->binary.b_shape[i]);
  for (int k = 0; k < ry; k++) {
    int ia = d->rank - ry + k, ib = rb - ry + k;
    int64_t a = ia >= 0 ? d->shape[ia] : 1, b = ib >= 0 ? d->binary.b_shape[ib] : 1;
    if (a != b && a != 1 && b != 1)
      return gk_fail(GK_ERR_BAD_SHAPE,
                     "%s: desc.shape[%d] = %lld and desc.binary.b_shape[%d] = %lld do not broadcast (neither is 1)",
                     op, ia, (long long)a, ib, (long long)b);
    y[k] = a == 1 ? b : a;
    if (__builtin_mul_overflow(n, y[k], &n) || n > (INT64_MAX >> 4))
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: the element count of y overflows", op);
  }
  bool fwd = d->direction == GK_FORWARD;
  if (fwd || d->op == GK_OP_MUL) {  // add's gradients do not need the operands
    gk_spec_set(plan, GK_ARG_A, false, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_B, false, d->dtype, rb, d->binary.b_shape);
  }
  if (fwd) {
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, ry, y);
    gk_spec_allow_alias(plan, GK_ARG_Y, GK_ARG_A);
    gk_spec_allow_alias(plan, GK_ARG_Y, GK_ARG_B);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, ry, y);
    gk_spec_set(plan, GK_ARG_DA, true, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_DB, true, d->dtype, rb, d->binary.b_shape);
  }
  return GK_SUCCESS;
}
