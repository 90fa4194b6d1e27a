// AdamW, SGD and global-norm clipping against plain f64 re-implementations
// of torch.optim.AdamW, torch.optim.SGD and torch.nn.utils.clip_grad_norm_
// over 20 steps; f16/bf16 parameters with f32 master weights against the f32
// run; thread-count bit-identity; a non-finite norm scales nothing.
#include "harness.h"

enum { NT = 5, STEPS = 20 };

// Parameters of several shapes and layouts: a vector, a transposed matrix,
// a strided matrix, one over several pieces of the library's work split,
// and an empty one.
static const int ranks[NT] = {1, 2, 2, 2, 1};
static const int64_t shapes[NT][2] = {{7}, {3, 5}, {33, 64}, {3, 3000}, {0}};
static const layout lays[NT] = {CONTIGUOUS, TRANSPOSED, STRIDED, CONTIGUOUS, CONTIGUOUS};

typedef struct list {
  tbuf b[NT];
  gk_tensor t[NT];
} list;

static void list_make(list *l, gk_dtype dt) {
  for (int i = 0; i < NT; i++) {
    l->b[i] = tbuf_make(dt, ranks[i], shapes[i], lays[i]);
    l->t[i] = l->b[i].t;
  }
}

static void list_free(list *l) {
  for (int i = 0; i < NT; i++) tbuf_free(&l->b[i]);
}

static void list_fill(list *l, double lo, double hi) {
  for (int i = 0; i < NT; i++) tfill(&l->t[i], lo, hi);
}

static void list_copy(list *dst, const list *src) {
  for (int i = 0; i < NT; i++) tcopy_values(&dst->t[i], &src->t[i]);
}

static double worst_opt[4];  // largest relative error against the f64 formulas, per dtype

// max |a - b| / max(|b|, 1) over the list: relative for values of order 1
// and above, absolute below (the values here are of order 1).
static double list_rel(const list *a, const list *b) {
  double worst = 0;
  for (int i = 0; i < NT; i++)
    for (int64_t e = 0; e < gk_tensor_numel(&a->t[i]); e++) {
      double x = tget(&a->t[i], e), y = tget(&b->t[i], e);
      double r = fabs(x - y) / fmax(fabs(y), 1.0);
      if (!(r <= worst)) worst = r;
    }
  return worst;
}

static bool list_bits_equal(const list *a, const list *b) {
  for (int i = 0; i < NT; i++)
    if (!tbits_equal(&a->t[i], &b->t[i])) return false;
  return true;
}

// ---------------------------------------------------------------- f64 formulas

static void adamw_ref(const gk_adamw_config *c, double *p, double *m, double *v, double g, int64_t step) {
  *p *= 1 - c->lr * c->weight_decay;
  *m = *m + (1 - c->beta1) * (g - *m);
  *v = *v * c->beta2 + (1 - c->beta2) * g * g;
  double bc1 = 1 - pow(c->beta1, (double)step), bc2 = 1 - pow(c->beta2, (double)step);
  *p -= c->lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + c->eps);
}

static void sgd_ref(const gk_sgd_config *c, double *p, double *buf, double g, int64_t step) {
  g += c->weight_decay * *p;
  if (c->momentum != 0) {
    *buf = step == 1 ? g : *buf * c->momentum + (1 - c->dampening) * g;
    g = c->nesterov ? g + c->momentum * *buf : *buf;
  }
  *p -= c->lr * g;
}

// Total norm of a list in f64; scales it by max_norm / (norm + 1e-6) when < 1.
static double clip_ref(list *g, double max_norm) {
  double sum = 0;
  for (int i = 0; i < NT; i++)
    for (int64_t e = 0; e < gk_tensor_numel(&g->t[i]); e++) sum += tget(&g->t[i], e) * tget(&g->t[i], e);
  double norm = sqrt(sum), coef = max_norm / (norm + 1e-6);
  if (coef < 1)
    for (int i = 0; i < NT; i++)
      for (int64_t e = 0; e < gk_tensor_numel(&g->t[i]); e++) tset(&g->t[i], e, tget(&g->t[i], e) * coef);
  return norm;
}

// ---------------------------------------------------------------- runs

typedef enum opt_kind { ADAMW, SGD } opt_kind;

typedef struct opt_case {
  opt_kind kind;
  gk_adamw_config adamw;
  gk_sgd_config sgd;
  double max_norm;   // clip the gradients first when > 0
  double gscale;     // gradient size
} opt_case;

