// The LLaMA blocks of the LLaMA LM, on the plan API. Sizes: B batch, T
// steps, D d_model, H heads, G = kv_heads (dividing H), Dh = D / H, F the
// SwiGLU hidden size, Q3 = (H + 2G) Dh; rows = B T. One block:
//
//   hn = rmsnorm(h) w1                          (B, T, D)
//   q | k | v = hn Wqkv^T                       (B, T, Q3)
//   q', k' = rope(q), rope(k)                   (B, T, H, Dh), (B, T, G, Dh)
//   o = attention(q', k', v), causal, GQA       (B, H, T, Dh) viewed (B, T, H Dh)
//   h1 = h + o Wo^T
//   hn2 = rmsnorm(h1) w2
//   u | g = hn2 Wug^T                           (B, T, 2F)
//   h' = h1 + swiglu(u | g) Wdown^T             swiglu: u * silu(g)
//
// Attention reads q', k' and v through (B, heads, T, Dh) views of the
// (B, T, heads, Dh) buffers and writes o the same way: no transposes.
//
// The architecture's table (gk_llama_arch, at the end): the parameters and
// their initialisation, the training pass (forward, backward), and the
// generation step, the same block over a key/value cache.
#include "arch.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer_bufs {
  float *h1, *h_out;       // (B, T, D): after attention, after the MLP
  float *hn, *rstd, *hn2, *rstd2;
  float *qkv;              // (B, T, Q3)
  float *q, *k;            // after RoPE: (B, T, H, Dh), (B, T, G, Dh)
  float *att, *lse;        // (B, T, H Dh), (B, H, T)
  float *ug, *act;         // (B, T, 2F), (B, T, F)
} layer_bufs;

typedef struct llama_state {
  gk_plan *norm[2], *qkv[2], *rope_q[2], *rope_k[2], *attn[2], *o[2], *ug[2], *swiglu[2], *down[2], *add;
  layer_bufs *layer;
  const float *h0;
  float *tmp;              // (B, T, D)
  float *dtmp, *dhn, *dqkv, *dq, *dk, *datt, *dug, *dact;
} llama_state;

typedef struct dims {
  int64_t B, T, rows, D, H, G, Dh, F, Q3;
} dims;

static dims dims_of(const gk_run *r) {
  const gk_model_config *c = &r->m->cfg;
  dims d = {r->B, r->T, (int64_t)r->B * r->T, c->d_model, c->heads, c->kv_heads, c->d_model / c->heads, c->d_ff, 0};
  d.Q3 = (d.H + 2 * d.G) * d.Dh;
  return d;
}

// A layer's parameters, in the order declare adds them ("layers.<l>.<name>").
enum { P_ATTN_NORM, P_WQKV, P_WO, P_MLP_NORM, P_UP_GATE, P_DOWN, P_COUNT };

// Layer l's parameter in `slot`.
static const gk_param *lp(const gk_model *m, int l, int slot) {
  return &m->params[GK_PARAM_BLOCKS + l * P_COUNT + slot];
}

// Heads must split d_model into even head sizes; kv_heads (default heads)
// must divide heads; d_ff defaults to 8 D / 3 rounded up to 8, the RoPE base
// to 10000.
static gk_status llama_finish(gk_model_config *c) {
  if (c->heads < 1 || c->d_model % c->heads != 0 || (c->d_model / c->heads) % 2 != 0)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: heads = %d must divide d_model = %d into even head sizes",
                      c->heads, c->d_model);
  if (c->kv_heads < 1) c->kv_heads = c->heads;
  if (c->heads % c->kv_heads != 0)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: kv_heads = %d must divide heads = %d", c->kv_heads, c->heads);
  if (c->d_ff < 1) c->d_ff = (8 * c->d_model / 3 + 7) / 8 * 8;
  if (c->rope_theta <= 0) c->rope_theta = 10000.0;
  return GK_SUCCESS;
}

