// Selective scan. u, delta, z, y (Bt, D, L); A (D, N); B and C (D, N)
// shared, or per batch (Bt, G, N, L) (BATCH is G = 1): channel d reads
// group d / (D/G). Each state n of a channel (b, d) is a linear recurrence
// h_t = a_t h_{t-1} + b_t, which two kernels walk: sequentially in time
// (forward, backward), or as a parallel scan over time (totals, carry,
// forward_chunks, backward_chunks). Both give a lane to each state: S lanes
// per channel (S the power of two >= N, N <= 64); the sums over n that a
// step needs are finished from the lanes' parts in n order.
//   dt_t = delta_t + delta_bias, softplus'ed with delta_softplus;  a_t[n] = exp(dt_t A[n])
//   forward   h_t = a_t h_{t-1} + dt_t B_t u_t;  y'_t = sum_n C_t h_t + D u_t;  y_t = y'_t silu(z_t)
//             chunk_states[c] = h before step c T; final = h_{L-1}
//   backward  with the state gradient g (the adjoint, g_L = dfinal), walked backward:
//             dy' = dy silu(z), dz = dy y' silu'(z),
//             g_t = g_{t+1} a_{t+1} + C_t dy'_t;  du = D dy' + sum_n g dt B;
//             ddt = sum_n g (A a h_{t-1} + B u), ddelta = ddt softplus'(.);
//             dinit = a_0 g_0; dA += g dt a h_{t-1}; dD += dy' u; dB += g dt u; dC += dy' h
//             Parameter sums are kept per (batch, channel[, chunk]) in scratch and summed over
//             the batch (reduce_params: dA, dD, ddelta_bias, shared dB/dC) or over a
//             group's channels (reduce_bc: per-batch dB/dC) in order: no atomics.
// Sequential: a workgroup of 64 takes 64 / S channels and walks every step
// with two barriers. Backward, chunk by chunk from the last: the chunk's
// states recomputed from chunk_states into scratch, then its steps walked
// backward.
// Parallel: steps (a1, b1) then (a2, b2) compose to (a2 a1, a2 b1 + b2), and
// the adjoint g runs the same recurrence backward (a map w -> a_t (C_t dy'_t
// + w) per step). The sequence is cut into blocks of SEG P steps, P = 64 /
// S, and chunks of R blocks (Tc = R SEG P steps); a workgroup takes one
// chunk of one channel, block by block; in a block, invocation li = seg S +
// n takes the SEG steps of segment seg for state n:
//   totals   each invocation composes its segment walking forward; a
//            Kogge-Stone scan over the P segments in workgroup memory gives
//            each segment the maps of the segments before and after it
//            (stored) and the block's maps (forward h -> fa h + fb; backward
//            w -> ra w + rr), composed over the blocks into the chunk's
//   carry    per (b, d, n), over the chunks in order: the state entering
//            each chunk (from the initial state) and, backward, the
//            adjoint entering it from its end (from dfinal)
//   forward_chunks / backward_chunks   per block, the segment maps applied
//            to what enters the block: each invocation's state at its
//            segment's start (and adjoint at its end), then its steps; the
//            sums over n through workgroup memory, one step per invocation.
// Forward runs totals and carry past one chunk (within a chunk a block hands
// its state to the next), backward past one block.
struct Params {
  u: u32, delta: u32, A: u32, Bm: u32, Cm: u32, Dv: u32, z: u32, dbias: u32,
  init: u32, y: u32, chunks: u32, final_st: u32, dy: u32, dfinal: u32, du: u32, ddelta: u32,
  dA: u32, dB: u32, dC: u32, dD: u32, dz: u32, ddbias: u32, dinit: u32, hs: u32,
  pA: u32, pD: u32, pdb: u32, pB: u32, pC: u32, nb: u32, nd: u32, L: u32,
  N: u32, T: u32, nchunks: u32, b_var: u32, Gb: u32, c_var: u32, Gc: u32, has_D: u32,
  has_z: u32, has_db: u32, softplus: u32, has_init: u32, has_final: u32, has_dfinal: u32, has_dinit: u32,
  accumulate: u32, red_src: u32, red_dst: u32, red_groups: u32,
  Tc: u32, npc: u32, red_chunks: u32, tot: u32, carry: u32, backward: u32, segs: u32, R: u32, btot: u32,
  red_carry: u32,
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

// ---------------------------------------------------------------- parallel
const SEG: u32 = 8u;                           // steps per invocation and block (kernels.c's SCAN_SEG)

// Segments per block: P = 64 / S; steps per block: SEG P (both uniform:
// they read only the parameters).
fn segments() -> u32 { return 64u / lanes(); }
fn block_len() -> u32 { return SEG * segments(); }

var<workgroup> ks_fa: array<f32, 64>;          // the segments' maps, scanned in place
var<workgroup> ks_fb: array<f32, 64>;
var<workgroup> ks_ra: array<f32, 64>;
var<workgroup> ks_rr: array<f32, 64>;
var<workgroup> block_dt: array<f32, 512>;      // (SEG P <= 512): dt_t of the block's steps
var<workgroup> step_h: array<f32, 512>;        // (SEG P, S), 512 words: h_t of a step and state
var<workgroup> step_a: array<f32, 512>;        // a_t
var<workgroup> step_y: array<f32, 512>;        // a state's parts of a step's sums over n
var<workgroup> step_du: array<f32, 512>;
var<workgroup> step_ddt: array<f32, 512>;
var<workgroup> block_h: array<f32, 512>;       // (R, S), R S <= 512: the state entering each block
var<workgroup> block_end: array<f32, 64>;      // (S): what a block hands the next (state or adjoint)

// An invocation of a parallel pass in block r of workgroup w = (channel bd
// = (b, d), chunk j): the block starts at step c0; state n (on: n < N),
// segment seg, its steps [s0, s1) (empty past L or off), A[d, n]; B_t[n]
// at B0 + t Bt (Bt 0 when shared), C_t[n] likewise (no division in the walks).
struct Lane {
  bd: u32, b: u32, d: u32, j: u32, c0: u32, n: u32, seg: u32, on: bool, s0: u32, s1: u32, A: f32,
  B0: u32, Bt: u32, C0: u32, Ct: u32,
}
fn lane_of(li: u32, w: u32, r: u32) -> Lane {
  let S = lanes();
  var l: Lane;
  l.bd = w / p.npc;
  l.j = w % p.npc;
  l.b = l.bd / p.nd;
  l.d = l.bd % p.nd;
  l.c0 = l.j * p.Tc + r * block_len();
  l.n = li % S;
  l.seg = li / S;
  l.on = l.n < p.N;
  l.s0 = min(p.L, l.c0 + l.seg * SEG);
  l.s1 = select(l.s0, min(p.L, l.s0 + SEG), l.on);
  let n = min(l.n, p.N - 1u);
  l.A = select(0.0, m[p.A + l.d * p.N + n], l.on);
  l.B0 = p.Bm + bc_at(p.b_var, p.Gb, l.b, l.d, n, 0u);
  l.Bt = p.b_var;
  l.C0 = p.Cm + bc_at(p.c_var, p.Gc, l.b, l.d, n, 0u);
  l.Ct = p.c_var;
  return l;
}
fn b_of(l: Lane, t: u32) -> f32 { return m[l.B0 + t * l.Bt]; }
fn c_of(l: Lane, t: u32) -> f32 { return m[l.C0 + t * l.Ct]; }
// dy'_t = dy_t silu(z_t) (dy_t without z).
fn dy_gated(bd: u32, t: u32) -> f32 {
  let dy = m[p.dy + bd * p.L + t];
  if (p.has_z == 1u) { return dy * silu(m[p.z + bd * p.L + t]); }
  return dy;
}

// dt of the block's steps into block_dt, once for all its lanes. Call from
// uniform control flow.
fn load_dt(li: u32, l: Lane) {
  for (var lt = li; lt < block_len() && l.c0 + lt < p.L; lt += 64u) {
    block_dt[lt] = dt_of(dt_raw(l.bd, l.c0 + lt));
  }
  workgroupBarrier();
}

// The maps of the lane's segment, composed over its steps in order:
// forward h -> fa h + fb; with the adjoint, backward w -> fa w + rr
// (rr = sum_t (a_s0 ... a_t) C_t dy'_t).
fn segment_maps(l: Lane, with_adjoint: bool) -> vec3f {
  var fa = 1.0;
  var fb = 0.0;
  var rr = 0.0;
  for (var t = l.s0; t < l.s1; t++) {
    let dt = block_dt[t - l.c0];
    let a = exp(dt * l.A);
    fb = a * fb + dt * b_of(l, t) * m[p.u + l.bd * p.L + t];
    fa = a * fa;
    if (with_adjoint) { rr += fa * c_of(l, t) * dy_gated(l.bd, t); }
  }
  return vec3f(fa, fb, rr);
}

// Kogge-Stone over the P segments of each state (lane li = seg S + n), in
// ks_*: f = (fa, fb) becomes the composite of segments 0..seg, (a2, b2)
// after (a1, b1) = (a2 a1, a2 b1 + b2); r = (ra, rr) that of segments
// seg..P-1, the later ones first. Call from uniform control flow.
fn scan_segments(li: u32, f: vec2f, r: vec2f) {
  let S = lanes();
  let P = segments();
  let seg = li / S;
  var fa = f.x;
  var fb = f.y;
  var ra = r.x;
  var rr = r.y;
  for (var o = 1u; o < P; o <<= 1u) {
    ks_fa[li] = fa;
    ks_fb[li] = fb;
    ks_ra[li] = ra;
    ks_rr[li] = rr;
    workgroupBarrier();
    if (seg >= o) {
      let e = li - o * S;
      fb = fa * ks_fb[e] + fb;
      fa = fa * ks_fa[e];
    }
    if (seg + o < P) {
      let e = li + o * S;
      rr = ra * ks_rr[e] + rr;
      ra = ra * ks_ra[e];
    }
    workgroupBarrier();
  }
  ks_fa[li] = fa;
  ks_fb[li] = fb;
  ks_ra[li] = ra;
  ks_rr[li] = rr;
  workgroupBarrier();
}

// After scan_segments: the maps of the segments before the lane's in its
// block, composed (fa, fb), and of those after it (ra, rr); identities at
// the ends.
fn exclusive(li: u32) -> vec4f {
  let S = lanes();
  let seg = li / S;
  var e = vec4f(1.0, 0.0, 1.0, 0.0);
  if (seg > 0u) { e = vec4f(ks_fa[li - S], ks_fb[li - S], e.zw); }
  if (seg + 1u < segments()) { e = vec4f(e.xy, ks_ra[li + S], ks_rr[li + S]); }
  return e;
}
// Whether totals ran: past one chunk, or backward past one block a chunk
// (forward hands the state from block to block itself).
fn totals_ran() -> bool { return p.npc > 1u || (p.R > 1u && p.backward == 1u); }
// exclusive() of lane li in block r of workgroup w: where totals left it,
// else composed and scanned here. Call from uniform control flow.
fn segment_prefixes(li: u32, w: u32, r: u32, l: Lane, with_adjoint: bool) -> vec4f {
  if (totals_ran()) {
    let at = p.segs + ((w * p.R + r) * 64u + li) * 4u;
    return vec4f(m[at], m[at + 1u], m[at + 2u], m[at + 3u]);
  }
  let maps = segment_maps(l, with_adjoint);
  scan_segments(li, maps.xy, maps.xz);
  return exclusive(li);
}

// The state entering the lane's chunk: the initial state (chunk 0) or
// carry's; the adjoint entering it from its end: dfinal (the last chunk) or
// carry's. 0 for lanes off.
fn chunk_state(l: Lane) -> f32 {
  var h = 0.0;
  if (l.j > 0u) { h = m[p.carry + ((l.bd * p.npc + l.j) * p.N + l.n) * 2u]; }
  else if (p.has_init == 1u) { h = m[p.init + l.bd * p.N + l.n]; }
  return select(0.0, h, l.on);
}
fn chunk_adjoint(l: Lane) -> f32 {
  var w = 0.0;
  if (l.j + 1u < p.npc) { w = m[p.carry + ((l.bd * p.npc + l.j) * p.N + l.n) * 2u + 1u]; }
  else if (p.has_dfinal == 1u) { w = m[p.dfinal + l.bd * p.N + l.n]; }
  return select(0.0, w, l.on);
}

// Per workgroup w = (b, d, chunk j), block by block: each lane's
// exclusive() in segs[w, r, li]; the block's maps btot[w, r, n] = (fa, fb,
// ra, rr) and the chunk's, composed over its blocks, tot[(bd, j, n)] (the
// adjoint's with p.backward).
@compute @workgroup_size(64)
fn totals(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
          @builtin(num_workgroups) nwg: vec3u) {
  let w = group_id(wid, nwg);
  if (w >= p.nb * p.nd * p.npc) { return; }
  let S = lanes();
  var cf = vec2f(1.0, 0.0);                    // the chunk's maps over the blocks so far
  var cr = vec2f(1.0, 0.0);
  for (var r = 0u; r < p.R; r++) {
    let l = lane_of(li, w, r);
    load_dt(li, l);
    let maps = segment_maps(l, p.backward == 1u);
    scan_segments(li, maps.xy, maps.xz);
    let e = exclusive(li);
    let to = p.segs + ((w * p.R + r) * 64u + li) * 4u;
    m[to] = e.x;
    m[to + 1u] = e.y;
    m[to + 2u] = e.z;
    m[to + 3u] = e.w;
    let last = (segments() - 1u) * S + l.n;
    let bf = vec2f(ks_fa[last], ks_fb[last]);  // the block's maps
    let br = vec2f(ks_ra[l.n], ks_rr[l.n]);
    if (l.on && l.seg == 0u && p.backward == 1u) {
      let bt = p.btot + ((w * p.R + r) * p.N + l.n) * 4u;
      m[bt] = bf.x;
      m[bt + 1u] = bf.y;
      m[bt + 2u] = br.x;
      m[bt + 3u] = br.y;
    }
    cf = vec2f(bf.x * cf.x, bf.x * cf.y + bf.y);
    cr = vec2f(cr.x * br.x, cr.x * br.y + cr.y);
    workgroupBarrier();
  }
  let n = li % S;
  if (n < p.N && li / S == 0u) {
    let at = p.tot + (w * p.N + n) * 4u;
    m[at] = cf.x;
    m[at + 1u] = cf.y;
    m[at + 2u] = cr.x;
    m[at + 3u] = cr.y;
  }
}

// Per (b, d, n), over the chunks in order: the state entering chunk j >= 1
// (carry[(bd, j, n)][0]) from the initial state; backward also the adjoint
// entering chunk j <= npc - 2 from its end (carry[(bd, j, n)][1]) from dfinal.
@compute @workgroup_size(64)
fn carry(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.nb * p.nd * p.N) { return; }
  let bd = e / p.N;
  let n = e % p.N;
  var h = 0.0;
  if (p.has_init == 1u) { h = m[p.init + e]; }
  for (var j = 0u; j + 1u < p.npc; j++) {
    let at = p.tot + ((bd * p.npc + j) * p.N + n) * 4u;
    h = m[at] * h + m[at + 1u];
    m[p.carry + ((bd * p.npc + j + 1u) * p.N + n) * 2u] = h;
  }
  if (p.backward == 0u) { return; }
  var w = 0.0;
  if (p.has_dfinal == 1u) { w = m[p.dfinal + e]; }
  for (var j = p.npc - 1u; j > 0u; j--) {
    let at = p.tot + ((bd * p.npc + j) * p.N + n) * 4u;
    w = m[at + 2u] * w + m[at + 3u];
    m[p.carry + ((bd * p.npc + j - 1u) * p.N + n) * 2u + 1u] = w;
  }
}

