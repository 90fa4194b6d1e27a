// f16 and bf16 <-> f32, round to nearest even, with no branch: loops over
// these vectorise (the public gk_f32_to_f16 & co. are these same functions).
//   bf16 is the top half of an f32: round by adding 0x7fff plus the lowest
//   kept bit, keep NaN quiet (never let it round to inf).
//   f16 (1 sign, 5 exponent bits, bias 15, 10 mantissa bits): from f16, the
//   exponent and mantissa bits shifted into place and scaled by 2^112 (exact,
//   subnormals included), inf/NaN patched; to f16, three cases blended:
//   overflow to inf (or NaN), subnormal by a magic addition that rounds to
//   nearest even in the FPU, normal by adding the bias change plus half an
//   ulp minus one plus the lowest kept bit (ties to even).
#ifndef GK_CONVERT_H
#define GK_CONVERT_H

#include "isa.h"

#include <stdint.h>
#include <string.h>

GK_INLINE uint32_t gk_cvt_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

GK_INLINE float gk_cvt_float(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

GK_INLINE float gk_bf16_to_f32_inline(uint16_t h) { return gk_cvt_float((uint32_t)h << 16); }

// 16 contiguous bf16 elements widened to f32 as one vector operation (the
// compilers' vector extensions): loops that keep 16 partial sums over bf16
// then run at the machine's full vector width, where widening each element
// on its own left gcc to split them into two half-width vectors.
typedef uint16_t gk_u16x16 __attribute__((vector_size(32)));
typedef uint32_t gk_u32x16 __attribute__((vector_size(64)));
GK_INLINE void gk_bf16x16_to_f32(const uint16_t *p, float *v) {
  gk_u16x16 h;
  memcpy(&h, p, sizeof h);
  gk_u32x16 w = __builtin_convertvector(h, gk_u32x16) << 16;
  memcpy(v, &w, sizeof w);
}

GK_INLINE uint16_t gk_f32_to_bf16_inline(float x) {
  uint32_t u = gk_cvt_bits(x);
  uint32_t nan = -(uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
  return (uint16_t)((rounded & ~nan) | (quiet & nan));
}

// 16 f32 values narrowed to bf16 as vector operations: the steps of
// gk_f32_to_bf16_inline on every lane, the same bits.
GK_INLINE void gk_f32x16_to_bf16(const float *v, uint16_t *p) {
  gk_u32x16 u;
  memcpy(&u, v, sizeof u);
  gk_u32x16 nan = (gk_u32x16)((u & 0x7fffffffu) > 0x7f800000u);
  gk_u32x16 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
  gk_u16x16 h = __builtin_convertvector((rounded & ~nan) | (quiet & nan), gk_u16x16);
  memcpy(p, &h, sizeof h);
}

GK_INLINE float gk_f16_to_f32_inline(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
  uint32_t scaled = gk_cvt_bits(gk_cvt_float(em << 13) * 5.192296858534828e33f);  // 2^112
  uint32_t special = -(uint32_t)(em >= 0x7c00u);                                     // inf, NaN
  return gk_cvt_float(sign | (scaled & ~special) | ((0x7f800000u | (em << 13)) & special));
}

GK_INLINE uint16_t gk_f32_to_f16_inline(float x) {
  uint32_t u = gk_cvt_bits(x), sign = u & 0x80000000u, a = u ^ sign;
  uint32_t inf_nan = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Subnormal results: adding 0.5 (2^-1) leaves the f16 subnormal's units,
  // rounded to nearest even by the FPU, in the low mantissa bits.
  uint32_t sub = gk_cvt_bits(gk_cvt_float(a) + 0.5f) - 0x3f000000u;
  uint32_t normal = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  uint32_t big = -(uint32_t)(a >= 0x47800000u), small = -(uint32_t)(a < 0x38800000u);
  uint32_t h = (inf_nan & big) | (sub & small & ~big) | (normal & ~small & ~big);
  return (uint16_t)(h | (sign >> 16));
}

#endif
