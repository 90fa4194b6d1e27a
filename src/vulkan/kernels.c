// The Vulkan backend's kernels: one per op family and direction, all run
// the same way (vk_run_kernel): every argument bound as a contiguous f32/i32
// tensor (vulkan_backend.h), the family's `record` dispatching its shaders
// (src/vulkan/shaders/<family>_<fwd|bwd>.comp and their helper passes) with
// sizes and options in push constants, then the outputs that went through
// temporaries scattered back. The table at the end lists, per family and
// direction, the record function and the shaders its plans make pipelines
// for. f32 math; f16/bf16 stored (gathered to f32, rounded to nearest even
// on the way back); f64 is declined. Every reduction is in a fixed order
// (workgroup trees, sequential passes over rows): deterministic. Before the
// table, the optimizers' hooks (AdamW, clipping's sum of squares and
// scaling), which bind their f32 tensors the same way.
#include "vulkan_backend.h"

#include "../core/act_math.h"
#include "../ops/conv1d.h"
#include "../ops/scan.h"
#include "../ops/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef gk_status (*vk_record_fn)(vk_run *r, const gk_op_desc *d, const gk_kernel_args a);

#define ARG(k) (r->arg[k])
#define DISPATCH(shader, push, gx, gy, gz, ...)                                                           \
  vk_dispatch(shader, (const vk_binding[]){__VA_ARGS__}, (int)(sizeof((const vk_binding[]){__VA_ARGS__}) / \
                                                               sizeof(vk_binding)),                       \
              &(push), sizeof(push), gx, gy, gz)
#define TRY(call)                          \
  do {                                     \
    gk_status s_ = (call);                 \
    if (s_ != GK_SUCCESS) return s_;       \
  } while (0)

static int64_t prod(const int64_t *shape, int from, int to) {
  int64_t n = 1;
  for (int k = from; k < to; k++) n *= shape[k];
  return n;
}
static int64_t numel_desc(const gk_op_desc *d) { return prod(d->shape, 0, d->rank); }

// ---------------------------------------------------------------- activations

// from_output: the backward's only (activation_fwd.comp declares the fields before it).
typedef struct { uint32_t n, act; float beta, threshold; uint32_t half, from_output; } act_push;

static act_push act_of(const vk_run *r, const gk_op_desc *d, int64_t n) {
  gk_act_params ap = gk_act_of(d);
  return (act_push){(uint32_t)n, (uint32_t)ap.act, (float)ap.beta, (float)ap.threshold, r->half,
                    (uint32_t)d->act.from_output};
}

static gk_status activation_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  act_push p = act_of(r, d, numel_desc(d));
  return DISPATCH("activation_fwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_X), ARG(GK_ARG_Y));
}
// (dy, x) -> dx, or (dy, y) -> dx with act.from_output.
static gk_status activation_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  act_push p = act_of(r, d, numel_desc(d));
  return DISPATCH("activation_bwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_DY), ARG(gk_activation_saved(d)),
                  ARG(GK_ARG_DX));
}

// ---------------------------------------------------------------- gated

typedef struct { uint32_t n, inner, stride, b_offset, act; float beta, threshold; uint32_t half; } gated_push;

// Split form: x is (outer, 2, inner) around the split dim; two-tensor form:
// one block of n elements in x and gate alike.
static gated_push gated_of(const gk_op_desc *d) {
  gk_act_params ap = gk_act_of(d);
  gated_push p = {.act = (uint32_t)ap.act, .beta = (float)ap.beta, .threshold = (float)ap.threshold};
  if (d->gated.form == GK_GATED_SPLIT) {
    int dim = d->gated.dim;
    int64_t inner = prod(d->shape, dim + 1, d->rank) * (d->shape[dim] / 2);
    p.n = (uint32_t)(prod(d->shape, 0, dim) * inner);
    p.inner = (uint32_t)(inner ? inner : 1);
    p.stride = (uint32_t)(2 * inner);
    p.b_offset = (uint32_t)inner;
  } else {
    p.n = (uint32_t)numel_desc(d);
    p.inner = p.stride = p.n ? p.n : 1;
  }
  return p;
}

static gk_status gated_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  gated_push p = gated_of(d);
  p.half = r->half;
  vk_binding b = d->gated.form == GK_GATED_SPLIT ? ARG(GK_ARG_X) : ARG(GK_ARG_GATE);
  return DISPATCH("gated_fwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_X), b, ARG(GK_ARG_Y));
}
static gk_status gated_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  gated_push p = gated_of(d);
  p.half = r->half;
  bool split = d->gated.form == GK_GATED_SPLIT;
  return DISPATCH("gated_bwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_X),
                  split ? ARG(GK_ARG_X) : ARG(GK_ARG_GATE), ARG(GK_ARG_DX), split ? ARG(GK_ARG_DX) : ARG(GK_ARG_DGATE));
}

// ---------------------------------------------------------------- norms

static gk_status norm_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  int64_t C = prod(d->shape, d->rank - d->norm.normalized_rank, d->rank), rows = C ? numel_desc(d) / C : 0;
  struct { uint32_t rows, C, layernorm, has_w, has_b; float eps; } p = {
      (uint32_t)rows, (uint32_t)C, d->op == GK_OP_LAYERNORM, (uint32_t)d->norm.has_weight, (uint32_t)d->norm.has_bias,
      (float)d->norm.eps};
  if (rows == 0) return GK_SUCCESS;
  return DISPATCH("norm_fwd", p, vk_groups(rows, 1), 1, 1, ARG(GK_ARG_X), ARG(GK_ARG_WEIGHT), ARG(GK_ARG_BIAS),
                  ARG(GK_ARG_Y), ARG(GK_ARG_RSTD), ARG(GK_ARG_MEAN));
}
static gk_status norm_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  int64_t C = prod(d->shape, d->rank - d->norm.normalized_rank, d->rank), rows = C ? numel_desc(d) / C : 0;
  struct { uint32_t rows, C, layernorm, has_w; } p = {(uint32_t)rows, (uint32_t)C, d->op == GK_OP_LAYERNORM,
                                                     (uint32_t)d->norm.has_weight};
  if (rows)
    TRY(DISPATCH("norm_bwd", p, vk_groups(rows, 1), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_X), ARG(GK_ARG_WEIGHT),
                 ARG(GK_ARG_RSTD), ARG(GK_ARG_MEAN), ARG(GK_ARG_DX)));
  if (!d->norm.has_weight && !d->norm.has_bias) return GK_SUCCESS;
  struct { uint32_t rows, C, layernorm, has_w, has_b, acc; } q = {
      (uint32_t)rows, (uint32_t)C, d->op == GK_OP_LAYERNORM, (uint32_t)d->norm.has_weight, (uint32_t)d->norm.has_bias,
      (uint32_t)d->accumulate};
  return DISPATCH("norm_dparam", q, vk_groups(C, 64), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_X), ARG(GK_ARG_RSTD),
                  ARG(GK_ARG_MEAN), ARG(GK_ARG_DWEIGHT), ARG(GK_ARG_DBIAS));
}

