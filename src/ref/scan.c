// Reference kernels for the selective scan: channel by channel, step by
// step, f64 math. u, delta, z, y (B, D, L); A (D, N); B, C (D, N) or, as
// (B, G, N, L) views, per batch (channel d uses group d / (D/G)).
//   forward:  dt_t = delta_t + delta_bias (softplus'ed with delta_softplus)
//             h_t[n] = exp(dt_t A[n]) h_{t-1}[n] + dt_t B_t[n] u_t;  h_{-1} = initial_state or 0
//             y'_t = sum_n C_t[n] h_t[n] + D u_t;  y_t = y'_t silu(z_t) (y'_t without z)
//             chunk_states[c] = h_{cT-1} (the state before step cT); final_state = h_{L-1}
//   backward: with dy'_t = dy_t silu(z_t) and the state gradient
//             g_t[n] = C_t[n] dy'_t + exp(dt_{t+1} A[n]) g_{t+1}[n]
//             (g_L = dfinal_state or 0), over all steps:
//             dz_t = dy_t y'_t silu'(z_t);  du_t = D dy'_t + sum_n g_t dt_t B_t   (overwritten)
//             ddt_t = sum_n g_t (A a_t h_{t-1} + B_t u_t);  ddelta_t = ddt_t softplus'(.) (overwritten)
//             dA[n] (=/+=) sum g_t dt_t a_t h_{t-1};  dD (=/+=) sum dy'_t u_t;
//             ddelta_bias (=/+=) sum ddelta_t;  dinitial_state = a_0 g_0 (overwritten)
//             dB_t[n] = sum g_t dt_t u_t, dC_t[n] = sum dy'_t h_t, summed over the group's
//             channels (overwritten) or, shared (D, N), over batch and steps (=/+=).
// Backward recomputes the states from the initial state: it does not read
// chunk_states (the fast kernel does, and is tested against this one).
#include "../core/act_math.h"
#include "../ops/scan.h"

typedef struct scan_ctx {
  const gk_op_desc *desc;
  gk_scan_dims s;
  gk_tensor Bv, Cv;   // B and C: (D, N) or (B, G, N, L) views
} scan_ctx;

static scan_ctx ctx_of(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  scan_ctx c = {d, gk_scan_dims_of(d), gk_scan_bc_view(a[GK_ARG_B], d->scan.b_layout),
                gk_scan_bc_view(a[GK_ARG_C], d->scan.c_layout)};
  return c;
}

// Flat index of B or C (var: (B, G, N, L) layout; shared: (D, N)).
static int64_t bc_index(const scan_ctx *c, bool var, int64_t G, int64_t b, int64_t d, int64_t n, int64_t t) {
  if (!var) return d * c->s.N + n;
  int64_t g = d / (c->s.D / G);
  return ((b * G + g) * c->s.N + n) * c->s.L + t;
}

static double dt_raw(const scan_ctx *c, const gk_kernel_args a, int64_t bd, int64_t t) {
  double v = gk_get(a[GK_ARG_DELTA], bd * c->s.L + t);
  if (a[GK_ARG_DELTA_BIAS]) v += gk_get(a[GK_ARG_DELTA_BIAS], bd % c->s.D);
  return v;
}

static double dt_of(const scan_ctx *c, double raw) {
  return c->desc->scan.delta_softplus ? gk_softplus_f64(raw, 1.0, 20.0) : raw;
}

