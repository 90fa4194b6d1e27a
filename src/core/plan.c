// The plan lifecycle: describe -> create (select a kernel) -> check -> run.
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- names

static const char *const op_names[GK_OP_COUNT_] = {
    "relu", "gelu", "silu", "sigmoid", "softplus", "glu", "reglu", "swiglu", "geglu",
    "rmsnorm", "layernorm", "linear", "matmul", "softmax", "log_softmax",
    "cross_entropy", "embedding", "rope", "attention", "add", "mul", "conv1d", "selective_scan"};

const char *gk_op_name(gk_op op) {
  return (unsigned)op < GK_OP_COUNT_ ? op_names[op] : "?";
}

static const char *const arg_names[GK_ARG_COUNT_] = {
    "x", "y", "dy", "dx", "gate", "dgate", "weight", "dweight", "bias", "dbias", "mean", "rstd",
    "A", "B", "dA", "dB", "logits", "dlogits", "target", "loss", "dloss", "index",
    "q", "k", "v", "dq", "dk", "dv", "lse",
    "initial_state", "final_state", "dinitial_state", "dfinal_state", "u", "du", "delta", "ddelta",
    "C", "dC", "D", "dD", "z", "dz", "delta_bias", "ddelta_bias", "chunk_states"};

const char *gk_arg_name(gk_arg_kind kind) {
  return (unsigned)kind < GK_ARG_COUNT_ ? arg_names[kind] : "?";
}

const char *gk_backend_name(gk_backend backend) {
  switch (backend) {
  case GK_BACKEND_AUTO: return "auto";
  case GK_BACKEND_REF: return "ref";
  case GK_BACKEND_CPU: return "cpu";
  case GK_BACKEND_CUDA: return "cuda";
  }
  return "?";
}

size_t gk_struct_size(const char *name) {
  static const struct { const char *name; size_t size; } sizes[] = {
      {"gk_tensor", sizeof(gk_tensor)},       {"gk_arg", sizeof(gk_arg)},
      {"gk_op_desc", sizeof(gk_op_desc)},     {"gk_plan_info", sizeof(gk_plan_info)},
      {"gk_dlpack_tensor", sizeof(gk_dlpack_tensor)}};
  for (size_t i = 0; name && i < sizeof sizes / sizeof *sizes; i++)
    if (!strcmp(name, sizes[i].name)) return sizes[i].size;
  return 0;
}

// ---------------------------------------------------------------- registry

typedef struct gk_op_entry {
  gk_describe_fn describe;
  const gk_kernel *kernels[GK_BACKWARD + 1][2];  // per direction, fastest first
} gk_op_entry;

#define ACTIVATION {gk_describe_activation, {{&gk_cpu_activation_fwd, &gk_ref_activation_fwd}, \
                                             {&gk_cpu_activation_bwd, &gk_ref_activation_bwd}}}
#define GATED {gk_describe_gated, {{&gk_cpu_gated_fwd, &gk_ref_gated_fwd}, \
                                   {&gk_cpu_gated_bwd, &gk_ref_gated_bwd}}}

#define NORM {gk_describe_norm, {{&gk_cpu_norm_fwd, &gk_ref_norm_fwd}, {&gk_cpu_norm_bwd, &gk_ref_norm_bwd}}}
#define CONV1D {gk_describe_conv1d, {{&gk_cpu_conv1d_fwd, &gk_ref_conv1d_fwd}, \
                                     {&gk_cpu_conv1d_bwd, &gk_ref_conv1d_bwd}}}
#define SCAN {gk_describe_scan, {{&gk_cpu_scan_fwd, &gk_ref_scan_fwd}, {&gk_cpu_scan_bwd, &gk_ref_scan_bwd}}}

#define LINEAR {gk_describe_linear, {{&gk_cpu_linear_fwd, &gk_ref_linear_fwd}, {&gk_cpu_linear_bwd, &gk_ref_linear_bwd}}}
#define MATMUL {gk_describe_matmul, {{&gk_cpu_matmul_fwd, &gk_ref_matmul_fwd}, {&gk_cpu_matmul_bwd, &gk_ref_matmul_bwd}}}
#define SOFTMAX {gk_describe_softmax, {{&gk_cpu_softmax_fwd, &gk_ref_softmax_fwd}, {&gk_cpu_softmax_bwd, &gk_ref_softmax_bwd}}}
#define CROSS_ENTROPY {gk_describe_cross_entropy, {{&gk_cpu_cross_entropy_fwd, &gk_ref_cross_entropy_fwd}, \
                                                   {&gk_cpu_cross_entropy_bwd, &gk_ref_cross_entropy_bwd}}}
