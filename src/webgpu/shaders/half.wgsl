// f16 and bf16 values (prepended to every shader): tensors of these dtypes
// are stored two elements to a u32 word, element 2k in the low half of word
// k; `mode` 1 is f16, 2 bf16. f16 is read with unpack2x16float and written
// by the integer rounding below (no shader-f16 feature needed; WGSL leaves
// pack2x16float's rounding to the implementation). Rounding is to nearest
// even; NaN stays NaN (quiet, sign kept); f16 overflow gives inf.
//   bf16: the top half of (bits + 0x7fff + bit 16 of bits)
//   f16:  normal numbers round their 13 dropped mantissa bits the same way
//         and rebias the exponent (127 - 15); below 2^-14 the value is
//         rounded at 2^-24 (subnormals).
fn to_bf16(u: u32) -> u32 {
  if ((u & 0x7fffffffu) > 0x7f800000u) { return (u >> 16u) | 0x40u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
fn to_f16(u: u32) -> u32 {
  let sign = (u >> 16u) & 0x8000u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7e00u; }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) { return sign | ((a + 0xfffu + ((a >> 13u) & 1u) - 0x38000000u) >> 13u); }
  return sign | u32(round(bitcast<f32>(a) * 16777216.0));  // exact scaling by 2^24, then ties to even
}
// The 16 bits of v.
fn half_bits(v: f32, mode: u32) -> u32 {
  return select(to_bf16(bitcast<u32>(v)), to_f16(bitcast<u32>(v)), mode == 1u);
}
// The two elements of a word, and the word of two values.
fn half_pair(word: u32, mode: u32) -> vec2f {
  if (mode == 1u) { return unpack2x16float(word); }
  return vec2f(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}
fn half_word(v: vec2f, mode: u32) -> u32 { return half_bits(v.x, mode) | (half_bits(v.y, mode) << 16u); }
