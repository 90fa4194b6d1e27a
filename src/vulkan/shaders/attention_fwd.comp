#version 450
// Attention, forward, flash style: one workgroup per (b, h, block of 64
// queries), one invocation per query; keys and values of kv head
// h / (H / Hkv) staged through workgroup memory 16 keys at a time, an
// online softmax over them (never a T x T matrix):
//   s_j = scale q . k_j (keys j <= i when causal)
//   m' = max(m, s_j), c = exp(m - m'), l = l c + exp(s_j - m'), acc = acc c + exp(s_j - m') v_j
//   o = acc / l,  lse = m + log l
// q, k, v, o are (B, H or Hkv, T, Dh), Dh <= 128; LSE (B, H, T).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint B, H, Hkv, T, Dh, causal; float scale; } p;
#define Q 0
#define K 1
#define V 2
#define O 3
#define LSE 4
shared float Ks[16][128], Vs[16][128];
void main() {
  uint lid = gl_LocalInvocationID.x, bh = gl_WorkGroupID.y, b = bh / p.H, h = bh % p.H;
  uint kv = (b * p.Hkv + h / (p.H / p.Hkv)) * p.T;
  uint i = gl_WorkGroupID.x * 64 + lid;
  bool live = i < p.T;
  float q[128], acc[128];
  for (uint c = 0; c < p.Dh; c++) {
    q[c] = live ? LD(Q, (bh * p.T + i) * p.Dh + c) : 0.0;
    acc[c] = 0.0;
  }
  float m = NEG_INF, l = 0.0;
  uint kend = p.causal != 0u ? min(p.T, (gl_WorkGroupID.x + 1) * 64) : p.T;
  for (uint j0 = 0; j0 < kend; j0 += 16) {
    for (uint e = lid; e < 16 * p.Dh; e += 64) {
      uint jj = e / p.Dh, c = e % p.Dh, j = j0 + jj;
      Ks[jj][c] = j < p.T ? LD(K, (kv + j) * p.Dh + c) : 0.0;
      Vs[jj][c] = j < p.T ? LD(V, (kv + j) * p.Dh + c) : 0.0;
    }
    barrier();
    for (uint jj = 0; jj < 16 && live; jj++) {
      uint j = j0 + jj;
      if (j >= p.T || (p.causal != 0u && j > i)) break;
      float s = 0.0;
      for (uint c = 0; c < p.Dh; c++) s += q[c] * Ks[jj][c];
      s *= p.scale;
      float m2 = max(m, s), cf = exp(m - m2), e = exp(s - m2);
      l = l * cf + e;
      for (uint c = 0; c < p.Dh; c++) acc[c] = acc[c] * cf + e * Vs[jj][c];
      m = m2;
    }
    barrier();
  }
  if (live) {
    for (uint c = 0; c < p.Dh; c++) ST(O, (bh * p.T + i) * p.Dh + c, acc[c] / l);
    ST(LSE, bh * p.T + i, m + log(l));
  }
}
