// Add and mul with numpy broadcasting. Shapes are aligned to y's rank R:
// a_str, b_str are a's and b's contiguous strides in y's dims (0 where the
// operand has size 1 or lacks the dim).
//   forward   add y = a + alpha b      mul y = alpha a b        (one invocation per y element)
//   backward  add da = sum dy, db = alpha sum dy
//             mul da = alpha sum dy b, db = alpha sum dy a
// Backward's reduce_grad runs once per operand g: one invocation per
// element of g, summing in row-major order over `red`, the dims g was
// broadcast along (red_shape: y's size there, 1 elsewhere).
struct Params {
  a: u32, b: u32, y: u32, n: u32, rank: u32, is_mul: u32, alpha: f32, other: u32,
  shape: array<vec4<u32>, 2>,       // y's shape (forward) / g's shape in y's dims (reduce_grad)
  a_str: array<vec4<u32>, 2>,       // forward: a's strides / reduce_grad: dy's strides
  b_str: array<vec4<u32>, 2>,       // forward: b's strides / reduce_grad: the other operand's strides
  red_shape: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 { return v[d / 4u][d % 4u]; }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  var rest = i;
  var ia = 0u;
  var ib = 0u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = dim(p.shape, u32(d));
    let k = rest % n;
    rest /= n;
    ia += k * dim(p.a_str, u32(d));
    ib += k * dim(p.b_str, u32(d));
  }
  let a = m[p.a + ia];
  let b = m[p.b + ib];
  m[p.y + i] = select(a + p.alpha * b, p.alpha * a * b, p.is_mul == 1u);
}

// g[i] = alpha sum over the broadcast dims of dy (times the other operand for mul).
// Params: a = dy's slot, b = the other operand's slot, y = g's slot, n = g's elements.
@compute @workgroup_size(64)
fn reduce_grad(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat_id(gid, nwg);
  if (i >= p.n) { return; }
  // g's index in y's dims (size 1 along the broadcast dims).
  var idx: array<u32, 8>;
  var rest = i;
  var count = 1u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = dim(p.shape, u32(d));
    idx[d] = rest % n;
    rest /= n;
    count *= dim(p.red_shape, u32(d));
  }
  var sum = 0.0;
  for (var r = 0u; r < count; r++) {
    var rr = r;
    var iy = 0u;
    var io = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d--) {
      let n = dim(p.red_shape, u32(d));
      let k = idx[d] + rr % n;
      rr /= n;
      iy += k * dim(p.a_str, u32(d));
      io += k * dim(p.b_str, u32(d));
    }
    let dy = m[p.a + iy];
    sum += select(dy, dy * m[p.b + io], p.is_mul == 1u);
  }
  m[p.y + i] = p.alpha * sum;
}
