// Packed, cache-blocked matrix products (see gemm.h).
//
// gk_gemm_run cuts C into tiles of MC x NC (per batch); a tile is computed by
// one task from start to end, block of KC columns of A after block, by the
// microkernel from packed panels (the KC x NR sliver of B of each call in
// L1, A's MC x KC block in L2), accumulating in an f32 (f64) tile buffer;
// then the task stores the tile once, adding the bias and C's old values,
// rounding to C's dtype. Tasks run one per workspace slot (as many as
// threads when the plan was made), pulling work from a shared counter.
//   Panels mode (A's MC x K rows and a K x NC block of B fit A_PANEL_BYTES
//   and B_GROUP_BYTES): B is packed once, for groups of column blocks (all
//   K, up to B_GROUP_BYTES, shared by the slots) by a parallel pass before
//   the group's tasks; a task is a run of tiles of one row block, for which
//   it packs A's rows once for all K. So A is read once per group (or per
//   run) instead of once per tile, and B once instead of once per slot.
//   Blocks mode (longer K): a task is one tile and packs A's and B's KC
//   blocks for it as it goes.
// Packing walks the rows of the slivers it writes; a transposed operand
// (the k index contiguous in memory) is read from mr (nr) source rows side
// by side, as long runs.
// The bf16 products of the avx512bf16 level (gemm.h) run the same driver
// with bf16 panels in pairs along k (block and sliver sizes rounded up to an
// even k) and their own packing and microkernel, into the same f32 tiles.
#include "gemm.h"

#include "../core/convert.h"

#if GK_X86
#include <immintrin.h>
#elif defined(__wasm_relaxed_simd__)
#include <wasm_simd128.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { MC = 192, KC = 256, NC = 512, OFFS = 256 };
// Largest A panel (mc x K) per slot and B group (shared), bytes: a longer K
// runs in blocks mode, more columns in more groups.
static const int64_t A_PANEL_BYTES = 8 << 20, B_GROUP_BYTES = 32 << 20;

// ---------------------------------------------------------------- indices

int64_t gk_index_offset(const gk_index *ix, int64_t i) {
  int64_t off = 0;
  for (int d = ix->n - 1; d >= 0; d--) {
    off += (i % ix->shape[d]) * ix->stride[d];
    i /= ix->shape[d];
  }
  return off;
}

void gk_index_offsets(const gk_index *ix, int64_t start, int64_t n, int64_t *out) {
  if (n <= 0) return;
  if (ix->n <= 1) {
    int64_t s = ix->n ? ix->stride[0] : 0;
    for (int64_t i = 0; i < n; i++) out[i] = (start + i) * s;
    return;
  }
  int64_t idx[GK_MAX_RANK], rem = start, off = 0;
  for (int d = ix->n - 1; d >= 0; d--) {
    idx[d] = rem % ix->shape[d];
    rem /= ix->shape[d];
    off += idx[d] * ix->stride[d];
  }
  int last = ix->n - 1;
  for (int64_t i = 0; i < n; i++) {
    out[i] = off;
    idx[last]++;
    off += ix->stride[last];
    for (int d = last; d > 0 && idx[d] == ix->shape[d]; d--) {
      off -= idx[d] * ix->stride[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += ix->stride[d - 1];
    }
  }
}

void gk_index_append(gk_index *ix, const gk_tensor *t, int d0, int d1) {
  for (int d = d0; d < d1; d++) {
    ix->shape[ix->n] = t->shape[d];
    ix->stride[ix->n] = t->strides[d];
    ix->n++;
  }
}

gk_mat gk_mat_of(const gk_tensor *t, int nb, int nr) {
  gk_mat m;
  memset(&m, 0, sizeof m);
  m.data = t->data;
  m.dtype = t->dtype;
  gk_index_append(&m.batch, t, 0, nb);
  gk_index_append(&m.row, t, nb, nb + nr);
  gk_index_append(&m.col, t, nb + nr, t->rank);
  return m;
}

gk_mat gk_mat_t(gk_mat m) {
  gk_index r = m.row;
  m.row = m.col;
  m.col = r;
  return m;
}

// ---------------------------------------------------------------- microkernels

// c (MR x NR) = (load ? c : 0) + sum_k a[k] (x) b[k]: one multiply-add chain
// per element in k order, in registers.
#define GK_UKERNEL(NAME, T, MR, NR, ATTR, MADD)                                                  \
  ATTR static void NAME(int64_t kc, const T *restrict a, const T *restrict b, T *restrict c,    \
                        int64_t ldc, int load) {                                                 \
    T acc[MR][NR];                                                                               \
    for (int i = 0; i < MR; i++)                                                                 \
      for (int j = 0; j < NR; j++) acc[i][j] = load ? c[i * ldc + j] : (T)0;                     \
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR)                                           \
      for (int i = 0; i < MR; i++)                                                               \
        for (int j = 0; j < NR; j++) acc[i][j] = MADD(a[i], b[j], acc[i][j]);                    \
    for (int i = 0; i < MR; i++)                                                                 \
      for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];                                   \
  }

#define MADD_PLAIN(a, b, c) ((a) * (b) + (c))
#if GK_X86
GK_UKERNEL(uk_f32_avx512, float, 12, 32, GK_TARGET_AVX512, fmaf)
GK_UKERNEL(uk_f64_avx512, double, 12, 16, GK_TARGET_AVX512, fma)
#endif
GK_UKERNEL(uk_f32_generic, float, 4, 8, , MADD_PLAIN)
GK_UKERNEL(uk_f64_generic, double, 4, 4, , MADD_PLAIN)