// ---------------------------------------------------------------- softmax

typedef struct { uint32_t rows, C, inner, log_softmax, half; } softmax_push;
static softmax_push softmax_of(const gk_op_desc *d) {
  int dim = d->softmax.dim;
  int64_t C = d->shape[dim], inner = prod(d->shape, dim + 1, d->rank);
  return (softmax_push){(uint32_t)(C ? numel_desc(d) / C : 0), (uint32_t)C, (uint32_t)(inner ? inner : 1),
                        d->op == GK_OP_LOG_SOFTMAX, 0};
}
static gk_status softmax_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  softmax_push p = softmax_of(d);
  p.half = r->half;
  if (!p.rows) return GK_SUCCESS;
  return DISPATCH("softmax_fwd", p, vk_groups(p.rows, 1), 1, 1, ARG(GK_ARG_X), ARG(GK_ARG_Y));
}
static gk_status softmax_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  softmax_push p = softmax_of(d);
  p.half = r->half;
  if (!p.rows) return GK_SUCCESS;
  return DISPATCH("softmax_bwd", p, vk_groups(p.rows, 1), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_Y), ARG(GK_ARG_DX));
}

// ---------------------------------------------------------------- add, mul

typedef struct { int rank; const int64_t *shape; } shape_ref;

static bool same_shape(const gk_tensor *t, shape_ref y) {
  if (t->rank != y.rank) return false;
  for (int k = 0; k < y.rank; k++)
    if (t->shape[k] != y.shape[k]) return false;
  return true;
}

// Operand k (A or B) as y's shape: itself when it has y's shape, else
// gathered through a stride-0 broadcast view.
static gk_status expanded(vk_run *r, gk_arg_kind k, const gk_tensor *t, shape_ref y, vk_binding *out) {
  if (same_shape(t, y)) {
    *out = ARG(k);
    return GK_SUCCESS;
  }
  gk_tensor v = gk_broadcast_view(t, y.rank, y.shape);
  return vk_gather(&v, out);
}

typedef struct { uint32_t n, mul; float alpha; uint32_t half; } binary_push;

static gk_status binary_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  const gk_tensor *y = a[GK_ARG_Y];
  shape_ref ys = {y->rank, y->shape};
  vk_binding ea, eb;
  TRY(expanded(r, GK_ARG_A, a[GK_ARG_A], ys, &ea));
  TRY(expanded(r, GK_ARG_B, a[GK_ARG_B], ys, &eb));
  binary_push p = {(uint32_t)gk_tensor_numel(y), d->op == GK_OP_MUL, (float)d->binary.alpha, r->half};
  return DISPATCH("binary_fwd", p, vk_groups(p.n, 256), 1, 1, ea, eb, ARG(GK_ARG_Y));
}

// grad (y's shape) summed over the dims operand `t` is broadcast along, into out.
static gk_status reduce_to(vk_binding grad, shape_ref y, const gk_tensor *t, vk_binding out, bool acc) {
  struct { uint32_t n_out, rank, mask, count, acc; uint32_t shape[8]; } p = {.rank = (uint32_t)y.rank, .acc = acc};
  int64_t count = 1, n_out = 1;
  for (int k = 0; k < y.rank; k++) {
    int tk = k - (y.rank - t->rank);
    p.shape[k] = (uint32_t)y.shape[k];
    if (tk < 0 || (t->shape[tk] == 1 && y.shape[k] != 1)) {
      p.mask |= 1u << k;
      count *= y.shape[k];
    } else n_out *= y.shape[k];
  }
  p.n_out = (uint32_t)n_out;
  p.count = (uint32_t)count;
  return DISPATCH("reduce", p, vk_groups(n_out, 1), 1, 1, grad, out);
}

static gk_status binary_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  const gk_tensor *dy = a[GK_ARG_DY];
  shape_ref ys = {dy->rank, dy->shape};
  int64_t n = gk_tensor_numel(dy);
  bool mul = d->op == GK_OP_MUL;
  vk_binding ea = vk_unused(), eb = vk_unused(), ga, gb;
  if (mul) {
    TRY(expanded(r, GK_ARG_A, a[GK_ARG_A], ys, &ea));
    TRY(expanded(r, GK_ARG_B, a[GK_ARG_B], ys, &eb));
  }
  // The operands' shapes, from the description (add's backward has no A, B).
  gk_tensor ta = {.rank = d->rank}, tb = {.rank = d->binary.b_rank};
  memcpy(ta.shape, d->shape, sizeof ta.shape);
  memcpy(tb.shape, d->binary.b_shape, sizeof tb.shape);
  bool ra = !same_shape(&ta, ys), rb = !same_shape(&tb, ys);
  if (ra) TRY(vk_temp((size_t)(n ? n : 1) * 4, &ga, NULL));
  else ga = ARG(GK_ARG_DA);
  if (rb) TRY(vk_temp((size_t)(n ? n : 1) * 4, &gb, NULL));
  else gb = ARG(GK_ARG_DB);
  binary_push p = {(uint32_t)n, mul, (float)d->binary.alpha, r->half};
  TRY(DISPATCH("binary_bwd", p, vk_groups(n, 256), 1, 1, ARG(GK_ARG_DY), ea, eb, ga, gb));
  if (ra) TRY(reduce_to(ga, ys, &ta, ARG(GK_ARG_DA), false));
  if (rb) TRY(reduce_to(gb, ys, &tb, ARG(GK_ARG_DB), false));
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- linear, matmul

// One product C = A B (gemm.comp): operands as (row, column, batch, kb)
// strides in elements.
typedef struct {
  uint32_t M, N, K, kbatch, acc, has_bias;
  uint32_t a_rs, a_cs, a_bs, a_kbs, b_rs, b_cs, b_bs, b_kbs, c_rs, c_cs, c_bs;
} gemm_push;

static gk_status gemm(gemm_push p, uint32_t batch, vk_binding A, vk_binding B, vk_binding C, vk_binding bias) {
  if (p.M == 0 || p.N == 0 || batch == 0) return GK_SUCCESS;
  return DISPATCH("gemm", p, (uint32_t)gk_ceil_div(p.N, 64), (uint32_t)gk_ceil_div(p.M, 64), batch, A, B, C, bias);
}

