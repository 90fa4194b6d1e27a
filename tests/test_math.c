// The branch-free f32 exponential behind the f32 kernels: relative error
// against libm's double exp, and the limits (overflow to inf, underflow to 0
// through the subnormals, NaN).
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
  return finish("test_math");
}
