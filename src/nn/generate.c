// The Mamba and LLaMA LMs fed a prompt in one pass and then one token at a
// time (see generate.h), with the parameter layout of mamba.c and llama.c.
// Every product, norm, conv, scan, rotation, attention and softmax is a plan
// of the public API; only the appending of value vectors to the cache is a
// copy.
#include "generate.h"

#include "layers.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Memory freed together: every buffer of a state or of a pass.
typedef struct bufs {
  void **p;
  int n;
} bufs;

typedef struct mamba_layer {
  float *conv[2];          // (1, E, W-1): the last W-1 conv inputs, [cur] and the next
  float *scan[2];          // (1, E, N): the scan state, likewise
  float *A;                // (E, N) = -exp(A_log)
} mamba_layer;

typedef struct llama_layer {
  float *k, *v;            // (G, max_len, Dh): keys after RoPE, values
} llama_layer;

// Plans and activations for n tokens at once: n = 1 for a step, a prompt's
// length (or a piece of it) for a prompt. Rows are tokens.
typedef struct pass {
  int n;
  bufs mem;
  int32_t *index;          // (1, n) the tokens
  gk_plan *emb, *norm, *add;
  gk_plan *in, *conv, *xproj, *dtproj, *scan, *out;   // Mamba
  gk_plan *qkv, *o, *ug, *swiglu, *down;              // LLaMA
  float *h, *hn, *rstd, *o_out;                       // (n, D), (n, D), (n), (n, D)
  // Mamba: (n, 2E), (n, E), (n, R + 2N) and (n, E) with selection, (n, E)
  // zeros (the delta without selection), (n, E), (1, E, nchunks, N).
  float *xz, *xc, *dbl, *dt, *zeros, *y, *chunk;
  // LLaMA: (n, Q3), (n, H Dh) after RoPE, (n, H Dh), (1, H, n), (n, 2F), (n, F).
  float *qkvb, *q, *att, *lse, *ugb, *act;
} pass;

struct gk_gen {
  const gk_model *m;
  int max_len;             // LLaMA: the window, rows of the caches
  int pos;                 // LLaMA: tokens in the window (at positions 0 .. pos-1)
  int fed;                 // tokens fed in all
  int cur;                 // which of the Mamba state pairs holds the current state
  bufs mem;
  void *ws;                // workspace, grown to the largest plan's need
  size_t ws_bytes;
  float one;               // the scalar 1 the score scaling multiplies by
  gk_plan *fnorm, *head;   // final norm and LM head, on the last token's row
  float *hn, *rstd, *logits;  // (1, D), (1), (1, V)
  pass step;               // n = 1
  float *scores;           // LLaMA steps: (H, max_len)
  int32_t *window;         // LLaMA: the tokens in the window, max_len
  mamba_layer *ml;
  llama_layer *ll;
};

static const gk_param *lp(const gk_model *m, int l, const char *what) {
  char name[48];
  snprintf(name, sizeof name, "layers.%d.%s", l, what);
  return gk_model_param(m, name);
}

static gk_tensor pw(const gk_model *m, int l, const char *what) { return gk_pw(m, lp(m, l, what)); }