// The state of one run: parameters, two state lists (AdamW's moments, or
// SGD's momentum buffer), master weights for f16/bf16.
typedef struct run {
  gk_dtype dt;
  list p, s1, s2, master;
  bool has_master;
} run;

static void run_make(run *r, gk_dtype dt, const list *init) {
  r->dt = dt;
  gk_dtype st = dt == GK_F64 ? GK_F64 : GK_F32;
  list_make(&r->p, dt);
  list_make(&r->s1, st);
  list_make(&r->s2, st);
  for (int i = 0; i < NT; i++) {
    tfill(&r->s1.t[i], 0, 0);
    tfill(&r->s2.t[i], 0, 0);
  }
  list_copy(&r->p, init);
  r->has_master = dt == GK_F16 || dt == GK_BF16;
  if (r->has_master) {
    list_make(&r->master, GK_F32);
    list_copy(&r->master, init);
  }
}

static void run_free(run *r) {
  list_free(&r->p);
  list_free(&r->s1);
  list_free(&r->s2);
  if (r->has_master) list_free(&r->master);
}

// One optimizer step of run r with gradients g.
static gk_status step_run(const opt_case *oc, run *r, const list *g, int64_t step) {
  const gk_tensor *master = r->has_master ? r->master.t : NULL;
  if (oc->kind == ADAMW) return gk_adamw_step(&oc->adamw, NT, r->p.t, g->t, r->s1.t, r->s2.t, master, step);
  return gk_sgd_step(&oc->sgd, NT, r->p.t, g->t, oc->sgd.momentum != 0 ? r->s1.t : NULL, master, step);
}

// 20 steps of the library in dtype dt against the f64 formulas. f16/bf16
// also run in f32 with the same (rounded) gradients: the master weights and
// state must equal that run's bits, the parameters their rounding.
static void test_steps(const opt_case *oc, gk_dtype dt, const char *what) {
  list init, ref_p, ref_s1, ref_s2;
  list_make(&init, GK_F64);
  list_fill(&init, -1, 1);
  list_make(&ref_p, GK_F64);
  list_make(&ref_s1, GK_F64);
  list_make(&ref_s2, GK_F64);
  run r, f32;
  run_make(&r, dt, &init);
  bool half = dt == GK_F16 || dt == GK_BF16;
  if (half) run_make(&f32, GK_F32, &init);
  list_copy(&ref_p, half ? &r.master : &r.p);  // start from the values the run holds
  for (int i = 0; i < NT; i++) {
    tfill(&ref_s1.t[i], 0, 0);
    tfill(&ref_s2.t[i], 0, 0);
  }
  list g, gref, g32;
  list_make(&g, dt);
  list_make(&gref, GK_F64);
  if (half) list_make(&g32, GK_F32);
  bool ok = true;
  for (int64_t step = 1; step <= STEPS && ok; step++) {
    list_fill(&g, -oc->gscale, oc->gscale);
    list_copy(&gref, &g);
    if (oc->max_norm > 0) {  // clip, then go on from the clipped gradients as stored
      double norm = 0, norm_ref = clip_ref(&gref, oc->max_norm);
      check(gk_clip_grad_norm(NT, g.t, oc->max_norm, &norm) == GK_SUCCESS, "%s clip: %s", what, gk_last_error());
      check(fabs(norm - norm_ref) <= 1e-12 * norm_ref, "%s %s step %lld: norm %.17g, want %.17g", what,
            gk_dtype_name(dt), (long long)step, norm, norm_ref);
      double rel = list_rel(&g, &gref), lim = tol_of(dt).rtol;
      check(rel <= lim, "%s %s step %lld: clipped gradients off by %.3g relative", what, gk_dtype_name(dt),
            (long long)step, rel);
      list_copy(&gref, &g);
    }
    if (half) list_copy(&g32, &g);
    gk_status s = step_run(oc, &r, &g, step);
    ok = s == GK_SUCCESS;
    check(ok, "%s %s step %lld: %s", what, gk_dtype_name(dt), (long long)step, gk_last_error());
    if (half) check(step_run(oc, &f32, &g32, step) == GK_SUCCESS, "%s f32 twin: %s", what, gk_last_error());
    for (int i = 0; i < NT; i++)
      for (int64_t e = 0; e < gk_tensor_numel(&ref_p.t[i]); e++) {
        double p = tget(&ref_p.t[i], e), a = tget(&ref_s1.t[i], e), b = tget(&ref_s2.t[i], e);
        double gv = tget(&gref.t[i], e);
        if (oc->kind == ADAMW) adamw_ref(&oc->adamw, &p, &a, &b, gv, step);
        else sgd_ref(&oc->sgd, &p, &a, gv, step);
        tset(&ref_p.t[i], e, p);
        tset(&ref_s1.t[i], e, a);
        tset(&ref_s2.t[i], e, b);
      }
  }
  // f32 within 1e-6 relative of the f64 formulas (f64 within 1e-12); f16/bf16
  // through their master weights, which must be the f32 run's bits.
  const list *held = half ? &r.master : &r.p;
  double rel = list_rel(held, &ref_p), limit = dt == GK_F64 ? 1e-12 : 1e-6;
  check(rel <= limit, "%s %s: parameters after %d steps off by %.3g relative", what, gk_dtype_name(dt), STEPS, rel);
  if (rel > worst_opt[dt]) worst_opt[dt] = rel;
  if (oc->kind == ADAMW || oc->sgd.momentum != 0) {
    double rs = list_rel(&r.s1, &ref_s1);  // momentum sums carry a few more roundings
    check(rs <= 4 * limit, "%s %s: state after %d steps off by %.3g relative", what, gk_dtype_name(dt), STEPS, rs);
  }
  if (half) {
    check(list_bits_equal(&r.master, &f32.p), "%s %s: master weights differ from the f32 run", what,
          gk_dtype_name(dt));
    check(list_bits_equal(&r.s1, &f32.s1) && list_bits_equal(&r.s2, &f32.s2),
          "%s %s: optimizer state differs from the f32 run", what, gk_dtype_name(dt));
    bool rounded = true;
    for (int i = 0; i < NT; i++)
      for (int64_t e = 0; e < gk_tensor_numel(&r.p.t[i]); e++) {
        float m = (float)tget(&r.master.t[i], e);
        double want = dt == GK_F16 ? gk_f16_to_f32(gk_f32_to_f16(m)) : gk_bf16_to_f32(gk_f32_to_bf16(m));
        rounded &= tget(&r.p.t[i], e) == want;
      }
    check(rounded, "%s %s: parameters are not the rounded master weights", what, gk_dtype_name(dt));
    for (int i = 0; i < NT; i++) check(tbuf_canaries_intact(&r.p.b[i]), "%s: bytes outside params[%d]", what, i);
    run_free(&f32);
    list_free(&g32);
  }
  for (int i = 0; i < NT; i++)
    check(tbuf_canaries_intact(&held->b[i]) && tbuf_canaries_intact(&r.s1.b[i]), "%s: bytes outside a tensor", what);
  run_free(&r);
  list_free(&g);
  list_free(&gref);
  list_free(&init);
  list_free(&ref_p);
  list_free(&ref_s1);
  list_free(&ref_s2);
}

