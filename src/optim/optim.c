// Optimizers over a list of tensors: AdamW, SGD, global-norm clipping.
//
// Each call checks every tensor before it writes any. The work is cut into
// CHUNK-element pieces of the tensors in list order, run on the thread pool;
// the updates are elementwise and the clipping norm sums per-piece f64
// partials in piece order, so nothing depends on the thread count.
//
// f32 and f16/bf16 (through f32 master weights) compute in f32 with torch's
// order of operations (torch.optim.AdamW / SGD, single-tensor path); f64 in
// f64. Scalars are formed in double as Python does, then cast to the compute
// type, as torch's kernels do.
//
// AdamW and clipping are one vectorized pass per piece (contiguous tensors
// of the compute type in place, others through a buffer), compiled per ISA
// level (isa.h); each piece's sum of squares runs over LANES f64 partial sums.
//
// Tensors on a device (all of a call on one device, each inside one buffer
// of the backend that serves it) are handed, after the same checks, to that
// backend's hooks (gk_backend_table: adamw_step, sum_squares, scale); the
// scalars of AdamW, the norm, the clipping factor and the non-finite rule
// stay here, so host and device calls behave alike.
#include "../core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>  // sqrt of a float stays in float, as in torch's f32 kernels

enum { CHUNK = 4096 };

static bool is_half(gk_dtype dt) { return dt == GK_F16 || dt == GK_BF16; }
static gk_dtype state_dtype(gk_dtype dt) { return dt == GK_F64 ? GK_F64 : GK_F32; }

// ---------------------------------------------------------------- checks

// One list argument: `name[i]` tensors, written or only read.
typedef struct role {
  const char *name;
  const gk_tensor *t;  // array of n, or NULL
  bool written;
  enum { SAME_AS_PARAM, STATE, MASTER } dtype_rule;
} role;

// The backend whose buffers hold tensors of device type `device` (the first
// available one with device memory), or NULL: none, or the host.
static const gk_backend_table *device_backend(gk_device_type device) {
  const gk_backend_table *const *list;
  int count = gk_backends(&list);
  for (int k = 0; device != GK_DEVICE_CPU && k < count; k++)
    if (list[k]->device == device && list[k]->buffer_alloc && !gk_backend_unavailable_reason(list[k])) return list[k];
  return NULL;
}

static const char *device_name(gk_device_type device) {
  const gk_backend_table *b = device_backend(device);
  return device == GK_DEVICE_CPU ? "cpu" : b ? b->name : "no backend";
}

// Where the tensors of one call live: `device`, and the backend that runs
// them there (NULL on the host). `first` names the tensor that set it.
typedef struct placement {
  gk_device_type device;
  const gk_backend_table *backend;
  const char *first;
} placement;

