// The WebGPU op families: for each, its shader, entry points per direction,
// what it declines, and the passes of one run with their parameter words
// (in the order of the shader's Params struct). Tensors are contiguous in
// their arena slots (backend.c), so shapes are all a pass needs.
#include "webgpu.h"
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern const char gk_wgsl_activation[], gk_wgsl_gated[], gk_wgsl_binary[], gk_wgsl_norm[], gk_wgsl_softmax[],
    gk_wgsl_matmul[], gk_wgsl_cross_entropy[], gk_wgsl_embedding[], gk_wgsl_rope[],
    gk_wgsl_attention[], gk_wgsl_conv1d[], gk_wgsl_scan[];
// The reduction shaders with their row reductions in subgroups (wg_family.subgroup_source).
extern const char gk_wgsl_norm_subgroups[], gk_wgsl_softmax_subgroups[], gk_wgsl_cross_entropy_subgroups[];

static uint64_t groups_for(int64_t n) { return (uint64_t)gk_ceil_div(n, 64); }
static int64_t numel_of(const gk_plan *plan, gk_arg_kind k) {
  int64_t n = 1;
  for (int d = 0; d < plan->args[k].rank; d++) n *= plan->args[k].shape[d];
  return n;
}
static int64_t prod(const int64_t *shape, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= shape[d];
  return n;
}
static int norm_dim(int dim, int rank) { return dim < 0 ? dim + rank : dim; }

// ---------------------------------------------------------------- activations
// Bindings: forward x, y; backward the saved tensor (x, or y with
// act.from_output), dy, dx. 256 elements a workgroup, or 64 words of two
// in a packed run.
static gk_status plan_activation(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  gk_arg_kind saved = gk_activation_saved(d);
  int64_t n = r->units;
  const gk_arg_kind forward[] = {GK_ARG_X, GK_ARG_Y}, backward[] = {saved, GK_ARG_DY, GK_ARG_DX};
  uint64_t groups = r->packed ? groups_for(n / 2) : (uint64_t)gk_ceil_div(n, 256);
  uint32_t *p = d->direction == GK_FORWARD ? wg_pass_bound(r, 0, groups, 2, forward)
                                           : wg_pass_bound(r, 0, groups, 3, backward);
  p[0] = r->slot[d->direction == GK_FORWARD ? GK_ARG_X : saved];
  p[1] = r->slot[GK_ARG_Y];
  p[2] = r->slot[GK_ARG_DY];
  p[3] = r->slot[GK_ARG_DX];
  p[4] = (uint32_t)n;
  p[5] = wg_f32(d->act.beta);
  p[6] = wg_f32(d->act.threshold);
  return GK_SUCCESS;
}

// Elementwise families split by elements: every tensor one element a unit.
static int64_t split_elementwise(const gk_plan *plan, gk_arg_kind of, int64_t *per_unit) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) per_unit[k] = 1;
  return numel_of(plan, of);
}
static int64_t split_activation(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  return split_elementwise(plan, gk_activation_saved(&plan->desc), per_unit);
}
// Every tensor of an activation has the description's shape: packed always.
static bool packed_activation(const gk_plan *plan) {
  (void)plan;
  return true;
}

// The override constants of activation.wgsl and gated.wgsl: the activation
// (gk_op code; for the gated ops GLU sigmoid, ReGLU relu, SwiGLU silu,
// GeGLU gelu), GELU's form, and whether the backward takes y.
static void activation_overrides(const gk_plan *plan, char *text, size_t cap) {
  const gk_op_desc *d = &plan->desc;
  snprintf(text, cap, "ACT=%d,APPROX=%d,FROM_OUTPUT=%d", (int)d->op, d->act.approximate == GK_GELU_TANH,
           d->act.from_output);
}
static void gated_overrides(const gk_plan *plan, char *text, size_t cap) {
  const gk_op_desc *d = &plan->desc;
  static const gk_op act_of[GK_OP_COUNT_] = {[GK_OP_GLU] = GK_OP_SIGMOID, [GK_OP_REGLU] = GK_OP_RELU,
                                             [GK_OP_SWIGLU] = GK_OP_SILU, [GK_OP_GEGLU] = GK_OP_GELU};
  snprintf(text, cap, "ACT=%d,APPROX=%d", (int)act_of[d->op], d->act.approximate == GK_GELU_TANH);
}

// ---------------------------------------------------------------- gated
// The split form's y element i reads x at (i / half) 2 half + i % half and
// half further (half = h x inner); entry points 0 (two tensors), 1 (split).
static int64_t gated_half(const gk_op_desc *d) {
  int dim = norm_dim(d->gated.dim, d->rank);
  return d->shape[dim] / 2 * prod(d->shape, dim + 1, d->rank);
}
static gk_status plan_gated(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  bool split = d->gated.form == GK_GATED_SPLIT;
  int64_t half = split ? gated_half(d) : 0, n = split ? r->units * half : r->units;
  uint64_t groups = groups_for(r->packed ? n / 2 : n);
  static const gk_arg_kind forward[] = {GK_ARG_X, GK_ARG_GATE, GK_ARG_Y},
                           backward[] = {GK_ARG_X, GK_ARG_GATE, GK_ARG_DY, GK_ARG_DX, GK_ARG_DGATE},
                           forward_split[] = {GK_ARG_X, GK_ARG_Y}, backward_split[] = {GK_ARG_X, GK_ARG_DY, GK_ARG_DX};
  uint32_t *p = d->direction == GK_FORWARD ? split ? wg_pass_bound(r, 1, groups, 2, forward_split)
                                                   : wg_pass_bound(r, 0, groups, 3, forward)
                : split ? wg_pass_bound(r, 1, groups, 3, backward_split)
                        : wg_pass_bound(r, 0, groups, 5, backward);
  const gk_arg_kind kinds[] = {GK_ARG_X, GK_ARG_GATE, GK_ARG_Y, GK_ARG_DY, GK_ARG_DX, GK_ARG_DGATE};
  for (int i = 0; i < 6; i++) p[i] = r->slot[kinds[i]];
  p[6] = (uint32_t)n;
  p[7] = (uint32_t)half;
  return GK_SUCCESS;
}
// Split by elements (two tensors) or by the index before the split dim (a
// unit: both halves of x and dx, one half's worth of y and dy).
static int64_t split_gated(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  if (d->gated.form != GK_GATED_SPLIT) return split_elementwise(plan, GK_ARG_X, per_unit);
  int64_t half = gated_half(d);
  per_unit[GK_ARG_X] = per_unit[GK_ARG_DX] = 2 * half;
  per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = half;
  return half ? numel_of(plan, GK_ARG_X) / (2 * half) : 0;
}
// Packed: the two-tensor form; the split form where a half-row is even, so
// that a word never straddles the two halves.
static bool packed_gated(const gk_plan *plan) {
  return plan->desc.gated.form != GK_GATED_SPLIT || gated_half(&plan->desc) % 2 == 0;
}

// ---------------------------------------------------------------- add, mul
// shape (rank `rank`) aligned to y's rank R at the trailing dim: its sizes
// (1 where it lacks a dim) and its contiguous strides, 0 where the size is 1.
static void aligned(int R, int rank, const int64_t *shape, int64_t *size, uint32_t *stride) {
  int64_t s = 1;
  for (int d = R - 1; d >= 0; d--) {
    int k = d - (R - rank);
    size[d] = k >= 0 ? shape[k] : 1;
    stride[d] = size[d] == 1 ? 0 : (uint32_t)s;
    s *= size[d];
  }
}

// a and b of the same shape: nothing broadcast.
static bool unbroadcast(const gk_op_desc *d) {
  return d->rank == d->binary.b_rank && !memcmp(d->shape, d->binary.b_shape, (size_t)d->rank * sizeof *d->shape);
}

// a's, b's and y's shapes aligned to y's rank R (aligned); their leading
// dims that a broadcast run splits (`lead`: the most from dim 0 along
// which each operand has either y's sizes or size 1 throughout), and
// whether each operand has y's sizes there (split with y; else it is bound
// whole by every piece, and its gradient sums over every piece).
typedef struct binary_shapes {
  int R, lead;
  int64_t as[GK_MAX_RANK], bs[GK_MAX_RANK], ys[GK_MAX_RANK];
  bool a_split, b_split;
} binary_shapes;

