// The Mamba blocks of the Mamba LM (Gu and Dao, 2023), on the plan API.
// Sizes: B batch, T steps, D d_model, E = expand D, N d_state, R dt_rank,
// W conv width; rows = B T. One block, pre-norm and residual:
//
//   hn = rmsnorm(h) w                        (B, T, D)
//   x | z = hn Win^T                         (B, T, 2E)   in_proj
//   xc = silu(conv1d_causal(x) + cb)         (B, T, E)    depthwise, width W
//   dt_in | Bt | Ct = xc Wx^T                (B, T, R + 2N)  x_proj
//   dt = dt_in Wdt^T                         (B, T, E)    dt_proj (its bias is
//                                                          the scan's delta_bias)
//   y = selective_scan(u = xc, delta = dt, A = -exp(A_log), Bt, Ct, Dskip,
//                      z, delta_bias, softplus)            (B, E, T) viewed (B, T, E)
//   h' = h + y Wout^T                        (B, T, D)    out_proj
//
// With selection off (the paper's time-invariant ablation) there is no
// x_proj or dt_proj: B and C are parameters (E, N) shared by every step and
// delta is 0, so the step size is softplus(delta_bias), a parameter too.
//
// Every view between ops is a strided tensor: x, z and the scan's (B, E, T)
// operands are read in place from the (B, T, .) buffers, no copies.
//
// The architecture's table (gk_mamba_arch, at the end): the parameters and
// their initialisation, the training pass (forward, backward), and the
// generation step, the same block one piece of tokens at a time with the
// conv and scan states carried between pieces.
#include "arch.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer_bufs {
  float *h_out;            // (B, T, D): the residual after this block
  float *hn, *rstd;        // (B, T, D), (B T)
  float *xz;               // (B, T, 2E)
  float *xc;               // (B, T, E)
  float *dbl, *dt;         // (B, T, R + 2N), (B, T, E); selection only
  float *A;                // (E, N) = -exp(A_log)
  float *y;                // (B, T, E)
  float *chunks;           // (B, E, nchunks, N): the scan's saved states
} layer_bufs;

typedef struct mamba_state {
  gk_plan *norm[2], *in[2], *conv[2], *xproj[2], *dtproj[2], *scan[2], *out[2], *add_d, *add_e;
  gk_plan *mul_a;          // device runs: dA_log = dA * A
  layer_bufs *layer;       // n_layers
  const float *h0;         // the first residual (model.c's embedding output)
  float *o, *zeros;        // (B, T, D) block output; (B, T, E) delta without selection
  float *next;             // piece runs: the states after this piece (the layout of r->state)
  // Backward scratch, shared by the layers.
  float *dys, *du, *ddt, *ddbl, *dxc, *dxz, *dhn, *dtmp, *dA;
} mamba_state;

static int64_t nchunks(int64_t T) { return (T + 63) / 64; }

// A layer's parameters, in the order declare adds them ("layers.<l>.<name>").
// Without selection the slots of x_proj and dt_proj hold B and C.
enum {
  P_NORM, P_IN, P_CONV_W, P_CONV_B, P_XPROJ, P_DTPROJ, P_DT_BIAS, P_A_LOG, P_D, P_OUT, P_COUNT,
  P_B = P_XPROJ, P_C = P_DTPROJ
};

// A piece run's carried state (r->state, and st->next alike): per layer,
// the conv state (B, E, W-1), then the scan state (B, E, N).
static int64_t conv_state_floats(const gk_run *r) {
  const gk_model_config *c = &r->m->cfg;
  return (int64_t)r->B * c->expand * c->d_model * (c->d_conv - 1);
}
static int64_t layer_state_floats(const gk_run *r) {
  const gk_model_config *c = &r->m->cfg;
  return conv_state_floats(r) + (int64_t)r->B * c->expand * c->d_model * c->d_state;
}

// Layer l's parameter in `slot`.
static const gk_param *lp(const gk_model *m, int l, int slot) {
  return &m->params[GK_PARAM_BLOCKS + l * P_COUNT + slot];
}

