// Scalar activation math, written once for float (suffix _f32) and double
// (suffix _f64) through <tgmath.h>. Every form is stable: an exponential
// that overflows gives inf, which gives the right limit (1 / (1 + inf) = 0),
// never a NaN. The f32 forms use gk_exp_f32 (gk_exp_nonpos_f32 where the
// exponent is never positive; gk_exp_nonpos_ftz_f32, which flushes results
// below FLT_MIN to 0, in GELU and softplus), written without calls or
// branches so that loops over them vectorise.
//
//   sigmoid(x) = 1 / (1 + e^-x)         sigmoid'(x) = s (1 - s)
//                (as r = 1 / (1 + e^-|x|), times e^-|x| for x < 0: the
//                exponent is never positive)
//   silu(x)    = x s                    silu'(x)    = s (1 + x (1 - s))
//   gelu(x)    = x Phi(x)               gelu'(x)    = Phi(x) + x phi(x)  (Phi: gk_phi)
//   gelu_tanh  = x/2 (1 + tanh(u)) = x sigmoid(2u), u = k (x + c x^3),
//                k = sqrt(2/pi), c = 0.044715
//                                       ' = s + 2 x s (1 - s) k (1 + 3 c x^2), s = sigmoid(2u)
//   softplus   = (max(z, 0) + log1p(e^-|z|)) / beta, z = beta x; x when z > threshold
//                (the quotient as a product with 1 / beta, worked out once a loop)
//                                       ' = sigmoid(z); 1 when z > threshold
//   relu(x)    = x < 0 ? 0 : x (NaN stays NaN)   relu'(x) = x > 0
// relu and sigmoid also from their output y (desc.act.from_output, the _y
// forms): sigmoid' = y (1 - y); relu' = y > 0 (gk_drelu of y: y > 0 exactly
// where x > 0, and a NaN gives 0 either way).
#ifndef GK_ACT_MATH_H
#define GK_ACT_MATH_H

#include "gradkern.h"
#include "isa.h"
#include <stdbool.h>
#include <stdint.h>
#include <tgmath.h>

// Which activation an elementwise or gated op applies.
typedef enum gk_act { GK_ACT_RELU, GK_ACT_GELU, GK_ACT_GELU_TANH, GK_ACT_SILU, GK_ACT_SIGMOID, GK_ACT_SOFTPLUS } gk_act;

typedef struct gk_act_params {
  gk_act act;
  double beta, threshold;
} gk_act_params;

// The activation of an op: its own for elementwise ops, the gate's for gated.
static inline gk_act_params gk_act_of(const gk_op_desc *d) {
  gk_act_params p = {GK_ACT_RELU, d->act.beta, d->act.threshold};
  bool tanh_form = d->act.approximate == GK_GELU_TANH;
  switch (d->op) {
  case GK_OP_RELU: case GK_OP_REGLU: p.act = GK_ACT_RELU; break;
  case GK_OP_GELU: case GK_OP_GEGLU: p.act = tanh_form ? GK_ACT_GELU_TANH : GK_ACT_GELU; break;
  case GK_OP_SILU: case GK_OP_SWIGLU: p.act = GK_ACT_SILU; break;
  case GK_OP_SIGMOID: case GK_OP_GLU: p.act = GK_ACT_SIGMOID; break;
  case GK_OP_SOFTPLUS: p.act = GK_ACT_SOFTPLUS; break;
  default: break;
  }
  return p;
}

