#version 450
// Add / mul, forward, on operands already broadcast to y's shape (the
// gather does that with stride-0 views): one invocation per element.
//   add: y = a + alpha b      mul: y = alpha a b
#include "common.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, mul; float alpha; uint half_; } p;
#define A 0
#define B 1
#define Y 2
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl), no broadcast
    FOR_EACH(w, (p.n + 1u) / 2u) {
      vec2 a = half2_load(slot[A].v[w], p.half_), b = half2_load(slot[B].v[w], p.half_);
      half2_store(Y, w, p.n, p.mul != 0u ? p.alpha * a * b : a + p.alpha * b, p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) {
    float a = LD(A, i), b = LD(B, i);
    ST(Y, i, p.mul != 0u ? p.alpha * a * b : a + p.alpha * b);
  }
}