// Expansion, conv width and dt_rank default to 2, 4 and ceil(D / 16).
static gk_status mamba_finish(gk_model_config *c) {
  if (c->expand < 1) c->expand = 2;
  if (c->d_conv < 1) c->d_conv = 4;
  if (c->d_state < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: d_state = %d must be >= 1", c->d_state);
  if (c->dt_rank < 1) c->dt_rank = (c->d_model + 15) / 16;
  return GK_SUCCESS;
}

// The parameters of every layer, P_COUNT each in the order of the slots.
static gk_status mamba_declare(gk_model *m) {
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv;
  gk_status s = GK_SUCCESS;
  char name[48];
#define ADD(what, rank, d0, d1, decay)                                   \
  do {                                                                   \
    snprintf(name, sizeof name, "layers.%d.%s", l, what);                \
    if (s == GK_SUCCESS) s = gk_model_add_param(m, name, rank, d0, d1, decay); \
  } while (0)
  for (int l = 0; l < c->n_layers; l++) {
    ADD("norm", 1, D, 1, false);
    ADD("in_proj", 2, 2 * E, D, true);
    ADD("conv_w", 2, E, W, true);
    ADD("conv_b", 1, E, 1, false);
    if (c->selection) {
      ADD("x_proj", 2, R + 2 * N, E, true);
      ADD("dt_proj", 2, E, R, true);
    } else {
      ADD("B", 2, E, N, false);
      ADD("C", 2, E, N, false);
    }
    ADD("dt_bias", 1, E, 1, false);
    ADD("A_log", 2, E, N, false);
    ADD("D", 1, E, 1, false);
    ADD("out_proj", 2, D, E, true);
  }
#undef ADD
  return s;
}

static void fill_uniform(gk_rng *g, float *p, int64_t n, double bound) {
  for (int64_t i = 0; i < n; i++) p[i] = (float)((2 * gk_rng_uniform(g) - 1) * bound);
}

// As mamba-ssm's reference code: linear layers uniform in +-1/sqrt(fan_in)
// (torch's default), out_proj further divided by sqrt(n_layers); dt_proj's
// weight uniform in +-1/sqrt(R); dt drawn log-uniformly in [1e-3, 1e-1]
// and stored through the inverse softplus as dt_bias; A = -(1..N) through
// A_log; D = 1; the conv uniform in +-1/sqrt(W); norms 1; the embedding
// normal(0, 0.02).
static void mamba_init(gk_model *m, uint64_t seed) {
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv;
  gk_rng g;
  gk_rng_seed(&g, seed);
  const gk_param *emb = &m->params[GK_PARAM_EMBEDDING];
  for (int64_t i = 0; i < emb->numel; i++) m->w[emb->offset + i] = (float)(0.02 * gk_rng_normal(&g));
  const gk_param *nf = &m->params[GK_PARAM_NORM_F];
  for (int64_t i = 0; i < D; i++) m->w[nf->offset + i] = 1;
  for (int l = 0; l < c->n_layers; l++) {
    float *norm = m->w + lp(m, l, P_NORM)->offset;
    for (int64_t i = 0; i < D; i++) norm[i] = 1;
    fill_uniform(&g, m->w + lp(m, l, P_IN)->offset, 2 * E * D, 1 / sqrt((double)D));
    fill_uniform(&g, m->w + lp(m, l, P_CONV_W)->offset, E * W, 1 / sqrt((double)W));
    fill_uniform(&g, m->w + lp(m, l, P_CONV_B)->offset, E, 1 / sqrt((double)W));
    if (c->selection) {
      fill_uniform(&g, m->w + lp(m, l, P_XPROJ)->offset, (R + 2 * N) * E, 1 / sqrt((double)E));
      fill_uniform(&g, m->w + lp(m, l, P_DTPROJ)->offset, E * R, 1 / sqrt((double)R));
    } else {
      float *Bp = m->w + lp(m, l, P_B)->offset, *Cp = m->w + lp(m, l, P_C)->offset;
      for (int64_t i = 0; i < E * N; i++) {
        Bp[i] = (float)(gk_rng_normal(&g) / sqrt((double)N));
        Cp[i] = (float)(gk_rng_normal(&g) / sqrt((double)N));
      }
    }
    float *dtb = m->w + lp(m, l, P_DT_BIAS)->offset;
    for (int64_t e = 0; e < E; e++) {
      double dt = exp(gk_rng_uniform(&g) * (log(0.1) - log(1e-3)) + log(1e-3));
      if (dt < 1e-4) dt = 1e-4;
      dtb[e] = (float)(dt + log(-expm1(-dt)));  // softplus(dtb) = dt
    }
    float *alog = m->w + lp(m, l, P_A_LOG)->offset, *Dp = m->w + lp(m, l, P_D)->offset;
    for (int64_t e = 0; e < E; e++) {
      for (int64_t n = 0; n < N; n++) alog[e * N + n] = (float)log((double)(n + 1));
      Dp[e] = 1;
    }
    fill_uniform(&g, m->w + lp(m, l, P_OUT)->offset, D * E, 1 / sqrt((double)E) / sqrt((double)c->n_layers));
  }
}

static gk_op_desc scan_desc(const gk_run *r, gk_direction dir) {
  const gk_model_config *c = &r->m->cfg;
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, dir, GK_F32, 3,
                  (int64_t[]){r->B, (int64_t)c->expand * c->d_model, r->T});
  d.scan.d_state = c->d_state;
  d.scan.b_layout = d.scan.c_layout = c->selection ? GK_SCAN_BATCH : GK_SCAN_SHARED;
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  d.scan.chunk_size = 64;
  d.scan.has_initial_state = d.scan.has_final_state = r->carry;
  return d;
}

