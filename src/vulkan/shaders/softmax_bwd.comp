#version 450
// Softmax / log-softmax backward, rows as in softmax_fwd.comp:
//   softmax:     dx = y (dy - sum(dy y))
//   log-softmax: dx = dy - exp(y) sum(dy)
// DX may be DY or Y.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, C, inner, log_softmax; } p;
#define DY 0
#define Y 1
#define DX 2
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = (r / p.inner) * p.C * p.inner + r % p.inner;
    float s = 0.0;
    for (uint c = t; c < p.C; c += 256) {
      uint e = base + c * p.inner;
      s += p.log_softmax != 0u ? LD(DY, e) : LD(DY, e) * LD(Y, e);
    }
    s = workgroup_sum(s);
    for (uint c = t; c < p.C; c += 256) {
      uint e = base + c * p.inner;
      float dy = LD(DY, e), y = LD(Y, e);
      ST(DX, e, p.log_softmax != 0u ? dy - exp(y) * s : y * (dy - s));
    }
  }
}