static binary_shapes shapes_of(const gk_op_desc *d) {
  binary_shapes s = {.R = d->rank > d->binary.b_rank ? d->rank : d->binary.b_rank, .a_split = true,
                     .b_split = true};
  uint32_t strides[GK_MAX_RANK];
  aligned(s.R, d->rank, d->shape, s.as, strides);
  aligned(s.R, d->binary.b_rank, d->binary.b_shape, s.bs, strides);
  for (int k = 0; k < s.R; k++) s.ys[k] = s.as[k] > s.bs[k] ? s.as[k] : s.bs[k];
  bool a_one = true, b_one = true;
  for (; s.lead < s.R; s.lead++) {
    int k = s.lead;
    bool a_split = s.a_split && s.as[k] == s.ys[k], b_split = s.b_split && s.bs[k] == s.ys[k];
    bool a_ones = a_one && s.as[k] == 1, b_ones = b_one && s.bs[k] == 1;
    if (!(a_split || a_ones) || !(b_split || b_ones)) break;
    s.a_split = a_split;
    s.b_split = b_split;
    a_one = a_ones;
    b_one = b_ones;
  }
  return s;
}

// Forward y = a + alpha b or alpha a b; backward da, db (reduce_grad).
// The dims of shapes_of with the leading `lead` of them as one of r->units
// (the whole run's, or a piece's; nothing broadcast: one dim of the run's
// elements), which keeps every sum's order: dim 0 outermost. A
// piece of a split backward sums the gradient of an operand bound whole
// on from the sums the pieces before it left in the run's scratch (carry
// bit 0), and leaves its sums there (bit 1) but in the last piece, which
// writes g = alpha sum: the unsplit run's bits. Its staged g is kept until
// then (partial_outputs: staged in, and back out as it was).
static gk_status plan_binary(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  binary_shapes sh = shapes_of(d);
  int R = sh.R - sh.lead + 1;
  int64_t as[GK_MAX_RANK], bs[GK_MAX_RANK], ys[GK_MAX_RANK];
  uint32_t astr[GK_MAX_RANK], bstr[GK_MAX_RANK], ystr[GK_MAX_RANK];
  as[0] = sh.a_split ? r->units : 1;
  bs[0] = sh.b_split ? r->units : 1;
  ys[0] = r->units;
  for (int k = 1; k < R; k++) {
    as[k] = sh.as[sh.lead + k - 1];
    bs[k] = sh.bs[sh.lead + k - 1];
    ys[k] = sh.ys[sh.lead + k - 1];
  }
  aligned(R, R, as, as, astr);
  aligned(R, R, bs, bs, bstr);
  aligned(R, R, ys, ys, ystr);
  bool mul = d->op == GK_OP_MUL;
  if (d->direction == GK_FORWARD) {
    int64_t n = prod(ys, 0, R);
    static const gk_arg_kind bind[] = {GK_ARG_A, GK_ARG_B, GK_ARG_Y};
    uint32_t *p = wg_pass_bound(r, 0, groups_for(r->packed ? n / 2 : n), 3, bind);
    p[0] = r->slot[GK_ARG_A];
    p[1] = r->slot[GK_ARG_B];
    p[2] = r->slot[GK_ARG_Y];
    p[3] = (uint32_t)n;
    p[4] = (uint32_t)R;
    p[6] = wg_f32(d->binary.alpha);
    for (int k = 0; k < R; k++) {
      p[8 + k] = (uint32_t)ys[k];
      p[16 + k] = astr[k];
      p[24 + k] = bstr[k];
    }
    return GK_SUCCESS;
  }
  // Backward: da from dy (and b), db from dy (and a): reduce_grad binds
  // dy, the gradient and the scratch, mul's reduce_grad_mul the other
  // operand after dy (the packed entries bind no scratch).
  gk_arg_kind whole = sh.a_split ? GK_ARG_DB : GK_ARG_DA;  // (a piece's units have a or b whole, not both)
  bool carried = r->pieces && !(sh.a_split && sh.b_split) && r->t[whole];
  if (!r->packed) wg_bound_scratch(r, carried ? (uint64_t)numel_of(plan, whole) : 1);
  r->partial_outputs = carried && r->piece < r->pieces - 1;
  for (int g = 0; g < 2; g++) {
    gk_arg_kind out = g ? GK_ARG_DB : GK_ARG_DA, other = g ? GK_ARG_A : GK_ARG_B;
    if (!r->t[out]) continue;
    const int64_t *gs = g ? bs : as;
    const uint32_t *ostr = g ? astr : bstr;
    int64_t n = prod(gs, 0, R);
    const gk_arg_kind bind_add[] = {GK_ARG_DY, out, WG_ARG_SCRATCH},
                      bind_mul[] = {GK_ARG_DY, other, out, WG_ARG_SCRATCH};
    uint32_t *p = wg_pass_bound(r, 0, groups_for(r->packed ? n / 2 : n), (mul ? 3 : 2) + !r->packed,
                                mul ? bind_mul : bind_add);
    p[0] = r->slot[GK_ARG_DY];
    p[1] = mul ? r->slot[other] : 0;
    p[2] = r->slot[out];
    p[3] = (uint32_t)n;
    p[4] = (uint32_t)R;
    p[5] = carried && out == whole ? (r->piece > 0) | (r->piece < r->pieces - 1) << 1 : 0;
    p[6] = wg_f32(mul || g ? d->binary.alpha : 1.0);
    for (int k = 0; k < R; k++) {
      p[8 + k] = (uint32_t)gs[k];
      p[16 + k] = ystr[k] ? ystr[k] : 0;
      p[24 + k] = ostr[k];
      p[32 + k] = gs[k] == 1 ? (uint32_t)ys[k] : 1;
    }
  }
  return GK_SUCCESS;
}

// Split by elements when nothing is broadcast; else by the leading dims of
// shapes_of (a unit: one index of them), an operand with y's sizes there
// split with y, one of size 1 there bound whole.
static int64_t split_binary(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  if (unbroadcast(d)) {
    split_elementwise(plan, GK_ARG_A, per_unit);
    return prod(d->shape, 0, d->rank);
  }
  binary_shapes sh = shapes_of(d);
  int64_t a_unit = prod(sh.as, sh.lead, sh.R), b_unit = prod(sh.bs, sh.lead, sh.R);
  per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = prod(sh.ys, sh.lead, sh.R);
  per_unit[GK_ARG_A] = per_unit[GK_ARG_DA] = sh.a_split ? a_unit : 0;
  per_unit[GK_ARG_B] = per_unit[GK_ARG_DB] = sh.b_split ? b_unit : 0;
  return prod(sh.ys, 0, sh.lead);
}
// Packed when nothing is broadcast.
static bool packed_binary(const gk_plan *plan) { return unbroadcast(&plan->desc); }
static void binary_overrides(const gk_plan *plan, char *text, size_t cap) {
  snprintf(text, cap, "IS_MUL=%d,BROADCAST=%d", plan->desc.op == GK_OP_MUL, !unbroadcast(&plan->desc));
}

