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
#include "layers.h"
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

static const gk_param *lp(const gk_model *m, int l, const char *what) {
  char name[48];
  snprintf(name, sizeof name, "layers.%d.%s", l, what);
  return gk_model_param(m, name);
}

gk_status gk_llama_declare(gk_model *m) {
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
void gk_llama_init_weights(gk_model *m, uint64_t seed) {
  gk_rng g;
  gk_rng_seed(&g, seed);
  double residual = 0.02 / sqrt(2.0 * m->cfg.n_layers);
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    float *w = m->w + p->offset;
    bool norm = p->rank == 1;
    bool into_residual = strstr(p->name, ".wo") || strstr(p->name, ".w_down");
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

gk_status gk_llama_layout(gk_run *r) {
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
    gk_run_carve(r, &b->rstd, d.rows);
    gk_run_carve(r, &b->hn2, d.rows * d.D);
    gk_run_carve(r, &b->rstd2, d.rows);
    gk_run_carve(r, &b->qkv, d.rows * d.Q3);
    gk_run_carve(r, &b->q, d.rows * d.H * d.Dh);
    gk_run_carve(r, &b->k, d.rows * d.G * d.Dh);
    gk_run_carve(r, &b->att, d.rows * d.H * d.Dh);
    gk_run_carve(r, &b->lse, d.B * d.H * d.T);
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

void gk_llama_free(gk_run *r) {
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

gk_status gk_llama_forward(gk_run *r, const float *h0, float **h_out) {
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
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2(h, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "attn_norm"))),
                               GK_A(GK_ARG_Y, gk_t2(b->hn, d.rows, d.D)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd, d.rows))}, 4);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->qkv[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->hn, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "wqkv"))),
                                 GK_A(GK_ARG_Y, gk_t2(b->qkv, d.rows, d.Q3))}, 3);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_q[0],
                      (gk_arg[]){GK_A(GK_ARG_X, bthd(b->qkv, &d, d.H, d.Q3)), GK_A(GK_ARG_Y, bthd(b->q, &d, d.H, HD))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_k[0],
                      (gk_arg[]){GK_A(GK_ARG_X, bthd(b->qkv + HD, &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bthd(b->k, &d, d.G, GD))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->attn[0],
                      (gk_arg[]){GK_A(GK_ARG_Q, bhtd(b->q, &d, d.H, HD)), GK_A(GK_ARG_K, bhtd(b->k, &d, d.G, GD)),
                                 GK_A(GK_ARG_V, bhtd(b->qkv + HD + GD, &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bhtd(b->att, &d, d.H, HD)), GK_A(GK_ARG_LSE, gk_t3(b->lse, d.B, d.H, d.T))}, 5);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->o[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->att, d.rows, HD)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "wo"))),
                                 GK_A(GK_ARG_Y, gk_t2(st->tmp, d.rows, d.D))}, 3);
    if (s == GK_SUCCESS) s = add(r, st, &d, h, st->tmp, b->h1);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->norm[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->h1, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "mlp_norm"))),
                                 GK_A(GK_ARG_Y, gk_t2(b->hn2, d.rows, d.D)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd2, d.rows))}, 4);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->ug[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->hn2, d.rows, d.D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "w_up_gate"))),
                                 GK_A(GK_ARG_Y, gk_t2(b->ug, d.rows, 2 * d.F))}, 3);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->swiglu[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->ug, d.rows, 2 * d.F)), GK_A(GK_ARG_Y, gk_t2(b->act, d.rows, d.F))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->down[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->act, d.rows, d.F)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, "w_down"))),
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

gk_status gk_llama_backward(gk_run *r, float *dh) {
  gk_model *m = r->m;
  llama_state *st = r->arch;
  dims d = dims_of(r);
  int64_t HD = d.H * d.Dh, GD = d.G * d.Dh;
  gk_status s = GK_SUCCESS;
  for (int l = m->cfg.n_layers - 1; l >= 0 && s == GK_SUCCESS; l--) {
    layer_bufs *b = &st->layer[l];
    float *h_in = l ? st->layer[l - 1].h_out : (float *)st->h0;
    // MLP: dh is the gradient of h_out, and of h1 through the residual.
    s = linear_bwd(r, st->down[1], gk_t2(dh, d.rows, d.D), gk_t2(b->act, d.rows, d.F), lp(m, l, "w_down"),
                   gk_t2(st->dact, d.rows, d.F));
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->swiglu[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->dact, d.rows, d.F)), GK_A(GK_ARG_X, gk_t2(b->ug, d.rows, 2 * d.F)),
                                 GK_A(GK_ARG_DX, gk_t2(st->dug, d.rows, 2 * d.F))}, 3);
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->ug[1], gk_t2(st->dug, d.rows, 2 * d.F), gk_t2(b->hn2, d.rows, d.D), lp(m, l, "w_up_gate"),
                     gk_t2(st->dhn, d.rows, d.D));
    if (s == GK_SUCCESS) s = norm_bwd(r, st->norm[1], st->dhn, b->h1, lp(m, l, "mlp_norm"), b->rstd2, st->dtmp, &d);
    if (s == GK_SUCCESS) s = add(r, st, &d, dh, st->dtmp, dh);
    // Attention: dh is now the gradient of h1, and of h_in through the residual.
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->o[1], gk_t2(dh, d.rows, d.D), gk_t2(b->att, d.rows, HD), lp(m, l, "wo"),
                     gk_t2(st->datt, d.rows, HD));
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->attn[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bhtd(st->datt, &d, d.H, HD)), GK_A(GK_ARG_Q, bhtd(b->q, &d, d.H, HD)),
                                 GK_A(GK_ARG_K, bhtd(b->k, &d, d.G, GD)), GK_A(GK_ARG_V, bhtd(b->qkv + HD + GD, &d, d.G, d.Q3)),
                                 GK_A(GK_ARG_Y, bhtd(b->att, &d, d.H, HD)), GK_A(GK_ARG_LSE, gk_t3(b->lse, d.B, d.H, d.T)),
                                 GK_A(GK_ARG_DQ, bhtd(st->dq, &d, d.H, HD)), GK_A(GK_ARG_DK, bhtd(st->dk, &d, d.G, GD)),
                                 GK_A(GK_ARG_DV, bhtd(st->dqkv + HD + GD, &d, d.G, d.Q3))}, 9);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_q[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bthd(st->dq, &d, d.H, HD)), GK_A(GK_ARG_DX, bthd(st->dqkv, &d, d.H, d.Q3))}, 2);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->rope_k[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bthd(st->dk, &d, d.G, GD)),
                                 GK_A(GK_ARG_DX, bthd(st->dqkv + HD, &d, d.G, d.Q3))}, 2);
    if (s == GK_SUCCESS)
      s = linear_bwd(r, st->qkv[1], gk_t2(st->dqkv, d.rows, d.Q3), gk_t2(b->hn, d.rows, d.D), lp(m, l, "wqkv"),
                     gk_t2(st->dhn, d.rows, d.D));
    if (s == GK_SUCCESS) s = norm_bwd(r, st->norm[1], st->dhn, h_in, lp(m, l, "attn_norm"), b->rstd, st->dtmp, &d);
    if (s == GK_SUCCESS) s = add(r, st, &d, dh, st->dtmp, dh);
  }
  return s;
}