#define EMBEDDING {gk_describe_embedding, {{&gk_cpu_embedding_fwd, &gk_ref_embedding_fwd}, \
                                           {&gk_cpu_embedding_bwd, &gk_ref_embedding_bwd}}}
#define ROPE {gk_describe_rope, {{&gk_cpu_rope_fwd, &gk_ref_rope_fwd}, {&gk_cpu_rope_bwd, &gk_ref_rope_bwd}}}
#define ATTENTION {gk_describe_attention, {{&gk_cpu_attention_fwd, &gk_ref_attention_fwd}, \
                                           {&gk_cpu_attention_bwd, &gk_ref_attention_bwd}}}
#define BINARY {gk_describe_binary, {{&gk_cpu_binary_fwd, &gk_ref_binary_fwd}, {&gk_cpu_binary_bwd, &gk_ref_binary_bwd}}}

static const gk_op_entry op_table[GK_OP_COUNT_] = {
    [GK_OP_RELU] = ACTIVATION,
    [GK_OP_GELU] = ACTIVATION,
    [GK_OP_SILU] = ACTIVATION,
    [GK_OP_SIGMOID] = ACTIVATION,
    [GK_OP_SOFTPLUS] = ACTIVATION,
    [GK_OP_GLU] = GATED,
    [GK_OP_REGLU] = GATED,
    [GK_OP_SWIGLU] = GATED,
    [GK_OP_GEGLU] = GATED,
    [GK_OP_RMSNORM] = NORM,
    [GK_OP_LAYERNORM] = NORM,
    [GK_OP_LINEAR] = LINEAR,
    [GK_OP_MATMUL] = MATMUL,
    [GK_OP_SOFTMAX] = SOFTMAX,
    [GK_OP_LOG_SOFTMAX] = SOFTMAX,
    [GK_OP_CROSS_ENTROPY] = CROSS_ENTROPY,
    [GK_OP_EMBEDDING] = EMBEDDING,
    [GK_OP_ROPE] = ROPE,
    [GK_OP_ATTENTION] = ATTENTION,
    [GK_OP_ADD] = BINARY,
    [GK_OP_MUL] = BINARY,
    [GK_OP_CONV1D] = CONV1D,
    [GK_OP_SELECTIVE_SCAN] = SCAN,
};

// ---------------------------------------------------------------- descriptions

gk_status gk_op_desc_init(gk_op_desc *desc, gk_op op, gk_direction direction, gk_dtype dtype,
                          int rank, const int64_t *shape) {
  if (!desc) return gk_fail(GK_ERR_NULL_POINTER, "gk_op_desc_init: argument 'desc' is NULL");
  if (rank < 0 || rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "gk_op_desc_init: rank = %d is outside 0..%d", rank, GK_MAX_RANK);
  if (rank > 0 && !shape) return gk_fail(GK_ERR_NULL_POINTER, "gk_op_desc_init: argument 'shape' is NULL");
  memset(desc, 0, sizeof *desc);
  desc->op = op;
  desc->direction = direction;
  desc->dtype = dtype;
  desc->backend = GK_BACKEND_AUTO;
  desc->rank = rank;
  for (int i = 0; i < rank; i++) desc->shape[i] = shape[i];
  desc->act.approximate = GK_GELU_ERF;
  desc->act.beta = 1.0;
  desc->act.threshold = 20.0;
  desc->gated.form = GK_GATED_SPLIT;
  desc->gated.dim = -1;
  desc->norm.normalized_rank = 1;
  desc->norm.eps = op == GK_OP_LAYERNORM ? 1e-5 : 1e-6;
  desc->norm.has_weight = 1;
  desc->norm.has_bias = op == GK_OP_LAYERNORM;
  int64_t last = rank > 0 ? shape[rank - 1] : 0;
  desc->linear.out_features = last;
  desc->linear.has_bias = 1;
  desc->matmul.n = last;
  desc->softmax.dim = -1;
  desc->index_dtype = GK_I64;
  desc->ce.reduction = GK_REDUCTION_MEAN;
  desc->ce.ignore_index = -100;
  desc->ce.grad_scale = 1.0;
  desc->embedding.padding_idx = -1;
  desc->rope.theta = 10000.0;
  desc->attn.causal = 1;
  desc->binary.b_rank = rank;
  for (int i = 0; i < rank; i++) desc->binary.b_shape[i] = shape[i];
  desc->binary.alpha = 1.0;
  desc->conv.width = 4;
  desc->conv.has_bias = 1;
  desc->scan.d_state = 16;
  desc->scan.b_layout = GK_SCAN_BATCH;
  desc->scan.c_layout = GK_SCAN_BATCH;
  desc->scan.groups = 1;
  desc->scan.chunk_size = 64;
  gk_clear_error();
  return GK_SUCCESS;
}