#if defined(__wasm_relaxed_simd__)
// The simd128-relaxed level's microkernels, on WebAssembly's relaxed
// multiply-add (clang's autovectorizer emits mul then add even with
// -ffp-contract=fast): c (4 x 8 f32, or 4 x 4 f64) = (load ? c : 0) +
// sum_k a[k] (x) b[k], each element the chain c = madd(a_k, b_k, c) in k
// order, in registers (two vectors of B per k, each row's a_k broadcast by a
// load-and-splat, one accumulator vector per row and vector of B; a scalar
// load then a splat ran 15% slower). The host picks fused or not
// once for every madd (V8 fuses where the processor has FMA), so results
// depend on the host but not on blocking or threads. Wider tiles (6 x 8,
// 8 x 8) ran at a fifth of this one's speed in V8 (a standalone loop).
typedef float f32x4 __attribute__((vector_size(16), aligned(4)));
typedef double f64x2 __attribute__((vector_size(16), aligned(8)));
#define GK_UKERNEL_RELAXED(NAME, T, V, LANES, NR, SPLAT, MADD)                                     \
  static void NAME(int64_t kc, const T *restrict a, const T *restrict b, T *restrict c, int64_t ldc, \
                   int load) {                                                                       \
    enum { MR = 4, NV = NR / LANES };                                                                \
    V acc[MR][NV];                                                                                   \
    _Pragma("unroll") for (int i = 0; i < MR; i++)                                                   \
      _Pragma("unroll") for (int v = 0; v < NV; v++)                                                 \
        acc[i][v] = load ? *(const V *)(c + i * ldc + v * LANES) : (V){0};                          \
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {                                             \
      V bv[NV];                                                                                      \
      _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = *(const V *)(b + v * LANES);           \
      _Pragma("unroll") for (int i = 0; i < MR; i++) {                                               \
        V ai = (V)SPLAT(a + i);                                                                      \
        _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] = MADD(ai, bv[v], acc[i][v]);      \
      }                                                                                              \
    }                                                                                                \
    _Pragma("unroll") for (int i = 0; i < MR; i++)                                                   \
      _Pragma("unroll") for (int v = 0; v < NV; v++) *(V *)(c + i * ldc + v * LANES) = acc[i][v];   \
  }
GK_UKERNEL_RELAXED(uk_f32_relaxed, float, f32x4, 4, 8, wasm_v128_load32_splat, __builtin_wasm_relaxed_madd_f32x4)
GK_UKERNEL_RELAXED(uk_f64_relaxed, double, f64x2, 2, 4, wasm_v128_load64_splat, __builtin_wasm_relaxed_madd_f64x2)
#endif

#if GK_X86
// c (12 x 32, f32) = (load ? c : 0) + sum over kp pairs of k of a (12 pairs
// per k pair) (x) b (32 pairs): per k pair, B's 32 columns in two registers
// of 16 pairs, each row's pair of A broadcast, one vdpbf16ps per row and
// register (24 accumulators).
enum { BF16_MR = 12, BF16_NR = 32 };
GK_TARGET_AVX512BF16 static void uk_bf16_avx512(int64_t kp, const uint16_t *restrict a, const uint16_t *restrict b,
                                                float *restrict c, int64_t ldc, int load) {
  __m512 acc[BF16_MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < BF16_MR; i++) {
    acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kp; k++, a += 2 * BF16_MR, b += 2 * BF16_NR) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 12
    for (int i = 0; i < BF16_MR; i++) {
      uint32_t pair;
      memcpy(&pair, a + 2 * i, sizeof pair);
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < BF16_MR; i++) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}
#endif

#if GK_X86
// The AVX2 level's microkernels, in intrinsics: gcc 12 leaves GK_UKERNEL
// scalar at this width (vfmadd231ss; linear at 2-4 GFLOP/s on one core).
// c (6 x 16 f32, or 6 x 8 f64) = (load ? c : 0) + sum_k a[k] (x) b[k]: per
// k, B's NR columns in two registers and each row's a_k broadcast, one fma
// per row and register (12 accumulators); each element is the chain
// c = fma(a_k, b_k, c) in k order, as in GK_UKERNEL.
#define GK_UKERNEL_AVX2(NAME, T, V, NR, LOADU, STOREU, ZERO, BROADCAST, FMADD)                             \
  GK_TARGET_AVX2 static void NAME(int64_t kc, const T *restrict a, const T *restrict b, T *restrict c,      \
                                  int64_t ldc, int load) {                                                   \
    enum { MR = 6, HALF = NR / 2 };                                                                          \
    V acc[MR][2];                                                                                            \
    _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                                   \
      acc[i][0] = load ? LOADU(c + i * ldc) : ZERO();                                                        \
      acc[i][1] = load ? LOADU(c + i * ldc + HALF) : ZERO();                                                 \
    }                                                                                                        \
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {                                                     \
      V b0 = LOADU(b), b1 = LOADU(b + HALF);                                                                 \
      _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                                 \
        V ai = BROADCAST(a + i);                                                                             \
        acc[i][0] = FMADD(ai, b0, acc[i][0]);                                                                \
        acc[i][1] = FMADD(ai, b1, acc[i][1]);                                                                \
      }                                                                                                      \
    }                                                                                                        \
    _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                                   \
      STOREU(c + i * ldc, acc[i][0]);                                                                        \
      STOREU(c + i * ldc + HALF, acc[i][1]);                                                                 \
    }                                                                                                        \
  }
GK_UKERNEL_AVX2(uk_f32_avx2, float, __m256, 16, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_setzero_ps,
                _mm256_broadcast_ss, _mm256_fmadd_ps)
GK_UKERNEL_AVX2(uk_f64_avx2, double, __m256d, 8, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_setzero_pd,
                _mm256_broadcast_sd, _mm256_fmadd_pd)
#endif

static gk_ukernels ukernels = {GK_ISA_SCALAR, 4, 8, 4, 4, 0, 0, uk_f32_generic, uk_f64_generic, NULL};
static pthread_once_t ukernels_once = PTHREAD_ONCE_INIT;

