// Softmax and log-softmax along one dim of length L: x viewed as
// (outer, L, inner), one workgroup per row (o, i), whose elements are L
// apart by `inner`; max and sums are fixed-order tree reductions.
//   forward   softmax y = exp(x - max) / s,  log-softmax y = x - max - log(s),  s = sum exp(x - max)
//   backward  softmax dx = y (dy - sum(dy y)),  log-softmax dx = dy - exp(y) sum(dy)
struct Params { x: u32, y: u32, dy: u32, dx: u32, rows: u32, len: u32, inner: u32, is_log: u32 }
@group(0) @binding(0) var<uniform> p: Params;

fn row_base(r: u32) -> u32 { return (r / p.inner) * p.len * p.inner + r % p.inner; }

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = row_base(r);
  var mx = -3.4028234e38;
  for (var j = lid; j < p.len; j += WG) { mx = max(mx, m[p.x + base + j * p.inner]); }
  mx = wg_max(mx, lid);
  var s = 0.0;
  for (var j = lid; j < p.len; j += WG) { s += exp(m[p.x + base + j * p.inner] - mx); }
  s = wg_sum(s, lid);
  let log_s = log(s);
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    let v = m[p.x + at] - mx;
    m[p.y + at] = select(exp(v) / s, v - log_s, p.is_log == 1u);
  }
}

@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
            @builtin(local_invocation_index) lid: u32) {
  let r = group_id(wid, nwg);
  if (r >= p.rows) { return; }
  let base = row_base(r);
  var s = 0.0;
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    s += select(m[p.dy + at] * m[p.y + at], m[p.dy + at], p.is_log == 1u);
  }
  s = wg_sum(s, lid);
  for (var j = lid; j < p.len; j += WG) {
    let at = base + j * p.inner;
    let dy = m[p.dy + at];
    let y = m[p.y + at];
    m[p.dx + at] = select(y * (dy - s), dy - exp(y) * s, p.is_log == 1u);
  }
}
