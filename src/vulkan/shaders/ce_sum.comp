#version 450
// Cross-entropy, the total: one workgroup sums the rows' losses (each
// invocation a strided run of rows in order, then workgroup_sum) and counts
// the rows not ignored. Forward writes LOSS = sum, or sum / count for the
// mean (NaN when every row is ignored). Both directions write the scale of
// the gradient, g = dloss (/ count for the mean), dloss = grad_scale in the
// forward (fused gradient), DLOSS in the backward.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, mean, backward; int ignore_index; float grad_scale; } p;
#define ROWLOSS 0
#define TARGET 1
#define LOSS 2
#define DLOSS 3
#define GSCALE 4
void main() {
  uint t = gl_LocalInvocationID.x;
  float s = 0.0, n = 0.0;
  for (uint r = t; r < p.rows; r += 256) {
    if (p.backward == 0u) s += LD(ROWLOSS, r);
    n += LDI(TARGET, r) != p.ignore_index ? 1.0 : 0.0;
  }
  s = workgroup_sum(s);
  n = workgroup_sum(n);
  if (t == 0u) {
    if (p.backward == 0u) ST(LOSS, 0, p.mean != 0u ? (n > 0.0 ? s / n : QNAN) : s);
    float dloss = p.backward != 0u ? LD(DLOSS, 0) : p.grad_scale;
    ST(GSCALE, 0, p.mean != 0u ? dloss / n : dloss);
  }
}
