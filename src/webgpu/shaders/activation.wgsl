// Elementwise activations (act, act_grad, act_grad_y in common.wgsl):
//   forward   y  = act(x)                  (bindings v = x, y)
//   backward  dx = dy act'(x)              (bindings v = x, dy, dx)
//             or, with FROM_OUTPUT (relu, sigmoid: act.from_output),
//             dx = dy act'(x) from y = act(x)  (bindings v = y, dy, dx)
// Each tensor is bound by itself and starts at its word p.<name> there.
// A workgroup takes 256 elements, each invocation 4 of them 64 apart (so
// the 64 invocations read 64 consecutive words at a time).
// The activation (gk_op: 0 relu .. 4 softplus), GELU's form (1: tanh) and
// FROM_OUTPUT are override constants of the plan's pipelines, so the
// compiler keeps only the code the plan runs.
// forward16, backward16: the same on f16 (HALF = 1) or bf16 (HALF = 2)
// tensors of an even count bound where they lie, one invocation per word
// of two elements (half.wgsl), f32 math; p.<name> are then word offsets,
// p.n still elements.
override ACT: u32;
override APPROX: u32;
override FROM_OUTPUT: u32;
override HALF: u32 = 1u;
struct Params { v: u32, y: u32, dy: u32, dx: u32, n: u32, beta: f32, threshold: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(2) var<storage, read_write> v16: array<u32>;
@group(0) @binding(3) var<storage, read_write> y16: array<u32>;
@group(0) @binding(3) var<storage, read_write> dy16: array<u32>;
@group(0) @binding(4) var<storage, read_write> dx16: array<u32>;

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let first = group_id(wid, nwg) * 256u + lid;
  for (var k = 0u; k < 4u; k++) {
    let i = first + 64u * k;
    if (i < p.n) { y[p.y + i] = act(ACT, v[p.v + i], APPROX, p.beta, p.threshold); }
  }
}

@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
            @builtin(local_invocation_index) lid: u32) {
  let first = group_id(wid, nwg) * 256u + lid;
  for (var k = 0u; k < 4u; k++) {
    let i = first + 64u * k;
    if (i < p.n) {
      if (FROM_OUTPUT == 1u) {
        dx[p.dx + i] = dy[p.dy + i] * act_grad_y(ACT, v[p.v + i]);
      } else {
        dx[p.dx + i] = dy[p.dy + i] * act_grad(ACT, v[p.v + i], APPROX, p.beta, p.threshold);
      }
    }
  }
}

@compute @workgroup_size(64)
fn forward16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let x = half_pair(v16[p.v + w], HALF);
  y16[p.y + w] = half_word(vec2f(act(ACT, x.x, APPROX, p.beta, p.threshold),
                                 act(ACT, x.y, APPROX, p.beta, p.threshold)), HALF);
}

@compute @workgroup_size(64)
fn backward16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let v = half_pair(v16[p.v + w], HALF);
  var g: vec2f;
  if (FROM_OUTPUT == 1u) {
    g = vec2f(act_grad_y(ACT, v.x), act_grad_y(ACT, v.y));
  } else {
    g = vec2f(act_grad(ACT, v.x, APPROX, p.beta, p.threshold), act_grad(ACT, v.y, APPROX, p.beta, p.threshold));
  }
  dx16[p.dx + w] = half_word(half_pair(dy16[p.dy + w], HALF) * g, HALF);
}
