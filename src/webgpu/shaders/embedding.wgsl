// Embedding: weight W (V x D), indices idx (P), y (P x D).
//   forward   y[q, d] = W[idx[q], d]                 one invocation per element of y
//   backward  dW[v, d] (+)= sum_{q: idx[q] = v} dy[q, d], in order of q (deterministic, no atomics);
//             row padding_idx gets nothing (0, or kept with accumulate)
//             one invocation per element of dW, each scanning the P indices
// A run split into pieces of W's (dW's) rows (kernels.c) covers rows
// first .. first + V of them a piece: the forward writes the y rows whose
// index lies there (each y row in one piece), the backward those dW rows.
struct Params { weight: u32, index: u32, y: u32, dy: u32, dweight: u32, P: u32, V: u32, D: u32,
                index_words: u32, padding: i32, accumulate: u32, first: u32 }
@group(0) @binding(0) var<uniform> p: Params;
// Each tensor bound by itself, starting at its word p.<name> there:
// forward index, weight, y; backward index, dy, dweight.
@group(0) @binding(2) var<storage, read_write> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> dweight: array<f32>;

// Index q (i32, or the low word of an i64: core has checked every value
// against V).
fn index_at(q: u32) -> i32 { return idx[p.index + q * p.index_words]; }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.P * p.D) { return; }
  let q = e / p.D;
  let row = u32(index_at(q));
  if (row < p.first || row - p.first >= p.V) { return; }
  y[p.y + e] = weight[p.weight + (row - p.first) * p.D + e % p.D];
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let e = flat_id(gid, nwg);
  if (e >= p.V * p.D) { return; }
  let v = p.first + e / p.D;
  let d = e % p.D;
  var s = 0.0;
  if (i32(v) != p.padding) {
    for (var q = 0u; q < p.P; q++) {
      if (u32(index_at(q)) == v) { s += dy[p.dy + q * p.D + d]; }
    }
  }
  if (p.accumulate == 1u) {
    if (i32(v) != p.padding) { dweight[p.dweight + e] += s; }
  } else {
    dweight[p.dweight + e] = s;
  }
}
