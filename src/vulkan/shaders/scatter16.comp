#version 450
// scatter.comp for f16 (mode 1) and bf16 (mode 2) outputs, rounding the f32
// values to nearest even (NaN stays NaN, overflow gives inf):
//   bf16: the top half of (bits + 0x7fff + bit 16 of bits)
//   f16: by the exponent: normal numbers round their 13 dropped mantissa bits
//        the same way; below 2^-14 the value is rounded at 2^-24 (subnormals).
// Needs 16-bit storage (storageBuffer16BitAccess).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "common.glsl"
layout(set = 0, binding = 0) buffer Slot16 { uint16_t h[]; } slot16[VK_SLOTS];
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, rank, mode, offset; int shape[8], strides[8]; } p;
#define DST 0
#define TMP 1
uint to_bf16(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN: quiet, sign kept
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
uint to_f16(uint u) {
  uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;                      // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;                     // rounds past 65504: inf
  if (a >= 0x38800000u) {                                          // normal f16
    uint r = a + 0xfffu + ((a >> 13) & 1u);
    return sign | ((r - 0x38000000u) >> 13);
  }
  // Subnormal f16: the value in units of 2^-24, rounded to nearest even.
  float v = uintBitsToFloat(a) * 16777216.0;                       // exact: a power-of-two scaling
  return sign | uint(roundEven(v));
}
void main() {
  FOR_EACH(i, p.n) {
    int e = int(p.offset), rest = int(i);
    for (int k = int(p.rank) - 1; k >= 0; k--) {
      e += (rest % p.shape[k]) * p.strides[k];
      rest /= p.shape[k];
    }
    uint u = slot[TMP].v[i];
    slot16[DST].h[e] = uint16_t(p.mode == 1u ? to_f16(u) : to_bf16(u));
  }
}
