#version 450
// Selective scan, backward (scan.glsl): one invocation per (b, d), the
// chunks last to first; each chunk's states are recomputed from its saved
// chunk state into a scratch (T x N per (b, d)), then its steps walked
// backward with the state gradient g (a temporary (B, D, N)), a_t = exp(dt_t A):
//   dy'_t = dy_t silu(z_t) (dy_t without z);  g_t = C_t dy'_t + a_{t+1} g_{t+1}  (g_L = dfinal or 0)
//   dz_t = dy_t y'_t silu'(z_t);  du_t = D dy'_t + sum_n g_t dt_t B_t
//   ddelta_t = sum_n g_t (A a_t h_{t-1} + B_t u_t) * softplus'(dt raw)
//   dinitial_state = a_0 g_0
// and the per-(b, d) parts of the sums that reduce.comp finishes in a fixed
// order: dA[n] (sum_t g_t dt_t a_t h_{t-1}), dD (sum_t dy'_t u_t),
// ddelta_bias (sum_t ddelta_t), and dB, dC per (b, d, n, t):
// g_t dt_t u_t and dy'_t h_t.
#include "common.glsl"
#include "act.glsl"
#include "scan.glsl"
layout(local_size_x = 64) in;
#define DY 0
#define U 1
#define DELTA 2
#define A 3
#define BB 4
#define CC 5
#define DD 6
#define Z 7
#define DBIAS 8
#define DFINAL 10
#define CHUNKS 11
#define DU 12
#define DDELTA 13
#define DZ 14
#define DINIT 15
#define PA 16
#define PD 17
#define PDB 18
#define CB 19
#define CCON 20
#define HS 21
#define G 22
void main() {
  FOR_EACH(bd, p.B * p.D) {
    uint b = bd / p.D, d = bd % p.D;
    for (uint n = 0; n < p.N; n++) {
      ST(G, bd * p.N + n, p.has_final != 0u ? LD(DFINAL, bd * p.N + n) : 0.0);
      ST(PA, bd * p.N + n, 0.0);
    }
    float dD = 0.0, ddb = 0.0, Dd = p.has_D != 0u ? LD(DD, d) : 0.0;
    for (int c = int(p.nchunks) - 1; c >= 0; c--) {
      uint t0 = uint(c) * p.T, t1 = min(p.L, t0 + p.T);
      // States before each step of the chunk: hs[t - t0] = h_{t-1}.
      for (uint n = 0; n < p.N; n++) {
        float h = LD(CHUNKS, (bd * p.nchunks + uint(c)) * p.N + n);
        for (uint t = t0; t < t1; t++) {
          float dt = LD(DELTA, bd * p.L + t) + (p.has_db != 0u ? LD(DBIAS, d) : 0.0);
          if (p.softplus != 0u) dt = act_value(5u, dt, 1.0, 20.0);
          ST(HS, (bd * p.T + t - t0) * p.N + n, h);
          h = exp(dt * LD(A, d * p.N + n)) * h + dt * LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)) * LD(U, bd * p.L + t);
        }
      }
      for (uint t = t1; t-- > t0;) {
        float raw = LD(DELTA, bd * p.L + t) + (p.has_db != 0u ? LD(DBIAS, d) : 0.0);
        float dt = p.softplus != 0u ? act_value(5u, raw, 1.0, 20.0) : raw;
        float u = LD(U, bd * p.L + t), dy = LD(DY, bd * p.L + t);
        // y'_t = sum C h_t + D u, with h_t recomputed from h_{t-1}.
        float yp = Dd * u;
        for (uint n = 0; n < p.N; n++) {
          float hp = LD(HS, (bd * p.T + t - t0) * p.N + n), An = LD(A, d * p.N + n);
          float ht = exp(dt * An) * hp + dt * LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)) * u;
          yp += LD(CC, bc_index(p.var_c, p.Gc, b, d, n, t)) * ht;
        }
        float dyp = dy;
        if (p.has_z != 0u) {
          float z = LD(Z, bd * p.L + t);
          dyp = dy * act_value(3u, z, 1.0, 0.0);
          ST(DZ, bd * p.L + t, dy * yp * act_grad(3u, z, 1.0, 0.0));
        }
        float du = Dd * dyp, ddt = 0.0;
        for (uint n = 0; n < p.N; n++) {
          float hp = LD(HS, (bd * p.T + t - t0) * p.N + n), An = LD(A, d * p.N + n), an = exp(dt * An);
          float Bn = LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)), Cn = LD(CC, bc_index(p.var_c, p.Gc, b, d, n, t));
          float ht = an * hp + dt * Bn * u;
          float g = LD(G, bd * p.N + n) + Cn * dyp;
          du += g * dt * Bn;
          ddt += g * (An * an * hp + Bn * u);
          ST(PA, bd * p.N + n, LD(PA, bd * p.N + n) + g * dt * an * hp);
          ST(CB, ((bd * p.N + n) * p.L) + t, g * dt * u);
          ST(CCON, ((bd * p.N + n) * p.L) + t, dyp * ht);
          ST(G, bd * p.N + n, g * an);
        }
        float ddelta = ddt * (p.softplus != 0u ? act_grad(5u, raw, 1.0, 20.0) : 1.0);
        ST(DU, bd * p.L + t, du);
        ST(DDELTA, bd * p.L + t, ddelta);
        dD += dyp * u;
        ddb += ddelta;
      }
    }
    if (p.has_init != 0u)
      for (uint n = 0; n < p.N; n++) ST(DINIT, bd * p.N + n, LD(G, bd * p.N + n));
    ST(PD, bd, dD);
    ST(PDB, bd, ddb);
  }
}