// `bytes` zeroed bytes, 64-byte aligned, owned by b.
static gk_status alloc(bufs *b, size_t bytes, void **out) {
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

// n zeroed floats owned by b.
static gk_status fresh(bufs *b, int64_t n, float **out) {
  void *p;
  gk_status s = alloc(b, sizeof(float) * (size_t)(n > 0 ? n : 0), &p);
  *out = p;
  return s;
}

static void bufs_free(bufs *b) {
  for (int i = 0; i < b->n; i++) free(b->p[i]);
  free(b->p);
  b->p = NULL;
  b->n = 0;
}

// Run p with the state's workspace, grown first when p needs more.
static gk_status exec(gk_gen *g, const gk_plan *p, const gk_arg *args, int nargs) {
  size_t ws;
  gk_status s = gk_plan_workspace_size(p, &ws);
  if (s != GK_SUCCESS) return s;
  if (ws > g->ws_bytes) {
    size_t bytes = (ws + 63) / 64 * 64;
    void *grown = aligned_alloc(64, bytes);
    if (!grown) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for a workspace of %zu bytes", ws);
    free(g->ws);
    g->ws = grown;
    g->ws_bytes = bytes;
  }
  return gk_plan_run(p, args, nargs, ws ? g->ws : NULL, ws);
}

// ---------------------------------------------------------------- passes

static int64_t nchunks(int64_t n) { return (n + 63) / 64; }

static void pass_free(pass *ps) {
  gk_plan *plans[] = {ps->emb, ps->norm, ps->add, ps->in, ps->conv, ps->xproj, ps->dtproj,
                      ps->scan, ps->out, ps->qkv, ps->o, ps->ug, ps->swiglu, ps->down};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
  bufs_free(&ps->mem);
  memset(ps, 0, sizeof *ps);
}

static gk_status mamba_pass_create(const gk_model_config *c, pass *ps) {
  int64_t n = ps->n, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank;
  bufs *b = &ps->mem;
  gk_status s;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, n, D, 2 * E);
  if ((s = gk_plan_create(&d, &ps->in)) != GK_SUCCESS) return s;
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, (int64_t[]){1, n, E});
  d.conv.width = c->d_conv;
  d.conv.channel_last = 1;
  d.conv.silu = 1;
  d.conv.has_initial_state = d.conv.has_final_state = c->d_conv > 1;
  if ((s = gk_plan_create(&d, &ps->conv)) != GK_SUCCESS) return s;
  if (c->selection) {
    d = gk_desc_linear(GK_FORWARD, n, E, R + 2 * N);
    if ((s = gk_plan_create(&d, &ps->xproj)) != GK_SUCCESS) return s;
    d = gk_desc_linear(GK_FORWARD, n, R, E);
    if ((s = gk_plan_create(&d, &ps->dtproj)) != GK_SUCCESS) return s;
  }
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3, (int64_t[]){1, E, n});
  d.scan.d_state = c->d_state;
  d.scan.b_layout = d.scan.c_layout = c->selection ? GK_SCAN_BATCH : GK_SCAN_SHARED;
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  d.scan.has_initial_state = d.scan.has_final_state = 1;
  d.scan.chunk_size = 64;
  if ((s = gk_plan_create(&d, &ps->scan)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, E, D);
  if ((s = gk_plan_create(&d, &ps->out)) != GK_SUCCESS) return s;
  if ((s = fresh(b, n * 2 * E, &ps->xz)) || (s = fresh(b, n * E, &ps->xc)) || (s = fresh(b, n * E, &ps->y)) ||
      (s = fresh(b, E * nchunks(n) * N, &ps->chunk)))
    return s;
  if (c->selection) {
    if ((s = fresh(b, n * (R + 2 * N), &ps->dbl)) || (s = fresh(b, n * E, &ps->dt))) return s;
  } else if ((s = fresh(b, n * E, &ps->zeros)) != GK_SUCCESS) {
    return s;
  }
  return GK_SUCCESS;
}

static gk_status llama_pass_create(const gk_model_config *c, pass *ps) {
  int64_t n = ps->n, D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, F = c->d_ff, Q3 = (H + 2 * G) * Dh;
  bufs *b = &ps->mem;
  gk_status s;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, n, D, Q3);
  if ((s = gk_plan_create(&d, &ps->qkv)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, H * Dh, D);
  if ((s = gk_plan_create(&d, &ps->o)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, D, 2 * F);
  if ((s = gk_plan_create(&d, &ps->ug)) != GK_SUCCESS) return s;
  gk_op_desc_init(&d, GK_OP_SWIGLU, GK_FORWARD, GK_F32, 2, (int64_t[]){n, 2 * F});
  if ((s = gk_plan_create(&d, &ps->swiglu)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, F, D);
  if ((s = gk_plan_create(&d, &ps->down)) != GK_SUCCESS) return s;
  if ((s = fresh(b, n * Q3, &ps->qkvb)) || (s = fresh(b, n * H * Dh, &ps->q)) || (s = fresh(b, n * H * Dh, &ps->att)) ||
      (s = fresh(b, H * n, &ps->lse)) || (s = fresh(b, n * 2 * F, &ps->ugb)) || (s = fresh(b, n * F, &ps->act)))
    return s;
  return GK_SUCCESS;
}

// Plans and buffers for passes of n tokens.
static gk_status pass_create(const gk_gen *g, int n, pass *ps) {
  const gk_model_config *c = &g->m->cfg;
  int64_t D = c->d_model;
  memset(ps, 0, sizeof *ps);
  ps->n = n;
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, (int64_t[]){1, n});
  d.index_dtype = GK_I32;
  d.embedding.num_embeddings = c->vocab;
  d.embedding.dim = D;
  gk_status s = gk_plan_create(&d, &ps->emb);
  d = gk_desc_rmsnorm(GK_FORWARD, n, D, c->norm_eps);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &ps->norm);
  d = gk_desc_add(n, D);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &ps->add);
  void *index = NULL;
  if (s == GK_SUCCESS) s = alloc(&ps->mem, sizeof(int32_t) * (size_t)n, &index);
  ps->index = index;
  if (s == GK_SUCCESS) s = fresh(&ps->mem, n * D, &ps->h);
  if (s == GK_SUCCESS) s = fresh(&ps->mem, n * D, &ps->hn);
  if (s == GK_SUCCESS) s = fresh(&ps->mem, n, &ps->rstd);
  if (s == GK_SUCCESS) s = fresh(&ps->mem, n * D, &ps->o_out);
  if (s == GK_SUCCESS) s = c->arch == GK_ARCH_MAMBA ? mamba_pass_create(c, ps) : llama_pass_create(c, ps);
  if (s != GK_SUCCESS) pass_free(ps);
  return s;
}