static gk_status ref_scan_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  scan_ctx c = ctx_of(plan, a);
  gk_scan_dims s = c.s;
  double *h = ws;
  for (int64_t bd = 0; bd < s.B * s.D; bd++) {
    int64_t b = bd / s.D, d = bd % s.D;
    for (int64_t n = 0; n < s.N; n++)
      h[n] = a[GK_ARG_INITIAL_STATE] ? gk_get(a[GK_ARG_INITIAL_STATE], bd * s.N + n) : 0.0;
    for (int64_t t = 0; t < s.L; t++) {
      if (t % s.T == 0)
        for (int64_t n = 0; n < s.N; n++) gk_set(a[GK_ARG_CHUNK_STATES], (bd * s.nchunks + t / s.T) * s.N + n, h[n]);
      double dt = dt_of(&c, dt_raw(&c, a, bd, t)), u = gk_get(a[GK_ARG_U], bd * s.L + t), y = 0;
      for (int64_t n = 0; n < s.N; n++) {
        double A = gk_get(a[GK_ARG_A], d * s.N + n), Bt = gk_get(&c.Bv, bc_index(&c, s.var_b, s.Gb, b, d, n, t));
        h[n] = exp(dt * A) * h[n] + dt * Bt * u;
        y += gk_get(&c.Cv, bc_index(&c, s.var_c, s.Gc, b, d, n, t)) * h[n];
      }
      if (a[GK_ARG_D]) y += gk_get(a[GK_ARG_D], d) * u;
      if (a[GK_ARG_Z]) y *= gk_silu_f64(gk_get(a[GK_ARG_Z], bd * s.L + t));
      gk_set(a[GK_ARG_Y], bd * s.L + t, y);
    }
    if (a[GK_ARG_FINAL_STATE])
      for (int64_t n = 0; n < s.N; n++) gk_set(a[GK_ARG_FINAL_STATE], bd * s.N + n, h[n]);
  }
  return GK_SUCCESS;
}

// Workspace of backward, all f64: states hs (L+1, N), y' (L), the carried
// state gradient (N), then sums dA (D, N), dB, dC (their size), dD (D),
// ddelta_bias (D).
typedef struct bwd_ws {
  double *hs, *yp, *g, *dA, *dB, *dC, *dD, *ddb;
} bwd_ws;

static int64_t bc_numel(const scan_ctx *c, bool var, int64_t G) {
  return var ? c->s.B * G * c->s.N * c->s.L : c->s.D * c->s.N;
}

static bwd_ws ws_of(const scan_ctx *c, double *base) {
  const gk_scan_dims *s = &c->s;
  bwd_ws w;
  w.hs = base;
  w.yp = w.hs + (s->L + 1) * s->N;
  w.g = w.yp + s->L;
  w.dA = w.g + s->N;
  w.dB = w.dA + s->D * s->N;
  w.dC = w.dB + bc_numel(c, s->var_b, s->Gb);
  w.dD = w.dC + bc_numel(c, s->var_c, s->Gc);
  w.ddb = w.dD + s->D;
  return w;
}

// out = sum (+ out's old value when `accumulate`), element by element.
static void store_sum(const gk_tensor *out, const double *sum, int64_t n, bool accumulate) {
  if (!out) return;
  for (int64_t i = 0; i < n; i++) gk_set(out, i, sum[i] + (accumulate ? gk_get(out, i) : 0.0));
}