// The parameters of every layer, P_COUNT each in the order of the slots.
static gk_status llama_declare(gk_model *m) {
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, Dh = D / c->heads, Q3 = (c->heads + 2 * (int64_t)c->kv_heads) * Dh, F = c->d_ff;
  gk_status s = GK_SUCCESS;
  char name[48];
#define ADD(what, rank, d0, d1, decay)                                   \
  do {                                                                   \
    snprintf(name, sizeof name, "layers.%d.%s", l, what);                \
    if (s == GK_SUCCESS) s = gk_model_add_param(m, name, rank, d0, d1, decay); \
  } while (0)
  for (int l = 0; l < c->n_layers; l++) {
    ADD("attn_norm", 1, D, 1, false);
    ADD("wqkv", 2, Q3, D, true);
    ADD("wo", 2, D, c->heads * Dh, true);
    ADD("mlp_norm", 1, D, 1, false);
    ADD("w_up_gate", 2, 2 * F, D, true);
    ADD("w_down", 2, D, F, true);
  }
#undef ADD
  return s;
}

// normal(0, 0.02); the projections into the residual (wo, w_down) divided
// by sqrt(2 n_layers) (GPT-2's scaling); norms 1.
// The embedding and norm_f are drawn likewise, in table order.
static void llama_init(gk_model *m, uint64_t seed) {
  gk_rng g;
  gk_rng_seed(&g, seed);
  double residual = 0.02 / sqrt(2.0 * m->cfg.n_layers);
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    float *w = m->w + p->offset;
    bool norm = p->rank == 1;
    int slot = i >= GK_PARAM_BLOCKS ? (i - GK_PARAM_BLOCKS) % P_COUNT : -1;
    bool into_residual = slot == P_WO || slot == P_DOWN;
    for (int64_t j = 0; j < p->numel; j++)
      w[j] = norm ? 1.0f : (float)((into_residual ? residual : 0.02) * gk_rng_normal(&g));
  }
}

static gk_op_desc rope_desc(const gk_run *r, gk_direction dir, int64_t heads) {
  dims d = dims_of(r);
  gk_op_desc o;
  gk_op_desc_init(&o, GK_OP_ROPE, dir, GK_F32, 4, (int64_t[]){d.B, d.T, heads, d.Dh});
  o.rope.layout = GK_ROPE_BTHD;
  o.rope.theta = r->m->cfg.rope_theta;
  return o;
}

