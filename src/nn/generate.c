// One-token steps of the Mamba and LLaMA LMs (see generate.h), with the
// parameter layout of mamba.c and llama.c. Every product, norm, conv, scan,
// rotation and softmax is a plan of the public API; only the appending of a
// value vector to the cache is a copy.
#include "generate.h"

#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mamba_layer {
  float *conv[2];          // (1, E, W-1): the last W-1 conv inputs, [cur] and the next
  float *scan[2];          // (1, E, N): the scan state, likewise
  float *A;                // (E, N) = -exp(A_log)
} mamba_layer;

typedef struct llama_layer {
  float *k, *v;            // (G, max_len, Dh): keys after RoPE, values
} llama_layer;

struct gk_gen {
  const gk_model *m;
  int max_len, pos;
  int cur;                 // which of the Mamba state pairs holds the current state
  float **allocs;          // every buffer, freed with the state
  int nallocs;
  void *ws;                // workspace, grown to the largest plan's need
  size_t ws_bytes;
  int32_t index[1];
  float one;               // the scalar 1 the score scaling multiplies by
  // Plans for every step: embedding, norm, head, residual add, and the
  // blocks' linear layers, conv, scan and SwiGLU.
  gk_plan *emb, *norm, *head, *add;
  gk_plan *in, *conv, *xproj, *dtproj, *scan, *out;
  gk_plan *qkv, *o, *ug, *swiglu, *down;
  // (1, .) activations of the current token.
  float *h, *hn, *rstd, *logits;
  float *xz, *xc, *dbl, *dt, *zeros, *y, *o_out, *chunk;  // Mamba
  float *qkvb, *q, *scores, *att, *ugb, *act;             // LLaMA
  mamba_layer *ml;
  llama_layer *ll;
};

static const gk_param *lp(const gk_model *m, int l, const char *what) {
  char name[48];
  snprintf(name, sizeof name, "layers.%d.%s", l, what);
  return gk_model_param(m, name);
}

static gk_tensor pw(const gk_model *m, int l, const char *what) { return gk_pw(m, lp(m, l, what)); }

// A zeroed buffer of n floats, owned by the state.
static gk_status fresh(gk_gen *g, int64_t n, float **out) {
  *out = NULL;
  float **grown = realloc(g->allocs, sizeof *grown * (size_t)(g->nallocs + 1));
  if (!grown) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the buffer table");
  g->allocs = grown;
  size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (!p) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for %lld floats", (long long)n);
  memset(p, 0, bytes);
  g->allocs[g->nallocs++] = p;
  *out = p;
  return GK_SUCCESS;
}

// Run p with the state's workspace, grown first when p needs more.
static gk_status exec(gk_gen *g, const gk_plan *p, const gk_arg *args, int nargs) {
  size_t ws;
  gk_status s = gk_plan_workspace_size(p, &ws);
  if (s != GK_SUCCESS) return s;
  if (ws > g->ws_bytes) {
    size_t bytes = (ws + 63) / 64 * 64;
    void *grown = aligned_alloc(64, bytes);
    if (!grown) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for a workspace of %zu bytes", ws);
    free(g->ws);
    g->ws = grown;
    g->ws_bytes = bytes;
  }
  return gk_plan_run(p, args, nargs, ws ? g->ws : NULL, ws);
}

// ---------------------------------------------------------------- creation

static gk_op_desc conv_desc(const gk_model_config *c) {
  gk_op_desc d;
  int64_t E = (int64_t)c->expand * c->d_model;
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, (int64_t[]){1, 1, E});
  d.conv.width = c->d_conv;
  d.conv.channel_last = 1;
  d.conv.silu = 1;
  d.conv.has_initial_state = d.conv.has_final_state = c->d_conv > 1;
  return d;
}

static gk_op_desc scan_desc(const gk_model_config *c) {
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3,
                  (int64_t[]){1, (int64_t)c->expand * c->d_model, 1});
  d.scan.d_state = c->d_state;
  d.scan.b_layout = d.scan.c_layout = c->selection ? GK_SCAN_BATCH : GK_SCAN_SHARED;
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  d.scan.has_initial_state = d.scan.has_final_state = 1;
  return d;
}

