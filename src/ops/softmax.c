// Description of softmax and log_softmax: option checks and tensors.
#include "transformer.h"

gk_tensor gk_tensor_move_dim_last(const gk_tensor *t, int dim) {
  gk_tensor v = *t;
  int j = 0;
  for (int i = 0; i < t->rank; i++) {
    if (i == dim) continue;
    v.shape[j] = t->shape[i];
    v.strides[j] = t->strides[i];
    j++;
  }
  v.shape[t->rank - 1] = t->shape[dim];
  v.strides[t->rank - 1] = t->strides[dim];
  return v;
}

// Forward: X -> Y. Backward: DY, Y -> DX. All of the desc shape.
gk_status gk_describe_softmax(gk_plan *plan) {
  gk_op_desc *d = &plan->desc;
  const char *op = gk_op_name(d->op);
  if (d->rank < 1) return gk_fail(GK_ERR_BAD_RANK, "%s: desc.rank = 0, x needs a dim to normalize over", op);
  if (d->softmax.dim < -d->rank || d->softmax.dim >= d->rank)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.softmax.dim = %d is outside %d..%d for rank %d", op,
                   d->softmax.dim, -d->rank, d->rank - 1, d->rank);
  if (d->softmax.dim < 0) d->softmax.dim += d->rank;
  gk_spec_unary(plan, GK_ARG_Y);
  return GK_SUCCESS;
}