static gk_status mamba_layout(gk_run *r) {
  const gk_model_config *c = &r->m->cfg;
  int64_t B = r->B, T = r->T, rows = B * T, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state,
          R = c->dt_rank;
  mamba_state *st = r->arch;
  if (!r->placing) {
    st = r->arch = calloc(1, sizeof *st);
    if (st) st->layer = calloc((size_t)c->n_layers, sizeof *st->layer);
    if (!st || !st->layer) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "mamba: no memory for the run's state");
  }
  for (int l = 0; l < c->n_layers; l++) {
    layer_bufs *b = &st->layer[l];
    gk_run_carve(r, &b->h_out, rows * D);
    gk_run_carve(r, &b->hn, rows * D);
    gk_run_carve_f32(r, &b->rstd, rows);
    gk_run_carve(r, &b->xz, rows * 2 * E);
    gk_run_carve(r, &b->xc, rows * E);
    if (c->selection) {
      gk_run_carve(r, &b->dbl, rows * (R + 2 * N));
      gk_run_carve(r, &b->dt, rows * E);
    }
    gk_run_carve_f32(r, &b->A, E * N);
    gk_run_carve(r, &b->y, rows * E);
    gk_run_carve_f32(r, &b->chunks, B * E * nchunks(T) * N);
  }
  gk_run_carve(r, &st->o, rows * D);
  if (!c->selection) gk_run_carve(r, &st->zeros, rows * E);
  if (r->carry) {
    r->state_floats = c->n_layers * layer_state_floats(r);
    gk_run_carve(r, &r->state, r->state_floats);
    gk_run_carve(r, &st->next, r->state_floats);
  }
  if (r->train) {
    gk_run_carve(r, &st->dys, rows * E);
    gk_run_carve(r, &st->du, rows * E);
    gk_run_carve(r, &st->ddt, rows * E);
    if (c->selection) gk_run_carve(r, &st->ddbl, rows * (R + 2 * N));
    gk_run_carve(r, &st->dxc, rows * E);
    gk_run_carve(r, &st->dxz, rows * 2 * E);
    gk_run_carve(r, &st->dhn, rows * D);
    gk_run_carve(r, &st->dtmp, rows * D);
    gk_run_carve_f32(r, &st->dA, E * N);
  }
  if (r->placing) {
    if (!st->zeros) return GK_SUCCESS;
    size_t bytes = r->esize * (size_t)(rows * E);
    void *zeros = calloc(1, bytes);
    gk_status s = zeros ? gk_run_upload(r, st->zeros, zeros, bytes)
                        : gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "mamba: no memory for %zu bytes of zeros", bytes);
    free(zeros);
    return s;
  }
  gk_status s = GK_SUCCESS;
  gk_op_desc d;
  for (int dir = GK_FORWARD; dir <= (r->train ? GK_BACKWARD : GK_FORWARD) && s == GK_SUCCESS; dir++) {
    gk_direction dr = (gk_direction)dir;
    d = gk_desc_rmsnorm(dr, rows, D, c->norm_eps);
    s = gk_run_plan(r, &d, &st->norm[dir]);
    d = gk_desc_linear(dr, rows, D, 2 * E);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->in[dir]);
    gk_op_desc_init(&d, GK_OP_CONV1D, dr, GK_F32, 3, (int64_t[]){B, T, E});
    d.conv.width = c->d_conv;
    d.conv.channel_last = 1;
    d.conv.silu = 1;
    d.conv.has_initial_state = d.conv.has_final_state = r->carry && c->d_conv > 1;
    if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->conv[dir]);
    if (c->selection) {
      d = gk_desc_linear(dr, rows, E, R + 2 * N);
      if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->xproj[dir]);
      d = gk_desc_linear(dr, rows, R, E);
      if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->dtproj[dir]);
    }
    d = scan_desc(r, dr);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->scan[dir]);
    d = gk_desc_linear(dr, rows, E, D);
    if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->out[dir]);
  }
  d = gk_desc_add(rows, D);
  if (s == GK_SUCCESS) s = gk_run_plan(r, &d, &st->add_d);
  d = gk_desc_add(rows, E);
  if (s == GK_SUCCESS && c->selection && r->train) s = gk_run_plan(r, &d, &st->add_e);
  gk_op_desc_init(&d, GK_OP_MUL, GK_FORWARD, GK_F32, 2, (int64_t[]){E, N});
  if (s == GK_SUCCESS && r->train && r->backend != GK_BACKEND_AUTO) s = gk_run_plan(r, &d, &st->mul_a);
  return s;
}

static void mamba_free_run(gk_run *r) {
  mamba_state *st = r->arch;
  if (st) free(st->layer);
  free(st);
  r->arch = NULL;
}

// The scan's (B, E, T) views of (B, T, .) buffers whose rows are `row` floats apart.
static gk_tensor bet(float *p, const gk_run *r, int64_t E, int64_t row) {
  return gk_strided(p, 3, (int64_t[]){r->B, E, r->T}, (int64_t[]){r->T * row, 1, row});
}

