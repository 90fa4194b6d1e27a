// src/optim's AdamW and gradient clipping on tensors in WebGPU buffers (the
// backend table's adamw_step, sum_squares and scale; optim.c has checked the
// tensors, and keeps the scalars, the norm, the factor and the non-finite
// rule). f32 tensors of any strides: as the kernels' arguments, each is
// staged into an arena slot (a copy, or the gather shader), updated there by
// the passes of shaders/optim.wgsl, and staged back when written. A tensor
// goes in pieces of whole rows (along its first dim) of at most PIECE
// elements, so the arena stays within every adapter's binding size whatever
// the model's size; the pieces share the slots, which are reserved for the
// largest piece first: a call the device refuses has queued nothing. Only
// the sum of squares waits (one read of the per-tensor sums for all tensors).
#include "webgpu.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

extern const char gk_wgsl_optim[], gk_wgsl_optim_subgroups[];

// Elements of a piece, at most (unless one row has more): 16 MiB a slot,
// AdamW's four slots within the 128 MiB binding every adapter offers.
enum { PIECE = 1 << 22 };

// Workgroups of the sum of squares per piece, at most: the square root of
// a full piece's 64-element groups, so that neither an invocation's run
// over the piece nor the totals' run over the partials is long (f32
// rounding grows with both; long loops also misbehave on Dawn's OpenGL ES
// backend).
enum { SUMSQ_MAX_GROUPS = 256 };

// The entry points of optim.wgsl, compiled on first use and kept: plain,
// and with the sums of squares in subgroups where the device has them
// (wg_subgroups).
enum { DECAY, UPDATE, PARTIALS, TOTALS, SCALE, ENTRY_COUNT };
static const char *const entry_names[ENTRY_COUNT] = {"decay", "update", "partials", "totals", "scale"};
static uint32_t pipelines[2][ENTRY_COUNT];

static uint32_t pipeline(int entry) {
  bool sub = wg_subgroups();
  uint32_t *p = &pipelines[sub][entry];
  if (!*p) {
    *p = wg_pipeline_create(sub ? gk_wgsl_optim_subgroups : gk_wgsl_optim, entry_names[entry], "");
    wg_pipeline_label(*p, "optim", entry_names[entry]);
  }
  return *p;
}

// The words of optim.wgsl's Params, by name.
enum {
  P_P, P_G, P_EXP_AVG, P_EXP_AVG_SQ, P_N, P_LERP_SMALL, P_DECAY, P_W, P_BETA2, P_W2, P_BC2, P_EPS, P_NEG_STEP,
  P_PARTIALS, P_GROUPS, P_TABLE, P_SUMS, P_TENSORS, P_FACTOR
};

static uint64_t groups_for(int64_t n) { return (uint64_t)gk_ceil_div(n, 64); }

// ---------------------------------------------------------------- pieces

// A walk over the pieces of a tensor's shape: `rows` rows (along dim 0; a
// rank-0 tensor is one row) taken `per` at a time; `at` is the next row.
typedef struct pieces {
  int64_t rows, per, at;
} pieces;

static pieces pieces_of(const gk_tensor *t) {
  int64_t numel = gk_tensor_numel(t), rows = t->rank ? t->shape[0] : 1;
  int64_t row = rows ? numel / rows : 0;
  return (pieces){numel ? rows : 0, row >= PIECE ? 1 : PIECE / (row ? row : 1), 0};
}

// Elements of the largest piece of any of the n tensors.
static int64_t largest_piece(int n, const gk_tensor *t) {
  int64_t most = 0;
  for (int i = 0; i < n; i++) {
    pieces pc = pieces_of(&t[i]);
    int64_t rows = pc.per < pc.rows ? pc.per : pc.rows, numel = pc.rows ? gk_tensor_numel(&t[i]) / pc.rows * rows : 0;
    if (numel > most) most = numel;
  }
  return most;
}

// The next piece of t (whose shape pc walks) into *piece: false past the last.
static bool next_piece(pieces *pc, const gk_tensor *t, gk_tensor *piece) {
  if (pc->at >= pc->rows) return false;
  *piece = *t;
  if (t->rank) {
    piece->data = (char *)t->data + pc->at * t->strides[0] * (int64_t)gk_dtype_size(t->dtype);
    piece->shape[0] = pc->per < pc->rows - pc->at ? pc->per : pc->rows - pc->at;
  }
  pc->at += pc->per;
  return true;
}

// ---------------------------------------------------------------- the hooks

