// Elementwise activations, one invocation per element (act, act_grad in
// common.wgsl):
//   forward   y  = act(x)        (bindings x, y)
//   backward  dx = dy act'(x)    (bindings x, dy, dx)
// Each tensor is bound by itself and starts at its word p.<name> there.
// The activation (gk_op: 0 relu .. 4 softplus) and GELU's form (1: tanh)
// are override constants of the plan's pipelines, so the compiler keeps
// only the one activation's code.
override ACT: u32;
override APPROX: u32;
struct Params { x: u32, y: u32, dy: u32, dx: u32, n: u32, beta: f32, threshold: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  y[p.y + i] = act(ACT, x[p.x + i], APPROX, p.beta, p.threshold);
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  dx[p.dx + i] = dy[p.dy + i] * act_grad(ACT, x[p.x + i], APPROX, p.beta, p.threshold);
}
