// src/optim's AdamW and gradient clipping on tensors in WebGPU buffers (the
// backend table's adamw_step, sum_squares and scale; optim.c has checked the
// tensors, and keeps the scalars, the norm, the factor and the non-finite
// rule). f32 tensors of any strides: as the kernels' arguments, each is
// staged into an arena slot (a copy, or the gather shader), updated there by
// the passes of shaders/optim.wgsl, and staged back when written. One tensor
// at a time shares the slots; the arena is reserved for the largest first,
// so a call the device's binding size refuses has queued nothing. Only the
// sum of squares waits (one read of the per-tensor sums for all tensors).
#include "webgpu.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const char gk_wgsl_optim[];

// Workgroups of the sum of squares per tensor, at most: about the square
// root of a 16M-element tensor's 64-element groups, so that neither an
// invocation's run over the tensor nor the totals' run over the partials is
// long (f32 rounding grows with both; long loops also misbehave on Dawn's
// OpenGL ES backend).
enum { SUMSQ_MAX_GROUPS = 4096 };

// The entry points of optim.wgsl, compiled on first use and kept.
enum { DECAY, UPDATE, PARTIALS, TOTALS, SCALE, ENTRY_COUNT };
static const char *const entry_names[ENTRY_COUNT] = {"decay", "update", "partials", "totals", "scale"};
static uint32_t pipelines[ENTRY_COUNT];

static uint32_t pipeline(int entry) {
  if (!pipelines[entry]) pipelines[entry] = wg_pipeline_create(gk_wgsl_optim, entry_names[entry]);
  return pipelines[entry];
}

// The words of optim.wgsl's Params, by name.
enum {
  P_P, P_G, P_EXP_AVG, P_EXP_AVG_SQ, P_N, P_LERP_SMALL, P_DECAY, P_W, P_BETA2, P_W2, P_BC2, P_EPS, P_NEG_STEP,
  P_PARTIALS, P_GROUPS, P_TABLE, P_SUMS, P_TENSORS, P_FACTOR
};

static gk_status f32_only(const char *fn, const char *name, int n, const gk_tensor *t) {
  for (int i = 0; i < n; i++)
    if (t[i].dtype != GK_F32)
      return gk_fail(GK_ERR_UNSUPPORTED, "%s: argument '%s[%d]' is %s: on the webgpu device the optimizers take f32 "
                     "tensors only (f16/bf16 parameters with master weights, and f64, run on host tensors)", fn, name,
                     i, gk_dtype_name(t[i].dtype));
  return GK_SUCCESS;
}

static int64_t largest(int n, const gk_tensor *t) {
  int64_t most = 0;
  for (int i = 0; i < n; i++)
    if (gk_tensor_numel(&t[i]) > most) most = gk_tensor_numel(&t[i]);
  return most;
}

static uint64_t groups_for(int64_t n) { return (uint64_t)gk_ceil_div(n, 64); }

// Tensor i of each list: parameters, gradients and moments in slots 0, N,
// 2N and 3N (N: the largest tensor's elements).
gk_status wg_adamw_step(const gk_adamw_config *c, const gk_adamw_scalars *k, int n, const gk_tensor *params,
                        const gk_tensor *grads, const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq) {
  gk_status s = f32_only("gk_adamw_step", "params", n, params);
  uint64_t N = (uint64_t)largest(n, params);
  if (s == GK_SUCCESS) s = wg_arena_reserve(4 * N);
  if (s != GK_SUCCESS) return s;
  const gk_tensor *lists[4] = {params, grads, exp_avg, exp_avg_sq};
  uint32_t p[WG_PARAM_WORDS] = {0};
  p[P_G] = (uint32_t)N;
  p[P_EXP_AVG] = (uint32_t)(2 * N);
  p[P_EXP_AVG_SQ] = (uint32_t)(3 * N);
  p[P_LERP_SMALL] = fabs(1 - c->beta1) < 0.5;
  p[P_DECAY] = wg_f32(k->decay);
  p[P_W] = wg_f32(1 - c->beta1);
  p[P_BETA2] = wg_f32(c->beta2);
  p[P_W2] = wg_f32(1 - c->beta2);
  p[P_BC2] = wg_f32(k->bc2_sqrt);
  p[P_EPS] = wg_f32(c->eps);
  p[P_NEG_STEP] = wg_f32(-k->step_size);
  bool decays = (float)k->decay != 1.0f;  // p * 1 is p: the pass would change nothing
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    int64_t numel = gk_tensor_numel(&params[i]);
    if (!numel) continue;
    p[P_N] = (uint32_t)numel;
    for (int l = 0; l < 4 && s == GK_SUCCESS; l++) s = wg_stage(&lists[l][i], p[l], true);
    if (s == GK_SUCCESS && decays) s = wg_arena_dispatch(pipeline(DECAY), p, groups_for(numel));
    if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(UPDATE), p, groups_for(numel));
    for (int l = 0; l < 4 && s == GK_SUCCESS; l++)
      if (l != 1) s = wg_stage(&lists[l][i], p[l], false);
  }
  gkwg_submit();
  return s;
}

