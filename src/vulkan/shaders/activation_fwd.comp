#version 450
// Elementwise activation, forward: y[i] = act(x[i]) (act.glsl), one
// invocation per element. Y may be X (each element read, then written, by
// the same invocation).
#include "common.glsl"
#include "act.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, act; float beta, threshold; } p;
#define X 0
#define Y 1
void main() {
  FOR_EACH(i, p.n) ST(Y, i, act_value(p.act, LD(X, i), p.beta, p.threshold));
}
