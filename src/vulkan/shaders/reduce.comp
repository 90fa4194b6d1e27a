#version 450
// Sum of a contiguous tensor of shape S (rank <= 8) over the dims in `mask`
// (bit k: dim k), one invocation per output element, the reduced indices
// walked in row-major order (a fixed order, no atomics):
//   out[o] (= or += with acc) = sum over the reduced indices of in[...]
// The output has S's shape with the reduced dims of size 1.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n_out, rank, mask, count, acc; uint shape[8]; } p;
#define IN 0
#define OUT 1
void main() {
  FOR_EACH(o, p.n_out) {
    // Element offset of the output's element in the input, and the input's strides.
    uint base = 0, rest = o, stride = 1;
    uint strides[8];
    for (int k = int(p.rank) - 1; k >= 0; k--) {
      strides[k] = stride;
      if ((p.mask & (1u << k)) == 0u) {
        base += (rest % p.shape[k]) * stride;
        rest /= p.shape[k];
      }
      stride *= p.shape[k];
    }
    float s = 0.0;
    for (uint r = 0; r < p.count; r++) {
      uint e = base, q = r;
      for (int k = int(p.rank) - 1; k >= 0; k--)
        if ((p.mask & (1u << k)) != 0u) {
          e += (q % p.shape[k]) * strides[k];
          q /= p.shape[k];
        }
      s += LD(IN, e);
    }
    ST(OUT, o, p.acc != 0u ? LD(OUT, o) + s : s);
  }
}
