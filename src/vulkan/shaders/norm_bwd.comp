#version 450
// RMSNorm / LayerNorm, backward for dx: one workgroup per row, with the
// saved rstd (and mean), xhat = (x - mean) rstd (mean = 0 for RMSNorm),
// g = dy w:
//   LayerNorm: dx = rstd (g - sum(g) / C - xhat sum(g xhat) / C)
//   RMSNorm:   dx = rstd (g - xhat sum(g xhat) / C)
// dweight and dbias: norm_dparam.comp.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, C, layernorm, has_w; } p;
#define DY 0
#define X 1
#define W 2
#define RSTD 3
#define MEAN 4
#define DX 5
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = r * p.C;
    float rstd = LD(RSTD, r), mean = p.layernorm != 0u ? LD(MEAN, r) : 0.0;
    float sg = 0.0, sgx = 0.0;
    for (uint c = t; c < p.C; c += 256) {
      float g = LD(DY, base + c) * (p.has_w != 0u ? LD(W, c) : 1.0);
      sg += g;
      sgx += g * (LD(X, base + c) - mean) * rstd;
    }
    float mg = p.layernorm != 0u ? workgroup_sum(sg) / float(p.C) : 0.0;
    float mgx = workgroup_sum(sgx) / float(p.C);
    for (uint c = t; c < p.C; c += 256) {
      float g = LD(DY, base + c) * (p.has_w != 0u ? LD(W, c) : 1.0);
      float xhat = (LD(X, base + c) - mean) * rstd;
      ST(DX, base + c, rstd * (g - mg - xhat * mgx));
    }
  }
}