// ---------------------------------------------------------------- creation

static gk_status mamba_create(gk_gen *g) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t E = (int64_t)c->expand * c->d_model, N = c->d_state, W = c->d_conv;
  gk_status s;
  g->ml = calloc((size_t)c->n_layers, sizeof *g->ml);
  if (!g->ml) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state of the layers");
  for (int l = 0; l < c->n_layers; l++) {
    mamba_layer *L = &g->ml[l];
    for (int k = 0; k < 2; k++)
      if ((s = fresh(&g->mem, E * (W - 1), &L->conv[k])) || (s = fresh(&g->mem, E * N, &L->scan[k]))) return s;
    if ((s = fresh(&g->mem, E * N, &L->A)) != GK_SUCCESS) return s;
    // A = -exp(A_log), as the full forward computes it.
    const float *alog = m->w + lp(m, l, "A_log")->offset;
    for (int64_t i = 0; i < E * N; i++) L->A[i] = -expf(alog[i]);
  }
  return GK_SUCCESS;
}

static gk_status llama_create(gk_gen *g) {
  const gk_model_config *c = &g->m->cfg;
  int64_t H = c->heads, G = c->kv_heads, Dh = c->d_model / H;
  gk_status s;
  void *window;
  if ((s = fresh(&g->mem, H * (int64_t)g->max_len, &g->scores)) ||
      (s = alloc(&g->mem, sizeof(int32_t) * (size_t)g->max_len, &window)))
    return s;
  g->window = window;
  g->ll = calloc((size_t)c->n_layers, sizeof *g->ll);
  if (!g->ll) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state of the layers");
  for (int l = 0; l < c->n_layers; l++) {
    int64_t n = G * g->max_len * Dh;
    if ((s = fresh(&g->mem, n, &g->ll[l].k)) || (s = fresh(&g->mem, n, &g->ll[l].v))) return s;
  }
  return GK_SUCCESS;
}

gk_status gk_gen_create(const gk_model *m, int max_len, gk_gen **out) {
  if (!out) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_create: out is NULL");
  *out = NULL;
  if (!m || !m->w) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_create: the model has no weights");
  if (max_len < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "generate: max_len = %d must be >= 1", max_len);
  gk_gen *g = calloc(1, sizeof *g);
  if (!g) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state");
  g->m = m;
  g->max_len = m->cfg.arch == GK_ARCH_LLAMA ? max_len : 1;
  g->one = 1.0f;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, V = c->vocab;
  gk_op_desc d = gk_desc_rmsnorm(GK_FORWARD, 1, D, c->norm_eps);
  gk_status s = gk_plan_create(&d, &g->fnorm);
  d = gk_desc_linear(GK_FORWARD, 1, D, V);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &g->head);
  if (s == GK_SUCCESS) s = fresh(&g->mem, D, &g->hn);
  if (s == GK_SUCCESS) s = fresh(&g->mem, 1, &g->rstd);
  if (s == GK_SUCCESS) s = fresh(&g->mem, V, &g->logits);
  if (s == GK_SUCCESS) s = pass_create(g, 1, &g->step);
  if (s == GK_SUCCESS) s = c->arch == GK_ARCH_MAMBA ? mamba_create(g) : llama_create(g);
  if (s != GK_SUCCESS) {
    gk_gen_free(g);
    return s;
  }
  *out = g;
  return GK_SUCCESS;
}