static void select_ukernels(void) {
#if defined(__wasm_relaxed_simd__)
  ukernels = (gk_ukernels){GK_ISA_SIMD128_RELAXED, 4, 8, 4, 4, 0, 0, uk_f32_relaxed, uk_f64_relaxed, NULL};
#elif GK_X86
  switch (gk_isa_level()) {
  case GK_ISA_AVX512BF16:
    ukernels = (gk_ukernels){GK_ISA_AVX512BF16, 12, 32, 12, 16, BF16_MR, BF16_NR, uk_f32_avx512, uk_f64_avx512,
                             uk_bf16_avx512};
    break;
  case GK_ISA_AVX512:
    ukernels = (gk_ukernels){GK_ISA_AVX512, 12, 32, 12, 16, 0, 0, uk_f32_avx512, uk_f64_avx512, NULL};
    break;
  case GK_ISA_AVX2:
    ukernels = (gk_ukernels){GK_ISA_AVX2, 6, 16, 6, 8, 0, 0, uk_f32_avx2, uk_f64_avx2, NULL};
    break;
  default: break;
  }
#endif
}

const gk_ukernels *gk_ukernels_get(void) {
  pthread_once(&ukernels_once, select_ukernels);
  return &ukernels;
}

// ---------------------------------------------------------------- packing

static int64_t round_up(int64_t a, int64_t b) { return gk_ceil_div(a, b) * b; }
static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// Whether consecutive indices of ix have consecutive offsets.
static bool contiguous(const gk_index *ix) {
  int64_t s = 1;
  for (int d = ix->n - 1; d >= 0; d--) {
    if (ix->shape[d] == 1) continue;
    if (ix->stride[d] != s) return false;
    s *= ix->shape[d];
  }
  return true;
}

// One run of copy_runs below: elements i < nin from the source's
// s + io[i] (s + io[0] + i when `unit`), converted by CVT.
#define GK_COPY_RUN(SRC_T, CVT)                                                                    \
  do {                                                                                              \
    const SRC_T *s = (const SRC_T *)src + oo[o];                                                    \
    if (unit)                                                                                       \
      for (int64_t i = 0; i < nin; i++) d[i] = CVT(s[io[0] + i]);                                   \
    else                                                                                            \
      for (int64_t i = 0; i < nin; i++) d[i] = CVT(s[io[i]]);                                       \
  } while (0)

// The packing copy: nout runs of `width` elements, run o at dst + o width:
// element i < nin from src + oo[o] + io[i] (dtype dt, converted to T), the
// rest 0. A run is a row of a sliver (width mr or nr, at most 32), so when
// the source is not contiguous along it (`unit` false: a transposed
// operand) its elements come from nin source rows read side by side, which
// keeps that many streams in flight. Compiled per ISA level (f16 through
// F16C on AVX2 and up).
#define GK_DEFINE_COPY_RUNS(T, S)                                                                   \
  GK_INLINE void copy_runs_##S##_body(gk_dtype dt, const char *src, const int64_t *oo, int64_t nout, \
                                      const int64_t *io, int64_t nin, bool unit, T *dst, int64_t width) { \
    for (int64_t o = 0; o < nout; o++) {                                                            \
      T *d = dst + o * width;                                                                       \
      switch (dt) {                                                                                 \
      case GK_F32: GK_COPY_RUN(float, (T)); break;                                                  \
      case GK_F64: GK_COPY_RUN(double, (T)); break;                                                 \
      case GK_F16: GK_COPY_RUN(uint16_t, (T)gk_f16_to_f32_inline); break;                           \
      case GK_BF16: GK_COPY_RUN(uint16_t, (T)gk_bf16_to_f32_inline); break;                         \
      default: break;                                                                               \
      }                                                                                             \
      for (int64_t i = nin; i < width; i++) d[i] = 0;                                               \
    }                                                                                               \
  }                                                                                                 \
  GK_ISA_VARIANTS(copy_runs_##S,                                                                    \
                  (gk_dtype dt, const char *src, const int64_t *oo, int64_t nout, const int64_t *io, \
                   int64_t nin, bool unit, T *dst, int64_t width),                                  \
                  (dt, src, oo, nout, io, nin, unit, dst, width))

