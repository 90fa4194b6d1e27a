#version 450
// Gated activation, backward (indexing of gated_fwd.comp; DA = DB = dx in
// the split form, dx and dgate in the two-tensor form):
//   da = dy act(b),  db = dy a act'(b)
#include "common.glsl"
#include "act.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, inner, stride, b_offset, act; float beta, threshold; } p;
#define DY 0
#define A 1
#define B 2
#define DA 3
#define DB 4
void main() {
  FOR_EACH(i, p.n) {
    uint e = (i / p.inner) * p.stride + i % p.inner;
    float a = LD(A, e), b = LD(B, e + p.b_offset), dy = LD(DY, i);
    ST(DA, e, dy * act_value(p.act, b, p.beta, p.threshold));
    ST(DB, e + p.b_offset, dy * a * act_grad(p.act, b, p.beta, p.threshold));
  }
}
