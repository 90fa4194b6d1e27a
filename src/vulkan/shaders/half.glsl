// f16 and bf16 values as the shaders store them (after common.glsl).
// Rounding to nearest even (NaN stays NaN, overflow gives inf):
//   bf16: the top half of (bits + 0x7fff + bit 16 of bits)
//   f16: by the exponent: normal numbers round their 13 dropped mantissa bits
//        the same way; below 2^-14 the value is rounded at 2^-24 (subnormals).
// Tensors read and written in place hold two elements a 32-bit word (mode
// 1: f16, 2: bf16; element 2w in the low half of word w).
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
vec2 half2_load(uint word, uint mode) {
  return mode == 1u ? unpackHalf2x16(word) : vec2(uintBitsToFloat(word << 16), uintBitsToFloat(word & 0xffff0000u));
}
uint half_bits(float v, uint mode) { return mode == 1u ? to_f16(floatBitsToUint(v)) : to_bf16(floatBitsToUint(v)); }
// Word w of slot s, of a tensor of n elements: when n is odd its last word
// keeps its upper half (what lies after the tensor).
void half2_store(uint s, uint w, uint n, vec2 v, uint mode) {
  uint word = half_bits(v.x, mode) | (half_bits(v.y, mode) << 16);
  if (2u * w + 1u == n) word = (word & 0xffffu) | (slot[s].v[w] & 0xffff0000u);
  slot[s].v[w] = word;
}
// Element e of a tensor of slot s held so (one 16-bit read; writes go by words).
float half_at(uint s, uint e, uint mode) { return half2_load(slot[s].v[e >> 1], mode)[e & 1u]; }