static gk_status ref_scan_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  scan_ctx c = ctx_of(plan, a);
  gk_scan_dims s = c.s;
  bwd_ws w = ws_of(&c, ws);
  int64_t nB = bc_numel(&c, s.var_b, s.Gb), nC = bc_numel(&c, s.var_c, s.Gc);
  for (double *p = w.dA; p < w.ddb + s.D; p++) *p = 0;
  gk_tensor dBv = gk_scan_bc_view(a[GK_ARG_DB], c.desc->scan.b_layout);
  gk_tensor dCv = gk_scan_bc_view(a[GK_ARG_DC], c.desc->scan.c_layout);
  for (int64_t bd = 0; bd < s.B * s.D; bd++) {
    int64_t b = bd / s.D, d = bd % s.D;
    double Dd = a[GK_ARG_D] ? gk_get(a[GK_ARG_D], d) : 0.0;
    for (int64_t n = 0; n < s.N; n++) {
      w.hs[n] = a[GK_ARG_INITIAL_STATE] ? gk_get(a[GK_ARG_INITIAL_STATE], bd * s.N + n) : 0.0;
      w.g[n] = a[GK_ARG_DFINAL_STATE] ? gk_get(a[GK_ARG_DFINAL_STATE], bd * s.N + n) : 0.0;
    }
    for (int64_t t = 0; t < s.L; t++) {
      double dt = dt_of(&c, dt_raw(&c, a, bd, t)), u = gk_get(a[GK_ARG_U], bd * s.L + t), y = Dd * u;
      for (int64_t n = 0; n < s.N; n++) {
        double A = gk_get(a[GK_ARG_A], d * s.N + n), Bt = gk_get(&c.Bv, bc_index(&c, s.var_b, s.Gb, b, d, n, t));
        double h = exp(dt * A) * w.hs[t * s.N + n] + dt * Bt * u;
        w.hs[(t + 1) * s.N + n] = h;
        y += gk_get(&c.Cv, bc_index(&c, s.var_c, s.Gc, b, d, n, t)) * h;
      }
      w.yp[t] = y;
    }
    for (int64_t t = s.L - 1; t >= 0; t--) {
      double raw = dt_raw(&c, a, bd, t), dt = dt_of(&c, raw), u = gk_get(a[GK_ARG_U], bd * s.L + t);
      double dy = gk_get(a[GK_ARG_DY], bd * s.L + t);
      if (a[GK_ARG_Z]) {
        double z = gk_get(a[GK_ARG_Z], bd * s.L + t);
        gk_set(a[GK_ARG_DZ], bd * s.L + t, dy * w.yp[t] * gk_dsilu_f64(z));
        dy *= gk_silu_f64(z);
      }
      w.dD[d] += dy * u;
      double du = dy * Dd, ddt = 0;
      for (int64_t n = 0; n < s.N; n++) {
        int64_t ib = bc_index(&c, s.var_b, s.Gb, b, d, n, t), ic = bc_index(&c, s.var_c, s.Gc, b, d, n, t);
        double A = gk_get(a[GK_ARG_A], d * s.N + n), Bt = gk_get(&c.Bv, ib), at = exp(dt * A);
        double hprev = w.hs[t * s.N + n], g = w.g[n] + gk_get(&c.Cv, ic) * dy;
        w.dC[ic] += dy * w.hs[(t + 1) * s.N + n];
        w.dB[ib] += g * dt * u;
        du += g * dt * Bt;
        ddt += g * (A * at * hprev + Bt * u);
        w.dA[d * s.N + n] += g * dt * at * hprev;
        w.g[n] = at * g;
      }
      if (c.desc->scan.delta_softplus) ddt *= gk_dsoftplus_f64(raw, 1.0, 20.0);
      w.ddb[d] += ddt;
      gk_set(a[GK_ARG_DU], bd * s.L + t, du);
      gk_set(a[GK_ARG_DDELTA], bd * s.L + t, ddt);
    }
    if (a[GK_ARG_DINITIAL_STATE])
      for (int64_t n = 0; n < s.N; n++) gk_set(a[GK_ARG_DINITIAL_STATE], bd * s.N + n, w.g[n]);
  }
  bool acc = c.desc->accumulate;
  store_sum(a[GK_ARG_DA], w.dA, s.D * s.N, acc);
  store_sum(&dBv, w.dB, nB, acc && !s.var_b);
  store_sum(&dCv, w.dC, nC, acc && !s.var_c);
  store_sum(a[GK_ARG_DD], w.dD, s.D, acc);
  store_sum(a[GK_ARG_DDELTA_BIAS], w.ddb, s.D, acc);
  return GK_SUCCESS;
}

static size_t ref_scan_fwd_workspace(const gk_plan *plan) {
  return (size_t)plan->desc.scan.d_state * sizeof(double);
}

static size_t ref_scan_bwd_workspace(const gk_plan *plan) {
  scan_ctx c = {&plan->desc, gk_scan_dims_of(&plan->desc), {0}, {0}};
  const gk_scan_dims *s = &c.s;
  int64_t n = (s->L + 1) * s->N + s->L + s->N + s->D * s->N + bc_numel(&c, s->var_b, s->Gb) +
              bc_numel(&c, s->var_c, s->Gc) + 2 * s->D;
  return (size_t)n * sizeof(double);
}

const gk_kernel gk_ref_scan_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_scan_fwd_workspace,
                                   .run = ref_scan_fwd};
const gk_kernel gk_ref_scan_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_scan_bwd_workspace,
                                   .run = ref_scan_bwd};
