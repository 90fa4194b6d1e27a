// The selective scan CPU kernels for one type REAL (dtype REAL_DT) with
// suffix SFX, exp EXP, softplus SOFTPLUS and its derivative DSOFTPLUS, SILU
// and DSILU; included by scan.c (see there for the work grid and the levels).

// ---------------------------------------------------------------- access

// n elements of t from element offset `off`, `stride` apart, as REAL.
static void FN(vload)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, REAL *out) {
  const char *p = (const char *)t->data + off * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: for (int64_t i = 0; i < n; i++) out[i] = (REAL)((const float *)p)[i * stride]; break;
  case GK_F64: for (int64_t i = 0; i < n; i++) out[i] = (REAL)((const double *)p)[i * stride]; break;
  case GK_F16: for (int64_t i = 0; i < n; i++) out[i] = gk_f16_to_f32(((const uint16_t *)p)[i * stride]); break;
  case GK_BF16: for (int64_t i = 0; i < n; i++) out[i] = gk_bf16_to_f32(((const uint16_t *)p)[i * stride]); break;
  default: break;  // the plan admits floating tensors only
  }
}

// The same, rounded to nearest even into t's dtype.
static void FN(vstore)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, const REAL *in) {
  char *p = (char *)t->data + off * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: for (int64_t i = 0; i < n; i++) ((float *)p)[i * stride] = (float)in[i]; break;
  case GK_F64: for (int64_t i = 0; i < n; i++) ((double *)p)[i * stride] = (double)in[i]; break;
  case GK_F16: for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i * stride] = gk_f32_to_f16((float)in[i]); break;
  case GK_BF16: for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i * stride] = gk_f32_to_bf16((float)in[i]); break;
  default: break;
  }
}

// Inputs: t's own memory when it holds REAL elements one apart, else buf.
static const REAL *FN(vin)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, REAL *buf) {
  if (t->dtype == REAL_DT && stride == 1) return (const REAL *)t->data + off;
  FN(vload)(t, off, stride, n, buf);
  return buf;
}

// Outputs: write through vout's pointer, then vcommit (a no-op for t's own memory).
static REAL *FN(vout)(const gk_tensor *t, int64_t off, int64_t stride, REAL *buf) {
  return t->dtype == REAL_DT && stride == 1 ? (REAL *)t->data + off : buf;
}

static void FN(vcommit)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, const REAL *p,
                        const REAL *buf) {
  if (p == buf) FN(vstore)(t, off, stride, n, buf);
}

// One value of a 1-D tensor.
static REAL FN(vget)(const gk_tensor *t, int64_t i) {
  REAL v;
  FN(vload)(t, i * t->strides[0], 1, 1, &v);
  return v;
}

// dt over steps [t0, t0 + tn) of (b, d), and raw = delta + delta_bias before
// the softplus.
GK_SCAN_INLINE static void FN(load_dt)(const scan_job *j, int64_t b, int64_t d, int64_t t0, int64_t tn, REAL *raw, REAL *dt) {
  const gk_tensor *x = j->a[GK_ARG_DELTA];
  FN(vload)(x, at3(x, b, d, t0), x->strides[2], tn, raw);
  if (j->a[GK_ARG_DELTA_BIAS]) {
    REAL bias = FN(vget)(j->a[GK_ARG_DELTA_BIAS], d);
    for (int64_t t = 0; t < tn; t++) raw[t] += bias;
  }
  if (j->plan->desc.scan.delta_softplus)  // (loops of their own, so they vectorize)
    for (int64_t t = 0; t < tn; t++) dt[t] = SOFTPLUS(raw[t]);
  else
    for (int64_t t = 0; t < tn; t++) dt[t] = raw[t];
}

// Steps [t0, t0 + tn) of (b, d) of a (B, D, L) tensor.
static const REAL *FN(load_row)(const gk_tensor *x, int64_t b, int64_t d, int64_t t0, int64_t tn, REAL *buf) {
  return FN(vin)(x, at3(x, b, d, t0), x->strides[2], tn, buf);
}