// B or C of the scan: a (B, N, T) view of dbl, or the shared (E, N) parameter.
static gk_tensor scan_bc(const gk_run *r, const layer_bufs *b, int l, int which, bool grad) {
  const gk_model_config *c = &r->m->cfg;
  int64_t N = c->d_state, R = c->dt_rank, row = R + 2 * N;
  if (!c->selection) {
    const gk_param *p = lp(r->m, l, which ? P_C : P_B);
    return grad ? gk_pg(r->m, p) : gk_pw(r->m, p);
  }
  mamba_state *st = r->arch;
  float *base = gk_run_at(r, grad ? st->ddbl : b->dbl, R + which * N);
  return gk_strided(base, 3, (int64_t[]){r->B, N, r->T}, (int64_t[]){r->T * row, 1, row});
}

// A = -exp(A_log) of layer l into A (E, N) in the run's arena: the
// parameterisation keeps A negative. A device run computes it on the host
// from the device's A_log (E N floats down, E N up: no op computes exp).
static gk_status set_A(gk_run *r, int l, float *A) {
  gk_model *m = r->m;
  const gk_param *p = lp(m, l, P_A_LOG);
  if (r->backend == GK_BACKEND_AUTO) {
    for (int64_t i = 0; i < p->numel; i++) A[i] = -expf(m->w[p->offset + i]);
    return GK_SUCCESS;
  }
  size_t bytes = sizeof(float) * (size_t)p->numel;
  float *host = malloc(bytes);
  if (!host) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "mamba: no memory for A (%zu bytes)", bytes);
  gk_status s = gk_buffer_download(m->dev, sizeof(float) * (size_t)p->offset, host, bytes);
  for (int64_t i = 0; s == GK_SUCCESS && i < p->numel; i++) host[i] = -expf(host[i]);
  if (s == GK_SUCCESS) s = gk_run_upload(r, A, host, bytes);
  free(host);
  return s;
}

static gk_status mamba_forward(gk_run *r, const float *h0, float **h_out) {
  gk_model *m = r->m;
  const gk_model_config *c = &m->cfg;
  mamba_state *st = r->arch;
  int64_t B = r->B, T = r->T, rows = B * T, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state,
          R = c->dt_rank;
  st->h0 = h0;
  const float *h = h0;
  gk_status s = GK_SUCCESS;
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    layer_bufs *b = &st->layer[l];
    s = gk_run_exec(r, st->norm[0],
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2((float *)h, rows, D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_NORM))),
                               GK_A(GK_ARG_Y, gk_t2(b->hn, rows, D)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd, rows))}, 4);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->in[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->hn, rows, D)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_IN))),
                                 GK_A(GK_ARG_Y, gk_t2(b->xz, rows, 2 * E))}, 3);
    gk_tensor x = gk_strided(b->xz, 3, (int64_t[]){B, T, E}, (int64_t[]){T * 2 * E, 2 * E, 1});
    // A piece run goes on from the states the last piece left and keeps the
    // new ones in st->next (copied over r->state after the last layer).
    int64_t W1 = c->d_conv - 1;
    float *conv0 = NULL, *conv1 = NULL, *scan0 = NULL, *scan1 = NULL;
    if (r->carry) {
      conv0 = r->state + l * layer_state_floats(r);
      conv1 = st->next + l * layer_state_floats(r);
      scan0 = conv0 + conv_state_floats(r);
      scan1 = conv1 + conv_state_floats(r);
    }
    gk_arg conv[6] = {GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_CONV_W))),
                      GK_A(GK_ARG_BIAS, gk_pw(m, lp(m, l, P_CONV_B))), GK_A(GK_ARG_Y, gk_t3(b->xc, B, T, E)),
                      GK_A(GK_ARG_INITIAL_STATE, gk_t3(conv0, B, E, W1)),
                      GK_A(GK_ARG_FINAL_STATE, gk_t3(conv1, B, E, W1))};
    if (s == GK_SUCCESS) s = gk_run_exec(r, st->conv[0], conv, r->carry && W1 > 0 ? 6 : 4);
    float *delta = st->zeros;
    int64_t delta_row = E;
    if (c->selection && s == GK_SUCCESS) {
      s = gk_run_exec(r, st->xproj[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->xc, rows, E)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_XPROJ))),
                                 GK_A(GK_ARG_Y, gk_t2(b->dbl, rows, R + 2 * N))}, 3);
      gk_tensor dt_in = gk_strided(b->dbl, 2, (int64_t[]){rows, R}, (int64_t[]){R + 2 * N, 1});
      if (s == GK_SUCCESS)
        s = gk_run_exec(r, st->dtproj[0],
                        (gk_arg[]){GK_A(GK_ARG_X, dt_in), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_DTPROJ))),
                                   GK_A(GK_ARG_Y, gk_t2(b->dt, rows, E))}, 3);
      delta = b->dt;
    }
    if (s == GK_SUCCESS) s = set_A(r, l, b->A);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->scan[0],
                      (gk_arg[]){GK_A(GK_ARG_U, bet(b->xc, r, E, E)), GK_A(GK_ARG_DELTA, bet(delta, r, E, delta_row)),
                                 GK_A(GK_ARG_A, gk_t2(b->A, E, N)), GK_A(GK_ARG_B, scan_bc(r, b, l, 0, false)),
                                 GK_A(GK_ARG_C, scan_bc(r, b, l, 1, false)), GK_A(GK_ARG_D, gk_pw(m, lp(m, l, P_D))),
                                 GK_A(GK_ARG_Z, bet(gk_run_at(r, b->xz, E), r, E, 2 * E)),
                                 GK_A(GK_ARG_DELTA_BIAS, gk_pw(m, lp(m, l, P_DT_BIAS))),
                                 GK_A(GK_ARG_Y, bet(b->y, r, E, E)),
                                 GK_A(GK_ARG_CHUNK_STATES, gk_t4(b->chunks, B, E, nchunks(T), N)),
                                 GK_A(GK_ARG_INITIAL_STATE, gk_t3(scan0, B, E, N)),
                                 GK_A(GK_ARG_FINAL_STATE, gk_t3(scan1, B, E, N))}, r->carry ? 12 : 10);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->out[0],
                      (gk_arg[]){GK_A(GK_ARG_X, gk_t2(b->y, rows, E)), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_OUT))),
                                 GK_A(GK_ARG_Y, gk_t2(st->o, rows, D))}, 3);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->add_d,
                      (gk_arg[]){GK_A(GK_ARG_A, gk_t2((float *)h, rows, D)), GK_A(GK_ARG_B, gk_t2(st->o, rows, D)),
                                 GK_A(GK_ARG_Y, gk_t2(b->h_out, rows, D))}, 3);
    h = b->h_out;
  }
  if (s == GK_SUCCESS && r->carry) memcpy(r->state, st->next, sizeof(float) * (size_t)r->state_floats);
  *h_out = (float *)h;
  return s;
}

