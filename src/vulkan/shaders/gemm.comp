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
// Each output is summed over kb, then k, in order, one fused multiply-add a
// step into a `precise` sum: deterministic, and the same bits in both builds.
//
// The GK_SUBGROUPS build (gemm_subgroups, used where the device has quad
// operations in compute shaders; src/vulkan/device.c) shares A within quads.
// The four invocations of a quad (subgroup lanes 4g..4g+3, whatever the
// subgroup size) take the same rows and four neighbouring values of lx, so
// they need the same 4x16 values of A per slice. Lane q of the quad reads
// only k = 4q..4q+3 of its 4 rows, as 4 vec4 (A is staged k-contiguous,
// As4[row][k / 4]), and each k step takes its 4 values of A from lane k / 4
// by subgroupQuadBroadcast (constant lanes). B is read as in the plain build.
// Workgroup-memory reads per multiply-add, per invocation and k step:
//   plain:     4 of A + 4 of B                 = 8 words, 8 loads  per 16 (0.5)
//   subgroups: 1 of A (a vec4 per 4 steps) + 4 = 5 words, 4.25 loads per 16
//              (0.31 words, 0.27 loads), plus 4 quad broadcasts per 16.
// What a GPU gains depends on what a quad broadcast costs there: on Intel a
// register region and on AMD a DPP quad_perm (ALU work, no workgroup-memory
// traffic), so reads of workgroup memory drop by 3/8 and its bandwidth goes
// to B; on NVIDIA it is a SHFL, issued through the same pipe as workgroup-
// memory loads, so there loads plus shuffles stay at about 8 per 16
// multiply-adds and the gain is in bank traffic (5 words read instead of 8)
// and A's staging stores, which no longer conflict (k-contiguous rows). None
// of this is measured on a GPU yet; lavapipe (a CPU) says little about it.
// The invocations take their outputs by subgroup position (subgroup id x
// size + lane), which needs full subgroups; where the workgroup's subgroups
// are not all full, they read A as the plain build does (same sums).
#include "common.glsl"
#ifdef GK_SUBGROUPS
#extension GL_KHR_shader_subgroup_quad : require
#endif
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
shared float Bs[KT][TILE];  // Bs[k][column] of the tile
#ifdef GK_SUBGROUPS
shared vec4 As4[TILE][KT / 4];  // As4[row][k / 4][k % 4] of the tile
#define A_AT(k, row) As4[row][(k) >> 2][(k) & 3u]
#else
shared float As[KT][TILE];  // As[k][row] of the tile
#define A_AT(k, row) As[k][row]
#endif
// One k step: sum[i][j] += a[i] B[k][lx + 16j], the 4 values of A in a.
#define MULTIPLY_ADD(k, a)                                           \
  for (uint j = 0; j < 4; j++) b[j] = Bs[k][lx + 16 * j];            \
  for (uint i = 0; i < 4; i++)                                       \
    for (uint j = 0; j < 4; j++) sum[i][j] = fma(a[i], b[j], sum[i][j]);
#ifdef GK_SUBGROUPS
// Step 4s + m: a[i] is component m of quad lane s's ar[i].
#define QUAD_STEP(s, m)                                                             \
  for (uint i = 0; i < 4; i++) a[i] = subgroupQuadBroadcast(ar[i][m], s);           \
  MULTIPLY_ADD(4u * s + m, a)
#define QUAD_LANE(s) QUAD_STEP(s, 0u) QUAD_STEP(s, 1u) QUAD_STEP(s, 2u) QUAD_STEP(s, 3u)
#endif
void main() {
  uint z = gl_WorkGroupID.z, t = gl_LocalInvocationIndex;  // t: the invocation's share of the loads
  uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
#ifdef GK_SUBGROUPS
  bool quads = gl_NumSubgroups * gl_SubgroupSize == 256u;  // all full: o below is a permutation of t
  uint o = quads ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID : t, q = o & 3u;
#else
  uint o = t;
#endif
  uint lx = o % 16, ly = o / 16;  // outputs: rows ly + 16i, columns lx + 16j
  precise float sum[4][4];
  float a[4], b[4];
  for (uint i = 0; i < 4; i++)
    for (uint j = 0; j < 4; j++) sum[i][j] = 0.0;
  for (uint kb = 0; kb < p.kbatch; kb++) {
    uint a0 = z * p.a_bs + kb * p.a_kbs, b0 = z * p.b_bs + kb * p.b_kbs;
    for (uint k0 = 0; k0 < p.K; k0 += KT) {
      for (uint l = 0; l < 4; l++) {  // 1024 values of A and of B, 4 per invocation
        uint e = t + 256 * l;
        uint ar = e / KT, ak = e % KT, bk = e / TILE, bc = e % TILE;
        uint row = row0 + ar, col = col0 + bc;
        A_AT(ak, ar) = row < p.M && k0 + ak < p.K ? LD(A, a0 + row * p.a_rs + (k0 + ak) * p.a_cs) : 0.0;
        Bs[bk][bc] = k0 + bk < p.K && col < p.N ? LD(B, b0 + (k0 + bk) * p.b_rs + col * p.b_cs) : 0.0;
      }
      barrier();
#ifdef GK_SUBGROUPS
      if (quads) {
        vec4 ar[4];  // A[row0 + ly + 16i][k0 + 4q + m] in component m
        for (uint i = 0; i < 4; i++) ar[i] = As4[ly + 16 * i][q];
        QUAD_LANE(0u) QUAD_LANE(1u) QUAD_LANE(2u) QUAD_LANE(3u)
      } else
#endif
        for (uint k = 0; k < KT; k++) {
          for (uint i = 0; i < 4; i++) a[i] = A_AT(k, ly + 16 * i);
          MULTIPLY_ADD(k, a)
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
