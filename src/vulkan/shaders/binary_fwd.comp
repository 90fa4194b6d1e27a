#version 450
// Add / mul, forward, on operands already broadcast to y's shape (the
// gather does that with stride-0 views): one invocation per element.
//   add: y = a + alpha b      mul: y = alpha a b
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, mul; float alpha; } p;
#define A 0
#define B 1
#define Y 2
void main() {
  FOR_EACH(i, p.n) {
    float a = LD(A, i), b = LD(B, i);
    ST(Y, i, p.mul != 0u ? p.alpha * a * b : a + p.alpha * b);
  }
}
