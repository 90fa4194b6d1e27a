#version 450
// Sum of a contiguous tensor of shape S (rank <= 8) over the dims in `mask`
// (bit k: dim k), one workgroup of 256 per output element: invocation t
// sums the reduced indices t, t + 256, ... (in row-major order), then the
// workgroup's fixed tree adds the 256 partial sums (a fixed order, no
// atomics; no invocation loops over every reduced index, which long loops
// on lavapipe do not survive):
//   out[o] (= or += with acc) = sum over the reduced indices of in[...]
// The output has S's shape with the reduced dims of size 1.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n_out, rank, mask, count, acc; uint shape[8]; } p;
#define IN 0
#define OUT 1
void main() {
  FOR_EACH_ROW(o, p.n_out) {
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
    for (uint r = gl_LocalInvocationID.x; r < p.count; r += 256u) {
      uint e = base, q = r;
      for (int k = int(p.rank) - 1; k >= 0; k--)
        if ((p.mask & (1u << k)) != 0u) {
          e += (q % p.shape[k]) * strides[k];
          q /= p.shape[k];
        }
      s += LD(IN, e);
    }
    float total = workgroup_sum(s);
    if (gl_LocalInvocationID.x == 0u) ST(OUT, o, p.acc != 0u ? LD(OUT, o) + total : total);
  }
}