void gk_spec_set(gk_plan *plan, gk_arg_kind kind, bool is_output, gk_dtype dtype, int rank,
                 const int64_t *shape) {
  gk_arg_spec *s = &plan->args[kind];
  memset(s, 0, sizeof *s);
  s->used = true;
  s->is_output = is_output;
  s->dtype = dtype;
  s->rank = rank;
  for (int i = 0; i < rank; i++) s->shape[i] = shape[i];
}

void gk_spec_unary(gk_plan *plan, gk_arg_kind saved) {
  const gk_op_desc *d = &plan->desc;
  if (d->direction == GK_FORWARD) {
    gk_spec_set(plan, GK_ARG_X, false, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_Y, true, d->dtype, d->rank, d->shape);
    gk_spec_allow_alias(plan, GK_ARG_Y, GK_ARG_X);
  } else {
    gk_spec_set(plan, GK_ARG_DY, false, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, saved, false, d->dtype, d->rank, d->shape);
    gk_spec_set(plan, GK_ARG_DX, true, d->dtype, d->rank, d->shape);
    gk_spec_allow_alias(plan, GK_ARG_DX, GK_ARG_DY);
    gk_spec_allow_alias(plan, GK_ARG_DX, saved);
  }
}

void gk_spec_allow_alias(gk_plan *plan, gk_arg_kind output, gk_arg_kind input) {
  plan->args[output].alias_ok |= (uint64_t)1 << input;
}

// Checks common to every op: enums, rank, dims, element count.
static gk_status check_desc_common(const gk_op_desc *d) {
  if ((unsigned)d->op >= GK_OP_COUNT_)
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.op = %d is not a gk_op (0..%d)", (int)d->op, GK_OP_COUNT_ - 1);
  if (d->direction != GK_FORWARD && d->direction != GK_BACKWARD)
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.direction = %d is neither GK_FORWARD (0) nor GK_BACKWARD (1)",
                   (int)d->direction);
  if (d->dtype != GK_F32 && d->dtype != GK_F64 && d->dtype != GK_F16 && d->dtype != GK_BF16)
    return gk_fail(GK_ERR_BAD_DTYPE, "desc.dtype = %s (%d) is not a floating dtype (f32, f64, f16, bf16) for op %s",
                   gk_dtype_name(d->dtype), (int)d->dtype, gk_op_name(d->op));
  if ((unsigned)d->backend > GK_BACKEND_CUDA)
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.backend = %d is not a gk_backend", (int)d->backend);
  if (d->rank < 0 || d->rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "desc.rank = %d is outside 0..%d", d->rank, GK_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < d->rank; i++) {
    if (d->shape[i] < 0)
      return gk_fail(GK_ERR_BAD_SHAPE, "desc.shape[%d] = %lld is negative", i, (long long)d->shape[i]);
    if (__builtin_mul_overflow(numel, d->shape[i], &numel) || numel > (INT64_MAX >> 4))
      return gk_fail(GK_ERR_BAD_SHAPE, "desc.shape: the element count overflows at dim %d", i);
  }
  return GK_SUCCESS;
}

