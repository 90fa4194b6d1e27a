// Descriptions of the elementwise and gated activations: option checks and
// the tensors each direction takes.
#include "../core/internal.h"

#include <math.h>

static gk_status check_act_options(const gk_op_desc *d) {
  if ((d->op == GK_OP_GELU || d->op == GK_OP_GEGLU) && d->act.approximate != GK_GELU_ERF &&
      d->act.approximate != GK_GELU_TANH)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.act.approximate = %d is neither GK_GELU_ERF (0) nor GK_GELU_TANH (1)",
                   gk_op_name(d->op), (int)d->act.approximate);
  if (d->op == GK_OP_SOFTPLUS) {
    if (!(d->act.beta > 0) || !isfinite(d->act.beta))
      return gk_fail(GK_ERR_INVALID_VALUE, "softplus: desc.act.beta = %g must be finite and > 0", d->act.beta);
    if (isnan(d->act.threshold))
      return gk_fail(GK_ERR_INVALID_VALUE, "softplus: desc.act.threshold is NaN");
  }
  if (d->act.from_output != 0 && d->act.from_output != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.act.from_output = %d is neither 0 nor 1", gk_op_name(d->op),
                   d->act.from_output);
  if (d->act.from_output && d->op != GK_OP_RELU && d->op != GK_OP_SIGMOID)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.act.from_output = 1, but only relu and sigmoid compute their "
                   "gradient from the output y", gk_op_name(d->op));
  if (d->act.from_output && d->direction != GK_BACKWARD)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s forward: desc.act.from_output = 1 is an option of the backward only "
                   "(which takes y in place of x)", gk_op_name(d->op));
  return GK_SUCCESS;
}

gk_arg_kind gk_activation_saved(const gk_op_desc *d) { return d->act.from_output ? GK_ARG_Y : GK_ARG_X; }

// Forward: X -> Y. Backward: DY, X -> DX, or DY, Y -> DX with
// act.from_output. Same shape; in place allowed.
gk_status gk_describe_activation(gk_plan *plan) {
  gk_status s = check_act_options(&plan->desc);
  if (s != GK_SUCCESS) return s;
  gk_spec_unary(plan, gk_activation_saved(&plan->desc));
  return GK_SUCCESS;
}

// Split form: X (S) -> Y (S with S[dim] / 2); backward DY, X -> DX (S).
// Two-tensor form: X, GATE (S) -> Y (S); backward DY, X, GATE -> DX, DGATE.
gk_status gk_describe_gated(gk_plan *plan) {
  gk_op_desc *d = &plan->desc;
  const char *op = gk_op_name(d->op);
  gk_status s = check_act_options(d);
  if (s != GK_SUCCESS) return s;
  int64_t half[GK_MAX_RANK];
  for (int i = 0; i < d->rank; i++) half[i] = d->shape[i];
  if (d->gated.form == GK_GATED_SPLIT) {
    if (d->rank < 1)
      return gk_fail(GK_ERR_BAD_RANK, "%s: desc.rank = 0, the split form needs a dim to split", op);
    if (d->gated.dim < -d->rank || d->gated.dim >= d->rank)
      return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.gated.dim = %d is outside %d..%d for rank %d", op,
                     d->gated.dim, -d->rank, d->rank - 1, d->rank);
    if (d->gated.dim < 0) d->gated.dim += d->rank;
    int64_t n = d->shape[d->gated.dim];
    if (n % 2 != 0)
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: desc.shape[%d] = %lld (the split dim) must be even", op, d->gated.dim,
                     (long long)n);
    half[d->gated.dim] = n / 2;
  } else if (d->gated.form != GK_GATED_TWO_TENSOR) {
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.gated.form = %d is neither GK_GATED_SPLIT (0) nor GK_GATED_TWO_TENSOR (1)",
                   op, (int)d->gated.form);
  }
  bool two = d->gated.form == GK_GATED_TWO_TENSOR;
  gk_spec_set(plan, GK_ARG_X, false, d->dtype, d->rank, d->shape);
  if (two) gk_spec_set(plan, GK_ARG_GATE, false, d->dtype, d->rank, d->shape);
  if (d->direction == GK_FORWARD) {
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank, half);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank, half);
    gk_spec_set(plan, GK_ARG_DX, true, d->dtype, d->rank, d->shape);
    if (two) gk_spec_set(plan, GK_ARG_DGATE, true, d->dtype, d->rank, d->shape);
  }
  return GK_SUCCESS;
}

void gk_gated_views(const gk_plan *plan, const gk_kernel_args a, gk_tensor *va, gk_tensor *vb,
                    gk_tensor *vda, gk_tensor *vdb) {
  const gk_op_desc *d = &plan->desc;
  if (d->gated.form == GK_GATED_TWO_TENSOR) {
    *va = *a[GK_ARG_X];
    *vb = *a[GK_ARG_GATE];
    if (vda) *vda = *a[GK_ARG_DX];
    if (vdb) *vdb = *a[GK_ARG_DGATE];
    return;
  }
  int dim = d->gated.dim;
  int64_t h = d->shape[dim] / 2;
  *va = gk_tensor_narrow(a[GK_ARG_X], dim, 0, h);
  *vb = gk_tensor_narrow(a[GK_ARG_X], dim, h, h);
  if (vda) *vda = gk_tensor_narrow(a[GK_ARG_DX], dim, 0, h);
  if (vdb) *vdb = gk_tensor_narrow(a[GK_ARG_DX], dim, h, h);
}