// y (R, N) = x (R, K) W^T + b;  dx = dy W,  dW (+)= dy^T x,  db (+)= sum_rows dy.
static gk_status linear_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  uint32_t K = (uint32_t)d->shape[d->rank - 1], N = (uint32_t)d->linear.out_features;
  uint32_t R = K ? (uint32_t)(numel_desc(d) / K) : (uint32_t)prod(d->shape, 0, d->rank - 1);
  gemm_push p = {.M = R, .N = N, .K = K, .kbatch = 1, .has_bias = (uint32_t)d->linear.has_bias,
                 .a_rs = K, .a_cs = 1, .b_rs = 1, .b_cs = K, .c_rs = N, .c_cs = 1};
  return gemm(p, 1, ARG(GK_ARG_X), ARG(GK_ARG_WEIGHT), ARG(GK_ARG_Y), ARG(GK_ARG_BIAS));
}
static gk_status linear_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  uint32_t K = (uint32_t)d->shape[d->rank - 1], N = (uint32_t)d->linear.out_features;
  uint32_t R = (uint32_t)prod(d->shape, 0, d->rank - 1);
  gemm_push dx = {.M = R, .N = K, .K = N, .kbatch = 1, .a_rs = N, .a_cs = 1, .b_rs = K, .b_cs = 1, .c_rs = K, .c_cs = 1};
  TRY(gemm(dx, 1, ARG(GK_ARG_DY), ARG(GK_ARG_WEIGHT), ARG(GK_ARG_DX), vk_unused()));
  gemm_push dw = {.M = N, .N = K, .K = R, .kbatch = 1, .acc = (uint32_t)d->accumulate,
                  .a_rs = 1, .a_cs = N, .b_rs = K, .b_cs = 1, .c_rs = K, .c_cs = 1};
  TRY(gemm(dw, 1, ARG(GK_ARG_DY), ARG(GK_ARG_X), ARG(GK_ARG_DWEIGHT), vk_unused()));
  if (!d->linear.has_bias) return GK_SUCCESS;
  int64_t shape[2] = {R, N};
  gk_tensor bias = {.rank = 1, .shape = {N}};
  return reduce_to(ARG(GK_ARG_DY), (shape_ref){2, shape}, &bias, ARG(GK_ARG_DBIAS), d->accumulate);
}

// op(A) (M x K) and op(B) (K x N) as strides of their stored layouts.
typedef struct { uint32_t batch, M, N, K, a_rs, a_cs, b_rs, b_cs, b_bs; } matmul_dims;
static matmul_dims matmul_of(const gk_op_desc *d) {
  matmul_dims m;
  int64_t s0 = d->shape[d->rank - 2], s1 = d->shape[d->rank - 1];
  m.batch = (uint32_t)prod(d->shape, 0, d->rank - 2);
  m.M = (uint32_t)(d->matmul.trans_a ? s1 : s0);
  m.K = (uint32_t)(d->matmul.trans_a ? s0 : s1);
  m.N = (uint32_t)d->matmul.n;
  m.a_rs = d->matmul.trans_a ? 1 : m.K;
  m.a_cs = d->matmul.trans_a ? m.M : 1;
  m.b_rs = d->matmul.trans_b ? 1 : m.N;
  m.b_cs = d->matmul.trans_b ? m.K : 1;
  m.b_bs = d->matmul.shared_b ? 0 : m.K * m.N;
  return m;
}
static gk_status matmul_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  matmul_dims m = matmul_of(d);
  gemm_push p = {.M = m.M, .N = m.N, .K = m.K, .kbatch = 1, .a_rs = m.a_rs, .a_cs = m.a_cs, .a_bs = m.M * m.K,
                 .b_rs = m.b_rs, .b_cs = m.b_cs, .b_bs = m.b_bs, .c_rs = m.N, .c_cs = 1, .c_bs = m.M * m.N};
  return gemm(p, m.batch, ARG(GK_ARG_A), ARG(GK_ARG_B), ARG(GK_ARG_Y), vk_unused());
}
// d op(A) = dy op(B)^T, written through op(A)'s strides; d op(B) = op(A)^T dy,
// through op(B)'s (a shared B sums the batches in the product: kbatch).
static gk_status matmul_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  matmul_dims m = matmul_of(d);
  gemm_push da = {.M = m.M, .N = m.K, .K = m.N, .kbatch = 1, .a_rs = m.N, .a_cs = 1, .a_bs = m.M * m.N,
                  .b_rs = m.b_cs, .b_cs = m.b_rs, .b_bs = m.b_bs, .c_rs = m.a_rs, .c_cs = m.a_cs, .c_bs = m.M * m.K};
  TRY(gemm(da, m.batch, ARG(GK_ARG_DY), ARG(GK_ARG_B), ARG(GK_ARG_DA), vk_unused()));
  gemm_push db = {.M = m.K, .N = m.N, .K = m.M, .kbatch = 1, .a_rs = m.a_cs, .a_cs = m.a_rs, .a_bs = m.M * m.K,
                  .b_rs = m.N, .b_cs = 1, .b_bs = m.M * m.N, .c_rs = m.b_rs, .c_cs = m.b_cs, .c_bs = m.K * m.N};
  uint32_t batch = m.batch;
  if (d->matmul.shared_b) {
    db.kbatch = m.batch;
    db.a_kbs = db.a_bs;
    db.b_kbs = db.b_bs;
    db.a_bs = db.b_bs = db.c_bs = 0;
    batch = 1;
    if (m.batch == 0) {  // nothing to sum: dB = 0
      db.kbatch = 0;
      batch = 1;
    }
  }
  return gemm(db, batch, ARG(GK_ARG_A), ARG(GK_ARG_DY), ARG(GK_ARG_DB), vk_unused());
}

// ---------------------------------------------------------------- cross-entropy

