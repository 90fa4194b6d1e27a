// Staging between a tensor in its own buffer (any strides, in 4-byte words)
// and its contiguous slot in the arena; one invocation per element, each
// moving `ew` words (1 for f32/i32, 2 for i64).
//   gather:  arena[slot + i*ew + w] = src[src_base + sum_d idx_d(i) strides_d + w]
//   scatter: the reverse, for outputs.
struct Params {
  src_base: i32, count: u32, ew: u32, rank: u32, slot: u32, pad0: u32, pad1: u32, pad2: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> arena: array<u32>;

// The word offset in src of row-major element i.
fn src_offset(i: u32) -> i32 {
  var rest = i;
  var off = p.src_base;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = p.shape[d / 4][d % 4];
    off += i32(rest % n) * p.strides[d / 4][d % 4];
    rest /= n;
  }
  return off;
}

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 64u;
  if (i >= p.count) { return; }
  let off = src_offset(i);
  for (var w = 0u; w < p.ew; w++) { arena[p.slot + i * p.ew + w] = src[u32(off) + w]; }
}

@compute @workgroup_size(64)
fn scatter(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 64u;
  if (i >= p.count) { return; }
  let off = src_offset(i);
  for (var w = 0u; w < p.ew; w++) { src[u32(off) + w] = arena[p.slot + i * p.ew + w]; }
}