static gk_status mamba_backward(gk_run *r, float *dh) {
  gk_model *m = r->m;
  const gk_model_config *c = &m->cfg;
  mamba_state *st = r->arch;
  int64_t B = r->B, T = r->T, rows = B * T, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state,
          R = c->dt_rank;
  gk_status s = GK_SUCCESS;
  for (int l = c->n_layers - 1; l >= 0 && s == GK_SUCCESS; l--) {
    layer_bufs *b = &st->layer[l];
    const float *h_in = l ? st->layer[l - 1].h_out : st->h0;
    const gk_param *out = lp(m, l, P_OUT);
    s = gk_run_exec(r, st->out[1],
                    (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(dh, rows, D)), GK_A(GK_ARG_X, gk_t2(b->y, rows, E)),
                               GK_A(GK_ARG_WEIGHT, gk_pw(m, out)), GK_A(GK_ARG_DX, gk_t2(st->dys, rows, E)),
                               GK_A(GK_ARG_DWEIGHT, gk_pg(m, out))}, 5);
    float *delta = c->selection ? b->dt : st->zeros;
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->scan[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, bet(st->dys, r, E, E)), GK_A(GK_ARG_U, bet(b->xc, r, E, E)),
                                 GK_A(GK_ARG_DELTA, bet(delta, r, E, E)), GK_A(GK_ARG_A, gk_t2(b->A, E, N)),
                                 GK_A(GK_ARG_B, scan_bc(r, b, l, 0, false)), GK_A(GK_ARG_C, scan_bc(r, b, l, 1, false)),
                                 GK_A(GK_ARG_D, gk_pw(m, lp(m, l, P_D))), GK_A(GK_ARG_Z, bet(gk_run_at(r, b->xz, E), r, E, 2 * E)),
                                 GK_A(GK_ARG_DELTA_BIAS, gk_pw(m, lp(m, l, P_DT_BIAS))),
                                 GK_A(GK_ARG_CHUNK_STATES, gk_t4(b->chunks, B, E, nchunks(T), N)),
                                 GK_A(GK_ARG_DU, bet(st->du, r, E, E)), GK_A(GK_ARG_DDELTA, bet(st->ddt, r, E, E)),
                                 GK_A(GK_ARG_DA, gk_t2(st->dA, E, N)), GK_A(GK_ARG_DB, scan_bc(r, b, l, 0, true)),
                                 GK_A(GK_ARG_DC, scan_bc(r, b, l, 1, true)), GK_A(GK_ARG_DD, gk_pg(m, lp(m, l, P_D))),
                                 GK_A(GK_ARG_DZ, bet(gk_run_at(r, st->dxz, E), r, E, 2 * E)),
                                 GK_A(GK_ARG_DDELTA_BIAS, gk_pg(m, lp(m, l, P_DT_BIAS)))}, 18);
    // dA_log = dA * dA/dA_log = dA * A.
    float *galog = m->g + lp(m, l, P_A_LOG)->offset;
    if (!st->mul_a)
      for (int64_t i = 0; i < E * N; i++) galog[i] = st->dA[i] * b->A[i];
    else if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->mul_a,
                      (gk_arg[]){GK_A(GK_ARG_A, gk_t2(st->dA, E, N)), GK_A(GK_ARG_B, gk_t2(b->A, E, N)),
                                 GK_A(GK_ARG_Y, gk_t2(galog, E, N))}, 3);
    if (c->selection && s == GK_SUCCESS) {
      const gk_param *dtp = lp(m, l, P_DTPROJ), *xp = lp(m, l, P_XPROJ);
      gk_tensor dt_in = gk_strided(b->dbl, 2, (int64_t[]){rows, R}, (int64_t[]){R + 2 * N, 1});
      gk_tensor ddt_in = gk_strided(st->ddbl, 2, (int64_t[]){rows, R}, (int64_t[]){R + 2 * N, 1});
      s = gk_run_exec(r, st->dtproj[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->ddt, rows, E)), GK_A(GK_ARG_X, dt_in),
                                 GK_A(GK_ARG_WEIGHT, gk_pw(m, dtp)), GK_A(GK_ARG_DX, ddt_in),
                                 GK_A(GK_ARG_DWEIGHT, gk_pg(m, dtp))}, 5);
      if (s == GK_SUCCESS)
        s = gk_run_exec(r, st->xproj[1],
                        (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->ddbl, rows, R + 2 * N)), GK_A(GK_ARG_X, gk_t2(b->xc, rows, E)),
                                   GK_A(GK_ARG_WEIGHT, gk_pw(m, xp)), GK_A(GK_ARG_DX, gk_t2(st->dxc, rows, E)),
                                   GK_A(GK_ARG_DWEIGHT, gk_pg(m, xp))}, 5);
      // xc feeds both the scan (u) and x_proj: dxc = du + (x_proj's dx).
      if (s == GK_SUCCESS)
        s = gk_run_exec(r, st->add_e,
                        (gk_arg[]){GK_A(GK_ARG_A, gk_t2(st->du, rows, E)), GK_A(GK_ARG_B, gk_t2(st->dxc, rows, E)),
                                   GK_A(GK_ARG_Y, gk_t2(st->du, rows, E))}, 3);
    }
    gk_tensor x = gk_strided(b->xz, 3, (int64_t[]){B, T, E}, (int64_t[]){T * 2 * E, 2 * E, 1});
    gk_tensor dx = gk_strided(st->dxz, 3, (int64_t[]){B, T, E}, (int64_t[]){T * 2 * E, 2 * E, 1});
    const gk_param *cw = lp(m, l, P_CONV_W), *cb = lp(m, l, P_CONV_B);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->conv[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t3(st->du, B, T, E)), GK_A(GK_ARG_X, x),
                                 GK_A(GK_ARG_WEIGHT, gk_pw(m, cw)), GK_A(GK_ARG_BIAS, gk_pw(m, cb)),
                                 GK_A(GK_ARG_DX, dx), GK_A(GK_ARG_DWEIGHT, gk_pg(m, cw)),
                                 GK_A(GK_ARG_DBIAS, gk_pg(m, cb))}, 7);
    const gk_param *inp = lp(m, l, P_IN), *norm = lp(m, l, P_NORM);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->in[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->dxz, rows, 2 * E)), GK_A(GK_ARG_X, gk_t2(b->hn, rows, D)),
                                 GK_A(GK_ARG_WEIGHT, gk_pw(m, inp)), GK_A(GK_ARG_DX, gk_t2(st->dhn, rows, D)),
                                 GK_A(GK_ARG_DWEIGHT, gk_pg(m, inp))}, 5);
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->norm[1],
                      (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(st->dhn, rows, D)), GK_A(GK_ARG_X, gk_t2((float *)h_in, rows, D)),
                                 GK_A(GK_ARG_WEIGHT, gk_pw(m, norm)), GK_A(GK_ARG_RSTD, gk_t1(b->rstd, rows)),
                                 GK_A(GK_ARG_DX, gk_t2(st->dtmp, rows, D)), GK_A(GK_ARG_DWEIGHT, gk_pg(m, norm))}, 6);
    if (s == GK_SUCCESS) gk_run_grads_ready(r, GK_PARAM_BLOCKS + l * P_COUNT, P_COUNT);
    // The residual: dh (into the block's input) = dh + the block's part.
    if (s == GK_SUCCESS)
      s = gk_run_exec(r, st->add_d,
                      (gk_arg[]){GK_A(GK_ARG_A, gk_t2(dh, rows, D)), GK_A(GK_ARG_B, gk_t2(st->dtmp, rows, D)),
                                 GK_A(GK_ARG_Y, gk_t2(dh, rows, D))}, 3);
  }
  return s;
}