gk_status gk_plan_create(const gk_op_desc *desc, gk_plan **out) {
  if (!out) return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_create: argument 'plan' is NULL");
  *out = NULL;
  if (!desc) return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_create: argument 'desc' is NULL");
  gk_status s = check_desc_common(desc);
  if (s != GK_SUCCESS) return s;
  gk_plan *plan = calloc(1, sizeof *plan);
  if (!plan) return gk_fail(GK_ERR_OUT_OF_MEMORY, "gk_plan_create: could not allocate %zu bytes", sizeof *plan);
  plan->desc = *desc;
  const gk_op_entry *entry = &op_table[desc->op];
  s = entry->describe(plan);
  if (s != GK_SUCCESS) {
    free(plan);
    return s;
  }
  if (desc->backend == GK_BACKEND_CUDA) {
    free(plan);
    return gk_fail(GK_ERR_UNSUPPORTED, "desc.backend = cuda: this build of gradkern has no CUDA kernels");
  }
  for (int i = 0; i < 2 && !plan->kernel; i++) {
    const gk_kernel *k = entry->kernels[desc->direction][i];
    if (desc->backend != GK_BACKEND_AUTO && k->backend != desc->backend) continue;
    if (k->supports && !k->supports(&plan->desc)) continue;
    plan->kernel = k;
  }
  if (!plan->kernel) {
    free(plan);
    return gk_fail(GK_ERR_UNSUPPORTED, "no %s kernel implements %s %s in %s", gk_backend_name(desc->backend),
                   gk_op_name(desc->op), desc->direction == GK_FORWARD ? "forward" : "backward",
                   gk_dtype_name(desc->dtype));
  }
  snprintf(plan->kernel_name, sizeof plan->kernel_name, "%s_%s__%s", gk_op_name(desc->op),
           desc->direction == GK_FORWARD ? "fwd" : "bwd", plan->kernel->name);
  plan->workspace_bytes = plan->kernel->workspace ? plan->kernel->workspace(plan) : 0;
  *out = plan;
  gk_clear_error();
  return GK_SUCCESS;
}

void gk_plan_destroy(gk_plan *plan) { free(plan); }

gk_status gk_plan_get_info(const gk_plan *plan, gk_plan_info *info) {
  if (!plan || !info)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_get_info: argument '%s' is NULL", !plan ? "plan" : "info");
  const gk_kernel *k = plan->kernel;
  bool f64 = plan->desc.dtype == GK_F64;
  memset(info, 0, sizeof *info);
  info->kernel = plan->kernel_name;
  info->backend = k->backend;
  info->isa = k->isa ? k->isa : gk_isa_name(gk_isa_level());
  if (k->backend == GK_BACKEND_REF) {
    info->math = f64 ? "f64 math" : "f64 math, rounded to nearest even on store";
    info->accumulator = GK_F64;
  } else {
    info->math = f64 ? "f64 math" : plan->desc.dtype == GK_F32 ? "f32 math"
                                                                : "f32 math, rounded to nearest even on store";
    info->accumulator = f64 ? GK_F64 : GK_F32;
  }
  info->deterministic = 1;
  gk_clear_error();
  return GK_SUCCESS;
}

gk_status gk_plan_get_desc(const gk_plan *plan, gk_op_desc *desc) {
  if (!plan || !desc)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_get_desc: argument '%s' is NULL", !plan ? "plan" : "desc");
  *desc = plan->desc;
  gk_clear_error();
  return GK_SUCCESS;
}

gk_status gk_plan_workspace_size(const gk_plan *plan, size_t *bytes) {
  if (!plan || !bytes)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_workspace_size: argument '%s' is NULL", !plan ? "plan" : "bytes");
  *bytes = plan->workspace_bytes;
  gk_clear_error();
  return GK_SUCCESS;
}

gk_status gk_plan_arg_shape(const gk_plan *plan, gk_arg_kind kind, int *rank, int64_t *shape) {
  if (!plan || !rank || !shape)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_arg_shape: argument '%s' is NULL",
                   !plan ? "plan" : !rank ? "rank" : "shape");
  if ((unsigned)kind >= GK_ARG_COUNT_)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_plan_arg_shape: kind = %d is not a gk_arg_kind", (int)kind);
  const gk_arg_spec *s = &plan->args[kind];
  *rank = s->used ? s->rank : -1;
  for (int i = 0; s->used && i < s->rank; i++) shape[i] = s->shape[i];
  gk_clear_error();
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- checking

// Byte range [lo, hi) a tensor can touch; empty (lo == hi) when it has no
// elements.
typedef struct { uintptr_t lo, hi; } byte_range;