// dy' = dy silu(z) (dy without z) over the chunk; dy to dyb, z to zb.
static void FN(load_dyp)(const scan_job *j, int64_t b, int64_t d, int64_t t0, int64_t tn, REAL *dyb, REAL *zb,
                         REAL *dyp) {
  const gk_tensor *dy = j->a[GK_ARG_DY], *z = j->a[GK_ARG_Z];
  FN(vload)(dy, at3(dy, b, d, t0), dy->strides[2], tn, dyb);
  if (z) {
    FN(vload)(z, at3(z, b, d, t0), z->strides[2], tn, zb);
    for (int64_t t = 0; t < tn; t++) dyp[t] = dyb[t] * SILU(zb[t]);
  } else {
    for (int64_t t = 0; t < tn; t++) dyp[t] = dyb[t];
  }
}

// B or C of (b, d) for states [n0, n0 + nb) and steps [t0, t0 + tn) as
// tile[t NB + n], zero for n >= nb. Returns the step stride: NB, or 0 when
// shared (one row).
static int64_t FN(load_bc)(const scan_job *j, const gk_tensor *v, bool var, int64_t G, int64_t b, int64_t d,
                           int64_t n0, int64_t nb, int64_t t0, int64_t tn, REAL *tile) {
  if (!var) {
    FN(vload)(v, at2(v, d, n0), v->strides[1], nb, tile);
    for (int64_t n = nb; n < NB; n++) tile[n] = 0;
    return 0;
  }
  int64_t g = d / (j->s.D / G), off = at3(v, b, g, n0) + t0 * v->strides[3];
  REAL buf[TMAX];
  for (int64_t n = 0; n < nb; n++) {
    const REAL *p = FN(vin)(v, off + n * v->strides[2], v->strides[3], tn, buf);
    for (int64_t t = 0; t < tn; t++) tile[t * NB + n] = p[t];
  }
  for (int64_t t = 0; t < tn; t++)
    for (int64_t n = nb; n < NB; n++) tile[t * NB + n] = 0;
  return NB;
}

// A[d, n0 .. n0 + nb) into Ab, zero for n >= nb (a zero A with zero B and C
// keeps the padding states at zero).
static void FN(load_A)(const gk_tensor *A, int64_t d, int64_t n0, int64_t nb, REAL *Ab) {
  FN(vload)(A, at2(A, d, n0), A->strides[1], nb, Ab);
  for (int64_t n = nb; n < NB; n++) Ab[n] = 0;
}

// States [n0, n0 + n) of (b, d) of a (B, D, N) state tensor (zeros without one).
static void FN(load_state)(const gk_tensor *t, int64_t b, int64_t d, int64_t n0, int64_t n, REAL *h) {
  if (!t) {
    for (int64_t i = 0; i < n; i++) h[i] = 0;
    return;
  }
  FN(vload)(t, at3(t, b, d, n0), t->strides[2], n, h);
}

static REAL *FN(run_of)(const scan_job *j, void *base, int64_t bd, int64_t r) {
  return (REAL *)base + (bd * j->S + r) * j->s.N;
}

// The B (or C) tile of (b, d) for state block k and chunk steps [t0,
// t0 + tn): from the task's cache when it holds one (per-batch B/C with
// N <= NCACHE NB: the same for every channel of the task), else loaded into
// buf. *stride gets the step stride.
static const REAL *FN(tile)(const scan_job *j, const gk_tensor *v, bool var, int64_t G, bool cached,
                            const REAL *cache, int64_t b, int64_t d, int64_t k, int64_t t0, int64_t tn, REAL *buf,
                            int64_t *stride) {
  if (cached) {
    *stride = NB;
    return cache + k * TMAX * NB;
  }
  *stride = FN(load_bc)(j, v, var, G, b, d, k * NB, gk_min64(NB, j->s.N - k * NB), t0, tn, buf);
  return buf;
}

