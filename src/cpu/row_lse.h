// The online log-sum-exp pass over one row, shared by softmax and
// cross-entropy: the row is read once in chunks of CHUNK; each chunk's max
// (gk_chunk_max) rescales the running sum (s *= e^(m_old - m_new)) before the chunk's
// e^(x - m) terms are added over LANES partial sums. exp is gk_exp_nonpos_f32 in
// f32, libm's in f64. The includer defines CHUNK and LANES.
// Rows of f32 (f64) are taken chunk by chunk with gk_chunk_in (converted
// into a buffer unless contiguous in that dtype); contiguous rows of bf16 or
// f16 are read in place, each element widened to f32 in a register (the
// _bf16 and _f16 forms, row_access.h): the same values, the same sums.
#ifndef GK_CPU_ROW_LSE_H
#define GK_CPU_ROW_LSE_H

#include "../core/act_math.h"
#include "../core/convert.h"
#include "../core/internal.h"
#include "row_access.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double gk_exp_libm_f64(double x) { return exp(x); }
#define GK_ROW_EXP_f32 gk_exp_nonpos_f32
#define GK_ROW_EXP_f64 gk_exp_libm_f64


// The largest of p[0 .. n), n >= 1, as an integer max over keys that order
// like the floats (sign-magnitude bits to two's complement, an involution):
// integer max reductions vectorise, float ?: stays a scalar branch. A NaN
// with the sign bit clear comes out as the max; either way it reaches the
// sum and the result is NaN.
GK_INLINE int32_t gk_order_key_f32(int32_t i) { return i ^ ((i >> 31) & 0x7fffffff); }
GK_INLINE int64_t gk_order_key_f64(int64_t i) { return i ^ ((i >> 63) & 0x7fffffffffffffff); }
GK_INLINE float gk_order_key_max_f32(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  return gk_order_key_f32(ia) > gk_order_key_f32(ib) ? a : b;
}
GK_INLINE double gk_order_key_max_f64(double a, double b) {
  int64_t ia, ib;
  memcpy(&ia, &a, 8);
  memcpy(&ib, &b, 8);
  return gk_order_key_f64(ia) > gk_order_key_f64(ib) ? a : b;
}
GK_INLINE float gk_chunk_max_f32(const float *p, int64_t n) {
  int32_t km = INT32_MIN;
  for (int64_t i = 0; i < n; i++) {
    int32_t bits;
    memcpy(&bits, &p[i], 4);
    int32_t k = gk_order_key_f32(bits);
    km = k > km ? k : km;
  }
  km = gk_order_key_f32(km);
  float m;
  memcpy(&m, &km, 4);
  return m;
}
GK_INLINE double gk_chunk_max_f64(const double *p, int64_t n) {
  int64_t km = INT64_MIN;
  for (int64_t i = 0; i < n; i++) {
    int64_t bits;
    memcpy(&bits, &p[i], 8);
    int64_t k = gk_order_key_f64(bits);
    km = k > km ? k : km;
  }
  km = gk_order_key_f64(km);
  double m;
  memcpy(&m, &km, 8);
  return m;
}

// The same over 16-bit elements widened by LD (gk_chunk_max_bf16, _f16).
#define GK_DEFINE_CHUNK_MAX_16(SFX, LD)                                                     \
  GK_INLINE float gk_chunk_max_##SFX(const uint16_t *p, int64_t n) {                        \
    int32_t km = INT32_MIN;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                       \
      float v = LD(p[i]);                                                                   \
      int32_t bits;                                                                         \
      memcpy(&bits, &v, 4);                                                                 \
      int32_t k = gk_order_key_f32(bits);                                                   \
      km = k > km ? k : km;                                                                 \
    }                                                                                       \
    km = gk_order_key_f32(km);                                                              \
    float m;                                                                                \
    memcpy(&m, &km, 4);                                                                     \
    return m;                                                                               \
  }
GK_DEFINE_CHUNK_MAX_16(bf16, gk_bf16_to_f32_inline)
GK_DEFINE_CHUNK_MAX_16(f16, gk_f16_to_f32_inline)

// v[0 .. LANES) = the LANES elements at p, widened to T by LD (the _bf16
// form, with LANES = 16, as one vector conversion: convert.h).
#define GK_DEFINE_LOAD_LANES(T, SFX, E, LD)                                                 \
  GK_INLINE void gk_load_lanes_##SFX(const E *p, T *v) {                                    \
    for (int l = 0; l < LANES; l++) v[l] = LD(p[l]);                                        \
  }
#define GK_DEFINE_LOAD_LANES_bf16(T, SFX, E, LD)                                            \
  GK_INLINE void gk_load_lanes_bf16(const uint16_t *p, float *v) {                          \
    _Static_assert(LANES == 16, "gk_bf16x16_to_f32 widens 16 elements");                   \
    gk_bf16x16_to_f32(p, v);                                                                \
  }

