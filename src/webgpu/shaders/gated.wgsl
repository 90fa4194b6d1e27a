// Gated activations y = a act(b), one invocation per element of y (act:
// GLU sigmoid, ReGLU relu, SwiGLU silu, GeGLU gelu; common.wgsl).
//   split form: x viewed as (outer, 2, h) with h = half * inner; for y's
//     element i = (o, r): a = x[o, 0, r], b = x[o, 1, r] (half = 0 marks
//     the two-tensor form: a = x[i], b = gate[i])
//   forward   y = a act(b)
//   backward  da = dy act(b),  db = dy a act'(b)  (into dx's halves, or dx and dgate)
// The activation (gk_op code) and GELU's form: override constants, as in activation.wgsl.
override ACT: u32;
override APPROX: u32;
struct Params { x: u32, gate: u32, y: u32, dy: u32, dx: u32, dgate: u32, n: u32, half: u32 }
@group(0) @binding(0) var<uniform> p: Params;

// The element offsets of a and b for y's element i.
fn halves(i: u32) -> vec2u {
  if (p.half == 0u) { return vec2u(i, i); }
  let ia = (i / p.half) * 2u * p.half + i % p.half;
  return vec2u(ia, ia + p.half);
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let h = halves(i);
  let b_base = select(p.x, p.gate, p.half == 0u);
  m[p.y + i] = m[p.x + h.x] * act(ACT, m[b_base + h.y], APPROX, 1.0, 20.0);
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let h = halves(i);
  let b_base = select(p.x, p.gate, p.half == 0u);
  let a = m[p.x + h.x];
  let b = m[b_base + h.y];
  let dy = m[p.dy + i];
  let db_base = select(p.dx, p.dgate, p.half == 0u);
  m[p.dx + h.x] = dy * act(ACT, b, APPROX, 1.0, 20.0);
  m[db_base + h.y] = dy * a * act_grad(ACT, b, APPROX, 1.0, 20.0);
}