// Fills the task's cache for per-batch B or C at (b, chunk) when it fits.
static bool FN(fill_cache)(const scan_job *j, const gk_tensor *v, bool var, int64_t G, int64_t b, int64_t d,
                           int64_t t0, int64_t tn, REAL *cache) {
  int64_t N = j->s.N;
  if (!var || N > NCACHE * NB) return false;
  for (int64_t k = 0; k * NB < N; k++)
    FN(load_bc)(j, v, var, G, b, d, k * NB, gk_min64(NB, N - k * NB), t0, tn, cache + k * TMAX * NB);
  return true;
}

// ---------------------------------------------------------------- math

// p[0] + ... + p[NB-1] as a fixed pairwise tree (NB = 16).
GK_SCAN_INLINE static REAL FN(sum_nb)(const REAL *p) {
  REAL s8[8], s4[4];
  for (int i = 0; i < 8; i++) s8[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// One block of nb <= NB states h over tn steps, computed NB wide (A, B, C
// padded with zeros):
//   a_t = exp(dt_t A);  h = a_t h + (dt_t u_t) B_t
// then, when given: y[t] += C_t . h;  hs[(t+1) NB + n] = h_t (hs[n] must
// hold the start state);  as[t NB + n] = a_t;  prod[n] *= a_t.
GK_SCAN_INLINE static void FN(chunk_fwd)(REAL *h, int64_t nb, const REAL *A, const REAL *Bt, int64_t bs, const REAL *Ct,
                          int64_t cs, const REAL *dt, const REAL *u, int64_t tn, REAL *y, REAL *hs, REAL *as,
                          REAL *prod) {
  REAL hl[NB], at[NB], pl[NB], pr[NB];
  for (int64_t n = 0; n < NB; n++) {
    hl[n] = n < nb ? h[n] : 0;
    pl[n] = prod && n < nb ? prod[n] : 1;
  }
  for (int64_t t = 0; t < tn; t++) {
    REAL dtt = dt[t], dtu = dtt * u[t];
    const REAL *b = Bt + t * bs;
    for (int n = 0; n < NB; n++) at[n] = EXP(dtt * A[n]);
    for (int n = 0; n < NB; n++) hl[n] = at[n] * hl[n] + dtu * b[n];
    if (y) {
      const REAL *c = Ct + t * cs;
      for (int n = 0; n < NB; n++) pr[n] = c[n] * hl[n];
      y[t] += FN(sum_nb)(pr);
    }
    if (hs)
      for (int n = 0; n < NB; n++) {
        hs[(t + 1) * NB + n] = hl[n];
        as[t * NB + n] = at[n];
      }
    if (prod)
      for (int n = 0; n < NB; n++) pl[n] *= at[n];
  }
  for (int64_t n = 0; n < nb; n++) {
    h[n] = hl[n];
    if (prod) prod[n] = pl[n];
  }
}

// One block of states backwards over tn steps, NB wide, from the state
// gradient `carry` (nb values) flowing in from step tn (left as the one
// flowing out of step 0):
//   g = carry + C_t dy'_t;  carry = a_t g
//   dB_t += g dt_t u_t;  dC_t += dy'_t h_t;  dA += g dt_t a_t h_{t-1}
//   du[t] += dt_t sum_n g B_t;  ddt[t] += sum_n g (A a_t h_{t-1} + B_t u_t)
// dB, dC (NB wide) advance by dbs, dcs per step (0: sums over the steps);
// dA gets nb values. hs, as as chunk_fwd left them.
GK_SCAN_INLINE static void FN(chunk_bwd)(REAL *carry, int64_t nb, const REAL *A, const REAL *Bt, int64_t bs, const REAL *Ct,
                          int64_t cs, const REAL *dt, const REAL *u, const REAL *dyp, int64_t tn, const REAL *hs,
                          const REAL *as, REAL *du, REAL *ddt, REAL *dA, REAL *dB, int64_t dbs, REAL *dC,
                          int64_t dcs) {
  REAL cl[NB], dAl[NB], s1[NB], s2[NB];
  for (int64_t n = 0; n < NB; n++) {
    cl[n] = n < nb ? carry[n] : 0;
    dAl[n] = 0;
  }
  for (int64_t t = tn - 1; t >= 0; t--) {
    const REAL *b = Bt + t * bs, *c = Ct + t * cs, *hp = hs + t * NB, *hc = hp + NB, *at = as + t * NB;
    REAL dtt = dt[t], ut = u[t], dtu = dtt * ut, dy = dyp[t];
    REAL *db = dB + t * dbs, *dc = dC + t * dcs;
    for (int n = 0; n < NB; n++) {
      REAL g = cl[n] + c[n] * dy, ah = at[n] * hp[n];
      db[n] += g * dtu;
      dc[n] += dy * hc[n];
      dAl[n] += g * ah * dtt;
      s1[n] = g * b[n];
      s2[n] = g * (A[n] * ah + b[n] * ut);
      cl[n] = at[n] * g;
    }
    du[t] += dtt * FN(sum_nb)(s1);
    ddt[t] += FN(sum_nb)(s2);
  }
  for (int64_t n = 0; n < nb; n++) {
    carry[n] = cl[n];
    dA[n] += dAl[n];
  }
}

// ---------------------------------------------------------------- forward

// Level 1: each range but the last from a zero state: end state to run,
// product of the decays to prod.
GK_SCAN_CLONES static void FN(fwd_level1)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  if (tr.r == j->S - 1) return;
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N;
  REAL raw[TMAX], dt[TMAX], ub[TMAX], Ab[NB], Bt[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      REAL *e = FN(run_of)(j, j->run, b * s->D + d, tr.r), *pr = FN(run_of)(j, j->prod, b * s->D + d, tr.r);
      for (int64_t n = 0; n < N; n++) {
        e[n] = 0;
        pr[n] = 1;
      }
      for (int64_t c = tr.c0; c < tr.c1; c++) {
        int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0);
        FN(load_dt)(j, b, d, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], b, d, t0, tn, ub);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          FN(load_A)(a[GK_ARG_A], d, n0, nb, Ab);
          int64_t bs = FN(load_bc)(j, &j->Bv, s->var_b, s->Gb, b, d, n0, nb, t0, tn, Bt);
          FN(chunk_fwd)(e + n0, nb, Ab, Bt, bs, NULL, 0, dt, u, tn, NULL, NULL, NULL, pr + n0);
        }
      }
    }
}

