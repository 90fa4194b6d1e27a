#version 450
// Matrix product in 64x64 output tiles, staged through workgroup memory 16
// columns of A and rows of B at a time, each invocation of the 16x16
// workgroup keeping 4x4 outputs in registers (rows ly + 16i, columns
// lx + 16j: a k step reads 4 values of A and 4 of B for 16 multiply-adds):
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
#define TILE 64
#define KT 16
shared float As[KT][TILE], Bs[KT][TILE];  // As[k][row], Bs[k][column] of the tile
void main() {
  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y, z = gl_WorkGroupID.z;
  uint t = ly * 16 + lx, row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
  float sum[4][4];
  for (uint i = 0; i < 4; i++)
    for (uint j = 0; j < 4; j++) sum[i][j] = 0.0;
  for (uint kb = 0; kb < p.kbatch; kb++) {
    uint a0 = z * p.a_bs + kb * p.a_kbs, b0 = z * p.b_bs + kb * p.b_kbs;
    for (uint k0 = 0; k0 < p.K; k0 += KT) {
      for (uint q = 0; q < 4; q++) {  // 1024 values of A and of B, 4 per invocation
        uint e = t + 256 * q;
        uint ar = e / KT, ak = e % KT, bk = e / TILE, bc = e % TILE;
        uint row = row0 + ar, col = col0 + bc;
        As[ak][ar] = row < p.M && k0 + ak < p.K ? LD(A, a0 + row * p.a_rs + (k0 + ak) * p.a_cs) : 0.0;
        Bs[bk][bc] = k0 + bk < p.K && col < p.N ? LD(B, b0 + (k0 + bk) * p.b_rs + col * p.b_cs) : 0.0;
      }
      barrier();
      for (uint k = 0; k < KT; k++) {
        float a[4], b[4];
        for (uint i = 0; i < 4; i++) a[i] = As[k][ly + 16 * i];
        for (uint j = 0; j < 4; j++) b[j] = Bs[k][lx + 16 * j];
        for (uint i = 0; i < 4; i++)
          for (uint j = 0; j < 4; j++) sum[i][j] += a[i] * b[j];
      }
      barrier();
    }
  }
  for (uint i = 0; i < 4; i++) {
    uint row = row0 + ly + 16 * i;
    for (uint j = 0; j < 4; j++) {
      uint col = col0 + lx + 16 * j;
      if (row < p.M && col < p.N) {
        float s = sum[i][j];
        if (p.has_bias != 0u) s += LD(BIAS, col);
        uint e = z * p.c_bs + row * p.c_rs + col * p.c_cs;
        ST(C, e, p.acc != 0u ? LD(C, e) + s : s);
      }
    }
  }
}
