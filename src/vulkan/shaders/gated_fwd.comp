#version 450
// Gated activation, forward: y = a * act(b), one invocation per output
// element. Output element i = (o, j), o < outer, j < inner, reads
//   a = A[o * stride + j], b = B[o * stride + b_offset + j]
// (split form: A = B = x, stride = 2 inner, b_offset = inner, the halves
// along the split dim; two-tensor form: A = x, B = gate, stride = inner).
#include "common.glsl"
#include "act.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, inner, stride, b_offset, act; float beta, threshold; } p;
#define A 0
#define B 1
#define Y 2
void main() {
  FOR_EACH(i, p.n) {
    uint e = (i / p.inner) * p.stride + i % p.inner;
    ST(Y, i, LD(A, e) * act_value(p.act, LD(B, e + p.b_offset), p.beta, p.threshold));
  }
}
