#version 450
// Gated activation, backward (indexing of gated_fwd.comp; DA = DB = dx in
// the split form, dx and dgate in the two-tensor form):
//   da = dy act(b),  db = dy a act'(b)
#include "common.glsl"
#include "act.glsl"
#include "half.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, inner, stride, b_offset, act; float beta, threshold; uint half_; } p;
#define DY 0
#define A 1
#define B 2
#define DA 3
#define DB 4
void main() {
  if (p.half_ != 0u) {  // words of two f16/bf16 elements (half.glsl); inner is even or p.n
    FOR_EACH(w, (p.n + 1u) / 2u) {
      uint i = 2u * w, e = (i / p.inner) * p.stride + i % p.inner;
      vec2 a = half2_load(slot[A].v[e / 2u], p.half_), b = half2_load(slot[B].v[(e + p.b_offset) / 2u], p.half_);
      vec2 dy = half2_load(slot[DY].v[w], p.half_);
      vec2 act = vec2(act_value(p.act, b.x, p.beta, p.threshold), act_value(p.act, b.y, p.beta, p.threshold));
      vec2 grad = vec2(act_grad(p.act, b.x, p.beta, p.threshold), act_grad(p.act, b.y, p.beta, p.threshold));
      half2_store(DA, e / 2u, p.n, dy * act, p.half_);
      half2_store(DB, (e + p.b_offset) / 2u, p.n, dy * a * grad, p.half_);
    }
    return;
  }
  FOR_EACH(i, p.n) {
    uint e = (i / p.inner) * p.stride + i % p.inner;
    float a = LD(A, e), b = LD(B, e + p.b_offset), dy = LD(DY, i);
    ST(DA, e, dy * act_value(p.act, b, p.beta, p.threshold));
    ST(DB, e + p.b_offset, dy * a * act_grad(p.act, b, p.beta, p.threshold));
  }
}