// Level 2, task = ROWS_PER_TASK (b, d): start_0 = h0, start_{r+1} = P_r
// start_r + E_r, the starts replacing the end states in run.
static void FN(fwd_level2)(const scan_job *j, int64_t task) {
  int64_t N = j->s.N, end = gk_min64(j->s.B * j->s.D, (task + 1) * ROWS_PER_TASK);
  for (int64_t bd = task * ROWS_PER_TASK; bd < end; bd++) {
    REAL *h = FN(run_of)(j, j->run, bd, 0);  // start_0 is loaded in place, then carried
    REAL e0[NB];
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
      int64_t nb = gk_min64(NB, N - n0);
      for (int64_t n = 0; n < nb; n++) e0[n] = h[n0 + n];
      FN(load_state)(j->a[GK_ARG_INITIAL_STATE], bd / j->s.D, bd % j->s.D, n0, nb, h + n0);
      for (int64_t n = 0; n < nb; n++) {
        REAL H = h[n0 + n], E = e0[n];
        for (int64_t r = 0; r + 1 < j->S; r++) {
          REAL *next = FN(run_of)(j, j->run, bd, r + 1) + n0 + n;
          REAL P = FN(run_of)(j, j->prod, bd, r)[n0 + n];
          H = P * H + E;
          if (r + 2 < j->S) E = *next;
          *next = H;
        }
      }
    }
  }
}

