// libFuzzer target for the plan API: the input bytes become an op
// description (every field can be set to ordinary or extreme values), then,
// when gk_plan_create accepts it, the plan's tensors with fuzzed layouts
// (contiguous, transposed, padded, negative, zero, random or overflowing
// strides, views sharing memory, a wrong dtype, shape, rank, device or
// alignment, missing, repeated or unexpected arguments), which go to
// gk_plan_check and gk_plan_run with a workspace of gk_plan_workspace_size()
// bytes.
//
// Each tensor gets its own allocation holding exactly the elements its view
// reaches, so AddressSanitizer reports a kernel that the checks let through
// and that then reads or writes outside a declared tensor. A call that is
// rejected must leave every tensor as it was (gradkern.h: nothing is written
// by a rejected call), and gk_plan_check and gk_plan_run must agree on the
// tensors; either broken rule aborts.
//
// Sizes are bounded so that each input runs in about a millisecond: plans
// whose tensors exceed MAX_NUMEL elements, or whose workspace exceeds
// MAX_WORKSPACE bytes, are created and queried but not run.
#include "core/internal.h"  // plan->args: each argument's dtype and role

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// MAX_ARGS: one tensor per argument kind, and one passed twice or foreign.
enum { MAX_NUMEL = 4096, MAX_EXTENT = 1 << 16, MAX_WORKSPACE = 64 << 20, MAX_ARGS = GK_ARG_COUNT_ + 1 };

// The input, read a byte at a time; 0 once it is used up.
typedef struct bytes {
  const uint8_t *p;
  size_t n;
} bytes;

static uint8_t next(bytes *b) {
  if (!b->n) return 0;
  b->n--;
  return *b->p++;
}

// Small values mostly, the edges of the type sometimes.
static int64_t fuzz_int(bytes *b, bool wide) {
  static const int64_t edges[] = {INT_MIN, INT_MAX, -100, -101, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 4096,
                                  4097, 1 << 20, (int64_t)1 << 31, (int64_t)1 << 40, ((int64_t)1 << 40) + 1,
                                  INT64_MAX / 2, INT64_MIN, INT64_MAX};
  uint8_t v = next(b);
  if (v < 200) return (int64_t)(v % 20) - 2;  // -2 .. 17
  int64_t e = edges[(v - 200) % (sizeof edges / sizeof *edges)];
  return wide ? e : (int64_t)(int)e;  // an int field keeps the low 32 bits
}

static double fuzz_double(bytes *b) {
  static const double values[] = {0,   1,     -1,     0.5,     2,         1e-5,    1e-6, 20,   10000, 0.1, 0.9,
                                  -0.0, 1e-30, 1e300, -1e300, 5e-324,   NAN,     INFINITY, -INFINITY, 100, 3};
  return values[next(b) % (sizeof values / sizeof *values)];
}

// The description's fields the fuzzer may set.
typedef enum { F_INT, F_I64, F_DBL } field_type;
typedef struct field {
  size_t offset;
  field_type type;
} field;
#define INT_FIELD(f) {offsetof(gk_op_desc, f), F_INT}
#define I64_FIELD(f) {offsetof(gk_op_desc, f), F_I64}
#define DBL_FIELD(f) {offsetof(gk_op_desc, f), F_DBL}
static const field fields[] = {
    INT_FIELD(op), INT_FIELD(direction), INT_FIELD(dtype), INT_FIELD(backend), INT_FIELD(rank),
    I64_FIELD(shape[0]), I64_FIELD(shape[1]), I64_FIELD(shape[2]), I64_FIELD(shape[3]),
    I64_FIELD(shape[GK_MAX_RANK - 1]), INT_FIELD(accumulate),
    INT_FIELD(act.approximate), DBL_FIELD(act.beta), DBL_FIELD(act.threshold),
    INT_FIELD(gated.form), INT_FIELD(gated.dim),
    INT_FIELD(norm.normalized_rank), DBL_FIELD(norm.eps), INT_FIELD(norm.has_weight), INT_FIELD(norm.has_bias),
    I64_FIELD(linear.out_features), INT_FIELD(linear.has_bias),
    I64_FIELD(matmul.n), INT_FIELD(matmul.trans_a), INT_FIELD(matmul.trans_b), INT_FIELD(matmul.shared_b),
    INT_FIELD(softmax.dim), INT_FIELD(index_dtype),
    INT_FIELD(ce.reduction), I64_FIELD(ce.ignore_index), DBL_FIELD(ce.label_smoothing), INT_FIELD(ce.fused_grad),
    DBL_FIELD(ce.grad_scale),
    I64_FIELD(embedding.num_embeddings), I64_FIELD(embedding.dim), I64_FIELD(embedding.padding_idx),
    INT_FIELD(rope.layout), INT_FIELD(rope.pairing), DBL_FIELD(rope.theta), I64_FIELD(rope.offset),
    I64_FIELD(attn.kv_heads), INT_FIELD(attn.causal), DBL_FIELD(attn.scale),
    INT_FIELD(binary.b_rank), I64_FIELD(binary.b_shape[0]), I64_FIELD(binary.b_shape[1]),
    I64_FIELD(binary.b_shape[2]), DBL_FIELD(binary.alpha),
    I64_FIELD(conv.width), INT_FIELD(conv.channel_last), INT_FIELD(conv.has_bias), INT_FIELD(conv.silu),
    INT_FIELD(conv.has_initial_state), INT_FIELD(conv.has_final_state),
    I64_FIELD(scan.d_state), INT_FIELD(scan.b_layout), INT_FIELD(scan.c_layout), I64_FIELD(scan.groups),
    INT_FIELD(scan.has_D), INT_FIELD(scan.has_z), INT_FIELD(scan.has_delta_bias), INT_FIELD(scan.delta_softplus),
    INT_FIELD(scan.has_initial_state), INT_FIELD(scan.has_final_state), I64_FIELD(scan.chunk_size),
    INT_FIELD(act.from_output)};