static gk_status llama_layout(gk_run *r) {
  const gk_model_config *c = &r->m->cfg;
  dims d = dims_of(r);
  llama_state *st = r->arch;
  if (!r->placing) {
    st = r->arch = calloc(1, sizeof *st);
    if (st) st->layer = calloc((size_t)c->n_layers, sizeof *st->layer);
    if (!st || !st->layer) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "llama: no memory for the run's state");
  }
  for (int l = 0; l < c->n_layers; l++) {
    layer_bufs *b = &st->layer[l];
    gk_run_carve(r, &b->h1, d.rows * d.D);
    gk_run_carve(r, &b->h_out, d.rows * d.D);
    gk_run_carve(r, &b->hn, d.rows * d.D);
    gk_run_carve_f32(r, &b->rstd, d.rows);
    gk_run_carve(r, &b->hn2, d.rows * d.D);
    gk_run_carve_f32(r, &b->rstd2, d.rows);
    gk_run_carve(r, &b->qkv, d.rows * d.Q3);
    gk_run_carve(r, &b->q, d.rows * d.H * d.Dh);
    gk_run_carve(r, &b->k, d.rows * d.G * d.Dh);
    gk_run_carve(r, &b->att, d.rows * d.H * d.Dh);
    gk_run_carve_f32(r, &b->lse, d.B * d.H * d.T);
    gk_run_carve(r, &b->ug, d.rows * 2 * d.F);
    gk_run_carve(r, &b->act, d.rows * d.F);
  }
  gk_run_carve(r, &st->tmp, d.rows * d.D);
  if (r->train) {
    gk_run_carve(r, &st->dtmp, d.rows * d.D);
    gk_run_carve(r, &st->dhn, d.rows * d.D);
    gk_run_carve(r, &st->dqkv, d.rows * d.Q3);
    gk_run_carve(r, &st->dq, d.rows * d.H * d.Dh);
    gk_run_carve(r, &st->dk, d.rows * d.G * d.Dh);
    gk_run_carve(r, &st->datt, d.rows * d.H * d.Dh);
    gk_run_carve(r, &st->dug, d.rows * 2 * d.F);
    gk_run_carve(r, &st->dact, d.rows * d.F);
  }
  if (r->placing) return GK_SUCCESS;
  gk_status s = GK_SUCCESS;
  gk_op_desc o;
  for (int dir = GK_FORWARD; dir <= (r->train ? GK_BACKWARD : GK_FORWARD) && s == GK_SUCCESS; dir++) {
    gk_direction dr = (gk_direction)dir;
    o = gk_desc_rmsnorm(dr, d.rows, d.D, c->norm_eps);
    s = gk_run_plan(r, &o, &st->norm[dir]);
    o = gk_desc_linear(dr, d.rows, d.D, d.Q3);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->qkv[dir]);
    o = rope_desc(r, dr, d.H);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->rope_q[dir]);
    o = rope_desc(r, dr, d.G);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->rope_k[dir]);
    gk_op_desc_init(&o, GK_OP_ATTENTION, dr, GK_F32, 4, (int64_t[]){d.B, d.H, d.T, d.Dh});
    o.attn.kv_heads = d.G;
    o.attn.causal = 1;
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->attn[dir]);
    o = gk_desc_linear(dr, d.rows, d.H * d.Dh, d.D);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->o[dir]);
    o = gk_desc_linear(dr, d.rows, d.D, 2 * d.F);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->ug[dir]);
    gk_op_desc_init(&o, GK_OP_SWIGLU, dr, GK_F32, 2, (int64_t[]){d.rows, 2 * d.F});
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->swiglu[dir]);
    o = gk_desc_linear(dr, d.rows, d.F, d.D);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->down[dir]);
  }
  o = gk_desc_add(d.rows, d.D);
  if (s == GK_SUCCESS) s = gk_run_plan(r, &o, &st->add);
  return s;
}

static void llama_free_run(gk_run *r) {
  llama_state *st = r->arch;
  if (st) free(st->layer);
  free(st);
  r->arch = NULL;
}

// (B, heads, T, Dh) view of a (B, T, row) buffer whose heads start at p.
static gk_tensor bhtd(float *p, const dims *d, int64_t heads, int64_t row) {
  return gk_strided(p, 4, (int64_t[]){d->B, heads, d->T, d->Dh}, (int64_t[]){d->T * row, d->Dh, row, 1});
}

// (B, T, heads, Dh) view of a (B, T, row) buffer whose heads start at p.
static gk_tensor bthd(float *p, const dims *d, int64_t heads, int64_t row) {
  return gk_strided(p, 4, (int64_t[]){d->B, d->T, heads, d->Dh}, (int64_t[]){d->T * row, row, d->Dh, 1});
}

static gk_status add(gk_run *r, const llama_state *st, const dims *d, float *a, float *b, float *y) {
  return gk_run_exec(r, st->add,
                     (gk_arg[]){GK_A(GK_ARG_A, gk_t2(a, d->rows, d->D)), GK_A(GK_ARG_B, gk_t2(b, d->rows, d->D)),
                                GK_A(GK_ARG_Y, gk_t2(y, d->rows, d->D))}, 3);
}

