#version 450
// Elementwise activation, backward: dx[i] = dy[i] act'(x[i]) (act.glsl), or
// with from_output (relu, sigmoid: act.from_output) dx[i] = dy[i] act'(x)
// from y[i] = act(x[i]) (act_grad_y), one invocation per element. DX may be
// DY or the saved X (Y).
#include "common.glsl"
#include "act.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, act; float beta, threshold; uint half_, from_output; } p;
#define DY 0
#define SAVED 1  // X, or Y with from_output
#define DX 2
float grad(float v) {
  return p.from_output != 0u ? act_grad_y(p.act, v) : act_grad(p.act, v, p.beta, p.threshold);
}
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl)
    FOR_EACH(w, (p.n + 1u) / 2u) {
      vec2 dy = half2_load(slot[DY].v[w], p.half_), v = half2_load(slot[SAVED].v[w], p.half_);
      half2_store(DX, w, p.n, dy * vec2(grad(v.x), grad(v.y)), p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) ST(DX, i, LD(DY, i) * grad(LD(SAVED, i)));
}
