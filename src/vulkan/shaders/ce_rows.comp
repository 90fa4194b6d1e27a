#version 450
// Cross-entropy, per row of V logits (one workgroup per row), target t,
// eps = label smoothing:
//   lse = m + log(sum exp(x - m)), m = max x
//   loss_r = (1 - eps)(lse - x_t) + eps (lse - sum(x) / V); 0 when t is ignore_index
// Writes loss_r and lse to temporaries for ce_sum.comp and ce_grad.comp.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint rows, V; int ignore_index; float eps; } p;
#define LOGITS 0
#define TARGET 1
#define ROWLOSS 2
#define LSE 3
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
    float lse = m + log(workgroup_sum(s));
    if (t == 0u) {
      int target = LDI(TARGET, r);
      float loss = target == p.ignore_index ? 0.0
                 : (1.0 - p.eps) * (lse - LD(LOGITS, base + uint(target))) + p.eps * (lse - sx / float(p.V));
      ST(ROWLOSS, r, loss);
      ST(LSE, r, lse);
    }
  }
}