static gk_status llama_forward(gk_run *r, const float *h0, float **h_out) {
  gk_model *m = r->m;
  llama_state *st = r->arch;
  dims d = dims_of(r);
  int64_t HD = d.H * d.Dh, GD = d.G * d.Dh;
  st->h0 = h0;
  float *h = (float *)h0;
  gk_status s = GK_SUCCESS;
  for (int l = 0; l < m->cfg.n_layers && s == GK_SUCCESS; l++) {
    layer_bufs *b = &st->layer[l];
    s = gk_run_exec(r, st->norm[0],
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2(h, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_ATTN_NORM))),
                               GK_A(GK_ARG_Y, gk_t2(b->hn, d.rows, d.D)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd, d.rows))}, 4);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->qkv[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->hn, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_WQKV))),
                                 GK_A(GK_ARG_Y, gk_t2(b->qkv, d.rows, d.Q3))}, 3);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_q[0],
                      (gk_arg[]){GK_A(GK_ARG_X, bthd(b->qkv, &d, d.H, d.Q3)), GK_A(GK_ARG_Y, bthd(b->q, &d, d.H, HD))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_k[0],
                      (gk_arg[]){GK_A(GK_ARG_X, bthd(gk_run_at(r, b->qkv, HD), &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bthd(b->k, &d, d.G, GD))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->attn[0],
                      (gk_arg[]){GK_A(GK_ARG_Q, bhtd(b->q, &d, d.H, HD)), GK_A(GK_ARG_K, bhtd(b->k, &d, d.G, GD)),
                                 GK_A(GK_ARG_V, bhtd(gk_run_at(r, b->qkv, HD + GD), &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bhtd(b->att, &d, d.H, HD)), GK_A(GK_ARG_LSE, gk_t3(b->lse, d.B, d.H, d.T))}, 5);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->o[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->att, d.rows, HD)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_WO))),
                                 GK_A(GK_ARG_Y, gk_t2(st->tmp, d.rows, d.D))}, 3);
    if (s == GK_SUCCESS) s = add(r, st, &d, h, st->tmp, b->h1);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->norm[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->h1, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_MLP_NORM))),
                                 GK_A(GK_ARG_Y, gk_t2(b->hn2, d.rows, d.D)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd2, d.rows))}, 4);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->ug[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->hn2, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_UP_GATE))),
                                 GK_A(GK_ARG_Y, gk_t2(b->ug, d.rows, 2 * d.F))}, 3);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->swiglu[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->ug, d.rows, 2 * d.F)), GK_A(GK_ARG_Y, gk_t2(b->act, d.rows, d.F))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->down[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->act, d.rows, d.F)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_DOWN))),
                                 GK_A(GK_ARG_Y, gk_t2(st->tmp, d.rows, d.D))}, 3);
    if (s == GK_SUCCESS) s = add(r, st, &d, b->h1, st->tmp, b->h_out);
    h = b->h_out;
  }
  *h_out = h;
  return s;
}

// Linear backward: dx = dy W, dW = dy^T x.
static gk_status linear_bwd(gk_run *r, const gk_plan *p, gk_tensor dy, gk_tensor x, const gk_param *w, gk_tensor dx) {
  return gk_run_exec(r, p,
                     (gk_arg[]){GK_A(GK_ARG_DY, dy), GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, gk_pw(r->m, w)),
                                GK_A(GK_ARG_DX, dx), GK_A(GK_ARG_DWEIGHT, gk_pg(r->m, w))}, 5);
}

static gk_status norm_bwd(gk_run *r, const gk_plan *p, float *dy, float *x, const gk_param *w, float *rstd,
                          float *dx, const dims *d) {
  return gk_run_exec(r, p,
                     (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(dy, d->rows, d->D)), GK_A(GK_ARG_X, gk_t2(x, d->rows, d->D)),
                                GK_A(GK_ARG_WEIGHT, gk_pw(r->m, w)), GK_A(GK_ARG_RSTD, gk_t1(rstd, d->rows)),
                                GK_A(GK_ARG_DX, gk_t2(dx, d->rows, d->D)), GK_A(GK_ARG_DWEIGHT, gk_pg(r->m, w))}, 6);
}