void gk_gen_free(gk_gen *g) {
  if (!g) return;
  gk_plan_destroy(g->fnorm);
  gk_plan_destroy(g->head);
  pass_free(&g->step);
  bufs_free(&g->mem);
  free(g->ws);
  free(g->ml);
  free(g->ll);
  free(g);
}

int gk_gen_length(const gk_gen *g) { return g ? g->fed : 0; }

int gk_gen_context(const gk_gen *g) {
  if (!g) return 0;
  return g->m->cfg.arch == GK_ARCH_LLAMA ? g->pos : g->fed;
}

// ---------------------------------------------------------------- blocks

static gk_status rmsnorm(gk_gen *g, const pass *ps, float *x, gk_tensor w, float *y) {
  int64_t n = ps->n, D = g->m->cfg.d_model;
  return exec(g, ps->norm,
              (gk_arg[]){GK_A(GK_ARG_X, gk_t2(x, n, D)), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(y, n, D)),
                         GK_A(GK_ARG_RSTD, gk_t1(ps->rstd, n))}, 4);
}

// y (rows, out) = x w^T
static gk_status linear(gk_gen *g, const gk_plan *p, gk_tensor x, gk_tensor w, float *y, int64_t rows, int64_t out) {
  return exec(g, p, (gk_arg[]){GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(y, rows, out))}, 3);
}

// h += o_out
static gk_status residual(gk_gen *g, const pass *ps) {
  int64_t n = ps->n, D = g->m->cfg.d_model;
  return exec(g, ps->add,
              (gk_arg[]){GK_A(GK_ARG_A, gk_t2(ps->h, n, D)), GK_A(GK_ARG_B, gk_t2(ps->o_out, n, D)),
                         GK_A(GK_ARG_Y, gk_t2(ps->h, n, D))}, 3);
}

// The scan's (1, C, n) view of n rows `row` floats apart, starting at p.
static gk_tensor cols(float *p, int64_t C, int64_t n, int64_t row) {
  return gk_strided(p, 3, (int64_t[]){1, C, n}, (int64_t[]){n * row, 1, row});
}

// The pass's n tokens through the Mamba blocks, from the current states to
// the next (which become current).
static gk_status mamba_blocks(gk_gen *g, const pass *ps) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t n = ps->n, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv,
          row = R + 2 * N;
  int cur = g->cur, nxt = !cur;
  gk_status s = GK_SUCCESS;
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    mamba_layer *L = &g->ml[l];
    s = rmsnorm(g, ps, ps->h, pw(m, l, "norm"), ps->hn);
    if (s == GK_SUCCESS) s = linear(g, ps->in, gk_t2(ps->hn, n, D), pw(m, l, "in_proj"), ps->xz, n, 2 * E);
    // x: the first E of each xz row, (1, n, E)
    gk_tensor x = gk_strided(ps->xz, 3, (int64_t[]){1, n, E}, (int64_t[]){n * 2 * E, 2 * E, 1});
    gk_arg conv[6] = {GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, pw(m, l, "conv_w")),
                      GK_A(GK_ARG_BIAS, pw(m, l, "conv_b")), GK_A(GK_ARG_Y, gk_t3(ps->xc, 1, n, E)),
                      GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->conv[cur], 1, E, W - 1)),
                      GK_A(GK_ARG_FINAL_STATE, gk_t3(L->conv[nxt], 1, E, W - 1))};
    if (s == GK_SUCCESS) s = exec(g, ps->conv, conv, W > 1 ? 6 : 4);
    float *delta = ps->zeros;
    gk_tensor Bt, Ct;
    if (c->selection) {
      if (s == GK_SUCCESS) s = linear(g, ps->xproj, gk_t2(ps->xc, n, E), pw(m, l, "x_proj"), ps->dbl, n, row);
      // dt_proj reads the first R of each dbl row.
      gk_tensor dt_in = gk_strided(ps->dbl, 2, (int64_t[]){n, R}, (int64_t[]){row, 1});
      if (s == GK_SUCCESS) s = linear(g, ps->dtproj, dt_in, pw(m, l, "dt_proj"), ps->dt, n, E);
      delta = ps->dt;
      Bt = cols(ps->dbl + R, N, n, row);
      Ct = cols(ps->dbl + R + N, N, n, row);
    } else {
      Bt = pw(m, l, "B");
      Ct = pw(m, l, "C");
    }
    if (s == GK_SUCCESS)
      s = exec(g, ps->scan,
               (gk_arg[]){GK_A(GK_ARG_U, cols(ps->xc, E, n, E)), GK_A(GK_ARG_DELTA, cols(delta, E, n, E)),
                          GK_A(GK_ARG_A, gk_t2(L->A, E, N)), GK_A(GK_ARG_B, Bt), GK_A(GK_ARG_C, Ct),
                          GK_A(GK_ARG_D, pw(m, l, "D")), GK_A(GK_ARG_Z, cols(ps->xz + E, E, n, 2 * E)),
                          GK_A(GK_ARG_DELTA_BIAS, pw(m, l, "dt_bias")), GK_A(GK_ARG_Y, cols(ps->y, E, n, E)),
                          GK_A(GK_ARG_CHUNK_STATES, gk_t4(ps->chunk, 1, E, nchunks(n), N)),
                          GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->scan[cur], 1, E, N)),
                          GK_A(GK_ARG_FINAL_STATE, gk_t3(L->scan[nxt], 1, E, N))}, 12);
    if (s == GK_SUCCESS) s = linear(g, ps->out, gk_t2(ps->y, n, E), pw(m, l, "out_proj"), ps->o_out, n, D);
    if (s == GK_SUCCESS) s = residual(g, ps);
  }
  if (s == GK_SUCCESS) g->cur = nxt;
  return s;
}

