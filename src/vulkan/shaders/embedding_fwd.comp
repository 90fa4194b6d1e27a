#version 450
// Embedding, forward: y[p, d] = W[index[p], d], one invocation per element.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, D; } p;
#define W 0
#define INDEX 1
#define Y 2
void main() {
  FOR_EACH(i, p.n) ST(Y, i, LD(W, uint(LDI(INDEX, i / p.D)) * p.D + i % p.D));
}
