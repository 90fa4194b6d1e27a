// Description of the causal depthwise conv1d: option checks and tensors.
//   x (B, D, L) or (B, L, D) channel-last; weight (D, W); bias (D);
//   initial_state, final_state and their gradients (B, D, W-1).
#include "../core/internal.h"

static gk_status check_flag(const char *name, int v) {
  if (v != 0 && v != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "conv1d: desc.conv.%s = %d is neither 0 nor 1", name, v);
  return GK_SUCCESS;
}

gk_status gk_describe_conv1d(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  if (d->rank != 3)
    return gk_fail(GK_ERR_BAD_RANK, "conv1d: desc.rank = %d, x must be (B, D, L) or (B, L, D): rank 3", d->rank);
  int64_t W = d->conv.width;
  if (W < 1 || W > (int64_t)1 << 30)
    return gk_fail(GK_ERR_INVALID_VALUE, "conv1d: desc.conv.width = %lld is outside 1..2^30", (long long)W);
  const char *names[] = {"channel_last", "has_bias", "silu", "has_initial_state", "has_final_state"};
  const int values[] = {d->conv.channel_last, d->conv.has_bias, d->conv.silu, d->conv.has_initial_state,
                        d->conv.has_final_state};
  for (int i = 0; i < 5; i++) {
    gk_status s = check_flag(names[i], values[i]);
    if (s != GK_SUCCESS) return s;
  }
  if (d->accumulate != 0 && d->accumulate != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "conv1d: desc.accumulate = %d is neither 0 nor 1", d->accumulate);
  int64_t B = d->shape[0], D = d->shape[d->conv.channel_last ? 2 : 1];
  int64_t wshape[2] = {D, W}, state[3] = {B, D, W - 1};
  bool fwd = d->direction == GK_FORWARD;
  gk_spec_set(plan, GK_ARG_X, false, d->dtype, 3, d->shape);
  gk_spec_set(plan, GK_ARG_WEIGHT, false, d->dtype, 2, wshape);
  // Backward recomputes the pre-activation for SiLU, so it needs the bias.
  if (d->conv.has_bias && (fwd || d->conv.silu)) gk_spec_set(plan, GK_ARG_BIAS, false, d->dtype, 1, &D);
  if (d->conv.has_initial_state) gk_spec_set(plan, GK_ARG_INITIAL_STATE, false, d->dtype, 3, state);
  if (fwd) {
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, 3, d->shape);
    if (d->conv.has_final_state) gk_spec_set(plan, GK_ARG_FINAL_STATE, true, d->dtype, 3, state);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, 3, d->shape);
    if (d->conv.has_final_state) gk_spec_set(plan, GK_ARG_DFINAL_STATE, false, d->dtype, 3, state);
    gk_spec_set(plan, GK_ARG_DX, true, d->dtype, 3, d->shape);
    gk_spec_set(plan, GK_ARG_DWEIGHT, true, d->dtype, 2, wshape);
    if (d->conv.has_bias) gk_spec_set(plan, GK_ARG_DBIAS, true, d->dtype, 1, &D);
    if (d->conv.has_initial_state) gk_spec_set(plan, GK_ARG_DINITIAL_STATE, true, d->dtype, 3, state);
  }
  return GK_SUCCESS;
}
