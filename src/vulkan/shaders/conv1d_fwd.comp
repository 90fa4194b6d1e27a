#version 450
// Causal depthwise conv1d, forward (conv1d.glsl), one invocation per
// element: mode 0: y[b,d,t] = act(pre[b,d,t]) (act: identity or SiLU);
// mode 1: final_state[b,d,j] = xpad[b,d,L+j], j < W-1.
#include "common.glsl"
#include "act.glsl"
#include "conv1d.glsl"
layout(local_size_x = 256) in;
#define X 0
#define WEIGHT 1
#define BIAS 2
#define INIT 3
#define Y 4
#define FINAL 5
float xpad(uint b, uint d, uint q) {
  if (q >= p.W - 1) return LD(X, xi(b, d, q - (p.W - 1)));
  return p.has_init != 0u ? LD(INIT, si(b, d, q)) : 0.0;
}
void main() {
  if (p.mode == 0u) {
    FOR_EACH(i, p.B * p.D * p.L) {
      uint t = i % p.L, d = (i / p.L) % p.D, b = i / (p.L * p.D);
      float pre = p.has_bias != 0u ? LD(BIAS, d) : 0.0;
      for (uint k = 0; k < p.W; k++) pre += LD(WEIGHT, d * p.W + k) * xpad(b, d, t + k);
      ST(Y, xi(b, d, t), p.silu != 0u ? act_value(3u, pre, 1.0, 0.0) : pre);
    }
  } else {
    FOR_EACH(i, p.B * p.D * (p.W - 1)) {
      uint j = i % (p.W - 1), bd = i / (p.W - 1);
      ST(FINAL, i, xpad(bd / p.D, bd % p.D, p.L + j));
    }
  }
}
