// dtypes and the f16/bf16 conversions (round to nearest even).
#include "internal.h"

#include <string.h>

const char *gk_dtype_name(gk_dtype dtype) {
  switch (dtype) {
  case GK_F32: return "f32";
  case GK_F64: return "f64";
  case GK_F16: return "f16";
  case GK_BF16: return "bf16";
  case GK_I32: return "i32";
  case GK_I64: return "i64";
  }
  return "?";
}

size_t gk_dtype_size(gk_dtype dtype) {
  switch (dtype) {
  case GK_F32: case GK_I32: return 4;
  case GK_F64: case GK_I64: return 8;
  case GK_F16: case GK_BF16: return 2;
  }
  return 0;
}

static uint32_t f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// bf16 is the top half of an f32: add half an ulp (plus the lsb for ties to
// even) and truncate. NaN is kept quiet so it never rounds to inf.
uint16_t gk_f32_to_bf16(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float gk_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

// f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t gk_f32_to_f16(float x) {
  uint32_t u = f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;                 // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;                // rounds to >= 65536: inf
  if (a < 0x38800000u) {                                      // below 2^-14: subnormal or 0
    // value = a_float; f16 subnormal unit is 2^-24. Scale and round to even.
    float v = bits_f32(a) * 16777216.0f;                      // exact: power-of-two scale
    uint32_t q = (uint32_t)v;                                 // truncation
    float rem = v - (float)q;
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
    return sign | (uint16_t)q;                                // q == 0x400 gives the smallest normal
  }
  uint32_t mant = a & 0x7fffffu;
  uint32_t exp = (a >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;   // carries into exponent correctly
  return sign | (uint16_t)h;
}

float gk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = (float)mant * (1.0f / 16777216.0f);             // subnormal: mant * 2^-24
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}
