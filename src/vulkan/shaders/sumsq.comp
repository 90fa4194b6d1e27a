#version 450
// Sum of squares of the gradients (gk_clip_grad_norm), in f32, in a fixed
// order (no atomics), in two modes:
//   mode 0, per tensor X of n elements: workgroup k of the G dispatched sums
//     x[i]^2 over its invocations' grid-stride elements (invocation t: i =
//     256 k + t, then + 256 G, ... in order), then the tree of 256
//     (workgroup_sum):  PARTIALS[first + k] = that sum
//   mode 1, once for all tensors: workgroup r per tensor r, whose partials
//     are the run of TABLE[2 r + 1] from TABLE[2 r]: invocation t sums
//     partials t, t + 256, ... in order, then the tree:  SUMS[r] = that sum
// The host adds SUMS in tensor order in f64.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint mode, n, first, tensors; } p;
#define X 0
#define PARTIALS 1
#define TABLE 2
#define SUMS 3
void main() {
  uint t = gl_LocalInvocationID.x;
  if (p.mode == 0u) {
    float s = 0.0;
    FOR_EACH(i, p.n) {
      float x = LD(X, i);
      s += x * x;
    }
    s = workgroup_sum(s);
    if (t == 0u) ST(PARTIALS, p.first + gl_WorkGroupID.x, s);
    return;
  }
  FOR_EACH_ROW(r, p.tensors) {
    uint start = slot[TABLE].v[2 * r], count = slot[TABLE].v[2 * r + 1];
    float s = 0.0;
    for (uint k = t; k < count; k += 256u) s += LD(PARTIALS, start + k);
    s = workgroup_sum(s);
    if (t == 0u) ST(SUMS, r, s);
  }
}
