// Description of embedding: option checks and tensors.
#include "transformer.h"

// INDEX (S), WEIGHT (V, D) -> Y (S..., D); backward DY, INDEX -> DWEIGHT.
gk_status gk_describe_embedding(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  gk_status s;
  if ((s = gk_check_index_dtype(d)) != GK_SUCCESS) return s;
  int64_t V = d->embedding.num_embeddings, D = d->embedding.dim;
  if (V < 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "embedding: desc.embedding.num_embeddings = %lld must be >= 1", (long long)V);
  if (D < 0) return gk_fail(GK_ERR_INVALID_VALUE, "embedding: desc.embedding.dim = %lld is negative", (long long)D);
  if (d->embedding.padding_idx < -1 || d->embedding.padding_idx >= V)
    return gk_fail(GK_ERR_INVALID_VALUE, "embedding: desc.embedding.padding_idx = %lld is outside -1..%lld",
                   (long long)d->embedding.padding_idx, (long long)(V - 1));
  if (d->rank >= GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "embedding: desc.rank = %d, the output adds a dim: at most %d", d->rank,
                   GK_MAX_RANK - 1);
  if (d->accumulate != 0 && d->accumulate != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "embedding: desc.accumulate = %d is neither 0 nor 1", d->accumulate);
  int64_t w[2] = {V, D}, y[GK_MAX_RANK], n = 1;
  for (int i = 0; i < d->rank; i++) y[i] = d->shape[i];
  y[d->rank] = D;
  for (int i = 0; i <= d->rank; i++)
    if (__builtin_mul_overflow(n, y[i], &n) || n > (INT64_MAX >> 4))
      return gk_fail(GK_ERR_BAD_SHAPE, "embedding: the element count of y overflows");
  if (__builtin_mul_overflow(V, D, &n) || n > (INT64_MAX >> 4))
    return gk_fail(GK_ERR_BAD_SHAPE, "embedding: the element count of weight overflows");
  // V itself too, even with D = 0: the backward's workspace holds V + 1 offsets.
  if (V > (INT64_MAX >> 4))
    return gk_fail(GK_ERR_BAD_SHAPE, "embedding: desc.embedding.num_embeddings = %lld is too large", (long long)V);
  gk_spec_set(plan, GK_ARG_INDEX, false, d->index_dtype, d->rank, d->shape);
  gk_spec_indices(plan, GK_ARG_INDEX, d->embedding.num_embeddings, false, 0);
  if (d->direction == GK_FORWARD) {
    gk_spec_set(plan, GK_ARG_WEIGHT, false, d->dtype, 2, w);
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank + 1, y);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank + 1, y);
    gk_spec_set(plan, GK_ARG_DWEIGHT, true, d->dtype, 2, w);
  }
  return GK_SUCCESS;
}