static gk_status mamba_create(gk_gen *g) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv;
  gk_status s = GK_SUCCESS;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, 1, D, 2 * E);
  if ((s = gk_plan_create(&d, &g->in)) != GK_SUCCESS) return s;
  d = conv_desc(c);
  if ((s = gk_plan_create(&d, &g->conv)) != GK_SUCCESS) return s;
  if (c->selection) {
    d = gk_desc_linear(GK_FORWARD, 1, E, R + 2 * N);
    if ((s = gk_plan_create(&d, &g->xproj)) != GK_SUCCESS) return s;
    d = gk_desc_linear(GK_FORWARD, 1, R, E);
    if ((s = gk_plan_create(&d, &g->dtproj)) != GK_SUCCESS) return s;
  }
  d = scan_desc(c);
  if ((s = gk_plan_create(&d, &g->scan)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, 1, E, D);
  if ((s = gk_plan_create(&d, &g->out)) != GK_SUCCESS) return s;
  if ((s = fresh(g, 2 * E, &g->xz)) || (s = fresh(g, E, &g->xc)) || (s = fresh(g, R + 2 * N, &g->dbl)) ||
      (s = fresh(g, E, &g->dt)) || (s = fresh(g, E, &g->zeros)) || (s = fresh(g, E, &g->y)) ||
      (s = fresh(g, D, &g->o_out)) || (s = fresh(g, E * N, &g->chunk)))
    return s;
  g->ml = calloc((size_t)c->n_layers, sizeof *g->ml);
  if (!g->ml) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for %d layers", c->n_layers);
  for (int l = 0; l < c->n_layers; l++) {
    mamba_layer *L = &g->ml[l];
    for (int k = 0; k < 2; k++)
      if ((s = fresh(g, E * (W - 1), &L->conv[k])) || (s = fresh(g, E * N, &L->scan[k]))) return s;
    if ((s = fresh(g, E * N, &L->A)) != GK_SUCCESS) return s;
    // A = -exp(A_log), as the full forward computes it.
    const float *alog = m->w + lp(m, l, "A_log")->offset;
    for (int64_t i = 0; i < E * N; i++) L->A[i] = -expf(alog[i]);
  }
  return GK_SUCCESS;
}

