// Add and mul with numpy broadcasting. Shapes are aligned to y's rank R:
// a_str, b_str are a's and b's contiguous strides in y's dims (0 where the
// operand has size 1 or lacks the dim).
//   forward   add y = a + alpha b      mul y = alpha a b        (one invocation per y element)
//   backward  add da = sum dy, db = alpha sum dy
//             mul da = alpha sum dy b, db = alpha sum dy a
// Backward's reduce_grad runs once per operand g: one invocation per
// element of g, summing in row-major order over `red`, the dims g was
// broadcast along (red_shape: y's size there, 1 elsewhere). A piece of a
// split run (backend.c) may carry g's sums through `scratch`: carry bit 0,
// the sum starts from the pieces' before it there; bit 1, it is left there
// for the pieces after it instead of written to g (alpha applied once).
// Each tensor is bound by itself, starting at its word p.<name> there:
// forward a, b, y; reduce_grad (add) dy, g, scratch; reduce_grad_mul dy,
// the other operand, g, scratch. Add or mul is an override constant of the plan's pipelines,
// and so is whether anything is broadcast (BROADCAST = 0: element i of
// every tensor is element i of the run, no index arithmetic; a loop of
// divisions and a private array per element cost llvmpipe 10-30x).
// The entry points <name>16: nothing broadcast, f16 (HALF = 1) or bf16
// (HALF = 2) tensors of an even count bound where they lie, one invocation
// per word of two elements (half.wgsl), f32 math; p.<name> are then word
// offsets, p.n still elements.
override IS_MUL: u32;
override BROADCAST: u32 = 1u;
override HALF: u32 = 1u;
struct Params {
  a: u32, b: u32, y: u32, n: u32, rank: u32, carry: u32, alpha: f32, pad0: u32,
  shape: array<vec4<u32>, 2>,       // y's shape (forward) / g's shape in y's dims (reduce_grad)
  a_str: array<vec4<u32>, 2>,       // forward: a's strides / reduce_grad: dy's strides
  b_str: array<vec4<u32>, 2>,       // forward: b's strides / reduce_grad: the other operand's strides
  red_shape: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> g_add: array<f32>;
@group(0) @binding(3) var<storage, read_write> other: array<f32>;
@group(0) @binding(4) var<storage, read_write> g_mul: array<f32>;
@group(0) @binding(4) var<storage, read_write> scratch_add: array<f32>;
@group(0) @binding(5) var<storage, read_write> scratch_mul: array<f32>;
@group(0) @binding(2) var<storage, read_write> a16: array<u32>;
@group(0) @binding(3) var<storage, read_write> b16: array<u32>;
@group(0) @binding(4) var<storage, read_write> y16: array<u32>;
@group(0) @binding(2) var<storage, read_write> dy16: array<u32>;
@group(0) @binding(3) var<storage, read_write> g_add16: array<u32>;
@group(0) @binding(3) var<storage, read_write> other16: array<u32>;
@group(0) @binding(4) var<storage, read_write> g_mul16: array<u32>;

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 { return v[d / 4u][d % 4u]; }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  var ia = i;
  var ib = i;
  if (BROADCAST == 1u) {
    var rest = i;
    ia = 0u;
    ib = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d--) {
      let n = dim(p.shape, u32(d));
      let k = rest % n;
      rest /= n;
      ia += k * dim(p.a_str, u32(d));
      ib += k * dim(p.b_str, u32(d));
    }
  }
  let a = a[p.a + ia];
  let b = b[p.b + ib];
  y[p.y + i] = select(a + p.alpha * b, p.alpha * a * b, IS_MUL == 1u);
}

// g[i] = alpha sum over the broadcast dims of dy (times the other operand for mul).
// Params: a = dy's slot, b = the other operand's slot, y = g's slot, n = g's elements.
// g's element i: its index in y's dims (size 1 along the broadcast dims)
// and the number of terms of its sum.
struct Reduced { idx: array<u32, 8>, count: u32 }
fn reduced(i: u32) -> Reduced {
  var out: Reduced;
  var rest = i;
  out.count = 1u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = dim(p.shape, u32(d));
    out.idx[d] = rest % n;
    rest /= n;
    out.count *= dim(p.red_shape, u32(d));
  }
  return out;
}
// Term r of the sum: its element of dy and of the other operand.
fn term(g: Reduced, r: u32) -> vec2u {
  var rr = r;
  var iy = 0u;
  var io = 0u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = dim(p.red_shape, u32(d));
    let k = g.idx[d] + rr % n;
    rr /= n;
    iy += k * dim(p.a_str, u32(d));
    io += k * dim(p.b_str, u32(d));
  }
  return vec2u(iy, io);
}

@compute @workgroup_size(64)
fn reduce_grad(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  if (BROADCAST == 0u) {
    g_add[p.y + i] = p.alpha * dy[p.a + i];
    return;
  }
  let g = reduced(i);
  var sum = select(0.0, scratch_add[i], (p.carry & 1u) != 0u);
  for (var r = 0u; r < g.count; r++) { sum += dy[p.a + term(g, r).x]; }
  if ((p.carry & 2u) != 0u) {
    scratch_add[i] = sum;
    return;
  }
  g_add[p.y + i] = p.alpha * sum;
}

@compute @workgroup_size(64)
fn reduce_grad_mul(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  if (BROADCAST == 0u) {
    g_mul[p.y + i] = p.alpha * (dy[p.a + i] * other[p.b + i]);
    return;
  }
  let g = reduced(i);
  var sum = select(0.0, scratch_mul[i], (p.carry & 1u) != 0u);
  for (var r = 0u; r < g.count; r++) {
    let at = term(g, r);
    sum += dy[p.a + at.x] * other[p.b + at.y];
  }
  if ((p.carry & 2u) != 0u) {
    scratch_mul[i] = sum;
    return;
  }
  g_mul[p.y + i] = p.alpha * sum;
}

@compute @workgroup_size(64)
fn forward16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let a = half_pair(a16[p.a + w], HALF);
  let b = half_pair(b16[p.b + w], HALF);
  y16[p.y + w] = half_word(select(a + p.alpha * b, p.alpha * a * b, IS_MUL == 1u), HALF);
}

@compute @workgroup_size(64)
fn reduce_grad16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  g_add16[p.y + w] = half_word(p.alpha * half_pair(dy16[p.a + w], HALF), HALF);
}

@compute @workgroup_size(64)
fn reduce_grad_mul16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = flat_id(gid, nwg);
  if (2u * w >= p.n) { return; }
  let g = p.alpha * (half_pair(dy16[p.a + w], HALF) * half_pair(other16[p.b + w], HALF));
  g_mul16[p.y + w] = half_word(g, HALF);
}
