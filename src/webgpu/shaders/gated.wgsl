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
override HALF: u32 = 1u;
// Each tensor is bound by itself, starting at its word p.<name> there.
// The split form has entry points of its own, which read a and b both
// from x (and write both gradients into dx):
//   forward x, gate, y;            forward_split x, y
//   backward x, gate, dy, dx, dgate;  backward_split x, dy, dx
// The entry points <name>16 do the same on f16 (HALF = 1) or bf16 (HALF =
// 2) tensors of even counts bound where they lie, one invocation per word
// of y (two elements, half.wgsl; the split form's half even, so that x's
// words hold two elements of one half), f32 math; p.<name> are then word
// offsets, p.n and p.half still elements.
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
@group(0) @binding(2) var<storage, read_write> x16: array<u32>;
@group(0) @binding(3) var<storage, read_write> gate16: array<u32>;
@group(0) @binding(4) var<storage, read_write> y16: array<u32>;
@group(0) @binding(4) var<storage, read_write> dy16: array<u32>;
@group(0) @binding(5) var<storage, read_write> dx16: array<u32>;
@group(0) @binding(6) var<storage, read_write> dgate16: array<u32>;
@group(0) @binding(3) var<storage, read_write> split_y16: array<u32>;
@group(0) @binding(3) var<storage, read_write> split_dy16: array<u32>;
@group(0) @binding(4) var<storage, read_write> split_dx16: array<u32>;

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

// Two elements as words: y = a act(b); (da, db).
fn gated16(a: vec2f, b: vec2f) -> u32 { return half_word(vec2f(gated(a.x, b.x), gated(a.y, b.y)), HALF); }
fn gated_grad16(dy: vec2f, a: vec2f, b: vec2f) -> vec2u {
  let d0 = gated_grad(dy.x, a.x, b.x);
  let d1 = gated_grad(dy.y, a.y, b.y);
  return vec2u(half_word(vec2f(d0.x, d1.x), HALF), half_word(vec2f(d0.y, d1.y), HALF));
}

@compute @workgroup_size(64)
fn forward16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  y16[p.y + w] = gated16(half_pair(x16[p.x + w], HALF), half_pair(gate16[p.gate + w], HALF));
}

@compute @workgroup_size(64)
fn forward_split16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let h = halves(2u * w) / 2u;
  split_y16[p.y + w] = gated16(half_pair(x16[p.x + h.x], HALF), half_pair(x16[p.x + h.y], HALF));
}

@compute @workgroup_size(64)
fn backward16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let d = gated_grad16(half_pair(dy16[p.dy + w], HALF), half_pair(x16[p.x + w], HALF),
                       half_pair(gate16[p.gate + w], HALF));
  dx16[p.dx + w] = d.x;
  dgate16[p.dgate + w] = d.y;
}

@compute @workgroup_size(64)
fn backward_split16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let h = halves(2u * w) / 2u;
  let d = gated_grad16(half_pair(split_dy16[p.dy + w], HALF), half_pair(x16[p.x + h.x], HALF),
                       half_pair(x16[p.x + h.y], HALF));
  split_dx16[p.dx + h.x] = d.x;
  split_dx16[p.dx + h.y] = d.y;
}