static gk_status llama_create(gk_gen *g) {
  const gk_model_config *c = &g->m->cfg;
  int64_t D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, F = c->d_ff, Q3 = (H + 2 * G) * Dh;
  gk_status s;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, 1, D, Q3);
  if ((s = gk_plan_create(&d, &g->qkv)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, 1, H * Dh, D);
  if ((s = gk_plan_create(&d, &g->o)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, 1, D, 2 * F);
  if ((s = gk_plan_create(&d, &g->ug)) != GK_SUCCESS) return s;
  gk_op_desc_init(&d, GK_OP_SWIGLU, GK_FORWARD, GK_F32, 2, (int64_t[]){1, 2 * F});
  if ((s = gk_plan_create(&d, &g->swiglu)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, 1, F, D);
  if ((s = gk_plan_create(&d, &g->down)) != GK_SUCCESS) return s;
  if ((s = fresh(g, Q3, &g->qkvb)) || (s = fresh(g, H * Dh, &g->q)) ||
      (s = fresh(g, H * (int64_t)g->max_len, &g->scores)) || (s = fresh(g, H * Dh, &g->att)) ||
      (s = fresh(g, 2 * F, &g->ugb)) || (s = fresh(g, F, &g->act)) || (s = fresh(g, D, &g->o_out)))
    return s;
  g->ll = calloc((size_t)c->n_layers, sizeof *g->ll);
  if (!g->ll) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for %d layers", c->n_layers);
  for (int l = 0; l < c->n_layers; l++) {
    int64_t n = G * g->max_len * Dh;
    if ((s = fresh(g, n, &g->ll[l].k)) || (s = fresh(g, n, &g->ll[l].v))) return s;
  }
  return GK_SUCCESS;
}

gk_status gk_gen_create(const gk_model *m, int max_len, gk_gen **out) {
  if (!out) return gk_fail(GK_ERR_NULL_POINTER, "gk_gen_create: out is NULL");
  *out = NULL;
  if (!m || !m->w) return gk_fail(GK_ERR_NULL_POINTER, "gk_gen_create: the model has no weights");
  if (max_len < 1) return gk_fail(GK_ERR_INVALID_VALUE, "generate: max_len = %d must be >= 1", max_len);
  gk_gen *g = calloc(1, sizeof *g);
  if (!g) return gk_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state");
  g->m = m;
  g->max_len = max_len;
  g->one = 1.0f;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, V = c->vocab;
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, (int64_t[]){1, 1});
  d.index_dtype = GK_I32;
  d.embedding.num_embeddings = V;
  d.embedding.dim = D;
  gk_status s = gk_plan_create(&d, &g->emb);
  d = gk_desc_rmsnorm(GK_FORWARD, 1, D, c->norm_eps);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &g->norm);
  d = gk_desc_linear(GK_FORWARD, 1, D, V);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &g->head);
  d = gk_desc_add(1, D);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &g->add);
  if (s == GK_SUCCESS) s = fresh(g, D, &g->h);
  if (s == GK_SUCCESS) s = fresh(g, D, &g->hn);
  if (s == GK_SUCCESS) s = fresh(g, 1, &g->rstd);
  if (s == GK_SUCCESS) s = fresh(g, V, &g->logits);
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
  gk_plan *plans[] = {g->emb, g->norm, g->head, g->add, g->in, g->conv, g->xproj, g->dtproj,
                      g->scan, g->out, g->qkv, g->o, g->ug, g->swiglu, g->down};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
  for (int i = 0; i < g->nallocs; i++) free(g->allocs[i]);
  free(g->allocs);
  free(g->ws);
  free(g->ml);
  free(g->ll);
  free(g);
}

int gk_gen_length(const gk_gen *g) { return g->pos; }

// ---------------------------------------------------------------- steps

static gk_status rmsnorm(gk_gen *g, float *x, gk_tensor w, float *y) {
  int64_t D = g->m->cfg.d_model;
  return exec(g, g->norm,
              (gk_arg[]){GK_A(GK_ARG_X, gk_t2(x, 1, D)), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(y, 1, D)),
                         GK_A(GK_ARG_RSTD, gk_t1(g->rstd, 1))}, 4);
}

static gk_status linear(gk_gen *g, const gk_plan *p, gk_tensor x, gk_tensor w, float *y, int64_t out) {
  return exec(g, p, (gk_arg[]){GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, w), GK_A(GK_ARG_Y, gk_t2(y, 1, out))}, 3);
}

// h += b
static gk_status residual(gk_gen *g, float *b) {
  int64_t D = g->m->cfg.d_model;
  return exec(g, g->add,
              (gk_arg[]){GK_A(GK_ARG_A, gk_t2(g->h, 1, D)), GK_A(GK_ARG_B, gk_t2(b, 1, D)),
                         GK_A(GK_ARG_Y, gk_t2(g->h, 1, D))}, 3);
}

// (1, C, 1) view of C floats.
static gk_tensor col(float *p, int64_t C) { return gk_strided(p, 3, (int64_t[]){1, C, 1}, (int64_t[]){C, 1, 1}); }

