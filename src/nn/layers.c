// What the architectures and the generic model code share (see layers.h):
// the parameter table, tensor views, op descriptions, the training run's
// arena, plans and workspace, and generation's buffers, workspace and the
// ops every block runs.
#include "layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gk_status gk_model_add_param(gk_model *m, const char *name, int rank, int64_t d0, int64_t d1, bool decay) {
  gk_param *grown = realloc(m->params, sizeof *grown * (size_t)(m->nparams + 1));
  if (!grown) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "model: no memory for the parameter table");
  m->params = grown;
  gk_param *p = &m->params[m->nparams++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->rank = rank;
  p->shape[0] = d0;
  p->shape[1] = rank > 1 ? d1 : 1;
  p->numel = d0 * p->shape[1];
  p->decay = decay;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- tensors and plans

// Views are built by hand, not with gk_tensor_init, which would clear the
// message of an op that failed just before.
gk_tensor gk_strided(float *p, int rank, const int64_t *shape, const int64_t *strides) {
  gk_tensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = GK_F32;
  t.device = GK_DEVICE_CPU;
  t.rank = rank;
  for (int i = 0; i < rank; i++) {
    t.shape[i] = shape[i];
    t.strides[i] = strides[i];
  }
  return t;
}

gk_tensor gk_t1(float *p, int64_t a) { return gk_strided(p, 1, (int64_t[]){a}, (int64_t[]){1}); }

gk_tensor gk_t2(float *p, int64_t a, int64_t b) { return gk_strided(p, 2, (int64_t[]){a, b}, (int64_t[]){b, 1}); }

gk_tensor gk_t3(float *p, int64_t a, int64_t b, int64_t c) {
  return gk_strided(p, 3, (int64_t[]){a, b, c}, (int64_t[]){b * c, c, 1});
}

gk_tensor gk_t4(float *p, int64_t a, int64_t b, int64_t c, int64_t d) {
  return gk_strided(p, 4, (int64_t[]){a, b, c, d}, (int64_t[]){b * c * d, c * d, d, 1});
}

gk_tensor gk_pw(const gk_model *m, const gk_param *p) {
  return gk_strided(m->w + p->offset, p->rank, p->shape, (int64_t[]){p->rank > 1 ? p->shape[1] : 1, 1});
}

gk_tensor gk_pg(const gk_model *m, const gk_param *p) {
  return gk_strided(m->g + p->offset, p->rank, p->shape, (int64_t[]){p->rank > 1 ? p->shape[1] : 1, 1});
}

gk_op_desc gk_desc_linear(gk_direction dir, int64_t rows, int64_t in, int64_t out) {
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_LINEAR, dir, GK_F32, 2, (int64_t[]){rows, in});
  d.linear.out_features = out;
  d.linear.has_bias = 0;
  return d;
}

gk_op_desc gk_desc_rmsnorm(gk_direction dir, int64_t rows, int64_t dm, double eps) {
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_RMSNORM, dir, GK_F32, 2, (int64_t[]){rows, dm});
  d.norm.eps = eps;
  return d;
}

gk_op_desc gk_desc_add(int64_t rows, int64_t dm) {
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_ADD, GK_FORWARD, GK_F32, 2, (int64_t[]){rows, dm});
  return d;
}

static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

void gk_run_carve(gk_run *r, float **p, int64_t n) {
  *p = r->placing ? (float *)(void *)(r->arena + r->act_bytes) : NULL;
  r->act_bytes += round64((size_t)n * r->esize);
}

void gk_run_carve_f32(gk_run *r, float **p, int64_t n) {
  *p = r->placing ? (float *)(void *)(r->arena + r->act_total + r->f32_bytes) : NULL;
  r->f32_bytes += round64((size_t)n * sizeof(float));
}

float *gk_run_at(const gk_run *r, float *p, int64_t k) { return (float *)(void *)((char *)p + k * (int64_t)r->esize); }

// Ops with parameters that may stay f32 beside 16-bit activations.
static bool has_param_dtype(gk_op op) {
  return op == GK_OP_RMSNORM || op == GK_OP_LAYERNORM || op == GK_OP_LINEAR || op == GK_OP_SELECTIVE_SCAN;
}

gk_status gk_run_plan(gk_run *r, const gk_op_desc *d, gk_plan **out) {
  if (r->nplans == GK_RUN_MAX_PLANS)
    return gk_nn_fail(GK_ERR_INTERNAL, "model: more than %d plans in one run", GK_RUN_MAX_PLANS);
  gk_op_desc mixed = *d;
  mixed.backend = r->backend;
  if (r->dtype != GK_F32) {
    mixed.dtype = r->dtype;
    if (has_param_dtype(d->op)) mixed.param_dtype = GK_F32;
    if (d->op == GK_OP_SELECTIVE_SCAN) {
      if (d->scan.b_layout == GK_SCAN_SHARED) mixed.scan.b_dtype = GK_F32;
      if (d->scan.c_layout == GK_SCAN_SHARED) mixed.scan.c_dtype = GK_F32;
    }
  }
  gk_status s = gk_plan_create(&mixed, out);
  if (s != GK_SUCCESS) return s;
  r->plans[r->nplans++] = *out;
  size_t ws;
  gk_plan_workspace_size(*out, &ws);
  if (ws > r->ws_bytes) r->ws_bytes = ws;
  return GK_SUCCESS;
}

