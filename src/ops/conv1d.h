// Sizes and views of a causal conv1d description, shared by its kernels
// (see GK_OP_CONV1D in gradkern.h for the math).
#ifndef GK_CONV1D_H
#define GK_CONV1D_H

#include "../core/internal.h"

typedef struct gk_conv_dims {
  int64_t B, D, L, W;
} gk_conv_dims;

static inline gk_conv_dims gk_conv_dims_of(const gk_op_desc *d) {
  bool cl = d->conv.channel_last;
  gk_conv_dims s = {d->shape[0], d->shape[cl ? 2 : 1], d->shape[cl ? 1 : 2], d->conv.width};
  return s;
}

// x, y, dy or dx as a (B, D, L) view, whatever the layout.
static inline gk_tensor gk_conv_view(const gk_tensor *t, const gk_op_desc *d) {
  gk_tensor v = *t;
  if (d->conv.channel_last) {
    v.shape[1] = t->shape[2];
    v.strides[1] = t->strides[2];
    v.shape[2] = t->shape[1];
    v.strides[2] = t->strides[1];
  }
  return v;
}

#endif