static gk_status mamba_step(gk_gen *g) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv;
  int cur = g->cur, nxt = !cur;
  gk_status s = GK_SUCCESS;
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    mamba_layer *L = &g->ml[l];
    s = rmsnorm(g, g->h, pw(m, l, "norm"), g->hn);
    if (s == GK_SUCCESS) s = linear(g, g->in, gk_t2(g->hn, 1, D), pw(m, l, "in_proj"), g->xz, 2 * E);
    gk_arg conv[6] = {GK_A(GK_ARG_X, gk_t3(g->xz, 1, 1, E)), GK_A(GK_ARG_WEIGHT, pw(m, l, "conv_w")),
                      GK_A(GK_ARG_BIAS, pw(m, l, "conv_b")), GK_A(GK_ARG_Y, gk_t3(g->xc, 1, 1, E)),
                      GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->conv[cur], 1, E, W - 1)),
                      GK_A(GK_ARG_FINAL_STATE, gk_t3(L->conv[nxt], 1, E, W - 1))};
    if (s == GK_SUCCESS) s = exec(g, g->conv, conv, W > 1 ? 6 : 4);
    float *delta = g->zeros;
    gk_tensor Bt, Ct;
    if (c->selection) {
      if (s == GK_SUCCESS) s = linear(g, g->xproj, gk_t2(g->xc, 1, E), pw(m, l, "x_proj"), g->dbl, R + 2 * N);
      if (s == GK_SUCCESS) s = linear(g, g->dtproj, gk_t2(g->dbl, 1, R), pw(m, l, "dt_proj"), g->dt, E);
      delta = g->dt;
      Bt = col(g->dbl + R, N);
      Ct = col(g->dbl + R + N, N);
    } else {
      Bt = pw(m, l, "B");
      Ct = pw(m, l, "C");
    }
    if (s == GK_SUCCESS)
      s = exec(g, g->scan,
               (gk_arg[]){GK_A(GK_ARG_U, col(g->xc, E)), GK_A(GK_ARG_DELTA, col(delta, E)),
                          GK_A(GK_ARG_A, gk_t2(L->A, E, N)), GK_A(GK_ARG_B, Bt), GK_A(GK_ARG_C, Ct),
                          GK_A(GK_ARG_D, pw(m, l, "D")), GK_A(GK_ARG_Z, col(g->xz + E, E)),
                          GK_A(GK_ARG_DELTA_BIAS, pw(m, l, "dt_bias")), GK_A(GK_ARG_Y, col(g->y, E)),
                          GK_A(GK_ARG_CHUNK_STATES, gk_t4(g->chunk, 1, E, 1, N)),
                          GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->scan[cur], 1, E, N)),
                          GK_A(GK_ARG_FINAL_STATE, gk_t3(L->scan[nxt], 1, E, N))}, 12);
    if (s == GK_SUCCESS) s = linear(g, g->out, gk_t2(g->y, 1, E), pw(m, l, "out_proj"), g->o_out, D);
    if (s == GK_SUCCESS) s = residual(g, g->o_out);
  }
  if (s == GK_SUCCESS) g->cur = nxt;
  return s;
}

// The plans whose shapes or options depend on the position p: RoPE at
// offset p, and attention over the p + 1 cached keys.
typedef struct pos_plans {
  gk_plan *rope_q, *rope_k, *scores, *scale, *softmax, *mix;
} pos_plans;

static void pos_plans_free(pos_plans *pp) {
  gk_plan_destroy(pp->rope_q);
  gk_plan_destroy(pp->rope_k);
  gk_plan_destroy(pp->scores);
  gk_plan_destroy(pp->scale);
  gk_plan_destroy(pp->softmax);
  gk_plan_destroy(pp->mix);
}

static gk_status pos_plans_create(const gk_gen *g, pos_plans *pp) {
  const gk_model_config *c = &g->m->cfg;
  int64_t H = c->heads, G = c->kv_heads, Dh = c->d_model / H, r = H / G, n = g->pos + 1;
  memset(pp, 0, sizeof *pp);
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_ROPE, GK_FORWARD, GK_F32, 4, (int64_t[]){1, 1, H, Dh});
  d.rope.layout = GK_ROPE_BTHD;
  d.rope.theta = c->rope_theta;
  d.rope.offset = g->pos;
  gk_status s = gk_plan_create(&d, &pp->rope_q);
  d.shape[2] = G;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->rope_k);
  // scores (G, r, n) = q (G, r, Dh) k^T, k (G, n, Dh) the cache
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, Dh});
  d.matmul.n = n;
  d.matmul.trans_b = 1;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->scores);
  gk_op_desc_init(&d, GK_OP_MUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, n});
  d.binary.b_rank = 0;
  d.binary.alpha = 1 / sqrt((double)Dh);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->scale);
  gk_op_desc_init(&d, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, n});
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->softmax);
  // att (G, r, Dh) = p (G, r, n) v, v (G, n, Dh) the cache
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 3, (int64_t[]){G, r, n});
  d.matmul.n = Dh;
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &pp->mix);
  if (s != GK_SUCCESS) pos_plans_free(pp);
  return s;
}