// A description: an op, direction, dtype and shape set with
// gk_op_desc_init, then up to 15 fields overwritten.
static void fuzz_desc(bytes *b, gk_op_desc *d) {
  gk_op op = (gk_op)(next(b) % GK_OP_COUNT_);
  gk_direction dir = (gk_direction)(next(b) & 1);
  gk_dtype dtype = (gk_dtype)(next(b) % 4);
  int rank = next(b) % (GK_MAX_RANK + 1);
  int64_t shape[GK_MAX_RANK];
  for (int i = 0; i < rank; i++) shape[i] = next(b) % 9;  // 0 .. 8
  if (gk_op_desc_init(d, op, dir, dtype, rank, shape) != GK_SUCCESS) abort();  // valid by construction
  for (int n = next(b) % 16; n > 0; n--) {
    const field *f = &fields[next(b) % (sizeof fields / sizeof *fields)];
    char *p = (char *)d + f->offset;
    if (f->type == F_INT) *(int *)p = (int)fuzz_int(b, false);
    else if (f->type == F_I64) *(int64_t *)p = fuzz_int(b, true);
    else *(double *)p = fuzz_double(b);
  }
}

// A tensor of one argument and the allocation behind it.
typedef struct tensor {
  gk_arg_kind kind;
  gk_tensor t;
  unsigned char *base;  // owned allocation (NULL when the data lies in another tensor's)
  size_t bytes;         // of base
} tensor;

// Element offsets [lo, hi] the view reaches, in 128 bits (no overflow).
static void span(const gk_tensor *t, __int128 *lo, __int128 *hi) {
  *lo = *hi = 0;
  for (int i = 0; i < t->rank; i++) {
    __int128 s = (__int128)(t->shape[i] - 1) * t->strides[i];
    if (s < 0) *lo += s;
    else *hi += s;
  }
}

static int64_t numel(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n) || n > MAX_NUMEL) return -1;
  return n;
}

// A value for element i of an input (state r): ordinary numbers mostly,
// and indices in -2 .. 9 for the integer dtypes.
static void fill(const gk_tensor *t, uint64_t r) {
  static const float values[] = {0, 1, -1, 0.5f, -2, 3, 0.125f, -0.25f, 1e-3f, 7, 1e4f, -1e4f, NAN, INFINITY};
  int64_t idx[GK_MAX_RANK] = {0}, n = gk_tensor_numel(t);
  size_t es = gk_dtype_size(t->dtype);
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0;
    for (int i = 0; i < t->rank; i++) off += idx[i] * t->strides[i];
    unsigned char *p = (unsigned char *)t->data + off * (int64_t)es;
    r = r * 6364136223846793005u + 1442695040888963407u;
    unsigned v = (unsigned)(r >> 33);
    float f = values[v % (v % 4 ? 8 : sizeof values / sizeof *values)];  // non-finite rarely
    switch (t->dtype) {
    case GK_F32: memcpy(p, &f, 4); break;
    case GK_F64: { double x = f; memcpy(p, &x, 8); break; }
    case GK_F16: { uint16_t h = gk_f32_to_f16(f); memcpy(p, &h, 2); break; }
    case GK_BF16: { uint16_t h = gk_f32_to_bf16(f); memcpy(p, &h, 2); break; }
    case GK_I32: { int32_t x = (int32_t)(v % 12) - 2; memcpy(p, &x, 4); break; }
    case GK_I64: { int64_t x = (int64_t)(v % 12) - 2; memcpy(p, &x, 8); break; }
    }
    for (int i = t->rank - 1; i >= 0 && ++idx[i] == t->shape[i]; i--) idx[i] = 0;
  }
}

