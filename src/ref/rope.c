// Reference kernels for RoPE: pair by pair, f64 math.
//   forward:  (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)
//   backward: (dx_a, dx_b) = (dy_a cos + dy_b sin, dy_b cos - dy_a sin)   (=)
//   pairs (a, b) = (i, i + Dh/2) or (2i, 2i + 1); angle = (offset + t) theta^(-2i/Dh)
#include "../ops/transformer.h"

#include <math.h>

static gk_status ref_rope(const gk_plan *plan, const gk_tensor *in, const gk_tensor *out, double sign) {
  const gk_op_desc *d = &plan->desc;
  int64_t Dh = d->shape[3], h = Dh / 2, rows = d->shape[0] * d->shape[1] * d->shape[2];
  bool half = d->rope.pairing == GK_ROPE_HALF;
  for (int64_t r = 0; r < rows; r++) {
    gk_tensor x = gk_tensor_row(in, 1, r), y = gk_tensor_row(out, 1, r);
    int64_t p = gk_rope_position(d, r);
    for (int64_t i = 0; i < h; i++) {
      double angle = gk_rope_angle(d, p, i), c = cos(angle), s = sign * sin(angle);
      int64_t ia = half ? i : 2 * i, ib = half ? i + h : 2 * i + 1;
      double xa = gk_get(&x, ia), xb = gk_get(&x, ib);
      gk_set(&y, ia, xa * c - xb * s);
      gk_set(&y, ib, xb * c + xa * s);
    }
  }
  return GK_SUCCESS;
}

static gk_status ref_rope_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  return ref_rope(plan, a[GK_ARG_X], a[GK_ARG_Y], 1.0);
}

static gk_status ref_rope_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  return ref_rope(plan, a[GK_ARG_DY], a[GK_ARG_DX], -1.0);
}

const gk_kernel gk_ref_rope_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .run = ref_rope_fwd};
const gk_kernel gk_ref_rope_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .run = ref_rope_bwd};