// Rows pass (max, sum of exponentials, loss per row), the total and the gradient's scale, and
// the gradient (fused forward, or backward).
static gk_status cross_entropy(vk_run *r, const gk_op_desc *d, bool backward) {
  uint32_t V = (uint32_t)d->shape[d->rank - 1], rows = (uint32_t)prod(d->shape, 0, d->rank - 1);
  vk_binding rowloss, rowmax, rowsum, gscale;
  TRY(vk_temp((size_t)rows * 4, &rowloss, NULL));
  TRY(vk_temp((size_t)rows * 4, &rowmax, NULL));
  TRY(vk_temp((size_t)rows * 4, &rowsum, NULL));
  TRY(vk_temp(4, &gscale, NULL));
  struct { uint32_t rows, V; int32_t ignore_index; float eps; } pr = {rows, V, (int32_t)d->ce.ignore_index,
                                                                      (float)d->ce.label_smoothing};
  if (rows && V)
    TRY(DISPATCH("ce_rows", pr, vk_groups(rows, 1), 1, 1, ARG(GK_ARG_LOGITS), ARG(GK_ARG_TARGET), rowloss, rowmax,
                 rowsum));
  struct { uint32_t rows, mean, backward; int32_t ignore_index; float grad_scale; } ps = {
      rows, d->ce.reduction == GK_REDUCTION_MEAN, backward, (int32_t)d->ce.ignore_index, (float)d->ce.grad_scale};
  TRY(DISPATCH("ce_sum", ps, 1, 1, 1, rowloss, ARG(GK_ARG_TARGET), backward ? vk_unused() : ARG(GK_ARG_LOSS),
               backward ? ARG(GK_ARG_DLOSS) : vk_unused(), gscale));
  if ((!backward && !d->ce.fused_grad) || !rows || !V) return GK_SUCCESS;
  return DISPATCH("ce_grad", pr, vk_groups(rows, 1), 1, 1, ARG(GK_ARG_LOGITS), ARG(GK_ARG_TARGET), rowmax, rowsum,
                  gscale, ARG(GK_ARG_DLOGITS));
}
static gk_status cross_entropy_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  return cross_entropy(r, d, false);
}
static gk_status cross_entropy_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  return cross_entropy(r, d, true);
}

// ---------------------------------------------------------------- embedding

static gk_status embedding_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  struct { uint32_t n, D; } p = {(uint32_t)(numel_desc(d) * d->embedding.dim), (uint32_t)d->embedding.dim};
  if (!p.n) return GK_SUCCESS;
  return DISPATCH("embedding_fwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_WEIGHT), ARG(GK_ARG_INDEX), ARG(GK_ARG_Y));
}
static gk_status embedding_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  uint32_t P = (uint32_t)numel_desc(d), V = (uint32_t)d->embedding.num_embeddings, D = (uint32_t)d->embedding.dim;
  vk_binding start, list, fill;
  TRY(vk_temp(((size_t)V + 1) * 4, &start, NULL));
  TRY(vk_temp((size_t)(P ? P : 1) * 4, &list, NULL));
  TRY(vk_temp((size_t)V * 4, &fill, NULL));
  struct { uint32_t P, V; } ps = {P, V};
  TRY(DISPATCH("embedding_sort", ps, 1, 1, 1, ARG(GK_ARG_INDEX), start, list, fill));
  struct { uint32_t n, D, acc; int32_t padding_idx; } p = {V * D, D, (uint32_t)d->accumulate,
                                                           (int32_t)d->embedding.padding_idx};
  if (!p.n) return GK_SUCCESS;
  return DISPATCH("embedding_bwd", p, vk_groups(p.n, 256), 1, 1, ARG(GK_ARG_DY), start, list, ARG(GK_ARG_DWEIGHT));
}

// ---------------------------------------------------------------- rope

// The cos and sin of every (t, pair) angle, computed in f64 by the host as
// the reference does, once per plan (rope_table, at plan creation) into a
// buffer of the plan's that the shader reads.
static gk_status rope_table(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  bool bhtd = d->rope.layout == GK_ROPE_BHTD;
  size_t T = (size_t)d->shape[bhtd ? 2 : 1], half = (size_t)d->shape[3] / 2, n = T * half * 2;
  float *host = malloc((n ? n : 1) * sizeof *host);
  if (!host) return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: no host memory for rope's table of %zu floats", n);
  for (size_t t = 0; t < T; t++)
    for (size_t i = 0; i < half; i++) {
      double angle = gk_rope_angle(d, d->rope.offset + (int64_t)t, (int64_t)i);
      host[(t * half + i) * 2] = (float)cos(angle);
      host[(t * half + i) * 2 + 1] = (float)sin(angle);
    }
  gk_status s = vk_buffer_alloc((n ? n : 1) * sizeof *host, &plan->state);
  if (s == GK_SUCCESS) s = vk_buffer_upload(plan->state, 0, host, n * sizeof *host);
  if (s != GK_SUCCESS && plan->state) {
    vk_buffer_free(plan->state);
    plan->state = NULL;
  }
  free(host);
  return s;
}
static gk_status rope(vk_run *r, const gk_op_desc *d, gk_arg_kind in, gk_arg_kind out, bool inverse) {
  bool bhtd = d->rope.layout == GK_ROPE_BHTD;
  uint32_t T = (uint32_t)d->shape[bhtd ? 2 : 1], H = (uint32_t)d->shape[bhtd ? 1 : 2], Dh = (uint32_t)d->shape[3];
  struct { uint32_t n, T, H, Dh, bhtd, interleaved, inverse; } p = {
      (uint32_t)(numel_desc(d) / 2), T, H, Dh, bhtd, d->rope.pairing == GK_ROPE_INTERLEAVED, inverse};
  if (!p.n) return GK_SUCCESS;
  return DISPATCH("rope", p, vk_groups(p.n, 256), 1, 1, ARG(in), vk_buffer_binding(r->plan->state), ARG(out));
}
static gk_status rope_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  return rope(r, d, GK_ARG_X, GK_ARG_Y, false);
}
static gk_status rope_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  return rope(r, d, GK_ARG_DY, GK_ARG_DX, true);
}

// ---------------------------------------------------------------- attention

enum { ATTN_MAX_DH = 128 };  // registers per invocation in the shaders
typedef struct { uint32_t B, H, Hkv, T, Dh, causal, mode; float scale; } attn_push;
static attn_push attn_of(const gk_op_desc *d) {
  return (attn_push){(uint32_t)d->shape[0], (uint32_t)d->shape[1], (uint32_t)d->attn.kv_heads, (uint32_t)d->shape[2],
                     (uint32_t)d->shape[3], (uint32_t)d->attn.causal, 0, (float)d->attn.scale};
}
static gk_status attention_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  attn_push p = attn_of(d);
  struct { uint32_t B, H, Hkv, T, Dh, causal; float scale; } q = {p.B, p.H, p.Hkv, p.T, p.Dh, p.causal, p.scale};
  if (!p.B || !p.H || !p.T) return GK_SUCCESS;
  return DISPATCH("attention_fwd", q, (uint32_t)gk_ceil_div(p.T, 64), p.B * p.H, 1, ARG(GK_ARG_Q), ARG(GK_ARG_K),
                  ARG(GK_ARG_V), ARG(GK_ARG_Y), ARG(GK_ARG_LSE));
}
// Pass 0 per query (dq, and D_i = dO_i . o_i into a temporary), pass 1 per
// key (dk, dv).
static gk_status attention_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  attn_push p = attn_of(d);
  if (!p.B || !p.H || !p.T) return GK_SUCCESS;
  vk_binding D;
  TRY(vk_temp((size_t)p.B * p.H * p.T * 4, &D, NULL));
  for (p.mode = 0; p.mode < 2; p.mode++)
    TRY(DISPATCH("attention_bwd", p, (uint32_t)gk_ceil_div(p.T, 64), p.B * (p.mode ? p.Hkv : p.H), 1, ARG(GK_ARG_DY),
                 ARG(GK_ARG_Q), ARG(GK_ARG_K), ARG(GK_ARG_V), ARG(GK_ARG_Y), ARG(GK_ARG_LSE), ARG(GK_ARG_DQ),
                 ARG(GK_ARG_DK), ARG(GK_ARG_DV), D));
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- conv1d