// Level 3 (the only level when S = 1): each range from its start state,
// chunk by chunk, each chunk for all the task's channels.
GK_SCAN_CLONES static void FN(fwd_task)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  const gk_tensor *Y = a[GK_ARG_Y], *CS = a[GK_ARG_CHUNK_STATES], *FS = a[GK_ARG_FINAL_STATE];
  int64_t N = s->N;
  REAL raw[TMAX], dt[TMAX], ub[TMAX], zb[TMAX], y[TMAX], yb[TMAX], Ab[NB];
  REAL Bc[NCACHE * TMAX * NB], Cc[NCACHE * TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++) {
    if (j->S == 1)
      for (int64_t d = tr.d0; d < tr.d1; d++)
        FN(load_state)(a[GK_ARG_INITIAL_STATE], b, d, 0, N, FN(run_of)(j, j->run, b * s->D + d, 0));
    for (int64_t c = tr.c0; c < tr.c1; c++) {
      int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0);
      bool cb = FN(fill_cache)(j, &j->Bv, s->var_b, s->Gb, b, tr.d0, t0, tn, Bc);
      bool cc = FN(fill_cache)(j, &j->Cv, s->var_c, s->Gc, b, tr.d0, t0, tn, Cc);
      for (int64_t d = tr.d0; d < tr.d1; d++) {
        REAL *h = FN(run_of)(j, j->run, b * s->D + d, tr.r);
        REAL Dd = a[GK_ARG_D] ? FN(vget)(a[GK_ARG_D], d) : 0;
        FN(load_dt)(j, b, d, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], b, d, t0, tn, ub);
        for (int64_t t = 0; t < tn; t++) y[t] = 0;
        FN(vstore)(CS, at3(CS, b, d, c), CS->strides[3], N, h);
        for (int64_t k = 0; k * NB < N; k++) {
          int64_t nb = gk_min64(NB, N - k * NB), bs, cst;
          FN(load_A)(a[GK_ARG_A], d, k * NB, nb, Ab);
          const REAL *Bt = FN(tile)(j, &j->Bv, s->var_b, s->Gb, cb, Bc, b, d, k, t0, tn, Bc, &bs);
          const REAL *Ct = FN(tile)(j, &j->Cv, s->var_c, s->Gc, cc, Cc, b, d, k, t0, tn, Cc, &cst);
          FN(chunk_fwd)(h + k * NB, nb, Ab, Bt, bs, Ct, cst, dt, u, tn, y, NULL, NULL, NULL);
        }
        const REAL *z = a[GK_ARG_Z] ? FN(load_row)(a[GK_ARG_Z], b, d, t0, tn, zb) : NULL;
        int64_t yo = at3(Y, b, d, t0);
        REAL *yp = FN(vout)(Y, yo, Y->strides[2], yb);
        for (int64_t t = 0; t < tn; t++) yp[t] = y[t] + Dd * u[t];
        if (z)
          for (int64_t t = 0; t < tn; t++) yp[t] *= SILU(z[t]);
        FN(vcommit)(Y, yo, Y->strides[2], tn, yp, yb);
      }
    }
    if (tr.r == j->S - 1 && FS)
      for (int64_t d = tr.d0; d < tr.d1; d++)
        FN(vstore)(FS, at2(FS, b, d), FS->strides[2], N, FN(run_of)(j, j->run, b * s->D + d, tr.r));
  }
}

// ---------------------------------------------------------------- backward

// Level 1: each range but the first backwards from a zero state gradient:
// the gradient flowing out of its first step to run, the decay product to prod.
GK_SCAN_CLONES static void FN(bwd_level1)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  if (tr.r == 0) return;
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N;
  REAL raw[TMAX], dt[TMAX], dyb[TMAX], zb[TMAX], dyp[TMAX], Ab[NB], Ct[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      REAL *R = FN(run_of)(j, j->run, b * s->D + d, tr.r), *P = FN(run_of)(j, j->prod, b * s->D + d, tr.r);
      for (int64_t n = 0; n < N; n++) {
        R[n] = 0;
        P[n] = 1;
      }
      for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
        int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0);
        FN(load_dt)(j, b, d, t0, tn, raw, dt);
        FN(load_dyp)(j, b, d, t0, tn, dyb, zb, dyp);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          FN(load_A)(a[GK_ARG_A], d, n0, nb, Ab);
          int64_t cs = FN(load_bc)(j, &j->Cv, s->var_c, s->Gc, b, d, n0, nb, t0, tn, Ct);
          REAL Rl[NB], Pl[NB], at[NB];
          for (int64_t n = 0; n < NB; n++) {
            Rl[n] = n < nb ? R[n0 + n] : 0;
            Pl[n] = n < nb ? P[n0 + n] : 1;
          }
          for (int64_t t = tn - 1; t >= 0; t--) {
            const REAL *cr = Ct + t * cs;
            for (int n = 0; n < NB; n++) at[n] = EXP(dt[t] * Ab[n]);
            for (int n = 0; n < NB; n++) {
              Rl[n] = at[n] * (Rl[n] + cr[n] * dyp[t]);
              Pl[n] *= at[n];
            }
          }
          for (int64_t n = 0; n < nb; n++) {
            R[n0 + n] = Rl[n];
            P[n0 + n] = Pl[n];
          }
        }
      }
    }
}

