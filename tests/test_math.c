// The branch-free f32 exponential behind the f32 kernels: relative error
// against libm's double exp, and the limits (overflow to inf, underflow to 0
// through the subnormals, NaN). The normal CDF and density behind GELU:
// relative error against libm's double erfc and exp, tails included.
// Softplus against libm's log1p and exp.
#include "harness.h"
#include "../src/core/act_math.h"

int main(void) {
  double worst = 0, worst_x = 0;
  for (int i = 0; i <= 2000000; i++) {
    float x = (float)(-103.0 + 191.7 * i / 2000000.0);
    double want = exp((double)x), got = gk_exp_f32(x);
    if (want < 1.17549435e-38 || want > 3.4e38) continue;  // subnormal / overflowing: checked below
    double rel = fabs(got - want) / want;
    if (rel > worst) worst = rel, worst_x = x;
  }
  printf("gk_exp_f32: max relative error %.3g at x = %.7g\n", worst, worst_x);
  check(worst < 2.5e-7, "gk_exp_f32 relative error %.3g at x = %g", worst, worst_x);
  check(isinf(gk_exp_f32(88.8f)) && isinf(gk_exp_f32(1e30f)) && isinf(gk_exp_f32(INFINITY)), "overflow to inf");
  check(gk_exp_f32(88.72f) < INFINITY && gk_exp_f32(88.72f) > 3.3e38f, "largest finite results stay finite");
  check(gk_exp_f32(-110.0f) == 0 && gk_exp_f32(-INFINITY) == 0, "underflow to 0");
  for (float x = -103.5f; x < -87.3f; x += 0.37f) {
    double want = exp((double)x), got = gk_exp_f32(x);
    check(fabs(got - want) <= 1.5e-45 + 2e-7 * want, "subnormal result at x = %g: %g, libm %g", x, got, want);
  }
  check(isnan(gk_exp_f32(NAN)), "NaN stays NaN");
  check(gk_exp_f32(0.0f) == 1.0f, "exp(0) = 1");
  check(gk_sigmoid_f32(-1e4f) == 0 && gk_sigmoid_f32(1e4f) == 1, "sigmoid limits");
  check(gk_silu_f32(-1e4f) == 0 && gk_dsilu_f32(-1e4f) == 0 && gk_dsilu_f32(1e4f) == 1, "silu limits, no NaN");
  check(gk_gelu_tanh_f32(-1e4f) == 0 && gk_dgelu_tanh_f32(1e4f) == 1, "gelu tanh limits, no NaN");
  // Phi down to x = -13 (Phi ~ 6e-39, e^(-x^2/2) still a normal f32) and up
  // to where 1 - Phi rounds to 1; the density wherever it is a normal f32.
  // The exponent -x^2/2 rounded to f32 moves the exponential by up to
  // x^2/2 2^-24 relative: the errors are measured over 1 + that / 4e-7.
  double worst_cdf = 0, worst_pdf = 0, cdf_x = 0, pdf_x = 0;
  for (int i = 0; i <= 2000000; i++) {
    float x = (float)(-13.0 + 26.0 * i / 2000000.0), pdf;
    double cdf_want = 0.5 * erfc(-(double)x / sqrt(2.0)), pdf_want = exp(-0.5 * (double)x * x) * 0.39894228040143267794;
    double cdf = gk_phi_pdf_f32(x, &pdf), exponent_error = 1 + 0.5 * (double)x * x * 0x1p-24 / 4e-7;
    double rel_cdf = fabs(cdf - cdf_want) / cdf_want / exponent_error;
    double rel_pdf = fabs(pdf - pdf_want) / pdf_want / exponent_error;
    if (rel_cdf > worst_cdf) worst_cdf = rel_cdf, cdf_x = x;
    if (pdf_want > 1.17549435e-38 && rel_pdf > worst_pdf) worst_pdf = rel_pdf, pdf_x = x;
  }
  printf("gk_phi_pdf_f32: max relative error over 1 + x^2/2 2^-24 / 4e-7: %.3g (Phi, at x = %.7g), %.3g (phi, at "
         "x = %.7g)\n",
         worst_cdf, cdf_x, worst_pdf, pdf_x);
  check(worst_cdf < 6e-7 && worst_pdf < 6e-7, "Phi / phi relative error %.3g / %.3g", worst_cdf, worst_pdf);
  float pdf;
  check(gk_phi_pdf_f32(-1e4f, &pdf) == 0 && pdf == 0 && gk_phi_pdf_f32(1e4f, &pdf) == 1 && pdf == 0,
        "Phi and phi limits");
  check(gk_gelu_f32(-1e4f) == 0 && gk_dgelu_f32(-1e4f) == 0 && gk_dgelu_f32(1e4f) == 1, "gelu limits, no NaN");
  check(gk_gelu_f32(INFINITY) == INFINITY && isnan(gk_gelu_f32(NAN)), "gelu of inf and NaN");
  // softplus wherever its value is a normal f32 (z down to -87.3, where
  // e^z reaches FLT_MIN) up to past the threshold, for beta 1 and 0.7
  // (the quotient by beta taken as a product with 1 / beta).
  const float betas[2] = {1.0f, 0.7f};
  for (int b = 0; b < 2; b++) {
    double worst_sp = 0, sp_x = 0;
    for (int i = 0; i <= 2000000; i++) {
      float x = (float)((-87.3 + 117.0 * i / 2000000.0) / betas[b]);
      double z = (double)betas[b] * x, want = z > 20 ? x : log1p(exp(z)) / betas[b], got = gk_softplus_f32(x, betas[b], 20.0f);
      // z = beta x rounded to f32 moves e^z by up to |z| 2^-24 relative
      double rel = fabs(got - want) / want / (1 + fabs(z) * 0x1p-24 / 4e-7);
      if (rel > worst_sp) worst_sp = rel, sp_x = x;
    }
    printf("gk_softplus_f32 (beta %g): max relative error over 1 + |beta x| 2^-24 / 4e-7: %.3g at x = %.7g\n",
           betas[b], worst_sp, sp_x);
    check(worst_sp < 4e-7, "softplus (beta %g) relative error %.3g at x = %g", betas[b], worst_sp, sp_x);
  }
  check(gk_softplus_f32(-1e4f, 1.0f, 20.0f) == 0 && gk_softplus_f32(1e4f, 1.0f, 20.0f) == 1e4f &&
            isnan(gk_softplus_f32(NAN, 1.0f, 20.0f)),
        "softplus limits and NaN");
  return finish("test_math");
}
