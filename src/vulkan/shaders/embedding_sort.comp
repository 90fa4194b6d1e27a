#version 450
// Embedding, backward, first pass (one invocation): the positions p of each
// row v, in order of p, as a counting sort:
//   start[v] = number of positions with index < v (start[V] = P)
//   list[start[v] ..< start[v + 1]] = the p with index[p] = v, ascending
// so that embedding_bwd.comp sums each row's gradients in order of p.
// Sequential, O(P + V): cheap next to the P D gradient it orders.
#include "common.glsl"
layout(local_size_x = 1) in;
layout(push_constant) uniform Push { uint P, V; } p;
#define INDEX 0
#define START 1
#define LIST 2
#define FILL 3
void main() {
  for (uint v = 0; v <= p.V; v++) slot[START].v[v] = 0u;
  for (uint i = 0; i < p.P; i++) slot[START].v[uint(LDI(INDEX, i)) + 1u] += 1u;
  for (uint v = 0; v < p.V; v++) {
    slot[START].v[v + 1u] += slot[START].v[v];
    slot[FILL].v[v] = slot[START].v[v];
  }
  for (uint i = 0; i < p.P; i++) {
    uint v = uint(LDI(INDEX, i));
    slot[LIST].v[slot[FILL].v[v]] = i;
    slot[FILL].v[v] += 1u;
  }
}