// The plans whose shapes or options depend on the position p of the pass's
// first token: RoPE at offset p, and attention: over the p + 1 cached keys
// for a step (matmul, scale, softmax, matmul), or the attention op over the
// n tokens of a pass at p = 0.
typedef struct pos_plans {
  gk_plan *rope_q, *rope_k, *attn, *scores, *scale, *softmax, *mix;
} pos_plans;

static void pos_plans_free(pos_plans *pp) {
  gk_plan *plans[] = {pp->rope_q, pp->rope_k, pp->attn, pp->scores, pp->scale, pp->softmax, pp->mix};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
}

static gk_status pos_plans_create(const gk_gen *g, int64_t n, pos_plans *pp) {
  const gk_model_config *c = &g->m->cfg;
  int64_t H = c->heads, G = c->kv_heads, Dh = c->d_model / H, r = H / G, keys = g->pos + 1;
  memset(pp, 0, sizeof *pp);
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_ROPE, GK_FORWARD, GK_F32, 4, (int64_t[]){1, n, H, Dh});
  d.rope.layout = GK_ROPE_BTHD;
  d.rope.theta = c->rope_theta;
  d.rope.offset = g->pos;
  gk_status s = gk_plan_create(&d, &pp->rope_q);
  d.shape[2] = G;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->rope_k);
  if (n > 1) {
    gk_op_desc_init(&d, GK_OP_ATTENTION, GK_FORWARD, GK_F32, 4, (int64_t[]){1, H, n, Dh});
    d.attn.kv_heads = G;
    d.attn.causal = 1;
    if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->attn);
    if (s != GK_SUCCESS) pos_plans_free(pp);
    return s;
  }
  // scores (G, r, keys) = q (G, r, Dh) k^T, k (G, keys, Dh) the cache
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, Dh});
  d.matmul.n = keys;
  d.matmul.trans_b = 1;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->scores);
  gk_op_desc_init(&d, GK_OP_MUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, keys});
  d.binary.b_rank = 0;
  d.binary.alpha = 1 / sqrt((double)Dh);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->scale);
  gk_op_desc_init(&d, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, keys});
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->softmax);
  // att (G, r, Dh) = p (G, r, keys) v, v (G, keys, Dh) the cache
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, keys});
  d.matmul.n = Dh;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->mix);
  if (s != GK_SUCCESS) pos_plans_free(pp);
  return s;
}

