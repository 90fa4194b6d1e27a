#version 450
// Embedding, backward, first pass (one workgroup of 256): the positions p of
// each row v, in order of p, as a counting sort:
//   start[v] = number of positions with index < v (start[V] = P)
//   list[start[v] ..< start[v + 1]] = the p with index[p] = v, ascending
// so that embedding_bwd.comp sums each row's gradients in order of p.
// The counts (integer atomics: exact, so the same every run) and the prefix
// sum over the V + 1 entries (each invocation a contiguous block, the
// blocks' offsets by invocation 0) are shared by the workgroup; the
// placement walks the positions in order on one invocation (O(P), stable).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint P, V; } p;
#define INDEX 0
#define START 1
#define LIST 2
#define FILL 3
shared uint block_sum[256];
void main() {
  uint t = gl_LocalInvocationID.x;
  for (uint v = t; v <= p.V; v += 256u) slot[START].v[v] = 0u;
  memoryBarrierBuffer();
  barrier();
  for (uint i = t; i < p.P; i += 256u) atomicAdd(slot[START].v[uint(LDI(INDEX, i)) + 1u], 1u);
  memoryBarrierBuffer();
  barrier();
  // Inclusive prefix sum of start[0 ..= V]: block sums, their exclusive scan, then each block.
  uint per = (p.V + 1u + 255u) / 256u, lo = min(t * per, p.V + 1u), hi = min(lo + per, p.V + 1u);
  uint s = 0u;
  for (uint v = lo; v < hi; v++) s += slot[START].v[v];
  block_sum[t] = s;
  barrier();
  if (t == 0u) {
    uint run = 0u;
    for (uint k = 0u; k < 256u; k++) {
      uint b = block_sum[k];
      block_sum[k] = run;
      run += b;
    }
  }
  barrier();
  uint run = block_sum[t];
  for (uint v = lo; v < hi; v++) {
    run += slot[START].v[v];
    slot[START].v[v] = run;
    if (v < p.V) slot[FILL].v[v] = run;
  }
  memoryBarrierBuffer();
  barrier();
  if (t == 0u)
    for (uint i = 0u; i < p.P; i++) {
      uint v = uint(LDI(INDEX, i));
      slot[LIST].v[slot[FILL].v[v]] = i;
      slot[FILL].v[v] += 1u;
    }
}