// Level 2, task = ROWS_PER_TASK (b, d): carry_{S-1} = dfinal_state or 0,
// carry_{r-1} = P_r carry_r + R_r, the carries replacing R in run.
static void FN(bwd_level2)(const scan_job *j, int64_t task) {
  int64_t N = j->s.N, end = gk_min64(j->s.B * j->s.D, (task + 1) * ROWS_PER_TASK);
  REAL fin[NB];
  for (int64_t bd = task * ROWS_PER_TASK; bd < end; bd++)
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
      int64_t nb = gk_min64(NB, N - n0);
      FN(load_state)(j->a[GK_ARG_DFINAL_STATE], bd / j->s.D, bd % j->s.D, n0, nb, fin);
      for (int64_t n = 0; n < nb; n++) {
        REAL carry = fin[n];
        for (int64_t r = j->S - 1; r >= 0; r--) {
          REAL *slot = FN(run_of)(j, j->run, bd, r) + n0 + n;
          REAL R = r > 0 ? *slot : 0;
          *slot = carry;
          if (r > 0) carry = FN(run_of)(j, j->prod, bd, r)[n0 + n] * carry + R;
        }
      }
    }
}

// Level 3 (the only level when S = 1): each range backwards from its carry,
// chunk by chunk (last first), each chunk for all the task's channels, its
// states recomputed from the saved chunk state.
GK_SCAN_CLONES static void FN(bwd_task)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
  const gk_tensor *CS = a[GK_ARG_CHUNK_STATES], *DI = a[GK_ARG_DINITIAL_STATE];
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N, L = s->L, K = j->K;
  int64_t ts = tr.c0 * s->T, te = gk_min64(L, tr.c1 * s->T);  // the range's steps
  bool var_b = s->var_b, var_c = s->var_c;
  for (int64_t d = tr.d0; d < tr.d1; d++)
    for (int64_t k = 0; k < K; k++) ((REAL *)j->params)[(tr.slot * s->D + d) * K + k] = 0;
  REAL *parts[2] = {var_b ? (REAL *)j->varB : NULL, var_c ? (REAL *)j->varC : NULL};
  for (int i = 0; i < 2; i++)
    for (int64_t b = tr.b0; parts[i] && b < tr.b1; b++)
      for (int64_t n = 0; n < N; n++) {
        REAL *p = parts[i] + ((tr.p * s->B + b) * N + n) * L;
        for (int64_t t = ts; t < te; t++) p[t] = 0;
      }
  REAL raw[TMAX], dt[TMAX], ub[TMAX], dyb[TMAX], zb[TMAX], dyp[TMAX], yp[TMAX], du[TMAX], ddt[TMAX], ob[TMAX];
  REAL Ab[NB], hs[(TMAX + 1) * NB], as[TMAX * NB], dBt[TMAX * NB], dCt[TMAX * NB];
  REAL Bc[NCACHE * TMAX * NB], Cc[NCACHE * TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++) {
    if (j->S == 1)
      for (int64_t d = tr.d0; d < tr.d1; d++)
        FN(load_state)(a[GK_ARG_DFINAL_STATE], b, d, 0, N, FN(run_of)(j, j->run, b * s->D + d, 0));
    for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
      int64_t t0 = c * s->T, tn = gk_min64(s->T, L - t0);
      bool cb = FN(fill_cache)(j, &j->Bv, var_b, s->Gb, b, tr.d0, t0, tn, Bc);
      bool cc = FN(fill_cache)(j, &j->Cv, var_c, s->Gc, b, tr.d0, t0, tn, Cc);
      for (int64_t d = tr.d0; d < tr.d1; d++) {
        REAL *carry = FN(run_of)(j, j->run, b * s->D + d, tr.r), *slot = (REAL *)j->params + (tr.slot * s->D + d) * K;
        REAL Dd = a[GK_ARG_D] ? FN(vget)(a[GK_ARG_D], d) : 0, dD = 0, ddb = 0;
        FN(load_dt)(j, b, d, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], b, d, t0, tn, ub);
        FN(load_dyp)(j, b, d, t0, tn, dyb, zb, dyp);
        for (int64_t t = 0; t < tn; t++) du[t] = ddt[t] = yp[t] = 0;
        for (int64_t k = 0; k * NB < N; k++) {
          int64_t n0 = k * NB, nb = gk_min64(NB, N - n0), bs, cst;
          FN(load_A)(a[GK_ARG_A], d, n0, nb, Ab);
          const REAL *Bt = FN(tile)(j, &j->Bv, var_b, s->Gb, cb, Bc, b, d, k, t0, tn, Bc, &bs);
          const REAL *Ct = FN(tile)(j, &j->Cv, var_c, s->Gc, cc, Cc, b, d, k, t0, tn, Cc, &cst);
          FN(vload)(CS, at3(CS, b, d, c) + n0 * CS->strides[3], CS->strides[3], nb, hs);
          for (int64_t n = nb; n < NB; n++) hs[n] = 0;
          REAL h[NB];
          for (int64_t n = 0; n < nb; n++) h[n] = hs[n];
          FN(chunk_fwd)(h, nb, Ab, Bt, bs, Ct, cst, dt, u, tn, a[GK_ARG_Z] ? yp : NULL, hs, as, NULL);
          int64_t ntile = (var_b || var_c) ? tn * NB : NB;
          for (int64_t i = 0; i < ntile; i++) dBt[i] = dCt[i] = 0;
          FN(chunk_bwd)(carry + n0, nb, Ab, Bt, bs, Ct, cst, dt, u, dyp, tn, hs, as, du, ddt, slot + n0, dBt,
                        var_b ? NB : 0, dCt, var_c ? NB : 0);
          const REAL *tiles[2] = {dBt, dCt};
          for (int i = 0; i < 2; i++)
            for (int64_t n = 0; parts[i] && n < nb; n++) {
              REAL *p = parts[i] + ((tr.p * s->B + b) * N + n0 + n) * L + t0;
              for (int64_t t = 0; t < tn; t++) p[t] += tiles[i][t * NB + n];
            }
          for (int64_t n = 0; n < nb; n++) {  // shared dB/dC: the chunk's sums into the slot
            if (!var_b) slot[j->off_dB + n0 + n] += dBt[n];
            if (!var_c) slot[j->off_dC + n0 + n] += dCt[n];
          }
        }
        // The chunk's du, ddelta, dz rows, and its dD, ddelta_bias terms.
        if (j->plan->desc.scan.delta_softplus)
          for (int64_t t = 0; t < tn; t++) ddt[t] *= DSOFTPLUS(raw[t]);
        for (int64_t t = 0; t < tn; t++) {
          du[t] += Dd * dyp[t];
          dD += dyp[t] * u[t];
          ddb += ddt[t];
        }
        if (a[GK_ARG_Z])
          for (int64_t t = 0; t < tn; t++) yp[t] = dyb[t] * (yp[t] + Dd * u[t]) * DSILU(zb[t]);
        slot[j->off_dD] += dD;
        slot[j->off_ddb] += ddb;
        const REAL *srcs[3] = {du, ddt, yp};
        const gk_arg_kind outs[3] = {GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DZ};
        for (int i = 0; i < 3; i++) {
          const gk_tensor *o = a[outs[i]];
          if (!o) continue;
          int64_t off = at3(o, b, d, t0);
          REAL *p = FN(vout)(o, off, o->strides[2], ob);
          for (int64_t t = 0; t < tn; t++) p[t] = srcs[i][t];
          FN(vcommit)(o, off, o->strides[2], tn, p, ob);
        }
      }
    }
    if (tr.r == 0 && DI)
      for (int64_t d = tr.d0; d < tr.d1; d++)
        FN(vstore)(DI, at2(DI, b, d), DI->strides[2], N, FN(run_of)(j, j->run, b * s->D + d, tr.r));
  }
}

