// RMSNorm forward and backward through the plan API: the example the README
// shows. Built and run by `make test`.
#include "gradkern.h"

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    gk_status s_ = (call);                                                             \
    if (s_ != GK_SUCCESS) {                                                            \
      fprintf(stderr, "%s: %s: %s\n", #call, gk_status_string(s_), gk_last_error());  \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

int main(void) {
  enum { ROWS = 4, C = 8 };
  int64_t shape[2] = {ROWS, C}, wshape[1] = {C}, sshape[1] = {ROWS};
  float x[ROWS * C], w[C], y[ROWS * C], rstd[ROWS];
  float dy[ROWS * C], dx[ROWS * C], dw[C];
  for (int i = 0; i < ROWS * C; i++) x[i] = (float)(i % 7) - 3, dy[i] = 1;
  for (int i = 0; i < C; i++) w[i] = 1.0f + 0.1f * (float)i;

  // 1. Describe: RMSNorm forward over the last dim of a (4, 8) f32 tensor.
  gk_op_desc desc;
  CHECK(gk_op_desc_init(&desc, GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, shape));
  desc.norm.eps = 1e-6;
  // 2. Create a plan: the library selects a kernel.
  gk_plan *fwd;
  CHECK(gk_plan_create(&desc, &fwd));
  gk_plan_info info;
  CHECK(gk_plan_get_info(fwd, &info));
  printf("forward kernel: %s (%s)\n", info.kernel, info.math);
  // 3. Tensors: x and weight in; y and the saved rstd out.
  gk_arg args[4] = {{GK_ARG_X, {0}}, {GK_ARG_WEIGHT, {0}}, {GK_ARG_Y, {0}}, {GK_ARG_RSTD, {0}}};
  CHECK(gk_tensor_init(&args[0].tensor, x, GK_F32, 2, shape));
  CHECK(gk_tensor_init(&args[1].tensor, w, GK_F32, 1, wshape));
  CHECK(gk_tensor_init(&args[2].tensor, y, GK_F32, 2, shape));
  CHECK(gk_tensor_init(&args[3].tensor, rstd, GK_F32, 1, sshape));
  // 4. Workspace (the caller owns all memory), then 5. run.
  size_t ws_bytes;
  CHECK(gk_plan_workspace_size(fwd, &ws_bytes));
  void *ws = ws_bytes ? aligned_alloc(64, (ws_bytes + 63) / 64 * 64) : NULL;
  CHECK(gk_plan_run(fwd, args, 4, ws, ws_bytes));
  free(ws);
  gk_plan_destroy(fwd);

  // Backward: dy, x, weight, rstd -> dx, dweight (overwritten by default).
  desc.direction = GK_BACKWARD;
  gk_plan *bwd;
  CHECK(gk_plan_create(&desc, &bwd));
  gk_arg bargs[6] = {{GK_ARG_DY, {0}}, {GK_ARG_X, {0}}, {GK_ARG_WEIGHT, {0}},
                     {GK_ARG_RSTD, {0}}, {GK_ARG_DX, {0}}, {GK_ARG_DWEIGHT, {0}}};
  CHECK(gk_tensor_init(&bargs[0].tensor, dy, GK_F32, 2, shape));
  bargs[1].tensor = args[0].tensor;
  bargs[2].tensor = args[1].tensor;
  bargs[3].tensor = args[3].tensor;
  CHECK(gk_tensor_init(&bargs[4].tensor, dx, GK_F32, 2, shape));
  CHECK(gk_tensor_init(&bargs[5].tensor, dw, GK_F32, 1, wshape));
  CHECK(gk_plan_workspace_size(bwd, &ws_bytes));
  ws = ws_bytes ? aligned_alloc(64, (ws_bytes + 63) / 64 * 64) : NULL;
  CHECK(gk_plan_run(bwd, bargs, 6, ws, ws_bytes));
  free(ws);
  gk_plan_destroy(bwd);

  printf("y[0][:4] = %.4f %.4f %.4f %.4f, rstd[0] = %.4f\n", y[0], y[1], y[2], y[3], rstd[0]);
  printf("dx[0][:4] = %.4f %.4f %.4f %.4f, dweight[:4] = %.4f %.4f %.4f %.4f\n", dx[0], dx[1], dx[2], dx[3], dw[0],
         dw[1], dw[2], dw[3]);

  // A bad call returns a status and says what was wrong; nothing is written.
  desc.norm.eps = -1;
  gk_plan *bad;
  gk_status s = gk_plan_create(&desc, &bad);
  printf("eps = -1: %s: %s\n", gk_status_string(s), gk_last_error());
  return s == GK_ERR_INVALID_VALUE ? 0 : 1;
}