static gk_status llama_backward(gk_run *r, float *dh) {
  gk_model *m = r->m;
  llama_state *st = r->arch;
  dims d = dims_of(r);
  int64_t HD = d.H * d.Dh, GD = d.G * d.Dh;
  gk_status s = GK_SUCCESS;
  for (int l = m->cfg.n_layers - 1; l >= 0 && s == GK_SUCCESS; l--) {
    layer_bufs *b = &st->layer[l];
    float *h_in = l ? st->layer[l - 1].h_out : (float *)st->h0;
    // MLP: dh is the gradient of h_out, and of h1 through the residual.
    s = linear_bwd(r, st->down[1], gk_t2(dh, d.rows, d.D), gk_t2(b->act, d.rows, d.F), lp(m, l, P_DOWN),
                   gk_t2(st->dact, d.rows, d.F));
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->swiglu[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->dact, d.rows, d.F)), GK_A(GK_ARG_X, gk_t2(b->ug, d.rows, 2 * d.F)),
                                 GK_A(GK_ARG_DX, gk_t2(st->dug, d.rows, 2 * d.F))}, 3);
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->ug[1], gk_t2(st->dug, d.rows, 2 * d.F), gk_t2(b->hn2, d.rows, d.D), lp(m, l, P_UP_GATE),
                     gk_t2(st->dhn, d.rows, d.D));
    if (s == GK_SUCCESS) s = norm_bwd(r, st->norm[1], st->dhn, b->h1, lp(m, l, P_MLP_NORM), b->rstd2, st->dtmp, &d);
    if (s == GK_SUCCESS) s = add(r, st, &d, dh, st->dtmp, dh);
    // Attention: dh is now the gradient of h1, and of h_in through the residual.
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->o[1], gk_t2(dh, d.rows, d.D), gk_t2(b->att, d.rows, HD), lp(m, l, P_WO),
                     gk_t2(st->datt, d.rows, HD));
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->attn[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bhtd(st->datt, &d, d.H, HD)), GK_A(GK_ARG_Q, bhtd(b->q, &d, d.H, HD)),
                                 GK_A(GK_ARG_K, bhtd(b->k, &d, d.G, GD)), GK_A(GK_ARG_V, bhtd(gk_run_at(r, b->qkv, HD + GD), &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bhtd(b->att, &d, d.H, HD)), GK_A(GK_ARG_LSE, gk_t3(b->lse, d.B, d.H, d.T)),
                                 GK_A(GK_ARG_DQ, bhtd(st->dq, &d, d.H, HD)), GK_A(GK_ARG_DK, bhtd(st->dk, &d, d.G, GD)),
                                 GK_A(GK_ARG_DV, bhtd(gk_run_at(r, st->dqkv, HD + GD), &d, d.G, d.Q3))}, 9);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_q[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bthd(st->dq, &d, d.H, HD)), GK_A(GK_ARG_DX, bthd(st->dqkv, &d, d.H, d.Q3))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_k[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bthd(st->dk, &d, d.G, GD)),
                                 GK_A(GK_ARG_DX, bthd(gk_run_at(r, st->dqkv, HD), &d, d.G, d.Q3))}, 2);
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->qkv[1], gk_t2(st->dqkv, d.rows, d.Q3), gk_t2(b->hn, d.rows, d.D), lp(m, l, P_WQKV),
                     gk_t2(st->dhn, d.rows, d.D));
    if (s == GK_SUCCESS) s = norm_bwd(r, st->norm[1], st->dhn, h_in, lp(m, l, P_ATTN_NORM), b->rstd, st->dtmp, &d);
    if (s == GK_SUCCESS) gk_run_grads_ready(r, GK_PARAM_BLOCKS + l * P_COUNT, P_COUNT);
    if (s == GK_SUCCESS) s = add(r, st, &d, dh, st->dtmp, dh);
  }
  return s;
}

