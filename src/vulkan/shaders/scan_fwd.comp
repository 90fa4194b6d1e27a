#version 450
// Selective scan, forward (scan.glsl): one invocation per (b, d), walking
// the steps in order with its state h (any N) in a temporary (B, D, N):
//   h_t[n] = exp(dt_t A[d,n]) h_{t-1}[n] + dt_t B_t[n] u_t   (h_{-1} = initial state or 0)
//   y_t = (sum_n C_t[n] h_t[n] + D[d] u_t) * (z ? silu(z_t) : 1)
// chunk_states[c] = the state before step c T; final_state = h_{L-1}.
// (The sequential form: chunks are not scanned in parallel.)
#include "common.glsl"
#include "act.glsl"
#include "scan.glsl"
layout(local_size_x = 64) in;
#define U 0
#define DELTA 1
#define A 2
#define BB 3
#define CC 4
#define DD 5
#define Z 6
#define DBIAS 7
#define INIT 8
#define Y 9
#define CHUNKS 10
#define FINAL 11
#define H 12
void main() {
  FOR_EACH(bd, p.B * p.D) {
    uint b = bd / p.D, d = bd % p.D;
    for (uint n = 0; n < p.N; n++) ST(H, bd * p.N + n, p.has_init != 0u ? LD(INIT, bd * p.N + n) : 0.0);
    for (uint t = 0; t < p.L; t++) {
      if (t % p.T == 0u)
        for (uint n = 0; n < p.N; n++) ST(CHUNKS, (bd * p.nchunks + t / p.T) * p.N + n, LD(H, bd * p.N + n));
      float dt = LD(DELTA, bd * p.L + t) + (p.has_db != 0u ? LD(DBIAS, d) : 0.0);
      if (p.softplus != 0u) dt = act_value(5u, dt, 1.0, 20.0);
      float u = LD(U, bd * p.L + t), y = 0.0;
      for (uint n = 0; n < p.N; n++) {
        float h = exp(dt * LD(A, d * p.N + n)) * LD(H, bd * p.N + n) + dt * LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)) * u;
        ST(H, bd * p.N + n, h);
        y += LD(CC, bc_index(p.var_c, p.Gc, b, d, n, t)) * h;
      }
      if (p.has_D != 0u) y += LD(DD, d) * u;
      if (p.has_z != 0u) y *= act_value(3u, LD(Z, bd * p.L + t), 1.0, 0.0);
      ST(Y, bd * p.L + t, y);
    }
    if (p.has_final != 0u)
      for (uint n = 0; n < p.N; n++) ST(FINAL, bd * p.N + n, LD(H, bd * p.N + n));
  }
}
