// A program outside the gradkern tree, built against the installed library:
// softmax forward of one row through the plan API, checked against the same
// formula in plain C. `make test` builds it with pkg-config and with
// CMake's find_package (tests/install_test.sh) and runs both.
#include <gradkern.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  // The header and the library it is linked with must be the same release.
  if (strcmp(gk_version(), GK_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s, library %s\n", GK_VERSION_STRING, gk_version());
    return 1;
  }
  enum { N = 5 };
  int64_t shape[1] = {N};
  float x[N] = {1, -2, 0.5f, 3, 0}, y[N];

  gk_op_desc desc;
  gk_plan *plan;
  gk_arg args[2] = {{GK_ARG_X, {0}}, {GK_ARG_Y, {0}}};
  if (gk_op_desc_init(&desc, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 1, shape) != GK_SUCCESS ||
      gk_plan_create(&desc, &plan) != GK_SUCCESS) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 1;
  }
  gk_tensor_init(&args[0].tensor, x, GK_F32, 1, shape);
  gk_tensor_init(&args[1].tensor, y, GK_F32, 1, shape);
  size_t ws_bytes;
  gk_plan_workspace_size(plan, &ws_bytes);  // 0 for softmax: no workspace
  gk_status s = gk_plan_run(plan, args, 2, NULL, 0);
  gk_plan_destroy(plan);
  if (s != GK_SUCCESS || ws_bytes != 0) {
    fprintf(stderr, "gk_plan_run: %s: %s\n", gk_status_string(s), gk_last_error());
    return 1;
  }

  // y = exp(x - max) / sum(exp(x - max)), in double.
  double sum = 0;
  for (int i = 0; i < N; i++) sum += exp(x[i] - 3.0);
  printf("gradkern %s softmax:", gk_version());
  for (int i = 0; i < N; i++) {
    double want = exp(x[i] - 3.0) / sum;
    printf(" %.5f", y[i]);
    if (fabs(y[i] - want) > 1e-6) {
      fprintf(stderr, "\ny[%d] = %.7f, want %.7f\n", i, y[i], want);
      return 1;
    }
  }
  printf("\n");
  return 0;
}
