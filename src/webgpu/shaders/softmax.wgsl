// Softmax and log-softmax along one dim of length L: x viewed as
// (outer, L, inner), one workgroup per row (o, i), whose elements are L
// apart by `inner`; max and sums are workgroup reductions in a fixed order
// (lanes_max, lanes_sum: a tree, reduce.wgsl, or subgroups, reduce_subgroups.wgsl).
//   forward   softmax y = exp(x - max) / s,  log-softmax y = x - max - log(s),  s = sum exp(x - max)
//   backward  softmax dx = y (dy - sum(dy y)),  log-softmax dx = dy - exp(y) sum(dy)
// Bindings: forward x, y; backward dy, y, dx (each tensor bound by itself,
// starting at its word p.<name> there). IS_LOG (1: log-softmax) is an
// override constant of the plan's pipelines. backward_vec4 is the backward
// for rows of whole vec4s (inner 1; len and each tensor's first word
// multiples of 4: kernels.c picks it per run): each invocation takes every
// 64th vec4 of the row, a quarter of the loads and stores (on llvmpipe every
// load is an instruction per lane, whatever its width); its sum adds the
// products in another order than backward's.
override IS_LOG: u32;
struct Params { x: u32, y: u32, dy: u32, dx: u32, rows: u32, len: u32, inner: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy4: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> y4: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> dx4: array<vec4f>;

fn row_base(r: u32) -> u32 { return (r / p.inner) * p.len * p.inner + r % p.inner; }

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = row_base(r);
  var mx = -3.4028234e38;
  for (var j = lid; j < p.len; j += WG) { mx = max(mx, x[p.x + base + j * p.inner]); }
  mx = lanes_max(mx, l);
  var s = 0.0;
  for (var j = lid; j < p.len; j += WG) { s += exp(x[p.x + base + j * p.inner] - mx); }
  s = lanes_sum(s, l);
  let log_s = log(s);
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    let v = x[p.x + at] - mx;
    y[p.y + at] = select(exp(v) / s, v - log_s, IS_LOG == 1u);
  }
}

@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = row_base(r);
  var s = 0.0;
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    s += select(dy[p.dy + at] * y[p.y + at], dy[p.dy + at], IS_LOG == 1u);
  }
  s = lanes_sum(s, l);
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    let dy = dy[p.dy + at];
    let y = y[p.y + at];
    if (IS_LOG == 1u) {
      dx[p.dx + at] = dy - exp(y) * s;
    } else {
      dx[p.dx + at] = y * (dy - s);
    }
  }
}

@compute @workgroup_size(64)
fn backward_vec4(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let n4 = p.len / 4u;
  let dy_at = p.dy / 4u + r * n4;
  let y_at = p.y / 4u + r * n4;
  let dx_at = p.dx / 4u + r * n4;
  var s = 0.0;
  for (var j = l.lid; j < n4; j += WG) {
    let g = dy4[dy_at + j];
    if (IS_LOG == 1u) { s += g.x + g.y + g.z + g.w; } else { s += dot(g, y4[y_at + j]); }
  }
  s = lanes_sum(s, l);
  for (var j = l.lid; j < n4; j += WG) {
    let g = dy4[dy_at + j];
    let y = y4[y_at + j];
    if (IS_LOG == 1u) {
      dx4[dx_at + j] = g - exp(y) * s;
    } else {
      dx4[dx_at + j] = y * (g - s);
    }
  }
}
