#version 450
// Elementwise activation, forward: y[i] = act(x[i]) (act.glsl), one
// invocation per element, or per word of two f16/bf16 elements read and
// written in place (half_ = 1, 2: half.glsl). Y may be X (each element read,
// then written, by the same invocation).
#include "common.glsl"
#include "act.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, act; float beta, threshold; uint half_; } p;
#define X 0
#define Y 1
void main() {
  if (p.half_ != 0u) {
    FOR_EACH(w, (p.n + 1u) / 2u) {
      vec2 x = half2_load(slot[X].v[w], p.half_);
      half2_store(Y, w, p.n, vec2(act_value(p.act, x.x, p.beta, p.threshold),
                                  act_value(p.act, x.y, p.beta, p.threshold)), p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) ST(Y, i, act_value(p.act, LD(X, i), p.beta, p.threshold));
}