// e^x in f32 with no call and no branch, so loops over it vectorise (gcc
// keeps ?: on float comparisons as branches under -ftrapping-math, so the
// out-of-range and NaN cases are blended with bit masks instead):
// e^x = 2^k e^r, k = round(x / ln 2) from the bits of a rounding sum,
// r = x - k ln 2 (ln 2 in two parts), |r| <= ln(2)/2, e^r by Cephes'
// expf polynomial (under 1 ulp); 2^k applied as two normal powers of two
// (k1 = floor(k/2), k2 = k - k1), so results below FLT_MIN come out as the
// correctly scaled subnormals. inf above 88.72283; x below -104 (where e^x
// rounds to 0) is clamped there; NaN stays NaN.
GK_INLINE uint32_t gk_f32_bits(float x) {
  union { float f; uint32_t u; } v = {x};
  return v.u;
}
GK_INLINE float gk_bits_f32(uint32_t u) {
  union { uint32_t u; float f; } v = {u};
  return v.f;
}
// e^xc for xc in [-104, 88.72283] (already clamped; NaN passes through).
GK_INLINE float gk_exp_core_f32(float xc) {
  float kf = xc * 1.44269504088896341f + 12582912.0f;  // 1.5 2^23: rounds to an integer
  uint32_t kbits = gk_f32_bits(kf);
  kf -= 12582912.0f;
  float r = xc - kf * 0.693359375f - kf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // u = k + 256 in 105 .. 385, u1 = k1 + 128: exponent fields k1 + 127 = u1 - 1
  // and k2 + 127 = u - u1 - 1, both in 51 .. 192.
  uint32_t u = kbits - 0x4b400000u + 256u, u1 = u >> 1;
  return p * gk_bits_f32((u1 - 1u) << 23) * gk_bits_f32((u - u1 - 1u) << 23);
}
GK_INLINE float gk_exp_f32(float x) {
  uint32_t xb = gk_f32_bits(x);
  uint32_t lo = -(uint32_t)(x < -104.0f), hi = -(uint32_t)(x > 88.72283f), nan = -(uint32_t)(x != x);
  float xc = gk_bits_f32((xb & ~(lo | hi | nan)) | (gk_f32_bits(-104.0f) & lo) | (gk_f32_bits(88.72283f) & hi));
  float v = gk_exp_core_f32(xc);
  return gk_bits_f32((gk_f32_bits(v) & ~(lo | hi | nan)) | (0x7f800000u & hi) | (xb & nan));
}

// e^x for x <= 0 with results below FLT_MIN flushed to 0 (NaN stays NaN;
// correct up to 88.7, where e^x would overflow): fewer steps than
// gk_exp_core_f32, for WebAssembly's 4-wide SIMD without fused multiply-add,
// where every instruction counts, and everywhere for GELU, softplus and
// attention's weights, which lose nothing an f32 result keeps by the flush
// (GELU's and softplus's results there are below FLT_MIN themselves, or
// nothing beside an O(1) term). The rounding sum's bias 1.5 2^23 + 127
// leaves k + 127 in the low bits, so shifting them into the exponent field
// gives 2^k (a normal number for x >= -87.33654, where k >= -126); below,
// and for -inf, a mask gives 0. e^r = 1 + r (c1 + r (c2 + ...)) of degree 5,
// fitted for relative error on |r| <= ln(2)/2 (under 1e-7 before f32
// rounding), evaluated as 2^k + (2^k r) q(r).
GK_INLINE float gk_exp_nonpos_ftz_f32(float x) {
  float kf = x * 1.44269504088896341f + 12583039.0f;
  float scale = gk_bits_f32(gk_f32_bits(kf) << 23);
  kf -= 12583039.0f;
  float r = x - kf * 0.693359375f - kf * -2.12194440e-4f;
  float q = 8.290312253e-03f;
  q = q * r + 4.189793020e-02f;
  q = q * r + 1.666763574e-01f;
  q = q * r + 4.999915063e-01f;
  q = q * r + 9.999997020e-01f;
  float v = r * scale * q + scale;
  return gk_bits_f32(gk_f32_bits(v) & ~-(uint32_t)(x < -87.33654f));
}

// e^x for x <= 0 (or NaN; correct up to 88.7, where e^x would overflow),
// cheaper than gk_exp_f32 for exponents that are never (much) positive:
// the same steps without the overflow and NaN blends. Results below FLT_MIN
// come out as the correctly scaled subnormals, e^-inf = 0; NaN stays NaN (it
// passes the clamp and the polynomial). In WebAssembly, gk_exp_nonpos_ftz_f32
// (results below FLT_MIN are 0 there).
GK_INLINE float gk_exp_nonpos_f32(float x) {
#if defined(__wasm__)
  return gk_exp_nonpos_ftz_f32(x);
#else
  uint32_t lo = -(uint32_t)(x < -104.0f);
  return gk_exp_core_f32(gk_bits_f32((gk_f32_bits(x) & ~lo) | (gk_f32_bits(-104.0f) & lo)));
#endif
}