// A sliver row is a run: pack_a's runs go along A's rows (one per column k),
// pack_b's along B's columns (one per row k).
#define GK_DEFINE_PACK(T, S, MRF, NRF)                                                              \
  GK_DEFINE_COPY_RUNS(T, S)                                                                         \
  /* A's columns in blocks of blk (the last one shorter): block q0 at          \
     dst + q0 mp (mp: m rounded up to mr), its sliver s at s w mr (w: the      \
     block's width). A transposed A (not `unit`) is packed sliver by sliver    \
     over all kc columns, its mr rows read side by side as long runs; else    \
     OFFS columns at a time for every sliver (those columns of the m rows      \
     stay in cache meanwhile). */                                              \
  static void pack_a_blocks_##S(const gk_mat *a, int64_t b, int64_t i0, int64_t m, int64_t k0, int64_t kc, \
                                int64_t blk, T *dst) {                                              \
    const int mr = gk_ukernels_get()->MRF;                                                          \
    const char *base = a->data + gk_index_offset(&a->batch, b) * (int64_t)gk_dtype_size(a->dtype);  \
    bool unit = contiguous(&a->row);                                                                \
    int64_t roff[32], coff[OFFS], mp = round_up(m, mr), chunk = unit ? OFFS : kc;                   \
    for (int64_t c1 = 0; c1 < kc; c1 += chunk)                                                      \
      for (int64_t s = 0; s * mr < m; s++) {                                                        \
        int64_t rows = gk_min64(mr, m - s * mr), c2 = gk_min64(c1 + chunk, kc);                     \
        gk_index_offsets(&a->row, i0 + s * mr, rows, roff);                                         \
        for (int64_t c0 = c1, cols; c0 < c2; c0 += cols) {                                          \
          int64_t q0 = c0 / blk * blk, w = gk_min64(blk, kc - q0);                                  \
          cols = gk_min64(gk_min64(OFFS, q0 + w - c0), c2 - c0);                                    \
          gk_index_offsets(&a->col, k0 + c0, cols, coff);                                           \
          copy_runs_##S(a->dtype, base, coff, cols, roff, rows, unit, dst + q0 * mp + (s * w + c0 - q0) * mr, mr); \
        }                                                                                           \
      }                                                                                             \
  }                                                                                                 \
  void gk_pack_a_##S(const gk_mat *a, int64_t b, int64_t i0, int64_t m, int64_t k0, int64_t kc, T *dst) { \
    pack_a_blocks_##S(a, b, i0, m, k0, kc, kc > 0 ? kc : 1, dst);                                   \
  }                                                                                                 \
  void gk_pack_b_##S(const gk_mat *bm, int64_t b, int64_t k0, int64_t kc, int64_t j0, int64_t n, T *dst,  \
                     int64_t sliver_stride) {                                                       \
    const int nr = gk_ukernels_get()->NRF;                                                          \
    const char *base = bm->data + gk_index_offset(&bm->batch, b) * (int64_t)gk_dtype_size(bm->dtype); \
    bool unit = contiguous(&bm->col);                                                               \
    int64_t roff[OFFS], coff[32];                                                                   \
    for (int64_t s = 0; s * nr < n; s++) {                                                          \
      int64_t cols = gk_min64(nr, n - s * nr);                                                      \
      T *d = dst + s * sliver_stride;                                                               \
      gk_index_offsets(&bm->col, j0 + s * nr, cols, coff);                                          \
      for (int64_t r0 = 0; r0 < kc; r0 += OFFS) {                                                   \
        int64_t rows = gk_min64(OFFS, kc - r0);                                                     \
        gk_index_offsets(&bm->row, k0 + r0, rows, roff);                                            \
        copy_runs_##S(bm->dtype, base, roff, rows, coff, cols, unit, d + r0 * nr, nr);              \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  void gk_gemm_packed_##S(int64_t m, int64_t n, int64_t kc, const T *ap, const T *bp, int64_t sliver_stride, \
                          T *c, int64_t ldc, int load) {                                            \
    const gk_ukernels *uk = gk_ukernels_get();                                                      \
    const int mr = uk->MRF, nr = uk->NRF;                                                           \
    for (int64_t j = 0; j < n; j += nr)                                                             \
      for (int64_t i = 0; i < m; i += mr)                                                           \
        uk->S(kc, ap + i * kc, bp + (j / nr) * sliver_stride, c + i * ldc + j, ldc, load);          \
  }

GK_DEFINE_PACK(float, f32, mr32, nr32)
GK_DEFINE_PACK(double, f64, mr64, nr64)

// bf16 panels in pairs along k. pack_pairs writes nk rows along k of a
// sliver of `width` lanes: the element of lane w < nw and row k < nk from
// src + woff[w] + koff[k] goes to dst + ((k / 2) width + w) 2 + k % 2;
// lanes nw .. width - 1, and row nk when nk is odd, are zeros. kunit: the
// rows are contiguous in memory (koff[k] = koff[0] + k; a lane's pairs are
// read as 32-bit words); wunit: the lanes are (two rows interleaved).
typedef uint32_t bf16_pair __attribute__((may_alias));

GK_TARGET_AVX512 static void pack_pairs(const uint16_t *src, const int64_t *woff, int64_t nw, bool wunit,
                                        const int64_t *koff, int64_t nk, bool kunit, uint16_t *dst, int64_t width) {
  int64_t full = nk / 2, np = (nk + 1) / 2;
  bf16_pair *d32 = (bf16_pair *)dst;
  if (kunit) {
    for (int64_t w = 0; w < nw; w++) {
      const uint16_t *s = src + woff[w] + koff[0];
      for (int64_t p = 0; p < full; p++) {
        uint32_t v;
        memcpy(&v, s + 2 * p, sizeof v);
        d32[p * width + w] = v;
      }
      if (nk & 1) d32[full * width + w] = s[nk - 1];  // little-endian: the even k in the low half
    }
  } else {
    for (int64_t p = 0; p < np; p++) {
      uint16_t *d = dst + p * width * 2;
      bool hi = 2 * p + 1 < nk;
      if (wunit) {
        const uint16_t *r0 = src + woff[0] + koff[2 * p], *r1 = src + woff[0] + koff[hi ? 2 * p + 1 : 2 * p];
        for (int64_t w = 0; w < nw; w++) {
          d[2 * w] = r0[w];
          d[2 * w + 1] = hi ? r1[w] : 0;
        }
      } else
        for (int64_t w = 0; w < nw; w++) {
          d[2 * w] = src[woff[w] + koff[2 * p]];
          d[2 * w + 1] = hi ? src[woff[w] + koff[2 * p + 1]] : 0;
        }
    }
  }
  for (int64_t p = 0; p < np; p++)
    for (int64_t w = nw; w < width; w++) d32[p * width + w] = 0;
}

// As pack_a_blocks and gk_pack_b_f32 above, in pairs: block q0 of A's
// columns at dst + q0 mp, its sliver s at s w2 mr (w2: the block's width
// rounded up to even); B's sliver s at dst + s sliver_stride, rows k0 + k
// at (k / 2) nr 2.
static void pack_a_blocks_bf16(const gk_mat *a, int64_t b, int64_t i0, int64_t m, int64_t k0, int64_t kc,
                               int64_t blk, uint16_t *dst) {
  const int mr = gk_ukernels_get()->mr16;
  const uint16_t *base = (const uint16_t *)a->data + gk_index_offset(&a->batch, b);
  bool kunit = contiguous(&a->col), wunit = contiguous(&a->row);
  int64_t roff[32], coff[OFFS], mp = round_up(m, mr);
  for (int64_t s = 0; s * mr < m; s++) {
    int64_t rows = gk_min64(mr, m - s * mr);
    gk_index_offsets(&a->row, i0 + s * mr, rows, roff);
    for (int64_t c0 = 0, cols; c0 < kc; c0 += cols) {
      int64_t q0 = c0 / blk * blk, w = gk_min64(blk, kc - q0);
      cols = gk_min64(OFFS, q0 + w - c0);
      gk_index_offsets(&a->col, k0 + c0, cols, coff);
      pack_pairs(base, roff, rows, wunit, coff, cols, kunit, dst + q0 * mp + (s * round_up(w, 2) + c0 - q0) * mr, mr);
    }
  }
}

static void gk_pack_a_bf16(const gk_mat *a, int64_t b, int64_t i0, int64_t m, int64_t k0, int64_t kc,
                           uint16_t *dst) {
  pack_a_blocks_bf16(a, b, i0, m, k0, kc, kc > 0 ? kc : 1, dst);
}

static void gk_pack_b_bf16(const gk_mat *bm, int64_t b, int64_t k0, int64_t kc, int64_t j0, int64_t n,
                           uint16_t *dst, int64_t sliver_stride) {
  const int nr = gk_ukernels_get()->nr16;
  const uint16_t *base = (const uint16_t *)bm->data + gk_index_offset(&bm->batch, b);
  bool kunit = contiguous(&bm->row), wunit = contiguous(&bm->col);
  int64_t roff[OFFS], coff[32];
  for (int64_t s = 0; s * nr < n; s++) {
    int64_t cols = gk_min64(nr, n - s * nr);
    gk_index_offsets(&bm->col, j0 + s * nr, cols, coff);
    for (int64_t r0 = 0; r0 < kc; r0 += OFFS) {
      int64_t rows = gk_min64(OFFS, kc - r0);
      gk_index_offsets(&bm->row, k0 + r0, rows, roff);
      pack_pairs(base, coff, cols, wunit, roff, rows, kunit, dst + s * sliver_stride + r0 * nr, nr);
    }
  }
}

// c (m x n, f32) = (load ? c : 0) + A B over kc, from bf16 pair panels.
static void gk_gemm_packed_bf16(int64_t m, int64_t n, int64_t kc, const uint16_t *ap, const uint16_t *bp,
                                int64_t sliver_stride, float *c, int64_t ldc, int load) {
  const gk_ukernels *uk = gk_ukernels_get();
  const int mr = uk->mr16, nr = uk->nr16;
  int64_t kcp = round_up(kc, 2);
  for (int64_t j = 0; j < n; j += nr)
    for (int64_t i = 0; i < m; i += mr)
      uk->bf16(kcp / 2, ap + i * kcp, bp + (j / nr) * sliver_stride, c + i * ldc + j, ldc, load);
}

// ---------------------------------------------------------------- threaded driver

// The three kinds of product: f32 panels and tiles, f64 ones, and bf16
// pair panels with f32 tiles (avx512bf16 level, A and B bf16).
typedef enum gemm_kind { GEMM_F32, GEMM_F64, GEMM_BF16 } gemm_kind;

// How a product is cut: tiles of C of mc x nc (multiples of mr, nr), and
// workspace slots of slot_bytes (one per task running at once) after the
// shared B group of group_bytes (panels mode).
//   panels mode (mc x K and K x nc fit A_PANEL_BYTES and B_GROUP_BYTES): B
//     is packed for a group of column blocks (unit_bytes each: K x nc),
//     all K, by a parallel pass shared by the tasks that follow it; a task
//     is a run of tiles of one row block, for which it packs A's rows once
//     for all K (mc x K) and keeps them.
//   blocks mode (longer K): a task is one tile, for which it packs A's and
//     B's blocks (mc x KC, KC x nc) one KC block after another.
// A slot holds the tile accumulator (mc x nc) and A's panel or block (and
// B's block), each 64-byte aligned. Panels of bf16 pairs count K rounded up
// to even.
typedef struct tiling {
  bool panels;
  int64_t mc, nc, tiles_m, tiles_n, tiles;
  size_t es, acc_bytes, a_bytes, b_bytes, unit_bytes, group_bytes, slot_bytes;
} tiling;

static tiling tiling_of(gemm_kind kind, int64_t batch, int64_t m, int64_t n, int64_t k) {
  const gk_ukernels *uk = gk_ukernels_get();
  int64_t mr = kind == GEMM_F64 ? uk->mr64 : kind == GEMM_BF16 ? uk->mr16 : uk->mr32;
  int64_t nr = kind == GEMM_F64 ? uk->nr64 : kind == GEMM_BF16 ? uk->nr16 : uk->nr32;
  size_t acc_es = kind == GEMM_F64 ? sizeof(double) : sizeof(float);
  tiling t;
  t.es = kind == GEMM_BF16 ? sizeof(uint16_t) : acc_es;
  int64_t kk = round_up(k > 0 ? k : 1, kind == GEMM_BF16 ? 2 : 1);
  t.mc = gk_min64(MC, round_up(m > 0 ? m : 1, mr));
  t.nc = gk_min64(NC, round_up(n > 0 ? n : 1, nr));
  // Smaller tiles when there are too few to share among threads.
  for (;;) {
    int64_t tiles = batch * gk_ceil_div(m, t.mc) * gk_ceil_div(n, t.nc);
    if (tiles >= 16) break;
    if (t.nc >= 4 * nr) t.nc = round_up(t.nc / 2, nr);
    else if (t.mc >= 4 * mr) t.mc = round_up(t.mc / 2, mr);
    else break;
  }
  t.tiles_m = gk_ceil_div(m, t.mc);
  t.tiles_n = gk_ceil_div(n, t.nc);
  t.tiles = batch * t.tiles_m * t.tiles_n;
  t.unit_bytes = (size_t)(kk * t.nc) * t.es;
  t.panels = t.mc * kk * (int64_t)t.es <= A_PANEL_BYTES && (int64_t)t.unit_bytes <= B_GROUP_BYTES;
  t.acc_bytes = align64((size_t)(t.mc * t.nc) * acc_es);
  t.a_bytes = align64((size_t)(t.mc * (t.panels ? kk : gk_min64(KC, kk))) * t.es);
  t.b_bytes = t.panels ? 0 : align64((size_t)(gk_min64(KC, kk) * t.nc) * t.es);
  int64_t units = gk_min64(B_GROUP_BYTES / (int64_t)t.unit_bytes, t.tiles);
  t.group_bytes = t.panels ? align64((size_t)units * t.unit_bytes) : 0;
  t.slot_bytes = t.acc_bytes + t.a_bytes + t.b_bytes;
  return t;
}

static size_t workspace_of(gemm_kind kind, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0) return 0;  // gk_gemm_run does nothing (a dim of an empty product may be huge)
  tiling t = tiling_of(kind, batch, m, n, k);
  int64_t slots = gk_min64(gk_min64(t.tiles, gk_get_num_threads()), 64);
  return slots > 0 ? t.group_bytes + (size_t)slots * t.slot_bytes : 0;
}

// Enough for either path a non-f64 product may take (the plan's dtype does
// not say whether both operands will be bf16).
size_t gk_gemm_workspace(gk_dtype dtype, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (dtype == GK_F64) return workspace_of(GEMM_F64, batch, m, n, k);
  size_t f32 = workspace_of(GEMM_F32, batch, m, n, k);
  if (!gk_ukernels_get()->bf16) return f32;
  size_t bf16 = workspace_of(GEMM_BF16, batch, m, n, k);
  return f32 > bf16 ? f32 : bf16;
}

// A run of the product. In panels mode, the current group: column blocks
// [t0, t1) of B's batches [b0, b1) (all of B's batches' blocks when t0 = 0
// and t1 = tiles_n), packed at ws, batch bi - b0 at (bi - b0) gstride and
// in it KC block p0 at p0 gcols, sliver s of that block at s kc nr; its
// tasks take `per_task` column blocks of one row block of one batch of C.
typedef struct gemm_job {
  const gk_gemm *g;
  gemm_kind kind;
  tiling t;
  char *ws, *slots;
  bool shared;  // B has no batch dims: the group serves every batch of C
  int64_t b0, b1, t0, t1, gcols, gstride, per_task, runs, tasks;
  atomic_int_fast64_t next;
} gemm_job;

// A contiguous bf16 row of C from an f32 row of the tile: out = bf16(a (+
// bias) (+ out)), the sums in the order of the general path below.
GK_INLINE void store_row_bf16_body(const float *a, const float *bias, bool accumulate, uint16_t *out, int64_t n) {
  if (!bias && !accumulate)
    for (int64_t j = 0; j < n; j++) out[j] = gk_f32_to_bf16_inline(a[j]);
  else
    for (int64_t j = 0; j < n; j++) {
      float v = a[j];
      if (bias) v += bias[j];
      if (accumulate) v += gk_bf16_to_f32_inline(out[j]);
      out[j] = gk_f32_to_bf16_inline(v);
    }
}
GK_ISA_VARIANTS(store_row_bf16, (const float *a, const float *bias, bool accumulate, uint16_t *out, int64_t n),
                (a, bias, accumulate, out, n))

// Store rows [i0, i0 + m) x columns [j0, j0 + n) of batch b of c from acc
// (row stride ldc), adding bias (per column) and c's old values.
#define GK_DEFINE_STORE(T, S)                                                                       \
  static void store_tile_##S(const gk_gemm *g, int64_t b, int64_t i0, int64_t m, int64_t j0, int64_t n, \
                             const T *acc, int64_t ldc) {                                           \
    const gk_mat *c = &g->c;                                                                        \
    size_t es = gk_dtype_size(c->dtype);                                                            \
    char *base = c->data + gk_index_offset(&c->batch, b) * (int64_t)es;                             \
    int64_t coff[NC];                                                                               \
    T bv[NC];                                                                                       \
    gk_index_offsets(&c->col, j0, n, coff);                                                         \
    if (g->bias) gk_load_##S(g->bias, j0, n, bv);                                                   \
    bool unit = c->col.n == 1 && c->col.stride[0] == 1;                                             \
    bool plain = unit && c->dtype == (sizeof(T) == 4 ? GK_F32 : GK_F64);                            \
    bool plain_bf16 = unit && sizeof(T) == 4 && c->dtype == GK_BF16;                                \
    for (int64_t i = 0; i < m; i++) {                                                               \
      char *row = base + gk_index_offset(&c->row, i0 + i) * (int64_t)es;                            \
      const T *a = acc + i * ldc;                                                                   \
      if (plain_bf16) { /* a contiguous bf16 row: converted in vector registers */                  \
        store_row_bf16((const float *)a, g->bias ? (const float *)bv : NULL, g->accumulate, (uint16_t *)row + j0, n); \
        continue;                                                                                   \
      }                                                                                             \
      if (plain) { /* a contiguous row of C's own dtype */                                          \
        T *out = (T *)row + j0;                                                                     \
        if (g->bias && g->accumulate)                                                               \
          for (int64_t j = 0; j < n; j++) out[j] = (a[j] + bv[j]) + out[j];                         \
        else if (g->bias)                                                                           \
          for (int64_t j = 0; j < n; j++) out[j] = a[j] + bv[j];                                    \
        else if (g->accumulate)                                                                     \
          for (int64_t j = 0; j < n; j++) out[j] = a[j] + out[j];                                   \
        else                                                                                        \
          for (int64_t j = 0; j < n; j++) out[j] = a[j];                                            \
        continue;                                                                                   \
      }                                                                                             \
      for (int64_t j = 0; j < n; j++) {                                                             \
        T v = a[j];                                                                                 \
        if (g->bias) v += bv[j];                                                                    \
        char *p = row + coff[j] * (int64_t)es;                                                      \
        switch (c->dtype) {                                                                         \
        case GK_F32:                                                                                \
          if (g->accumulate) v += *(float *)p;                                                      \
          *(float *)p = (float)v;                                                                   \
          break;                                                                                    \
        case GK_F64:                                                                                \
          if (g->accumulate) v += (T) * (double *)p;                                                \
          *(double *)p = (double)v;                                                                 \
          break;                                                                                    \
        case GK_F16:                                                                                \
          if (g->accumulate) v += gk_f16_to_f32_inline(*(uint16_t *)p);                             \
          *(uint16_t *)p = gk_f32_to_f16_inline((float)v);                                          \
          break;                                                                                    \
        case GK_BF16:                                                                               \
          if (g->accumulate) v += gk_bf16_to_f32_inline(*(uint16_t *)p);                            \
          *(uint16_t *)p = gk_f32_to_bf16_inline((float)v);                                         \
          break;                                                                                    \
        default: break;                                                                             \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }
// Panels mode: pack_group packs sliver `task` of the current group (slivers
// counted over its batches, then its columns) for all K; panel_slot runs the
// group's tasks (batch c of C, run r of column blocks, row block ti), each
// packing A's rows for all K once. Blocks mode: block_slot runs tiles.
// Panels of P, tiles of T stored by store_tile_##ST; a sliver's KC block
// counts kc rounded up to KR (2 for bf16 pairs).
#define GK_DEFINE_TASKS(P, T, S, ST, MRF, NRF, KR)                                                 \
  static void pack_group_##S(gemm_job *j, int64_t task) {                                          \
    const gk_gemm *g = j->g;                                                                        \
    int64_t nr = gk_ukernels_get()->NRF, per_batch = j->gcols / nr;                                 \
    int64_t bi = task / per_batch, s = task % per_batch, j0 = j->t0 * j->t.nc + s * nr;             \
    P *grp = (P *)j->ws + bi * j->gstride;                                                          \
    for (int64_t p0 = 0; p0 < g->k; p0 += KC) {                                                     \
      int64_t kc = gk_min64(KC, g->k - p0), kcp = round_up(kc, KR);                                 \
      gk_pack_b_##S(&g->b, j->b0 + bi, p0, kc, j0, gk_min64(nr, g->n - j0), grp + p0 * j->gcols + s * kcp * nr, \
                    kcp * nr);                                                                      \
    }                                                                                               \
  }                                                                                                 \
  static void panel_slot_##S(gemm_job *j, int64_t slot) {                                          \
    const gk_gemm *g = j->g;                                                                        \
    const tiling *t = &j->t;                                                                        \
    int64_t mr = gk_ukernels_get()->MRF, nr = gk_ukernels_get()->NRF, per_c = j->runs * t->tiles_m; \
    char *mem = j->slots + (size_t)slot * t->slot_bytes;                                            \
    T *acc = (T *)mem;                                                                              \
    P *ap = (P *)(mem + t->acc_bytes);                                                              \
    for (;;) {                                                                                      \
      int64_t task = atomic_fetch_add(&j->next, 1);                                                 \
      if (task >= j->tasks) break;                                                                  \
      int64_t c = task / per_c, r = task % per_c / t->tiles_m, ti = task % t->tiles_m;              \
      int64_t b = j->shared ? c : j->b0 + c;                                                        \
      const P *grp = (const P *)j->ws + (j->shared ? 0 : c) * j->gstride;                           \
      int64_t i0 = ti * t->mc, m = gk_min64(t->mc, g->m - i0), mp = round_up(m, mr);                \
      pack_a_blocks_##S(&g->a, g->a.batch.n ? b : 0, i0, m, 0, g->k, KC, ap);                       \
      int64_t tj1 = gk_min64(j->t0 + (r + 1) * j->per_task, j->t1);                                 \
      for (int64_t tj = j->t0 + r * j->per_task; tj < tj1; tj++) {                                  \
        int64_t j0 = tj * t->nc, n = gk_min64(t->nc, g->n - j0), s0 = (j0 - j->t0 * t->nc) / nr;    \
        if (g->k == 0) memset(acc, 0, (size_t)(mp * t->nc) * sizeof(T));                            \
        for (int64_t p0 = 0; p0 < g->k; p0 += KC) {                                                 \
          int64_t kc = gk_min64(KC, g->k - p0), kcp = round_up(kc, KR);                             \
          gk_gemm_packed_##S(mp, round_up(n, nr), kc, ap + p0 * mp, grp + p0 * j->gcols + s0 * kcp * nr, kcp * nr, \
                             acc, t->nc, p0 > 0);                                                   \
        }                                                                                           \
        store_tile_##ST(g, b, i0, m, j0, n, acc, t->nc);                                            \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void block_slot_##S(gemm_job *j, int64_t slot) {                                          \
    const gk_gemm *g = j->g;                                                                        \
    const tiling *t = &j->t;                                                                        \
    int64_t mr = gk_ukernels_get()->MRF, nr = gk_ukernels_get()->NRF;                               \
    char *mem = j->slots + (size_t)slot * t->slot_bytes;                                            \
    T *acc = (T *)mem;                                                                              \
    P *ap = (P *)(mem + t->acc_bytes), *bp = (P *)(mem + t->acc_bytes + t->a_bytes);                \
    for (;;) {                                                                                      \
      int64_t tile = atomic_fetch_add(&j->next, 1);                                                 \
      if (tile >= t->tiles) break;                                                                  \
      int64_t ti = tile % t->tiles_m, rest = tile / t->tiles_m;                                     \
      int64_t tj = rest % t->tiles_n, b = rest / t->tiles_n;                                        \
      int64_t i0 = ti * t->mc, m = gk_min64(t->mc, g->m - i0);                                      \
      int64_t j0 = tj * t->nc, n = gk_min64(t->nc, g->n - j0);                                      \
      for (int64_t p0 = 0; p0 < g->k; p0 += KC) {                                                   \
        int64_t kc = gk_min64(KC, g->k - p0), kcp = round_up(kc, KR);                               \
        gk_pack_a_##S(&g->a, g->a.batch.n ? b : 0, i0, m, p0, kc, ap);                              \
        gk_pack_b_##S(&g->b, g->b.batch.n ? b : 0, p0, kc, j0, n, bp, kcp * nr);                    \
        gk_gemm_packed_##S(round_up(m, mr), round_up(n, nr), kc, ap, bp, kcp * nr, acc, t->nc, p0 > 0); \
      }                                                                                             \
      store_tile_##ST(g, b, i0, m, j0, n, acc, t->nc);                                              \
    }                                                                                               \
  }

GK_DEFINE_STORE(float, f32)
GK_DEFINE_STORE(double, f64)
GK_DEFINE_TASKS(float, float, f32, f32, mr32, nr32, 1)
GK_DEFINE_TASKS(double, double, f64, f64, mr64, nr64, 1)
GK_DEFINE_TASKS(uint16_t, float, bf16, f32, mr16, nr16, 2)

static void group_task(void *ctx, int64_t task) {
  gemm_job *j = ctx;
  switch (j->kind) {
  case GEMM_F64: pack_group_f64(j, task); break;
  case GEMM_BF16: pack_group_bf16(j, task); break;
  default: pack_group_f32(j, task); break;
  }
}

static void panel_task(void *ctx, int64_t slot) {
  gemm_job *j = ctx;
  switch (j->kind) {
  case GEMM_F64: panel_slot_f64(j, slot); break;
  case GEMM_BF16: panel_slot_bf16(j, slot); break;
  default: panel_slot_f32(j, slot); break;
  }
}

static void block_task(void *ctx, int64_t slot) {
  gemm_job *j = ctx;
  switch (j->kind) {
  case GEMM_F64: block_slot_f64(j, slot); break;
  case GEMM_BF16: block_slot_bf16(j, slot); break;
  default: block_slot_f32(j, slot); break;
  }
}

void gk_gemm_run(const gk_gemm *g, void *ws, size_t ws_bytes) {
  if (g->batch == 0 || g->m == 0 || g->n == 0) return;
  gemm_job j;
  memset(&j, 0, sizeof j);
  j.g = g;
  j.kind = g->c.dtype == GK_F64                                                    ? GEMM_F64
           : g->a.dtype == GK_BF16 && g->b.dtype == GK_BF16 && gk_ukernels_get()->bf16 ? GEMM_BF16
                                                                                   : GEMM_F32;
  j.t = tiling_of(j.kind, g->batch, g->m, g->n, g->k);
  const tiling *t = &j.t;
  j.ws = ws;
  j.slots = (char *)ws + t->group_bytes;
  int64_t slots = (int64_t)((ws_bytes - t->group_bytes) / t->slot_bytes);
  if (!t->panels) {
    atomic_init(&j.next, 0);
    gk_parallel_for(gk_min64(slots, t->tiles), block_task, &j);
    return;
  }
  // Groups: all column blocks of as many of B's batches as fit, else runs
  // of column blocks of one batch.
  const gk_ukernels *uk = gk_ukernels_get();
  int64_t nr = j.kind == GEMM_F64 ? uk->nr64 : j.kind == GEMM_BF16 ? uk->nr16 : uk->nr32;
  int64_t units = (int64_t)(t->group_bytes / t->unit_bytes), nb = g->b.batch.n ? g->batch : 1;
  int64_t batches = units >= t->tiles_n ? units / t->tiles_n : 1;
  int64_t blocks = gk_ceil_div(t->tiles_n, gk_ceil_div(t->tiles_n, units));
  j.shared = g->b.batch.n == 0;
  atomic_init(&j.next, 0);
  for (j.b0 = 0; j.b0 < nb; j.b0 += batches)
    for (j.t0 = 0; j.t0 < t->tiles_n; j.t0 += blocks) {
      j.b1 = gk_min64(j.b0 + batches, nb);
      j.t1 = gk_min64(j.t0 + blocks, t->tiles_n);
      j.gcols = round_up(gk_min64(j.t1 * t->nc, g->n) - j.t0 * t->nc, nr);
      j.gstride = round_up(g->k, j.kind == GEMM_BF16 ? 2 : 1) * j.gcols;
      gk_parallel_for((j.b1 - j.b0) * (j.gcols / nr), group_task, &j);
      // Runs of column blocks as long as leaves some 8 tasks per slot.
      int64_t served = j.shared ? g->batch : j.b1 - j.b0, nblocks = j.t1 - j.t0;
      j.per_task = gk_ceil_div(nblocks, gk_min64(nblocks, gk_ceil_div(8 * slots, served * t->tiles_m)));
      j.runs = gk_ceil_div(nblocks, j.per_task);
      j.tasks = served * j.runs * t->tiles_m;
      atomic_store(&j.next, 0);
      gk_parallel_for(gk_min64(slots, j.tasks), panel_task, &j);
    }
}