// The parameter of the model whose elements hold flat index i.
static int param_index_at(const gk_model *m, int64_t i) {
  for (int k = 0; k < m->nparams; k++)
    if (i >= m->params[k].offset && i < m->params[k].offset + m->params[k].numel) return k;
  return -1;
}

void gk_run_grads_ready(gk_run *r, int first, int n) {
  gk_model *m = r->m;
  for (int i = first; r->grad16 && i < first + n; i++) {
    if (!r->grad16[i]) continue;
    const gk_param *p = &m->params[i];
    const uint16_t *src = r->g16 + p->offset;
    float *dst = m->g + p->offset;
    if (r->dtype == GK_BF16)
      for (int64_t j = 0; j < p->numel; j++) dst[j] = gk_bf16_to_f32(src[j]);
    else
      for (int64_t j = 0; j < p->numel; j++) dst[j] = gk_f16_to_f32(src[j]);
    r->grad16[i] = false;
  }
  if (r->grads_ready) r->grads_ready(r->grads_ready_ctx, first, n);
}

void gk_run_on_grads_ready(gk_run *r, gk_grads_ready_fn fn, void *ctx) {
  r->grads_ready = fn;
  r->grads_ready_ctx = ctx;
}

// Whether op d takes argument `kind` in desc.param_dtype (f32 in a 16-bit run).
static bool takes_f32_param(const gk_op_desc *d, gk_arg_kind kind) {
  switch (d->op) {
  case GK_OP_RMSNORM:
  case GK_OP_LAYERNORM:
    return kind == GK_ARG_WEIGHT || kind == GK_ARG_BIAS || kind == GK_ARG_DWEIGHT || kind == GK_ARG_DBIAS;
  case GK_OP_LINEAR: return kind == GK_ARG_BIAS || kind == GK_ARG_DBIAS;
  case GK_OP_SELECTIVE_SCAN:
    if (kind == GK_ARG_B || kind == GK_ARG_DB) return d->scan.b_dtype == GK_F32;
    if (kind == GK_ARG_C || kind == GK_ARG_DC) return d->scan.c_dtype == GK_F32;
    return kind == GK_ARG_A || kind == GK_ARG_D || kind == GK_ARG_DELTA_BIAS || kind == GK_ARG_DA ||
           kind == GK_ARG_DD || kind == GK_ARG_DDELTA_BIAS;
  default: return false;
  }
}

// In a 16-bit run: the view t as the memory it points at holds it (see
// layers.h). A parameter's 16-bit gradient marks it for widening.
static gk_tensor mixed_view(gk_run *r, const gk_op_desc *d, gk_arg_kind kind, gk_tensor t) {
  if (t.dtype != GK_F32) return t;  // indices
  const gk_model *m = r->m;
  const char *p = t.data;
  const char *act = r->arena, *stats = r->arena + r->act_total, *end = stats + r->f32_bytes;
  if (p >= act && p < stats) t.dtype = r->dtype;
  else if (p >= stats && p < end) t.dtype = GK_F32;
  else {
    bool weight = t.data >= (void *)m->w && t.data < (void *)(m->w + m->n_total);
    bool grad = t.data >= (void *)m->g && t.data < (void *)(m->g + m->n_total);
    if ((weight || grad) && !takes_f32_param(d, kind)) {
      int64_t i = (const float *)t.data - (weight ? m->w : m->g);
      t.data = (weight ? r->w16 : r->g16) + i;
      t.dtype = r->dtype;
      int k = grad ? param_index_at(m, i) : -1;
      if (k >= 0) r->grad16[k] = true;
    }
  }
  return t;
}

// In a device run: the view t on the device, moved from the host weights or
// gradients to their device copy (every other view of the run is of its
// device buffers already).
static gk_tensor device_view(const gk_run *r, gk_tensor t) {
  const gk_model *m = r->m;
  const float *p = t.data;
  if (p >= m->w && p < m->w + m->n_total) t.data = m->dw + (p - m->w);
  else if (p >= m->g && p < m->g + m->n_total) t.data = m->dg + (p - m->g);
  t.device = r->device;
  return t;
}

