// The online log-sum-exp pass over one row, shared by softmax and
// cross-entropy: the row is read once in chunks of CHUNK; each chunk's max
// rescales the running sum (s *= e^(m_old - m_new)) before the chunk's
// e^(x - m) terms are added over LANES partial sums. exp is gk_exp_f32 in
// f32, libm's in f64. The includer defines CHUNK and LANES.
#ifndef GK_CPU_ROW_LSE_H
#define GK_CPU_ROW_LSE_H

#include "../core/act_math.h"
#include "../core/internal.h"

#include <math.h>

static inline double gk_exp_libm_f64(double x) { return exp(x); }
#define GK_ROW_EXP_f32 gk_exp_f32
#define GK_ROW_EXP_f64 gk_exp_libm_f64

// Row x of n elements: *m = max x, *s = sum e^(x - m); with sumx (not NULL)
// also *sumx = sum x. buf holds CHUNK elements.
#define GK_DEFINE_ROW_LSE(T, S)                                                             \
  /* always inlined, so each ISA clone of its caller gets its own copy */               \
  GK_INLINE void gk_row_lse_##S(                         \
      const gk_tensor *x, int64_t n, T *buf, T *m_out, T *s_out, T *sumx) {                 \
    T m = -(T)INFINITY, s = 0, sx[LANES] = {0};                                             \
    for (int64_t c = 0; c < n; c += CHUNK) {                                                \
      int64_t len = gk_min64(CHUNK, n - c);                                                 \
      const T *p = gk_chunk_in_##S(x, c, len, buf);                                         \
      T cm, acc[LANES] = {0}, lm[LANES];                                                    \
      for (int l = 0; l < LANES; l++) lm[l] = -(T)INFINITY;                                 \
      int64_t k = 0; /* the chunk's max over LANES lanes: no serial chain */                 \
      for (; k + LANES <= len; k += LANES)                                                  \
        for (int l = 0; l < LANES; l++) lm[l] = p[k + l] > lm[l] ? p[k + l] : lm[l];        \
      for (; k < len; k++) lm[0] = p[k] > lm[0] ? p[k] : lm[0];                             \
      cm = lm[0];                                                                           \
      for (int l = 1; l < LANES; l++) cm = lm[l] > cm ? lm[l] : cm;                         \
      if (cm > m) {                                                                         \
        s *= GK_ROW_EXP_##S(m - cm);                                                        \
        m = cm;                                                                             \
      }                                                                                     \
      int64_t i = 0;                                                                        \
      for (; i + LANES <= len; i += LANES)                                                  \
        for (int l = 0; l < LANES; l++) {                                                   \
          acc[l] += GK_ROW_EXP_##S(p[i + l] - m);                                           \
          if (sumx) sx[l] += p[i + l];                                                      \
        }                                                                                   \
      for (; i < len; i++) {                                                                \
        acc[0] += GK_ROW_EXP_##S(p[i] - m);                                                 \
        if (sumx) sx[0] += p[i];                                                            \
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

#endif
