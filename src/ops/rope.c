// Description of RoPE: option checks and tensors; positions and angles.
#include "transformer.h"

#include <math.h>

int64_t gk_rope_position(const gk_op_desc *d, int64_t r) {
  // rows are (B, T, H) or (B, H, T)
  int64_t t = d->rope.layout == GK_ROPE_BTHD ? (r / d->shape[2]) % d->shape[1] : r % d->shape[2];
  return d->rope.offset + t;
}

double gk_rope_angle(const gk_op_desc *d, int64_t p, int64_t i) {
  return (double)p * pow(d->rope.theta, -2.0 * (double)i / (double)d->shape[3]);
}

// Forward: X -> Y. Backward: DY -> DX. All of the desc shape.
gk_status gk_describe_rope(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  if (d->rank != 4)
    return gk_fail(GK_ERR_BAD_RANK, "rope: desc.rank = %d, x must have rank 4, (B, T, H, Dh) or (B, H, T, Dh)",
                   d->rank);
  if (d->rope.layout != GK_ROPE_BTHD && d->rope.layout != GK_ROPE_BHTD)
    return gk_fail(GK_ERR_INVALID_VALUE, "rope: desc.rope.layout = %d is neither GK_ROPE_BTHD (0) nor GK_ROPE_BHTD (1)",
                   (int)d->rope.layout);
  if (d->rope.pairing != GK_ROPE_HALF && d->rope.pairing != GK_ROPE_INTERLEAVED)
    return gk_fail(GK_ERR_INVALID_VALUE,
                   "rope: desc.rope.pairing = %d is neither GK_ROPE_HALF (0) nor GK_ROPE_INTERLEAVED (1)",
                   (int)d->rope.pairing);
  if (!(d->rope.theta > 0) || !isfinite(d->rope.theta))
    return gk_fail(GK_ERR_INVALID_VALUE, "rope: desc.rope.theta = %g must be finite and > 0", d->rope.theta);
  if (d->rope.offset < 0 || d->rope.offset > (INT64_C(1) << 40))
    return gk_fail(GK_ERR_INVALID_VALUE, "rope: desc.rope.offset = %lld is outside 0..2^40", (long long)d->rope.offset);
  if (d->shape[3] % 2 != 0)
    return gk_fail(GK_ERR_BAD_SHAPE, "rope: desc.shape[3] = %lld (Dh) must be even", (long long)d->shape[3]);
  bool fwd = d->direction == GK_FORWARD;
  gk_arg_kind in = fwd ? GK_ARG_X : GK_ARG_DY, out = fwd ? GK_ARG_Y : GK_ARG_DX;
  gk_spec_set(plan, in, false, d->dtype, 4, d->shape);
  gk_spec_set(plan, out, true, d->dtype, 4, d->shape);
  gk_spec_allow_alias(plan, out, in);
  return GK_SUCCESS;
}