// s times dim n (at least 1), INT64_MAX past int64: only an empty tensor
// has such dims, and the library refuses its strides then.
static int64_t times(int64_t s, int64_t n) {
  int64_t p;
  return __builtin_mul_overflow(s, n > 0 ? n : 1, &p) ? INT64_MAX : p;
}

// Strides for t's shape by layout `mode` (0: contiguous).
static void set_strides(bytes *b, gk_tensor *t, int mode) {
  int r = t->rank, dim = r ? next(b) % r : 0;
  int64_t s = 1;
  for (int i = r - 1; i >= 0; i--) {  // contiguous row-major
    t->strides[i] = s;
    s = times(s, t->shape[i]);
  }
  switch (mode) {
  case 1:  // column-major (the transpose of every pair of dims)
    s = 1;
    for (int i = 0; i < r; i++) {
      t->strides[i] = s;
      s = times(s, t->shape[i]);
    }
    break;
  case 2:  // gaps: each dim's stride one more than the span of those after it
    s = 1;
    for (int i = r - 1; i >= 0; i--) {
      t->strides[i] = s;
      s = times(s, t->shape[i]);
      if (s < INT64_MAX) s++;
    }
    break;
  case 3: if (r) t->strides[dim] = -t->strides[dim]; break;
  case 4: if (r) t->strides[dim] = 0; break;  // broadcast
  case 5:
    for (int i = 0; i < r; i++) t->strides[i] = (int64_t)(next(b) % 13) - 6;
    break;
  // Past what the library's byte span (int64) holds when the dim has 2
  // or more elements, whatever the element size: it must refuse the view.
  case 6: if (r) t->strides[dim] = next(b) & 1 ? ((int64_t)1 << 62) + 1 : -((int64_t)1 << 62) - 1; break;
  }
}

