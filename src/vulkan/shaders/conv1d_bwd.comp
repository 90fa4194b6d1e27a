#version 450
// Causal depthwise conv1d, backward (conv1d.glsl), three passes:
//   mode 0, per (b,d,t): g = dy (silu ? silu'(pre) : 1), into a temporary (B, D, L)
//   mode 1, per (b,d,p), p < L+W-1:
//     dxpad[p] = sum_k weight[d,k] g[p-k] (0 <= p-k < L) + (p >= L ? dfinal_state[p-L] : 0)
//     dx[t] = dxpad[t+W-1];  dinitial_state[j] = dxpad[j]
//   mode 2, per (d, k), k <= W: summed over b, then t in blocks of 64 steps
//   (each block summed, then added: a shorter rounding chain), in order:
//     dweight[d,k] = sum g[b,d,t] xpad[b,d,t+k] (k < W);  dbias[d] = sum g (k = W)
#include "common.glsl"
#include "act.glsl"
#include "conv1d.glsl"
layout(local_size_x = 64) in;
#define DY 0
#define X 1
#define WEIGHT 2
#define BIAS 3
#define INIT 4
#define DFINAL 5
#define G 6
#define DX 7
#define DWEIGHT 8
#define DBIAS 9
#define DINIT 10
float xpad(uint b, uint d, uint q) {
  if (q >= p.W - 1) return LD(X, xi(b, d, q - (p.W - 1)));
  return p.has_init != 0u ? LD(INIT, si(b, d, q)) : 0.0;
}
void main() {
  if (p.mode == 0u) {
    FOR_EACH(i, p.B * p.D * p.L) {
      uint t = i % p.L, d = (i / p.L) % p.D, b = i / (p.L * p.D);
      float g = LD(DY, xi(b, d, t));
      if (p.silu != 0u) {
        float pre = p.has_bias != 0u ? LD(BIAS, d) : 0.0;
        for (uint k = 0; k < p.W; k++) pre += LD(WEIGHT, d * p.W + k) * xpad(b, d, t + k);
        g *= act_grad(3u, pre, 1.0, 0.0);
      }
      ST(G, i, g);
    }
  } else if (p.mode == 1u) {
    uint P = p.L + p.W - 1;
    FOR_EACH(i, p.B * p.D * P) {
      uint q = i % P, bd = i / P, d = bd % p.D, b = bd / p.D;
      float s = 0.0;
      for (uint k = 0; k < p.W; k++)
        if (q >= k && q - k < p.L) s += LD(WEIGHT, d * p.W + k) * LD(G, bd * p.L + q - k);
      if (p.has_final != 0u && q >= p.L) s += LD(DFINAL, si(b, d, q - p.L));
      if (q >= p.W - 1) ST(DX, xi(b, d, q - (p.W - 1)), s);
      else if (p.has_init != 0u) ST(DINIT, si(b, d, q), s);
    }
  } else {
    FOR_EACH(i, p.D * (p.W + 1)) {
      uint k = i % (p.W + 1), d = i / (p.W + 1);
      if (k == p.W && p.has_bias == 0u) continue;
      float s = 0.0;
      for (uint b = 0; b < p.B; b++)
        for (uint t0 = 0; t0 < p.L; t0 += 64) {
          float block = 0.0;
          for (uint t = t0; t < min(p.L, t0 + 64); t++)
            block += LD(G, (b * p.D + d) * p.L + t) * (k < p.W ? xpad(b, d, t + k) : 1.0);
          s += block;
        }
      if (k < p.W) ST(DWEIGHT, d * p.W + k, p.acc != 0u ? LD(DWEIGHT, d * p.W + k) + s : s);
      else ST(DBIAS, d, p.acc != 0u ? LD(DBIAS, d) + s : s);
    }
  }
}