GK_INLINE double gk_exp_f64(double x) { return exp(x); }
GK_INLINE double gk_exp_nonpos_f64(double x) { return exp(x); }
GK_INLINE double gk_exp_nonpos_ftz_f64(double x) { return exp(x); }

// Blend with a mask of all ones or zeros (a comparison's result): loops
// over it vectorise where ?: on floats would stay a branch.
GK_INLINE float gk_select_f32(uint32_t mask, float a, float b) {
  return gk_bits_f32((gk_f32_bits(a) & mask) | (gk_f32_bits(b) & ~mask));
}
GK_INLINE double gk_select_f64(int cond, double a, double b) { return cond ? a : b; }
// -|x|: the sign bit set (one instruction in WebAssembly, where -fabs is two).
GK_INLINE float gk_neg_abs_f32(float x) { return gk_bits_f32(gk_f32_bits(x) | 0x80000000u); }
GK_INLINE double gk_neg_abs_f64(double x) { return -fabs(x); }
#define GK_MASK_f32(c) (-(uint32_t)(c))
#define GK_MASK_f64(c) (c)

// Phi(x) = (1 + erf(x / sqrt 2)) / 2, the normal CDF, and its density
// phi(x) = e^(-x^2/2) / sqrt(2 pi), sharing one exponential. f32 without
// calls: with a = |x| and z = a / sqrt 2, Phi(-a) = erfc(z) / 2 =
// e^(-z^2) erfcx(z) / 2 and erfcx(z) / 2 = t Q(t), t = 1 / (1 + z/2). Q is
// of degree 8, fitted for relative error on t in [0.177, 1] (z up to 9.3:
// under 5.1e-8 before f32 rounding, about 3e-7 after, as the degree-10 fit
// on all of (0, 1] that it replaced), so the tail x -> -inf keeps its
// relative accuracy. Beyond that range e^(-a^2/2) is below FLT_MIN and
// gk_exp_nonpos_ftz_f32 flushes it: Phi(x) = 0 for x < -13.2, where it
// would be a subnormal below 5e-40. Phi = Phi(-a) for x < 0, 1 - Phi(-a)
// otherwise. f64: libm's erf and exp.
GK_INLINE float gk_phi_pdf_f32(float x, float *pdf) {
  float a = fabsf(x), t = 1.0f / (1.0f + 0.35355339059327376f * a);
  float q = -2.940038033e-02f;
  q = q * t + 1.416300088e-01f;
  q = q * t - 2.422310114e-01f;
  q = q * t + 1.374574602e-01f;
  q = q * t - 1.221906208e-02f;
  q = q * t + 1.008766815e-01f;
  q = q * t + 1.216710359e-01f;
  q = q * t + 1.411710829e-01f;
  q = q * t + 1.410441697e-01f;
  float e = gk_exp_nonpos_ftz_f32(-0.5f * a * a), lower = t * q * e;
  *pdf = e * 0.39894228040143267794f;
  return gk_select_f32(GK_MASK_f32(x < 0), lower, 1.0f - lower);
}
GK_INLINE float gk_phi_f32(float x) {
  float pdf;
  return gk_phi_pdf_f32(x, &pdf);
}
GK_INLINE double gk_phi_f64(double x) { return 0.5 * (1 + erf(x * 0.70710678118654752440)); }
GK_INLINE double gk_phi_pdf_f64(double x, double *pdf) {
  *pdf = exp(-0.5 * x * x) * 0.39894228040143267794;
  return gk_phi_f64(x);
}

