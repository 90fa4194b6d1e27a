// The activations of the elementwise and gated ops, stable for any x (an
// exponential that overflows gives inf, which gives the right limit), with
// their derivatives. act codes: 0 relu, 1 gelu (erf), 2 gelu (tanh form),
// 3 silu, 4 sigmoid, 5 softplus (beta, threshold).
//   sigmoid(x) = 1 / (1 + e^-x), as r = 1 / (1 + e^-|x|), times e^-|x| for x < 0
//   gelu(x) = x Phi(x), ' = Phi(x) + x phi(x);  gelu_tanh = x sigmoid(2u),
//     u = k (x + c x^3), ' = s + 2 x s (1 - s) k (1 + 3 c x^2)
//   silu(x) = x s, ' = s (1 + x (1 - s));  sigmoid' = s (1 - s)
//   softplus = (max(z, 0) + log1p(e^-|z|)) / beta, z = beta x; x when z > threshold; ' = sigmoid(z) (1 past it)
//   relu(x) = x < 0 ? 0 : x (NaN stays NaN), ' = x > 0
// relu and sigmoid also from their output y (act.from_output, act_grad_y):
//   sigmoid' = y (1 - y), relu' = y > 0 (y > 0 exactly where x > 0)
float sigmoid_(float x) {
  float e = exp(-abs(x)), r = 1.0 / (1.0 + e);
  return x < 0.0 ? e * r : r;
}
// Phi(x) = erfc(-x / sqrt 2) / 2: erfc(z) = t e^(-z^2 + P(t)), t = 1 / (1 + z/2),
// P the degree-9 fit of Numerical Recipes' erfcc (fractional error < 1.2e-7).
float phi_cdf(float x) {
  float z = abs(x) * 0.70710678118654752, t = 1.0 / (1.0 + 0.5 * z);
  float p = 0.17087277;
  p = p * t - 0.82215223;
  p = p * t + 1.48851587;
  p = p * t - 1.13520398;
  p = p * t + 0.27886807;
  p = p * t - 0.18628806;
  p = p * t + 0.09678418;
  p = p * t + 0.37409196;
  p = p * t + 1.00002368;
  p = p * t - 1.26551223;
  float half_erfc = 0.5 * t * exp(-z * z + p);
  return x < 0.0 ? half_erfc : 1.0 - half_erfc;
}
// log(1 + y) for y in [0, 1]: 2 atanh(s), s = y / (2 + y), by its odd series.
float log1p_unit(float y) {
  float s = y / (2.0 + y), s2 = s * s, q = 1.0 / 15.0;
  q = q * s2 + 1.0 / 13.0;
  q = q * s2 + 1.0 / 11.0;
  q = q * s2 + 1.0 / 9.0;
  q = q * s2 + 1.0 / 7.0;
  q = q * s2 + 1.0 / 5.0;
  q = q * s2 + 1.0 / 3.0;
  q = q * s2 + 1.0;
  return 2.0 * s * q;
}
const float GELU_K = 0.79788456080286536, GELU_C = 0.044715;
float act_value(uint act, float x, float beta, float threshold) {
  if (act == 0u) return x < 0.0 ? 0.0 : x;
  if (act == 1u) return x * phi_cdf(x);
  if (act == 2u) return x * sigmoid_(2.0 * GELU_K * (x + GELU_C * x * x * x));
  if (act == 3u) return x * sigmoid_(x);
  if (act == 4u) return sigmoid_(x);
  float z = beta * x;
  return z > threshold ? x : (max(z, 0.0) + log1p_unit(exp(-abs(z)))) / beta;
}
// act'(x) from y = act(x): relu (act 0) and sigmoid (act 4) only.
float act_grad_y(uint act, float y) {
  return act == 4u ? y * (1.0 - y) : (y > 0.0 ? 1.0 : 0.0);
}
float act_grad(uint act, float x, float beta, float threshold) {
  if (act == 0u) return act_grad_y(act, x);  // x > 0: the same test as y > 0
  if (act == 4u) return act_grad_y(act, sigmoid_(x));
  if (act == 1u) return phi_cdf(x) + x * 0.39894228040143268 * exp(-0.5 * x * x);
  if (act == 2u) {
    float s = sigmoid_(2.0 * GELU_K * (x + GELU_C * x * x * x));
    return s + 2.0 * x * s * (1.0 - s) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
  }
  if (act == 3u) {
    float s = sigmoid_(x);
    return s * (1.0 + x * (1.0 - s));
  }
  float z = beta * x;
  return z > threshold ? 1.0 : sigmoid_(z);
}
