// Cross-entropy from logits (rows x V), targets t (rows; ignore_index rows
// count for nothing), label smoothing eps:
//   lse_r = max + log(sum_j exp(x_j - max));  loss_r = (1 - eps)(lse_r - x_t) + eps (lse_r - sum_j x_j / V)
//   loss = sum_r loss_r, / (rows not ignored) for the mean
//   dlogits_rj = g (exp(x_j - lse_r) - (1 - eps) [j = t] - eps / V), 0 for ignored rows,
//   g = dloss (forward with fused_grad: grad_scale), / (rows not ignored) for the mean
// Passes: per_row (one workgroup per row: loss_r, valid_r, lse_r into
// scratch), total (one workgroup: fixed-order sums of loss_r and valid_r),
// grad (one invocation per element).
struct Params {
  logits: u32, targets: u32, loss: u32, dlogits: u32, dloss: u32, scratch: u32, rows: u32, V: u32,
  index_words: u32, ignore: i32, mean: u32, eps: f32, grad_scale: f32, fused: u32, has_loss: u32, nan_bits: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
// scratch: [0, rows) loss_r, [rows, 2 rows) valid_r, [2 rows, 3 rows) lse_r, 3 rows: the count.

@compute @workgroup_size(64)
fn per_row(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = p.logits + r * p.V;
  var mx = -3.4028234e38;
  for (var j = lid; j < p.V; j += WG) { mx = max(mx, m[base + j]); }
  mx = wg_max(mx, lid);
  var s = 0.0;
  var sx = 0.0;
  for (var j = lid; j < p.V; j += WG) { s += exp(m[base + j] - mx); sx += m[base + j]; }
  let lse = mx + log(wg_sum(s, lid));
  let sum_x = wg_sum(sx, lid);
  if (lid == 0u) {
    let t = index_at(p.targets, r, p.index_words);
    let valid = t != p.ignore;
    var loss = 0.0;
    if (valid) { loss = (1.0 - p.eps) * (lse - m[base + u32(t)]) + p.eps * (lse - sum_x / f32(p.V)); }
    m[p.scratch + r] = loss;
    m[p.scratch + p.rows + r] = select(0.0, 1.0, valid);
    m[p.scratch + 2u * p.rows + r] = lse;
  }
}

@compute @workgroup_size(64)
fn total(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  var c = 0.0;
  for (var r = lid; r < p.rows; r += WG) { s += m[p.scratch + r]; c += m[p.scratch + p.rows + r]; }
  s = wg_sum(s, lid);
  c = wg_sum(c, lid);
  if (lid == 0u) {
    m[p.scratch + 3u * p.rows] = c;
    if (p.has_loss == 1u) {
      var loss = s;
      if (p.mean == 1u) { loss = select(s / c, bitcast<f32>(p.nan_bits), c == 0.0); }
      m[p.loss] = loss;
    }
  }
}

@compute @workgroup_size(64)
fn grad(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.rows * p.V) { return; }
  let r = e / p.V;
  let j = e % p.V;
  let t = index_at(p.targets, r, p.index_words);
  var v = 0.0;
  if (t != p.ignore) {
    var g = select(m[p.dloss], p.grad_scale, p.fused == 1u);
    if (p.mean == 1u) { g /= m[p.scratch + 3u * p.rows]; }
    let onehot = select(0.0, 1.0 - p.eps, u32(t) == j);
    v = g * (exp(m[p.logits + e] - m[p.scratch + 2u * p.rows + r]) - onehot - p.eps / f32(p.V));
  }
  m[p.dlogits + e] = v;
}