// ---------------------------------------------------------------- norms
// Bindings: forward x, weight, mean, rstd, bias, y; backward_dx x, weight,
// mean, rstd, dy, dx; backward_params x, dweight, mean, rstd, dy, dbias. A
// piece of a split backward (r->pieces) writes its rows' parameter sums to
// its partials in the run's scratch (param_partials: x, scratch, mean,
// rstd, dy); combine_params (scratch, dweight, dbias), a whole pass, adds
// them up in piece order.
enum { NORM_DX, NORM_PARAMS, NORM_PARTIALS, NORM_COMBINE };
static gk_status plan_norm(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t cols = prod(d->shape, d->rank - d->norm.normalized_rank, d->rank), rows = r->units;
  if (rows == 0) return GK_SUCCESS;
  static const gk_arg_kind forward[] = {GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_MEAN, GK_ARG_RSTD, GK_ARG_BIAS, GK_ARG_Y},
                           dx[] = {GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_MEAN, GK_ARG_RSTD, GK_ARG_DY, GK_ARG_DX},
                           params[] = {GK_ARG_X, GK_ARG_DWEIGHT, GK_ARG_MEAN, GK_ARG_RSTD, GK_ARG_DY, GK_ARG_DBIAS},
                           partials[] = {GK_ARG_X, WG_ARG_SCRATCH, GK_ARG_MEAN, GK_ARG_RSTD, GK_ARG_DY},
                           combine[] = {WG_ARG_SCRATCH, GK_ARG_DWEIGHT, GK_ARG_DBIAS};
  bool fwd = d->direction == GK_FORWARD, sums = !fwd && (r->t[GK_ARG_DWEIGHT] || r->t[GK_ARG_DBIAS]);
  if (sums && r->pieces) wg_bound_scratch(r, 2 * (uint64_t)(cols * r->pieces));
  uint32_t *p = wg_pass_bound(r, 0, (uint64_t)rows, 6, fwd ? forward : dx);
  const gk_arg_kind kinds[] = {GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_BIAS, GK_ARG_Y, GK_ARG_MEAN,
                               GK_ARG_RSTD, GK_ARG_DY, GK_ARG_DX, GK_ARG_DWEIGHT, GK_ARG_DBIAS};
  for (int i = 0; i < 10; i++) p[i] = r->slot[kinds[i]];
  p[10] = (uint32_t)rows;
  p[11] = (uint32_t)cols;
  p[12] = wg_f32(d->norm.eps);
  p[13] = (uint32_t)r->pieces;
  if (!sums) return GK_SUCCESS;
  if (!r->pieces) {
    memcpy(wg_pass_bound(r, NORM_PARAMS, (uint64_t)cols, 6, params), p, WG_PARAM_WORDS * sizeof *p);
    return GK_SUCCESS;
  }
  uint32_t *q = wg_pass_bound(r, NORM_PARTIALS, (uint64_t)cols, 5, partials);
  memcpy(q, p, WG_PARAM_WORDS * sizeof *p);
  q[8] = (uint32_t)(2 * cols * r->piece);  // dweight's sums, then dbias's
  q[9] = q[8] + (uint32_t)cols;
  memcpy(wg_pass_bound(r, NORM_COMBINE, groups_for(cols), 3, combine), p, WG_PARAM_WORDS * sizeof *p);
  r->pass[r->npass - 1].whole = true;
  return GK_SUCCESS;
}
// LayerNorm or RMSNorm, weight, bias, accumulate: override constants.
static void norm_overrides(const gk_plan *plan, char *text, size_t cap) {
  const gk_op_desc *d = &plan->desc;
  bool ln = d->op == GK_OP_LAYERNORM;
  snprintf(text, cap, "IS_LN=%d,HAS_W=%d,HAS_B=%d,ACCUMULATE=%d", ln, d->norm.has_weight, ln && d->norm.has_bias,
           d->accumulate);
}
// Split by rows: x, y, dy, dx a row a unit, mean and rstd one word, the
// parameters and their gradients whole (the backward's sums over every
// row: partials a piece, added up once, plan_norm).
static int64_t split_norm(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  int64_t cols = prod(d->shape, d->rank - d->norm.normalized_rank, d->rank);
  const gk_arg_kind by_row[] = {GK_ARG_X, GK_ARG_Y, GK_ARG_DY, GK_ARG_DX};
  for (int i = 0; i < 4; i++) per_unit[by_row[i]] = cols;
  per_unit[GK_ARG_MEAN] = per_unit[GK_ARG_RSTD] = 1;
  return prod(d->shape, 0, d->rank - d->norm.normalized_rank);
}

// ---------------------------------------------------------------- softmax
static gk_status plan_softmax(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int dim = norm_dim(d->softmax.dim, d->rank);
  int64_t inner = prod(d->shape, dim + 1, d->rank), rows = r->units * inner;
  if (rows == 0 || d->shape[dim] == 0) return GK_SUCCESS;
  static const gk_arg_kind forward[] = {GK_ARG_X, GK_ARG_Y}, backward[] = {GK_ARG_DY, GK_ARG_Y, GK_ARG_DX};
  // Backward entry 1 (backward_vec4) where the rows are whole vec4s.
  bool by_vec4 = inner == 1 && d->shape[dim] % 4 == 0 && r->slot[GK_ARG_DY] % 4 == 0 && r->slot[GK_ARG_Y] % 4 == 0 &&
                 r->slot[GK_ARG_DX] % 4 == 0;
  uint32_t *p = d->direction == GK_FORWARD ? wg_pass_bound(r, 0, (uint64_t)rows, 2, forward)
                                           : wg_pass_bound(r, by_vec4, (uint64_t)rows, 3, backward);
  p[0] = r->slot[GK_ARG_X];
  p[1] = r->slot[GK_ARG_Y];
  p[2] = r->slot[GK_ARG_DY];
  p[3] = r->slot[GK_ARG_DX];
  p[4] = (uint32_t)rows;
  p[5] = (uint32_t)d->shape[dim];
  p[6] = (uint32_t)inner;
  return GK_SUCCESS;
}
// Split by the leading dims (a unit: one (len, inner) slab).
static int64_t split_softmax(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  int dim = norm_dim(d->softmax.dim, d->rank);
  for (int k = 0; k < GK_ARG_COUNT_; k++) per_unit[k] = prod(d->shape, dim, d->rank);
  return prod(d->shape, 0, dim);
}
static void softmax_overrides(const gk_plan *plan, char *text, size_t cap) {
  snprintf(text, cap, "IS_LOG=%d", plan->desc.op == GK_OP_LOG_SOFTMAX);
}

// ---------------------------------------------------------------- linear, matmul
// One strided product of matmul.wgsl (its Params in this order).
typedef struct gemm {
  uint32_t a, b, c, bias;
  int64_t M, N, K, batches, kb;
  int has_bias, accumulate, carry;
  int64_t a_bs, a_kbs, a_rs, a_cs, b_bs, b_kbs, b_rs, b_cs, c_bs, c_rs, c_cs;
} gemm;

// Entry points of matmul.wgsl in both families: 0 product, 1 product_vec4, 2 column_sum.
enum { PRODUCT, PRODUCT_VEC4, COLUMN_SUM };

// product_vec4 when a's rows run along k and b's and c's along j in whole
// vec4s: column strides 1, everything else a multiple of 4 words (slots are).
static bool product_by_vec4(const gemm *g) {
  const int64_t words[] = {g->a, g->b, g->c, g->bias, g->K, g->N, g->a_bs, g->a_kbs, g->a_rs,
                           g->b_bs, g->b_kbs, g->b_rs, g->c_bs, g->c_rs};
  bool fits = g->a_cs == 1 && g->b_cs == 1 && g->c_cs == 1;
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) fits &= words[i] % 4 == 0;
  return fits;
}

static void product(wg_run *r, gemm g) {
  if (g.M == 0 || g.N == 0 || g.batches == 0) return;
  uint32_t *p = wg_pass(r, product_by_vec4(&g) ? PRODUCT_VEC4 : PRODUCT,
                        (uint64_t)(gk_ceil_div(g.M, 32) * gk_ceil_div(g.N, 32) * g.batches));
  const int64_t words[] = {g.a, g.b, g.c, g.bias, g.M, g.N, g.K, g.batches, g.kb, g.has_bias, g.accumulate, g.carry,
                           g.a_bs, g.a_kbs, g.a_rs, g.a_cs, g.b_bs, g.b_kbs, g.b_rs, g.b_cs, g.c_bs, g.c_rs, g.c_cs};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) p[i] = (uint32_t)words[i];
}

// dbias[j] (+)= sum over the M rows of dy (M x N).
static void column_sum(wg_run *r, uint32_t dy, uint32_t dbias, int64_t M, int64_t N, int accumulate) {
  if (N == 0) return;
  uint32_t *p = wg_pass(r, COLUMN_SUM, (uint64_t)N);
  p[0] = dy;
  p[2] = dbias;
  p[4] = (uint32_t)M;
  p[5] = (uint32_t)N;
  p[10] = (uint32_t)accumulate;
}