// The same AdamW step and clipping with 1, 2 and 3 threads give the same bits.
static void test_threads(gk_dtype dt) {
  list init, g0;
  list_make(&init, GK_F64);
  list_fill(&init, -1, 1);
  list_make(&g0, dt);
  list_fill(&g0, -3, 3);
  run runs[3];
  list gs[3];
  double norms[3];
  gk_adamw_config c;
  gk_adamw_config_init(&c);
  for (int t = 0; t < 3; t++) {
    gk_set_num_threads(t + 1);
    run_make(&runs[t], dt, &init);
    list_make(&gs[t], dt);
    list_copy(&gs[t], &g0);
    check(gk_clip_grad_norm(NT, gs[t].t, 1.0, &norms[t]) == GK_SUCCESS, "threads clip: %s", gk_last_error());
    check(gk_adamw_step(&c, NT, runs[t].p.t, gs[t].t, runs[t].s1.t, runs[t].s2.t,
                        runs[t].has_master ? runs[t].master.t : NULL, 1) == GK_SUCCESS,
          "threads adamw: %s", gk_last_error());
  }
  for (int t = 1; t < 3; t++) {
    check(memcmp(&norms[0], &norms[t], sizeof(double)) == 0, "%s: norm with %d threads differs", gk_dtype_name(dt),
          t + 1);
    check(list_bits_equal(&gs[0], &gs[t]) && list_bits_equal(&runs[0].p, &runs[t].p),
          "%s: clipped gradients or parameters with %d threads differ", gk_dtype_name(dt), t + 1);
  }
  for (int t = 0; t < 3; t++) {
    run_free(&runs[t]);
    list_free(&gs[t]);
  }
  list_free(&g0);
  list_free(&init);
  gk_set_num_threads(2);
}