// acc[l] += the p[i] with i = l mod LANES, for i in [0, n): LANES partial
// sums, so the loop vectorises (gk_lane_sum; gk_lane_dot for p[i] q[i]).
// Sums in T over elements of E widened by LD; SFX names the forms.
#define GK_DEFINE_LANE_SUM(T, SFX, E, LD)                                                   \
  __attribute__((unused)) GK_INLINE void gk_lane_sum_##SFX(const E *p, int64_t n, T *acc) { \
    T a[LANES];                                                                             \
    for (int l = 0; l < LANES; l++) a[l] = acc[l];                                          \
    int64_t i = 0;                                                                          \
    for (; i + LANES <= n; i += LANES)                                                      \
      for (int l = 0; l < LANES; l++) a[l] += LD(p[i + l]);                                 \
    for (; i < n; i++) a[i % LANES] += LD(p[i]);                                            \
    for (int l = 0; l < LANES; l++) acc[l] = a[l];                                          \
  }                                                                                         \
  /* the same for the products p[i] q[i] (softmax backward; unused by cross-entropy) */    \
  __attribute__((unused)) GK_INLINE void gk_lane_dot_##SFX(const E *p, const E *q, int64_t n, T *acc) { \
    T a[LANES];                                                                             \
    for (int l = 0; l < LANES; l++) a[l] = acc[l];                                          \
    int64_t i = 0;                                                                          \
    for (; i + LANES <= n; i += LANES)                                                      \
      for (int l = 0; l < LANES; l++) a[l] += LD(p[i + l]) * LD(q[i + l]);                  \
    for (; i < n; i++) a[i % LANES] += LD(p[i]) * LD(q[i]);                                 \
    for (int l = 0; l < LANES; l++) acc[l] = a[l];                                          \
  }

// Row x of n elements: *m = max x, *s = sum e^(x - m); with sumx (not NULL)
// also *sumx = sum x. buf holds CHUNK elements. Computed in T (S: f32, f64)
// over elements of E read through IN and widened by LD; SFX names the forms
// (S itself for rows taken as T).
#define GK_DEFINE_ROW_LSE_OF(T, S, SFX, E, LD, IN, LOAD_LANES)                              \
  LOAD_LANES(T, SFX, E, LD)                                                                 \
  GK_DEFINE_LANE_SUM(T, SFX, E, LD)                                                         \
  /* max of row x (n >= 1 elements), read in chunks; the next chunk is */                  \
  /* prefetched while this one is scanned */                                               \
  __attribute__((unused)) GK_INLINE T gk_row_max_##SFX(const gk_tensor *x, int64_t n, E *buf) { \
    T m = -(T)INFINITY;                                                                     \
    for (int64_t c = 0; c < n; c += CHUNK) {                                                \
      int64_t len = gk_min64(CHUNK, n - c);                                                 \
      const E *p = IN(x, c, len, buf);                                                      \
      for (int64_t i = 0; i < len; i += 64 / (int64_t)sizeof(E))                            \
        __builtin_prefetch((const char *)(p + i) + CHUNK * sizeof(E));                      \
      T cm = gk_chunk_max_##SFX(p, len);                                                    \
      m = gk_order_key_max_##S(m, cm);                                                      \
    }                                                                                       \
    return m;                                                                               \
  }                                                                                         \
  /* always inlined, so each ISA clone of its caller gets its own copy */               \
  __attribute__((unused)) GK_INLINE void gk_row_lse_##SFX(                                  \
      const gk_tensor *x, int64_t n, E *buf, T *m_out, T *s_out, T *sumx) {                 \
    T m = -(T)INFINITY, s = 0, sx[LANES] = {0};                                             \
    for (int64_t c = 0; c < n; c += CHUNK) {                                                \
      int64_t len = gk_min64(CHUNK, n - c);                                                 \
      const E *p = IN(x, c, len, buf);                                                      \
      T cm = gk_chunk_max_##SFX(p, len), acc[LANES] = {0};                                  \
      if (cm > m) {                                                                         \
        s *= GK_ROW_EXP_##S(m - cm);                                                        \
        m = cm;                                                                             \
      }                                                                                     \
      int64_t i = 0;                                                                        \
      for (; i + LANES <= len; i += LANES) {                                                \
        /* the next chunk on its way from memory while this one computes */                 \
        __builtin_prefetch((const char *)(p + i) + CHUNK * sizeof(E));                      \
        T v[LANES];                                                                         \
        gk_load_lanes_##SFX(p + i, v);                                                      \
        for (int l = 0; l < LANES; l++) {                                                   \
          acc[l] += GK_ROW_EXP_##S(v[l] - m);                                               \
          if (sumx) sx[l] += v[l];                                                          \
        }                                                                                   \
      }                                                                                     \
      for (; i < len; i++) {                                                                \
        acc[0] += GK_ROW_EXP_##S(LD(p[i]) - m);                                             \
        if (sumx) sx[0] += LD(p[i]);                                                        \
      }                                                                                     \
      for (int l = 0; l < LANES; l++) s += acc[l];                                          \
    }                                                                                       \
    if (sumx) {                                                                             \
      *sumx = 0;                                                                            \
      for (int l = 0; l < LANES; l++) *sumx += sx[l];                                       \
    }                                                                                       \
    *m_out = m;                                                                             \
    *s_out = s;                                                                             \
  }
#define GK_DEFINE_ROW_LSE(T, S) GK_DEFINE_ROW_LSE_OF(T, S, S, T, GK_ROW_SAME, GK_ROW_IN_##S, GK_DEFINE_LOAD_LANES)
// Contiguous bf16 (f16) rows, in f32.
#define GK_DEFINE_ROW_LSE_16()                                                              \
  GK_DEFINE_ROW_LSE_OF(float, f32, bf16, uint16_t, gk_bf16_to_f32_inline, GK_ROW_IN_16,     \
                       GK_DEFINE_LOAD_LANES_bf16)                                           \
  GK_DEFINE_ROW_LSE_OF(float, f32, f16, uint16_t, gk_f16_to_f32_inline, GK_ROW_IN_16,      \
                       GK_DEFINE_LOAD_LANES)

#endif