// Element offsets [lo, hi] a tensor reaches; false when they overflow.
static bool offset_span(const gk_tensor *t, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t span;
    if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &span)) return false;
    if (__builtin_add_overflow(span < 0 ? *lo : *hi, span, span < 0 ? lo : hi)) return false;
  }
  int64_t es = (int64_t)gk_dtype_size(t->dtype), bytes;
  return !__builtin_mul_overflow(*lo, es, &bytes) && !__builtin_mul_overflow(*hi + 1, es, &bytes);
}

static byte_range tensor_range(const gk_tensor *t) {
  byte_range r = {0, 0};
  int64_t lo, hi, es = (int64_t)gk_dtype_size(t->dtype);
  if (gk_tensor_numel(t) == 0 || !offset_span(t, &lo, &hi)) return r;
  r.lo = (uintptr_t)t->data + (uintptr_t)(lo * es);
  r.hi = (uintptr_t)t->data + (uintptr_t)((hi + 1) * es);
  return r;
}

static bool ranges_overlap(byte_range a, byte_range b) {
  return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

// Whether two views with the same dtype, shape and strides, their data d
// elements apart, share no element: no two index vectors i, j have
// off(i) - off(j) = d, i.e. no d_k in [-(n_k - 1), n_k - 1] with
// sum_k d_k s_k = d. Searched from the largest |stride| down, keeping the
// rest reachable by the smaller dims; interleaved views (the columns of one
// buffer cut into two tensors) are told apart this way, which the byte
// ranges cannot. Gives up (answers "not shown disjoint") past a step budget.
static bool offsets_unreachable(int64_t d, const int64_t *n, const int64_t *st, const int64_t *span, int k,
                                int *budget) {
  if (--*budget < 0) return false;
  if (k < 0) return d != 0;
  // d - x s_k must lie within +-span[k] (what the smaller dims reach).
  int64_t lo = d - span[k], hi = d + span[k];
  int64_t xlo = lo >= 0 ? (lo + st[k] - 1) / st[k] : -((-lo) / st[k]);
  int64_t xhi = hi >= 0 ? hi / st[k] : -((-hi + st[k] - 1) / st[k]);
  if (xlo < -(n[k] - 1)) xlo = -(n[k] - 1);
  if (xhi > n[k] - 1) xhi = n[k] - 1;
  for (int64_t x = xlo; x <= xhi; x++)
    if (!offsets_unreachable(d - x * st[k], n, st, span, k - 1, budget)) return false;
  return true;
}

static bool views_disjoint(const gk_tensor *a, const gk_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  int64_t es = (int64_t)gk_dtype_size(a->dtype), bytes = (int64_t)((intptr_t)b->data - (intptr_t)a->data);
  if (bytes % es != 0) return false;
  int64_t n[GK_MAX_RANK], st[GK_MAX_RANK], span[GK_MAX_RANK];
  int m = 0;
  for (int i = 0; i < a->rank; i++) {
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) return false;
    if (a->shape[i] <= 1 || a->strides[i] == 0) continue;
    int64_t s1 = a->strides[i] < 0 ? -a->strides[i] : a->strides[i];
    int j = m++;
    while (j > 0 && st[j - 1] > s1) {
      st[j] = st[j - 1];
      n[j] = n[j - 1];
      j--;
    }
    st[j] = s1;
    n[j] = a->shape[i];
  }
  int64_t acc = 0;
  for (int k = 0; k < m; k++) {
    span[k] = acc;
    acc += (n[k] - 1) * st[k];
  }
  int budget = 4096;
  return offsets_unreachable(bytes / es, n, st, span, m - 1, &budget);
}

static bool same_view(const gk_tensor *a, const gk_tensor *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) return false;
  return true;
}

// An output must not have two indices at one address: with dims sorted by
// |stride|, each stride must pass the span of the smaller ones.
static bool overlaps_itself(const gk_tensor *t) {
  int64_t strides[GK_MAX_RANK], shapes[GK_MAX_RANK];
  int n = 0;
  for (int i = 0; i < t->rank; i++) {
    if (t->shape[i] <= 1) continue;
    int64_t s = t->strides[i] < 0 ? -t->strides[i] : t->strides[i];
    int j = n++;
    while (j > 0 && strides[j - 1] > s) {
      strides[j] = strides[j - 1];
      shapes[j] = shapes[j - 1];
      j--;
    }
    strides[j] = s;
    shapes[j] = t->shape[i];
  }
  int64_t span = 0;  // largest offset reachable with the smaller dims
  for (int i = 0; i < n; i++) {
    if (strides[i] <= span) return true;
    span += (shapes[i] - 1) * strides[i];
  }
  return false;
}