// y (R x N) = x (R x K) W^T + b;  dx = dy W;  dW (+)= dy^T x;  db (+)= column sums of dy.
// A piece of a split run (split_linear) covers the output features
// first_unit .. + units (N of them here): those columns of y and dy, rows
// of W and dW, elements of b and db; its dx product goes on with the sums
// the pieces before it left in dx (carry; dx kept in the arena in f32
// from piece to piece, wg_run.kept).
static gk_status plan_linear(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t K = d->shape[d->rank - 1], R = prod(d->shape, 0, d->rank - 1), N = r->units;
  const uint32_t *s = r->slot;
  if (d->direction == GK_FORWARD) {
    product(r, (gemm){.a = s[GK_ARG_X], .b = s[GK_ARG_WEIGHT], .c = s[GK_ARG_Y], .bias = s[GK_ARG_BIAS], .M = R,
                      .N = N, .K = K, .batches = 1, .kb = 1, .has_bias = d->linear.has_bias, .a_rs = K, .a_cs = 1,
                      .b_rs = 1, .b_cs = K, .c_rs = N, .c_cs = 1});
    return GK_SUCCESS;
  }
  bool carry = r->first_unit > 0;
  product(r, (gemm){.a = s[GK_ARG_DY], .b = s[GK_ARG_WEIGHT], .c = s[GK_ARG_DX], .M = R, .N = K, .K = N,
                    .batches = 1, .kb = 1, .carry = carry, .a_rs = N, .a_cs = 1, .b_rs = K, .b_cs = 1, .c_rs = K,
                    .c_cs = 1});
  product(r, (gemm){.a = s[GK_ARG_DY], .b = s[GK_ARG_X], .c = s[GK_ARG_DWEIGHT], .M = N, .N = K, .K = R,
                    .batches = 1, .kb = 1, .accumulate = d->accumulate, .a_rs = 1, .a_cs = N, .b_rs = K, .b_cs = 1,
                    .c_rs = K, .c_cs = 1});
  if (d->linear.has_bias) column_sum(r, s[GK_ARG_DY], s[GK_ARG_DBIAS], R, N, d->accumulate);
  return GK_SUCCESS;
}
// Split by output feature: rows of W and dW (K elements), elements of b
// and db, a column of y and dy in each of their R rows; x and dx whole.
// Each piece's dW and db sums run over every row; dx's sum over the
// features carries from piece to piece in order, in f32 (a 16-bit dx
// rounded once): the unsplit run's bits.
static int64_t split_linear(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  const gk_op_desc *d = &plan->desc;
  per_unit[GK_ARG_WEIGHT] = per_unit[GK_ARG_DWEIGHT] = d->shape[d->rank - 1];
  per_unit[GK_ARG_BIAS] = per_unit[GK_ARG_DBIAS] = per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = 1;
  outer[GK_ARG_Y] = outer[GK_ARG_DY] = prod(d->shape, 0, d->rank - 1);
  return d->linear.out_features;
}

// Y = op(A) op(B) per batch; dA = dY op(B)^T, dB = op(A)^T dY (summed over
// the batch when B is shared), each written in its operand's layout. A
// piece of a split run (split_matmul) covers the columns first_unit .. +
// units (N of them here) of Y, dY, op(B) and its gradient; its dA product
// goes on with the sums the pieces before it left in dA (carry; dA kept in
// the arena in f32 from piece to piece, wg_run.kept).
static gk_status plan_matmul(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int ta = d->matmul.trans_a, tb = d->matmul.trans_b, shared = d->matmul.shared_b;
  int64_t M = d->shape[d->rank - 2 + ta], K = d->shape[d->rank - 1 - ta], N = r->units;
  int64_t nb = prod(d->shape, 0, d->rank - 2);
  int64_t a_bs = M * K, b_bs = shared ? 0 : K * N, y_bs = M * N;
  // op(A)[i, k] and op(B)[k, j] as (row, column) strides.
  int64_t a_rs = ta ? 1 : K, a_cs = ta ? M : 1, b_rs = tb ? 1 : N, b_cs = tb ? K : 1;
  const uint32_t *s = r->slot;
  if (d->direction == GK_FORWARD) {
    product(r, (gemm){.a = s[GK_ARG_A], .b = s[GK_ARG_B], .c = s[GK_ARG_Y], .M = M, .N = N, .K = K, .batches = nb,
                      .kb = 1, .a_bs = a_bs, .a_rs = a_rs, .a_cs = a_cs, .b_bs = b_bs, .b_rs = b_rs, .b_cs = b_cs,
                      .c_bs = y_bs, .c_rs = N, .c_cs = 1});
    return GK_SUCCESS;
  }
  // dA[i, k] = sum_j dY[i, j] op(B)[k, j]: written at A's (i, k) strides.
  bool carry = r->first_unit > 0;
  product(r, (gemm){.a = s[GK_ARG_DY], .b = s[GK_ARG_B], .c = s[GK_ARG_DA], .M = M, .N = K, .K = N, .batches = nb,
                    .kb = 1, .carry = carry, .a_bs = y_bs, .a_rs = N, .a_cs = 1, .b_bs = b_bs, .b_rs = b_cs,
                    .b_cs = b_rs, .c_bs = a_bs, .c_rs = a_rs, .c_cs = a_cs});
  // dB[k, j] = sum_i op(A)[i, k] dY[i, j]: written at B's (k, j) strides.
  gemm g = {.a = s[GK_ARG_A], .b = s[GK_ARG_DY], .c = s[GK_ARG_DB], .M = K, .N = N, .K = M, .batches = nb, .kb = 1,
            .a_bs = a_bs, .a_rs = a_cs, .a_cs = a_rs, .b_bs = y_bs, .b_rs = N, .b_cs = 1, .c_bs = b_bs,
            .c_rs = b_rs, .c_cs = b_cs};
  if (shared) {
    g.batches = 1;
    g.kb = nb;
    g.a_kbs = a_bs;
    g.b_kbs = y_bs;
    g.a_bs = g.b_bs = g.c_bs = 0;
  }
  product(r, g);
  return GK_SUCCESS;
}
// Split by column of Y: a column of Y and dY in each of their rows, of
// op(B) and dB in each of theirs (a row of K elements of B stored
// transposed); A and dA whole. Each piece's dB sums run over every row
// (and batch); dA's over the columns carry from piece to piece in order,
// in f32 (a 16-bit dA rounded once): the unsplit run's bits.
static int64_t split_matmul(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  const gk_op_desc *d = &plan->desc;
  int ta = d->matmul.trans_a, tb = d->matmul.trans_b;
  int64_t M = d->shape[d->rank - 2 + ta], K = d->shape[d->rank - 1 - ta];
  int64_t nb = prod(d->shape, 0, d->rank - 2), b_batches = d->matmul.shared_b ? 1 : nb;
  per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = 1;
  outer[GK_ARG_Y] = outer[GK_ARG_DY] = nb * M;
  per_unit[GK_ARG_B] = per_unit[GK_ARG_DB] = tb ? K : 1;
  outer[GK_ARG_B] = outer[GK_ARG_DB] = tb ? b_batches : b_batches * K;
  return d->matmul.n;
}

// ---------------------------------------------------------------- cross-entropy
static uint32_t index_words(const gk_op_desc *d) { return d->index_dtype == GK_I64 ? 2 : 1; }

static const char *decline_cross_entropy(const gk_plan *plan) {
  int64_t ignore = plan->desc.ce.ignore_index;
  return ignore < INT32_MIN || ignore > INT32_MAX ? "ce.ignore_index is outside the i32 range the shader compares in"
                                                  : NULL;
}

// A piece of a split run (split_cross_entropy) covers rows first_unit ...
// of all_units: per_row and grad on its rows, total (whole) on every row.
static gk_status plan_cross_entropy(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t V = d->shape[d->rank - 1], rows = r->units, all_rows = r->all_units;
  bool fwd = d->direction == GK_FORWARD, grad = !fwd || d->ce.fused_grad;
  static const gk_arg_kind per_row[] = {WG_ARG_SCRATCH, GK_ARG_LOGITS, GK_ARG_TARGET},
                           total[] = {WG_ARG_SCRATCH, GK_ARG_LOSS},
                           gradient[] = {WG_ARG_SCRATCH, GK_ARG_LOGITS, GK_ARG_TARGET, GK_ARG_DLOSS, GK_ARG_DLOGITS};
  wg_bound_scratch(r, 3 * (uint64_t)all_rows + 1);
  uint32_t p[WG_PARAM_WORDS] = {r->slot[GK_ARG_LOGITS], r->slot[GK_ARG_TARGET], r->slot[GK_ARG_LOSS],
                                r->slot[GK_ARG_DLOGITS], r->slot[GK_ARG_DLOSS], 0,
                                (uint32_t)rows, (uint32_t)V, index_words(d), (uint32_t)(int32_t)d->ce.ignore_index,
                                d->ce.reduction == GK_REDUCTION_MEAN, wg_f32(d->ce.label_smoothing),
                                wg_f32(d->ce.grad_scale), fwd && d->ce.fused_grad, fwd, 0x7fc00000u,
                                (uint32_t)all_rows, (uint32_t)r->first_unit};
  memcpy(wg_pass_bound(r, 0, (uint64_t)rows, 3, per_row), p, sizeof p);
  memcpy(wg_pass_bound(r, 1, 1, 2, total), p, sizeof p);
  r->pass[r->npass - 1].whole = true;
  if (grad) memcpy(wg_pass_bound(r, 2, groups_for(rows * V), 5, gradient), p, sizeof p);
  return GK_SUCCESS;
}
// Split by rows: logits and dlogits a row a unit, targets one index, loss
// and dloss whole. The per-row losses of every piece stay in the run's
// scratch for total, one fixed-order sum over all rows: the split run's
// bits are the unsplit run's.
static int64_t split_cross_entropy(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  per_unit[GK_ARG_LOGITS] = per_unit[GK_ARG_DLOGITS] = d->shape[d->rank - 1];
  per_unit[GK_ARG_TARGET] = 1;
  return prod(d->shape, 0, d->rank - 1);
}

