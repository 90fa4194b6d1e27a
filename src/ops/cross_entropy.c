// Description of cross-entropy: option checks and tensors; the index checks
// shared with embedding.
#include "transformer.h"

#include <math.h>

gk_status gk_check_index_dtype(const gk_op_desc *d) {
  if (d->index_dtype != GK_I32 && d->index_dtype != GK_I64)
    return gk_fail(GK_ERR_BAD_DTYPE, "%s: desc.index_dtype = %s (%d) is not an index dtype (i32, i64)",
                   gk_op_name(d->op), gk_dtype_name(d->index_dtype), (int)d->index_dtype);
  return GK_SUCCESS;
}

int64_t gk_count_not_ignored(const gk_tensor *t, int64_t ignore) {
  int64_t n = gk_tensor_numel(t), count = 0;
  for (int64_t i = 0; i < n; i++) count += gk_get_index(t, i) != ignore;
  return count;
}

// LOGITS (..., V), TARGET (...), LOSS and DLOSS scalars.
gk_status gk_describe_cross_entropy(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  gk_status s;
  if (d->rank < 1)
    return gk_fail(GK_ERR_BAD_RANK, "cross_entropy: desc.rank = 0, logits need a class dim (logits are (..., V))");
  if (d->shape[d->rank - 1] < 1)
    return gk_fail(GK_ERR_BAD_SHAPE, "cross_entropy: desc.shape[%d] = %lld, the number of classes V must be >= 1",
                   d->rank - 1, (long long)d->shape[d->rank - 1]);
  if ((s = gk_check_index_dtype(d)) != GK_SUCCESS) return s;
  if (d->ce.reduction != GK_REDUCTION_MEAN && d->ce.reduction != GK_REDUCTION_SUM)
    return gk_fail(GK_ERR_INVALID_VALUE,
                   "cross_entropy: desc.ce.reduction = %d is neither GK_REDUCTION_MEAN (0) nor GK_REDUCTION_SUM (1)",
                   (int)d->ce.reduction);
  if (!(d->ce.label_smoothing >= 0 && d->ce.label_smoothing <= 1))
    return gk_fail(GK_ERR_INVALID_VALUE, "cross_entropy: desc.ce.label_smoothing = %g is outside 0..1",
                   d->ce.label_smoothing);
  if (d->ce.fused_grad != 0 && d->ce.fused_grad != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "cross_entropy: desc.ce.fused_grad = %d is neither 0 nor 1", d->ce.fused_grad);
  if (!isfinite(d->ce.grad_scale))
    return gk_fail(GK_ERR_INVALID_VALUE, "cross_entropy: desc.ce.grad_scale = %g is not finite", d->ce.grad_scale);
  gk_dtype stat = d->dtype == GK_F64 ? GK_F64 : GK_F32;
  gk_spec_set(plan, GK_ARG_LOGITS, false, d->dtype, d->rank, d->shape);
  gk_spec_set(plan, GK_ARG_TARGET, false, d->index_dtype, d->rank - 1, d->shape);
  gk_spec_indices(plan, GK_ARG_TARGET, d->shape[d->rank - 1], true, d->ce.ignore_index);
  bool grad = d->direction == GK_BACKWARD || d->ce.fused_grad;
  if (d->direction == GK_FORWARD) gk_spec_set(plan, GK_ARG_LOSS, true, stat, 0, NULL);
  else gk_spec_set(plan, GK_ARG_DLOSS, false, stat, 0, NULL);
  if (grad) {
    gk_spec_set(plan, GK_ARG_DLOGITS, true, d->dtype, d->rank, d->shape);
    gk_spec_allow_alias(plan, GK_ARG_DLOGITS, GK_ARG_LOGITS);
  }
  return GK_SUCCESS;
}
