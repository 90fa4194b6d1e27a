#version 450
// Cross-entropy, the gradient per row (one workgroup per row):
//   dlogits = g (exp(x - m) / s - (1 - eps) onehot(t) - eps / V), 0 for ignored rows
// (m, s: the row's max and sum of exp(x - m), from ce_rows.comp)
// DLOGITS may be LOGITS (each element read, then written, by one invocation).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, V; int ignore_index; float eps; } p;
#define LOGITS 0
#define TARGET 1
#define ROWMAX 2
#define ROWSUM 3
#define GSCALE 4
#define DLOGITS 5
void main() {
  uint t = gl_LocalInvocationID.x;
  float g = LD(GSCALE, 0);
  FOR_EACH_ROW(r, p.rows) {
    uint base = r * p.V;
    int target = LDI(TARGET, r);
    float m = LD(ROWMAX, r), s = LD(ROWSUM, r);
    for (uint c = t; c < p.V; c += 256) {
      float d = 0.0;
      if (target != p.ignore_index)
        d = g * (exp(LD(LOGITS, base + c) - m) / s - (int(c) == target ? 1.0 - p.eps : 0.0) - p.eps / float(p.V));
      ST(DLOGITS, base + c, d);
    }
  }
}
