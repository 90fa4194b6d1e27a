// Elementwise activations, one invocation per element (act, act_grad,
// act_grad_y in common.wgsl):
//   forward   y  = act(x)
//   backward  dx = dy act'(x), or with from_output (relu, sigmoid:
//             act.from_output) dx = dy act'(x) from y = act(x)
struct Params { x: u32, y: u32, dy: u32, dx: u32, n: u32, op: u32, approx: u32, beta: f32, threshold: f32,
                from_output: u32 }
@group(0) @binding(0) var<uniform> p: Params;

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  m[p.y + i] = act(p.op, m[p.x + i], p.approx, p.beta, p.threshold);
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  if (p.from_output != 0u) {
    m[p.dx + i] = m[p.dy + i] * act_grad_y(p.op, m[p.y + i]);
  } else {
    m[p.dx + i] = m[p.dy + i] * act_grad(p.op, m[p.x + i], p.approx, p.beta, p.threshold);
  }
}
