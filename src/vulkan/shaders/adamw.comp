#version 450
// AdamW, one step (gk_adamw_step), one invocation per element, in f32 in
// torch's order (single-tensor path; src/optim/optim.c's adamw_piece):
//   p = p decay                                  its own rounding (precise), decay = 1 - lr wd
//   m = m + w (g - m)         when |w| < 0.5 (lerp_small), w = 1 - beta1
//   m = g - (g - m) (1 - w)   otherwise (torch's lerp)
//   v = v beta2 + w2 g g                         w2 = 1 - beta2
//   p = p + neg_step m / (sqrt(v) / bc2 + eps)   neg_step = -lr / (1 - beta1^step), bc2 = sqrt(1 - beta2^step)
// The scalars are formed in double on the host and pushed as f32. P, M, V
// are updated in place; each element is read and written by one invocation.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, lerp_small; float decay, w, beta2, w2, bc2, eps, neg_step; } p;
#define P 0
#define G 1
#define M 2
#define V 3
void main() {
  FOR_EACH(i, p.n) {
    precise float decayed = LD(P, i) * p.decay;
    float g = LD(G, i), m = LD(M, i);
    m = p.lerp_small != 0u ? m + p.w * (g - m) : g - (g - m) * (1.0 - p.w);
    float v = LD(V, i) * p.beta2 + p.w2 * g * g;
    ST(M, i, m);
    ST(V, i, v);
    ST(P, i, decayed + p.neg_step * m / (sqrt(v) / p.bc2 + p.eps));
  }
}
