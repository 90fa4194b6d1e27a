// Selective scan. u, delta, z, y (Bt, D, L); A (D, N); B and C (D, N)
// shared, or per batch (Bt, G, N, L) (BATCH is G = 1): channel d reads
// group d / (D/G). The state h (N <= 64) is walked sequentially in time, a
// lane per state n: a workgroup of 64 takes 64 / S channels (b, d), S lanes
// each (S the power of two >= N); the sums over n that a step needs are
// finished by lane 0 from the lanes' parts, in n order.
//   dt_t = delta_t + delta_bias, softplus'ed with delta_softplus;  a_t[n] = exp(dt_t A[n])
//   forward   h_t = a_t h_{t-1} + dt_t B_t u_t;  y'_t = sum_n C_t h_t + D u_t;  y_t = y'_t silu(z_t)
//             chunk_states[c] = h before step c T; final = h_{L-1}
//   backward  chunk by chunk from the last: the chunk's states recomputed from
//             chunk_states into scratch, then its steps walked backward with the
//             state gradient g (g_L = dfinal):  dy' = dy silu(z), dz = dy y' silu'(z),
//             g_t = g_{t+1} a_{t+1} + C_t dy'_t;  du = D dy' + sum_n g dt B;
//             ddt = sum_n g (A a h_{t-1} + B u), ddelta = ddt softplus'(.);
//             dinit = a_0 g_0; dA += g dt a h_{t-1}; dD += dy' u; dB += g dt u; dC += dy' h
//             Parameter sums are kept per (batch, channel) in scratch and summed over
//             the batch (reduce_params: dA, dD, ddelta_bias, shared dB/dC) or over a
//             group's channels (reduce_bc: per-batch dB/dC) in order: no atomics.
//             (The time walk is sequential: the chunked parallel scan over
//             time is not written.)
struct Params {
  u: u32, delta: u32, A: u32, Bm: u32, Cm: u32, Dv: u32, z: u32, dbias: u32,
  init: u32, y: u32, chunks: u32, final_st: u32, dy: u32, dfinal: u32, du: u32, ddelta: u32,
  dA: u32, dB: u32, dC: u32, dD: u32, dz: u32, ddbias: u32, dinit: u32, hs: u32,
  pA: u32, pD: u32, pdb: u32, pB: u32, pC: u32, nb: u32, nd: u32, L: u32,
  N: u32, T: u32, nchunks: u32, b_var: u32, Gb: u32, c_var: u32, Gc: u32, has_D: u32,
  has_z: u32, has_db: u32, softplus: u32, has_init: u32, has_final: u32, has_dfinal: u32, has_dinit: u32,
  accumulate: u32, red_src: u32, red_dst: u32, red_groups: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

// Offset of B_t[n] / C_t[n] for channel d of batch b.
fn bc_at(is_var: u32, G: u32, b: u32, d: u32, n: u32, t: u32) -> u32 {
  if (is_var == 0u) { return d * p.N + n; }
  let g = d / (p.nd / G);
  return ((b * G + g) * p.N + n) * p.L + t;
}
fn dt_raw(bd: u32, t: u32) -> f32 {
  return m[p.delta + bd * p.L + t] + select(0.0, m[p.dbias + bd % p.nd], p.has_db == 1u);
}
fn dt_of(raw: f32) -> f32 { return select(raw, softplus(raw, 1.0, 20.0), p.softplus == 1u); }
fn silu(x: f32) -> f32 { return x * sigmoid(x); }

// Lanes per channel: the power of two >= N (N <= 64).
fn lanes() -> u32 {
  var s = 1u;
  while (s < p.N) { s = s << 1u; }
  return s;
}
var<workgroup> part_y: array<f32, 64>;
var<workgroup> part_du: array<f32, 64>;
var<workgroup> part_dt: array<f32, 64>;

@compute @workgroup_size(64)
fn forward(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
           @builtin(num_workgroups) nwg: vec3u) {
  let S = lanes();
  let n = li % S;
  let first = li - n;                          // lane 0 of this channel
  let bd = group_id(wid, nwg) * (64u / S) + li / S;
  let live = bd < p.nb * p.nd;
  let on = live && n < p.N;                    // a lane with a state
  let b = bd / p.nd;
  let d = bd % p.nd;
  var h = 0.0;
  if (on && p.has_init == 1u) { h = m[p.init + bd * p.N + n]; }
  for (var t = 0u; t < p.L; t++) {
    var part = 0.0;
    if (on) {
      if (t % p.T == 0u) { m[p.chunks + (bd * p.nchunks + t / p.T) * p.N + n] = h; }
      let dt = dt_of(dt_raw(bd, t));
      h = exp(dt * m[p.A + d * p.N + n]) * h + dt * m[p.Bm + bc_at(p.b_var, p.Gb, b, d, n, t)] * m[p.u + bd * p.L + t];
      part = m[p.Cm + bc_at(p.c_var, p.Gc, b, d, n, t)] * h;
    }
    part_y[li] = part;
    workgroupBarrier();
    if (live && n == 0u) {
      var y = 0.0;
      for (var j = 0u; j < S; j++) { y += part_y[first + j]; }
      if (p.has_D == 1u) { y += m[p.Dv + d] * m[p.u + bd * p.L + t]; }
      if (p.has_z == 1u) { y *= silu(m[p.z + bd * p.L + t]); }
      m[p.y + bd * p.L + t] = y;
    }
    workgroupBarrier();
  }
  if (on && p.has_final == 1u) { m[p.final_st + bd * p.N + n] = h; }
}

@compute @workgroup_size(64)
fn backward(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
            @builtin(num_workgroups) nwg: vec3u) {
  let S = lanes();
  let n = li % S;
  let first = li - n;
  let bd = group_id(wid, nwg) * (64u / S) + li / S;
  let live = bd < p.nb * p.nd;
  let on = live && n < p.N;
  let b = bd / p.nd;
  let d = bd % p.nd;
  let hs = p.hs + bd * (p.T + 1u) * p.N;      // states of one chunk: hs[0] the state before it
  var Dd = 0.0;
  var A = 0.0;
  if (live && p.has_D == 1u) { Dd = m[p.Dv + d]; }
  if (on) { A = m[p.A + d * p.N + n]; }
  var g = 0.0;                                 // this lane's state gradient and sums
  var sA = 0.0;
  var sB = 0.0;                                // shared B's and C's
  var sC = 0.0;
  var sD = 0.0;                                // lane 0's
  var sdb = 0.0;
  if (on && p.has_dfinal == 1u) { g = m[p.dfinal + bd * p.N + n]; }
  for (var c = i32(p.nchunks) - 1; c >= 0; c--) {
    let t0 = u32(c) * p.T;
    let t1 = min(p.L, t0 + p.T);
    if (on) {                                  // the chunk's states, each lane its own
      m[hs + n] = m[p.chunks + (bd * p.nchunks + u32(c)) * p.N + n];
      for (var t = t0; t < t1; t++) {
        let dt = dt_of(dt_raw(bd, t));
        m[hs + (t - t0 + 1u) * p.N + n] = exp(dt * A) * m[hs + (t - t0) * p.N + n] +
                                         dt * m[p.Bm + bc_at(p.b_var, p.Gb, b, d, n, t)] * m[p.u + bd * p.L + t];
      }
    }
    for (var t = t1; t > t0; t--) {
      let s = t - 1u;                          // the step
      var py = 0.0;
      var pdu = 0.0;
      var pdt = 0.0;
      if (on) {
        let dt = dt_of(dt_raw(bd, s));
        let u = m[p.u + bd * p.L + s];
        var dy = m[p.dy + bd * p.L + s];
        if (p.has_z == 1u) { dy *= silu(m[p.z + bd * p.L + s]); }
        let Bt = m[p.Bm + bc_at(p.b_var, p.Gb, b, d, n, s)];
        let Ct = m[p.Cm + bc_at(p.c_var, p.Gc, b, d, n, s)];
        let at = exp(dt * A);
        let hprev = m[hs + (s - t0) * p.N + n];
        let hn = m[hs + (s - t0 + 1u) * p.N + n];
        py = Ct * hn;
        let gn = g + Ct * dy;
        let dC = dy * hn;
        let dB = gn * dt * u;
        if (p.c_var == 1u) { m[p.pC + (bd * p.N + n) * p.L + s] = dC; } else { sC += dC; }
        if (p.b_var == 1u) { m[p.pB + (bd * p.N + n) * p.L + s] = dB; } else { sB += dB; }
        pdu = gn * dt * Bt;
        pdt = gn * (A * at * hprev + Bt * u);
        sA += gn * dt * at * hprev;
        g = at * gn;
      }
      part_y[li] = py;
      part_du[li] = pdu;
      part_dt[li] = pdt;
      workgroupBarrier();
      if (live && n == 0u) {
        let raw = dt_raw(bd, s);
        let u = m[p.u + bd * p.L + s];
        var dy = m[p.dy + bd * p.L + s];
        if (p.has_z == 1u) {
          var yp = Dd * u;
          for (var j = 0u; j < S; j++) { yp += part_y[first + j]; }
          let z = m[p.z + bd * p.L + s];
          let sz = sigmoid(z);
          m[p.dz + bd * p.L + s] = dy * yp * sz * (1.0 + z * (1.0 - sz));
          dy *= z * sz;
        }
        sD += dy * u;
        var du = dy * Dd;
        var ddt = 0.0;
        for (var j = 0u; j < S; j++) {
          du += part_du[first + j];
          ddt += part_dt[first + j];
        }
        if (p.softplus == 1u && raw <= 20.0) { ddt *= sigmoid(raw); }
        sdb += ddt;
        m[p.du + bd * p.L + s] = du;
        m[p.ddelta + bd * p.L + s] = ddt;
      }
      workgroupBarrier();
    }
  }
  if (on) {
    if (p.has_dinit == 1u) { m[p.dinit + bd * p.N + n] = g; }
    m[p.pA + bd * p.N + n] = sA;
    if (p.b_var == 0u) { m[p.pB + bd * p.N + n] = sB; }
    if (p.c_var == 0u) { m[p.pC + bd * p.N + n] = sC; }
  }
  if (live && n == 0u) {
    m[p.pD + bd] = sD;
    m[p.pdb + bd] = sdb;
  }
}

// out = sum (+ out with accumulate).
fn store(at: u32, s: f32) { m[at] = select(s, m[at] + s, p.accumulate == 1u); }

// Per (d, n): dA, shared dB/dC (and per d: dD, ddelta_bias) summed over the batch in order.
@compute @workgroup_size(64)
fn reduce_params(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.nd * p.N) { return; }
  let d = e / p.N;
  let n = e % p.N;
  var sA = 0.0;
  var sB = 0.0;
  var sC = 0.0;
  var sD = 0.0;
  var sdb = 0.0;
  for (var b = 0u; b < p.nb; b++) {
    let bd = b * p.nd + d;
    sA += m[p.pA + bd * p.N + n];
    sB += m[p.pB + bd * p.N + n];
    sC += m[p.pC + bd * p.N + n];
    sD += m[p.pD + bd];
    sdb += m[p.pdb + bd];
  }
  store(p.dA + e, sA);
  if (p.b_var == 0u) { store(p.dB + e, sB); }
  if (p.c_var == 0u) { store(p.dC + e, sC); }
  if (n == 0u) {
    if (p.has_D == 1u) { store(p.dD + d, sD); }
    if (p.has_db == 1u) { store(p.ddbias + d, sdb); }
  }
}

// Per-batch dB or dC (Bt, G, N, L): element (b, g, n, t) sums the partials
// (Bt, D, N, L) of its group's channels in order (overwritten).
@compute @workgroup_size(64)
fn reduce_bc(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  let G = p.red_groups;
  if (e >= p.nb * G * p.N * p.L) { return; }
  let t = e % p.L;
  let n = (e / p.L) % p.N;
  let g = (e / (p.L * p.N)) % G;
  let b = e / (p.L * p.N * G);
  let per = p.nd / G;
  var s = 0.0;
  for (var d = g * per; d < (g + 1u) * per; d++) { s += m[p.red_src + ((b * p.nd + d) * p.N + n) * p.L + t]; }
  m[p.red_dst + e] = s;
}
