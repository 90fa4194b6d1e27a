// Threaded CPU kernels for attention (math as in src/ref/attention.c),
// flash-attention style: scores exist only as tiles of (FR or BR) queries x bc keys,
// every product runs on packed panels through the gemm microkernel (gemm.h),
// f32 math (f64 for f64), exp by gk_exp_nonpos_ftz_f32 (libm in f64).
//
// Forward: one work item = (b, h, block of QBF = 8 FR queries), in the
// transposed form S^T = K Q^T so that the online softmax runs along
// contiguous query vectors and P^T is already the packed B panel of
// O^T += V^T P^T. Q^T is packed once per item; for each key tile (up to the
// block's last query when causal) K and V^T are packed once for the block's
// GROUP query tiles; each query tile does S^T, the online softmax (column
// max m, column sum l, rescaling O^T's columns by exp(m_old - m_new)) and
// O^T += V^T P^T. At the end o = O^T's column / l and lse = m + log l.
// Backward, three passes: D_i = dO_i . o_i (rows, into the workspace); work
// items (b, kv head, block of KB = GROUP bc keys) accumulate dK and dV over
// every query head of the kv head and every query tile, in order: S = Q K^T,
// dP = dO V^T, P = exp(scale S - lse), dS = scale P (dP - D); dV += P^T dO,
// dK += dS^T Q; then items (b, h, block of QBF queries) accumulate dQ^T over
// the key tiles in order, in the forward's transposed form: S^T = K Q^T,
// dP^T = V dO^T, dS^T (the packed B panel of) dQ^T += K^T dS^T. Each output
// element is thus summed by one task in a fixed order: bit-identical for any
// thread count.
//
// Tasks are one per workspace slot (threads when the plan was made), pulling
// work items from a counter, heaviest (for causal) first. The workspace is
// D (B H T) plus the slots, each a few tiles of (BR or bc) x Dh: linear in T.
#include "../ops/transformer.h"
#include "../core/act_math.h"

#include <string.h>
#include "gemm.h"

#include <stdatomic.h>

enum { BR = 48, GROUP = 4, FR = 64, QBF = 8 * FR };

// The elementwise steps on a tile of scores, compiled per ISA (like the
// microkernels) so that their loops vectorize.
//
// Forward (online softmax), on a tile of S^T: keys c < kn as rows, the FR
// queries of a tile as columns, stored as FR / nr packed B slivers of
// knm x nr (sliver stride knm nr). Query q sees key c when q < rn and, for
// causal, c <= diag + q (diag = first query - first key). The tile is scaled,
// its column max taken, m and l updated (the output columns ot, Dm x FR,
// rescaled by exp(m_old - m_new)), and overwritten with p = exp(s - m), 0
// where masked: it is then P^T, the B panel of O^T += V^T P^T.
//
// Backward, on a tile of S (rows r < rn of BR queries, row stride bc, keys
// c < kn, row r seeing keys c < min(kn, diag + r + 1) when causal):
// s = p = exp(scale s - lse), dp = ds = scale p (dp - D), 0 where masked;
// and the same on tiles of S^T and dP^T laid out as in the forward
// (grad_tile_t): dpt = dS^T, the B panel of dQ^T += K^T dS^T.
typedef void (*fwd_tile_f32_fn)(float *st, int64_t knm, int64_t kn, int64_t nr, int64_t rn, int64_t diag, bool causal,
                                float scale, float *m, float *l, float *ot, int64_t Dm);
typedef void (*fwd_tile_f64_fn)(double *st, int64_t knm, int64_t kn, int64_t nr, int64_t rn, int64_t diag,
                                bool causal, double scale, double *m, double *l, double *ot, int64_t Dm);
typedef void (*grad_tile_t_f32_fn)(float *st, float *dpt, int64_t knm, int64_t kn, int64_t nr, int64_t rn,
                                   int64_t diag, bool causal, float scale, const float *lse, const float *dd);
typedef void (*grad_tile_t_f64_fn)(double *st, double *dpt, int64_t knm, int64_t kn, int64_t nr, int64_t rn,
                                   int64_t diag, bool causal, double scale, const double *lse, const double *dd);
typedef void (*grad_tile_f32_fn)(float *s, float *dp, int64_t bc, int64_t rn, int64_t kn, int64_t diag, bool causal,
                                 float scale, const float *lse, const float *dd);
typedef void (*grad_tile_f64_fn)(double *s, double *dp, int64_t bc, int64_t rn, int64_t kn, int64_t diag,
                                 bool causal, double scale, const double *lse, const double *dd);