static gk_status check_tensor(const char *fn, const char *name, int i, const gk_tensor *t, const gk_tensor *param,
                              gk_dtype want, const placement *at) {
  char got[160], need[160];
  if (t->rank < 0 || t->rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "%s: argument '%s[%d]' has rank %d, outside 0..%d", fn, name, i, t->rank,
                   GK_MAX_RANK);
  if (t->dtype != want)
    return gk_fail(GK_ERR_BAD_DTYPE, "%s: argument '%s[%d]' has dtype %s (%d), need %s for a %s parameter", fn, name,
                   i, gk_dtype_name(t->dtype), (int)t->dtype, gk_dtype_name(want), gk_dtype_name(param->dtype));
  if (t->device != at->device)
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s[%d]' is on device %d (%s), %s on device %d (%s): the tensors "
                   "of one call must be on one device", fn, name, i, (int)t->device, device_name(t->device),
                   at->first, (int)at->device, device_name(at->device));
  bool same = t->rank == param->rank;
  for (int d = 0; same && d < t->rank; d++) same = t->shape[d] == param->shape[d];
  if (!same)
    return gk_fail(t->rank == param->rank ? GK_ERR_BAD_SHAPE : GK_ERR_BAD_RANK,
                   "%s: argument '%s[%d]' has shape %s, its parameter has %s", fn, name, i,
                   gk_format_shape(got, sizeof got, t->rank, t->shape),
                   gk_format_shape(need, sizeof need, param->rank, param->shape));
  for (int d = 0; d < t->rank; d++)
    if (t->shape[d] < 0)
      return gk_fail(GK_ERR_BAD_SHAPE, "%s: argument '%s[%d]' has shape[%d] = %lld", fn, name, i, d,
                     (long long)t->shape[d]);
  if (gk_tensor_numel(t) == 0) return GK_SUCCESS;
  if (!t->data) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument '%s[%d]' has data = NULL", fn, name, i);
  if ((uintptr_t)t->data % gk_dtype_size(t->dtype) != 0)
    return gk_fail(GK_ERR_BAD_ALIGNMENT, "%s: argument '%s[%d]' data = %p is not aligned to its element size %zu", fn,
                   name, i, t->data, gk_dtype_size(t->dtype));
  if (at->backend) {
    uintptr_t lo, hi;
    void *handle;
    size_t offset;
    gk_tensor_byte_range(t, &lo, &hi);  // empty for a tensor with elements: its strides overflow
    if (lo == hi || !gk_buffer_find(at->backend, lo, hi, &handle, &offset))
      return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s[%d]' (data = %p) does not lie within one buffer of backend "
                     "'%s'", fn, name, i, t->data, at->backend->name);
  }
  return GK_SUCCESS;
}

