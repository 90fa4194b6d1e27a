// dtypes and the f16/bf16 conversions (round to nearest even; convert.h).
#include "convert.h"
#include "internal.h"

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

uint16_t gk_f32_to_bf16(float x) { return gk_f32_to_bf16_inline(x); }
float gk_bf16_to_f32(uint16_t h) { return gk_bf16_to_f32_inline(h); }
uint16_t gk_f32_to_f16(float x) { return gk_f32_to_f16_inline(x); }
float gk_f16_to_f32(uint16_t h) { return gk_f16_to_f32_inline(h); }
