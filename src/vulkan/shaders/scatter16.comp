#version 450
// scatter.comp for f16 (mode 1) and bf16 (mode 2) outputs, rounding the f32
// values to nearest even (half.glsl).
// Needs 16-bit storage (storageBuffer16BitAccess).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#include "common.glsl"
#include "half.glsl"
layout(set = 0, binding = 0) buffer Slot16 { uint16_t h[]; } slot16[VK_SLOTS];
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, rank, mode, offset; int shape[8], strides[8]; } p;
#define DST 0
#define TMP 1
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
