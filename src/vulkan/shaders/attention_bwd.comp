#version 450
// Attention, backward, recomputing the scores tile by tile from the saved
// lse: p_ij = exp(scale q_i . k_j - lse_i), D_i = dO_i . o_i,
// ds_ij = p_ij (dO_i . v_j - D_i).
//   mode 0: one invocation per query i (workgroups of 64 queries, keys and
//           values staged 16 at a time): dq_i = scale sum_j ds_ij k_j, and D_i
//           saved for mode 1.
//   mode 1: one invocation per key j of kv head g (workgroups of 64 keys,
//           queries and dO staged 16 at a time), over the heads sharing g in
//           order, then the queries in order:
//           dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij dO_i
// Shapes as attention_fwd.comp.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint B, H, Hkv, T, Dh, causal, mode; float scale; } p;
#define DY 0
#define Q 1
#define K 2
#define V 3
#define O 4
#define LSE 5
#define DQ 6
#define DK 7
#define DV 8
#define DTMP 9
shared float S0[16][128], S1[16][128], Ls[16], Ds[16];

void query_pass() {
  uint lid = gl_LocalInvocationID.x, bh = gl_WorkGroupID.y, b = bh / p.H, h = bh % p.H;
  uint kv = (b * p.Hkv + h / (p.H / p.Hkv)) * p.T;
  uint i = gl_WorkGroupID.x * 64 + lid;
  bool live = i < p.T;
  float q[128], dO[128], dq[128], Di = 0.0;
  for (uint c = 0; c < p.Dh; c++) {
    uint e = (bh * p.T + i) * p.Dh + c;
    q[c] = live ? LD(Q, e) : 0.0;
    dO[c] = live ? LD(DY, e) : 0.0;
    Di += live ? dO[c] * LD(O, e) : 0.0;
    dq[c] = 0.0;
  }
  float lse = live ? LD(LSE, bh * p.T + i) : 0.0;
  uint kend = p.causal != 0u ? min(p.T, (gl_WorkGroupID.x + 1) * 64) : p.T;
  for (uint j0 = 0; j0 < kend; j0 += 16) {
    for (uint e = lid; e < 16 * p.Dh; e += 64) {
      uint jj = e / p.Dh, c = e % p.Dh, j = j0 + jj;
      S0[jj][c] = j < p.T ? LD(K, (kv + j) * p.Dh + c) : 0.0;
      S1[jj][c] = j < p.T ? LD(V, (kv + j) * p.Dh + c) : 0.0;
    }
    barrier();
    for (uint jj = 0; jj < 16 && live; jj++) {
      uint j = j0 + jj;
      if (j >= p.T || (p.causal != 0u && j > i)) break;
      float s = 0.0, dp = 0.0;
      for (uint c = 0; c < p.Dh; c++) {
        s += q[c] * S0[jj][c];
        dp += dO[c] * S1[jj][c];
      }
      float pij = exp(s * p.scale - lse), ds = pij * (dp - Di);
      for (uint c = 0; c < p.Dh; c++) dq[c] += ds * S0[jj][c];
    }
    barrier();
  }
  if (live) {
    for (uint c = 0; c < p.Dh; c++) ST(DQ, (bh * p.T + i) * p.Dh + c, p.scale * dq[c]);
    ST(DTMP, bh * p.T + i, Di);
  }
}

void key_pass() {
  uint lid = gl_LocalInvocationID.x, bg = gl_WorkGroupID.y, b = bg / p.Hkv, g = bg % p.Hkv;
  uint j = gl_WorkGroupID.x * 64 + lid, group = p.H / p.Hkv;
  bool live = j < p.T;
  float k[128], v[128], dk[128], dv[128];
  for (uint c = 0; c < p.Dh; c++) {
    uint e = (bg * p.T + j) * p.Dh + c;
    k[c] = live ? LD(K, e) : 0.0;
    v[c] = live ? LD(V, e) : 0.0;
    dk[c] = 0.0;
    dv[c] = 0.0;
  }
  uint istart = p.causal != 0u ? gl_WorkGroupID.x * 64 : 0;
  for (uint hh = 0; hh < group; hh++) {
    uint bh = b * p.H + g * group + hh;
    for (uint i0 = istart; i0 < p.T; i0 += 16) {
      for (uint e = lid; e < 16 * p.Dh; e += 64) {
        uint ii = e / p.Dh, c = e % p.Dh, i = i0 + ii;
        S0[ii][c] = i < p.T ? LD(Q, (bh * p.T + i) * p.Dh + c) : 0.0;
        S1[ii][c] = i < p.T ? LD(DY, (bh * p.T + i) * p.Dh + c) : 0.0;
      }
      if (lid < 16) {
        uint i = i0 + lid;
        Ls[lid] = i < p.T ? LD(LSE, bh * p.T + i) : 0.0;
        Ds[lid] = i < p.T ? LD(DTMP, bh * p.T + i) : 0.0;
      }
      barrier();
      for (uint ii = 0; ii < 16 && live; ii++) {
        uint i = i0 + ii;
        if (i >= p.T) break;
        if (p.causal != 0u && j > i) continue;
        float s = 0.0, dp = 0.0;
        for (uint c = 0; c < p.Dh; c++) {
          s += S0[ii][c] * k[c];
          dp += S1[ii][c] * v[c];
        }
        float pij = exp(s * p.scale - Ls[ii]), ds = pij * (dp - Ds[ii]);
        for (uint c = 0; c < p.Dh; c++) {
          dv[c] += pij * S1[ii][c];
          dk[c] += ds * S0[ii][c];
        }
      }
      barrier();
    }
  }
  if (live)
    for (uint c = 0; c < p.Dh; c++) {
      uint e = (bg * p.T + j) * p.Dh + c;
      ST(DK, e, p.scale * dk[c]);
      ST(DV, e, dv[c]);
    }
}

void main() {
  if (p.mode == 0u) query_pass();
  else key_pass();
}