// The pass's n tokens at positions pos .. pos + n - 1 through the LLaMA
// blocks, their keys and values into the caches. n > 1 only at pos = 0.
static gk_status llama_blocks(gk_gen *g, const pass *ps) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t n = ps->n, D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, r = H / G, F = c->d_ff,
          HD = H * Dh, GD = G * Dh, Q3 = HD + 2 * GD, p = g->pos, keys = p + 1, Lmax = g->max_len;
  pos_plans pp;
  gk_status s = pos_plans_create(g, n, &pp);
  if (s != GK_SUCCESS) return s;
  // Cache (G, Lmax, Dh): head j's row t at (j Lmax + t) Dh.
  int64_t head_stride = Lmax * Dh;
  gk_tensor scores = gk_t3(g->scores, G, r, keys), one = gk_strided(&g->one, 0, NULL, NULL);
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    llama_layer *L = &g->ll[l];
    s = rmsnorm(g, ps, ps->h, pw(m, l, "attn_norm"), ps->hn);
    if (s == GK_SUCCESS) s = linear(g, ps->qkv, gk_t2(ps->hn, n, D), pw(m, l, "wqkv"), ps->qkvb, n, Q3);
    // q | k | v rows of Q3; q and k viewed (1, n, heads, Dh).
    gk_tensor q_in = gk_strided(ps->qkvb, 4, (int64_t[]){1, n, H, Dh}, (int64_t[]){n * Q3, Q3, Dh, 1});
    gk_tensor k_in = gk_strided(ps->qkvb + HD, 4, (int64_t[]){1, n, G, Dh}, (int64_t[]){n * Q3, Q3, Dh, 1});
    if (s == GK_SUCCESS)
      s = exec(g, pp.rope_q, (gk_arg[]){GK_A(GK_ARG_X, q_in), GK_A(GK_ARG_Y, gk_t4(ps->q, 1, n, H, Dh))}, 2);
    // The new keys go straight into the cache, at rows p .. p + n - 1.
    gk_tensor k_new = gk_strided(L->k + p * Dh, 4, (int64_t[]){1, n, G, Dh},
                                 (int64_t[]){G * head_stride, Dh, head_stride, 1});
    if (s == GK_SUCCESS) s = exec(g, pp.rope_k, (gk_arg[]){GK_A(GK_ARG_X, k_in), GK_A(GK_ARG_Y, k_new)}, 2);
    for (int64_t t = 0; t < n; t++)
      for (int64_t j = 0; j < G; j++)
        memcpy(L->v + (j * Lmax + p + t) * Dh, ps->qkvb + t * Q3 + HD + GD + j * Dh, sizeof(float) * (size_t)Dh);
    if (n > 1 && s == GK_SUCCESS) {
      // Causal attention over the n tokens: Q (1, H, n, Dh) of q, K and V
      // (1, G, n, Dh) of the caches, O (1, H, n, Dh) written as (n, H Dh).
      int64_t cache[4] = {G * head_stride, head_stride, Dh, 1}, rows[4] = {n * HD, Dh, HD, 1};
      s = exec(g, pp.attn,
               (gk_arg[]){GK_A(GK_ARG_Q, gk_strided(ps->q, 4, (int64_t[]){1, H, n, Dh}, rows)),
                          GK_A(GK_ARG_K, gk_strided(L->k, 4, (int64_t[]){1, G, n, Dh}, cache)),
                          GK_A(GK_ARG_V, gk_strided(L->v, 4, (int64_t[]){1, G, n, Dh}, cache)),
                          GK_A(GK_ARG_Y, gk_strided(ps->att, 4, (int64_t[]){1, H, n, Dh}, rows)),
                          GK_A(GK_ARG_LSE, gk_t3(ps->lse, 1, H, n))}, 5);
    } else if (s == GK_SUCCESS) {
      int64_t cache_strides[3] = {head_stride, Dh, 1};
      gk_tensor k_all = gk_strided(L->k, 3, (int64_t[]){G, keys, Dh}, cache_strides);
      gk_tensor v_all = gk_strided(L->v, 3, (int64_t[]){G, keys, Dh}, cache_strides);
      // Query head h = j r + i reads kv head j: q viewed (G, r, Dh).
      s = exec(g, pp.scores,
               (gk_arg[]){GK_A(GK_ARG_A, gk_t3(ps->q, G, r, Dh)), GK_A(GK_ARG_B, k_all), GK_A(GK_ARG_Y, scores)}, 3);
      if (s == GK_SUCCESS)
        s = exec(g, pp.scale, (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, one), GK_A(GK_ARG_Y, scores)}, 3);
      if (s == GK_SUCCESS) s = exec(g, pp.softmax, (gk_arg[]){GK_A(GK_ARG_X, scores), GK_A(GK_ARG_Y, scores)}, 2);
      if (s == GK_SUCCESS)
        s = exec(g, pp.mix,
                 (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, v_all), GK_A(GK_ARG_Y, gk_t3(ps->att, G, r, Dh))},
                 3);
    }
    if (s == GK_SUCCESS) s = linear(g, ps->o, gk_t2(ps->att, n, HD), pw(m, l, "wo"), ps->o_out, n, D);
    if (s == GK_SUCCESS) s = residual(g, ps);
    if (s == GK_SUCCESS) s = rmsnorm(g, ps, ps->h, pw(m, l, "mlp_norm"), ps->hn);
    if (s == GK_SUCCESS) s = linear(g, ps->ug, gk_t2(ps->hn, n, D), pw(m, l, "w_up_gate"), ps->ugb, n, 2 * F);
    if (s == GK_SUCCESS)
      s = exec(g, ps->swiglu,
               (gk_arg[]){GK_A(GK_ARG_X, gk_t2(ps->ugb, n, 2 * F)), GK_A(GK_ARG_Y, gk_t2(ps->act, n, F))}, 2);
    if (s == GK_SUCCESS) s = linear(g, ps->down, gk_t2(ps->act, n, F), pw(m, l, "w_down"), ps->o_out, n, D);
    if (s == GK_SUCCESS) s = residual(g, ps);
  }
  pos_plans_free(&pp);
  return s;
}

