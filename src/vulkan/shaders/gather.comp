#version 450
// A view of any strides (stride 0 for broadcast) into a contiguous temporary:
//   tmp[i] = src[offset + sum_k idx_k(i) stride_k], i row-major over shape,
// converted to f32 bits (f32, f16, bf16) or to an i32 (i32, i64 indices;
// an i64 index is its low word: gk_plan_run has checked its range).
// Slot 0: the source buffer as words (offset and strides in its elements);
// slot 1: the temporary.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, rank, mode, offset; int shape[8], strides[8]; } p;
#define SRC 0
#define TMP 1
void main() {
  FOR_EACH(i, p.n) {
    int e = int(p.offset), rest = int(i);
    for (int k = int(p.rank) - 1; k >= 0; k--) {
      e += (rest % p.shape[k]) * p.strides[k];
      rest /= p.shape[k];
    }
    uint word;
    if (p.mode == 0u || p.mode == 3u) word = slot[SRC].v[e];                     // f32, i32
    else if (p.mode == 4u) word = slot[SRC].v[2 * e];                            // i64: the low word
    else {
      uint half_bits = (slot[SRC].v[e >> 1] >> (16 * (e & 1))) & 0xffffu;
      word = p.mode == 1u ? floatBitsToUint(unpackHalf2x16(half_bits).x) : half_bits << 16;  // f16, bf16
    }
    slot[TMP].v[i] = word;
  }
}
