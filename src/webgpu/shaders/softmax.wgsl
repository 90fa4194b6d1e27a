// Softmax and log-softmax along one dim of length L: x viewed as
// (outer, L, inner), one workgroup per row (o, i), whose elements are L
// apart by `inner`; max and sums are workgroup reductions in a fixed order
// (lanes_max, lanes_sum: a tree, reduce.wgsl, or subgroups, reduce_subgroups.wgsl).
//   forward   softmax y = exp(x - max) / s,  log-softmax y = x - max - log(s),  s = sum exp(x - max)
//   backward  softmax dx = y (dy - sum(dy y)),  log-softmax dx = dy - exp(y) sum(dy)
// Bindings: forward x, y; backward dy, y, dx (each tensor bound by itself,
// starting at its word p.<name> there). IS_LOG (1: log-softmax) is an
// override constant of the plan's pipelines.
override IS_LOG: u32;
struct Params { x: u32, y: u32, dy: u32, dx: u32, rows: u32, len: u32, inner: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

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
