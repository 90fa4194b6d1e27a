// Test helpers shared by the C tests: tensors with canary-guarded storage in
// several layouts, element access, random fill, comparison with the per-dtype
// tolerances (the one place they are written), and a pass/fail tally.
#ifndef GK_TEST_HARNESS_H
#define GK_TEST_HARNESS_H

#include "gradkern.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- tally

static int t_passed, t_failed;

static inline void check(bool ok, const char *fmt, ...) {
  if (ok) {
    t_passed++;
    return;
  }
  t_failed++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

// The closing line CI reads.
static inline int finish(const char *name) {
  printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
  return t_failed ? 1 : 0;
}

// ---------------------------------------------------------------- random

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rng_next(void) {  // splitmix64
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double rng_uniform(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

// ---------------------------------------------------------------- tensors

enum { CANARY = 0xA5, GUARD = 64 };

typedef enum layout { CONTIGUOUS, TRANSPOSED, STRIDED, SWAPPED, LAYOUT_COUNT } layout;
static const char *const layout_name[] __attribute__((unused)) = {"contiguous", "transposed", "strided", "swapped"};

typedef struct tbuf {
  gk_tensor t;
  unsigned char *alloc;
  size_t bytes;        // storage bytes between the guards
} tbuf;

// Storage for a tensor of this shape: CONTIGUOUS row-major; TRANSPOSED dims
// laid out in reverse order (a permuted view); STRIDED every element two
// apart in the last dim (a sliced view); SWAPPED the last two dims' places
// swapped (the (B, L, D) memory of a (B, D, L) view, as a model's
// projections give). Everything starts as canary bytes.
static inline tbuf tbuf_make(gk_dtype dt, int rank, const int64_t *shape, layout lay) {
  tbuf b;
  memset(&b, 0, sizeof b);
  gk_tensor_init(&b.t, NULL, dt, rank, shape);
  int64_t es = (int64_t)gk_dtype_size(dt), stride = 1;
  for (int k = 0; k < rank; k++) {
    int i = lay == TRANSPOSED ? k : rank - 1 - k;
    if (lay == SWAPPED && rank >= 2 && k < 2) i = rank - 2 + k;  // innermost: dim rank - 2, then rank - 1
    int64_t step = (lay == STRIDED && k == 0) ? 2 : 1;
    b.t.strides[i] = stride * step;
    stride *= (shape[i] > 0 ? shape[i] : 1) * step;
  }
  b.bytes = (size_t)(stride * es);
  b.alloc = malloc(b.bytes + 2 * GUARD);
  memset(b.alloc, CANARY, b.bytes + 2 * GUARD);
  b.t.data = b.alloc + GUARD;
  return b;
}

static inline void tbuf_free(tbuf *b) {
  free(b->alloc);
  b->alloc = NULL;
}

static inline int64_t elem_offset(const gk_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->rank - 1; d >= 0; d--) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return off;
}

static inline double tget(const gk_tensor *t, int64_t i) {
  char *p = (char *)t->data + elem_offset(t, i) * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: return *(float *)p;
  case GK_F64: return *(double *)p;
  case GK_F16: return gk_f16_to_f32(*(uint16_t *)p);
  case GK_BF16: return gk_bf16_to_f32(*(uint16_t *)p);
  case GK_I32: return *(int32_t *)p;
  case GK_I64: return (double)*(int64_t *)p;
  }
  return 0;
}

static inline void tset(const gk_tensor *t, int64_t i, double v) {
  char *p = (char *)t->data + elem_offset(t, i) * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: *(float *)p = (float)v; break;
  case GK_F64: *(double *)p = v; break;
  case GK_F16: *(uint16_t *)p = gk_f32_to_f16((float)v); break;
  case GK_BF16: *(uint16_t *)p = gk_f32_to_bf16((float)v); break;
  case GK_I32: *(int32_t *)p = (int32_t)v; break;
  case GK_I64: *(int64_t *)p = (int64_t)v; break;
  }
}

static inline void tfill(const gk_tensor *t, double lo, double hi) {
  int64_t n = gk_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) tset(t, i, rng_uniform(lo, hi));
}

static inline void tcopy_values(const gk_tensor *dst, const gk_tensor *src) {
  int64_t n = gk_tensor_numel(src);
  for (int64_t i = 0; i < n; i++) tset(dst, i, tget(src, i));
}

// True when no byte outside the tensor's elements changed: the guards and
// the gaps of strided layouts still hold the canary.
static inline bool tbuf_canaries_intact(const tbuf *b) {
  size_t total = b->bytes + 2 * GUARD, es = gk_dtype_size(b->t.dtype);
  unsigned char *mask = calloc(total, 1);
  int64_t n = gk_tensor_numel(&b->t);
  for (int64_t i = 0; i < n; i++) memset(mask + GUARD + elem_offset(&b->t, i) * (int64_t)es, 1, es);
  bool ok = true;
  for (size_t i = 0; i < total && ok; i++)
    if (!mask[i] && b->alloc[i] != CANARY) ok = false;
  free(mask);
  return ok;
}

// ---------------------------------------------------------------- tolerances

// Fast kernels against the f64 reference: |got - want| <= atol + rtol |want|.
// f32 computes in f32; f16/bf16 results may differ by one unit in the last
// place after rounding; f64 differs by summation order only.
typedef struct tol { double rtol, atol; } tol;
static inline tol tol_of(gk_dtype dt) {
  switch (dt) {
  case GK_F64: return (tol){1e-12, 1e-12};
  case GK_F32: return (tol){1e-5, 1e-5};
  case GK_F16: return (tol){1.0 / 1024, 1.0 / 1024};
  case GK_BF16: return (tol){1.0 / 128, 1.0 / 128};
  default: return (tol){0, 0};
  }
}
// Finite differences in f64 against backward: max relative error.
static const double FD_MAX_REL_ERR __attribute__((unused)) = 1e-6;

// Largest relative error of fast kernels against the reference, per dtype,
// for the closing report: |a - b| / max(|b|, 1e-2).
static double worst_rel[4] __attribute__((unused));

// Compare two tensors of one shape; returns the largest |a-b| / (atol + rtol|b|).
// With `report`, also records the relative error in worst_rel.
static inline double tcompare(const gk_tensor *got, const gk_tensor *want, tol tl, bool report) {
  int64_t n = gk_tensor_numel(want);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = tget(got, i), b = tget(want, i);
    if (isnan(a) && isnan(b)) continue;
    if (isinf(b) && a == b) continue;
    double r = fabs(a - b) / (tl.atol + tl.rtol * fabs(b));
    if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
    double rel = fabs(a - b) / fmax(fabs(b), 1e-2);
    if (report && got->dtype <= GK_BF16 && rel > worst_rel[got->dtype] && isfinite(rel)) worst_rel[got->dtype] = rel;
  }
  return worst;
}

// ||got - want|| / ||want|| (L2 over n f32 values; ||want|| = 0 counts as 1):
// how far a whole run's gradients or weights are from another run's.
static inline double rel_l2(const float *got, const float *want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    den += (double)want[i] * want[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static inline bool tbits_equal(const gk_tensor *a, const gk_tensor *b) {
  int64_t n = gk_tensor_numel(a);
  size_t es = gk_dtype_size(a->dtype);
  for (int64_t i = 0; i < n; i++)
    if (memcmp((char *)a->data + elem_offset(a, i) * (int64_t)es, (char *)b->data + elem_offset(b, i) * (int64_t)es,
               es))
      return false;
  return true;
}

static inline void *ws_alloc(size_t bytes) {
  return bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
}

#endif