// The tensor in slot 0 (N words), then every tensor's partials (tensor i's:
// table[2i + 1] of them from the table[2i]-th), the table, the n sums.
gk_status wg_sum_squares(int n, const gk_tensor *grads, double *sum) {
  gk_status s = f32_only("gk_clip_grad_norm", "grads", n, grads);
  if (s != GK_SUCCESS) return s;
  uint32_t *table = malloc(sizeof(uint32_t) * 2 * (size_t)(n > 0 ? n : 1));
  float *sums = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!table || !sums) s = gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory for the sums of squares of %d tensors", n);
  uint64_t N = (uint64_t)largest(n, grads), total = 0;
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    table[2 * i] = (uint32_t)total;
    table[2 * i + 1] = (uint32_t)gk_min64((int64_t)groups_for(gk_tensor_numel(&grads[i])), SUMSQ_MAX_GROUPS);
    total += table[2 * i + 1];
  }
  uint32_t p[WG_PARAM_WORDS] = {0};
  p[P_PARTIALS] = (uint32_t)N;
  p[P_TABLE] = (uint32_t)(N + total);
  p[P_SUMS] = (uint32_t)(N + total + 2 * (uint64_t)n);
  p[P_TENSORS] = (uint32_t)n;
  if (s == GK_SUCCESS) s = wg_arena_reserve(N + total + 3 * (uint64_t)n);
  if (s == GK_SUCCESS && n > 0) wg_arena_write(p[P_TABLE], table, 2 * (uint32_t)n);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    p[P_N] = (uint32_t)gk_tensor_numel(&grads[i]);
    if (!p[P_N]) continue;
    p[P_PARTIALS] = (uint32_t)N + table[2 * i];
    p[P_GROUPS] = table[2 * i + 1];
    s = wg_stage(&grads[i], p[P_G], true);
    if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(PARTIALS), p, p[P_GROUPS]);
  }
  p[P_PARTIALS] = (uint32_t)N;
  if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(TOTALS), p, (uint64_t)n);
  if (s == GK_SUCCESS && n > 0) s = wg_arena_read(p[P_SUMS], sums, (uint32_t)n);
  *sum = 0;
  for (int i = 0; i < n && s == GK_SUCCESS; i++) *sum += sums[i];
  free(table);
  free(sums);
  return s;
}

gk_status wg_scale(int n, const gk_tensor *grads, double factor) {
  gk_status s = f32_only("gk_clip_grad_norm", "grads", n, grads);
  if (s == GK_SUCCESS) s = wg_arena_reserve((uint64_t)largest(n, grads));
  uint32_t p[WG_PARAM_WORDS] = {0};
  p[P_FACTOR] = wg_f32(factor);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    int64_t numel = gk_tensor_numel(&grads[i]);
    if (!numel) continue;
    p[P_N] = (uint32_t)numel;
    s = wg_stage(&grads[i], p[P_G], true);
    if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(SCALE), p, groups_for(numel));
    if (s == GK_SUCCESS) s = wg_stage(&grads[i], p[P_G], false);
  }
  gkwg_submit();
  return s;
}
