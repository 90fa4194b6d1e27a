// Scaled dot-product attention, causal or not, with grouped-query heads:
// q, o (B, H, T, Dh); k, v (B, Hkv, T, Dh), query head h reading kv head
// h / (H / Hkv). One invocation per query row (a workgroup is a block of 64
// queries), keys walked in order with an online softmax: O(T) memory, no
// (T, T) matrix (keys are read from the arena, not staged in workgroup
// memory: the first thing to tune). Dh <= 128 (private rows).
//   s_ij = scale q_i . k_j (j <= i when causal)
//   forward   lse_i = log sum_j exp(s_ij);  o_i = sum_j exp(s_ij - lse_i) v_j
//   backward  p_ij = exp(s_ij - lse_i), D_i = dO_i . o_i, ds_ij = p_ij (dO_i . v_j - D_i)
//             dq_i = scale sum_j ds_ij k_j                          (pass dq: per query)
//             dk_j = scale sum_{h, i} ds_ij q_i, dv_j = sum_{h, i} p_ij dO_i  (pass dkv: per key,
//             over the heads sharing it and the queries, in order)
struct Params { q: u32, k: u32, v: u32, o: u32, lse: u32, dout: u32, dq: u32, dk: u32, dv: u32, delta: u32,
                B: u32, H: u32, Hkv: u32, T: u32, Dh: u32, causal: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;

const DMAX: u32 = 128u;
const NEG_BIG: f32 = -3.4028234e38;

fn dot_rows(a: u32, b: u32) -> f32 {
  var s = 0.0;
  for (var d = 0u; d < p.Dh; d++) { s += m[a + d] * m[b + d]; }
  return s;
}
// Row offset of query row (b, h, i) and of key row (b, kv head of h, j).
fn q_row(bh: u32, i: u32) -> u32 { return (bh * p.T + i) * p.Dh; }
fn kv_row(bh: u32, j: u32) -> u32 {
  let b = bh / p.H;
  let h = bh % p.H;
  return ((b * p.Hkv + h / (p.H / p.Hkv)) * p.T + j) * p.Dh;
}
fn last_key(i: u32) -> u32 { return select(p.T, i + 1u, p.causal == 1u); }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = flat_id(gid, nwg);
  if (row >= p.B * p.H * p.T) { return; }
  let bh = row / p.T;
  let i = row % p.T;
  let qi = p.q + q_row(bh, i);
  var acc: array<f32, DMAX>;
  var mx = NEG_BIG;
  var l = 0.0;
  for (var j = 0u; j < last_key(i); j++) {
    let kj = kv_row(bh, j);
    let s = p.scale * dot_rows(qi, p.k + kj);
    let mn = max(mx, s);
    let c = exp(mx - mn);
    let pj = exp(s - mn);
    l = l * c + pj;
    for (var d = 0u; d < p.Dh; d++) { acc[d] = acc[d] * c + pj * m[p.v + kj + d]; }
    mx = mn;
  }
  for (var d = 0u; d < p.Dh; d++) { m[p.o + q_row(bh, i) + d] = acc[d] / l; }
  m[p.lse + row] = mx + log(l);
}

@compute @workgroup_size(64)
fn delta(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = flat_id(gid, nwg);
  if (row >= p.B * p.H * p.T) { return; }
  m[p.delta + row] = dot_rows(p.dout + row * p.Dh, p.o + row * p.Dh);
}

@compute @workgroup_size(64)
fn dq(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = flat_id(gid, nwg);
  if (row >= p.B * p.H * p.T) { return; }
  let bh = row / p.T;
  let i = row % p.T;
  var acc: array<f32, DMAX>;
  let lse = m[p.lse + row];
  let D = m[p.delta + row];
  for (var j = 0u; j < last_key(i); j++) {
    let kj = kv_row(bh, j);
    let pij = exp(p.scale * dot_rows(p.q + row * p.Dh, p.k + kj) - lse);
    let ds = pij * (dot_rows(p.dout + row * p.Dh, p.v + kj) - D);
    for (var d = 0u; d < p.Dh; d++) { acc[d] += ds * m[p.k + kj + d]; }
  }
  for (var d = 0u; d < p.Dh; d++) { m[p.dq + row * p.Dh + d] = p.scale * acc[d]; }
}

@compute @workgroup_size(64)
fn dkv(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let krow = flat_id(gid, nwg);
  if (krow >= p.B * p.Hkv * p.T) { return; }
  let j = krow % p.T;
  let b = krow / (p.Hkv * p.T);
  let kvh = (krow / p.T) % p.Hkv;
  let group = p.H / p.Hkv;
  let kj = krow * p.Dh;
  var dk: array<f32, DMAX>;
  var dv: array<f32, DMAX>;
  for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
    let bh = b * p.H + h;
    for (var i = select(0u, j, p.causal == 1u); i < p.T; i++) {
      let qrow = bh * p.T + i;
      let pij = exp(p.scale * dot_rows(p.q + qrow * p.Dh, p.k + kj) - m[p.lse + qrow]);
      let ds = pij * (dot_rows(p.dout + qrow * p.Dh, p.v + kj) - m[p.delta + qrow]);
      for (var d = 0u; d < p.Dh; d++) {
        dv[d] += pij * m[p.dout + qrow * p.Dh + d];
        dk[d] += ds * m[p.q + qrow * p.Dh + d];
      }
    }
  }
  for (var d = 0u; d < p.Dh; d++) {
    m[p.dk + kj + d] = p.scale * dk[d];
    m[p.dv + kj + d] = dv[d];
  }
}
