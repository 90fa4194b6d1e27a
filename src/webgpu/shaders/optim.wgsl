// The optimizers on WebGPU tensors (src/webgpu/optim.c: gk_adamw_step and
// gk_clip_grad_norm), f32, on tensors staged into contiguous arena slots.
//
// AdamW, one invocation per element, in torch's order (single-tensor path;
// src/optim/optim.c's adamw_piece), the scalars formed in double on the
// host and passed as f32:
//   decay   p = p decay                                  decay = 1 - lr wd: its own pass, so that no
//                                                        compiler fuses the product into the update
//   update  m = m + w (g - m)         when |w| < 0.5 (lerp_small), w = 1 - beta1
//           m = g - (g - m) (1 - w)   otherwise (torch's lerp)
//           v = v beta2 + w2 g g                         w2 = 1 - beta2
//           p = p + neg_step m / (sqrt(v) / bc2 + eps)   neg_step = -lr / (1 - beta1^step),
//                                                        bc2 = sqrt(1 - beta2^step)
//
// Sum of squares (clipping's norm), in f32, in a fixed order (no atomics):
//   partials  per piece x of n elements (optim.c stages a tensor in pieces
//             of whole rows), G workgroups: invocation t of workgroup k sums
//             x[i]^2 for i = 64 k + t, then + 64 G, ... in order, then the
//             workgroup's reduction (lanes_sum: a tree, reduce.wgsl, or
//             subgroups, reduce_subgroups.wgsl):  partial[first + k]
//   totals    one workgroup per tensor r, whose partials (its pieces', in
//             order) are the run of table[2 r + 1] words from table[2 r]:
//             invocation t sums partials t, t + 64, ... in order, then the
//             workgroup's reduction:  sums[r]
// The host reads the sums back once and adds them in tensor order in f64.
//
// Scale (clipping's factor, formed in double on the host, passed as f32):
//   scale   g = g factor
struct Params {
  p: u32, g: u32, exp_avg: u32, exp_avg_sq: u32, n: u32, lerp_small: u32,
  decay: f32, w: f32, beta2: f32, w2: f32, bc2: f32, eps: f32, neg_step: f32,
  partials: u32, groups: u32, table: u32, sums: u32, tensors: u32, factor: f32,
}
@group(0) @binding(0) var<uniform> p: Params;

@compute @workgroup_size(64)
fn decay(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  m[p.p + i] = m[p.p + i] * p.decay;
}

@compute @workgroup_size(64)
fn update(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  let g = m[p.g + i];
  var avg = m[p.exp_avg + i];
  if (p.lerp_small == 1u) { avg = avg + p.w * (g - avg); } else { avg = g - (g - avg) * (1.0 - p.w); }
  let avg_sq = m[p.exp_avg_sq + i] * p.beta2 + p.w2 * g * g;
  m[p.exp_avg + i] = avg;
  m[p.exp_avg_sq + i] = avg_sq;
  m[p.p + i] = m[p.p + i] + p.neg_step * avg / (sqrt(avg_sq) / p.bc2 + p.eps);
}

@compute @workgroup_size(64)
fn partials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let k = group_id(wid, nwg);
  if (k >= p.groups) { return; }
  var s = 0.0;
  for (var i = k * WG + lid; i < p.n; i += WG * p.groups) { let x = m[p.g + i]; s += x * x; }
  let total = lanes_sum(s, l);
  if (lid == 0u) { m[p.partials + k] = total; }
}

@compute @workgroup_size(64)
fn totals(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, l: Lanes) {
  let lid = l.lid;
  let r = group_id(wid, nwg);
  if (r >= p.tensors) { return; }
  let first = bitcast<u32>(m[p.table + 2u * r]);
  let count = bitcast<u32>(m[p.table + 2u * r + 1u]);
  var s = 0.0;
  for (var k = lid; k < count; k += WG) { s += m[p.partials + first + k]; }
  let total = lanes_sum(s, l);
  if (lid == 0u) { m[p.sums + r] = total; }
}

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  m[p.g + i] = m[p.g + i] * p.factor;
}