static gk_status check_tensor(const gk_plan *plan, gk_arg_kind kind, const gk_tensor *t) {
  const gk_arg_spec *s = &plan->args[kind];
  const char *name = gk_arg_name(kind), *op = gk_op_name(plan->desc.op);
  char want[160], got[160];
  if (t->rank < 0 || t->rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "%s: argument '%s' has rank %d, outside 0..%d", op, name, t->rank, GK_MAX_RANK);
  if (t->dtype != s->dtype)
    return gk_fail(GK_ERR_BAD_DTYPE, "%s: argument '%s' has dtype %s (%d), the plan needs %s", op, name,
                   gk_dtype_name(t->dtype), (int)t->dtype, gk_dtype_name(s->dtype));
  if (t->device != GK_DEVICE_CPU)
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s' is on device %d, the %s kernel runs on the CPU", op, name,
                   (int)t->device, plan->kernel->name);
  if (t->rank != s->rank)
    return gk_fail(GK_ERR_BAD_RANK, "%s: argument '%s' has rank %d, the plan needs %d (shape %s)", op, name,
                   t->rank, s->rank, gk_format_shape(want, sizeof want, s->rank, s->shape));
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] != s->shape[i])
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: argument '%s' has shape %s, the plan needs %s", op, name,
                     gk_format_shape(got, sizeof got, t->rank, t->shape),
                     gk_format_shape(want, sizeof want, s->rank, s->shape));
  // Before the return for an empty tensor too: kernels compute with the
  // strides of empty tensors (a row's step in bytes), which must not overflow.
  int64_t lo, hi;
  if (!offset_span(t, &lo, &hi))
    return gk_fail(GK_ERR_BAD_STRIDES, "%s: argument '%s' with shape %s and strides %s spans more memory than an "
                   "address can reach", op, name, gk_format_shape(got, sizeof got, t->rank, t->shape),
                   gk_format_shape(want, sizeof want, t->rank, t->strides));
  if (gk_tensor_numel(t) == 0) return GK_SUCCESS;
  if (!t->data) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument '%s' has data = NULL", op, name);
  size_t es = gk_dtype_size(t->dtype);
  if ((uintptr_t)t->data % es != 0)
    return gk_fail(GK_ERR_BAD_ALIGNMENT, "%s: argument '%s' data = %p is not aligned to its element size %zu", op,
                   name, t->data, es);
  if (s->is_output && overlaps_itself(t))
    return gk_fail(GK_ERR_BAD_STRIDES, "%s: output '%s' with shape %s and strides %s overlaps itself", op, name,
                   gk_format_shape(got, sizeof got, t->rank, t->shape),
                   gk_format_shape(want, sizeof want, t->rank, t->strides));
  return GK_SUCCESS;
}

