#version 450
// Softmax / log-softmax along one dim: x viewed as (outer, C, inner), one
// workgroup per row (o, i) of C elements at o C inner + c inner + i.
//   m = max x, s = sum exp(x - m)
//   softmax: y = exp(x - m) / s;  log-softmax: y = x - m - log s
// Y may be X (each element read, then written, by the same invocation).
#include "common.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, C, inner, log_softmax, half_; } p;
#define X 0
#define Y 1
// x[e]: f32, or f16/bf16 read in place (half_ != 0: rows of even C, inner 1).
#define LDX(e) (p.half_ != 0u ? half_at(X, e, p.half_) : LD(X, e))
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = (r / p.inner) * p.C * p.inner + r % p.inner;
    float m = NEG_INF;
    for (uint c = t; c < p.C; c += 256) m = max(m, LDX(base + c * p.inner));
    m = workgroup_max(m);
    float s = 0.0;
    for (uint c = t; c < p.C; c += 256) s += exp(LDX(base + c * p.inner) - m);
    s = workgroup_sum(s);
    float ls = log(s);
    if (p.half_ != 0u) {  // y by words of two elements
      for (uint w = t; w < p.C / 2u; w += 256) {
        vec2 x = half2_load(slot[X].v[base / 2u + w], p.half_);
        half2_store(Y, base / 2u + w, 0u, p.log_softmax != 0u ? x - m - ls : exp(x - m) / s, p.half_);
      }
      continue;
    }
    for (uint c = t; c < p.C; c += 256) {
      uint e = base + c * p.inner;
      float x = LD(X, e);
      ST(Y, e, p.log_softmax != 0u ? x - m - ls : exp(x - m) / s);
    }
  }
}
