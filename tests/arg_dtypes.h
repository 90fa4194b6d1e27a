// The dtype each argument of a plan takes, as include/gradkern.h gives it,
// written once for the tests that build tensors for plans (the op tests and
// their bad-input twins): index tensors desc.index_dtype; saved statistics,
// losses and the scan's states f32 (f64 for f64); the parameters that follow
// desc.param_dtype (norm weight and bias, linear bias, the scan's A, D and
// delta_bias) and the scan's B and C (scan.b_dtype, c_dtype) their field,
// GK_DTYPE_SAME being desc.dtype; every other argument desc.dtype.
#ifndef GK_TEST_ARG_DTYPES_H
#define GK_TEST_ARG_DTYPES_H

#include "gradkern.h"

#include <stdbool.h>

static inline gk_dtype dtype_field(const gk_op_desc *d, int field) {
  return field == GK_DTYPE_SAME ? d->dtype : (gk_dtype)field;
}

static inline gk_dtype expected_arg_dtype(const gk_op_desc *d, int k) {
  bool norm = d->op == GK_OP_RMSNORM || d->op == GK_OP_LAYERNORM, scan = d->op == GK_OP_SELECTIVE_SCAN;
  switch (k) {
  case GK_ARG_TARGET: case GK_ARG_INDEX: return d->index_dtype;
  case GK_ARG_RSTD: case GK_ARG_MEAN: case GK_ARG_LOSS: case GK_ARG_DLOSS: case GK_ARG_LSE:
  case GK_ARG_INITIAL_STATE: case GK_ARG_FINAL_STATE: case GK_ARG_DINITIAL_STATE: case GK_ARG_DFINAL_STATE:
  case GK_ARG_CHUNK_STATES:
    // conv1d's states have the op's dtype; the scan's and the statistics f32.
    if (d->op == GK_OP_CONV1D) return d->dtype;
    return d->dtype == GK_F64 ? GK_F64 : GK_F32;
  case GK_ARG_WEIGHT: case GK_ARG_DWEIGHT: return norm ? dtype_field(d, d->param_dtype) : d->dtype;
  case GK_ARG_BIAS: case GK_ARG_DBIAS: return dtype_field(d, d->param_dtype);
  case GK_ARG_A: case GK_ARG_DA: case GK_ARG_D: case GK_ARG_DD: case GK_ARG_DELTA_BIAS: case GK_ARG_DDELTA_BIAS:
    return scan ? dtype_field(d, d->param_dtype) : d->dtype;
  case GK_ARG_B: case GK_ARG_DB: return scan ? dtype_field(d, d->scan.b_dtype) : d->dtype;
  case GK_ARG_C: case GK_ARG_DC: return scan ? dtype_field(d, d->scan.c_dtype) : d->dtype;
  default: return d->dtype;
  }
}

#endif