// ---------------------------------------------------------------- generation
//
// The recurrence: each layer keeps the conv state (1, E, W-1) (the last W-1
// inputs of the depthwise conv) and the scan state (1, E, N); n tokens go
// through the block's ops with L = n, the states passed in as the ops'
// initial states and taken back as their final states.

typedef struct gen_layer {
  float *conv[2];          // (1, E, W-1): the last W-1 conv inputs, [cur] and the next
  float *scan[2];          // (1, E, N): the scan state, likewise
  float *A;                // (E, N) = -exp(A_log)
} gen_layer;

typedef struct gen_state {
  int cur;                 // which of the state pairs holds the current state
  gen_layer layer[];       // n_layers
} gen_state;

// A pass's plans and buffers: (n, 2E), (n, E), (n, R + 2N) and (n, E) with
// selection, (n, E) zeros (the delta without selection), (n, E),
// (1, E, nchunks, N).
typedef struct gen_pass {
  gk_plan *in, *conv, *xproj, *dtproj, *scan, *out;
  float *xz, *xc, *dbl, *dt, *zeros, *y, *chunk;
} gen_pass;

// The zeroed states of every layer, and A = -exp(A_log) as the full forward
// computes it.
static gk_status mamba_gen_create(const gk_model *m, int max_len, gk_bufs *mem, void **state) {
  const gk_model_config *c = &m->cfg;
  int64_t E = (int64_t)c->expand * c->d_model, N = c->d_state, W = c->d_conv;
  gk_status s;
  gen_state *st = calloc(1, sizeof *st + sizeof(gen_layer) * (size_t)c->n_layers);
  *state = st;
  if (!st) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state of the layers");
  for (int l = 0; l < c->n_layers; l++) {
    gen_layer *L = &st->layer[l];
    for (int k = 0; k < 2; k++)
      if ((s = gk_bufs_floats(mem, E * (W - 1), &L->conv[k])) || (s = gk_bufs_floats(mem, E * N, &L->scan[k])))
        return s;
    if ((s = gk_bufs_floats(mem, E * N, &L->A)) != GK_SUCCESS) return s;
    const float *alog = m->w + lp(m, l, P_A_LOG)->offset;
    for (int64_t i = 0; i < E * N; i++) L->A[i] = -expf(alog[i]);
  }
  return GK_SUCCESS;
}

