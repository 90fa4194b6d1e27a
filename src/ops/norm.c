// Descriptions of RMSNorm and LayerNorm: option checks and tensors.
//   x, y, dy, dx (lead..., norm...) in desc.dtype; weight, bias, dweight,
//   dbias (norm...) in desc.param_dtype (f32 with f16/bf16 x under mixed
//   precision); rstd, mean (lead...) in f32 (f64 for f64).
#include "../core/internal.h"

#include <math.h>

gk_status gk_describe_norm(gk_plan *plan) {
  gk_op_desc *d = &plan->desc;
  const char *op = gk_op_name(d->op);
  bool layer = d->op == GK_OP_LAYERNORM;
  int nr = d->norm.normalized_rank;
  if (nr < 1 || nr > d->rank)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.norm.normalized_rank = %d is outside 1..%d (desc.rank)", op, nr,
                   d->rank);
  if (!(d->norm.eps > 0) || !isfinite(d->norm.eps))
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.norm.eps = %g must be finite and > 0", op, d->norm.eps);
  if (d->norm.has_weight != 0 && d->norm.has_weight != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.norm.has_weight = %d is neither 0 nor 1", op, d->norm.has_weight);
  if (d->norm.has_bias != 0 && d->norm.has_bias != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.norm.has_bias = %d is neither 0 nor 1", op, d->norm.has_bias);
  if (!layer && d->norm.has_bias)
    return gk_fail(GK_ERR_UNSUPPORTED, "rmsnorm: desc.norm.has_bias = 1, RMSNorm takes no bias");
  if (d->accumulate != 0 && d->accumulate != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: desc.accumulate = %d is neither 0 nor 1", op, d->accumulate);
  int lead = d->rank - nr;
  const int64_t *norm_shape = d->shape + lead;
  for (int i = lead; i < d->rank; i++)
    if (d->shape[i] == 0)
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: desc.shape[%d] = 0 is a normalized dim: nothing to normalize over", op, i);
  gk_dtype stat = d->dtype == GK_F64 ? GK_F64 : GK_F32;
  gk_dtype pt = (gk_dtype)d->param_dtype;  // checked by the plan, GK_DTYPE_SAME resolved
  bool w = d->norm.has_weight, b = layer && d->norm.has_bias;
  gk_spec_set(plan, GK_ARG_X, false, d->dtype, d->rank, d->shape);
  if (w) gk_spec_set(plan, GK_ARG_WEIGHT, false, pt, nr, norm_shape);
  bool fwd = d->direction == GK_FORWARD;
  if (fwd) {
    if (b) gk_spec_set(plan, GK_ARG_BIAS, false, pt, nr, norm_shape);
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank, d->shape);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_DX, true, d->dtype, d->rank, d->shape);
    if (w) gk_spec_set(plan, GK_ARG_DWEIGHT, true, pt, nr, norm_shape);
    if (b) gk_spec_set(plan, GK_ARG_DBIAS, true, pt, nr, norm_shape);
  }
  // Saved statistics: outputs of forward, inputs of backward.
  gk_spec_set(plan, GK_ARG_RSTD, fwd, stat, lead, d->shape);
  if (layer) gk_spec_set(plan, GK_ARG_MEAN, fwd, stat, lead, d->shape);
  return GK_SUCCESS;
}