static gk_status llama_step(gk_gen *g) {
  const gk_model *m = g->m;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, r = H / G, F = c->d_ff, HD = H * Dh,
          GD = G * Dh, Q3 = HD + 2 * GD, p = g->pos, n = p + 1, Lmax = g->max_len;
  pos_plans pp;
  gk_status s = pos_plans_create(g, &pp);
  if (s != GK_SUCCESS) return s;
  gk_tensor scores = gk_t3(g->scores, G, r, n), one = gk_strided(&g->one, 0, NULL, NULL);
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    llama_layer *L = &g->ll[l];
    s = rmsnorm(g, g->h, pw(m, l, "attn_norm"), g->hn);
    if (s == GK_SUCCESS) s = linear(g, g->qkv, gk_t2(g->hn, 1, D), pw(m, l, "wqkv"), g->qkvb, Q3);
    if (s == GK_SUCCESS)
      s = exec(g, pp.rope_q,
               (gk_arg[]){GK_A(GK_ARG_X, gk_t4(g->qkvb, 1, 1, H, Dh)), GK_A(GK_ARG_Y, gk_t4(g->q, 1, 1, H, Dh))}, 2);
    // The new key goes straight into the cache, at row p of each kv head.
    int64_t head_stride = Lmax * Dh;
    gk_tensor k_new = gk_strided(L->k + p * Dh, 4, (int64_t[]){1, 1, G, Dh},
                                 (int64_t[]){G * head_stride, G * head_stride, head_stride, 1});
    if (s == GK_SUCCESS)
      s = exec(g, pp.rope_k, (gk_arg[]){GK_A(GK_ARG_X, gk_t4(g->qkvb + HD, 1, 1, G, Dh)), GK_A(GK_ARG_Y, k_new)}, 2);
    for (int64_t j = 0; j < G; j++)
      memcpy(L->v + (j * Lmax + p) * Dh, g->qkvb + HD + GD + j * Dh, sizeof(float) * (size_t)Dh);
    int64_t cache_strides[3] = {head_stride, Dh, 1};
    gk_tensor keys = gk_strided(L->k, 3, (int64_t[]){G, n, Dh}, cache_strides);
    gk_tensor values = gk_strided(L->v, 3, (int64_t[]){G, n, Dh}, cache_strides);
    // Query head h = j r + i reads kv head j: q viewed (G, r, Dh).
    if (s == GK_SUCCESS)
      s = exec(g, pp.scores,
               (gk_arg[]){GK_A(GK_ARG_A, gk_t3(g->q, G, r, Dh)), GK_A(GK_ARG_B, keys), GK_A(GK_ARG_Y, scores)}, 3);
    if (s == GK_SUCCESS)
      s = exec(g, pp.scale, (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, one), GK_A(GK_ARG_Y, scores)}, 3);
    if (s == GK_SUCCESS) s = exec(g, pp.softmax, (gk_arg[]){GK_A(GK_ARG_X, scores), GK_A(GK_ARG_Y, scores)}, 2);
    if (s == GK_SUCCESS)
      s = exec(g, pp.mix,
               (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, values), GK_A(GK_ARG_Y, gk_t3(g->att, G, r, Dh))}, 3);
    if (s == GK_SUCCESS) s = linear(g, g->o, gk_t2(g->att, 1, HD), pw(m, l, "wo"), g->o_out, D);
    if (s == GK_SUCCESS) s = residual(g, g->o_out);
    if (s == GK_SUCCESS) s = rmsnorm(g, g->h, pw(m, l, "mlp_norm"), g->hn);
    if (s == GK_SUCCESS) s = linear(g, g->ug, gk_t2(g->hn, 1, D), pw(m, l, "w_up_gate"), g->ugb, 2 * F);
    if (s == GK_SUCCESS)
      s = exec(g, g->swiglu,
               (gk_arg[]){GK_A(GK_ARG_X, gk_t2(g->ugb, 1, 2 * F)), GK_A(GK_ARG_Y, gk_t2(g->act, 1, F))}, 2);
    if (s == GK_SUCCESS) s = linear(g, g->down, gk_t2(g->act, 1, F), pw(m, l, "w_down"), g->o_out, D);
    if (s == GK_SUCCESS) s = residual(g, g->o_out);
  }
  pos_plans_free(&pp);
  return s;
}