static void mamba_gen_free(void *state) { free(state); }

static gk_status mamba_pass_create(const gk_model *m, gk_gen_pass *ps) {
  const gk_model_config *c = &m->cfg;
  int64_t n = ps->n, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank;
  gk_bufs *b = &ps->mem;
  gen_pass *gp = calloc(1, sizeof *gp);
  ps->arch = gp;
  if (!gp) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for a pass");
  gk_status s;
  gk_op_desc d = gk_desc_linear(GK_FORWARD, n, D, 2 * E);
  if ((s = gk_plan_create(&d, &gp->in)) != GK_SUCCESS) return s;
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, (int64_t[]){1, n, E});
  d.conv.width = c->d_conv;
  d.conv.channel_last = 1;
  d.conv.silu = 1;
  d.conv.has_initial_state = d.conv.has_final_state = c->d_conv > 1;
  if ((s = gk_plan_create(&d, &gp->conv)) != GK_SUCCESS) return s;
  if (c->selection) {
    d = gk_desc_linear(GK_FORWARD, n, E, R + 2 * N);
    if ((s = gk_plan_create(&d, &gp->xproj)) != GK_SUCCESS) return s;
    d = gk_desc_linear(GK_FORWARD, n, R, E);
    if ((s = gk_plan_create(&d, &gp->dtproj)) != GK_SUCCESS) return s;
  }
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3, (int64_t[]){1, E, n});
  d.scan.d_state = c->d_state;
  d.scan.b_layout = d.scan.c_layout = c->selection ? GK_SCAN_BATCH : GK_SCAN_SHARED;
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  d.scan.has_initial_state = d.scan.has_final_state = 1;
  d.scan.chunk_size = 64;
  if ((s = gk_plan_create(&d, &gp->scan)) != GK_SUCCESS) return s;
  d = gk_desc_linear(GK_FORWARD, n, E, D);
  if ((s = gk_plan_create(&d, &gp->out)) != GK_SUCCESS) return s;
  if ((s = gk_bufs_floats(b, n * 2 * E, &gp->xz)) || (s = gk_bufs_floats(b, n * E, &gp->xc)) ||
      (s = gk_bufs_floats(b, n * E, &gp->y)) || (s = gk_bufs_floats(b, E * nchunks(n) * N, &gp->chunk)))
    return s;
  if (c->selection) {
    if ((s = gk_bufs_floats(b, n * (R + 2 * N), &gp->dbl)) || (s = gk_bufs_floats(b, n * E, &gp->dt))) return s;
  } else if ((s = gk_bufs_floats(b, n * E, &gp->zeros)) != GK_SUCCESS) {
    return s;
  }
  return GK_SUCCESS;
}

static void mamba_pass_free(gk_gen_pass *ps) {
  gen_pass *gp = ps->arch;
  if (!gp) return;
  gk_plan *plans[] = {gp->in, gp->conv, gp->xproj, gp->dtproj, gp->scan, gp->out};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
  free(gp);
  ps->arch = NULL;
}

// The scan's (1, C, n) view of n rows `row` floats apart, starting at p.
static gk_tensor cols(float *p, int64_t C, int64_t n, int64_t row) {
  return gk_strided(p, 3, (int64_t[]){1, C, n}, (int64_t[]){n * row, 1, row});
}

