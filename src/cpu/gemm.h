// Packed, cache-blocked matrix products for the CPU kernels (linear, matmul,
// attention), in the BLIS style: operands are packed into panels (f16/bf16
// converted to f32 on the way), and a register-tiled MR x NR microkernel,
// plain C that the compiler vectorizes, runs over them. The microkernel and
// the packing copy are compiled for AVX-512, AVX2+FMA(+F16C) and the
// baseline ISA and picked once from cpuid, or the level GK_ISA forces
// (core/isa.h).
//
// Every element of C is one chain c = fma(a_k, b_k, c) over k = 0 .. K-1 in
// order (mul then add on the baseline ISA; WebAssembly's relaxed madd at the
// simd128-relaxed level, fused or not as the host decides, the same for every
// madd), whatever the blocking, tile sizes or thread count, so results are
// bit-identical for any number of threads.
//
// At the avx512bf16 level a product whose A and B are both bf16 runs instead
// on the bf16 dot-product instruction (vdpbf16ps): the panels keep bf16,
// packed in pairs along k (k = 2p and 2p + 1 side by side, an odd K padded
// with a zero), and each element of C is the f32 chain
// c = (c + a_{2p+1} b_{2p+1}) + a_{2p} b_{2p} over p = 0, 1, ... in order,
// each product exact in f32 and each sum rounded to nearest even (the
// instruction treats bf16 subnormal inputs and f32 subnormal results as
// zero), again the same for any blocking or thread count. The tile is kept
// in f32 and rounded once, when stored.
#ifndef GK_GEMM_H
#define GK_GEMM_H

#include "../core/internal.h"

// A multi-dim index: index i unravels row-major over shape; offset(i) is
// sum idx_d * stride_d (in elements). n = 0 is the single index 0.
typedef struct gk_index {
  int n;
  int64_t shape[GK_MAX_RANK], stride[GK_MAX_RANK];
} gk_index;

int64_t gk_index_offset(const gk_index *ix, int64_t i);
// Offsets of indices [start, start + n) into out.
void gk_index_offsets(const gk_index *ix, int64_t start, int64_t n, int64_t *out);
// Append dims [d0, d1) of t to ix.
void gk_index_append(gk_index *ix, const gk_tensor *t, int d0, int d1);

// A batch of matrices in a tensor's memory: element (i, j) of batch b is at
// data + (offset(batch, b) + offset(row, i) + offset(col, j)) * element size.
// A matrix with batch.n = 0 is shared by every batch.
typedef struct gk_mat {
  char *data;
  gk_dtype dtype;
  gk_index batch, row, col;
} gk_mat;

// t with dims [0, nb) as batch, [nb, nb + nr) as rows, the rest as columns.
gk_mat gk_mat_of(const gk_tensor *t, int nb, int nr);
// The transposed view (rows and columns swapped).
gk_mat gk_mat_t(gk_mat m);

// The microkernels of the selected ISA: c (MR x NR, row stride ldc) = (load ?
// c : 0) + a b, where a is a packed sliver of kc x MR and b one of kc x NR.
typedef void (*gk_ukernel_f32)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int load);
typedef void (*gk_ukernel_f64)(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int load);
// The bf16 one: kp pairs of k; a holds kp x MR pairs, b kp x NR pairs.
typedef void (*gk_ukernel_bf16)(int64_t kp, const uint16_t *a, const uint16_t *b, float *c, int64_t ldc, int load);
typedef struct gk_ukernels {
  gk_isa level;
  int mr32, nr32, mr64, nr64, mr16, nr16;
  gk_ukernel_f32 f32;
  gk_ukernel_f64 f64;
  gk_ukernel_bf16 bf16;  // NULL below the avx512bf16 level
} gk_ukernels;
const gk_ukernels *gk_ukernels_get(void);

// Packing, for T = float (S = f32) and double (S = f64):
//  pack_a: rows [i0, i0 + m) x columns [k0, k0 + kc) of batch b of `a` into
//    ceil(m / mr) slivers of kc x mr (sliver s at dst + s kc mr), zero padded.
//  pack_b: rows [k0, k0 + kc) x columns [j0, j0 + n) of batch b of `b` into
//    ceil(n / nr) slivers (sliver s at dst + s sliver_stride, row k at k nr),
//    zero padded.
//  gemm_packed: c (m x n, row stride ldc; m, n multiples of mr, nr) =
//    (load ? c : 0) + A B over kc, from panels made by pack_a and pack_b.
#define GK_DECLARE_GEMM(T, S)                                                                        \
  void gk_pack_a_##S(const gk_mat *a, int64_t b, int64_t i0, int64_t m, int64_t k0, int64_t kc, T *dst); \
  void gk_pack_b_##S(const gk_mat *bm, int64_t b, int64_t k0, int64_t kc, int64_t j0, int64_t n, T *dst,  \
                     int64_t sliver_stride);                                                          \
  void gk_gemm_packed_##S(int64_t m, int64_t n, int64_t kc, const T *ap, const T *bp, int64_t sliver_stride, \
                          T *c, int64_t ldc, int load);
GK_DECLARE_GEMM(float, f32)
GK_DECLARE_GEMM(double, f64)
#undef GK_DECLARE_GEMM

// A threaded product C = A B (+ bias) (+ C's old values), batch by batch:
// a (M x K), b (K x N), c (M x N), bias (N) or NULL. Computed in f32 (f64
// when c is f64) with any dtypes and strides; c must not overlap a or b.
// With a and b both bf16 (and c not f64) at the avx512bf16 level, through
// the bf16 dot-product instruction (above).
typedef struct gk_gemm {
  gk_mat a, b, c;
  int64_t batch, m, n, k;
  const gk_tensor *bias;
  bool accumulate;
} gk_gemm;

// Workspace for a product of these sizes, planned for the current thread count.
size_t gk_gemm_workspace(gk_dtype dtype, int64_t batch, int64_t m, int64_t n, int64_t k);
// Run with the workspace (any size >= gk_gemm_workspace for these sizes).
void gk_gemm_run(const gk_gemm *g, void *ws, size_t ws_bytes);

#endif