// A tensor of the call as a byte range, for the overlap check.
typedef struct span {
  uintptr_t lo, hi;
  bool written;
  const char *name;
  int i;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// No written tensor overlaps itself or any other tensor of the call. Sorted
// by start, a range overlaps an earlier one iff it starts before the largest
// end so far; track that end over all ranges and over written ones.
static gk_status check_overlaps(const char *fn, span *spans, int count) {
  qsort(spans, (size_t)count, sizeof *spans, span_cmp);
  const span *far_all = NULL, *far_written = NULL;
  for (int k = 0; k < count; k++) {
    const span *s = &spans[k], *hit = NULL;
    if (s->lo == s->hi) continue;
    if (s->written && far_all && s->lo < far_all->hi) hit = far_all;
    else if (far_written && s->lo < far_written->hi) hit = far_written;
    if (hit)
      return gk_fail(GK_ERR_ALIASING, "%s: argument '%s[%d]' overlaps '%s[%d]' and one of them is written", fn,
                     s->name, s->i, hit->name, hit->i);
    if (!far_all || s->hi > far_all->hi) far_all = s;
    if (s->written && (!far_written || s->hi > far_written->hi)) far_written = s;
  }
  return GK_SUCCESS;
}

// Checks the written list `params` (named pname: floating tensors) and the
// other roles against it; *backend: the backend of their device (NULL: the
// host).
static gk_status check_lists(const char *fn, int n, const gk_tensor *params, const char *pname, const role *roles,
                             int nroles, const gk_backend_table **backend) {
  *backend = NULL;
  if (n < 0) return gk_fail(GK_ERR_INVALID_VALUE, "%s: n = %d is negative", fn, n);
  if (n > 0 && !params) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument '%s' is NULL with n = %d", fn, pname, n);
  for (int r = 0; r < nroles; r++)
    if (n > 0 && !roles[r].t && roles[r].dtype_rule != MASTER)
      return gk_fail(GK_ERR_NULL_POINTER, "%s: argument '%s' is NULL with n = %d", fn, roles[r].name, n);
  char first[64];
  snprintf(first, sizeof first, "%s[0]", pname);
  placement at = {n > 0 ? params[0].device : GK_DEVICE_CPU, NULL, first};
  if (at.device != GK_DEVICE_CPU && !(at.backend = device_backend(at.device)))
    return gk_fail(GK_ERR_BAD_DEVICE, "%s: argument '%s' is on device %d, which no available backend with device "
                   "memory serves", fn, first, (int)at.device);
  for (int i = 0; i < n; i++) {
    const gk_tensor *p = &params[i];
    if (p->dtype != GK_F32 && p->dtype != GK_F64 && p->dtype != GK_F16 && p->dtype != GK_BF16)
      return gk_fail(GK_ERR_BAD_DTYPE, "%s: argument '%s[%d]' has dtype %s (%d), not f32, f64, f16 or bf16", fn,
                     pname, i, gk_dtype_name(p->dtype), (int)p->dtype);
    gk_status s = check_tensor(fn, pname, i, p, p, p->dtype, &at);
    if (s != GK_SUCCESS) return s;
    for (int r = 0; r < nroles; r++) {
      const role *ro = &roles[r];
      if (ro->dtype_rule == MASTER) {
        if (!is_half(p->dtype)) {
          if (ro->t && ro->t[i].data)
            return gk_fail(GK_ERR_UNEXPECTED_ARGUMENT,
                           "%s: argument 'master[%d]' has data but params[%d] is %s: master weights are for f16 "
                           "and bf16 parameters (leave its data NULL)", fn, i, i, gk_dtype_name(p->dtype));
          continue;
        }
        if (!ro->t)
          return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'master' is NULL but params[%d] is %s and needs f32 master "
                         "weights", fn, i, gk_dtype_name(p->dtype));
      }
      gk_dtype want = ro->dtype_rule == SAME_AS_PARAM ? p->dtype : state_dtype(p->dtype);
      s = check_tensor(fn, ro->name, i, &ro->t[i], p, want, &at);
      if (s != GK_SUCCESS) return s;
    }
  }
  span *spans = malloc(sizeof(span) * (size_t)(n > 0 ? n : 1) * (size_t)(nroles + 1));
  if (!spans) return gk_fail(GK_ERR_OUT_OF_MEMORY, "%s: could not allocate the overlap check for n = %d", fn, n);
  int count = 0;
  for (int r = -1; r < nroles; r++) {
    const char *name = r < 0 ? pname : roles[r].name;
    const gk_tensor *list = r < 0 ? params : roles[r].t;
    bool written = r < 0 || roles[r].written;
    for (int i = 0; list && i < n; i++) {
      if (r >= 0 && roles[r].dtype_rule == MASTER && !is_half(params[i].dtype)) continue;
      if (written && gk_tensor_overlaps_itself(&list[i])) {
        char sh[160], st[160];
        free(spans);
        return gk_fail(GK_ERR_BAD_STRIDES, "%s: argument '%s[%d]' with shape %s and strides %s overlaps itself", fn,
                       name, i, gk_format_shape(sh, sizeof sh, list[i].rank, list[i].shape),
                       gk_format_shape(st, sizeof st, list[i].rank, list[i].strides));
      }
      span *s = &spans[count++];
      gk_tensor_byte_range(&list[i], &s->lo, &s->hi);
      s->written = written;
      s->name = name;
      s->i = i;
    }
  }
  gk_status s = check_overlaps(fn, spans, count);
  free(spans);
  *backend = at.backend;
  return s;
}

// A call on a device whose backend does not run `what` there.
static gk_status not_on_device(const char *fn, const gk_backend_table *backend, const char *what) {
  return gk_fail(GK_ERR_UNSUPPORTED, "%s: the tensors are on device %d (%s), where %s is not built (it runs on "
                 "host tensors)", fn, (int)backend->device, backend->name, what);
}

// Device calls take f32 tensors only (the hooks have no master weights).
static gk_status device_f32_only(const char *fn, const gk_backend_table *backend, const char *name, int n,
                                 const gk_tensor *t) {
  for (int i = 0; i < n; i++)
    if (t[i].dtype != GK_F32)
      return gk_fail(GK_ERR_UNSUPPORTED, "%s: argument '%s[%d]' is %s: on the %s device the optimizers take f32 "
                     "tensors only (f16/bf16 parameters with master weights, and f64, run on host tensors)", fn, name,
                     i, gk_dtype_name(t[i].dtype), backend->name);
  return GK_SUCCESS;
}

