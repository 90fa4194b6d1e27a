// RMSNorm and LayerNorm over rows of C elements; forward and backward's dx
// take one workgroup per row, the parameter gradients one workgroup per
// column (each invocation sums every 64th row in order, then a fixed-order
// tree: common.wgsl).
//   RMSNorm:   rstd = 1 / sqrt(mean(x^2) + eps),           xhat = x rstd
//   LayerNorm: mean, rstd = 1 / sqrt(mean((x-mean)^2) + eps), xhat = (x - mean) rstd
//   forward    y = xhat w + b            (w = 1, b = 0 when absent)
//   backward   g = dy w;  dx = rstd (g - [LayerNorm] mean(g) - xhat mean(g xhat))
//              dw[c] (+)= sum_r dy xhat,  db[c] (+)= sum_r dy
struct Params {
  x: u32, w: u32, b: u32, y: u32, mean: u32, rstd: u32, dy: u32, dx: u32, dw: u32, db: u32,
  rows: u32, cols: u32, eps: f32, is_ln: u32, has_w: u32, has_b: u32, accumulate: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

fn weight(c: u32) -> f32 { return select(1.0, m[p.w + c], p.has_w == 1u); }
fn row_mean(r: u32) -> f32 { return select(0.0, m[p.mean + r], p.is_ln == 1u); }

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = r * p.cols;
  let n = f32(p.cols);
  // (Barriers stay out of branches: OpenGL ES allows them in no control flow.)
  var s = 0.0;
  for (var c = lid; c < p.cols; c += WG) { s += m[p.x + base + c]; }
  let mean = select(0.0, wg_sum(s, lid) / n, p.is_ln == 1u);
  var q = 0.0;
  for (var c = lid; c < p.cols; c += WG) { let v = m[p.x + base + c] - mean; q += v * v; }
  let rstd = 1.0 / sqrt(wg_sum(q, lid) / n + p.eps);
  for (var c = lid; c < p.cols; c += WG) {
    var v = (m[p.x + base + c] - mean) * rstd * weight(c);
    if (p.has_b == 1u) { v += m[p.b + c]; }
    m[p.y + base + c] = v;
  }
  if (lid == 0u) {
    m[p.rstd + r] = rstd;
    if (p.is_ln == 1u) { m[p.mean + r] = mean; }
  }
}

@compute @workgroup_size(64)
fn backward_dx(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
               @builtin(local_invocation_index) lid: u32) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = r * p.cols;
  let n = f32(p.cols);
  let mean = row_mean(r);
  let rstd = m[p.rstd + r];
  var s_g = 0.0;
  var s_gx = 0.0;
  for (var c = lid; c < p.cols; c += WG) {
    let g = m[p.dy + base + c] * weight(c);
    s_g += g;
    s_gx += g * (m[p.x + base + c] - mean) * rstd;
  }
  let mean_g = select(0.0, wg_sum(s_g, lid) / n, p.is_ln == 1u);
  let mean_gx = wg_sum(s_gx, lid) / n;
  for (var c = lid; c < p.cols; c += WG) {
    let g = m[p.dy + base + c] * weight(c);
    let xhat = (m[p.x + base + c] - mean) * rstd;
    m[p.dx + base + c] = rstd * (g - mean_g - xhat * mean_gx);
  }
}

@compute @workgroup_size(64)
fn backward_params(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
                   @builtin(local_invocation_index) lid: u32) {
  let c = group_id(wid, nwg);
  if (c >= p.cols) { return; }
  var s_w = 0.0;
  var s_b = 0.0;
  for (var r = lid; r < p.rows; r += WG) {
    let dy = m[p.dy + r * p.cols + c];
    s_w += dy * (m[p.x + r * p.cols + c] - row_mean(r)) * m[p.rstd + r];
    s_b += dy;
  }
  s_w = wg_sum(s_w, lid);
  s_b = wg_sum(s_b, lid);
  if (lid == 0u) {
    if (p.has_w == 1u) { m[p.dw + c] = select(s_w, m[p.dw + c] + s_w, p.accumulate == 1u); }
    if (p.has_b == 1u) { m[p.db + c] = select(s_b, m[p.db + c] + s_b, p.accumulate == 1u); }
  }
}
