#version 450
// Elementwise activation, backward: dx[i] = dy[i] act'(x[i]) (act.glsl),
// one invocation per element. DX may be DY or X.
#include "common.glsl"
#include "act.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, act; float beta, threshold; } p;
#define DY 0
#define X 1
#define DX 2
void main() {
  FOR_EACH(i, p.n) ST(DX, i, LD(DY, i) * act_grad(p.act, LD(X, i), p.beta, p.threshold));
}
