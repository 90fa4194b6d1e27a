#version 450
// Cross-entropy, per row of V logits (one workgroup per row), target t,
// eps = label smoothing:
//   m = max x, s = sum exp(x - m), lse = m + log s
//   loss_r = (1 - eps)(lse - x_t) + eps (lse - sum(x) / V); 0 when t is ignore_index
// (lse - x computed as (m - x) + log s, exact for logits of any size).
// Writes loss_r, m and s to temporaries for ce_sum.comp and ce_grad.comp.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, V; int ignore_index; float eps; } p;
#define LOGITS 0
#define TARGET 1
#define ROWLOSS 2
#define ROWMAX 3
#define ROWSUM 4
void main() {
  uint t = gl_LocalInvocationID.x;
  FOR_EACH_ROW(r, p.rows) {
    uint base = r * p.V;
    float m = NEG_INF, sx = 0.0;
    for (uint c = t; c < p.V; c += 256) {
      float x = LD(LOGITS, base + c);
      m = max(m, x);
      sx += x;
    }
    m = workgroup_max(m);
    sx = workgroup_sum(sx);
    float s = 0.0;
    for (uint c = t; c < p.V; c += 256) s += exp(LD(LOGITS, base + c) - m);
    s = workgroup_sum(s);
    if (t == 0u) {
      int target = LDI(TARGET, r);
      float ls = log(s);
      float loss = target == p.ignore_index ? 0.0
                 : (1.0 - p.eps) * ((m - LD(LOGITS, base + uint(target))) + ls) + p.eps * ((m - sx / float(p.V)) + ls);
      ST(ROWLOSS, r, loss);
      ST(ROWMAX, r, m);
      ST(ROWSUM, r, s);
    }
  }
}