typedef struct { uint32_t B, D, L, W, channel_last, has_bias, silu, has_init, has_final, mode, acc; } conv_push;
static conv_push conv_of(const gk_op_desc *d) {
  bool cl = d->conv.channel_last;
  return (conv_push){(uint32_t)d->shape[0], (uint32_t)d->shape[cl ? 2 : 1], (uint32_t)d->shape[cl ? 1 : 2],
                     (uint32_t)d->conv.width, (uint32_t)cl, (uint32_t)d->conv.has_bias, (uint32_t)d->conv.silu,
                     (uint32_t)d->conv.has_initial_state, (uint32_t)d->conv.has_final_state, 0,
                     (uint32_t)d->accumulate};
}
// Mode 0: y; mode 1: the final state.
static gk_status conv1d_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  conv_push p = conv_of(d);
  int64_t n[2] = {(int64_t)p.B * p.D * p.L, p.has_final ? (int64_t)p.B * p.D * (p.W - 1) : 0};
  for (p.mode = 0; p.mode < 2; p.mode++)
    if (n[p.mode])
      TRY(DISPATCH("conv1d_fwd", p, vk_groups(n[p.mode], 256), 1, 1, ARG(GK_ARG_X), ARG(GK_ARG_WEIGHT),
                   ARG(GK_ARG_BIAS), ARG(GK_ARG_INITIAL_STATE), ARG(GK_ARG_Y), ARG(GK_ARG_FINAL_STATE)));
  return GK_SUCCESS;
}
// Mode 0: g (a temporary); mode 1: dx, dinitial_state; mode 2: dweight, dbias.
static gk_status conv1d_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  conv_push p = conv_of(d);
  vk_binding g;
  int64_t n[3] = {(int64_t)p.B * p.D * p.L, (int64_t)p.B * p.D * (p.L + p.W - 1), (int64_t)p.D * (p.W + 1)};
  TRY(vk_temp((size_t)(n[0] ? n[0] : 1) * 4, &g, NULL));
  for (p.mode = 0; p.mode < 3; p.mode++)
    if (n[p.mode])
      TRY(DISPATCH("conv1d_bwd", p, vk_groups(n[p.mode], 64), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_X), ARG(GK_ARG_WEIGHT),
                   ARG(GK_ARG_BIAS), ARG(GK_ARG_INITIAL_STATE), ARG(GK_ARG_DFINAL_STATE), g, ARG(GK_ARG_DX),
                   ARG(GK_ARG_DWEIGHT), ARG(GK_ARG_DBIAS), ARG(GK_ARG_DINITIAL_STATE)));
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- selective scan

typedef struct {
  uint32_t B, D, L, N, T, nchunks, Gb, Gc, var_b, var_c, has_D, has_z, has_db, softplus, has_init, has_final;
} scan_push;
static scan_push scan_of(const gk_op_desc *d) {
  gk_scan_dims s = gk_scan_dims_of(d);
  return (scan_push){(uint32_t)s.B, (uint32_t)s.D, (uint32_t)s.L, (uint32_t)s.N, (uint32_t)s.T,
                     (uint32_t)s.nchunks, (uint32_t)(s.Gb ? s.Gb : 1), (uint32_t)(s.Gc ? s.Gc : 1), s.var_b, s.var_c,
                     (uint32_t)d->scan.has_D, (uint32_t)d->scan.has_z, (uint32_t)d->scan.has_delta_bias,
                     (uint32_t)d->scan.delta_softplus, (uint32_t)d->scan.has_initial_state,
                     (uint32_t)d->scan.has_final_state};
}
// Workgroups for the scan shaders: 64 invocations each, 64 / S channels
// (b, d) a workgroup, S lanes a channel (scan.glsl's scan_lanes).
static uint32_t scan_groups(const scan_push *p) {
  uint32_t lanes = 1;
  while (lanes < p->N && lanes < 64) lanes <<= 1;
  return vk_groups((int64_t)p->B * p->D, (int)(64 / lanes));
}
static gk_status scan_fwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  scan_push p = scan_of(d);
  size_t bdn = (size_t)p.B * p.D * p.N;
  if (!bdn) return GK_SUCCESS;
  vk_binding h;
  TRY(vk_temp(bdn * 4, &h, NULL));
  return DISPATCH("scan_fwd", p, scan_groups(&p), 1, 1, ARG(GK_ARG_U), ARG(GK_ARG_DELTA),
                  ARG(GK_ARG_A), ARG(GK_ARG_B), ARG(GK_ARG_C), ARG(GK_ARG_D), ARG(GK_ARG_Z), ARG(GK_ARG_DELTA_BIAS),
                  ARG(GK_ARG_INITIAL_STATE), ARG(GK_ARG_Y), ARG(GK_ARG_CHUNK_STATES), ARG(GK_ARG_FINAL_STATE), h);
}
// dB or dC from its per-(b, d, n, t) parts: summed over the group's
// channels (per batch; viewed as (B, G, D/G, N, L)) or over batch and steps
// (shared (D, N)).
static gk_status scan_bc_grad(vk_binding parts, const scan_push *p, bool var, uint32_t G, vk_binding out, bool acc) {
  if (var) {
    int64_t shape[5] = {p->B, G, p->D / G, p->N, p->L};
    gk_tensor t = {.rank = 5, .shape = {p->B, G, 1, p->N, p->L}};
    return reduce_to(parts, (shape_ref){5, shape}, &t, out, false);
  }
  int64_t shape[4] = {p->B, p->D, p->N, p->L};
  gk_tensor t = {.rank = 4, .shape = {1, p->D, p->N, 1}};
  return reduce_to(parts, (shape_ref){4, shape}, &t, out, acc);
}
static gk_status scan_bwd(vk_run *r, const gk_op_desc *d, const gk_kernel_args a) {
  scan_push p = scan_of(d);
  size_t bd = (size_t)p.B * p.D, bdnl = bd * p.N * p.L, states = bd * p.T * p.N;
  vk_binding pa, pd, pdb, cb, cc, hs, g;
  TRY(vk_temp(bd * p.N * 4, &pa, NULL));
  TRY(vk_temp(bd * p.N * 4, &g, NULL));
  TRY(vk_temp(bd * 4, &pd, NULL));
  TRY(vk_temp(bd * 4, &pdb, NULL));
  TRY(vk_temp((bdnl ? bdnl : 1) * 4, &cb, NULL));
  TRY(vk_temp((bdnl ? bdnl : 1) * 4, &cc, NULL));
  TRY(vk_temp((states ? states : 1) * 4, &hs, NULL));
  if (bd)
    TRY(DISPATCH("scan_bwd", p, scan_groups(&p), 1, 1, ARG(GK_ARG_DY), ARG(GK_ARG_U), ARG(GK_ARG_DELTA),
                 ARG(GK_ARG_A), ARG(GK_ARG_B), ARG(GK_ARG_C), ARG(GK_ARG_D), ARG(GK_ARG_Z), ARG(GK_ARG_DELTA_BIAS),
                 vk_unused(), ARG(GK_ARG_DFINAL_STATE), ARG(GK_ARG_CHUNK_STATES), ARG(GK_ARG_DU), ARG(GK_ARG_DDELTA),
                 ARG(GK_ARG_DZ), ARG(GK_ARG_DINITIAL_STATE), pa, pd, pdb, cb, cc, hs, g));
  // The parameter gradients: the (b, d) parts summed over b in order.
  int64_t bdn[3] = {p.B, p.D, p.N};
  gk_tensor dn = {.rank = 3, .shape = {1, p.D, p.N}}, dvec = {.rank = 2, .shape = {1, p.D}};
  TRY(reduce_to(pa, (shape_ref){3, bdn}, &dn, ARG(GK_ARG_DA), d->accumulate));
  if (p.has_D) TRY(reduce_to(pd, (shape_ref){2, bdn}, &dvec, ARG(GK_ARG_DD), d->accumulate));
  if (p.has_db) TRY(reduce_to(pdb, (shape_ref){2, bdn}, &dvec, ARG(GK_ARG_DDELTA_BIAS), d->accumulate));
  TRY(scan_bc_grad(cb, &p, p.var_b, p.Gb, ARG(GK_ARG_DB), d->accumulate));
  return scan_bc_grad(cc, &p, p.var_c, p.Gc, ARG(GK_ARG_DC), d->accumulate);
}

