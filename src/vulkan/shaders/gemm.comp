#version 450
// Matrix product in 16x16 output tiles staged through workgroup memory:
//   C[z] (M x N) (= or += with acc) = sum_{kb < kbatch} A[z, kb] B[z, kb] (+ bias[n])
// A is M x K, B is K x N, each read through (row, column, batch, kb)
// strides, so transposed and batched operands are views (the backward
// products are the same shader on transposed views; kbatch > 1 sums the
// products of several batches into one output, as a shared B's gradient).
// Each output is summed over kb, then k, in order: deterministic.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(push_constant) uniform Push {
  uint M, N, K, kbatch, acc, has_bias;
  uint a_rs, a_cs, a_bs, a_kbs, b_rs, b_cs, b_bs, b_kbs, c_rs, c_cs, c_bs;
} p;
#define A 0
#define B 1
#define C 2
#define BIAS 3
shared float As[16][16], Bs[16][16];
void main() {
  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y, z = gl_WorkGroupID.z;
  uint row = gl_WorkGroupID.y * 16 + ly, col = gl_WorkGroupID.x * 16 + lx;
  float sum = 0.0;
  for (uint kb = 0; kb < p.kbatch; kb++) {
    uint a0 = z * p.a_bs + kb * p.a_kbs, b0 = z * p.b_bs + kb * p.b_kbs;
    for (uint k0 = 0; k0 < p.K; k0 += 16) {
      As[ly][lx] = row < p.M && k0 + lx < p.K ? LD(A, a0 + row * p.a_rs + (k0 + lx) * p.a_cs) : 0.0;
      Bs[ly][lx] = k0 + ly < p.K && col < p.N ? LD(B, b0 + (k0 + ly) * p.b_rs + col * p.b_cs) : 0.0;
      barrier();
      for (uint k = 0; k < 16; k++) sum += As[ly][k] * Bs[k][lx];
      barrier();
    }
  }
  if (row < p.M && col < p.N) {
    if (p.has_bias != 0u) sum += LD(BIAS, col);
    uint e = z * p.c_bs + row * p.c_rs + col * p.c_cs;
    ST(C, e, p.acc != 0u ? LD(C, e) + sum : sum);
  }
}
