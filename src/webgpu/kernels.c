// The WebGPU op families: for each, its shader, entry points per direction,
// what it declines, and the passes of one run with their parameter words
// (in the order of the shader's Params struct). Tensors are contiguous in
// their arena slots (backend.c), so shapes are all a pass needs.
#include "webgpu.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

extern const char gk_wgsl_activation[];

static uint64_t groups_for(int64_t n) { return (uint64_t)gk_ceil_div(n, 64); }
static int64_t numel_of(const gk_plan *plan, gk_arg_kind k) {
  int64_t n = 1;
  for (int d = 0; d < plan->args[k].rank; d++) n *= plan->args[k].shape[d];
  return n;
}

// ---------------------------------------------------------------- activations
static gk_status plan_activation(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t n = numel_of(plan, GK_ARG_X);
  bool fwd = d->direction == GK_FORWARD;
  uint32_t *p = wg_pass(r, 0, groups_for(n));
  p[0] = r->slot[GK_ARG_X];
  p[1] = r->slot[GK_ARG_Y];
  p[2] = r->slot[GK_ARG_DY];
  p[3] = r->slot[GK_ARG_DX];
  p[4] = (uint32_t)n;
  p[5] = (uint32_t)d->op;
  p[6] = d->act.approximate == GK_GELU_TANH;
  p[7] = wg_f32(d->act.beta);
  p[8] = wg_f32(d->act.threshold);
  (void)fwd;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- the table
static const wg_family activation = {"activation", gk_wgsl_activation, {"forward"}, {"backward"}, NULL,
                                     plan_activation, NULL};

const wg_family *wg_family_of(const gk_plan *plan) {
  switch (plan->desc.op) {
  case GK_OP_RELU: case GK_OP_GELU: case GK_OP_SILU: case GK_OP_SIGMOID: case GK_OP_SOFTPLUS: return &activation;
  default: return NULL;
  }
}
