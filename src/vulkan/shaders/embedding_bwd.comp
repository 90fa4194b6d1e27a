#version 450
// Embedding, backward: one invocation per (v, d):
//   dW[v, d] (= or += with acc) = sum of dy[p, d] over the p with index[p] = v,
// in order of p (the lists of embedding_sort.comp); the padding row gets
// nothing (0, or left as it was with acc).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, D, acc; int padding_idx; } p;
#define DY 0
#define START 1
#define LIST 2
#define DW 3
void main() {
  FOR_EACH(i, p.n) {
    uint v = i / p.D, d = i % p.D;
    float s = 0.0;
    if (int(v) != p.padding_idx)
      for (uint j = slot[START].v[v]; j < slot[START].v[v + 1u]; j++) s += LD(DY, slot[LIST].v[j] * p.D + d);
    ST(DW, i, p.acc != 0u ? LD(DW, i) + s : s);
  }
}
