// Linear and matmul: one strided matrix product for every case,
//   c[bt, i, j] (+)= sum_{kb, k} a[bt, kb, i, k] b[bt, kb, k, j]  (+ bias[j])
// with each operand addressed by strides (batch bs, reduction batch kbs,
// row rs, column cs), so transposed operands, the backward's products
// (dx = dy W, dW = dy^T x, dA = dY op(B)^T, dB = op(A)^T dY) and a B shared
// by the batch (its gradient summed over the batch as a reduction batch)
// need no copies. One workgroup of 8 x 8 invocations per 32 x 32 tile of c,
// each invocation 4 x 4 outputs (rows 4ty.., columns 4tx..) kept in
// registers as four vec4 rows; 32-deep slices of a and b staged through
// workgroup memory as vec4s (a along k, b along j), so four k steps read
// four vec4s of each for 64 multiply-adds, as fma (with the 32-deep slices
// and vec4 loads: 15% less time for the 512 product on llvmpipe). Every
// output sums kb, then k, in order. product reads a and b by scalars
// at any strides, neighbouring invocations along the contiguous dimension
// of a transposed operand (a along i, b along k), into tile rows padded
// against bank conflicts (on an H100, Dawn's Vulkan backend: the 1024
// product's GPU time 0.131 -> 0.117 ms, its backward 0.38 -> 0.33; the 2048
// ones unchanged at 0.79 and 2.4); product_vec4, where a's rows run along
// k and b's and c's along j in whole vec4s (column strides 1; K, N, row and
// batch strides and offsets multiples of 4: kernels.c), reads and writes
// them by vec4s, with one bounds check per vec4: the same tiles, sums and
// order. With carry, each output's sum starts from c's value instead of 0
// (a product whose k range was split into pieces: piece after piece
// continues the sums the one before left in c, the same additions in the
// same order as one run).
//   column_sum: dbias[j] (+)= sum_i dy[i, j], one workgroup per column.
struct Params {
  a: u32, b: u32, c: u32, bias: u32, M: u32, N: u32, K: u32, batches: u32,
  kb: u32, has_bias: u32, accumulate: u32, carry: u32,
  a_bs: u32, a_kbs: u32, a_rs: u32, a_cs: u32,
  b_bs: u32, b_kbs: u32, b_rs: u32, b_cs: u32,
  c_bs: u32, c_rs: u32, c_cs: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

const TILE = 32u;
const DEPTH = 32u;   // k of a slice
// (A ninth vec4 a row, unused, spreads the rows' stores over the memory banks
// where neighbouring invocations fill a column: the transposed operands.)
var<workgroup> tile_a: array<array<vec4f, 9>, 32>;   // [i][k / 4]: a[i][k..k+3], DEPTH / 4 vec4s a row
var<workgroup> tile_b: array<array<vec4f, 9>, 32>;   // [k][j / 4]: b[k][j..j+3], DEPTH rows
// The arena as vec4s: the products read and write it only through this
// view (element e is m4[e / 4][e % 4]), column_sum through m.
@group(0) @binding(1) var<storage, read_write> m4: array<vec4f>;

fn arena(e: u32) -> f32 { return m4[e / 4u][e % 4u]; }
// a[i][k] of this slice, 0 outside the matrix.
fn load_a(base: u32, i: u32, k: u32) -> f32 {
  return select(0.0, arena(base + i * p.a_rs + k * p.a_cs), i < p.M && k < p.K);
}
fn load_b(base: u32, k: u32, j: u32) -> f32 {
  return select(0.0, arena(base + k * p.b_rs + j * p.b_cs), k < p.K && j < p.N);
}

// The workgroup's tile: (batch, first row, first column), or none past the last.
fn tile_of(wid: vec3u, nwg: vec3u) -> vec4u {
  let tiles_m = (p.M + TILE - 1u) / TILE;
  let tiles_n = (p.N + TILE - 1u) / TILE;
  let g = group_id(wid, nwg);
  return vec4u(g / (tiles_m * tiles_n), (g / tiles_n) % tiles_m * TILE, g % tiles_n * TILE,
               select(0u, 1u, g < tiles_m * tiles_n * p.batches));
}

// acc += the staged slice's products for rows 4ty.., columns 4tx..
fn multiply_slice(acc: ptr<function, array<vec4f, 4>>, ty: u32, tx: u32) {
  for (var k4 = 0u; k4 < DEPTH / 4u; k4++) {
    let b0 = tile_b[k4 * 4u][tx];
    let b1 = tile_b[k4 * 4u + 1u][tx];
    let b2 = tile_b[k4 * 4u + 2u][tx];
    let b3 = tile_b[k4 * 4u + 3u][tx];
    for (var u = 0u; u < 4u; u++) {
      let a = tile_a[ty * 4u + u][k4];
      (*acc)[u] = fma(vec4f(a.x), b0, (*acc)[u]);
      (*acc)[u] = fma(vec4f(a.y), b1, (*acc)[u]);
      (*acc)[u] = fma(vec4f(a.z), b2, (*acc)[u]);
      (*acc)[u] = fma(vec4f(a.w), b3, (*acc)[u]);
    }
  }
}

// The workgroup's 32 x 32 tile of c: by scalars at any strides, or by vec4s
// (by_vec4, a constant the shader compiler folds once this is inlined into
// its entry point).
fn product_tile(wid: vec3u, nwg: vec3u, lid: u32, by_vec4: bool) {
  let tile = tile_of(wid, nwg);
  if (tile.w == 0u) { return; }
  let bt = tile.x;
  let i0 = tile.y;
  let j0 = tile.z;
  let ty = lid / 8u;
  let tx = lid % 8u;
  var acc = array<vec4f, 4>(vec4f(0.0), vec4f(0.0), vec4f(0.0), vec4f(0.0));
  let a_along_i = p.a_rs == 1u && p.a_cs != 1u;
  let b_along_k = p.b_rs == 1u && p.b_cs != 1u;
  if (p.carry == 1u) {
    for (var u = 0u; u < 4u; u++) {
      for (var v = 0u; v < 4u; v++) {
        let i = i0 + ty * 4u + u;
        let j = j0 + tx * 4u + v;
        if (i < p.M && j < p.N) { acc[u][v] = arena(p.c + bt * p.c_bs + i * p.c_rs + j * p.c_cs); }
      }
    }
  }
  for (var kb = 0u; kb < p.kb; kb++) {
    let a_base = p.a + bt * p.a_bs + kb * p.a_kbs;
    let b_base = p.b + bt * p.b_bs + kb * p.b_kbs;
    for (var k0 = 0u; k0 < p.K; k0 += DEPTH) {
      for (var q = 0u; q < DEPTH / 8u; q++) {  // 8 DEPTH vec4s of a and of b, 4 per invocation
        let e = lid + q * 64u;
        // Which vec4 of each tile this invocation fills: neighbouring
        // invocations along a row (a along k, b along j), or, for an
        // operand transposed in memory, down a column, along its contiguous
        // dimension (a along i: a transposed A, dy^T; b along k: W^T, a
        // transposed B), so that their scalar loads coalesce on a GPU.
        // product_vec4's operands are never transposed (column strides 1).
        let row_a = select(e / (DEPTH / 4u), e % TILE, a_along_i);
        let k4_a = select(e % (DEPTH / 4u), e / TILE, a_along_i);
        let row_b = select(e / 8u, e % DEPTH, b_along_k);
        let j4_b = select(e % 8u, e / DEPTH, b_along_k);
        let i = i0 + row_a;
        let k = k0 + k4_a * 4u;
        let kk = k0 + row_b;
        let j = j0 + j4_b * 4u;
        if (by_vec4) {
          let a4 = m4[(a_base + i * p.a_rs + k) / 4u];
          tile_a[row_a][k4_a] = select(vec4f(0.0), a4, i < p.M && k < p.K);
          let b4 = m4[(b_base + kk * p.b_rs + j) / 4u];
          tile_b[row_b][j4_b] = select(vec4f(0.0), b4, kk < p.K && j < p.N);
        } else {
          tile_a[row_a][k4_a] = vec4f(load_a(a_base, i, k), load_a(a_base, i, k + 1u), load_a(a_base, i, k + 2u),
                                      load_a(a_base, i, k + 3u));
          tile_b[row_b][j4_b] = vec4f(load_b(b_base, kk, j), load_b(b_base, kk, j + 1u), load_b(b_base, kk, j + 2u),
                                      load_b(b_base, kk, j + 3u));
        }
      }
      workgroupBarrier();
      multiply_slice(&acc, ty, tx);
      workgroupBarrier();
    }
  }
  for (var u = 0u; u < 4u; u++) {
    let i = i0 + ty * 4u + u;
    let j = j0 + tx * 4u;
    if (by_vec4) {
      if (i < p.M && j < p.N) {
        let at = (p.c + bt * p.c_bs + i * p.c_rs + j) / 4u;
        var r = acc[u];
        if (p.has_bias == 1u) { r += m4[(p.bias + j) / 4u]; }
        if (p.accumulate == 1u) { r += m4[at]; }
        m4[at] = r;
      }
      continue;
    }
    for (var v = 0u; v < 4u; v++) {
      if (i < p.M && j + v < p.N) {
        let at = p.c + bt * p.c_bs + i * p.c_rs + (j + v) * p.c_cs;
        var r = acc[u][v];
        if (p.has_bias == 1u) { r += arena(p.bias + j + v); }
        if (p.accumulate == 1u) { r += arena(at); }
        m4[at / 4u][at % 4u] = r;
      }
    }
  }
}

@compute @workgroup_size(64)
fn product(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) lid: u32) {
  product_tile(wid, nwg, lid, false);
}

@compute @workgroup_size(64)
fn product_vec4(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
                @builtin(local_invocation_index) lid: u32) {
  product_tile(wid, nwg, lid, true);
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