// The pass's n tokens through the blocks, from the current states to the
// next (which become current). Mamba has no positions: pos is not used.
static gk_status mamba_step(const gk_model *m, void *state, const gk_gen_pass *ps, int pos) {
  const gk_model_config *c = &m->cfg;
  gen_state *st = state;
  const gen_pass *gp = ps->arch;
  int64_t n = ps->n, D = c->d_model, E = (int64_t)c->expand * D, N = c->d_state, R = c->dt_rank, W = c->d_conv,
          row = R + 2 * N;
  int cur = st->cur, nxt = !cur;
  gk_status s = GK_SUCCESS;
  for (int l = 0; l < c->n_layers && s == GK_SUCCESS; l++) {
    gen_layer *L = &st->layer[l];
    s = gk_pass_rmsnorm(ps, ps->h, gk_pw(m, lp(m, l, P_NORM)), ps->hn);
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->in, gk_t2(ps->hn, n, D), gk_pw(m, lp(m, l, P_IN)), gp->xz, n, 2 * E);
    // x: the first E of each xz row, (1, n, E)
    gk_tensor x = gk_strided(gp->xz, 3, (int64_t[]){1, n, E}, (int64_t[]){n * 2 * E, 2 * E, 1});
    gk_arg conv[6] = {GK_A(GK_ARG_X, x), GK_A(GK_ARG_WEIGHT, gk_pw(m, lp(m, l, P_CONV_W))),
                      GK_A(GK_ARG_BIAS, gk_pw(m, lp(m, l, P_CONV_B))), GK_A(GK_ARG_Y, gk_t3(gp->xc, 1, n, E)),
                      GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->conv[cur], 1, E, W - 1)),
                      GK_A(GK_ARG_FINAL_STATE, gk_t3(L->conv[nxt], 1, E, W - 1))};
    if (s == GK_SUCCESS) s = gk_ws_exec(ps->ws, gp->conv, conv, W > 1 ? 6 : 4);
    float *delta = gp->zeros;
    gk_tensor Bt, Ct;
    if (c->selection) {
      if (s == GK_SUCCESS)
        s = gk_ws_linear(ps->ws, gp->xproj, gk_t2(gp->xc, n, E), gk_pw(m, lp(m, l, P_XPROJ)), gp->dbl, n, row);
      // dt_proj reads the first R of each dbl row.
      gk_tensor dt_in = gk_strided(gp->dbl, 2, (int64_t[]){n, R}, (int64_t[]){row, 1});
      if (s == GK_SUCCESS) s = gk_ws_linear(ps->ws, gp->dtproj, dt_in, gk_pw(m, lp(m, l, P_DTPROJ)), gp->dt, n, E);
      delta = gp->dt;
      Bt = cols(gp->dbl + R, N, n, row);
      Ct = cols(gp->dbl + R + N, N, n, row);
    } else {
      Bt = gk_pw(m, lp(m, l, P_B));
      Ct = gk_pw(m, lp(m, l, P_C));
    }
    if (s == GK_SUCCESS)
      s = gk_ws_exec(ps->ws, gp->scan,
                     (gk_arg[]){GK_A(GK_ARG_U, cols(gp->xc, E, n, E)), GK_A(GK_ARG_DELTA, cols(delta, E, n, E)),
                                GK_A(GK_ARG_A, gk_t2(L->A, E, N)), GK_A(GK_ARG_B, Bt), GK_A(GK_ARG_C, Ct),
                                GK_A(GK_ARG_D, gk_pw(m, lp(m, l, P_D))),
                                GK_A(GK_ARG_Z, cols(gp->xz + E, E, n, 2 * E)),
                                GK_A(GK_ARG_DELTA_BIAS, gk_pw(m, lp(m, l, P_DT_BIAS))),
                                GK_A(GK_ARG_Y, cols(gp->y, E, n, E)),
                                GK_A(GK_ARG_CHUNK_STATES, gk_t4(gp->chunk, 1, E, nchunks(n), N)),
                                GK_A(GK_ARG_INITIAL_STATE, gk_t3(L->scan[cur], 1, E, N)),
                                GK_A(GK_ARG_FINAL_STATE, gk_t3(L->scan[nxt], 1, E, N))}, 12);
    if (s == GK_SUCCESS)
      s = gk_ws_linear(ps->ws, gp->out, gk_t2(gp->y, n, E), gk_pw(m, lp(m, l, P_OUT)), ps->o, n, D);
    if (s == GK_SUCCESS) s = gk_pass_residual(ps);
  }
  if (s == GK_SUCCESS) st->cur = nxt;
  return s;
}

const gk_arch_table gk_mamba_arch = {
    .finish = mamba_finish,
    .declare = mamba_declare,
    .init = mamba_init,
    .layout = mamba_layout,
    .forward = mamba_forward,
    .backward = mamba_backward,
    .free_run = mamba_free_run,
    .windowed = false,
    .gen_create = mamba_gen_create,
    .gen_free = mamba_gen_free,
    .pass_create = mamba_pass_create,
    .pass_free = mamba_pass_free,
    .step = mamba_step,
};
