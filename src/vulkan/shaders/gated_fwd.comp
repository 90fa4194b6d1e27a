#version 450
// Gated activation, forward: y = a * act(b), one invocation per output
// element. Output element i = (o, j), o < outer, j < inner, reads
//   a = A[o * stride + j], b = B[o * stride + b_offset + j]
// (split form: A = B = x, stride = 2 inner, b_offset = inner, the halves
// along the split dim; two-tensor form: A = x, B = gate, stride = inner).
#include "common.glsl"
#include "act.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, inner, stride, b_offset, act; float beta, threshold; uint half_; } p;
#define A 0
#define B 1
#define Y 2
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl); inner is even or p.n
    FOR_EACH(w, (p.n + 1u) / 2u) {
      uint i = 2u * w, e = (i / p.inner) * p.stride + i % p.inner;
      vec2 a = half2_load(slot[A].v[e / 2u], p.half_), b = half2_load(slot[B].v[(e + p.b_offset) / 2u], p.half_);
      half2_store(Y, w, p.n, a * vec2(act_value(p.act, b.x, p.beta, p.threshold),
                                      act_value(p.act, b.y, p.beta, p.threshold)), p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) {
    uint e = (i / p.inner) * p.stride + i % p.inner;
    ST(Y, i, LD(A, e) * act_value(p.act, LD(B, e + p.b_offset), p.beta, p.threshold));
  }
}
