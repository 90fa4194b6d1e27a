// Sizes of a selective scan description, shared by its describe function and
// its kernels (see GK_OP_SELECTIVE_SCAN in gradkern.h for the math).
#ifndef GK_SCAN_H
#define GK_SCAN_H

#include "../core/internal.h"

typedef struct gk_scan_dims {
  int64_t B, D, L, N;
  int64_t T;              // chunk_size: steps per saved state
  int64_t nchunks;        // ceil(L / T)
  int64_t Gb, Gc;         // groups of B and C (1 for BATCH; 0 for SHARED)
  bool var_b, var_c;      // B / C vary with batch and step
} gk_scan_dims;

static inline gk_scan_dims gk_scan_dims_of(const gk_op_desc *d) {
  gk_scan_dims s;
  s.B = d->shape[0];
  s.D = d->shape[1];
  s.L = d->shape[2];
  s.N = d->scan.d_state;
  s.T = d->scan.chunk_size;
  s.nchunks = s.L / s.T + (s.L % s.T != 0);  // ceil without L + T - 1, which overflows near INT64_MAX
  s.var_b = d->scan.b_layout != GK_SCAN_SHARED;
  s.var_c = d->scan.c_layout != GK_SCAN_SHARED;
  s.Gb = d->scan.b_layout == GK_SCAN_GROUPED ? d->scan.groups : s.var_b;
  s.Gc = d->scan.c_layout == GK_SCAN_GROUPED ? d->scan.groups : s.var_c;
  return s;
}

// The dtype the state is kept in: f64 for f64, else f32.
static inline gk_dtype gk_scan_state_dtype(gk_dtype dt) { return dt == GK_F64 ? GK_F64 : GK_F32; }

// B or C as a (B, G, N, L) view: BATCH (B, N, L) gets G = 1 (stride 0).
// SHARED (D, N) tensors are returned as they are.
static inline gk_tensor gk_scan_bc_view(const gk_tensor *t, gk_scan_layout layout) {
  gk_tensor v = *t;
  if (layout != GK_SCAN_BATCH) return v;
  v.rank = 4;
  v.shape[0] = t->shape[0];
  v.strides[0] = t->strides[0];
  v.shape[1] = 1;
  v.strides[1] = 0;
  for (int i = 1; i < 3; i++) {
    v.shape[i + 1] = t->shape[i];
    v.strides[i + 1] = t->strides[i];
  }
  return v;
}

#endif