// Build the tensor of argument `kind`: the plan's shape and dtype, changed
// now and then, in a fuzzed layout, possibly a view into an earlier tensor.
static bool make_tensor(bytes *b, const gk_plan *plan, gk_arg_kind kind, tensor *ts, int nts, tensor *out) {
  const gk_arg_spec *spec = &plan->args[kind];
  memset(out, 0, sizeof *out);
  out->kind = kind;
  gk_tensor *t = &out->t;
  t->dtype = spec->dtype;
  t->rank = spec->rank;
  memcpy(t->shape, spec->shape, sizeof t->shape);
  uint8_t how = next(b);
  switch (how % 32) {  // 0 .. 27 leave the argument as the plan wants it
  case 28: t->dtype = (gk_dtype)(how / 32 % 7); break;  // 6: not a dtype
  case 29:  // one more along a dim (a dim at INT64_MAX stays: past int64)
    if (t->rank && t->shape[how / 32 % t->rank] < INT64_MAX) t->shape[how / 32 % t->rank] += 1;
    break;
  case 30: t->device = GK_DEVICE_CUDA; break;
  case 31: t->rank = how / 32 % 2 ? t->rank + 1 : 9; break;  // 9: past GK_MAX_RANK
  }
  if (numel(spec->rank, spec->shape) < 0) return false;  // too big to run
  if (t->rank > GK_MAX_RANK || numel(t->rank, t->shape) < 0) return true;  // refused by rank or shape: no data
  uint8_t mode = next(b);
  set_strides(b, t, mode % 8);
  size_t es = gk_dtype_size(t->dtype) ? gk_dtype_size(t->dtype) : 1;
  __int128 lo, hi;
  span(t, &lo, &hi);
  // A view the library must refuse, or find empty: memory for one element
  // (all that a correct library could touch), left as it is.
  // (Compared by division: the span times the element size can pass even
  // 2^127 when a stride is near INT64_MAX.)
  bool refused = mode % 8 == 6 && hi - lo + 1 > (__int128)INT64_MAX / (__int128)es;
  if (refused) {
    lo = hi = 0;
  } else if (hi - lo >= MAX_EXTENT) {
    set_strides(b, t, 0);
    span(t, &lo, &hi);
    // Still too far only for an empty tensor (a dim 0, others large): one
    // element, as nothing of it may be touched.
    if (hi - lo >= MAX_EXTENT) lo = hi = 0;
  }
  size_t nbytes = (size_t)(hi - lo + 1) * es;
  // A view into an earlier tensor's allocation, when it fits there: the
  // very same view (in-place) or one at another position.
  int j = nts ? next(b) % (nts + 4) : nts;
  if (mode >= 128 && j < nts && ts[j].base && nbytes <= ts[j].bytes) {
    if (mode & 64 && ts[j].t.rank == t->rank && !memcmp(ts[j].t.shape, t->shape, sizeof t->shape)) {
      memcpy(t->strides, ts[j].t.strides, sizeof t->strides);
      t->data = ts[j].t.data;
    } else {
      size_t at = (next(b) % (ts[j].bytes - nbytes + 1)) / es * es;
      t->data = ts[j].base + at + (size_t)(-lo) * es;
    }
    return true;
  }
  bool misalign = (mode & 0x70) == 0x70 && es > 1;
  out->bytes = nbytes + misalign;
  out->base = malloc(out->bytes);
  if (!out->base) abort();
  t->data = out->base + misalign + (size_t)(-lo) * es;
  if (!refused) fill(t, next(b) * 0x9e3779b97f4a7c15u + (uint64_t)kind);
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bytes b = {data, size};
  gk_set_num_threads(1 + next(&b) % 3);
  gk_op_desc d;
  fuzz_desc(&b, &d);
  gk_plan *plan;
  if (gk_plan_create(&d, &plan) != GK_SUCCESS) return 0;
  gk_plan_info info;
  size_t ws;
  if (gk_plan_get_info(plan, &info) != GK_SUCCESS || gk_plan_get_desc(plan, &d) != GK_SUCCESS ||
      gk_plan_workspace_size(plan, &ws) != GK_SUCCESS)
    abort();  // these cannot fail on a created plan

  // One tensor per argument the plan takes (nts of them), as far as they
  // are small enough to run.
  tensor ts[GK_ARG_COUNT_];
  int nts = 0;
  bool small = ws <= MAX_WORKSPACE;
  for (int k = 0; k < GK_ARG_COUNT_ && small; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    if (gk_plan_arg_shape(plan, (gk_arg_kind)k, &rank, shape) != GK_SUCCESS) abort();
    if (rank < 0) continue;
    if (rank != plan->args[k].rank || memcmp(shape, plan->args[k].shape, (size_t)rank * sizeof *shape)) abort();
    small = make_tensor(&b, plan, (gk_arg_kind)k, ts, nts, &ts[nts]);
    nts++;
  }
  if (small) {
    gk_arg args[MAX_ARGS];
    int n = 0;
    for (int i = 0; i < nts; i++) args[n++] = (gk_arg){ts[i].kind, ts[i].t};
    // Now and then one argument missing, passed twice, or one the op does not take.
    uint8_t change = next(&b), which = next(&b);
    if (change == 1 && n) {
      n--;
      args[which % (n + 1)] = args[n];
    } else if (change == 2 && n) {
      args[n] = args[which % n];
      n++;
    } else if (change == 3 && n) {
      args[n++] = (gk_arg){(gk_arg_kind)(which % (GK_ARG_COUNT_ + 1)), ts[0].t};
    }

    // Snapshot every allocation to tell whether a rejected call wrote.
    size_t total = 1;
    for (int i = 0; i < nts; i++) total += ts[i].bytes;
    unsigned char *before = malloc(total);
    if (!before) abort();
    for (size_t i = 0, at = 0; i < (size_t)nts; at += ts[i++].bytes)
      if (ts[i].bytes) memcpy(before + at, ts[i].base, ts[i].bytes);

    void *w = NULL;
    if (ws && posix_memalign(&w, 64, ws)) abort();
    gk_status checked = gk_plan_check(plan, args, n);
    gk_status ran = gk_plan_run(plan, args, n, w, ws);
    if (checked != GK_SUCCESS && ran != checked) abort();  // run re-checks the same way
    for (size_t i = 0, at = 0; ran != GK_SUCCESS && i < (size_t)nts; at += ts[i++].bytes)
      if (ts[i].bytes && memcmp(before + at, ts[i].base, ts[i].bytes)) abort();  // a rejected call wrote
    free(w);
    free(before);
  }
  for (int i = 0; i < nts; i++) free(ts[i].base);
  gk_plan_destroy(plan);
  return 0;
}