gk_status gk_run_exec(gk_run *r, const gk_plan *p, const gk_arg *args, int nargs) {
  size_t ws;
  gk_plan_workspace_size(p, &ws);
  if (r->dtype == GK_F32 && r->backend == GK_BACKEND_AUTO) return gk_plan_run(p, args, nargs, ws ? r->ws : NULL, ws);
  enum { MAX_ARGS = 24 };
  if (nargs > MAX_ARGS) return gk_nn_fail(GK_ERR_INTERNAL, "model: %d arguments for one op (at most %d)", nargs, MAX_ARGS);
  gk_op_desc d;
  gk_plan_get_desc(p, &d);
  gk_arg moved[MAX_ARGS];
  for (int i = 0; i < nargs; i++)
    moved[i] = (gk_arg){args[i].kind, r->backend != GK_BACKEND_AUTO ? device_view(r, args[i].tensor)
                                                                    : mixed_view(r, &d, args[i].kind, args[i].tensor)};
  return gk_plan_run(p, moved, nargs, ws ? r->ws : NULL, ws);
}

// The device buffer of a device run holding p, and p's offset in it.
static gk_buffer *run_buffer(const gk_run *r, const void *p, size_t *offset) {
  gk_buffer *bufs[3] = {r->dev_arena, r->dev_ws, r->dev_tokens};
  for (int i = 0; i < 3; i++) {
    const char *base = bufs[i] ? gk_buffer_address(bufs[i]) : NULL;
    if (base && (const char *)p >= base && (const char *)p < base + gk_buffer_size(bufs[i])) {
      *offset = (size_t)((const char *)p - base);
      return bufs[i];
    }
  }
  return NULL;
}

// Bytes between host memory and p in the run's memory, either way (up: to p).
static gk_status run_copy(const gk_run *r, void *p, void *host, size_t bytes, bool up) {
  if (r->backend == GK_BACKEND_AUTO) {
    memcpy(up ? p : host, up ? host : p, bytes);
    return GK_SUCCESS;
  }
  size_t offset;
  gk_buffer *b = run_buffer(r, p, &offset);
  if (!b) return gk_nn_fail(GK_ERR_INTERNAL, "model: %p is in none of the run's device buffers", p);
  return up ? gk_buffer_upload(b, offset, host, bytes) : gk_buffer_download(b, offset, host, bytes);
}

gk_status gk_run_upload(const gk_run *r, void *p, const void *src, size_t bytes) {
  return run_copy(r, p, (void *)src, bytes, true);
}

gk_status gk_run_download(const gk_run *r, const void *p, void *dst, size_t bytes) {
  return run_copy(r, (void *)p, dst, bytes, false);
}

// ---------------------------------------------------------------- generation

gk_status gk_bufs_alloc(gk_bufs *b, size_t bytes, void **out) {
  *out = NULL;
  void **grown = realloc(b->p, sizeof *grown * (size_t)(b->n + 1));
  if (!grown) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the buffer table");
  b->p = grown;
  bytes = ((bytes ? bytes : 1) + 63) / 64 * 64;
  void *p = aligned_alloc(64, bytes);
  if (!p) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for %zu bytes", bytes);
  memset(p, 0, bytes);
  b->p[b->n++] = p;
  *out = p;
  return GK_SUCCESS;
}

gk_status gk_bufs_floats(gk_bufs *b, int64_t n, float **out) {
  void *p;
  gk_status s = gk_bufs_alloc(b, sizeof(float) * (size_t)(n > 0 ? n : 0), &p);
  *out = p;
  return s;
}

void gk_bufs_free(gk_bufs *b) {
  for (int i = 0; i < b->n; i++) free(b->p[i]);
  free(b->p);
  b->p = NULL;
  b->n = 0;
}

gk_status gk_ws_exec(gk_workspace *w, const gk_plan *p, const gk_arg *args, int nargs) {
  size_t ws;
  gk_status s = gk_plan_workspace_size(p, &ws);
  if (s != GK_SUCCESS) return s;
  if (ws > w->bytes) {
    size_t bytes = (ws + 63) / 64 * 64;
    void *grown = aligned_alloc(64, bytes);
    if (!grown) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for a workspace of %zu bytes", ws);
    free(w->p);
    w->p = grown;
    w->bytes = bytes;
  }
  return gk_plan_run(p, args, nargs, ws ? w->p : NULL, ws);
}

gk_status gk_ws_linear(gk_workspace *ws, const gk_plan *p, gk_tensor x, gk_tensor w, float *y, int64_t rows,
                       int64_t out) {
  return gk_ws_exec(ws, p, (gk_arg[]){GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(y, rows, out))},
                    3);
}

gk_status gk_pass_rmsnorm(const gk_gen_pass *ps, float *x, gk_tensor w, float *hn) {
  int64_t n = ps->n, D = ps->D;
  return gk_ws_exec(ps->ws, ps->norm,
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2(x, n, D)), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(hn, n, D)),
                               GK_A(GK_ARG_RSTD, gk_t1(ps->rstd, n))}, 4);
}

gk_status gk_pass_residual(const gk_gen_pass *ps) {
  int64_t n = ps->n, D = ps->D;
  return gk_ws_exec(ps->ws, ps->add,
                    (gk_arg[]){GK_A(GK_ARG_A, gk_t2(ps->h, n, D)), GK_A(GK_ARG_B, gk_t2(ps->o, n, D)),
                               GK_A(GK_ARG_Y, gk_t2(ps->h, n, D))}, 3);
}