// tokens[0 .. ps->n) through the model: embedding, blocks, then the final
// norm and the head on the last token's row into g->logits.
static gk_status run_pass(gk_gen *g, const pass *ps, const int32_t *tokens) {
  const gk_model *m = g->m;
  int64_t n = ps->n, D = m->cfg.d_model, V = m->cfg.vocab;
  memcpy(ps->index, tokens, sizeof *tokens * (size_t)n);
  gk_tensor idx;
  memset(&idx, 0, sizeof idx);
  idx.data = ps->index;
  idx.dtype = GK_I32;
  idx.rank = 2;
  idx.shape[0] = 1;
  idx.shape[1] = n;
  idx.strides[0] = n;
  idx.strides[1] = 1;
  gk_tensor emb = gk_pw(m, gk_model_param(m, "embedding"));
  gk_status s = exec(g, ps->emb,
                     (gk_arg[]){GK_A(GK_ARG_WEIGHT, emb), GK_A(GK_ARG_INDEX, idx),
                                GK_A(GK_ARG_Y, gk_t3(ps->h, 1, n, D))}, 3);
  if (s == GK_SUCCESS) s = m->cfg.arch == GK_ARCH_MAMBA ? mamba_blocks(g, ps) : llama_blocks(g, ps);
  if (s == GK_SUCCESS)
    s = exec(g, g->fnorm,
             (gk_arg[]){GK_A(GK_ARG_X, gk_t2(ps->h + (n - 1) * D, 1, D)),
                        GK_A(GK_ARG_WEIGHT, gk_pw(m, gk_model_param(m, "norm_f"))), GK_A(GK_ARG_Y, gk_t2(g->hn, 1, D)),
                        GK_A(GK_ARG_RSTD, gk_t1(g->rstd, 1))}, 4);
  if (s == GK_SUCCESS) s = linear(g, g->head, gk_t2(g->hn, 1, D), emb, g->logits, 1, V);
  return s;
}

// tokens through the model in one pass of n (a step when n = 1).
static gk_status feed(gk_gen *g, const int32_t *tokens, int n) {
  if (n == 1) return run_pass(g, &g->step, tokens);
  pass ps;
  gk_status s = pass_create(g, n, &ps);
  if (s != GK_SUCCESS) return s;
  s = run_pass(g, &ps, tokens);
  pass_free(&ps);
  return s;
}

// LLaMA: make the window the last `keep` of its pos tokens followed by
// tokens[0 .. n) (n <= max_len - keep), and run it through the model from
// position 0 in one pass.
static gk_status refill(gk_gen *g, int keep, const int32_t *tokens, int n) {
  memmove(g->window, g->window + g->pos - keep, sizeof *g->window * (size_t)keep);
  memcpy(g->window + keep, tokens, sizeof *tokens * (size_t)n);
  g->pos = 0;
  gk_status s = feed(g, g->window, keep + n);
  if (s == GK_SUCCESS) g->pos = keep + n;
  return s;
}

static gk_status check_tokens(const gk_gen *g, const int32_t *tokens, int n, const char *fn) {
  int64_t V = g->m->cfg.vocab;
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: token %d (at %d) is outside the vocabulary 0..%lld", fn, (int)tokens[i],
                     i, (long long)V - 1);
  if (n > INT_MAX - g->fed)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: feeding %d after %d would pass %d tokens", fn, n, g->fed, INT_MAX);
  return GK_SUCCESS;
}