// ---------------------------------------------------------------- generation
//
// Each layer keeps a key and a value cache, (G, max_len, Dh) each, max_len
// being the context window. A pass of n > 1 tokens (at position 0) fills
// the caches through the attention op (causal); a step appends the new
// token's key (after RoPE at its position) and value, and its queries attend
// to every cached key through matmul (q k^T), a scale, softmax and matmul
// (p v), the query heads grouped by the key/value head they share. Only the
// appending of value vectors to the cache is a copy.

typedef struct gen_layer {
  float *k, *v;            // (G, max_len, Dh): keys after RoPE, values
} gen_layer;

typedef struct gen_state {
  int64_t max_len;         // rows of the caches
  float one;               // the scalar 1 the score scaling multiplies by
  float *scores;           // steps: (H, max_len)
  gen_layer layer[];       // n_layers
} gen_state;

// A pass's plans and buffers: (n, Q3), (n, H Dh) after RoPE, (n, H Dh),
// (1, H, n), (n, 2F), (n, F).
typedef struct gen_pass {
  gk_plan *qkv, *o, *ug, *swiglu, *down;
  float *qkvb, *q, *att, *lse, *ugb, *act;
} gen_pass;

// The caches of every layer and the scores, zeroed.
static gk_status llama_gen_create(const gk_model *m, int max_len, gk_bufs *mem, void **state) {
  const gk_model_config *c = &m->cfg;
  int64_t H = c->heads, G = c->kv_heads, Dh = c->d_model / H;
  gk_status s;
  gen_state *st = calloc(1, sizeof *st + sizeof(gen_layer) * (size_t)c->n_layers);
  *state = st;
  if (!st) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state of the layers");
  st->max_len = max_len;
  st->one = 1.0f;
  if ((s = gk_bufs_floats(mem, H * (int64_t)max_len, &st->scores)) != GK_SUCCESS) return s;
  for (int l = 0; l < c->n_layers; l++) {
    int64_t n = G * max_len * Dh;
    if ((s = gk_bufs_floats(mem, n, &st->layer[l].k)) || (s = gk_bufs_floats(mem, n, &st->layer[l].v))) return s;
  }
  return GK_SUCCESS;
}

static void llama_gen_free(void *state) { free(state); }

