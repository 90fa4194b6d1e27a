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

const char *gk_version(void) { return GK_VERSION_STRING; }

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

size_t gk_struct_size(const char *name) {
  static const struct { const char *name; size_t size; } sizes[] = {
      {"gk_tensor", sizeof(gk_tensor)},       {"gk_arg", sizeof(gk_arg)},
      {"gk_op_desc", sizeof(gk_op_desc)},     {"gk_plan_info", sizeof(gk_plan_info)},
      {"gk_dlpack_tensor", sizeof(gk_dlpack_tensor)}, {"gk_backend_info", sizeof(gk_backend_info)}};
  for (size_t i = 0; name && i < sizeof sizes / sizeof *sizes; i++)
    if (!strcmp(name, sizes[i].name)) return sizes[i].size;
  return 0;
}

// ---------------------------------------------------------------- ops

// Each op's description: option checks and the argument specs (the op's
// semantics, the same for every backend). Kernels come from the backends.
static const gk_describe_fn describe_op[GK_OP_COUNT_] = {
    [GK_OP_RELU] = gk_describe_activation,       [GK_OP_GELU] = gk_describe_activation,
    [GK_OP_SILU] = gk_describe_activation,       [GK_OP_SIGMOID] = gk_describe_activation,
    [GK_OP_SOFTPLUS] = gk_describe_activation,   [GK_OP_GLU] = gk_describe_gated,
    [GK_OP_REGLU] = gk_describe_gated,           [GK_OP_SWIGLU] = gk_describe_gated,
    [GK_OP_GEGLU] = gk_describe_gated,           [GK_OP_RMSNORM] = gk_describe_norm,
    [GK_OP_LAYERNORM] = gk_describe_norm,        [GK_OP_LINEAR] = gk_describe_linear,
    [GK_OP_MATMUL] = gk_describe_matmul,         [GK_OP_SOFTMAX] = gk_describe_softmax,
    [GK_OP_LOG_SOFTMAX] = gk_describe_softmax,   [GK_OP_CROSS_ENTROPY] = gk_describe_cross_entropy,
    [GK_OP_EMBEDDING] = gk_describe_embedding,   [GK_OP_ROPE] = gk_describe_rope,
    [GK_OP_ATTENTION] = gk_describe_attention,   [GK_OP_ADD] = gk_describe_binary,
    [GK_OP_MUL] = gk_describe_binary,            [GK_OP_CONV1D] = gk_describe_conv1d,
    [GK_OP_SELECTIVE_SCAN] = gk_describe_scan,
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
  desc->act.from_output = 0;
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
  desc->scan.b_dtype = GK_DTYPE_SAME;
  desc->scan.c_dtype = GK_DTYPE_SAME;
  desc->param_dtype = GK_DTYPE_SAME;
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

void gk_spec_indices(gk_plan *plan, gk_arg_kind kind, int64_t limit, bool has_ignore, int64_t ignore) {
  gk_arg_spec *s = &plan->args[kind];
  s->index_limit = limit;
  s->has_ignore = has_ignore;
  s->ignore = ignore;
}

static bool is_float_dtype(gk_dtype t) { return t == GK_F32 || t == GK_F64 || t == GK_F16 || t == GK_BF16; }

gk_status gk_check_mixed_dtype(const gk_op_desc *d, const char *field, int t) {
  if (t != GK_DTYPE_SAME && !is_float_dtype((gk_dtype)t))
    return gk_fail(GK_ERR_BAD_DTYPE, "desc.%s = %s (%d) is neither GK_DTYPE_SAME nor a floating dtype for op %s",
                   field, gk_dtype_name((gk_dtype)t), t, gk_op_name(d->op));
  if (t == GK_DTYPE_SAME || t == (int)d->dtype || (t == GK_F32 && (d->dtype == GK_F16 || d->dtype == GK_BF16)))
    return GK_SUCCESS;
  return gk_fail(GK_ERR_BAD_DTYPE, "desc.%s = %s with desc.dtype = %s: op %s takes desc.dtype there, or f32 "
                 "with f16 or bf16 activations", field, gk_dtype_name((gk_dtype)t), gk_dtype_name(d->dtype),
                 gk_op_name(d->op));
}

// Whether an op keeps parameters in desc.param_dtype (see gradkern.h).
static bool takes_param_dtype(gk_op op) {
  return op == GK_OP_RMSNORM || op == GK_OP_LAYERNORM || op == GK_OP_LINEAR || op == GK_OP_SELECTIVE_SCAN;
}

// Checks common to every op: enums, dtypes, rank, dims, element count.
static gk_status check_desc_common(const gk_op_desc *d) {
  if ((unsigned)d->op >= GK_OP_COUNT_)
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.op = %d is not a gk_op (0..%d)", (int)d->op, GK_OP_COUNT_ - 1);
  if (d->direction != GK_FORWARD && d->direction != GK_BACKWARD)
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.direction = %d is neither GK_FORWARD (0) nor GK_BACKWARD (1)",
                   (int)d->direction);
  if (!is_float_dtype(d->dtype))
    return gk_fail(GK_ERR_BAD_DTYPE, "desc.dtype = %s (%d) is not a floating dtype (f32, f64, f16, bf16) for op %s",
                   gk_dtype_name(d->dtype), (int)d->dtype, gk_op_name(d->op));
  gk_status s = gk_check_mixed_dtype(d, "param_dtype", d->param_dtype);
  if (s != GK_SUCCESS) return s;
  if (!takes_param_dtype(d->op) && d->param_dtype != GK_DTYPE_SAME && d->param_dtype != (int)d->dtype)
    return gk_fail(GK_ERR_BAD_DTYPE, "desc.param_dtype = %s with desc.dtype = %s: op %s has no parameters kept in "
                   "another dtype (rmsnorm, layernorm, linear and selective_scan have)",
                   gk_dtype_name((gk_dtype)d->param_dtype), gk_dtype_name(d->dtype), gk_op_name(d->op));
  if (d->backend == GK_BACKEND_CUDA && !gk_backend_find(d->backend))
    return gk_fail(GK_ERR_UNSUPPORTED, "desc.backend = cuda: this build of gradkern has no CUDA kernels");
  if (d->backend != GK_BACKEND_AUTO && !gk_backend_find(d->backend))
    return gk_fail(GK_ERR_INVALID_VALUE, "desc.backend = %d is not a registered backend (gradkern info lists them)",
                   (int)d->backend);
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

// Record why a kernel (or a whole backend, kernel NULL) passed over the plan.
static void note_declined(gk_plan *plan, const gk_backend_table *b, const gk_kernel *k, const char *why) {
  size_t used = strlen(plan->declined);
  snprintf(plan->declined + used, sizeof plan->declined - used, "%s%s%s%s: %s", used ? "; " : "", b->name,
           k ? "/" : "", k ? k->name : "", why);
}

// The first kernel, in backend order then each backend's order, that takes
// the plan (desc.backend, when set, names the only backend to try).
static bool select_kernel(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  for (int i = 0; i < n; i++) {
    const gk_backend_table *b = list[i];
    if (d->backend != GK_BACKEND_AUTO && b->id != d->backend) continue;
    const char *why = gk_backend_unavailable_reason(b);
    const gk_kernel *const *kernels = b->kernels[d->op][d->direction];
    if (why || !kernels) {
      note_declined(plan, b, NULL, why ? why : "has no kernel for this op and direction");
      continue;
    }
    for (const gk_kernel *const *k = kernels; *k; k++) {
      why = (*k)->decline ? (*k)->decline(plan) : NULL;
      if (why) {
        note_declined(plan, b, *k, why);
        continue;
      }
      plan->backend = b;
      plan->kernel = *k;
      if (!(*k)->init || (*k)->init(plan) == GK_SUCCESS) return true;
      note_declined(plan, b, *k, gk_last_error());
      plan->kernel = NULL;
      plan->state = NULL;
    }
  }
  return false;
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
  // GK_DTYPE_SAME resolved, so describe functions and kernels read dtypes.
  if (desc->param_dtype == GK_DTYPE_SAME) plan->desc.param_dtype = (int)desc->dtype;
  if (desc->scan.b_dtype == GK_DTYPE_SAME) plan->desc.scan.b_dtype = (int)desc->dtype;
  if (desc->scan.c_dtype == GK_DTYPE_SAME) plan->desc.scan.c_dtype = (int)desc->dtype;
  s = describe_op[desc->op](plan);
  if (s != GK_SUCCESS) {
    free(plan);
    return s;
  }
  if (!select_kernel(plan)) {
    gk_fail(GK_ERR_UNSUPPORTED, "no %s kernel implements %s %s in %s: %s", gk_backend_name(desc->backend),
            gk_op_name(desc->op), desc->direction == GK_FORWARD ? "forward" : "backward",
            gk_dtype_name(desc->dtype), plan->declined[0] ? plan->declined : "no backend is registered");
    free(plan);
    return GK_ERR_UNSUPPORTED;
  }
  snprintf(plan->kernel_name, sizeof plan->kernel_name, "%s_%s__%s", gk_op_name(desc->op),
           desc->direction == GK_FORWARD ? "fwd" : "bwd", plan->kernel->name);
  plan->workspace_bytes = plan->kernel->workspace ? plan->kernel->workspace(plan) : 0;
  *out = plan;
  gk_clear_error();
  return GK_SUCCESS;
}

void gk_plan_destroy(gk_plan *plan) {
  if (plan && plan->kernel->fini) plan->kernel->fini(plan);
  free(plan);
}

gk_status gk_plan_get_info(const gk_plan *plan, gk_plan_info *info) {
  if (!plan || !info)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_plan_get_info: argument '%s' is NULL", !plan ? "plan" : "info");
  const gk_kernel *k = plan->kernel;
  memset(info, 0, sizeof *info);
  info->kernel = plan->kernel_name;
  info->backend = k->backend;
  info->isa = k->isa ? k->isa : gk_isa_name(gk_isa_level());
  (k->precision ? k->precision : plan->backend->precision)(plan, info);
  info->declined = plan->declined;
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
  if (t->device != plan->backend->device)
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s' is on device %d, the plan's backend '%s' runs on device %d",
                   op, name, (int)t->device, plan->backend->name, (int)plan->backend->device);
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
  void *handle;
  size_t offset;
  if (plan->backend->buffer_alloc && !gk_buffer_resolve(plan->backend, t, &handle, &offset))
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s' (data = %p) does not lie within one buffer of backend '%s'",
                   op, name, t->data, plan->backend->name);
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

