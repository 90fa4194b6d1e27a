#version 450
// Add / mul, backward, per element of y's shape (operands broadcast):
//   add: ga = dy, gb = alpha dy;  mul: ga = alpha dy b, gb = alpha dy a
// The gradients of broadcast operands are then summed by reduce.comp.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, mul; float alpha; } p;
#define DY 0
#define A 1
#define B 2
#define GA 3
#define GB 4
void main() {
  FOR_EACH(i, p.n) {
    float dy = LD(DY, i);
    ST(GA, i, p.mul != 0u ? p.alpha * dy * LD(B, i) : dy);
    ST(GB, i, p.mul != 0u ? p.alpha * dy * LD(A, i) : p.alpha * dy);
  }
}