// ---------------------------------------------------------------- optimizers

// src/optim's AdamW and gradient clipping on tensors in the backend's
// buffers (the table's adamw_step, sum_squares and scale; optim.c has
// checked them): f32 tensors, each bound where it lies or gathered into a
// temporary and scattered back when written, as the kernels' arguments are.
// A call records every dispatch into the batch; only the sum of squares
// waits for it (one download for all tensors). Every tensor is bound before
// the first dispatch that writes one, so a call that fails (a tensor past
// one binding's reach, no memory for a temporary) has written nothing.

// The sum of squares' workgroups per tensor, at most: about sqrt of the
// elements of a 16M-element tensor, so neither the invocations' sequential
// runs nor the final pass's are long (f32 rounding grows with both).
enum { SUMSQ_MAX_GROUPS = 4096 };

// One optimizer call: `lists` lists of n tensors, list l written when
// written[l]; tensor i of list l bound at at[l * n + i] (temp: in a temporary).
typedef struct opt_call {
  int n, lists;
  const gk_tensor *const *t;
  const bool *written;
  vk_binding *at;
  bool *temp;
} opt_call;

// Binds every tensor (the recording lock held).
static gk_status opt_bind(opt_call *c) {
  size_t count = (size_t)c->n * (size_t)c->lists;
  c->at = malloc(sizeof(vk_binding) * (count ? count : 1));
  c->temp = malloc(sizeof(bool) * (count ? count : 1));
  if (!c->at || !c->temp) return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: no memory to bind %zu tensors", count);
  for (int l = 0; l < c->lists; l++)
    for (int i = 0; i < c->n; i++)
      if (gk_tensor_numel(&c->t[l][i]))
        TRY(vk_bind(&c->t[l][i], c->written[l], true, &c->at[l * c->n + i], &c->temp[l * c->n + i]));
  return GK_SUCCESS;
}

// After the dispatches: the written tensors' temporaries scattered back
// (when s is GK_SUCCESS), the lock released, the bindings freed.
static gk_status opt_end(opt_call *c, gk_status s) {
  for (int l = 0; l < c->lists && s == GK_SUCCESS; l++)
    for (int i = 0; i < c->n && s == GK_SUCCESS && c->written[l]; i++)
      if (gk_tensor_numel(&c->t[l][i]) && c->temp[l * c->n + i]) s = vk_scatter(&c->t[l][i], c->at[l * c->n + i]);
  vk_record_end();
  free(c->at);
  free(c->temp);
  return s;
}

static gk_status vk_adamw_step(const gk_adamw_config *c, const gk_adamw_scalars *k, int n, const gk_tensor *params,
                               const gk_tensor *grads, const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq) {
  static const char *const shaders[] = {"adamw", "gather", "scatter", NULL};
  TRY(vk_pipelines(shaders));
  const gk_tensor *lists[4] = {params, grads, exp_avg, exp_avg_sq};
  opt_call call = {n, 4, lists, (const bool[]){true, false, true, true}, NULL, NULL};
  struct { uint32_t n, lerp_small; float decay, w, beta2, w2, bc2, eps, neg_step; } p = {
      0, fabs(1 - c->beta1) < 0.5, (float)k->decay, (float)(1 - c->beta1), (float)c->beta2, (float)(1 - c->beta2),
      (float)k->bc2_sqrt, (float)c->eps, (float)(-k->step_size)};
  vk_record_begin();
  gk_status s = opt_bind(&call);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    p.n = (uint32_t)gk_tensor_numel(&params[i]);
    if (p.n)
      s = DISPATCH("adamw", p, vk_groups(p.n, 256), 1, 1, call.at[i], call.at[n + i], call.at[2 * n + i],
                   call.at[3 * n + i]);
  }
  return opt_end(&call, s);
}