// ---------------------------------------------------------------- reductions

// out[i] = sum (+ out's old value with accumulate), flat index i.
static void FN(store_sum)(const gk_tensor *out, int64_t i, REAL sum, bool accumulate) {
  gk_set(out, i, sum + (accumulate ? (REAL)gk_get(out, i) : 0));
}

// Task = ROWS_PER_TASK channels: dA, shared dB/dC, dD, ddelta_bias = the
// slot partials added in slot order.
static void FN(reduce_params)(const scan_job *j, int64_t task) {
  const gk_scan_dims *s = &j->s;
  int64_t K = j->K, slots = j->Pb * j->S, end = gk_min64(s->D, (task + 1) * ROWS_PER_TASK);
  bool acc = j->plan->desc.accumulate;
  REAL sum[NB];
  for (int64_t d = task * ROWS_PER_TASK; d < end; d++)
    for (int64_t k0 = 0; k0 < K; k0 += NB) {
      int64_t m = gk_min64(NB, K - k0);
      for (int64_t i = 0; i < m; i++) sum[i] = 0;
      for (int64_t sl = 0; sl < slots; sl++) {
        const REAL *p = (const REAL *)j->params + (sl * s->D + d) * K + k0;
        for (int64_t i = 0; i < m; i++) sum[i] += p[i];
      }
      for (int64_t i = 0; i < m; i++) {
        int64_t k = k0 + i;
        if (k < s->N) FN(store_sum)(j->a[GK_ARG_DA], d * s->N + k, sum[i], acc);
        else if (k < j->off_dC) FN(store_sum)(&j->dBv, d * s->N + k - j->off_dB, sum[i], acc);
        else if (k < j->off_dD) FN(store_sum)(&j->dCv, d * s->N + k - j->off_dC, sum[i], acc);
        else if (k == j->off_dD && j->a[GK_ARG_DD]) FN(store_sum)(j->a[GK_ARG_DD], d, sum[i], acc);
        else if (k == j->off_ddb && j->a[GK_ARG_DDELTA_BIAS])
          FN(store_sum)(j->a[GK_ARG_DDELTA_BIAS], d, sum[i], acc);
      }
    }
}

