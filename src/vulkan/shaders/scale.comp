#version 450
// Gradient clipping's scaling (gk_clip_grad_norm): g[i] *= factor in f32,
// one invocation per element, factor = max_norm / (norm + 1e-6) formed in
// double on the host and pushed as f32 (as the host path casts it).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n; float factor; } p;
#define G 0
void main() {
  FOR_EACH(i, p.n) ST(G, i, LD(G, i) * p.factor);
}
