// Rotary position embedding on x (B, T, H, Dh) or (B, H, T, Dh), one
// invocation per rotated pair. cos and sin of p theta^(-2i/Dh) (p = offset
// + t) come from a table the plan computes in f64 (constants: T x Dh/2
// cosines, then as many sines), so large positions lose nothing to f32.
// Pairs (i, i + Dh/2) (rotate-half) or (2i, 2i + 1) (interleaved):
//   forward   (ya, yb) = (xa cos - xb sin, xb cos + xa sin)
//   backward  (dxa, dxb) = (dya cos + dyb sin, dyb cos - dya sin)   (the inverse rotation)
// A run split into pieces of rows of Dh (kernels.c) covers rows row0 ..
// row0 + pairs / (Dh/2) a piece, src and dst bound from the piece's first.
struct Params { src: u32, dst: u32, table: u32, pairs: u32, T: u32, H: u32, Dh: u32, bhtd: u32,
                interleaved: u32, inverse: u32, row0: u32 }
@group(0) @binding(0) var<uniform> p: Params;
// Each bound by itself, starting at its word p.<name> there: src, dst, the table.
@group(0) @binding(2) var<storage, read_write> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
@group(0) @binding(4) var<storage, read_write> table: array<f32>;

@compute @workgroup_size(64)
fn rotate(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let q = flat_id(gid, nwg);
  if (q >= p.pairs) { return; }
  let half = p.Dh / 2u;
  let i = q % half;
  let local = q / half;
  let row = p.row0 + local;           // (b, t, h) or (b, h, t), row-major
  let t = select((row / p.H) % p.T, row % p.T, p.bhtd == 1u);
  let ia = local * p.Dh + select(i, 2u * i, p.interleaved == 1u);
  let ib = ia + select(half, 1u, p.interleaved == 1u);
  let c = table[p.table + t * half + i];
  let s = select(1.0, -1.0, p.inverse == 1u) * table[p.table + p.T * half + t * half + i];
  let a = src[p.src + ia];
  let b = src[p.src + ib];
  dst[p.dst + ia] = a * c - b * s;
  dst[p.dst + ib] = b * c + a * s;
}