// A non-finite norm returns GK_ERR_NON_FINITE and leaves every gradient as
// it was; a norm under max_norm leaves them too.
static void test_clip_edges(gk_dtype dt) {
  list g, copy;
  list_make(&g, dt);
  list_make(&copy, dt);
  for (int bad = 0; bad < 3; bad++) {
    list_fill(&g, -1, 1);
    double special = bad == 0 ? INFINITY : bad == 1 ? NAN : 0;
    if (bad < 2) tset(&g.t[3], 1234, special);
    if (bad == 2 && dt != GK_F64 && dt != GK_F32) tset(&g.t[2], 5, dt == GK_F16 ? 60000 : 3e38);
    if (bad == 2 && (dt == GK_F64 || dt == GK_F32)) tset(&g.t[2], 5, dt == GK_F64 ? 1e300 : 3e38);
    list_copy(&copy, &g);
    double norm = 0;
    gk_status s = gk_clip_grad_norm(NT, g.t, 1.0, &norm);
    if (bad < 2 || dt == GK_F64) {
      check(s == GK_ERR_NON_FINITE && !isfinite(norm), "%s clip with %s: status %d, norm %g", gk_dtype_name(dt),
            bad == 0 ? "inf" : bad == 1 ? "nan" : "huge values", s, norm);
      check(strstr(gk_last_error(), "nothing was scaled") != NULL, "clip message: %s", gk_last_error());
      check(list_bits_equal(&g, &copy), "%s clip: a non-finite norm scaled the gradients", gk_dtype_name(dt));
    } else {  // f32/f16/bf16 squares are summed in f64: no overflow
      check(s == GK_SUCCESS && isfinite(norm), "%s clip with large values: status %d, norm %g", gk_dtype_name(dt), s,
            norm);
    }
  }
  list_fill(&g, -1, 1);
  list_copy(&copy, &g);
  double norm;
  check(gk_clip_grad_norm(NT, g.t, 1e9, &norm) == GK_SUCCESS && list_bits_equal(&g, &copy),
        "%s clip under max_norm changed the gradients", gk_dtype_name(dt));
  check(gk_clip_grad_norm(0, NULL, 1.0, &norm) == GK_SUCCESS && norm == 0, "clip of no tensors: %s", gk_last_error());
  list_free(&g);
  list_free(&copy);
}

int main(void) {
  gk_set_num_threads(2);
  const gk_dtype dts[4] = {GK_F32, GK_F64, GK_F16, GK_BF16};
  opt_case cases[8];
  int n = 0;
  memset(cases, 0, sizeof cases);
  gk_adamw_config_init(&cases[n].adamw);
  cases[n].gscale = 1;
  n++;  // torch's defaults
  gk_adamw_config_init(&cases[n].adamw);
  cases[n].adamw = (gk_adamw_config){3e-3, 0.3, 0.95, 1e-6, 0.1};  // lerp's other branch
  cases[n].max_norm = 5;
  cases[n].gscale = 2;
  n++;
  gk_adamw_config_init(&cases[n].adamw);
  cases[n].adamw.weight_decay = 0;
  cases[n].max_norm = 1e9;  // clipping that never scales
  cases[n].gscale = 0.01;
  n++;
  for (int v = 0; v < 5; v++, n++) {
    cases[n].kind = SGD;
    gk_sgd_config_init(&cases[n].sgd);
    cases[n].sgd.lr = 0.01;
    cases[n].gscale = 1;
    if (v >= 1) cases[n].sgd.momentum = 0.9;
    if (v == 2) cases[n].sgd.dampening = 0.1;
    if (v == 3) cases[n].sgd.nesterov = 1;
    if (v == 4 || v == 0) cases[n].sgd.weight_decay = 0.05;
    if (v == 3) cases[n].max_norm = 50;  // norm about 61: scales by about 0.8
  }
  for (int c = 0; c < n; c++)
    for (int t = 0; t < 4; t++) {
      char what[64];
      snprintf(what, sizeof what, "%s case %d", cases[c].kind == ADAMW ? "adamw" : "sgd", c);
      test_steps(&cases[c], dts[t], what);
    }
  for (int t = 0; t < 4; t++) {
    test_threads(dts[t]);
    test_clip_edges(dts[t]);
  }
  printf("largest relative error after %d steps against the f64 formulas: f32 %.3g, f64 %.3g, f16/bf16 masters "
         "%.3g / %.3g\n", STEPS, worst_opt[GK_F32], worst_opt[GK_F64], worst_opt[GK_F16], worst_opt[GK_BF16]);
  return finish("test_optim");
}
