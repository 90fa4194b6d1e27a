#version 450
// Rotary position embedding, one invocation per rotated pair. Pair i of
// position t turns by the angle whose cos and sin the host computed in f64
// (table[(t * half + i) * 2 + {0, 1}], half = Dh / 2):
//   (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin); backward: sin -> -sin
// Pairs (i, i + half) (rotate-half) or (2i, 2i + 1) (interleaved); x is
// (B, T, H, Dh) or (B, H, T, Dh). Y may be X.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { uint n, T, H, Dh, bhtd, interleaved, inverse; } p;
#define X 0
#define TABLE 1
#define Y 2
void main() {
  uint half_ = p.Dh / 2;
  FOR_EACH(q, p.n) {
    uint i = q % half_, row = q / half_;  // row: (b, t, h) or (b, h, t)
    uint t = p.bhtd != 0u ? row % p.T : (row / p.H) % p.T;
    uint ea = row * p.Dh + (p.interleaved != 0u ? 2 * i : i), eb = ea + (p.interleaved != 0u ? 1 : half_);
    float c = LD(TABLE, (t * half_ + i) * 2), s = LD(TABLE, (t * half_ + i) * 2 + 1);
    if (p.inverse != 0u) s = -s;
    float a = LD(X, ea), b = LD(X, eb);
    ST(Y, ea, a * c - b * s);
    ST(Y, eb, b * c + a * s);
  }
}