// Task = ROWS_PER_TASK rows (b, g, n) of the per-batch dB (then dC): the
// channel-part partials of group g added in part order (overwritten).
static void FN(reduce_var)(const scan_job *j, int64_t task) {
  const gk_scan_dims *s = &j->s;
  int64_t rows = s->B * j->Gt * s->N, end = gk_min64((s->var_b + s->var_c) * rows, (task + 1) * ROWS_PER_TASK);
  REAL sum[TILE];
  for (int64_t ri = task * ROWS_PER_TASK; ri < end; ri++) {
    bool is_c = !s->var_b || ri >= rows;
    int64_t row = ri % rows, b = row / (j->Gt * s->N), g = row / s->N % j->Gt, n = row % s->N;
    const REAL *parts = is_c ? j->varC : j->varB;
    const gk_tensor *out = is_c ? &j->dCv : &j->dBv;
    int64_t off = at3(out, b, g, n);
    for (int64_t t0 = 0; t0 < s->L; t0 += TILE) {
      int64_t m = gk_min64(TILE, s->L - t0);
      for (int64_t t = 0; t < m; t++) sum[t] = 0;
      for (int64_t q = 0; q < j->Pd; q++) {
        const REAL *p = parts + (((g * j->Pd + q) * s->B + b) * s->N + n) * s->L + t0;
        for (int64_t t = 0; t < m; t++) sum[t] += p[t];
      }
      FN(vstore)(out, off + t0 * out->strides[3], out->strides[3], m, sum);
    }
  }
}