// ---------------------------------------------------------------- embedding
// A piece of a split run (split_embedding) covers rows first_unit .. of
// the weight (dweight): r->units of them.
static gk_status plan_embedding(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t P = prod(d->shape, 0, d->rank), V = r->units, D = d->embedding.dim;
  bool fwd = d->direction == GK_FORWARD;
  static const gk_arg_kind forward[] = {GK_ARG_INDEX, GK_ARG_WEIGHT, GK_ARG_Y},
                           backward[] = {GK_ARG_INDEX, GK_ARG_DY, GK_ARG_DWEIGHT};
  uint32_t *p = wg_pass_bound(r, 0, groups_for(fwd ? P * D : V * D), 3, fwd ? forward : backward);
  const gk_arg_kind kinds[] = {GK_ARG_WEIGHT, GK_ARG_INDEX, GK_ARG_Y, GK_ARG_DY, GK_ARG_DWEIGHT};
  for (int i = 0; i < 5; i++) p[i] = r->slot[kinds[i]];
  p[5] = (uint32_t)P;
  p[6] = (uint32_t)V;
  p[7] = (uint32_t)D;
  p[8] = index_words(d);
  p[9] = (uint32_t)(int32_t)d->embedding.padding_idx;
  p[10] = (uint32_t)d->accumulate;
  p[11] = (uint32_t)r->first_unit;
  // A forward piece writes only the rows of y whose index is among its weight rows.
  r->partial_outputs = fwd && V < r->all_units;
  return GK_SUCCESS;
}
// Split by the rows of weight (forward) or dweight (backward), D elements
// each; the indices, y and dy whole: each piece copies, or sums in full,
// the rows it covers, so a split run's bits are the unsplit run's.
static int64_t split_embedding(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  per_unit[d->direction == GK_FORWARD ? GK_ARG_WEIGHT : GK_ARG_DWEIGHT] = d->embedding.dim;
  return d->embedding.num_embeddings;
}

// ---------------------------------------------------------------- RoPE
static int64_t rope_T(const gk_op_desc *d) { return d->shape[d->rope.layout == GK_ROPE_BHTD ? 2 : 1]; }

// cos, then sin, of (offset + t) theta^(-2i/Dh) for t < T, i < Dh/2, in f64.
static uint32_t rope_constants(const gk_plan *plan, float **data) {
  const gk_op_desc *d = &plan->desc;
  int64_t T = rope_T(d), half = d->shape[3] / 2, n = T * half;
  if (n == 0) return 0;
  float *t = malloc((size_t)(2 * n) * sizeof *t);
  *data = t;
  if (!t) return (uint32_t)(2 * n);
  for (int64_t pos = 0; pos < T; pos++)
    for (int64_t i = 0; i < half; i++) {
      double angle = (double)(d->rope.offset + pos) * pow(d->rope.theta, -2.0 * (double)i / (double)d->shape[3]);
      t[pos * half + i] = (float)cos(angle);
      t[n + pos * half + i] = (float)sin(angle);
    }
  return (uint32_t)(2 * n);
}

// A piece of a split run (split_rope) covers rows first_unit .. + units.
static gk_status plan_rope(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  bool fwd = d->direction == GK_FORWARD, bhtd = d->rope.layout == GK_ROPE_BHTD;
  int64_t pairs = r->units * (d->shape[3] / 2);
  const gk_arg_kind bind[] = {fwd ? GK_ARG_X : GK_ARG_DY, fwd ? GK_ARG_Y : GK_ARG_DX, WG_ARG_CONSTANTS};
  uint32_t *p = wg_pass_bound(r, 0, groups_for(pairs), 3, bind);
  p[0] = r->slot[fwd ? GK_ARG_X : GK_ARG_DY];
  p[1] = r->slot[fwd ? GK_ARG_Y : GK_ARG_DX];
  p[2] = r->slot[WG_ARG_CONSTANTS];
  p[3] = (uint32_t)pairs;
  p[4] = (uint32_t)rope_T(d);
  p[5] = (uint32_t)d->shape[bhtd ? 1 : 2];
  p[6] = (uint32_t)d->shape[3];
  p[7] = bhtd;
  p[8] = d->rope.pairing == GK_ROPE_INTERLEAVED;
  p[9] = !fwd;
  p[10] = (uint32_t)r->first_unit;
  return GK_SUCCESS;
}
// Split by row of Dh elements (x, y, dy, dx); the table whole.
static int64_t split_rope(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  per_unit[GK_ARG_X] = per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = per_unit[GK_ARG_DX] = d->shape[3];
  return prod(d->shape, 0, 3);
}

// ---------------------------------------------------------------- attention
static const char *decline_attention(const gk_plan *plan) {
  return plan->desc.shape[3] > 128 ? "head dim over 128 (the shader keeps rows in private arrays of 128)" : NULL;
}

// The query heads that share a kv head.
static int64_t attention_group(const gk_op_desc *d) {
  return d->attn.kv_heads ? d->shape[1] / d->attn.kv_heads : 1;
}

// Batch and kv heads as one dim of r->units (b, kv head) pairs, each with
// its group of query heads (B 1, Hkv r->units, H r->units x group: the
// same rows as B x Hkv): the whole run's, or a piece's of a split run
// (split_attention).
static gk_status plan_attention(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t B = 1, Hkv = r->units, H = Hkv * attention_group(d), T = d->shape[2], Dh = d->shape[3];
  double scale = d->attn.scale != 0 ? d->attn.scale : 1 / sqrt((double)Dh);
  uint32_t p[WG_PARAM_WORDS] = {0};
  const gk_arg_kind kinds[] = {GK_ARG_Q, GK_ARG_K, GK_ARG_V, GK_ARG_Y, GK_ARG_LSE, GK_ARG_DY, GK_ARG_DQ, GK_ARG_DK,
                               GK_ARG_DV};
  for (int i = 0; i < 9; i++) p[i] = r->slot[kinds[i]];
  const int64_t dims[] = {B, H, Hkv, T, Dh, d->attn.causal};
  for (int i = 0; i < 6; i++) p[10 + i] = (uint32_t)dims[i];
  p[16] = wg_f32(scale);
  if (d->direction == GK_FORWARD) {
    memcpy(wg_pass(r, 0, groups_for(B * H * T)), p, sizeof p);
    return GK_SUCCESS;
  }
  p[9] = wg_scratch(r, (uint64_t)(B * H * T));
  memcpy(wg_pass(r, 0, groups_for(B * H * T)), p, sizeof p);
  memcpy(wg_pass(r, 1, groups_for(B * H * T)), p, sizeof p);
  memcpy(wg_pass(r, 2, groups_for(B * Hkv * T)), p, sizeof p);
  return GK_SUCCESS;
}
// Split by (batch, kv head) pair (a unit: its group of query heads): q, y,
// dy, dq group x T x Dh elements, lse and the backward's scratch group x
// T, k, v, dk, dv T x Dh. Every sum (a query row's over the keys, a key
// row's over its heads and queries) runs within its unit: the unsplit
// run's bits.
static int64_t split_attention(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  (void)outer;
  const gk_op_desc *d = &plan->desc;
  int64_t group = attention_group(d), T = d->shape[2], Dh = d->shape[3];
  per_unit[GK_ARG_Q] = per_unit[GK_ARG_Y] = per_unit[GK_ARG_DY] = per_unit[GK_ARG_DQ] = group * T * Dh;
  per_unit[GK_ARG_K] = per_unit[GK_ARG_V] = per_unit[GK_ARG_DK] = per_unit[GK_ARG_DV] = T * Dh;
  per_unit[GK_ARG_LSE] = group * T;
  per_unit[WG_ARG_SCRATCH] = d->direction == GK_BACKWARD ? group * T : 0;
  return d->shape[0] * (d->shape[1] / group);
}