// Per workgroup (b, d, chunk j), block by block in order: each lane walks
// its segment from its entering state (writing chunk_states, and final at
// step L - 1), its parts C_t h_t in step_y; then y_t, one step per
// invocation; the last segment's state enters the next block.
@compute @workgroup_size(64)
fn forward_chunks(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
                  @builtin(num_workgroups) nwg: vec3u) {
  let w = group_id(wid, nwg);
  if (w >= p.nb * p.nd * p.npc) { return; }
  let S = lanes();
  var hb = chunk_state(lane_of(li, w, 0u));    // the state entering the block
  for (var r = 0u; r < p.R; r++) {
    let l = lane_of(li, w, r);
    load_dt(li, l);
    let pre = segment_prefixes(li, w, r, l, false);
    var h = pre.x * hb + pre.y;
    var saved = (l.s0 + p.T - 1u) / p.T;       // the next saved state, before step saved T
    for (var t = l.s0; t < l.s1; t++) {
      if (t == saved * p.T) {
        m[p.chunks + (l.bd * p.nchunks + saved) * p.N + l.n] = h;
        saved++;
      }
      let dt = block_dt[t - l.c0];
      h = exp(dt * l.A) * h + dt * b_of(l, t) * m[p.u + l.bd * p.L + t];
      step_y[(t - l.c0) * S + l.n] = c_of(l, t) * h;
    }
    if (l.on && p.has_final == 1u && l.s0 < l.s1 && l.s1 == p.L) { m[p.final_st + l.bd * p.N + l.n] = h; }
    if (l.seg + 1u == segments()) { block_end[l.n] = h; }
    workgroupBarrier();
    for (var lt = li; lt < block_len() && l.c0 + lt < p.L; lt += 64u) {
      let t = l.c0 + lt;
      var y = 0.0;
      for (var k = 0u; k < p.N; k++) { y += step_y[lt * S + k]; }
      if (p.has_D == 1u) { y += m[p.Dv + l.d] * m[p.u + l.bd * p.L + t]; }
      if (p.has_z == 1u) { y *= silu(m[p.z + l.bd * p.L + t]); }
      m[p.y + l.bd * p.L + t] = y;
    }
    hb = select(0.0, block_end[l.n], l.on);
  }
}