gk_status gk_gen_step(gk_gen *g, int32_t token, const float **logits) {
  if (!g || !logits) return gk_fail(GK_ERR_NULL_POINTER, "gk_gen_step: state or logits is NULL");
  *logits = NULL;
  const gk_model *m = g->m;
  int64_t D = m->cfg.d_model, V = m->cfg.vocab;
  if (m->cfg.arch == GK_ARCH_LLAMA && g->pos >= g->max_len)
    return gk_fail(GK_ERR_INVALID_VALUE, "generate: the key/value cache holds max_len = %d tokens, all used",
                   g->max_len);
  if (token < 0 || token >= V)
    return gk_fail(GK_ERR_INVALID_VALUE, "generate: token %d is outside the vocabulary 0..%lld", (int)token,
                   (long long)V - 1);
  g->index[0] = token;
  gk_tensor idx;
  memset(&idx, 0, sizeof idx);
  idx.data = g->index;
  idx.dtype = GK_I32;
  idx.rank = 2;
  idx.shape[0] = idx.shape[1] = 1;
  idx.strides[0] = idx.strides[1] = 1;
  gk_tensor emb = gk_pw(m, gk_model_param(m, "embedding"));
  gk_status s = exec(g, g->emb,
                     (gk_arg[]){GK_A(GK_ARG_WEIGHT, emb), GK_A(GK_ARG_INDEX, idx),
                                GK_A(GK_ARG_Y, gk_t3(g->h, 1, 1, D))}, 3);
  if (s == GK_SUCCESS) s = m->cfg.arch == GK_ARCH_MAMBA ? mamba_step(g) : llama_step(g);
  if (s == GK_SUCCESS) s = rmsnorm(g, g->h, gk_pw(m, gk_model_param(m, "norm_f")), g->hn);
  if (s == GK_SUCCESS) s = linear(g, g->head, gk_t2(g->hn, 1, D), emb, g->logits, V);
  if (s != GK_SUCCESS) return s;
  g->pos++;
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
  if (!logits || !rng || !token) return gk_fail(GK_ERR_NULL_POINTER, "gk_sample_token: a pointer is NULL");
  if (vocab < 1) return gk_fail(GK_ERR_INVALID_VALUE, "sample: vocab = %d must be >= 1", vocab);
  if (!(temperature >= 0) || !isfinite(temperature))
    return gk_fail(GK_ERR_INVALID_VALUE, "sample: temperature %g must be finite and >= 0", temperature);
  if (top_k < 0) return gk_fail(GK_ERR_INVALID_VALUE, "sample: top_k = %d must be >= 0", top_k);
  for (int v = 0; v < vocab; v++)
    if (!isfinite(logits[v]))
      return gk_fail(GK_ERR_NON_FINITE, "sample: the logit of token %d is %g, not finite", v, (double)logits[v]);
  if (temperature == 0 || top_k == 1) {
    int32_t best = 0;
    for (int v = 1; v < vocab; v++)
      if (logits[v] > logits[best]) best = v;
    *token = best;
    return GK_SUCCESS;
  }
  scored *s = malloc(sizeof *s * (size_t)vocab);
  if (!s) return gk_fail(GK_ERR_OUT_OF_MEMORY, "sample: no memory for %d logits", vocab);
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
