#version 450
// RMSNorm / LayerNorm, forward: one workgroup per row of C elements, sums
// by workgroup_sum (fixed tree order).
//   RMSNorm:   rstd = 1 / sqrt(sum(x^2) / C + eps),          y = x rstd w
//   LayerNorm: mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps),
//              y = (x - mean) rstd w + b
// (w = 1 without weight, b = 0 without bias). Saves RSTD (and MEAN).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, C, layernorm, has_w, has_b; float eps; } p;
#define X 0
#define W 1
#define B 2
#define Y 3
#define RSTD 4
#define MEAN 5
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = r * p.C;
    float mean = 0.0;
    if (p.layernorm != 0u) {
      float s = 0.0;
      for (uint c = t; c < p.C; c += 256) s += LD(X, base + c);
      mean = workgroup_sum(s) / float(p.C);
    }
    float q = 0.0;
    for (uint c = t; c < p.C; c += 256) {
      float d = LD(X, base + c) - mean;
      q += d * d;
    }
    float rstd = 1.0 / sqrt(workgroup_sum(q) / float(p.C) + p.eps);
    for (uint c = t; c < p.C; c += 256) {
      float v = (LD(X, base + c) - mean) * rstd;
      if (p.has_w != 0u) v *= LD(W, c);
      if (p.has_b != 0u) v += LD(B, c);
      ST(Y, base + c, v);
    }
    if (t == 0u) {
      ST(RSTD, r, rstd);
      if (p.layernorm != 0u) ST(MEAN, r, mean);
    }
  }
}
