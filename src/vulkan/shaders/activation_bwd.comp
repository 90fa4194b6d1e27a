#version 450
// Elementwise activation, backward: dx[i] = dy[i] act'(x[i]) (act.glsl),
// one invocation per element. DX may be DY or X.
#include "common.glsl"
#include "act.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, act; float beta, threshold; uint half_; } p;
#define DY 0
#define X 1
#define DX 2
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl)
    FOR_EACH(w, (p.n + 1u) / 2u) {
      vec2 dy = half2_load(slot[DY].v[w], p.half_), x = half2_load(slot[X].v[w], p.half_);
      half2_store(DX, w, p.n, dy * vec2(act_grad(p.act, x.x, p.beta, p.threshold),
                                        act_grad(p.act, x.y, p.beta, p.threshold)), p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) ST(DX, i, LD(DY, i) * act_grad(p.act, LD(X, i), p.beta, p.threshold));
}