static gk_status llama_pass_create(const gk_model *m, gk_gen_pass *ps) {
  const gk_model_config *c = &m->cfg;
  int64_t n = ps->n, D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, F = c->d_ff, Q3 = (H + 2 * G) * Dh;
  gk_bufs *b = &ps->mem;
  gen_pass *gp = calloc(1, sizeof *gp);
  ps->arch = gp;
  if (!gp) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for a pass");
  gk_status s;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, n, D, Q3);
  if ((s = gk_plan_create(&d, &gp->qkv)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, H * Dh, D);
  if ((s = gk_plan_create(&d, &gp->o)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, D, 2 * F);
  if ((s = gk_plan_create(&d, &gp->ug)) != GK_SUCCESS) return s;
  gk_op_desc_init(&d, GK_OP_SWIGLU, GK_FORWARD, GK_F32, 2, (int64_t[]){n, 2 * F});
  if ((s = gk_plan_create(&d, &gp->swiglu)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, F, D);
  if ((s = gk_plan_create(&d, &gp->down)) != GK_SUCCESS) return s;
  if ((s = gk_bufs_floats(b, n * Q3, &gp->qkvb)) || (s = gk_bufs_floats(b, n * H * Dh, &gp->q)) ||
      (s = gk_bufs_floats(b, n * H * Dh, &gp->att)) || (s = gk_bufs_floats(b, H * n, &gp->lse)) ||
      (s = gk_bufs_floats(b, n * 2 * F, &gp->ugb)) || (s = gk_bufs_floats(b, n * F, &gp->act)))
    return s;
  return GK_SUCCESS;
}


static void llama_pass_free(gk_gen_pass *ps) {
  gen_pass *gp = ps->arch;
  if (!gp) return;
  gk_plan *plans[] = {gp->qkv, gp->o, gp->ug, gp->swiglu, gp->down};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
  free(gp);
  ps->arch = NULL;
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

static gk_status pos_plans_create(const gk_model_config *c, int64_t n, int64_t pos, pos_plans *pp) {
  int64_t H = c->heads, G = c->kv_heads, Dh = c->d_model / H, r = H / G, keys = pos + 1;
  memset(pp, 0, sizeof *pp);
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_ROPE, GK_FORWARD, GK_F32, 4, (int64_t[]){1, n, H, Dh});
  d.rope.layout = GK_ROPE_BTHD;
  d.rope.theta = c->rope_theta;
  d.rope.offset = pos;
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

// The pass's n tokens at positions pos .. pos + n - 1 through the blocks,
// their keys and values into the caches. n > 1 only at pos = 0.
static gk_status llama_step(const gk_model *m, void *state, const gk_gen_pass *ps, int pos) {
  const gk_model_config *c = &m->cfg;
  gen_state *st = state;
  const gen_pass *gp = ps->arch;
  int64_t n = ps->n, D = c->d_model, H = c->heads, G = c->kv_heads, Dh = D / H, r = H / G, F = c->d_ff,
          HD = H * Dh, GD = G * Dh, Q3 = HD + 2 * GD, p = pos, keys = p + 1, Lmax = st->max_len;
  pos_plans pp;
  gk_status s = pos_plans_create(c, n, p, &pp);
  if (s != GK_SUCCESS) return s;
  // Cache (G, Lmax, Dh): head j's row t at (j Lmax + t) Dh.
  int64_t head_stride = Lmax * Dh;
  gk_tensor scores = gk_t3(st->scores, G, r, keys), one = gk_strided(&st->one, 0, NULL, NULL);
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    gen_layer *L = &st->layer[l];
    s = gk_pass_rmsnorm(ps, ps->h, gk_pw(m, lp(m, l, P_ATTN_NORM)), ps->hn);
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->qkv, gk_t2(ps->hn, n, D), gk_pw(m, lp(m, l, P_WQKV)), gp->qkvb, n, Q3);
    // q | k | v rows of Q3; q and k viewed (1, n, heads, Dh).
    gk_tensor q_in = gk_strided(gp->qkvb, 4, (int64_t[]){1, n, H, Dh}, (int64_t[]){n * Q3, Q3, Dh, 1});
    gk_tensor k_in = gk_strided(gp->qkvb + HD, 4, (int64_t[]){1, n, G, Dh}, (int64_t[]){n * Q3, Q3, Dh, 1});
    if (s == GK_SUCCESS)
      s = gk_ws_exec(ps->ws, pp.rope_q,
                     (gk_arg[]){GK_A(GK_ARG_X, q_in), GK_A(GK_ARG_Y, gk_t4(gp->q, 1, n, H, Dh))}, 2);
    // The new keys go straight into the cache, at rows p .. p + n - 1.
    gk_tensor k_new = gk_strided(L->k + p * Dh, 4, (int64_t[]){1, n, G, Dh},
                                 (int64_t[]){G * head_stride, Dh, head_stride, 1});
    if (s == GK_SUCCESS)
      s = gk_ws_exec(ps->ws, pp.rope_k, (gk_arg[]){GK_A(GK_ARG_X, k_in), GK_A(GK_ARG_Y, k_new)}, 2);
    for (int64_t t = 0; t < n; t++)
      for (int64_t j = 0; j < G; j++)
        memcpy(L->v + (j * Lmax + p + t) * Dh, gp->qkvb + t * Q3 + HD + GD + j * Dh, sizeof(float) * (size_t)Dh);
    if (n > 1 && s == GK_SUCCESS) {
      // Causal attention over the n tokens: Q (1, H, n, Dh) of q, K and V
      // (1, G, n, Dh) of the caches, O (1, H, n, Dh) written as (n, H Dh).
      int64_t cache[4] = {G * head_stride, head_stride, Dh, 1}, rows[4] = {n * HD, Dh, HD, 1};
      s = gk_ws_exec(ps->ws, pp.attn,
                     (gk_arg[]){GK_A(GK_ARG_Q, gk_strided(gp->q, 4, (int64_t[]){1, H, n, Dh}, rows)),
                                GK_A(GK_ARG_K, gk_strided(L->k, 4, (int64_t[]){1, G, n, Dh}, cache)),
                                GK_A(GK_ARG_V, gk_strided(L->v, 4, (int64_t[]){1, G, n, Dh}, cache)),
                                GK_A(GK_ARG_Y, gk_strided(gp->att, 4, (int64_t[]){1, H, n, Dh}, rows)),
                                GK_A(GK_ARG_LSE, gk_t3(gp->lse, 1, H, n))}, 5);
    } else if (s == GK_SUCCESS) {
      int64_t cache_strides[3] = {head_stride, Dh, 1};
      gk_tensor k_all = gk_strided(L->k, 3, (int64_t[]){G, keys, Dh}, cache_strides);
      gk_tensor v_all = gk_strided(L->v, 3, (int64_t[]){G, keys, Dh}, cache_strides);
      // Query head h = j r + i reads kv head j: q viewed (G, r, Dh).
      s = gk_ws_exec(ps->ws, pp.scores,
                     (gk_arg[]){GK_A(GK_ARG_A, gk_t3(gp->q, G, r, Dh)), GK_A(GK_ARG_B, k_all),
                                GK_A(GK_ARG_Y, scores)}, 3);
      if (s == GK_SUCCESS)
        s = gk_ws_exec(ps->ws, pp.scale,
                       (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, one), GK_A(GK_ARG_Y, scores)}, 3);
      if (s == GK_SUCCESS)
        s = gk_ws_exec(ps->ws, pp.softmax, (gk_arg[]){GK_A(GK_ARG_X, scores), GK_A(GK_ARG_Y, scores)}, 2);
      if (s == GK_SUCCESS)
        s = gk_ws_exec(ps->ws, pp.mix,
                       (gk_arg[]){GK_A(GK_ARG_A, scores), GK_A(GK_ARG_B, v_all),
                                  GK_A(GK_ARG_Y, gk_t3(gp->att, G, r, Dh))}, 3);
    }
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->o, gk_t2(gp->att, n, HD), gk_pw(m, lp(m, l, P_WO)), ps->o, n, D);
    if (s == GK_SUCCESS) s = gk_pass_residual(ps);
    if (s == GK_SUCCESS) s = gk_pass_rmsnorm(ps, ps->h, gk_pw(m, lp(m, l, P_MLP_NORM)), ps->hn);
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->ug, gk_t2(ps->hn, n, D), gk_pw(m, lp(m, l, P_UP_GATE)), gp->ugb, n, 2 * F);
    if (s == GK_SUCCESS)
      s = gk_ws_exec(ps->ws, gp->swiglu,
                     (gk_arg[]){GK_A(GK_ARG_X, gk_t2(gp->ugb, n, 2 * F)), GK_A(GK_ARG_Y, gk_t2(gp->act, n, F))}, 2);
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->down, gk_t2(gp->act, n, F), gk_pw(m, lp(m, l, P_DOWN)), ps->o, n, D);
    if (s == GK_SUCCESS) s = gk_pass_residual(ps);
  }
  pos_plans_free(&pp);
  return s;
}

const gk_arch_table gk_llama_arch = {
    .finish = llama_finish,
    .declare = llama_declare,
    .init = llama_init,
    .layout = llama_layout,
    .forward = llama_forward,
    .backward = llama_backward,
    .free_run = llama_free_run,
    .windowed = true,
    .gen_create = llama_gen_create,
    .gen_free = llama_gen_free,
    .pass_create = llama_pass_create,
    .pass_free = llama_pass_free,
    .step = llama_step,
};
