// RMSNorm and LayerNorm over rows of C elements; forward and backward's dx
// take one workgroup per row, the parameter gradients one workgroup per
// column (each invocation sums every 64th row in order, then the workgroup's
// fixed-order reduction: lanes_sum, a tree, reduce.wgsl, or subgroups,
// reduce_subgroups.wgsl).
//   RMSNorm:   rstd = 1 / sqrt(mean(x^2) + eps),           xhat = x rstd
//   LayerNorm: mean, rstd = 1 / sqrt(mean((x-mean)^2) + eps), xhat = (x - mean) rstd
//   forward    y = xhat w + b            (w = 1, b = 0 when absent)
//   backward   g = dy w;  dx = rstd (g - [LayerNorm] mean(g) - xhat mean(g xhat))
//              dw[c] (+)= sum_r dy xhat,  db[c] (+)= sum_r dy
// A backward split into pieces of rows (kernels.c) sums each piece's rows
// into partials (param_partials: the run's scratch, 2 cols words a piece,
// dw's sums from p.dw, db's from p.db), then adds the pieces' sums in piece
// order (combine_params, one invocation per column, once for the run).
// Each tensor is bound by itself, starting at its word p.<name> there:
//   forward          x, w, mean, rstd, b, y
//   backward_dx      x, w, mean, rstd, dy, dx
//   backward_params  x, dw, mean, rstd, dy, db
//   param_partials   x, partials, mean, rstd, dy
//   combine_params   partials, dw, db (at binding 4)
// (an absent weight, bias or mean: a word of its own, never read).
// LayerNorm or RMSNorm, weight, bias and accumulate are override constants
// of the plan's pipelines.
override IS_LN: u32;
override HAS_W: u32;
override HAS_B: u32;
override ACCUMULATE: u32;
struct Params {
  x: u32, w: u32, b: u32, y: u32, mean: u32, rstd: u32, dy: u32, dx: u32, dw: u32, db: u32,
  rows: u32, cols: u32, eps: f32, pieces: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials_in: array<f32>;
@group(0) @binding(3) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> dw: array<f32>;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;
@group(0) @binding(4) var<storage, read_write> mean_of: array<f32>;
@group(0) @binding(4) var<storage, read_write> db_combined: array<f32>;
@group(0) @binding(5) var<storage, read_write> rstd_of: array<f32>;
@group(0) @binding(6) var<storage, read_write> b: array<f32>;
@group(0) @binding(6) var<storage, read_write> dy: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read_write> dx: array<f32>;
@group(0) @binding(7) var<storage, read_write> db: array<f32>;

fn weight(c: u32) -> f32 {
  if (HAS_W == 1u) { return w[p.w + c]; }
  return 1.0;
}
fn row_mean(r: u32) -> f32 {
  if (IS_LN == 1u) { return mean_of[p.mean + r]; }
  return 0.0;
}

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = r * p.cols;
  let n = f32(p.cols);
  // (Barriers stay out of branches: OpenGL ES allows them in no control flow.)
  var s = 0.0;
  for (var c = lid; c < p.cols; c += WG) { s += x[p.x + base + c]; }
  let mean = select(0.0, lanes_sum(s, l) / n, IS_LN == 1u);
  var q = 0.0;
  for (var c = lid; c < p.cols; c += WG) { let v = x[p.x + base + c] - mean; q += v * v; }
  let rstd = 1.0 / sqrt(lanes_sum(q, l) / n + p.eps);
  for (var c = lid; c < p.cols; c += WG) {
    var v = (x[p.x + base + c] - mean) * rstd * weight(c);
    if (HAS_B == 1u) { v += b[p.b + c]; }
    y[p.y + base + c] = v;
  }
  if (lid == 0u) {
    rstd_of[p.rstd + r] = rstd;
    if (IS_LN == 1u) { mean_of[p.mean + r] = mean; }
  }
}

@compute @workgroup_size(64)
fn backward_dx(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = r * p.cols;
  let n = f32(p.cols);
  let mean = row_mean(r);
  let rstd = rstd_of[p.rstd + r];
  var s_g = 0.0;
  var s_gx = 0.0;
  for (var c = lid; c < p.cols; c += WG) {
    let g = dy[p.dy + base + c] * weight(c);
    s_g += g;
    s_gx += g * (x[p.x + base + c] - mean) * rstd;
  }
  let mean_g = select(0.0, lanes_sum(s_g, l) / n, IS_LN == 1u);
  let mean_gx = lanes_sum(s_gx, l) / n;
  for (var c = lid; c < p.cols; c += WG) {
    let g = dy[p.dy + base + c] * weight(c);
    let xhat = (x[p.x + base + c] - mean) * rstd;
    dx[p.dx + base + c] = rstd * (g - mean_g - xhat * mean_gx);
  }
}

// Column c's sums over rows [0, p.rows): dw's and db's.
fn param_sums(c: u32, l: Lanes) -> vec2f {
  var s_w = 0.0;
  var s_b = 0.0;
  for (var r = l.lid; r < p.rows; r += WG) {
    let g = dy[p.dy + r * p.cols + c];
    s_w += g * (x[p.x + r * p.cols + c] - row_mean(r)) * rstd_of[p.rstd + r];
    s_b += g;
  }
  return vec2f(lanes_sum(s_w, l), lanes_sum(s_b, l));
}

@compute @workgroup_size(64)
fn backward_params(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let c = group_id(wid, nwg);
  if (c >= p.cols) { return; }
  let s = param_sums(c, l);
  if (l.lid == 0u) {
    if (HAS_W == 1u) { dw[p.dw + c] = select(s.x, dw[p.dw + c] + s.x, ACCUMULATE == 1u); }
    if (HAS_B == 1u) { db[p.db + c] = select(s.y, db[p.db + c] + s.y, ACCUMULATE == 1u); }
  }
}

@compute @workgroup_size(64)
fn param_partials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let c = group_id(wid, nwg);
  if (c >= p.cols) { return; }
  let s = param_sums(c, l);
  if (l.lid == 0u) {
    partials[p.dw + c] = s.x;
    partials[p.db + c] = s.y;
  }
}

@compute @workgroup_size(64)
fn combine_params(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let c = flat_id(gid, nwg);
  if (c >= p.cols) { return; }
  var s_w = 0.0;
  var s_b = 0.0;
  for (var k = 0u; k < p.pieces; k++) {
    s_w += partials_in[k * 2u * p.cols + c];
    s_b += partials_in[k * 2u * p.cols + p.cols + c];
  }
  if (HAS_W == 1u) { dw[p.dw + c] = select(s_w, dw[p.dw + c] + s_w, ACCUMULATE == 1u); }
  if (HAS_B == 1u) { db_combined[p.db + c] = select(s_b, db_combined[p.db + c] + s_b, ACCUMULATE == 1u); }
}
