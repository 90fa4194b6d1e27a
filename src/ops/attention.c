// Description of attention: option checks and tensors.
#include "transformer.h"

#include <math.h>

// Q (B, H, T, Dh); K, V (B, Hkv, T, Dh); O (B, H, T, Dh); LSE (B, H, T).
gk_status gk_describe_attention(gk_plan *plan) {
  gk_op_desc *d = &plan->desc;
  if (d->rank != 4) return gk_fail(GK_ERR_BAD_RANK, "attention: desc.rank = %d, q must be (B, H, T, Dh)", d->rank);
  int64_t B = d->shape[0], H = d->shape[1], T = d->shape[2], Dh = d->shape[3];
  if (H < 1) return gk_fail(GK_ERR_BAD_SHAPE, "attention: desc.shape[1] = %lld, H must be >= 1", (long long)H);
  if (Dh < 1) return gk_fail(GK_ERR_BAD_SHAPE, "attention: desc.shape[3] = %lld, Dh must be >= 1", (long long)Dh);
  if (d->attn.kv_heads == 0) d->attn.kv_heads = H;
  int64_t Hkv = d->attn.kv_heads;
  if (Hkv < 1 || H % Hkv != 0)
    return gk_fail(GK_ERR_INVALID_VALUE, "attention: desc.attn.kv_heads = %lld does not divide H = %lld",
                   (long long)Hkv, (long long)H);
  if (d->attn.causal != 0 && d->attn.causal != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "attention: desc.attn.causal = %d is neither 0 nor 1", d->attn.causal);
  if (!isfinite(d->attn.scale))
    return gk_fail(GK_ERR_INVALID_VALUE, "attention: desc.attn.scale = %g is not finite", d->attn.scale);
  if (d->attn.scale == 0) d->attn.scale = 1.0 / sqrt((double)Dh);
  gk_dtype stat = d->dtype == GK_F64 ? GK_F64 : GK_F32;
  int64_t kv[4] = {B, Hkv, T, Dh};
  gk_spec_set(plan, GK_ARG_Q, false, d->dtype, 4, d->shape);
  gk_spec_set(plan, GK_ARG_K, false, d->dtype, 4, kv);
  gk_spec_set(plan, GK_ARG_V, false, d->dtype, 4, kv);
  bool fwd = d->direction == GK_FORWARD;
  gk_spec_set(plan, GK_ARG_Y, fwd, d->dtype, 4, d->shape);
  gk_spec_set(plan, GK_ARG_LSE, fwd, stat, 3, d->shape);
  if (!fwd) {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, 4, d->shape);
    gk_spec_set(plan, GK_ARG_DQ, true, d->dtype, 4, d->shape);
    gk_spec_set(plan, GK_ARG_DK, true, d->dtype, 4, kv);
    gk_spec_set(plan, GK_ARG_DV, true, d->dtype, 4, kv);
  }
  return GK_SUCCESS;
}
