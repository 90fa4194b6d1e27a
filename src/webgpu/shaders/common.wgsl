// Shared by every kernel shader (prepended at build time): the arena, the
// flat invocation and workgroup indices over a 2-D dispatch, the fixed-order
// workgroup sum, and the activation functions with their derivatives.
@group(0) @binding(1) var<storage, read_write> m: array<f32>;

const WG: u32 = 64u;

// Element index of an invocation of a 64-wide workgroup; workgroup index.
fn flat_id(gid: vec3u, nwg: vec3u) -> u32 { return gid.x + gid.y * nwg.x * WG; }
fn group_id(wid: vec3u, nwg: vec3u) -> u32 { return wid.x + wid.y * nwg.x; }

var<workgroup> red: array<f32, 64>;
// Sum (or max, with is_max) of v over the 64 invocations of the workgroup:
// a tree in a fixed order, so the same bits every run. Call from uniform
// control flow and outside branches (OpenGL ES allows barriers in none).
fn wg_reduce(v: f32, lid: u32, is_max: bool) -> f32 {
  workgroupBarrier();
  red[lid] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max); }
    workgroupBarrier();
  }
  return red[0];
}
fn wg_sum(v: f32, lid: u32) -> f32 { return wg_reduce(v, lid, false); }
fn wg_max(v: f32, lid: u32) -> f32 { return wg_reduce(v, lid, true); }

// ---------------------------------------------------------------- activations
// sigmoid(x) = 1 / (1 + exp(-x)), without overflow for either sign and
// without a branch: e = exp(-|x|) <= 1, r = 1 / (1 + e) is sigmoid(|x|),
// and sigmoid(x) = 1 - sigmoid(-x) = e r for x < 0.
fn sigmoid(x: f32) -> f32 {
  let e = exp(-abs(x));
  let r = 1.0 / (1.0 + e);
  return select(e * r, r, x >= 0.0);
}
// log(1 + e) accurate for small e (the log1p WGSL lacks).
fn log1p(e: f32) -> f32 {
  let u = 1.0 + e;
  if (u == 1.0) { return e; }
  return log(u) * e / (u - 1.0);
}
// erfc(x) for x >= 0: the Chebyshev fit of Numerical Recipes (relative
// error under 1.2e-7).
fn erfc_pos(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
             t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(poly);
}
// Phi(x), the standard normal CDF: 0.5 erfc(-x / sqrt 2).
fn normal_cdf(x: f32) -> f32 {
  let z = abs(x) * 0.70710678118654752;
  let c = 0.5 * erfc_pos(z);
  return select(1.0 - c, c, x < 0.0);
}
const GELU_K: f32 = 0.7978845608028654;  // sqrt(2 / pi)
const GELU_C: f32 = 0.044715;
// gelu erf: x Phi(x); tanh form: 0.5 x (1 + tanh(u)) = x sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3).
fn gelu(x: f32, approx: u32) -> f32 {
  if (approx == 1u) { return x * sigmoid(2.0 * GELU_K * (x + GELU_C * x * x * x)); }
  return x * normal_cdf(x);
}
// d gelu / dx: Phi(x) + x phi(x); tanh form: s + x 2 s (1 - s) u', s = sigmoid(2u).
fn gelu_grad(x: f32, approx: u32) -> f32 {
  if (approx == 1u) {
    let s = sigmoid(2.0 * GELU_K * (x + GELU_C * x * x * x));
    return s + x * 2.0 * s * (1.0 - s) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
  }
  return normal_cdf(x) + x * 0.3989422804014327 * exp(-0.5 * x * x);
}
// softplus: (max(z, 0) + log(1 + exp(-|z|))) / beta with z = beta x (no
// overflow for large z); x where z > threshold.
fn softplus(x: f32, beta: f32, threshold: f32) -> f32 {
  let z = beta * x;
  if (z > threshold) { return x; }
  return (max(z, 0.0) + log1p(exp(-abs(z)))) / beta;
}

// Activation `op` (gk_op: 0 relu, 1 gelu, 2 silu, 3 sigmoid, 4 softplus) and
// its derivative; act_grad_y: the derivative from the output y = act(x), for
// relu (y > 0, exactly where x > 0) and sigmoid (y (1 - y)) only.
fn act(op: u32, x: f32, approx: u32, beta: f32, threshold: f32) -> f32 {
  switch op {
    case 0u: { return max(x, 0.0); }
    case 1u: { return gelu(x, approx); }
    case 2u: { return x * sigmoid(x); }
    case 3u: { return sigmoid(x); }
    default: { return softplus(x, beta, threshold); }
  }
}
fn act_grad_y(op: u32, y: f32) -> f32 {
  if (op == 3u) { return y * (1.0 - y); }
  return select(0.0, 1.0, y > 0.0);
}
fn act_grad(op: u32, x: f32, approx: u32, beta: f32, threshold: f32) -> f32 {
  switch op {
    case 0u: { return act_grad_y(op, x); }
    case 1u: { return gelu_grad(x, approx); }
    case 2u: { let s = sigmoid(x); return s * (1.0 + x * (1.0 - s)); }
    case 3u: { return act_grad_y(op, sigmoid(x)); }
    default: {
      if (beta * x > threshold) { return 1.0; }
      return sigmoid(beta * x);
    }
  }
}