// ---------------------------------------------------------------- conv1d
// A piece of a split run (split_conv1d) covers the channels first_unit ..
// + units (D of them here).
static gk_status plan_conv1d(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int cl = d->conv.channel_last;
  int64_t B = d->shape[0], D = r->units, L = d->shape[cl ? 1 : 2], W = d->conv.width;
  uint32_t p[WG_PARAM_WORDS] = {0};
  const gk_arg_kind kinds[] = {GK_ARG_X,  GK_ARG_WEIGHT, GK_ARG_BIAS,  GK_ARG_INITIAL_STATE, GK_ARG_Y,
                               GK_ARG_FINAL_STATE, GK_ARG_DY, GK_ARG_DFINAL_STATE, GK_ARG_DX, GK_ARG_DWEIGHT,
                               GK_ARG_DBIAS, GK_ARG_DINITIAL_STATE};
  for (int i = 0; i < 12; i++) p[i] = r->slot[kinds[i]];
  const int64_t words[] = {B, D, L, W, cl, r->t[GK_ARG_BIAS] != NULL, d->conv.silu,
                           r->t[GK_ARG_INITIAL_STATE] != NULL, r->t[GK_ARG_DFINAL_STATE] != NULL,
                           r->t[GK_ARG_DBIAS] != NULL, r->t[GK_ARG_DINITIAL_STATE] != NULL, d->accumulate};
  for (int i = 0; i < 12; i++) p[13 + i] = (uint32_t)words[i];
  if (d->direction == GK_FORWARD) {
    memcpy(wg_pass(r, 0, groups_for(B * D * L)), p, sizeof p);
    if (r->t[GK_ARG_FINAL_STATE]) memcpy(wg_pass(r, 1, groups_for(B * D * (W - 1))), p, sizeof p);
    return GK_SUCCESS;
  }
  p[12] = wg_scratch(r, (uint64_t)(B * D * L));
  memcpy(wg_pass(r, 0, groups_for(B * D * L)), p, sizeof p);
  memcpy(wg_pass(r, 1, groups_for(B * D * (L + W - 1))), p, sizeof p);
  memcpy(wg_pass(r, 2, (uint64_t)(D * W)), p, sizeof p);
  return GK_SUCCESS;
}
// Split by channel (channels are independent): x, y, dy, dx L elements in
// each of their B rows (channel-last: one in each of their B x L rows),
// weight and dweight W elements, bias and dbias one, the states W - 1 in
// each of their B rows; the backward's scratch B x L words. Every sum of a
// channel runs within its piece: the unsplit run's bits.
static int64_t split_conv1d(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  const gk_op_desc *d = &plan->desc;
  int cl = d->conv.channel_last;
  int64_t B = d->shape[0], L = d->shape[cl ? 1 : 2], W = d->conv.width;
  const gk_arg_kind like_x[] = {GK_ARG_X, GK_ARG_Y, GK_ARG_DY, GK_ARG_DX},
                    states[] = {GK_ARG_INITIAL_STATE, GK_ARG_FINAL_STATE, GK_ARG_DINITIAL_STATE, GK_ARG_DFINAL_STATE};
  for (int i = 0; i < 4; i++) {
    per_unit[like_x[i]] = cl ? 1 : L;
    outer[like_x[i]] = cl ? B * L : B;
    per_unit[states[i]] = W - 1;
    outer[states[i]] = B;
  }
  per_unit[GK_ARG_WEIGHT] = per_unit[GK_ARG_DWEIGHT] = W;
  per_unit[GK_ARG_BIAS] = per_unit[GK_ARG_DBIAS] = 1;
  per_unit[WG_ARG_SCRATCH] = d->direction == GK_BACKWARD ? B * L : 0;
  return d->shape[cl ? 2 : 1];
}

// ---------------------------------------------------------------- selective scan
static const char *decline_scan(const gk_plan *plan) {
  return plan->desc.scan.d_state > 64 ? "d_state over 64 (a lane per state, 64 to a workgroup)" : NULL;
}

// Steps per invocation of the parallel scan (scan.wgsl's SEG): a block is
// SCAN_SEG x 64 / S steps (S lanes per channel, the power of two >= N): 32
// at N = 16.
enum { SCAN_SEG = 8 };
static int64_t scan_lanes(int64_t N) {
  int64_t lanes = 1;
  while (lanes < N) lanes <<= 1;
  return lanes;
}

// A split run (split_scan) splits the channels: a piece covers the units
// first_unit .. + units, each of scan_unit_channels channels (a group's
// where B or C is grouped in more than one group, else one). B and C per
// batch (scan_bc_whole) are bound whole by every piece.
static int64_t scan_unit_channels(const gk_op_desc *d) {
  bool grouped = d->scan.b_layout == GK_SCAN_GROUPED || d->scan.c_layout == GK_SCAN_GROUPED;
  return grouped && d->scan.groups > 1 ? d->shape[1] / d->scan.groups : 1;
}
static bool scan_bc_whole(const gk_op_desc *d, gk_scan_layout layout) {
  return layout == GK_SCAN_BATCH || (layout == GK_SCAN_GROUPED && d->scan.groups == 1);
}
// The groups of B or C (layout) in a run of r->units units: 1 but grouped in more than one group.
static int64_t scan_groups(const gk_op_desc *d, gk_scan_layout layout, const wg_run *r) {
  return layout == GK_SCAN_GROUPED && d->scan.groups > 1 ? r->units : 1;
}

// The parameter words both kernels share (scan.wgsl's Params up to red_groups).
static void scan_params(const gk_plan *plan, const wg_run *r, uint32_t *p) {
  const gk_op_desc *d = &plan->desc;
  int64_t nb = d->shape[0], nd = r->units * scan_unit_channels(d), L = d->shape[2], N = d->scan.d_state,
          T = d->scan.chunk_size;
  bool b_var = d->scan.b_layout != GK_SCAN_SHARED, c_var = d->scan.c_layout != GK_SCAN_SHARED;
  const gk_arg_kind kinds[] = {GK_ARG_U, GK_ARG_DELTA, GK_ARG_A, GK_ARG_B, GK_ARG_C, GK_ARG_D, GK_ARG_Z,
                               GK_ARG_DELTA_BIAS, GK_ARG_INITIAL_STATE, GK_ARG_Y, GK_ARG_CHUNK_STATES,
                               GK_ARG_FINAL_STATE, GK_ARG_DY, GK_ARG_DFINAL_STATE, GK_ARG_DU, GK_ARG_DDELTA,
                               GK_ARG_DA, GK_ARG_DB, GK_ARG_DC, GK_ARG_DD, GK_ARG_DZ, GK_ARG_DDELTA_BIAS,
                               GK_ARG_DINITIAL_STATE};
  for (int i = 0; i < 23; i++) p[i] = r->slot[kinds[i]];
  const int64_t words[] = {nb, nd, L, N, T, gk_ceil_div(L, T), b_var, scan_groups(d, d->scan.b_layout, r), c_var,
                           scan_groups(d, d->scan.c_layout, r), d->scan.has_D, d->scan.has_z,
                           d->scan.has_delta_bias, d->scan.delta_softplus, r->t[GK_ARG_INITIAL_STATE] != NULL,
                           r->t[GK_ARG_FINAL_STATE] != NULL, r->t[GK_ARG_DFINAL_STATE] != NULL,
                           r->t[GK_ARG_DINITIAL_STATE] != NULL, d->accumulate};
  for (int i = 0; i < 19; i++) p[29 + i] = (uint32_t)words[i];
}