static gk_status check_hyper(const char *fn, const char *name, double v, double lo, bool lo_open, double hi,
                             bool hi_open) {
  bool ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: config->%s = %g is outside %s%g, %g%s", fn, name, v, lo_open ? "(" : "[",
                   lo, hi, hi_open ? ")" : "]");
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- pieces

// The list cut into CHUNK-element pieces: piece t is in tensor i with
// first[i] <= t < first[i + 1].
typedef struct pieces {
  int n;
  int64_t *first;
} pieces;

static gk_status pieces_make(const char *fn, int n, const gk_tensor *t, pieces *p) {
  p->n = n;
  p->first = malloc(sizeof(int64_t) * (size_t)(n + 1));
  if (!p->first) return gk_fail(GK_ERR_OUT_OF_MEMORY, "%s: could not allocate %d piece counts", fn, n + 1);
  p->first[0] = 0;
  for (int i = 0; i < n; i++) p->first[i + 1] = p->first[i] + gk_ceil_div(gk_tensor_numel(&t[i]), CHUNK);
  return GK_SUCCESS;
}

// Piece -> tensor index, element range [*start, *start + *count).
static int piece_of(const pieces *p, const gk_tensor *t, int64_t piece, int64_t *start, int64_t *count) {
  int lo = 0, hi = p->n - 1;
  while (lo < hi) {  // the last i with first[i] <= piece
    int mid = (lo + hi + 1) / 2;
    if (p->first[mid] <= piece) lo = mid;
    else hi = mid - 1;
  }
  *start = (piece - p->first[lo]) * CHUNK;
  *count = gk_min64(CHUNK, gk_tensor_numel(&t[lo]) - *start);
  return lo;
}

// ---------------------------------------------------------------- AdamW

gk_status gk_adamw_config_init(gk_adamw_config *c) {
  if (!c) return gk_fail(GK_ERR_NULL_POINTER, "gk_adamw_config_init: argument 'config' is NULL");
  c->lr = 1e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
  c->weight_decay = 1e-2;
  gk_clear_error();
  return GK_SUCCESS;
}

typedef struct adamw_job {
  const gk_adamw_config *c;
  const gk_tensor *params, *grads, *m, *v, *master;
  pieces pc;
  gk_adamw_scalars k;
} adamw_job;

// Elements [s, s + n) of t to update in place as T: t's own memory, or buf
// loaded (written back by gk_chunk_commit_*).
#define GK_DEFINE_CHUNK_RW(T, S)                                                           \
  GK_INLINE T *chunk_rw_##S(const gk_tensor *t, int64_t s, int64_t n, T *buf) {            \
    T *p = gk_chunk_out_##S(t, s, buf);                                                    \
    if (p == buf) gk_load_##S(t, s, n, buf);                                               \
    return p;                                                                              \
  }
GK_DEFINE_CHUNK_RW(float, f32)
GK_DEFINE_CHUNK_RW(double, f64)

// One piece of AdamW in T, in torch's order (single-tensor path):
//   p *= 1 - lr wd; m.lerp_(g, 1 - beta1); v = v beta2 + (1 - beta2) g g;
//   p += -step_size m / (sqrt(v) / bc2_sqrt + eps)
// lerp_ with weight w computes m + w (g - m) for |w| < 0.5, else
// g - (g - m) (1 - w). p *= 1 - lr wd is a loop of its own, so its rounding
// stands as in torch's separate mul_ (these files let the compiler fuse
// a * b + c). The piece stays in L1 between the two loops; both vectorize
// (sqrt is the correctly rounded vsqrtps/sqrtpd: optim.c is built with
// -fno-math-errno).
#define GK_DEFINE_ADAMW(T, S)                                                              \
  GK_INLINE void adamw_piece_##S(const adamw_job *j, T *restrict p, const T *restrict g,   \
                                 T *restrict m, T *restrict v, int64_t n) {                \
    const gk_adamw_config *c = j->c;                                                       \
    T decay = (T)j->k.decay, w = (T)(1 - c->beta1), b2 = (T)c->beta2, w2 = (T)(1 - c->beta2); \
    T bc2 = (T)j->k.bc2_sqrt, eps = (T)c->eps, neg_step = (T)(-j->k.step_size);           \
    for (int64_t e = 0; e < n; e++) p[e] *= decay;                                         \
    if (fabs(1 - c->beta1) < 0.5)                                                          \
      for (int64_t e = 0; e < n; e++) {                                                    \
        T mm = m[e] + w * (g[e] - m[e]), vv = v[e] * b2 + w2 * g[e] * g[e];                \
        m[e] = mm;                                                                         \
        v[e] = vv;                                                                         \
        p[e] += neg_step * mm / (sqrt(vv) / bc2 + eps);                                    \
      }                                                                                    \
    else                                                                                   \
      for (int64_t e = 0; e < n; e++) {                                                    \
        T mm = g[e] - (g[e] - m[e]) * ((T)1 - w), vv = v[e] * b2 + w2 * g[e] * g[e];       \
        m[e] = mm;                                                                         \
        v[e] = vv;                                                                         \
        p[e] += neg_step * mm / (sqrt(vv) / bc2 + eps);                                    \
      }                                                                                    \
  }                                                                                        \
  GK_INLINE void adamw_task_##S(const adamw_job *j, int i, int64_t s, int64_t n) {         \
    const gk_tensor *param = &j->params[i], *held = is_half(param->dtype) ? &j->master[i] : param; \
    T pbuf[CHUNK], gbuf[CHUNK], mbuf[CHUNK], vbuf[CHUNK];                                  \
    T *p = chunk_rw_##S(held, s, n, pbuf), *m = chunk_rw_##S(&j->m[i], s, n, mbuf);        \
    T *v = chunk_rw_##S(&j->v[i], s, n, vbuf);                                             \
    adamw_piece_##S(j, p, gk_chunk_in_##S(&j->grads[i], s, n, gbuf), m, v, n);            \
    gk_chunk_commit_##S(held, s, n, p, pbuf);                                              \
    if (held != param) gk_store_##S(param, s, n, p);                                       \
    gk_chunk_commit_##S(&j->m[i], s, n, m, mbuf);                                          \
    gk_chunk_commit_##S(&j->v[i], s, n, v, vbuf);                                          \
  }
