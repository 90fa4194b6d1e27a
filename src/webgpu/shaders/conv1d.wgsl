// Causal depthwise conv1d; x (B, D, L) or (B, L, D) (channel_last),
// weight (D, W), bias (D), states (B, D, W-1):
//   xpad[b,d,p] = init[b,d,p] (0 without) for p < W-1, x[b,d,p-(W-1)] after
//   forward   y[b,d,t] = act(bias[d] + sum_k w[d,k] xpad[b,d,t+k])   (act: identity or SiLU)
//             final[b,d,j] = xpad[b,d,L+j]                             (entry final_state)
//   backward  g = dy act'(pre)  (pre recomputed; pass grad_pre, into scratch as (B, D, L))
//             dxpad[p] = sum_k w[d,k] g[p-k] (+ dfinal[p-L] for p >= L)  -> dx, dinit (pass dx)
//             dw[d,k] (+)= sum_{b,t} g xpad[t+k],  dbias[d] (+)= sum_{b,t} g  (pass dparams: a workgroup each)
// One invocation per element in the other passes.
struct Params {
  x: u32, w: u32, bias: u32, init: u32, y: u32, final_: u32, dy: u32, dfinal: u32,
  dx: u32, dw: u32, dbias: u32, dinit: u32, g: u32, B: u32, D: u32, L: u32,
  W: u32, channel_last: u32, has_bias: u32, silu: u32, has_init: u32, has_dfinal: u32, has_dbias: u32, has_dinit: u32,
  accumulate: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

fn x_at(b: u32, d: u32, t: u32) -> u32 {
  return select((b * p.D + d) * p.L + t, (b * p.L + t) * p.D + d, p.channel_last == 1u);
}
fn state_at(b: u32, d: u32, j: u32) -> u32 { return (b * p.D + d) * (p.W - 1u) + j; }
fn xpad(b: u32, d: u32, q: u32) -> f32 {
  if (q + 1u >= p.W) { return m[p.x + x_at(b, d, q + 1u - p.W)]; }
  return select(0.0, m[p.init + state_at(b, d, q)], p.has_init == 1u);
}
fn pre(b: u32, d: u32, t: u32) -> f32 {
  var s = select(0.0, m[p.bias + d], p.has_bias == 1u);
  for (var k = 0u; k < p.W; k++) { s += m[p.w + d * p.W + k] * xpad(b, d, t + k); }
  return s;
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.B * p.D * p.L) { return; }
  let t = e % p.L;
  let d = (e / p.L) % p.D;
  let b = e / (p.L * p.D);
  let s = pre(b, d, t);
  m[p.y + x_at(b, d, t)] = select(s, s * sigmoid(s), p.silu == 1u);
}

@compute @workgroup_size(64)
fn final_state(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.B * p.D * (p.W - 1u)) { return; }
  let j = e % (p.W - 1u);
  let bd = e / (p.W - 1u);
  m[p.final_ + e] = xpad(bd / p.D, bd % p.D, p.L + j);
}

@compute @workgroup_size(64)
fn grad_pre(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.B * p.D * p.L) { return; }
  let t = e % p.L;
  let d = (e / p.L) % p.D;
  let b = e / (p.L * p.D);
  var g = m[p.dy + x_at(b, d, t)];
  if (p.silu == 1u) {
    let s = pre(b, d, t);
    let sg = sigmoid(s);
    g *= sg * (1.0 + s * (1.0 - sg));
  }
  m[p.g + e] = g;
}

@compute @workgroup_size(64)
fn dx(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let span = p.L + p.W - 1u;
  let e = flat_id(gid, nwg);
  if (e >= p.B * p.D * span) { return; }
  let q = e % span;
  let bd = e / span;
  let d = bd % p.D;
  var s = 0.0;
  for (var k = 0u; k < p.W; k++) {
    if (q >= k && q - k < p.L) { s += m[p.w + d * p.W + k] * m[p.g + bd * p.L + q - k]; }
  }
  if (p.has_dfinal == 1u && q >= p.L) { s += m[p.dfinal + bd * (p.W - 1u) + q - p.L]; }
  if (q + 1u >= p.W) {
    m[p.dx + x_at(bd / p.D, d, q + 1u - p.W)] = s;
  } else if (p.has_dinit == 1u) {
    m[p.dinit + bd * (p.W - 1u) + q] = s;
  }
}

// One workgroup per (d, k): each invocation sums every 64th (b, t) in
// order, then a fixed-order tree.
@compute @workgroup_size(64)
fn dparams(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let e = group_id(wid, nwg);
  if (e >= p.D * p.W) { return; }
  let d = e / p.W;
  let k = e % p.W;
  var sw = 0.0;
  var sb = 0.0;
  for (var bt = lid; bt < p.B * p.L; bt += WG) {
    let b = bt / p.L;
    let t = bt % p.L;
    let g = m[p.g + (b * p.D + d) * p.L + t];
    sw += g * xpad(b, d, t + k);
    sb += g;
  }
  sw = wg_sum(sw, lid);
  sb = wg_sum(sb, lid);
  if (lid == 0u) {
    m[p.dw + e] = select(sw, m[p.dw + e] + sw, p.accumulate == 1u);
    if (k == 0u && p.has_dbias == 1u) { m[p.dbias + d] = select(sb, m[p.dbias + d] + sb, p.accumulate == 1u); }
  }
}
