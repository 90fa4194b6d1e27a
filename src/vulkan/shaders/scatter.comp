#version 450
// The inverse of gather.comp for f32 outputs: dst[offset + sum_k idx_k(i)
// stride_k] = tmp[i]. Slot 0: the output's buffer; slot 1: the temporary.
#include "common.glsl"
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
    slot[DST].v[e] = slot[TMP].v[i];
  }
}
