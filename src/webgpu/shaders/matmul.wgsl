// Linear and matmul: one strided matrix product for every case,
//   c[bt, i, j] (+)= sum_{kb, k} a[bt, kb, i, k] b[bt, kb, k, j]  (+ bias[j])
// with each operand addressed by strides (batch bs, reduction batch kbs,
// row rs, column cs), so transposed operands, the backward's products
// (dx = dy W, dW = dy^T x, dA = dY op(B)^T, dB = op(A)^T dY) and a B shared
// by the batch (its gradient summed over the batch as a reduction batch)
// need no copies. One workgroup of 8 x 8 invocations per 16 x 16 tile of c,
// each invocation 2 x 2 outputs; 16-deep slices of a and b staged through
// workgroup memory. Every output sums kb, then k, in order.
//   column_sum: dbias[j] (+)= sum_i dy[i, j], one workgroup per column.
struct Params {
  a: u32, b: u32, c: u32, bias: u32, M: u32, N: u32, K: u32, batches: u32,
  kb: u32, has_bias: u32, accumulate: u32, pad: u32,
  a_bs: u32, a_kbs: u32, a_rs: u32, a_cs: u32,
  b_bs: u32, b_kbs: u32, b_rs: u32, b_cs: u32,
  c_bs: u32, c_rs: u32, c_cs: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

var<workgroup> tile_a: array<array<f32, 16>, 16>;   // [i][k]
var<workgroup> tile_b: array<array<f32, 16>, 16>;   // [k][j]

@compute @workgroup_size(64)
fn product(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  let tiles_m = (p.M + 15u) / 16u;
  let tiles_n = (p.N + 15u) / 16u;
  let g = group_id(wid, nwg);
  if (g >= tiles_m * tiles_n * p.batches) { return; }
  let bt = g / (tiles_m * tiles_n);
  let i0 = (g / tiles_n) % tiles_m * 16u;
  let j0 = g % tiles_n * 16u;
  let ty = lid / 8u;
  let tx = lid % 8u;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var kb = 0u; kb < p.kb; kb++) {
    let a_base = p.a + bt * p.a_bs + kb * p.a_kbs;
    let b_base = p.b + bt * p.b_bs + kb * p.b_kbs;
    for (var k0 = 0u; k0 < p.K; k0 += 16u) {
      for (var q = 0u; q < 4u; q++) {
        let e = lid + q * 64u;
        let r = e / 16u;
        let s = e % 16u;
        let ia = i0 + r;
        let ka = k0 + s;
        tile_a[r][s] = select(0.0, m[a_base + ia * p.a_rs + ka * p.a_cs], ia < p.M && ka < p.K);
        let kb_ = k0 + r;
        let jb = j0 + s;
        tile_b[r][s] = select(0.0, m[b_base + kb_ * p.b_rs + jb * p.b_cs], kb_ < p.K && jb < p.N);
      }
      workgroupBarrier();
      for (var k = 0u; k < 16u; k++) {
        let a0 = tile_a[ty * 2u][k];
        let a1 = tile_a[ty * 2u + 1u][k];
        let b0 = tile_b[k][tx * 2u];
        let b1 = tile_b[k][tx * 2u + 1u];
        acc[0] += a0 * b0;
        acc[1] += a0 * b1;
        acc[2] += a1 * b0;
        acc[3] += a1 * b1;
      }
      workgroupBarrier();
    }
  }
  for (var u = 0u; u < 4u; u++) {
    let i = i0 + ty * 2u + u / 2u;
    let j = j0 + tx * 2u + u % 2u;
    if (i < p.M && j < p.N) {
      let at = p.c + bt * p.c_bs + i * p.c_rs + j * p.c_cs;
      var v = acc[u];
      if (p.has_bias == 1u) { v += m[p.bias + j]; }
      if (p.accumulate == 1u) { v += m[at]; }
      m[at] = v;
    }
  }
}

// Params: a = dy (M x N, contiguous), c = dbias. One workgroup per column:
// each invocation sums every 64th row in order, then a fixed-order tree.
@compute @workgroup_size(64)
fn column_sum(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
              @builtin(local_invocation_index) lid: u32) {
  let j = group_id(wid, nwg);
  if (j >= p.N) { return; }
  var s = 0.0;
  for (var i = lid; i < p.M; i += WG) { s += m[p.a + i * p.N + j]; }
  s = wg_sum(s, lid);
  if (lid == 0u) { m[p.c + j] = select(s, m[p.c + j] + s, p.accumulate == 1u); }
}
