#version 450
// Softmax / log-softmax backward, rows as in softmax_fwd.comp:
//   softmax:     dx = y (dy - sum(dy y))
//   log-softmax: dx = dy - exp(y) sum(dy)
// DX may be DY or Y.
#include "common.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, C, inner, log_softmax, half_; } p;
#define DY 0
#define Y 1
#define DX 2
// Element e of slot k: f32, or f16/bf16 read in place (half_ != 0: rows of even C, inner 1).
#define LDH(k, e) (p.half_ != 0u ? half_at(k, e, p.half_) : LD(k, e))
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = (r / p.inner) * p.C * p.inner + r % p.inner;
    float s = 0.0;
    for (uint c = t; c < p.C; c += 256) {
      uint e = base + c * p.inner;
      s += p.log_softmax != 0u ? LDH(DY, e) : LDH(DY, e) * LDH(Y, e);
    }
    s = workgroup_sum(s);
    if (p.half_ != 0u) {  // dx by words of two elements
      for (uint w = t; w < p.C / 2u; w += 256) {
        vec2 dy = half2_load(slot[DY].v[base / 2u + w], p.half_), y = half2_load(slot[Y].v[base / 2u + w], p.half_);
        half2_store(DX, base / 2u + w, 0u, p.log_softmax != 0u ? dy - exp(y) * s : y * (dy - s), p.half_);
      }
      continue;
    }
    for (uint c = t; c < p.C; c += 256) {
      uint e = base + c * p.inner;
      float dy = LD(DY, e), y = LD(Y, e);
      ST(DX, e, p.log_softmax != 0u ? dy - exp(y) * s : y * (dy - s));
    }
  }
}