// The backward's reductions: parameter sums over the batch (and `chunks`
// partials per channel), then per-batch dB and dC over their groups. In a
// piece of a split run after the first, a dB or dC bound whole (its sum
// over every channel) goes on from the sums the pieces before it left
// there (red_carry; kept in the arena in f32 from piece to piece,
// wg_run.kept, a 16-bit one rounded once): the unsplit run's bits.
static void scan_reductions(const gk_plan *plan, wg_run *r, uint32_t *p, int entry, int64_t chunks) {
  const gk_op_desc *d = &plan->desc;
  int64_t nb = d->shape[0], nd = p[30], L = d->shape[2], N = d->scan.d_state;
  p[53] = (uint32_t)chunks;
  memcpy(wg_pass(r, entry, groups_for(nd * N)), p, WG_PARAM_WORDS * sizeof *p);
  for (int bc = 0; bc < 2; bc++) {
    if (!p[bc ? 37 : 35]) continue;  // c_var, b_var
    uint32_t *q = wg_pass(r, entry + 1, groups_for(nb * p[bc ? 38 : 36] * N * L));
    memcpy(q, p, WG_PARAM_WORDS * sizeof *p);
    q[48] = p[bc ? 28 : 27];
    q[49] = r->slot[bc ? GK_ARG_DC : GK_ARG_DB];
    q[50] = p[bc ? 38 : 36];
    q[60] = r->piece > 0 && scan_bc_whole(d, bc ? d->scan.c_layout : d->scan.b_layout);
  }
}

// Sequential in time: workgroups of 64 / S channels, S lanes each.
static gk_status plan_scan(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  uint32_t p[WG_PARAM_WORDS] = {0};
  scan_params(plan, r, p);
  int64_t nb = p[29], nd = p[30], L = p[31], N = p[32], T = p[33];
  uint64_t groups = (uint64_t)gk_ceil_div(nb * nd, 64 / scan_lanes(N));
  if (d->direction == GK_FORWARD) {
    memcpy(wg_pass(r, 0, groups), p, sizeof p);
    return GK_SUCCESS;
  }
  // Scratch: each channel's chunk states, then the per-(batch, channel) sums.
  bool b_var = p[35], c_var = p[37];
  p[23] = wg_scratch(r, (uint64_t)(nb * nd * (T + 1) * N));
  p[24] = wg_scratch(r, (uint64_t)(nb * nd * N));
  p[25] = wg_scratch(r, (uint64_t)(nb * nd));
  p[26] = wg_scratch(r, (uint64_t)(nb * nd));
  p[27] = wg_scratch(r, (uint64_t)(nb * nd * N * (b_var ? L : 1)));
  p[28] = wg_scratch(r, (uint64_t)(nb * nd * N * (c_var ? L : 1)));
  memcpy(wg_pass(r, 0, groups), p, sizeof p);
  scan_reductions(plan, r, p, 1, 1);
  return GK_SUCCESS;
}

// Which scan kernel a plan runs: 0 by shape, 1 sequential, 2 parallel, 3
// parallel with the most blocks a chunk (gk_webgpu_test_scan_path).
static int scan_path_knob;
void gk_webgpu_test_scan_path(int path) { scan_path_knob = path; }

// Parallel over time: a workgroup per chunk of R blocks of SCAN_SEG P
// steps of a channel (P = 64 / S), walked block after block. R makes about
// SCAN_WORKGROUPS workgroups (at least one block each, R S <= 512 for
// block_h): 4096 x 64 invocations fill a large GPU; on llvmpipe 512 and
// 4096 timed the same within the noise. totals runs past one chunk
// (backward: or one block a chunk), carry past one chunk.
// R and the chunks a channel (npc) are the whole run's in every piece of a
// split run, so that its chunks, and bits, are the unsplit run's.
enum { SCAN_WORKGROUPS = 4096 };
static void scan_chunking(const gk_op_desc *d, int64_t *R_out, int64_t *npc_out) {
  int64_t nb = d->shape[0], nd = d->shape[1], L = d->shape[2], S = scan_lanes(d->scan.d_state);
  int64_t block = SCAN_SEG * (64 / S), blocks = gk_ceil_div(L, block);
  int64_t R = scan_path_knob == 3 ? blocks : nb * nd * blocks / SCAN_WORKGROUPS;
  if (R > 512 / S) R = 512 / S;
  if (R > blocks) R = blocks;
  if (R < 1) R = 1;
  *npc_out = gk_ceil_div(blocks, R);
  *R_out = gk_ceil_div(blocks, *npc_out);  // the fewest blocks a chunk for npc chunks
}
static gk_status plan_scan_parallel(const gk_plan *plan, wg_run *r) {
  const gk_op_desc *d = &plan->desc;
  int64_t R, npc;
  scan_chunking(d, &R, &npc);
  bool fwd = d->direction == GK_FORWARD;
  uint32_t p[WG_PARAM_WORDS] = {0};
  scan_params(plan, r, p);
  int64_t nb = p[29], nd = p[30], L = p[31], N = p[32], block = SCAN_SEG * (64 / scan_lanes(N));
  p[51] = (uint32_t)(R * block);
  p[52] = (uint32_t)npc;
  p[56] = !fwd;
  p[58] = (uint32_t)R;
  uint64_t chunks = (uint64_t)(nb * nd * npc);
  if (npc > 1 || (R > 1 && !fwd)) {
    p[54] = wg_scratch(r, chunks * (uint64_t)N * 4);
    p[57] = wg_scratch(r, chunks * (uint64_t)R * 64 * 4);
    if (!fwd) p[59] = wg_scratch(r, chunks * (uint64_t)(R * N * 4));
    memcpy(wg_pass(r, 0, chunks), p, sizeof p);
  }
  if (npc > 1) {
    p[55] = wg_scratch(r, chunks * (uint64_t)N * 2);
    memcpy(wg_pass(r, 1, groups_for(nb * nd * N)), p, sizeof p);
  }
  if (fwd) {
    memcpy(wg_pass(r, 2, chunks), p, sizeof p);
    return GK_SUCCESS;
  }
  bool b_var = p[35], c_var = p[37];
  p[24] = wg_scratch(r, chunks * (uint64_t)N);
  p[25] = wg_scratch(r, chunks);
  p[26] = wg_scratch(r, chunks);
  p[27] = wg_scratch(r, (uint64_t)(nb * nd * N * (b_var ? L : npc)));
  p[28] = wg_scratch(r, (uint64_t)(nb * nd * N * (c_var ? L : npc)));
  memcpy(wg_pass(r, 2, chunks), p, sizeof p);
  scan_reductions(plan, r, p, 3, npc);
  return GK_SUCCESS;
}

// The parallel scan from SCAN_PARALLEL_MIN_L steps on (bench/webgpu's
// `ops scan`, sequential time over parallel, Mamba's options, N = 16):
// on Dawn's Vulkan backend over lavapipe 1.02x to 2.2x at every shape
// from 16 to 4096 steps (1.4x to 1.9x at Mamba's B 32 x D 128 x 64 steps);
// on Dawn's OpenGL ES backend over llvmpipe 0.5x to 1.6x (1.3x, 1.6x at
// Mamba's shape; 0.8x, 0.9x at 16 steps; the backward of 64 channels at
// 4096 steps 0.5x: the parallel kernel walks each step two or three
// times). Under 64 steps the sequential kernel keeps its one pass. Past
// about 2000 steps the sequential kernel's one invocation per channel gets
// wrong results on llvmpipe (see the README).
enum { SCAN_PARALLEL_MIN_L = 64 };
static bool scan_is_parallel(const gk_plan *plan) {
  int64_t L = plan->desc.shape[2];
  if (L == 0 || scan_path_knob == 1) return false;
  return scan_path_knob >= 2 || L >= SCAN_PARALLEL_MIN_L;
}

// The arena scratch words a channel takes in plan_scan or plan_scan_parallel.
static int64_t scan_scratch_per_channel(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  int64_t nb = d->shape[0], L = d->shape[2], N = d->scan.d_state, T = d->scan.chunk_size;
  bool fwd = d->direction == GK_FORWARD, b_var = d->scan.b_layout != GK_SCAN_SHARED,
       c_var = d->scan.c_layout != GK_SCAN_SHARED;
  if (!scan_is_parallel(plan))
    return fwd ? 0 : nb * ((T + 1) * N + N + 2 + N * (b_var ? L : 1) + N * (c_var ? L : 1));
  int64_t R, npc;
  scan_chunking(d, &R, &npc);
  int64_t chunks = nb * npc, words = 0;
  if (npc > 1 || (R > 1 && !fwd)) words += chunks * (N * 4 + R * 64 * 4 + (fwd ? 0 : R * N * 4));
  if (npc > 1) words += chunks * N * 2;
  if (!fwd) words += chunks * (N + 2) + nb * N * ((b_var ? L : npc) + (c_var ? L : npc));
  return words;
}

