// Cross-entropy from logits (rows x V), targets t (rows; ignore_index rows
// count for nothing), label smoothing eps:
//   lse_r = max + log(sum_j exp(x_j - max));  loss_r = (1 - eps)(lse_r - x_t) + eps (lse_r - sum_j x_j / V)
//   loss = sum_r loss_r, / (rows not ignored) for the mean
//   dlogits_rj = g (exp(x_j - lse_r) - (1 - eps) [j = t] - eps / V), 0 for ignored rows,
//   g = dloss (forward with fused_grad: grad_scale), / (rows not ignored) for the mean
// Passes: per_row (one workgroup per row: loss_r, valid_r, lse_r into
// scratch), total (one workgroup: fixed-order sums of loss_r and valid_r),
// grad (one invocation per element). A run split into pieces of rows
// (kernels.c) runs per_row and grad once a piece, on the piece's rows
// (rows of them, the first row0 of all_rows), and total once over all_rows:
// the scratch spans every row, so the sums are the unsplit run's. Workgroup sums and maxima by
// lanes_sum/lanes_max (reduce.wgsl, or reduce_subgroups.wgsl where the
// device has subgroups), each in a fixed order.
struct Params {
  logits: u32, targets: u32, loss: u32, dlogits: u32, dloss: u32, scratch: u32, rows: u32, V: u32,
  index_words: u32, ignore: i32, mean: u32, eps: f32, grad_scale: f32, fused: u32, has_loss: u32, nan_bits: u32,
  all_rows: u32, row0: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
// Each tensor bound by itself, starting at its word p.<name> there, and the
// run's scratch (from word p.scratch): per_row scratch, logits, targets;
// total scratch, loss; grad scratch, logits, targets, dloss, dlogits (an
// absent loss or dloss: a word of its own, never read).
// scratch (n = all_rows): [0, n) loss_r, [n, 2 n) valid_r, [2 n, 3 n) lse_r, 3 n: the count.
@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> loss_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> targets: array<i32>;
@group(0) @binding(5) var<storage, read_write> dloss: array<f32>;
@group(0) @binding(6) var<storage, read_write> dlogits: array<f32>;

// Row r's target (i32, or the low word of an i64: core has checked every
// value against V).
fn target_of(r: u32) -> i32 { return targets[p.targets + r * p.index_words]; }

@compute @workgroup_size(64)
fn per_row(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = p.logits + r * p.V;
  var mx = -3.4028234e38;
  for (var j = lid; j < p.V; j += WG) { mx = max(mx, logits[base + j]); }
  mx = lanes_max(mx, l);
  var s = 0.0;
  var sx = 0.0;
  for (var j = lid; j < p.V; j += WG) { s += exp(logits[base + j] - mx); sx += logits[base + j]; }
  let lse = mx + log(lanes_sum(s, l));
  let sum_x = lanes_sum(sx, l);
  if (lid == 0u) {
    let t = target_of(r);
    let valid = t != p.ignore;
    var loss = 0.0;
    if (valid) { loss = (1.0 - p.eps) * (lse - logits[base + u32(t)]) + p.eps * (lse - sum_x / f32(p.V)); }
    let at = p.scratch + p.row0 + r;
    scratch[at] = loss;
    scratch[at + p.all_rows] = select(0.0, 1.0, valid);
    scratch[at + 2u * p.all_rows] = lse;
  }
}

@compute @workgroup_size(64)
fn total(l: Lanes) {
  let lid = l.lid;
  var s = 0.0;
  var c = 0.0;
  for (var r = lid; r < p.all_rows; r += WG) { s += scratch[p.scratch + r]; c += scratch[p.scratch + p.all_rows + r]; }
  s = lanes_sum(s, l);
  c = lanes_sum(c, l);
  if (lid == 0u) {
    scratch[p.scratch + 3u * p.all_rows] = c;
    if (p.has_loss == 1u) {
      var loss = s;
      if (p.mean == 1u) { loss = select(s / c, bitcast<f32>(p.nan_bits), c == 0.0); }
      loss_out[p.loss] = loss;
    }
  }
}

@compute @workgroup_size(64)
fn grad(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.rows * p.V) { return; }
  let r = e / p.V;
  let j = e % p.V;
  let t = target_of(r);
  var v = 0.0;
  if (t != p.ignore) {
    var g = select(dloss[p.dloss], p.grad_scale, p.fused == 1u);
    if (p.mean == 1u) { g /= scratch[p.scratch + 3u * p.all_rows]; }
    let onehot = select(0.0, 1.0 - p.eps, u32(t) == j);
    v = g * (exp(logits[p.logits + e] - scratch[p.scratch + 2u * p.all_rows + p.row0 + r]) - onehot - p.eps / f32(p.V));
  }
  dlogits[p.dlogits + e] = v;
}