// A piece of each list: parameters, gradients and moments in slots 0, N,
// 2N and 3N (N: the largest piece's elements).
gk_status wg_adamw_step(const gk_adamw_config *c, const gk_adamw_scalars *k, int n, const gk_tensor *params,
                        const gk_tensor *grads, const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq) {
  uint64_t N = (uint64_t)largest_piece(n, params);
  gk_status s = wg_arena_reserve(4 * N);
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
    pieces pc[4];
    gk_tensor piece[4];
    for (int l = 0; l < 4; l++) pc[l] = pieces_of(&params[i]);  // one shape, each list's own strides
    while (s == GK_SUCCESS && next_piece(&pc[0], &lists[0][i], &piece[0])) {
      for (int l = 1; l < 4; l++) next_piece(&pc[l], &lists[l][i], &piece[l]);
      int64_t numel = gk_tensor_numel(&piece[0]);
      p[P_N] = (uint32_t)numel;
      for (int l = 0; l < 4 && s == GK_SUCCESS; l++) s = wg_stage(&piece[l], p[l], true);
      if (s == GK_SUCCESS && decays) s = wg_arena_dispatch(pipeline(DECAY), p, groups_for(numel));
      if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(UPDATE), p, groups_for(numel));
      for (int l = 0; l < 4 && s == GK_SUCCESS; l++)
        if (l != 1) s = wg_stage(&piece[l], p[l], false);
    }
  }
  gkwg_submit();
  return s;
}

// A piece in slot 0 (N words), then every piece's partials (tensor i's, its
// pieces' in order: table[2i + 1] of them from the table[2i]-th), the
// table, the n sums.
gk_status wg_sum_squares(int n, const gk_tensor *grads, double *sum) {
  gk_status s = GK_SUCCESS;
  uint32_t *table = malloc(sizeof(uint32_t) * 2 * (size_t)(n > 0 ? n : 1));
  float *sums = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!table || !sums) s = gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory for the sums of squares of %d tensors", n);
  uint64_t N = (uint64_t)largest_piece(n, grads), total = 0;
  gk_tensor piece;
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    table[2 * i] = (uint32_t)total;
    for (pieces pc = pieces_of(&grads[i]); next_piece(&pc, &grads[i], &piece);)
      total += (uint64_t)gk_min64((int64_t)groups_for(gk_tensor_numel(&piece)), SUMSQ_MAX_GROUPS);
    table[2 * i + 1] = (uint32_t)(total - table[2 * i]);
  }
  uint32_t p[WG_PARAM_WORDS] = {0};
  p[P_TABLE] = (uint32_t)(N + total);
  p[P_SUMS] = (uint32_t)(N + total + 2 * (uint64_t)n);
  p[P_TENSORS] = (uint32_t)n;
  if (s == GK_SUCCESS) s = wg_arena_reserve(N + total + 3 * (uint64_t)n);
  if (s == GK_SUCCESS && n > 0) wg_arena_write(p[P_TABLE], table, 2 * (uint32_t)n);
  p[P_PARTIALS] = (uint32_t)N;
  for (int i = 0; i < n && s == GK_SUCCESS; i++)
    for (pieces pc = pieces_of(&grads[i]); s == GK_SUCCESS && next_piece(&pc, &grads[i], &piece);) {
      p[P_N] = (uint32_t)gk_tensor_numel(&piece);
      p[P_GROUPS] = (uint32_t)gk_min64((int64_t)groups_for(p[P_N]), SUMSQ_MAX_GROUPS);
      s = wg_stage(&piece, p[P_G], true);
      if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(PARTIALS), p, p[P_GROUPS]);
      p[P_PARTIALS] += p[P_GROUPS];
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
  gk_status s = wg_arena_reserve((uint64_t)largest_piece(n, grads));
  uint32_t p[WG_PARAM_WORDS] = {0};
  p[P_FACTOR] = wg_f32(factor);
  gk_tensor piece;
  for (int i = 0; i < n && s == GK_SUCCESS; i++)
    for (pieces pc = pieces_of(&grads[i]); s == GK_SUCCESS && next_piece(&pc, &grads[i], &piece);) {
      p[P_N] = (uint32_t)gk_tensor_numel(&piece);
      s = wg_stage(&piece, p[P_G], true);
      if (s == GK_SUCCESS) s = wg_arena_dispatch(pipeline(SCALE), p, groups_for(p[P_N]));
      if (s == GK_SUCCESS) s = wg_stage(&piece, p[P_G], false);
    }
  gkwg_submit();
  return s;
}