// log(1 + y) for y in [0, 1], f32 without calls: 2 atanh(s), s = y / (2 + y)
// in [0, 1/3], as s P(s^2) with P of degree 4 fitted for relative error
// (under 8e-9 before f32 rounding). f64: libm's log1p.
GK_INLINE float gk_log1p_unit_f32(float y) {
  float s = y / (2.0f + y), s2 = s * s, q = 2.817833424e-01f;
  q = q * s2 + 2.796060145e-01f;
  q = q * s2 + 4.002490938e-01f;
  q = q * s2 + 6.666631699e-01f;
  q = q * s2 + 2.0f;
  return s * q;
}
GK_INLINE double gk_log1p_unit_f64(double y) { return log1p(y); }

// The forms for results rounded to 16 bits (suffix h32: f32 arithmetic,
// each under 1e-4 relative error where bf16 rounds at 2^-9 and f16 at
// 2^-12), cheaper than the f32 ones: e^x as gk_exp_nonpos_ftz_f32 with the
// reduction in one step (ln 2 in one part: under 3e-7 for k >= -126) and
// e^r = 1 + r (c1 + r (c2 + c3 r)) (under 1.1e-4); Phi with Q of degree 5
// (under 6e-5); log1p's series to s^7 (under 2e-5).
GK_INLINE float gk_exp_nonpos_h32(float x) {
  float kf = x * 1.44269504088896341f + 12583039.0f;
  float scale = gk_bits_f32(gk_f32_bits(kf) << 23);
  kf -= 12583039.0f;
  float r = x - kf * 0.69314718055994531f;
  float q = 1.651796699e-01f;
  q = q * r + 5.041304231e-01f;
  q = q * r + 1.000195861e+00f;
  float v = r * scale * q + scale;
  return gk_bits_f32(gk_f32_bits(v) & ~-(uint32_t)(x < -87.33654f));
}
GK_INLINE float gk_phi_pdf_h32(float x, float *pdf) {
  float z = fabsf(x) * 0.70710678118654752440f, t = 1.0f / (1.0f + 0.5f * z);
  float q = -8.971059322e-02f;
  q = q * t + 8.108703047e-02f;
  q = q * t + 2.075766623e-01f;
  q = q * t + 2.356999964e-01f;
  q = q * t + 2.832102776e-01f;
  q = q * t + 2.820783556e-01f;
  float e = gk_exp_nonpos_h32(-z * z), half_erfc = 0.5f * t * q * e;
  *pdf = e * 0.39894228040143267794f;
  return gk_select_f32(GK_MASK_f32(x < 0), half_erfc, 1.0f - half_erfc);
}
GK_INLINE float gk_phi_h32(float x) {
  float pdf;
  return gk_phi_pdf_h32(x, &pdf);
}
GK_INLINE float gk_log1p_unit_h32(float y) {
  float s = y / (2.0f + y), s2 = s * s, q = 1.0f / 7;
  q = q * s2 + 1.0f / 5;
  q = q * s2 + 1.0f / 3;
  q = q * s2 + 1.0f;
  return 2.0f * s * q;
}
#define gk_exp_nonpos_ftz_h32 gk_exp_nonpos_h32
#define gk_select_h32 gk_select_f32
#define gk_neg_abs_h32 gk_neg_abs_f32
#define GK_MASK_h32 GK_MASK_f32