// Split by channel, or by group of channels (scan_unit_channels, c of
// them): u, delta, z, y and their gradients c x L elements in each of their
// Bt rows, the states and chunk states c x N (x chunks) in each of theirs,
// A, D, delta_bias and their gradients c channels' worth; B and C (and dB,
// dC) shared c x N, grouped N x L in each of their Bt rows, per batch
// whole (their gradients' sums over every channel carried from piece to
// piece, scan_reductions). Every other sum is a channel's, within its
// piece, and the parallel kernel's chunks are the whole run's: the unsplit
// run's bits.
static int64_t split_scan(const gk_plan *plan, int64_t *per_unit, int64_t *outer) {
  const gk_op_desc *d = &plan->desc;
  int64_t c = scan_unit_channels(d), nb = d->shape[0], L = d->shape[2], N = d->scan.d_state;
  const gk_arg_kind by_step[] = {GK_ARG_U, GK_ARG_DELTA, GK_ARG_Z, GK_ARG_Y, GK_ARG_DY, GK_ARG_DU, GK_ARG_DDELTA,
                                 GK_ARG_DZ},
                    by_state[] = {GK_ARG_INITIAL_STATE, GK_ARG_FINAL_STATE, GK_ARG_DFINAL_STATE,
                                  GK_ARG_DINITIAL_STATE},
                    by_channel[] = {GK_ARG_D, GK_ARG_DELTA_BIAS, GK_ARG_DD, GK_ARG_DDELTA_BIAS};
  for (int i = 0; i < 8; i++) {
    per_unit[by_step[i]] = c * L;
    outer[by_step[i]] = nb;
  }
  for (int i = 0; i < 4; i++) {
    per_unit[by_state[i]] = c * N;
    outer[by_state[i]] = nb;
    per_unit[by_channel[i]] = c;
  }
  per_unit[GK_ARG_CHUNK_STATES] = c * gk_ceil_div(L, d->scan.chunk_size) * N;
  outer[GK_ARG_CHUNK_STATES] = nb;
  per_unit[GK_ARG_A] = per_unit[GK_ARG_DA] = c * N;
  for (int bc = 0; bc < 2; bc++) {
    gk_scan_layout layout = bc ? d->scan.c_layout : d->scan.b_layout;
    gk_arg_kind t = bc ? GK_ARG_C : GK_ARG_B, grad = bc ? GK_ARG_DC : GK_ARG_DB;
    per_unit[t] = per_unit[grad] = layout == GK_SCAN_SHARED ? c * N : scan_bc_whole(d, layout) ? 0 : N * L;
    outer[t] = outer[grad] = layout == GK_SCAN_GROUPED ? nb : 1;
  }
  per_unit[WG_ARG_SCRATCH] = c * scan_scratch_per_channel(plan);
  return d->shape[1] / c;
}

// ---------------------------------------------------------------- the table
static const wg_family activation = {.name = "activation", .source = gk_wgsl_activation, .forward = {"forward"},
                                     .backward = {"backward"}, .plan = plan_activation,
                                     .overrides = activation_overrides, .bound = true,
                                     .split = split_activation, .packed = packed_activation};
static const wg_family gated = {.name = "gated", .source = gk_wgsl_gated, .forward = {"forward", "forward_split"},
                                .backward = {"backward", "backward_split"}, .plan = plan_gated,
                                .overrides = gated_overrides, .bound = true, .split = split_gated,
                                .packed = packed_gated};
// add and mul: one shader; their backward passes bind different tensors.
static const wg_family add = {.name = "add", .source = gk_wgsl_binary, .forward = {"forward"},
                              .backward = {"reduce_grad"}, .plan = plan_binary, .overrides = binary_overrides,
                              .bound = true, .split = split_binary, .packed = packed_binary};
static const wg_family mul = {.name = "mul", .source = gk_wgsl_binary, .forward = {"forward"},
                              .backward = {"reduce_grad_mul"}, .plan = plan_binary, .overrides = binary_overrides,
                              .bound = true, .split = split_binary, .packed = packed_binary};
static const wg_family norm = {.name = "norm", .source = gk_wgsl_norm, .subgroup_source = gk_wgsl_norm_subgroups,
                               .forward = {"forward"},
                               .backward = {"backward_dx", "backward_params", "param_partials", "combine_params"},
                               .plan = plan_norm,
                               .overrides = norm_overrides, .bound = true, .split = split_norm};
static const wg_family linear = {.name = "linear", .source = gk_wgsl_matmul, .forward = {"product", "product_vec4"},
                                 .backward = {"product", "product_vec4", "column_sum"}, .plan = plan_linear,
                                 .split = split_linear};
static const wg_family matmul = {.name = "matmul", .source = gk_wgsl_matmul, .forward = {"product", "product_vec4"},
                                 .backward = {"product", "product_vec4"}, .plan = plan_matmul,
                                 .split = split_matmul};
static const wg_family cross_entropy = {.name = "cross_entropy", .source = gk_wgsl_cross_entropy,
                                        .subgroup_source = gk_wgsl_cross_entropy_subgroups,
                                        .forward = {"per_row", "total", "grad"},
                                        .backward = {"per_row", "total", "grad"},
                                        .decline = decline_cross_entropy, .plan = plan_cross_entropy, .bound = true,
                                        .split = split_cross_entropy};
static const wg_family embedding = {.name = "embedding", .source = gk_wgsl_embedding, .forward = {"forward"},
                                    .backward = {"backward"}, .plan = plan_embedding, .bound = true,
                                    .split = split_embedding};
static const wg_family rope = {.name = "rope", .source = gk_wgsl_rope, .forward = {"rotate"}, .backward = {"rotate"},
                               .plan = plan_rope, .constants = rope_constants, .bound = true,
                               .split = split_rope};
static const wg_family attention = {.name = "attention", .source = gk_wgsl_attention, .forward = {"forward"},
                                    .backward = {"delta", "dq", "dkv"}, .decline = decline_attention,
                                    .plan = plan_attention, .split = split_attention};
static const wg_family conv1d = {.name = "conv1d", .source = gk_wgsl_conv1d, .forward = {"forward", "final_state"},
                                 .backward = {"grad_pre", "dx", "dparams"}, .plan = plan_conv1d,
                                 .split = split_conv1d};
static const wg_family scan = {.name = "scan", .source = gk_wgsl_scan, .forward = {"forward"},
                               .backward = {"backward", "reduce_params", "reduce_bc"}, .decline = decline_scan,
                               .plan = plan_scan, .split = split_scan};
static const wg_family scan_parallel = {.name = "scan_parallel", .source = gk_wgsl_scan,
                                        .forward = {"totals", "carry", "forward_chunks"},
                                        .backward = {"totals", "carry", "backward_chunks", "reduce_params",
                                                     "reduce_bc"},
                                        .decline = decline_scan, .plan = plan_scan_parallel, .split = split_scan};
static const wg_family softmax = {.name = "softmax", .source = gk_wgsl_softmax,
                                  .subgroup_source = gk_wgsl_softmax_subgroups, .forward = {"forward"},
                                  .backward = {"backward", "backward_vec4"}, .plan = plan_softmax,
                                  .overrides = softmax_overrides, .bound = true, .split = split_softmax};

const wg_family *wg_family_of(const gk_plan *plan) {
  switch (plan->desc.op) {
  case GK_OP_RELU: case GK_OP_GELU: case GK_OP_SILU: case GK_OP_SIGMOID: case GK_OP_SOFTPLUS: return &activation;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU: return &gated;
  case GK_OP_ADD: return &add;
  case GK_OP_MUL: return &mul;
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: return &norm;
  case GK_OP_SOFTMAX: case GK_OP_LOG_SOFTMAX: return &softmax;
  case GK_OP_LINEAR: return &linear;
  case GK_OP_MATMUL: return &matmul;
  case GK_OP_CROSS_ENTROPY: return &cross_entropy;
  case GK_OP_EMBEDDING: return &embedding;
  case GK_OP_ROPE: return &rope;
  case GK_OP_ATTENTION: return &attention;
  case GK_OP_CONV1D: return &conv1d;
  case GK_OP_SELECTIVE_SCAN: return scan_is_parallel(plan) ? &scan_parallel : &scan;
  default: return NULL;
  }
}