// Per workgroup (b, d, chunk j): the states entering its blocks (block_h,
// from btot); then block by block from the last: each lane walks its
// segment forward for its states (step_h, step_a), then backward from its
// entering adjoint, writing its parts of the steps' sums (step_y, step_du,
// step_ddt), per-batch dB/dC partials and dinit (chunk 0, first segment);
// then each step's du, ddelta, dz, one step per invocation; the first
// segment's adjoint enters the block before. The chunk's parameter sums go
// to pA, pB, pC (per (bd, j, n)), pD, pdb (per (bd, j)): over segments and
// invocations, in order.
@compute @workgroup_size(64)
fn backward_chunks(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
                   @builtin(num_workgroups) nwg: vec3u) {
  let w = group_id(wid, nwg);
  if (w >= p.nb * p.nd * p.npc) { return; }
  let S = lanes();
  let l0 = lane_of(li, w, 0u);
  if (l0.on && l0.seg == 0u) {
    var h = chunk_state(l0);
    for (var r = 0u; r < p.R; r++) {
      block_h[r * S + l0.n] = h;
      let bt = p.btot + ((w * p.R + r) * p.N + l0.n) * 4u;
      if (r + 1u < p.R) { h = m[bt] * h + m[bt + 1u]; }
    }
  }
  workgroupBarrier();
  var Dd = 0.0;
  if (p.has_D == 1u) { Dd = m[p.Dv + l0.d]; }
  var gb = chunk_adjoint(l0);                  // the adjoint entering the block from its end
  var sA = 0.0;
  var sB = 0.0;                                // shared B's and C's
  var sC = 0.0;
  var sD = 0.0;
  var sdb = 0.0;
  for (var rr = p.R; rr > 0u; rr--) {
    let r = rr - 1u;
    let l = lane_of(li, w, r);
    load_dt(li, l);
    let pre = segment_prefixes(li, w, r, l, true);
    let h0 = select(0.0, pre.x * block_h[r * S + l.n] + pre.y, l.on);
    var g = pre.z * gb + pre.w;
    var h = h0;
    for (var t = l.s0; t < l.s1; t++) {
      let dt = block_dt[t - l.c0];
      let a = exp(dt * l.A);
      h = a * h + dt * b_of(l, t) * m[p.u + l.bd * p.L + t];
      step_h[(t - l.c0) * S + l.n] = h;
      step_a[(t - l.c0) * S + l.n] = a;
    }
    for (var t = l.s1; t > l.s0; t--) {
      let s = t - 1u;                          // the step
      let at_lt = (s - l.c0) * S + l.n;
      let dt = block_dt[s - l.c0];
      let u = m[p.u + l.bd * p.L + s];
      let dy = dy_gated(l.bd, s);
      let Bt = b_of(l, s);
      let Ct = c_of(l, s);
      let at = step_a[at_lt];
      let hprev = select(h0, step_h[at_lt - S], s > l.s0);
      let hn = step_h[at_lt];
      let gn = g + Ct * dy;
      let dC = dy * hn;
      let dB = gn * dt * u;
      if (p.c_var == 1u) { m[p.pC + (l.bd * p.N + l.n) * p.L + s] = dC; } else { sC += dC; }
      if (p.b_var == 1u) { m[p.pB + (l.bd * p.N + l.n) * p.L + s] = dB; } else { sB += dB; }
      step_y[at_lt] = Ct * hn;
      step_du[at_lt] = gn * dt * Bt;
      step_ddt[at_lt] = gn * (l.A * at * hprev + Bt * u);
      sA += gn * dt * at * hprev;
      g = at * gn;
    }
    if (l.on && l.j == 0u && r == 0u && l.seg == 0u && p.has_dinit == 1u) { m[p.dinit + l.bd * p.N + l.n] = g; }
    if (l.seg == 0u) { block_end[l.n] = g; }
    workgroupBarrier();
    for (var lt = li; lt < block_len() && l.c0 + lt < p.L; lt += 64u) {
      let t = l.c0 + lt;
      let at = l.bd * p.L + t;
      let raw = dt_raw(l.bd, t);
      let u = m[p.u + at];
      var dy = m[p.dy + at];
      if (p.has_z == 1u) {
        var yp = Dd * u;
        for (var k = 0u; k < p.N; k++) { yp += step_y[lt * S + k]; }
        let z = m[p.z + at];
        let sz = sigmoid(z);
        m[p.dz + at] = dy * yp * sz * (1.0 + z * (1.0 - sz));
        dy *= z * sz;
      }
      sD += dy * u;
      var du = dy * Dd;
      var ddt = 0.0;
      for (var k = 0u; k < p.N; k++) {
        du += step_du[lt * S + k];
        ddt += step_ddt[lt * S + k];
      }
      if (p.softplus == 1u && raw <= 20.0) { ddt *= sigmoid(raw); }
      sdb += ddt;
      m[p.du + at] = du;
      m[p.ddelta + at] = ddt;
    }
    gb = select(0.0, block_end[l.n], l.on);
  }
  ks_fa[li] = sA;
  ks_fb[li] = sB;
  ks_ra[li] = sC;
  ks_rr[li] = sD;
  block_dt[li] = sdb;
  workgroupBarrier();
  if (l0.on && l0.seg == 0u) {
    var tA = 0.0;
    var tB = 0.0;
    var tC = 0.0;
    for (var k = l0.n; k < 64u; k += S) {
      tA += ks_fa[k];
      tB += ks_fb[k];
      tC += ks_ra[k];
    }
    m[p.pA + w * p.N + l0.n] = tA;
    if (p.b_var == 0u) { m[p.pB + w * p.N + l0.n] = tB; }
    if (p.c_var == 0u) { m[p.pC + w * p.N + l0.n] = tC; }
  }
  if (li == 0u) {
    var tD = 0.0;
    var tdb = 0.0;
    for (var k = 0u; k < 64u; k++) {
      tD += ks_rr[k];
      tdb += block_dt[k];
    }
    m[p.pD + w] = tD;
    m[p.pdb + w] = tdb;
  }
}

// out = sum (+ out with accumulate).
fn store(at: u32, s: f32) { m[at] = select(s, m[at] + s, p.accumulate == 1u); }

// Per (d, n): dA, shared dB/dC (and per d: dD, ddelta_bias) summed over the
// batch and, for the parallel kernel, its red_chunks chunks, in order.
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
    for (var c = 0u; c < p.red_chunks; c++) {
      let bdc = (b * p.nd + d) * p.red_chunks + c;
      sA += m[p.pA + bdc * p.N + n];
      sB += m[p.pB + bdc * p.N + n];
      sC += m[p.pC + bdc * p.N + n];
      sD += m[p.pD + bdc];
      sdb += m[p.pdb + bdc];
    }
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
// (Bt, D, N, L) of its group's channels in order (overwritten; with
// red_carry, a piece of a split run, on from the sum there of the channels
// before the piece's).
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
  var s = select(0.0, m[p.red_dst + e], p.red_carry == 1u);
  for (var d = g * per; d < (g + 1u) * per; d++) { s += m[p.red_src + ((b * p.nd + d) * p.N + n) * p.L + t]; }
  m[p.red_dst + e] = s;
}