gk_status gk_gen_prompt(gk_gen *g, const int32_t *tokens, int n, const float **logits) {
  if (!g || !tokens || !logits) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_prompt: state, tokens or logits is NULL");
  *logits = NULL;
  if (n < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_gen_prompt: n = %d; a prompt has at least 1 token", n);
  gk_status s = check_tokens(g, tokens, n, "gk_gen_prompt");
  if (s != GK_SUCCESS) return s;
  if (g->m->cfg.arch == GK_ARCH_MAMBA) {
    for (int done = 0; done < n && s == GK_SUCCESS; done += GK_GEN_PIECE)
      s = feed(g, tokens + done, n - done < GK_GEN_PIECE ? n - done : GK_GEN_PIECE);
  } else {
    // The window: the last max_len of its tokens and these.
    int take = n < g->max_len ? n : g->max_len, keep = g->pos < g->max_len - take ? g->pos : g->max_len - take;
    s = refill(g, keep, tokens + n - take, take);
  }
  if (s != GK_SUCCESS) return s;
  g->fed += n;
  *logits = g->logits;
  return GK_SUCCESS;
}

gk_status gk_gen_step(gk_gen *g, int32_t token, const float **logits) {
  if (!g || !logits) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_step: state or logits is NULL");
  *logits = NULL;
  gk_status s = check_tokens(g, &token, 1, "gk_gen_step");
  if (s != GK_SUCCESS) return s;
  if (g->m->cfg.arch == GK_ARCH_LLAMA) {
    if (g->pos == g->max_len) {
      // The window is full: restart it from its last max_len / 2 tokens and this one.
      s = refill(g, g->max_len / 2, &token, 1);
    } else {
      g->window[g->pos] = token;
      s = feed(g, &token, 1);
      if (s == GK_SUCCESS) g->pos++;
    }
  } else {
    s = feed(g, &token, 1);
  }
  if (s != GK_SUCCESS) return s;
  g->fed++;
  *logits = g->logits;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- sampling

typedef struct scored {
  float logit;
  int32_t token;
} scored;

// Larger logits first, then lower tokens: one fixed order.
static int by_logit(const void *pa, const void *pb) {
  const scored *a = pa, *b = pb;
  if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
  return (a->token > b->token) - (a->token < b->token);
}

gk_status gk_sample_token(const float *logits, int vocab, double temperature, int top_k, gk_rng *rng,
                          int32_t *token) {
  if (!logits || !rng || !token) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_sample_token: a pointer is NULL");
  if (vocab < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: vocab = %d must be >= 1", vocab);
  if (!(temperature >= 0) || !isfinite(temperature))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: temperature %g must be finite and >= 0", temperature);
  if (top_k < 0) return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: top_k = %d must be >= 0", top_k);
  for (int v = 0; v < vocab; v++)
    if (!isfinite(logits[v]))
      return gk_nn_fail(GK_ERR_NON_FINITE, "sample: the logit of token %d is %g, not finite", v, (double)logits[v]);
  if (temperature == 0 || top_k == 1) {
    int32_t best = 0;
    for (int v = 1; v < vocab; v++)
      if (logits[v] > logits[best]) best = v;
    *token = best;
    return GK_SUCCESS;
  }
  scored *s = malloc(sizeof *s * (size_t)vocab);
  if (!s) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "sample: no memory for %d logits", vocab);
  for (int v = 0; v < vocab; v++) s[v] = (scored){logits[v], v};
  qsort(s, (size_t)vocab, sizeof *s, by_logit);
  int k = top_k == 0 || top_k > vocab ? vocab : top_k;
  // Weights exp((x - max) / T) in f64: the largest is 1, so the sum is >= 1.
  double total = 0;
  for (int i = 0; i < k; i++) total += exp(((double)s[i].logit - s[0].logit) / temperature);
  double u = gk_rng_uniform(rng) * total, acc = 0;
  int32_t pick = s[k - 1].token;
  for (int i = 0; i < k; i++) {
    acc += exp(((double)s[i].logit - s[0].logit) / temperature);
    if (u < acc) {
      pick = s[i].token;
      break;
    }
  }
  free(s);
  *token = pick;
  return GK_SUCCESS;
}
