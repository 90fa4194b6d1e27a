#version 450
// Selective scan, backward (scan.glsl): S lanes per (b, d), one or more
// states n each (their g and dA parts in registers), the chunks last to first; each chunk's states are recomputed from its saved
// chunk state into a scratch (T x N per (b, d)), then its steps walked
// backward with the state gradient g, a_t = exp(dt_t A):
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
// The lanes' parts of y'_t (sum C h_t), du_t and ddelta_t.
shared float part_y[SCAN_WG], part_du[SCAN_WG], part_dt[SCAN_WG];

// One state n at step t: its parts of y', du and ddelta; g (the state
// gradient after step t on entry, before it on return) and dA's part.
void state_step(uint bd, uint b, uint d, uint n, uint t, uint t0, float dt, float u, float dyp, inout float g,
                inout float pa, inout float py, inout float pdu, inout float pdt) {
  float hp = LD(HS, (bd * p.T + t - t0) * p.N + n), An = LD(A, d * p.N + n), an = exp(dt * An);
  float Bn = LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)), Cn = LD(CC, bc_index(p.var_c, p.Gc, b, d, n, t));
  float ht = an * hp + dt * Bn * u;
  py += Cn * ht;
  g += Cn * dyp;
  pdu += g * dt * Bn;
  pdt += g * (An * an * hp + Bn * u);
  pa += g * dt * an * hp;
  ST(CB, ((bd * p.N + n) * p.L) + t, g * dt * u);
  ST(CCON, ((bd * p.N + n) * p.L) + t, dyp * ht);
  g *= an;
}

void main() {
  uint S = scan_lanes(), per_group = SCAN_WG / S, lane = gl_LocalInvocationID.x % S;
  uint first = gl_LocalInvocationID.x - lane;
  for (uint base = gl_WorkGroupID.x * per_group; base < p.B * p.D; base += gl_NumWorkGroups.x * per_group) {
    uint bd = base + gl_LocalInvocationID.x / S;
    bool live = bd < p.B * p.D;
    uint b = bd / p.D, d = bd % p.D;
    float g[SCAN_REGS], pa[SCAN_REGS];
    for (uint k = 0; k < SCAN_REGS; k++) {
      uint n = lane + k * S;
      g[k] = live && n < p.N && p.has_final != 0u ? LD(DFINAL, bd * p.N + n) : 0.0;
      pa[k] = 0.0;
    }
    if (live)
      for (uint n = lane + SCAN_REGS * S; n < p.N; n += S) {
        ST(G, bd * p.N + n, p.has_final != 0u ? LD(DFINAL, bd * p.N + n) : 0.0);
        ST(PA, bd * p.N + n, 0.0);
      }
    float dD = 0.0, ddb = 0.0, Dd = live && p.has_D != 0u ? LD(DD, d) : 0.0;
    float dbias = live && p.has_db != 0u ? LD(DBIAS, d) : 0.0;
    for (int c = int(p.nchunks) - 1; c >= 0; c--) {
      uint t0 = uint(c) * p.T, t1 = min(p.L, t0 + p.T);
      // States before each step of the chunk, each lane its own: hs[t - t0] = h_{t-1}.
      if (live)
        for (uint n = lane; n < p.N; n += S) {
          float h = LD(CHUNKS, (bd * p.nchunks + uint(c)) * p.N + n);
          for (uint t = t0; t < t1; t++) {
            float dt = LD(DELTA, bd * p.L + t) + dbias;
            if (p.softplus != 0u) dt = act_value(5u, dt, 1.0, 20.0);
            ST(HS, (bd * p.T + t - t0) * p.N + n, h);
            h = exp(dt * LD(A, d * p.N + n)) * h + dt * LD(BB, bc_index(p.var_b, p.Gb, b, d, n, t)) * LD(U, bd * p.L + t);
          }
        }
      for (uint t = t1; t-- > t0;) {
        float py = 0.0, pdu = 0.0, pdt = 0.0, raw = 0.0, dt = 0.0, u = 0.0, dyp = 0.0;
        if (live) {
          raw = LD(DELTA, bd * p.L + t) + dbias;
          dt = p.softplus != 0u ? act_value(5u, raw, 1.0, 20.0) : raw;
          u = LD(U, bd * p.L + t);
          dyp = LD(DY, bd * p.L + t);
          if (p.has_z != 0u) dyp *= act_value(3u, LD(Z, bd * p.L + t), 1.0, 0.0);
          for (uint k = 0; k < SCAN_REGS; k++)
            if (lane + k * S < p.N) state_step(bd, b, d, lane + k * S, t, t0, dt, u, dyp, g[k], pa[k], py, pdu, pdt);
          for (uint n = lane + SCAN_REGS * S; n < p.N; n += S) {
            float gn = LD(G, bd * p.N + n), pn = LD(PA, bd * p.N + n);
            state_step(bd, b, d, n, t, t0, dt, u, dyp, gn, pn, py, pdu, pdt);
            ST(G, bd * p.N + n, gn);
            ST(PA, bd * p.N + n, pn);
          }
        }
        part_y[gl_LocalInvocationID.x] = py;
        part_du[gl_LocalInvocationID.x] = pdu;
        part_dt[gl_LocalInvocationID.x] = pdt;
        barrier();
        if (live && lane == 0u) {
          // y'_t = D u + sum C h_t (for dz); du_t = D dy'_t + sum g dt B; ddelta_t.
          float yp = Dd * u, du = Dd * dyp, ddt = 0.0;
          for (uint j = 0; j < S; j++) {
            yp += part_y[first + j];
            du += part_du[first + j];
            ddt += part_dt[first + j];
          }
          if (p.has_z != 0u) {
            float z = LD(Z, bd * p.L + t);
            ST(DZ, bd * p.L + t, LD(DY, bd * p.L + t) * yp * act_grad(3u, z, 1.0, 0.0));
          }
          float ddelta = ddt * (p.softplus != 0u ? act_grad(5u, raw, 1.0, 20.0) : 1.0);
          ST(DU, bd * p.L + t, du);
          ST(DDELTA, bd * p.L + t, ddelta);
          dD += dyp * u;
          ddb += ddelta;
        }
        barrier();
      }
    }
    if (live) {
      for (uint k = 0; k < SCAN_REGS; k++) {
        uint n = lane + k * S;
        if (n < p.N) {
          ST(PA, bd * p.N + n, pa[k]);
          if (p.has_init != 0u) ST(DINIT, bd * p.N + n, g[k]);
        }
      }
      if (p.has_init != 0u)
        for (uint n = lane + SCAN_REGS * S; n < p.N; n += S) ST(DINIT, bd * p.N + n, LD(G, bd * p.N + n));
      if (lane == 0u) {
        ST(PD, bd, dD);
        ST(PDB, bd, ddb);
      }
    }
  }
}
