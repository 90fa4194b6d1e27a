// Staging between a tensor in its own buffer (any strides) and its
// contiguous slot in the arena, one invocation per element unless said.
// mode 0: f32/i32/i64, moving `ew` 4-byte words an element (1, or 2 for
// i64), base and strides in words; mode 1 (f16), 2 (bf16): 2-byte elements
// two to a word (half.wgsl), base and strides in elements, f32 in the
// arena.
//   gather:    arena[slot + i*ew + w] = src[base + sum_d idx_d(i) strides_d + w]
//              (16-bit: arena[slot + i] = f32 of element base + sum_d ...)
//   scatter:   the reverse of gather, for outputs (mode 0)
//   scatter16: the same for 16-bit outputs of any strides, rounded to nearest
//              even; each element's half of its word by atomicAnd/atomicOr,
//              so that invocations writing the two halves of a word never race
//   scatter16_words: a contiguous 16-bit output, one invocation per word of
//              the buffer it touches (word first_word + i); halves outside
//              the tensor (the edges) keep their bits
struct Params {
  base: i32, count: u32, ew: u32, rank: u32, slot: u32, mode: u32, first_word: u32, words: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> src_atomic: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> arena: array<u32>;

// The offset in src (words, or 16-bit elements) of row-major element i.
fn src_offset(i: u32) -> i32 {
  var rest = i;
  var off = p.base;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let n = p.shape[d / 4][d % 4];
    off += i32(rest % n) * p.strides[d / 4][d % 4];
    rest /= n;
  }
  return off;
}

fn flat(gid: vec3u, nwg: vec3u) -> u32 { return gid.x + gid.y * nwg.x * 64u; }

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat(gid, nwg);
  if (i >= p.count) { return; }
  let off = u32(src_offset(i));
  if (p.mode != 0u) {
    arena[p.slot + i] = bitcast<u32>(half_pair(src[off >> 1u], p.mode)[off & 1u]);
    return;
  }
  for (var w = 0u; w < p.ew; w++) { arena[p.slot + i * p.ew + w] = src[off + w]; }
}

@compute @workgroup_size(64)
fn scatter(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat(gid, nwg);
  if (i >= p.count) { return; }
  let off = u32(src_offset(i));
  for (var w = 0u; w < p.ew; w++) { src[off + w] = arena[p.slot + i * p.ew + w]; }
}

@compute @workgroup_size(64)
fn scatter16(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat(gid, nwg);
  if (i >= p.count) { return; }
  let off = u32(src_offset(i));
  let shift = 16u * (off & 1u);
  let bits = half_bits(bitcast<f32>(arena[p.slot + i]), p.mode);
  atomicAnd(&src_atomic[off >> 1u], ~(0xffffu << shift));
  atomicOr(&src_atomic[off >> 1u], bits << shift);
}

@compute @workgroup_size(64)
fn scatter16_words(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = flat(gid, nwg);
  if (i >= p.words) { return; }
  let w = p.first_word + i;
  var word = src[w];
  for (var h = 0u; h < 2u; h++) {
    let e = 2u * w + h - u32(p.base);  // the element of the tensor (wraps past it below its start)
    if (e < p.count) {
      let shift = 16u * h;
      word = (word & ~(0xffffu << shift)) | (half_bits(bitcast<f32>(arena[p.slot + e]), p.mode) << shift);
    }
  }
  src[w] = word;
}
