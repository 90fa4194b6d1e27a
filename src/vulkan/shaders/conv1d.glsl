// Causal depthwise conv1d: indexing shared by conv1d_fwd.comp and
// conv1d_bwd.comp. x, y, dy, dx are (B, D, L), or (B, L, D) with
// channel_last; weight (D, W); states (B, D, W-1).
//   xpad[b,d,p] = p < W-1 ? initial_state[b,d,p] (0 without one) : x[b,d,p-(W-1)]
//   pre[b,d,t] = bias[d] + sum_k weight[d,k] xpad[b,d,t+k]
layout(push_constant) uniform Push { uint B, D, L, W, channel_last, has_bias, silu, has_init, has_final, mode, acc; } p;
uint xi(uint b, uint d, uint t) { return p.channel_last != 0u ? (b * p.L + t) * p.D + d : (b * p.D + d) * p.L + t; }
uint si(uint b, uint d, uint j) { return (b * p.D + d) * (p.W - 1) + j; }