// Per tensor, its workgroups' partial sums (into one temporary, tensor i's
// run of table[2i + 1] from table[2i]); then one workgroup per tensor sums
// its run; the n sums are read back and added in order in f64.
typedef struct { uint32_t mode, n, first, tensors; } sumsq_push;
static gk_status vk_sum_squares(int n, const gk_tensor *grads, double *sum) {
  static const char *const shaders[] = {"sumsq", "gather", NULL};
  TRY(vk_pipelines(shaders));
  opt_call call = {n, 1, &grads, (const bool[]){false}, NULL, NULL};
  float *sums = malloc(sizeof(float) * (size_t)n);
  if (!sums) return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: no memory for %d sums of squares", n);
  vk_record_begin();
  gk_status s = opt_bind(&call);
  vk_binding partials, table, out;
  uint32_t *host_table = NULL, total = 0;
  void *host_out = NULL;
  if (s == GK_SUCCESS) s = vk_temp((size_t)n * 8, &table, (void **)&host_table);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    int64_t numel = gk_tensor_numel(&grads[i]);
    host_table[2 * i] = total;
    host_table[2 * i + 1] = numel ? (uint32_t)gk_min64(vk_groups(numel, 256), SUMSQ_MAX_GROUPS) : 0;
    total += host_table[2 * i + 1];
  }
  if (s == GK_SUCCESS) s = vk_temp((size_t)(total ? total : 1) * 4, &partials, NULL);
  if (s == GK_SUCCESS) s = vk_temp((size_t)n * 4, &out, &host_out);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    sumsq_push p = {0, (uint32_t)gk_tensor_numel(&grads[i]), host_table[2 * i], 0};
    if (p.n) s = DISPATCH("sumsq", p, host_table[2 * i + 1], 1, 1, call.at[i], partials);
  }
  sumsq_push last = {1, 0, 0, (uint32_t)n};
  if (s == GK_SUCCESS) s = DISPATCH("sumsq", last, vk_groups(n, 1), 1, 1, vk_unused(), partials, table, out);
  if (s == GK_SUCCESS) s = vk_flush_read(host_out, sums, sizeof(float) * (size_t)n);
  s = opt_end(&call, s);
  *sum = 0;
  for (int i = 0; i < n && s == GK_SUCCESS; i++) *sum += sums[i];
  free(sums);
  return s;
}

static gk_status vk_scale(int n, const gk_tensor *grads, double factor) {
  static const char *const shaders[] = {"scale", "gather", "scatter", NULL};
  TRY(vk_pipelines(shaders));
  opt_call call = {n, 1, &grads, (const bool[]){true}, NULL, NULL};
  vk_record_begin();
  gk_status s = opt_bind(&call);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    struct { uint32_t n; float factor; } p = {(uint32_t)gk_tensor_numel(&grads[i]), (float)factor};
    if (p.n) s = DISPATCH("scale", p, vk_groups(p.n, 256), 1, 1, call.at[i]);
  }
  return opt_end(&call, s);
}

// ---------------------------------------------------------------- the kernels

// The parameter gradients that desc.accumulate adds to (gathered first when
// they are not bound in place).
static bool accumulates(const gk_op_desc *d, int k) {
  if (!d->accumulate) return false;
  if (k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS) return true;
  if (d->op != GK_OP_SELECTIVE_SCAN) return false;
  return k == GK_ARG_DA || k == GK_ARG_DD || k == GK_ARG_DDELTA_BIAS ||
         (k == GK_ARG_DB && d->scan.b_layout == GK_SCAN_SHARED) || (k == GK_ARG_DC && d->scan.c_layout == GK_SCAN_SHARED);
}

typedef struct vk_family {
  vk_record_fn record[2];
  const char *shaders[2][5];  // per direction, NULL-terminated
  // Whether the shaders also read and write f16/bf16 arguments in place,
  // two elements a word (vk_run.half); NULL: never.
  bool (*words16)(const gk_op_desc *d);
} vk_family;

// Activations: every argument has the description's shape.
static bool activation_words16(const gk_op_desc *d) { return true; }
// Gated: two-tensor form; split form where a half-row (inner) is even, so
// that a word never straddles the two halves.
static bool gated_words16(const gk_op_desc *d) {
  return d->gated.form != GK_GATED_SPLIT || gated_of(d).inner % 2 == 0;
}

// softmax, log_softmax: over the last dim, of an even size (so that rows start
// at a word).
static bool softmax_words16(const gk_op_desc *d) {
  softmax_push p = softmax_of(d);
  return p.inner == 1 && p.C % 2 == 0;
}

// add, mul: a and b of one shape (no broadcast).
static bool binary_words16(const gk_op_desc *d) {
  return d->binary.b_rank == d->rank && !memcmp(d->binary.b_shape, d->shape, sizeof(int64_t) * (size_t)d->rank);
}

static const vk_family activation = {{activation_fwd, activation_bwd}, {{"activation_fwd"}, {"activation_bwd"}},
                                     activation_words16};
static const vk_family gated = {{gated_fwd, gated_bwd}, {{"gated_fwd"}, {"gated_bwd"}}, gated_words16};
static const vk_family norm = {{norm_fwd, norm_bwd}, {{"norm_fwd"}, {"norm_bwd", "norm_dparam"}}, NULL};
static const vk_family softmax = {{softmax_fwd, softmax_bwd}, {{"softmax_fwd"}, {"softmax_bwd"}},
                                  softmax_words16};
static const vk_family binary = {{binary_fwd, binary_bwd}, {{"binary_fwd"}, {"binary_bwd", "reduce"}},
                                 binary_words16};
static const vk_family linear = {{linear_fwd, linear_bwd}, {{"gemm"}, {"gemm", "reduce"}}, NULL};
static const vk_family matmul = {{matmul_fwd, matmul_bwd}, {{"gemm"}, {"gemm"}}, NULL};
static const vk_family cross_entropy_ = {{cross_entropy_fwd, cross_entropy_bwd},
                                         {{"ce_rows", "ce_sum", "ce_grad"}, {"ce_rows", "ce_sum", "ce_grad"}}, NULL};
static const vk_family embedding = {{embedding_fwd, embedding_bwd},
                                    {{"embedding_fwd"}, {"embedding_sort", "embedding_bwd"}}, NULL};
static const vk_family rope_ = {{rope_fwd, rope_bwd}, {{"rope"}, {"rope"}}, NULL};
static const vk_family attention = {{attention_fwd, attention_bwd}, {{"attention_fwd"}, {"attention_bwd"}}, NULL};
static const vk_family conv1d = {{conv1d_fwd, conv1d_bwd}, {{"conv1d_fwd"}, {"conv1d_bwd"}}, NULL};
static const vk_family scan = {{scan_fwd, scan_bwd}, {{"scan_fwd"}, {"scan_bwd", "reduce"}}, NULL};