static inline int64_t row_limit(int64_t kn, int64_t diag, bool causal, int64_t r) {
  int64_t lim = causal ? gk_min64(kn, diag + r + 1) : kn;
  return lim < 0 ? 0 : lim;
}

#define GK_DEFINE_TILES(T, S, SUFFIX, ATTR, EXP)                                                    \
  ATTR static void fwd_tile_##S##_##SUFFIX(T *st, int64_t knm, int64_t kn, int64_t nr, int64_t rn, int64_t diag, \
                                            bool causal, T scale, T *m, T *l, T *ot, int64_t Dm) {  \
    T cmax[FR], mn[FR], alpha[FR], sum[FR];                                                         \
    for (int64_t q = 0; q < FR; q++) cmax[q] = -(T)INFINITY, sum[q] = 0;                            \
    for (int64_t s0 = 0; s0 < FR; s0 += nr) {                                                       \
      T *blk = st + (s0 / nr) * knm * nr;                                                           \
      for (int64_t c = 0; c < kn; c++) {                                                            \
        T *row = blk + c * nr, *cm = cmax + s0;                                                     \
        for (int64_t i = 0; i < nr; i++) {                                                          \
          int64_t q = s0 + i;                                                                       \
          bool ok = q < rn && (!causal || c <= diag + q);                                           \
          /* blends, not ?:, so the loop vectorises */                                              \
          T v = gk_select_##S(GK_MASK_##S(ok), row[i] * scale, -(T)INFINITY);                       \
          row[i] = v;                                                                               \
          cm[i] = gk_select_##S(GK_MASK_##S(v > cm[i]), v, cm[i]);                                  \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
    for (int64_t q = 0; q < FR; q++) {                                                              \
      mn[q] = cmax[q] > m[q] ? cmax[q] : m[q];                                                      \
      alpha[q] = mn[q] == -(T)INFINITY ? (T)1 : EXP(m[q] - mn[q]);                                  \
      if (mn[q] == -(T)INFINITY) mn[q] = 0; /* no key yet: exp(-inf - 0) = 0 below */               \
    }                                                                                               \
    for (int64_t s0 = 0; s0 < FR; s0 += nr) {                                                       \
      T *blk = st + (s0 / nr) * knm * nr;                                                           \
      for (int64_t c = 0; c < kn; c++) {                                                            \
        T *row = blk + c * nr, *mq = mn + s0, *sq = sum + s0;                                       \
        for (int64_t i = 0; i < nr; i++) {                                                          \
          row[i] = EXP(row[i] - mq[i]);                                                             \
          sq[i] += row[i];                                                                          \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
    for (int64_t q = 0; q < FR; q++) {                                                              \
      l[q] = l[q] * alpha[q] + sum[q];                                                              \
      if (cmax[q] > m[q]) m[q] = cmax[q];                                                           \
    }                                                                                               \
    for (int64_t d = 0; d < Dm; d++)                                                                \
      for (int64_t q = 0; q < FR; q++) ot[d * FR + q] *= alpha[q];                                  \
  }                                                                                                 \
  ATTR static void grad_tile_t_##S##_##SUFFIX(T *st, T *dpt, int64_t knm, int64_t kn, int64_t nr, int64_t rn, \
                                               int64_t diag, bool causal, T scale, const T *lse, const T *dd) { \
    for (int64_t s0 = 0; s0 < FR; s0 += nr) {                                                       \
      T *sb = st + (s0 / nr) * knm * nr, *db = dpt + (s0 / nr) * knm * nr;                          \
      const T *lq = lse + s0, *dq = dd + s0;                                                        \
      for (int64_t c = 0; c < kn; c++) {                                                            \
        T *sr = sb + c * nr, *dr = db + c * nr;                                                     \
        for (int64_t i = 0; i < nr; i++) {                                                          \
          bool ok = s0 + i < rn && (!causal || c <= diag + s0 + i);                                 \
          T pv = EXP(sr[i] * scale - lq[i]);                                                        \
          dr[i] = gk_select_##S(GK_MASK_##S(ok), scale * pv * (dr[i] - dq[i]), 0);                  \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  ATTR static void grad_tile_##S##_##SUFFIX(T *s, T *dp, int64_t bc, int64_t rn, int64_t kn, int64_t diag, \
                                             bool causal, T scale, const T *lse, const T *dd) {     \
    for (int64_t r = 0; r < rn; r++) {                                                              \
      T *srow = s + r * bc, *dprow = dp + r * bc, lr = lse[r], dr = dd[r];                          \
      int64_t lim = row_limit(kn, diag, causal, r);                                                 \
      for (int64_t c = 0; c < lim; c++) {                                                           \
        T pv = EXP(srow[c] * scale - lr);                                                           \
        srow[c] = pv;                                                                               \
        dprow[c] = scale * pv * (dprow[c] - dr);                                                    \
      }                                                                                             \
      for (int64_t c = lim; c < kn; c++) srow[c] = dprow[c] = 0;                                    \
    }                                                                                               \
  }

static inline double exp_f64(double x) { return exp(x); }
// Every exponent is a score less its row's running max or log-sum-exp (<= 0
// but for rounding; masked entries are blended away): gk_exp_nonpos_ftz_f32,
// whose results below FLT_MIN are 0 (weights no f32 sum up to 1 keeps).
GK_DEFINE_TILES(float, f32, generic, , gk_exp_nonpos_ftz_f32)
GK_DEFINE_TILES(double, f64, generic, , exp_f64)
#if GK_X86
GK_DEFINE_TILES(float, f32, avx2, GK_TARGET_AVX2, gk_exp_nonpos_ftz_f32)
GK_DEFINE_TILES(float, f32, avx512, GK_TARGET_AVX512, gk_exp_nonpos_ftz_f32)
#endif

typedef struct attn_job {
  int64_t B, H, Hkv, G, L, Dh, Dp, Dm;  // L: T; Dh rounded up to the microkernel's NR (Dp), MR (Dm)
  int64_t mr, nr, bc, kb;           // bc: keys per tile (a multiple of MR and NR), kb = GROUP bc
  double scale;
  bool causal, f64;
  gk_mat q, qt, k, kt, v, vt, dout, doutt; // (B H or B Hkv) batches of (T x Dh) matrices; *t transposed
  const gk_tensor *y, *dy, *lse, *dq, *dk, *dv;
  fwd_tile_f32_fn fwd_tile_f32;
  fwd_tile_f64_fn fwd_tile_f64;
  grad_tile_f32_fn grad_tile_f32;
  grad_tile_f64_fn grad_tile_f64;
  grad_tile_t_f32_fn grad_tile_t_f32;
  grad_tile_t_f64_fn grad_tile_t_f64;
  char *ws;
  void *d;                          // backward: D_i, (B H T)
  size_t slot_bytes;
  int64_t items;
  atomic_int_fast64_t next;
} attn_job;

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }
static int64_t round_up(int64_t a, int64_t b) { return gk_ceil_div(a, b) * b; }

static attn_job job_of(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  const gk_ukernels *uk = gk_ukernels_get();
  bool f64 = d->dtype == GK_F64;
  attn_job j;
  memset(&j, 0, sizeof j);
  j.B = d->shape[0];
  j.H = d->shape[1];
  j.L = d->shape[2];
  j.Dh = d->shape[3];
  j.Hkv = d->attn.kv_heads;
  j.G = j.H / j.Hkv;
  j.mr = f64 ? uk->mr64 : uk->mr32;
  j.nr = f64 ? uk->nr64 : uk->nr32;
  j.Dp = round_up(j.Dh, j.nr);
  j.Dm = round_up(j.Dh, j.mr);
  int64_t lcm = j.mr / gcd64(j.mr, j.nr) * j.nr;
  j.bc = lcm * gk_ceil_div(64, lcm);
  j.kb = GROUP * j.bc;
  j.scale = d->attn.scale;
  j.causal = d->attn.causal != 0;
  j.f64 = f64;
  j.fwd_tile_f32 = fwd_tile_f32_generic;
  j.grad_tile_f32 = grad_tile_f32_generic;
  j.fwd_tile_f64 = fwd_tile_f64_generic;
  j.grad_tile_f64 = grad_tile_f64_generic;
  j.grad_tile_t_f32 = grad_tile_t_f32_generic;
  j.grad_tile_t_f64 = grad_tile_t_f64_generic;
#if GK_X86
  if (uk->level == GK_ISA_AVX512 || uk->level == GK_ISA_AVX512BF16) {
    j.fwd_tile_f32 = fwd_tile_f32_avx512;
    j.grad_tile_f32 = grad_tile_f32_avx512;
    j.grad_tile_t_f32 = grad_tile_t_f32_avx512;
  } else if (uk->level == GK_ISA_AVX2) {
    j.fwd_tile_f32 = fwd_tile_f32_avx2;
    j.grad_tile_f32 = grad_tile_f32_avx2;
    j.grad_tile_t_f32 = grad_tile_t_f32_avx2;
  }
#endif
  return j;
}

// Slot layouts, in elements (each piece rounded to 16 elements = 64 bytes
// for f32). Forward: qb QBF Dh | ot Dm QBF | ka bc Dh | va Dm bc | st bc FR |
// m, l QBF. Backward keys pass: ktp, vtp Dh kb | dk, dv kb Dp |
// qa, doa BR Dh | qb, dob BR Dp | s, dp BR bc | pt, dst bc BR | lse, D BR.
// Backward queries pass: qb, dob QBF Dh | dqt Dm QBF | ka, va bc Dh |
// kta Dm bc | st, dpt bc FR | lse, D QBF.
static int64_t piece(int64_t n) { return round_up(n, 16); }

static int64_t fwd_slot_elems(const attn_job *j) {
  return piece(QBF * j->Dh) + piece(j->Dm * QBF) + piece(j->bc * j->Dh) + piece(j->Dm * j->bc) +
         piece(j->bc * FR) + 2 * piece(QBF);
}

static int64_t bwd_slot_elems(const attn_job *j) {
  int64_t keys = 2 * piece(j->Dh * j->kb) + 2 * piece(j->kb * j->Dp) + 2 * piece(BR * j->Dh) +
                 2 * piece(BR * j->Dp) + 4 * piece(BR * j->bc) + 2 * piece(BR);
  int64_t queries = 2 * piece(QBF * j->Dh) + piece(j->Dm * QBF) + 2 * piece(j->bc * j->Dh) +
                    piece(j->Dm * j->bc) + 2 * piece(j->bc * FR) + 2 * piece(QBF);
  return keys > queries ? keys : queries;
}

static size_t elem_size(const gk_plan *plan) { return plan->desc.dtype == GK_F64 ? sizeof(double) : sizeof(float); }

static int64_t slots_for(int64_t items) { return gk_min64(gk_min64(items, gk_get_num_threads()), 64); }

static int64_t fwd_items(const attn_job *j) { return j->B * j->H * gk_ceil_div(j->L, QBF); }
static int64_t bwd_items(const attn_job *j) {
  int64_t a = j->B * j->Hkv * gk_ceil_div(j->L, j->kb), b = fwd_items(j);
  return a > b ? a : b;
}

static size_t d_bytes(const gk_plan *plan, const attn_job *j) {
  return (size_t)piece(j->B * j->H * j->L) * elem_size(plan);
}

static size_t cpu_attention_fwd_workspace(const gk_plan *plan) {
  attn_job j = job_of(plan);
  return (size_t)(slots_for(fwd_items(&j)) * fwd_slot_elems(&j)) * elem_size(plan);
}

static size_t cpu_attention_bwd_workspace(const gk_plan *plan) {
  attn_job j = job_of(plan);
  return d_bytes(plan, &j) + (size_t)(slots_for(bwd_items(&j)) * bwd_slot_elems(&j)) * elem_size(plan);
}

// Pull work items until none is left; `item` gets the slot's memory.
#define GK_DEFINE_SLOT_LOOP(NAME, T, ITEM)                                    \
  static void NAME(void *ctx, int64_t slot) {                                 \
    attn_job *j = ctx;                                                        \
    T *mem = (T *)(j->ws + (size_t)slot * j->slot_bytes);                     \
    for (;;) {                                                                \
      int64_t it = atomic_fetch_add(&j->next, 1);                             \
      if (it >= j->items) break;                                              \
      ITEM(j, it, mem);                                                       \
    }                                                                         \
  }

#define GK_DEFINE_ATTENTION(T, S)                                                    \
  /* forward item (b, h, query block), heaviest blocks first */                                    \
  static void fwd_item_##S(attn_job *j, int64_t item, T *mem) {                                     \
    int64_t nqb = gk_ceil_div(j->L, QBF), bh = item % (j->B * j->H), qblk = nqb - 1 - item / (j->B * j->H); \
    int64_t b = bh / j->H, h = bh % j->H, kvb = b * j->Hkv + h / j->G;                               \
    int64_t q0 = qblk * QBF, qn = gk_min64(QBF, j->L - q0), Dh = j->Dh, Dm = j->Dm, bc = j->bc, nr = j->nr; \
    T *qb = mem, *ot = qb + piece(QBF * Dh), *ka = ot + piece(Dm * QBF), *va = ka + piece(bc * Dh);   \
    T *st = va + piece(Dm * bc), *m = st + piece(bc * FR), *l = m + piece(QBF);                     \
    int64_t ntiles = gk_ceil_div(qn, FR);                                                           \
    for (int64_t t = 0; t < ntiles; t++) {                                                          \
      int64_t rn = gk_min64(FR, qn - t * FR), done = round_up(rn, nr) * Dh;                        \
      gk_pack_b_##S(&j->qt, bh, 0, Dh, q0 + t * FR, rn, qb + t * FR * Dh, Dh * nr);                  \
      for (int64_t i = done; i < FR * Dh; i++) qb[t * FR * Dh + i] = 0; /* slivers past the end */   \
    }                                                                                               \
    for (int64_t i = 0; i < ntiles * Dm * FR; i++) ot[i] = 0;                                       \
    for (int64_t q = 0; q < QBF; q++) {                                                             \
      m[q] = -(T)INFINITY;                                                                          \
      l[q] = 0;                                                                                     \
    }                                                                                               \
    int64_t kv_end = j->causal ? q0 + qn : j->L;                                                    \
    for (int64_t k0 = 0; k0 < kv_end; k0 += bc) {                                                   \
      int64_t kn = gk_min64(bc, j->L - k0), knm = round_up(kn, j->mr);                              \
      gk_pack_a_##S(&j->k, kvb, k0, kn, 0, Dh, ka);                                                 \
      gk_pack_a_##S(&j->vt, kvb, 0, Dh, k0, kn, va);                                                \
      for (int64_t t = 0; t < ntiles; t++) {                                                        \
        int64_t i0 = q0 + t * FR, rn = gk_min64(FR, qn - t * FR);                                   \
        if (j->causal && k0 > i0 + rn - 1) continue;                                                \
        for (int64_t s0 = 0; s0 < FR; s0 += nr) /* S^T, one packed sliver of queries at a time */  \
          gk_gemm_packed_##S(knm, nr, Dh, ka, qb + t * FR * Dh + s0 * Dh, Dh * nr, st + s0 * knm, nr, 0); \
        j->fwd_tile_##S(st, knm, kn, nr, rn, i0 - k0, j->causal, (T)j->scale, m + t * FR, l + t * FR, \
                        ot + t * Dm * FR, Dm);                                                      \
        gk_gemm_packed_##S(Dm, FR, kn, va, st, knm * nr, ot + t * Dm * FR, FR, 1);                  \
      }                                                                                             \
    }                                                                                               \
    T row[256];                                                                                     \
    gk_tensor lse = gk_tensor_row(j->lse, 1, bh);                                                   \
    for (int64_t q = 0; q < qn; q++) {                                                              \
      T inv = (T)1 / l[q];                                                                          \
      const T *oc = ot + (q / FR) * Dm * FR + q % FR;                                               \
      gk_tensor yrow = gk_tensor_row(j->y, 1, bh * j->L + q0 + q);                                  \
      for (int64_t c0 = 0; c0 < Dh; c0 += 256) {                                                    \
        int64_t n = gk_min64(256, Dh - c0);                                                         \
        for (int64_t c = 0; c < n; c++) row[c] = oc[(c0 + c) * FR] * inv;                           \
        gk_store_##S(&yrow, c0, n, row);                                                            \
      }                                                                                             \
      m[q] += (T)log(l[q]);                                                                         \
    }                                                                                               \
    gk_store_##S(&lse, q0, qn, m);                                                                  \
  }                                                                                                 \
  GK_DEFINE_SLOT_LOOP(fwd_slot_##S, T, fwd_item_##S)                                                \
  /* D_i = dO_i . o_i for a run of rows */                                                          \
  GK_INLINE void d_task_##S(void *ctx, int64_t task) {                                              \
    attn_job *j = ctx;                                                                              \
    T a[256], bb[256], *dd = j->d;                                                                  \
    int64_t rows = j->B * j->H * j->L, per = gk_ceil_div(8192, j->Dh);                              \
    int64_t end = gk_min64(rows, (task + 1) * per);                                                 \
    for (int64_t r = task * per; r < end; r++) {                                                    \
      gk_tensor g = gk_tensor_row(j->dy, 1, r);                                                     \
      gk_tensor o = gk_tensor_row(j->y, 1, r);                                                      \
      T acc = 0;                                                                                    \
      for (int64_t c = 0; c < j->Dh; c += 256) {                                                    \
        int64_t n = gk_min64(256, j->Dh - c);                                                       \
        gk_load_##S(&g, c, n, a);                                                                   \
        gk_load_##S(&o, c, n, bb);                                                                  \
        for (int64_t i = 0; i < n; i++) acc += a[i] * bb[i];                                        \
      }                                                                                             \
      dd[r] = acc;                                                                                  \
    }                                                                                               \
  }                                                                                                 \
  /* backward keys item (b, kv head, key block): dK and dV; for causal, block 0 has the most */    \
  /* queries and comes first */                                                                    \
  static void bwd_kv_item_##S(attn_job *j, int64_t item, T *mem) {                                  \
    int64_t kvb = item % (j->B * j->Hkv), kblk = item / (j->B * j->Hkv);                             \
    int64_t b = kvb / j->Hkv, hk = kvb % j->Hkv, Dh = j->Dh, Dp = j->Dp, bc = j->bc, kb = j->kb, mr = j->mr, nr = j->nr; \
    int64_t k0b = kblk * kb, kbn = gk_min64(kb, j->L - k0b);                                        \
    T *ktp = mem, *vtp = ktp + piece(Dh * kb), *dk = vtp + piece(Dh * kb), *dv = dk + piece(kb * Dp); \
    T *qa = dv + piece(kb * Dp), *doa = qa + piece(BR * Dh), *qb = doa + piece(BR * Dh);            \
    T *dob = qb + piece(BR * Dp), *s = dob + piece(BR * Dp), *dp = s + piece(BR * bc);              \
    T *pt = dp + piece(BR * bc), *dst = pt + piece(bc * BR), *lse = dst + piece(bc * BR), *dd = lse + piece(BR); \
    gk_pack_b_##S(&j->kt, kvb, 0, Dh, k0b, kbn, ktp, Dh * nr);                                      \
    gk_pack_b_##S(&j->vt, kvb, 0, Dh, k0b, kbn, vtp, Dh * nr);                                      \
    for (int64_t i = 0; i < kb * Dp; i++) dk[i] = dv[i] = 0;                                        \
    const T *dall = j->d;                                                                           \
    for (int64_t g = 0; g < j->G; g++) {                                                            \
      int64_t bh = b * j->H + hk * j->G + g;                                                        \
      gk_tensor lrow = gk_tensor_row(j->lse, 1, bh);                                                \
      for (int64_t i0 = j->causal ? k0b / BR * BR : 0; i0 < j->L; i0 += BR) {                       \
        int64_t rn = gk_min64(BR, j->L - i0);                                                       \
        gk_pack_a_##S(&j->q, bh, i0, rn, 0, Dh, qa);                                                \
        gk_pack_a_##S(&j->dout, bh, i0, rn, 0, Dh, doa);                                            \
        gk_pack_b_##S(&j->q, bh, i0, rn, 0, Dh, qb, rn * nr);                                       \
        gk_pack_b_##S(&j->dout, bh, i0, rn, 0, Dh, dob, rn * nr);                                   \
        gk_load_##S(&lrow, i0, rn, lse);                                                            \
        for (int64_t r = 0; r < rn; r++) dd[r] = dall[bh * j->L + i0 + r];                          \
        for (int64_t k0 = k0b; k0 < k0b + kbn; k0 += bc) {                                          \
          int64_t kn = gk_min64(bc, k0b + kbn - k0), knp = round_up(kn, nr), knm = round_up(kn, mr); \
          if (j->causal && k0 > i0 + rn - 1) break;                                                 \
          int64_t tk = (k0 - k0b) / nr;                                                             \
          gk_gemm_packed_##S(BR, knp, Dh, qa, ktp + tk * Dh * nr, Dh * nr, s, bc, 0);               \
          gk_gemm_packed_##S(BR, knp, Dh, doa, vtp + tk * Dh * nr, Dh * nr, dp, bc, 0);             \
          j->grad_tile_##S(s, dp, bc, rn, kn, i0 - k0, j->causal, (T)j->scale, lse, dd);                                        \
          /* P^T and dS^T as packed A panels: keys are rows, queries the k dim */                   \
          /* (sliver c0 of mr keys, row r) = the mr scores s[r, c0 .. c0 + mr), contiguous */       \
          for (int64_t c0 = 0; c0 < knm; c0 += mr) {                                                \
            T *pc = pt + c0 * rn, *dc = dst + c0 * rn;                                              \
            int64_t w = gk_min64(mr, kn - c0);                                                      \
            for (int64_t r = 0; r < rn; r++) {                                                      \
              const T *sr = s + r * bc + c0, *dr = dp + r * bc + c0;                                \
              for (int64_t i = 0; i < mr; i++) {                                                    \
                pc[r * mr + i] = i < w ? sr[i] : 0;                                                 \
                dc[r * mr + i] = i < w ? dr[i] : 0;                                                 \
              }                                                                                     \
            }                                                                                       \
          }                                                                                         \
          gk_gemm_packed_##S(knm, Dp, rn, pt, dob, rn * nr, dv + (k0 - k0b) * Dp, Dp, 1);           \
          gk_gemm_packed_##S(knm, Dp, rn, dst, qb, rn * nr, dk + (k0 - k0b) * Dp, Dp, 1);           \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
    for (int64_t c = 0; c < kbn; c++) {                                                             \
      gk_tensor krow = gk_tensor_row(j->dk, 1, kvb * j->L + k0b + c);                               \
      gk_tensor vrow = gk_tensor_row(j->dv, 1, kvb * j->L + k0b + c);                               \
      gk_store_##S(&krow, 0, Dh, dk + c * Dp);                                                      \
      gk_store_##S(&vrow, 0, Dh, dv + c * Dp);                                                      \
    }                                                                                               \
  }                                                                                                 \
  GK_DEFINE_SLOT_LOOP(bwd_kv_slot_##S, T, bwd_kv_item_##S)                                          \
  /* backward queries item (b, h, block of QBF queries): dQ^T += K^T dS^T, heaviest blocks first */ \
  static void bwd_q_item_##S(attn_job *j, int64_t item, T *mem) {                                   \
    int64_t nqb = gk_ceil_div(j->L, QBF), bh = item % (j->B * j->H), qblk = nqb - 1 - item / (j->B * j->H); \
    int64_t b = bh / j->H, h = bh % j->H, kvb = b * j->Hkv + h / j->G;                               \
    int64_t q0 = qblk * QBF, qn = gk_min64(QBF, j->L - q0), Dh = j->Dh, Dm = j->Dm, bc = j->bc, nr = j->nr; \
    T *qb = mem, *dob = qb + piece(QBF * Dh), *dqt = dob + piece(QBF * Dh), *ka = dqt + piece(Dm * QBF); \
    T *va = ka + piece(bc * Dh), *kta = va + piece(bc * Dh), *st = kta + piece(Dm * bc);             \
    T *dpt = st + piece(bc * FR), *lse = dpt + piece(bc * FR), *dd = lse + piece(QBF);               \
    int64_t ntiles = gk_ceil_div(qn, FR);                                                           \
    for (int64_t t = 0; t < ntiles; t++) {                                                          \
      int64_t rn = gk_min64(FR, qn - t * FR), done = round_up(rn, nr) * Dh;                        \
      gk_pack_b_##S(&j->qt, bh, 0, Dh, q0 + t * FR, rn, qb + t * FR * Dh, Dh * nr);                  \
      gk_pack_b_##S(&j->doutt, bh, 0, Dh, q0 + t * FR, rn, dob + t * FR * Dh, Dh * nr);              \
      for (int64_t i = done; i < FR * Dh; i++) qb[t * FR * Dh + i] = dob[t * FR * Dh + i] = 0;       \
    }                                                                                               \
    gk_tensor lrow = gk_tensor_row(j->lse, 1, bh);                                                  \
    gk_load_##S(&lrow, q0, qn, lse);                                                                \
    const T *dall = j->d;                                                                           \
    for (int64_t q = 0; q < QBF; q++) {                                                             \
      if (q >= qn) lse[q] = 0;                                                                      \
      dd[q] = q < qn ? dall[bh * j->L + q0 + q] : 0;                                                \
    }                                                                                               \
    for (int64_t i = 0; i < ntiles * Dm * FR; i++) dqt[i] = 0;                                      \
    int64_t kv_end = j->causal ? q0 + qn : j->L;                                                    \
    for (int64_t k0 = 0; k0 < kv_end; k0 += bc) {                                                   \
      int64_t kn = gk_min64(bc, j->L - k0), knm = round_up(kn, j->mr);                              \
      gk_pack_a_##S(&j->k, kvb, k0, kn, 0, Dh, ka);                                                 \
      gk_pack_a_##S(&j->v, kvb, k0, kn, 0, Dh, va);                                                 \
      gk_pack_a_##S(&j->kt, kvb, 0, Dh, k0, kn, kta);                                               \
      for (int64_t t = 0; t < ntiles; t++) {                                                        \
        int64_t i0 = q0 + t * FR, rn = gk_min64(FR, qn - t * FR);                                   \
        if (j->causal && k0 > i0 + rn - 1) continue;                                                \
        for (int64_t s0 = 0; s0 < FR; s0 += nr) {                                                   \
          gk_gemm_packed_##S(knm, nr, Dh, ka, qb + t * FR * Dh + s0 * Dh, Dh * nr, st + s0 * knm, nr, 0); \
          gk_gemm_packed_##S(knm, nr, Dh, va, dob + t * FR * Dh + s0 * Dh, Dh * nr, dpt + s0 * knm, nr, 0); \
        }                                                                                           \
        j->grad_tile_t_##S(st, dpt, knm, kn, nr, rn, i0 - k0, j->causal, (T)j->scale, lse + t * FR, dd + t * FR); \
        gk_gemm_packed_##S(Dm, FR, kn, kta, dpt, knm * nr, dqt + t * Dm * FR, FR, 1);               \
      }                                                                                             \
    }                                                                                               \
    T row[256];                                                                                     \
    for (int64_t q = 0; q < qn; q++) {                                                              \
      const T *dc = dqt + (q / FR) * Dm * FR + q % FR;                                              \
      gk_tensor out = gk_tensor_row(j->dq, 1, bh * j->L + q0 + q);                                  \
      for (int64_t c0 = 0; c0 < Dh; c0 += 256) {                                                    \
        int64_t n = gk_min64(256, Dh - c0);                                                         \
        for (int64_t c = 0; c < n; c++) row[c] = dc[(c0 + c) * FR];                                 \
        gk_store_##S(&out, c0, n, row);                                                             \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  GK_DEFINE_SLOT_LOOP(bwd_q_slot_##S, T, bwd_q_item_##S)

GK_DEFINE_ATTENTION(float, f32)
GK_DEFINE_ATTENTION(double, f64)

GK_INLINE void d_task_body(void *ctx, int64_t task) {
  if (((const attn_job *)ctx)->f64) d_task_f64(ctx, task);
  else d_task_f32(ctx, task);
}
GK_ISA_VARIANTS(d_task, (void *ctx, int64_t task), (ctx, task))

static void prepare(attn_job *j, const gk_kernel_args a, void *ws) {
  j->q = gk_mat_of(a[GK_ARG_Q], 2, 1);
  j->qt = gk_mat_t(j->q);
  j->k = gk_mat_of(a[GK_ARG_K], 2, 1);
  j->v = gk_mat_of(a[GK_ARG_V], 2, 1);
  j->kt = gk_mat_t(j->k);
  j->vt = gk_mat_t(j->v);
  if (a[GK_ARG_DY]) {
    j->dout = gk_mat_of(a[GK_ARG_DY], 2, 1);
    j->doutt = gk_mat_t(j->dout);
  }
  j->dy = a[GK_ARG_DY];
  j->y = a[GK_ARG_Y];
  j->lse = a[GK_ARG_LSE];
  j->dq = a[GK_ARG_DQ];
  j->dk = a[GK_ARG_DK];
  j->dv = a[GK_ARG_DV];
  j->ws = ws;
}

static void run_items(attn_job *j, int64_t items, size_t avail, gk_task_fn fn) {
  j->items = items;
  atomic_init(&j->next, 0);
  int64_t slots = gk_min64(items, (int64_t)(avail / j->slot_bytes));
  gk_parallel_for(slots, fn, j);
}

static gk_status cpu_attention_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  attn_job j = job_of(plan);
  if (j.B == 0 || j.L == 0) return GK_SUCCESS;
  prepare(&j, a, ws);
  j.slot_bytes = (size_t)fwd_slot_elems(&j) * elem_size(plan);
  run_items(&j, fwd_items(&j), plan->workspace_bytes, plan->desc.dtype == GK_F64 ? fwd_slot_f64 : fwd_slot_f32);
  return GK_SUCCESS;
}

static gk_status cpu_attention_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  attn_job j = job_of(plan);
  if (j.B == 0 || j.L == 0) return GK_SUCCESS;
  bool f64 = plan->desc.dtype == GK_F64;
  size_t dbytes = d_bytes(plan, &j);
  prepare(&j, a, (char *)ws + dbytes);
  j.d = ws;
  gk_parallel_for(gk_ceil_div(j.B * j.H * j.L, gk_ceil_div(8192, j.Dh)), d_task, &j);
  j.slot_bytes = (size_t)bwd_slot_elems(&j) * elem_size(plan);
  size_t avail = plan->workspace_bytes - dbytes;
  run_items(&j, j.B * j.Hkv * gk_ceil_div(j.L, j.kb), avail, f64 ? bwd_kv_slot_f64 : bwd_kv_slot_f32);
  run_items(&j, fwd_items(&j), avail, f64 ? bwd_q_slot_f64 : bwd_q_slot_f32);
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_attention_fwd = {.name = "cpu_flash", .backend = GK_BACKEND_CPU, .workspace = cpu_attention_fwd_workspace,
                                        .run = cpu_attention_fwd};
const gk_kernel gk_cpu_attention_bwd = {.name = "cpu_flash", .backend = GK_BACKEND_CPU, .workspace = cpu_attention_bwd_workspace,
                                        .run = cpu_attention_bwd};