// Fills `by_kind` with the tensors of args, checked against the plan.
static gk_status collect_args(const gk_plan *plan, const gk_arg *args, int nargs, gk_kernel_args by_kind) {
  const char *op = gk_op_name(plan->desc.op);
  for (int k = 0; k < GK_ARG_COUNT_; k++) by_kind[k] = NULL;
  if (nargs < 0) return gk_fail(GK_ERR_INVALID_VALUE, "%s: nargs = %d is negative", op, nargs);
  if (nargs > 0 && !args) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'args' is NULL with nargs = %d", op, nargs);
  for (int i = 0; i < nargs; i++) {
    gk_arg_kind kind = args[i].kind;
    if ((unsigned)kind >= GK_ARG_COUNT_)
      return gk_fail(GK_ERR_UNEXPECTED_ARGUMENT, "%s: args[%d].kind = %d is not a gk_arg_kind", op, i, (int)kind);
    if (!plan->args[kind].used)
      return gk_fail(GK_ERR_UNEXPECTED_ARGUMENT, "%s %s: argument '%s' (args[%d]) is not taken by this plan", op,
                     plan->desc.direction == GK_FORWARD ? "forward" : "backward", gk_arg_name(kind), i);
    if (by_kind[kind])
      return gk_fail(GK_ERR_UNEXPECTED_ARGUMENT, "%s: argument '%s' is passed twice (args[%d])", op,
                     gk_arg_name(kind), i);
    by_kind[kind] = &args[i].tensor;
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!plan->args[k].used) continue;
    if (!by_kind[k])
      return gk_fail(GK_ERR_MISSING_ARGUMENT, "%s %s: argument '%s' is missing", op,
                     plan->desc.direction == GK_FORWARD ? "forward" : "backward", gk_arg_name((gk_arg_kind)k));
    gk_status s = check_tensor(plan, (gk_arg_kind)k, by_kind[k]);
    if (s != GK_SUCCESS) return s;
  }
  // Outputs against every other tensor.
  for (int o = 0; o < GK_ARG_COUNT_; o++) {
    if (!by_kind[o] || !plan->args[o].is_output) continue;
    byte_range ro = tensor_range(by_kind[o]);
    for (int k = 0; k < GK_ARG_COUNT_; k++) {
      if (k == o || !by_kind[k]) continue;
      if (plan->args[k].is_output && k < o) continue;  // pair already checked
      if (!ranges_overlap(ro, tensor_range(by_kind[k])) || views_disjoint(by_kind[o], by_kind[k])) continue;
      if ((plan->args[o].alias_ok >> k & 1u) && same_view(by_kind[o], by_kind[k])) continue;
      return gk_fail(GK_ERR_ALIASING, "%s: output '%s' overlaps %s '%s'%s", op, gk_arg_name((gk_arg_kind)o),
                     plan->args[k].is_output ? "output" : "input", gk_arg_name((gk_arg_kind)k),
                     (plan->args[o].alias_ok >> k & 1u) ? " (only the very same view is allowed)" : "");
    }
  }
  return GK_SUCCESS;
}

gk_status gk_plan_check(const gk_plan *plan, const gk_arg *args, int nargs) {
  if (!plan) return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_check: argument 'plan' is NULL");
  gk_kernel_args by_kind;
  gk_status s = collect_args(plan, args, nargs, by_kind);
  if (s == GK_SUCCESS) gk_clear_error();
  return s;
}

gk_status gk_plan_run(const gk_plan *plan, const gk_arg *args, int nargs, void *workspace,
                      size_t workspace_bytes) {
  if (!plan) return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_run: argument 'plan' is NULL");
  gk_kernel_args by_kind;
  gk_status s = collect_args(plan, args, nargs, by_kind);
  if (s != GK_SUCCESS) return s;
  if (workspace_bytes < plan->workspace_bytes)
    return gk_fail(GK_ERR_WORKSPACE_TOO_SMALL, "%s: workspace_bytes = %zu, the plan needs %zu",
                   gk_op_name(plan->desc.op), workspace_bytes, plan->workspace_bytes);
  if (plan->workspace_bytes > 0 && !workspace)
    return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'workspace' is NULL, the plan needs %zu bytes",
                   gk_op_name(plan->desc.op), plan->workspace_bytes);
  if ((uintptr_t)workspace % 64 != 0)
    return gk_fail(GK_ERR_BAD_ALIGNMENT, "%s: workspace = %p is not aligned to 64 bytes", gk_op_name(plan->desc.op),
                   workspace);
  byte_range wr = {(uintptr_t)workspace, (uintptr_t)workspace + (workspace ? plan->workspace_bytes : 0)};
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (by_kind[k] && ranges_overlap(wr, tensor_range(by_kind[k])))
      return gk_fail(GK_ERR_ALIASING, "%s: workspace overlaps argument '%s'", gk_op_name(plan->desc.op),
                     gk_arg_name((gk_arg_kind)k));
  s = plan->kernel->run(plan, by_kind, workspace);
  if (s == GK_SUCCESS) gk_clear_error();
  return s;
}

void gk_tensor_byte_range(const gk_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  byte_range r = tensor_range(t);
  *lo = r.lo;
  *hi = r.hi;
}

bool gk_tensor_overlaps_itself(const gk_tensor *t) { return overlaps_itself(t); }