GK_DEFINE_ADAMW(float, f32)
GK_DEFINE_ADAMW(double, f64)

GK_INLINE void adamw_task_body(void *ctx, int64_t piece) {
  const adamw_job *j = ctx;
  int64_t s, n;
  int i = piece_of(&j->pc, j->params, piece, &s, &n);
  if (j->params[i].dtype == GK_F64) adamw_task_f64(j, i, s, n);
  else adamw_task_f32(j, i, s, n);
}
GK_ISA_VARIANTS(adamw_task, (void *ctx, int64_t piece), (ctx, piece))

gk_status gk_adamw_step(const gk_adamw_config *config, int n, const gk_tensor *params, const gk_tensor *grads,
                        const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq, const gk_tensor *master,
                        int64_t step) {
  const char *fn = "gk_adamw_step";
  if (!config) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'config' is NULL", fn);
  gk_status s;
  if ((s = check_hyper(fn, "lr", config->lr, 0, false, INFINITY, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "beta1", config->beta1, 0, false, 1, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "beta2", config->beta2, 0, false, 1, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "eps", config->eps, 0, false, INFINITY, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "weight_decay", config->weight_decay, 0, false, INFINITY, true)) != GK_SUCCESS)
    return s;
  if (step < 1) return gk_fail(GK_ERR_INVALID_VALUE, "%s: step = %lld, steps count from 1", fn, (long long)step);
  const role roles[4] = {{"grads", grads, false, SAME_AS_PARAM},
                         {"exp_avg", exp_avg, true, STATE},
                         {"exp_avg_sq", exp_avg_sq, true, STATE},
                         {"master", master, true, MASTER}};
  const gk_backend_table *device;
  if ((s = check_lists(fn, n, params, "params", roles, 4, &device)) != GK_SUCCESS) return s;
  if (device && !device->adamw_step) return not_on_device(fn, device, "AdamW");
  if (device && (s = device_f32_only(fn, device, "params", n, params)) != GK_SUCCESS) return s;
  gk_adamw_scalars k = {1 - config->lr * config->weight_decay, config->lr / (1 - pow(config->beta1, (double)step)),
                        sqrt(1 - pow(config->beta2, (double)step))};
  if (device) {
    s = device->adamw_step(config, &k, n, params, grads, exp_avg, exp_avg_sq);
    if (s == GK_SUCCESS) gk_clear_error();
    return s;
  }
  adamw_job j = {config, params, grads, exp_avg, exp_avg_sq, master, {0, NULL}, k};
  if ((s = pieces_make(fn, n, params, &j.pc)) != GK_SUCCESS) return s;
  gk_parallel_for(j.pc.first[n], adamw_task, &j);
  free(j.pc.first);
  gk_clear_error();
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- SGD

gk_status gk_sgd_config_init(gk_sgd_config *c) {
  if (!c) return gk_fail(GK_ERR_NULL_POINTER, "gk_sgd_config_init: argument 'config' is NULL");
  memset(c, 0, sizeof *c);
  c->lr = 1e-3;
  gk_clear_error();
  return GK_SUCCESS;
}

typedef struct sgd_job {
  const gk_sgd_config *c;
  const gk_tensor *params, *grads, *buf, *master;
  pieces pc;
  bool first;
} sgd_job;

// torch: g = g + wd p; buf = first ? g : buf momentum + (1 - dampening) g;
// g = nesterov ? g + momentum buf : buf; p = p + (-lr) g
#define SGD_BODY(T)                                                                              \
  T wd = (T)c->weight_decay, mom = (T)c->momentum, keep = (T)(1 - c->dampening), neg_lr = (T)(-c->lr); \
  for (int64_t e = 0; e < n; e++) {                                                              \
    T g = gb[e];                                                                                 \
    if (c->weight_decay != 0) g = g + wd * pb[e];                                                \
    if (c->momentum != 0) {                                                                      \
      bb[e] = j->first ? g : bb[e] * mom + keep * g;                                             \
      g = c->nesterov ? g + mom * bb[e] : bb[e];                                                 \
    }                                                                                            \
    pb[e] = pb[e] + neg_lr * g;                                                                  \
  }

static void sgd_task(void *ctx, int64_t piece) {
  const sgd_job *j = ctx;
  const gk_sgd_config *c = j->c;
  int64_t s, n;
  int i = piece_of(&j->pc, j->params, piece, &s, &n);
  const gk_tensor *param = &j->params[i], *held = is_half(param->dtype) ? &j->master[i] : param;
  const gk_tensor *buf = c->momentum != 0 ? &j->buf[i] : NULL;
  if (param->dtype == GK_F64) {
    double pbuf[CHUNK], gbuf[CHUNK], bbuf[CHUNK];
    double *pb = pbuf, *gb = gbuf, *bb = bbuf;
    gk_load_f64(param, s, n, pb);
    gk_load_f64(&j->grads[i], s, n, gb);
    if (buf && !j->first) gk_load_f64(buf, s, n, bb);
    SGD_BODY(double)
    gk_store_f64(param, s, n, pb);
    if (buf) gk_store_f64(buf, s, n, bb);
    return;
  }
  float pbuf[CHUNK], gbuf[CHUNK], bbuf[CHUNK];
  float *pb = pbuf, *gb = gbuf, *bb = bbuf;
  gk_load_f32(held, s, n, pb);
  gk_load_f32(&j->grads[i], s, n, gb);
  if (buf && !j->first) gk_load_f32(buf, s, n, bb);
  SGD_BODY(float)
  gk_store_f32(held, s, n, pb);
  if (held != param) gk_store_f32(param, s, n, pb);
  if (buf) gk_store_f32(buf, s, n, bb);
}

gk_status gk_sgd_step(const gk_sgd_config *config, int n, const gk_tensor *params, const gk_tensor *grads,
                      const gk_tensor *momentum_buf, const gk_tensor *master, int64_t step) {
  const char *fn = "gk_sgd_step";
  if (!config) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'config' is NULL", fn);
  gk_status s;
  if ((s = check_hyper(fn, "lr", config->lr, 0, false, INFINITY, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "momentum", config->momentum, 0, false, INFINITY, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "dampening", config->dampening, -INFINITY, true, INFINITY, true)) != GK_SUCCESS ||
      (s = check_hyper(fn, "weight_decay", config->weight_decay, 0, false, INFINITY, true)) != GK_SUCCESS)
    return s;
  if (config->nesterov != 0 && config->nesterov != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: config->nesterov = %d is neither 0 nor 1", fn, config->nesterov);
  if (config->nesterov && (config->momentum <= 0 || config->dampening != 0))
    return gk_fail(GK_ERR_INVALID_VALUE,
                   "%s: config->nesterov = 1 needs momentum > 0 and dampening = 0 (momentum = %g, dampening = %g)", fn,
                   config->momentum, config->dampening);
  if (step < 1) return gk_fail(GK_ERR_INVALID_VALUE, "%s: step = %lld, steps count from 1", fn, (long long)step);
  bool mom = config->momentum != 0;
  if (!mom && momentum_buf && n > 0)
    return gk_fail(GK_ERR_UNEXPECTED_ARGUMENT, "%s: argument 'momentum_buf' is given but config->momentum = 0", fn);
  role roles[3] = {{"grads", grads, false, SAME_AS_PARAM},
                   {"master", master, true, MASTER},
                   {"momentum_buf", momentum_buf, true, STATE}};
  const gk_backend_table *device;
  if ((s = check_lists(fn, n, params, "params", roles, mom ? 3 : 2, &device)) != GK_SUCCESS) return s;
  if (device) return not_on_device(fn, device, "SGD");
  sgd_job j = {config, params, grads, momentum_buf, master, {0, NULL}, step == 1};
  if ((s = pieces_make(fn, n, params, &j.pc)) != GK_SUCCESS) return s;
  gk_parallel_for(j.pc.first[n], sgd_task, &j);
  free(j.pc.first);
  gk_clear_error();
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- clipping

typedef struct clip_job {
  const gk_tensor *grads;
  pieces pc;
  double *sums;   // per piece: sum of squares in f64
  double scale;
} clip_job;

enum { LANES = 16 };

// Sum of x^2 over a piece in f64, in LANES partial sums (lane = element % LANES)
// added in lane order: vectorizes, and the same bits on any thread count.
#define GK_DEFINE_SUMSQ(T, S)                                                              \
  GK_INLINE double sumsq_##S(const T *restrict x, int64_t n) {                             \
    double acc[LANES] = {0}, sum = 0;                                                      \
    int64_t e = 0;                                                                         \
    for (; e + LANES <= n; e += LANES)                                                     \
      for (int l = 0; l < LANES; l++) acc[l] += (double)x[e + l] * (double)x[e + l];       \
    for (int l = 0; e < n; e++, l++) acc[l] += (double)x[e] * (double)x[e];                \
    for (int l = 0; l < LANES; l++) sum += acc[l];                                         \
    return sum;                                                                            \
  }
GK_DEFINE_SUMSQ(float, f32)
GK_DEFINE_SUMSQ(double, f64)

// f32, f16 and bf16 widen exactly to f32 first.
GK_INLINE void sumsq_task_body(void *ctx, int64_t piece) {
  clip_job *j = ctx;
  int64_t s, n;
  int i = piece_of(&j->pc, j->grads, piece, &s, &n);
  const gk_tensor *g = &j->grads[i];
  if (g->dtype == GK_F64) {
    double buf[CHUNK];
    j->sums[piece] = sumsq_f64(gk_chunk_in_f64(g, s, n, buf), n);
  } else {
    float buf[CHUNK];
    j->sums[piece] = sumsq_f32(gk_chunk_in_f32(g, s, n, buf), n);
  }
}
GK_ISA_VARIANTS(sumsq_task, (void *ctx, int64_t piece), (ctx, piece))

// g *= scale, in f32 (f64 for f64)
#define GK_DEFINE_SCALE(T, S)                                                              \
  GK_INLINE void scale_piece_##S(const gk_tensor *g, int64_t s, int64_t n, T scale) {      \
    T buf[CHUNK], *x = chunk_rw_##S(g, s, n, buf);                                         \
    for (int64_t e = 0; e < n; e++) x[e] *= scale;                                         \
    gk_chunk_commit_##S(g, s, n, x, buf);                                                  \
  }
GK_DEFINE_SCALE(float, f32)
GK_DEFINE_SCALE(double, f64)

GK_INLINE void scale_task_body(void *ctx, int64_t piece) {
  const clip_job *j = ctx;
  int64_t s, n;
  int i = piece_of(&j->pc, j->grads, piece, &s, &n);
  const gk_tensor *g = &j->grads[i];
  if (g->dtype == GK_F64) scale_piece_f64(g, s, n, j->scale);
  else scale_piece_f32(g, s, n, (float)j->scale);
}
GK_ISA_VARIANTS(scale_task, (void *ctx, int64_t piece), (ctx, piece))

// The sum of squares of host gradients: the pieces' f64 sums added in piece
// order (j->pc and j->sums stay for the scaling; the caller frees them).
static gk_status host_sum_squares(const char *fn, int n, clip_job *j, double *sum) {
  gk_status s = pieces_make(fn, n, j->grads, &j->pc);
  if (s != GK_SUCCESS) return s;
  int64_t npieces = j->pc.first[n];
  j->sums = malloc(sizeof(double) * (size_t)(npieces > 0 ? npieces : 1));
  if (!j->sums) return gk_fail(GK_ERR_OUT_OF_MEMORY, "%s: could not allocate %lld partial sums", fn, (long long)npieces);
  gk_parallel_for(npieces, sumsq_task, j);
  for (int64_t p = 0; p < npieces; p++) *sum += j->sums[p];
  return GK_SUCCESS;
}

gk_status gk_clip_grad_norm(int n, const gk_tensor *grads, double max_norm, double *total_norm) {
  const char *fn = "gk_clip_grad_norm";
  if (!total_norm) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'total_norm' is NULL", fn);
  if (!(max_norm >= 0) || !isfinite(max_norm))
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: max_norm = %g must be finite and >= 0", fn, max_norm);
  const gk_backend_table *device;
  gk_status s = check_lists(fn, n, grads, "grads", NULL, 0, &device);
  if (s != GK_SUCCESS) return s;
  if (device && (!device->sum_squares || !device->scale)) return not_on_device(fn, device, "gradient clipping");
  if (device && (s = device_f32_only(fn, device, "grads", n, grads)) != GK_SUCCESS) return s;
  clip_job j = {grads, {0, NULL}, NULL, 1};
  double sum = 0;
  s = device ? device->sum_squares(n, grads, &sum) : host_sum_squares(fn, n, &j, &sum);
  if (s == GK_SUCCESS) {
    double norm = sqrt(sum);
    *total_norm = norm;
    j.scale = max_norm / (norm + 1e-6);
    if (!isfinite(norm))
      s = gk_fail(GK_ERR_NON_FINITE, "%s: the total norm of the %d gradients is %g: nothing was scaled", fn, n, norm);
    else if (j.scale < 1 && device) s = device->scale(n, grads, j.scale);
    else if (j.scale < 1) gk_parallel_for(j.pc.first[n], scale_task, &j);
  }
  free(j.sums);
  free(j.pc.first);
  if (s == GK_SUCCESS) gk_clear_error();
  return s;
}
