// Selective scan: sizes and indexing shared by scan_fwd.comp and
// scan_bwd.comp. u, delta, z, y (B, D, L); A (D, N); B and C (D, N) when
// shared, else (B, G, N, L) (per batch: G = 1), channel d in group
// d / (D / G); state (B, D, N), chunk states (B, D, nchunks, N).
//   dt = delta + delta_bias, softplus'ed (threshold 20) with delta_softplus
layout(push_constant) uniform Push {
  uint B, D, L, N, T, nchunks, Gb, Gc, var_b, var_c, has_D, has_z, has_db, softplus, has_init, has_final;
} p;
uint bc_index(uint var_, uint G, uint b, uint d, uint n, uint t) {
  return var_ != 0u ? ((b * G + d / (p.D / G)) * p.N + n) * p.L + t : d * p.N + n;
}

// Lanes: a workgroup of 64 invocations takes 64 / S channels (b, d), S
// lanes each, S the power of two >= N (at most 64). Lane j owns states
// n = j, j + S, ...: the first SCAN_REGS of them in registers, the rest in a
// (B, D, N) temporary. Sums over n that every step needs are finished by
// lane 0 from the lanes' parts in lane order, so for N <= 64 they add
// n = 0, 1, ... in turn, as a sequential walk would.
#define SCAN_WG 64u
#define SCAN_REGS 4u
uint scan_lanes() {
  uint s = 1u;
  while (s < p.N && s < SCAN_WG) s <<= 1;
  return s;
}