// The values of index argument k in range.
static gk_status check_index_tensor(const gk_plan *plan, int k, const gk_tensor *t) {
  const gk_arg_spec *s = &plan->args[k];
  int64_t n = gk_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = gk_get_index(t, i);
    if ((s->has_ignore && v == s->ignore) || (v >= 0 && v < s->index_limit)) continue;
    const char *op = gk_op_name(plan->desc.op), *name = gk_arg_name((gk_arg_kind)k);
    if (s->has_ignore)
      return gk_fail(GK_ERR_INVALID_VALUE, "%s: %s[%lld] = %lld is outside 0..%lld and is not ignore_index (%lld)",
                     op, name, (long long)i, (long long)v, (long long)(s->index_limit - 1), (long long)s->ignore);
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: %s[%lld] = %lld is outside 0..%lld", op, name, (long long)i,
                   (long long)v, (long long)(s->index_limit - 1));
  }
  return GK_SUCCESS;
}

// Every index argument's values in range (found before anything is
// written). On a device backend the bytes the tensor spans are downloaded
// first (index tensors are small: one value per token).
static gk_status check_index_values(const gk_plan *plan, const gk_kernel_args by_kind) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!plan->args[k].used || plan->args[k].index_limit <= 0) continue;
    const gk_tensor *t = by_kind[k];
    if (!plan->backend->buffer_alloc || gk_tensor_numel(t) == 0) {
      gk_status s = check_index_tensor(plan, k, t);
      if (s != GK_SUCCESS) return s;
      continue;
    }
    uintptr_t lo, hi;
    void *handle;
    size_t offset;
    gk_tensor_byte_range(t, &lo, &hi);
    gk_buffer_find(plan->backend, lo, hi, &handle, &offset);  // checked by check_tensor
    char *host = malloc(hi - lo);
    if (!host)
      return gk_fail(GK_ERR_OUT_OF_MEMORY, "%s: no memory to check %zu bytes of '%s'", gk_op_name(plan->desc.op),
                     (size_t)(hi - lo), gk_arg_name((gk_arg_kind)k));
    gk_status s = plan->backend->buffer_download(handle, offset, host, hi - lo);
    gk_tensor view = *t;
    view.data = host + ((uintptr_t)t->data - lo);
    if (s == GK_SUCCESS) s = check_index_tensor(plan, k, &view);
    free(host);
    if (s != GK_SUCCESS) return s;
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
  void *handle;
  size_t offset;
  if (plan->backend->buffer_alloc && wr.lo < wr.hi && !gk_buffer_find(plan->backend, wr.lo, wr.hi, &handle, &offset))
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: the workspace (%p, %zu bytes) does not lie within one buffer of backend '%s'",
                   gk_op_name(plan->desc.op), workspace, plan->workspace_bytes, plan->backend->name);
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (by_kind[k] && ranges_overlap(wr, tensor_range(by_kind[k])))
      return gk_fail(GK_ERR_ALIASING, "%s: workspace overlaps argument '%s'", gk_op_name(plan->desc.op),
                     gk_arg_name((gk_arg_kind)k));
  s = check_index_values(plan, by_kind);
  if (s != GK_SUCCESS) return s;
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