#define GK_DEFINE_ACT_MATH(T, S)                                                      \
  GK_INLINE T gk_sigmoid_##S(T x) {                                                  \
    T e = gk_exp_nonpos_##S(gk_neg_abs_##S(x)), r = (T)1 / ((T)1 + e);                \
    return gk_select_##S(GK_MASK_##S(x < 0), e * r, r);                               \
  }                                                                                   \
  GK_INLINE T gk_relu_##S(T x) { return x < 0 ? (T)0 : x; }                        \
  GK_INLINE T gk_drelu_##S(T x) { return x > 0 ? (T)1 : (T)0; }                    \
  GK_INLINE T gk_silu_##S(T x) { return x * gk_sigmoid_##S(x); }                   \
  GK_INLINE T gk_dsilu_##S(T x) {                                                 \
    T s = gk_sigmoid_##S(x);                                                          \
    return s * ((T)1 + x * ((T)1 - s));                                               \
  }                                                                                   \
  GK_INLINE T gk_dsigmoid_y_##S(T y) { return y * ((T)1 - y); }                   \
  GK_INLINE T gk_dsigmoid_##S(T x) { return gk_dsigmoid_y_##S(gk_sigmoid_##S(x)); } \
  GK_INLINE T gk_gelu_##S(T x) { return x * gk_phi_##S(x); }                     \
  GK_INLINE T gk_dgelu_##S(T x) {                                                 \
    T pdf, cdf = gk_phi_pdf_##S(x, &pdf);                                             \
    return cdf + x * pdf;                                                             \
  }                                                                                   \
  GK_INLINE T gk_gelu_tanh_##S(T x) {                                             \
    T u = (T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x);                  \
    return x * gk_sigmoid_##S((T)2 * u);                                              \
  }                                                                                   \
  GK_INLINE T gk_dgelu_tanh_##S(T x) {                                            \
    T k = (T)0.79788456080286535588, c = (T)0.044715;                                 \
    T s = gk_sigmoid_##S((T)2 * k * (x + c * x * x * x));                             \
    return s + (T)2 * x * s * ((T)1 - s) * k * ((T)1 + (T)3 * c * x * x);            \
  }                                                                                   \
  GK_INLINE T gk_softplus_##S(T x, T beta, T threshold) {                         \
    T z = beta * x;                                                                   \
    T v = (gk_select_##S(GK_MASK_##S(z > 0), z, (T)0) +                               \
           gk_log1p_unit_##S(gk_exp_nonpos_ftz_##S(gk_neg_abs_##S(z)))) * ((T)1 / beta); \
    return gk_select_##S(GK_MASK_##S(z > threshold), x, v);                           \
  }                                                                                   \
  GK_INLINE T gk_dsoftplus_##S(T x, T beta, T threshold) {                        \
    T z = beta * x;                                                                   \
    return gk_select_##S(GK_MASK_##S(z > threshold), (T)1, gk_sigmoid_##S(z));        \
  }                                                                                   \
  GK_INLINE T gk_act_fwd_##S(const gk_act_params *p, T x) {                       \
    switch (p->act) {                                                                 \
    case GK_ACT_RELU: return gk_relu_##S(x);                                          \
    case GK_ACT_GELU: return gk_gelu_##S(x);                                          \
    case GK_ACT_GELU_TANH: return gk_gelu_tanh_##S(x);                                \
    case GK_ACT_SILU: return gk_silu_##S(x);                                          \
    case GK_ACT_SIGMOID: return gk_sigmoid_##S(x);                                    \
    case GK_ACT_SOFTPLUS: return gk_softplus_##S(x, (T)p->beta, (T)p->threshold);      \
    }                                                                                 \
    return x;                                                                         \
  }                                                                                   \
  GK_INLINE T gk_act_grad_##S(const gk_act_params *p, T x) {                      \
    switch (p->act) {                                                                 \
    case GK_ACT_RELU: return gk_drelu_##S(x);                                         \
    case GK_ACT_GELU: return gk_dgelu_##S(x);                                         \
    case GK_ACT_GELU_TANH: return gk_dgelu_tanh_##S(x);                               \
    case GK_ACT_SILU: return gk_dsilu_##S(x);                                         \
    case GK_ACT_SIGMOID: return gk_dsigmoid_##S(x);                                   \
    case GK_ACT_SOFTPLUS: return gk_dsoftplus_##S(x, (T)p->beta, (T)p->threshold);     \
    }                                                                                 \
    return x;                                                                         \
  }                                                                                   \
  /* act'(x) from y = act(x): relu and sigmoid (desc.act.from_output) */              \
  GK_INLINE T gk_act_grad_y_##S(const gk_act_params *p, T y) {                        \
    return p->act == GK_ACT_SIGMOID ? gk_dsigmoid_y_##S(y) : gk_drelu_##S(y);          \
  }

GK_DEFINE_ACT_MATH(float, f32)
GK_DEFINE_ACT_MATH(double, f64)
GK_DEFINE_ACT_MATH(float, h32)

#endif