static const vk_family *const family_of[GK_OP_COUNT_] = {
    [GK_OP_RELU] = &activation, [GK_OP_GELU] = &activation, [GK_OP_SILU] = &activation,
    [GK_OP_SIGMOID] = &activation, [GK_OP_SOFTPLUS] = &activation, [GK_OP_GLU] = &gated,
    [GK_OP_REGLU] = &gated, [GK_OP_SWIGLU] = &gated, [GK_OP_GEGLU] = &gated, [GK_OP_RMSNORM] = &norm,
    [GK_OP_LAYERNORM] = &norm, [GK_OP_LINEAR] = &linear, [GK_OP_MATMUL] = &matmul, [GK_OP_SOFTMAX] = &softmax,
    [GK_OP_LOG_SOFTMAX] = &softmax, [GK_OP_CROSS_ENTROPY] = &cross_entropy_, [GK_OP_EMBEDDING] = &embedding,
    [GK_OP_ROPE] = &rope_, [GK_OP_ATTENTION] = &attention, [GK_OP_ADD] = &binary, [GK_OP_MUL] = &binary,
    [GK_OP_CONV1D] = &conv1d, [GK_OP_SELECTIVE_SCAN] = &scan,
};

static const char *vk_decline(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (plan->args[k].used && plan->args[k].dtype == GK_F64) return "vulkan: f64 is not built (f32 math only)";
  if (!vk_has_16bit_storage())
    for (int k = 0; k < GK_ARG_COUNT_; k++)
      if (plan->args[k].used && plan->args[k].is_output &&
          (plan->args[k].dtype == GK_F16 || plan->args[k].dtype == GK_BF16))
        return "vulkan: the device has no 16-bit storage for f16/bf16 outputs";
  if (d->op == GK_OP_CROSS_ENTROPY && (d->ce.ignore_index < INT32_MIN || d->ce.ignore_index > INT32_MAX))
    return "vulkan: ce.ignore_index outside 32 bits";
  if (d->op == GK_OP_ATTENTION && d->shape[3] > ATTN_MAX_DH) return "vulkan: attention head size over 128";
  return NULL;
}

static gk_status vk_init(gk_plan *plan) {
  const vk_family *f = family_of[plan->desc.op];
  const char *common[] = {"gather", "scatter", vk_has_16bit_storage() ? "scatter16" : NULL, NULL};
  gk_status s = vk_pipelines(common);
  if (s == GK_SUCCESS) s = vk_pipelines(f->shaders[plan->desc.direction]);
  if (s == GK_SUCCESS && plan->desc.op == GK_OP_ROPE) s = rope_table(plan);
  return s;
}

static void vk_fini(gk_plan *plan) {
  if (plan->state) vk_buffer_free(plan->state);
  plan->state = NULL;
}

// The arguments of a run bound in place as words of two f16/bf16 elements
// (r->half set) when its family's shaders take them so and every argument
// is contiguous in the same 16-bit dtype, none accumulating; else nothing
// bound (r->half 0).
static void bind_words16(vk_run *r, const gk_plan *plan, const gk_kernel_args a) {
  const vk_family *f = family_of[plan->desc.op];
  gk_dtype dt = GK_F32;
  for (int k = GK_ARG_COUNT_ - 1; k >= 0; k--)
    if (a[k]) dt = a[k]->dtype;
  if (!f->words16 || (dt != GK_F16 && dt != GK_BF16) || !f->words16(&plan->desc)) return;
  vk_binding at[GK_ARG_COUNT_];
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (a[k] && (a[k]->dtype != dt || accumulates(&plan->desc, k) || !vk_bind_words16(a[k], &at[k]))) return;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (a[k]) r->arg[k] = at[k], r->have[k] = true, r->numel[k] = gk_tensor_numel(a[k]);
  r->half = dt == GK_F16 ? 1 : 2;
}

static gk_status vk_run_kernel(const gk_plan *plan, const gk_kernel_args a, void *workspace) {
  (void)workspace;
  vk_run r;
  vk_run_begin(&r, plan);
  gk_status s = GK_SUCCESS;
  bind_words16(&r, plan, a);
  for (int k = 0; k < GK_ARG_COUNT_ && s == GK_SUCCESS && !r.half; k++) {
    if (!a[k]) continue;
    s = plan->args[k].is_output ? vk_bind_output(&r, (gk_arg_kind)k, a[k], accumulates(&plan->desc, k))
                                : vk_bind_input(&r, (gk_arg_kind)k, a[k]);
  }
  if (s == GK_SUCCESS) s = family_of[plan->desc.op]->record[plan->desc.direction](&r, &plan->desc, a);
  if (s == GK_SUCCESS) s = vk_scatter_outputs(&r);
  vk_run_end(&r);
  return s;
}

void gk_vulkan_precision(const gk_plan *plan, gk_plan_info *info) {
  (void)plan;
  info->math = "f32 math on the Vulkan device (f16/bf16 stored, rounded to nearest even), fixed-order reductions";
  info->accumulator = GK_F32;
  info->deterministic = 1;
}

// One kernel serves every op and direction: family_of picks what it records.
static const gk_kernel vk_kernel = {.name = "vulkan", .backend = GK_BACKEND_VULKAN, .isa = "spirv",
                                    .decline = vk_decline, .run = vk_run_kernel, .init = vk_init,
                                    .fini = vk_fini};
static const gk_kernel *const vk_kernels[] = {&vk_kernel, NULL};
#define BOTH {vk_kernels, vk_kernels}

const gk_backend_table gk_vulkan_backend = {
    .name = "vulkan",
    .id = GK_BACKEND_VULKAN,
    .device = GK_DEVICE_VULKAN,
    .unavailable = vk_unavailable,
    .device_description = vk_device_description,
    .precision = gk_vulkan_precision,
    .kernels = {[GK_OP_RELU] = BOTH, [GK_OP_GELU] = BOTH, [GK_OP_SILU] = BOTH, [GK_OP_SIGMOID] = BOTH,
                [GK_OP_SOFTPLUS] = BOTH, [GK_OP_GLU] = BOTH, [GK_OP_REGLU] = BOTH, [GK_OP_SWIGLU] = BOTH,
                [GK_OP_GEGLU] = BOTH, [GK_OP_RMSNORM] = BOTH, [GK_OP_LAYERNORM] = BOTH, [GK_OP_LINEAR] = BOTH,
                [GK_OP_MATMUL] = BOTH, [GK_OP_SOFTMAX] = BOTH, [GK_OP_LOG_SOFTMAX] = BOTH,
                [GK_OP_CROSS_ENTROPY] = BOTH, [GK_OP_EMBEDDING] = BOTH, [GK_OP_ROPE] = BOTH,
                [GK_OP_ATTENTION] = BOTH, [GK_OP_ADD] = BOTH, [GK_OP_MUL] = BOTH, [GK_OP_CONV1D] = BOTH,
                [GK_OP_SELECTIVE_SCAN] = BOTH},
    .buffer_alloc = vk_buffer_alloc,
    .buffer_free = vk_buffer_free,
    .buffer_upload = vk_buffer_upload,
    .buffer_download = vk_buffer_download,
    .synchronize = vk_synchronize,
    .adamw_step = vk_adamw_step,
    .sum_squares = vk_sum_squares,
    .scale = vk_scale,
};
