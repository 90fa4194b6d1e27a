#version 450
// Add / mul, backward, per element of y's shape (operands broadcast):
//   add: ga = dy, gb = alpha dy;  mul: ga = alpha dy b, gb = alpha dy a
// The gradients of broadcast operands are then summed by reduce.comp.
#include "common.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, mul; float alpha; uint half_; } p;
#define DY 0
#define A 1
#define B 2
#define GA 3
#define GB 4
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl), no broadcast
    FOR_EACH(w, (p.n + 1u) / 2u) {
      vec2 dy = half2_load(slot[DY].v[w], p.half_);
      vec2 ga = dy, gb = p.alpha * dy;
      if (p.mul != 0u) {
        ga = p.alpha * dy * half2_load(slot[B].v[w], p.half_);
        gb = p.alpha * dy * half2_load(slot[A].v[w], p.half_);
      }
      half2_store(GA, w, p.n, ga, p.half_);
      half2_store(GB, w, p.n, gb, p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) {
    float dy = LD(DY, i);
    ST(GA, i, p.mul != 0u ? p.alpha * dy * LD(B, i) : dy);
    ST(GB, i, p.mul != 0u ? p.alpha * dy * LD(A, i) : p.alpha * dy);
  }
}
