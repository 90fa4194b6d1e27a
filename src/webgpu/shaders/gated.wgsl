// Gated activations y = a act(b), one invocation per element of y (act:
// GLU sigmoid, ReGLU relu, SwiGLU silu, GeGLU gelu; common.wgsl).
//   split form: x viewed as (outer, 2, h) with h = half * inner; for y's
//     element i = (o, r): a = x[o, 0, r], b = x[o, 1, r]
//   two-tensor form: a = x[i], b = gate[i]
//   forward   y = a act(b)
//   backward  da = dy act(b),  db = dy a act'(b)  (into dx's halves, or dx and dgate)
// The activation (gk_op code) and GELU's form: override constants, as in activation.wgsl.
override ACT: u32;
override APPROX: u32;
// Each tensor is bound by itself, starting at its word p.<name> there.
// The split form has entry points of its own, which read a and b both
// from x (and write both gradients into dx):
//   forward x, gate, y;            forward_split x, y
//   backward x, gate, dy, dx, dgate;  backward_split x, dy, dx
struct Params { x: u32, gate: u32, y: u32, dy: u32, dx: u32, dgate: u32, n: u32, half: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> gate: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;
@group(0) @binding(6) var<storage, read_write> dgate: array<f32>;
@group(0) @binding(3) var<storage, read_write> split_y: array<f32>;
@group(0) @binding(3) var<storage, read_write> split_dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> split_dx: array<f32>;

// The split form: the element offsets in x of a and b for y's element i.
fn halves(i: u32) -> vec2u {
  let ia = (i / p.half) * 2u * p.half + i % p.half;
  return vec2u(ia, ia + p.half);
}
fn gated(a: f32, b: f32) -> f32 { return a * act(ACT, b, APPROX, 1.0, 20.0); }
// (da, db) from dy, a and b.
fn gated_grad(dy: f32, a: f32, b: f32) -> vec2f {
  return vec2f(dy * act(ACT, b, APPROX, 1.0, 20.0), dy * a * act_grad(ACT, b, APPROX, 1.0, 20.0));
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  y[p.y + i] = gated(x[p.x + i], gate[p.gate + i]);
}

@compute @workgroup_size(64)
fn forward_split(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let h = halves(i);
  split_y[p.y + i] = gated(x[p.x + h.x], x[p.x + h.y]);
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let d = gated_grad(dy[p.dy + i], x[p.x + i], gate[p.gate + i]);
  dx[p.dx + i] = d.x;
  dgate[p.dgate + i] = d.y;
}

@compute @workgroup_size(64)
fn backward_split(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let h = halves(i);
  let d = gated_grad(split_dy[p.dy + i], x[p.x + h.x], x[p.x + h.y]);
  split_dx[p.dx + h.x] = d.x;
  split_dx[p.dx + h.y] = d.y;
}
