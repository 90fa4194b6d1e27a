// The selective scan CPU kernels for one type REAL with suffix SFX and exp EXP;
// included by scan.c (see there for the work grid and the levels).

// dt over steps [t0, t0 + tn) of row bd, and raw = delta + delta_bias before
// the softplus.
static void FN(load_dt)(const scan_job *j, int64_t bd, int64_t t0, int64_t tn, REAL *raw, REAL *dt) {
  gk_tensor row = gk_tensor_row(j->a[GK_ARG_DELTA], 1, bd);
  GK_CAT(gk_load, SFX)(&row, t0, tn, raw);
  if (j->a[GK_ARG_DELTA_BIAS]) {
    REAL bias = (REAL)gk_get(j->a[GK_ARG_DELTA_BIAS], bd % j->s.D);
    for (int64_t t = 0; t < tn; t++) raw[t] += bias;
  }
  bool sp = j->plan->desc.scan.delta_softplus;
  for (int64_t t = 0; t < tn; t++) dt[t] = sp ? GK_CAT(gk_softplus, SFX)(raw[t], 1, 20) : raw[t];
}

// Steps [t0, t0 + tn) of row bd of a (B, D, L) tensor.
static const REAL *FN(load_row)(const gk_tensor *x, int64_t bd, int64_t t0, int64_t tn, REAL *buf) {
  gk_tensor row = gk_tensor_row(x, 1, bd);
  return GK_CAT(gk_chunk_in, SFX)(&row, t0, tn, buf);
}

// dy' = dy silu(z) (dy without z) over the chunk; dy to dyb, z to zb.
static void FN(load_dyp)(const scan_job *j, int64_t bd, int64_t t0, int64_t tn, REAL *dyb, REAL *zb, REAL *dyp) {
  gk_tensor row = gk_tensor_row(j->a[GK_ARG_DY], 1, bd);
  GK_CAT(gk_load, SFX)(&row, t0, tn, dyb);
  if (j->a[GK_ARG_Z]) {
    row = gk_tensor_row(j->a[GK_ARG_Z], 1, bd);
    GK_CAT(gk_load, SFX)(&row, t0, tn, zb);
  }
  for (int64_t t = 0; t < tn; t++) dyp[t] = j->a[GK_ARG_Z] ? dyb[t] * GK_CAT(gk_silu, SFX)(zb[t]) : dyb[t];
}

// B or C of (b, d) for states [n0, n0 + nb) and steps [t0, t0 + tn) as
// tile[t NB + n]. Returns the step stride: NB, or 0 when shared (one row).
static int64_t FN(load_bc)(const scan_job *j, const gk_tensor *v, bool var, int64_t G, int64_t b, int64_t d,
                           int64_t n0, int64_t nb, int64_t t0, int64_t tn, REAL *tile) {
  if (!var) {
    gk_tensor row = gk_tensor_row(v, 1, d);
    GK_CAT(gk_load, SFX)(&row, n0, nb, tile);
    return 0;
  }
  int64_t g = d / (j->s.D / G);
  REAL buf[TMAX];
  for (int64_t n = 0; n < nb; n++) {
    gk_tensor row = gk_tensor_row(v, 1, (b * G + g) * j->s.N + n0 + n);
    const REAL *p = GK_CAT(gk_chunk_in, SFX)(&row, t0, tn, buf);
    for (int64_t t = 0; t < tn; t++) tile[t * NB + n] = p[t];
  }
  return NB;
}

// One n-block of states h (nb <= NB) over tn steps:
//   a_t = exp(dt_t A);  h = a_t h + (dt_t u_t) B_t
// then, when given: y[t] += C_t . h;  hs[(t+1) NB + n] = h_t (hs[n] must
// hold the start state);  as[t NB + n] = a_t;  prod[n] *= a_t.
static void FN(chunk_fwd)(REAL *h, const REAL *A, int64_t nb, const REAL *Bt, int64_t bs, const REAL *Ct, int64_t cs,
                          const REAL *dt, const REAL *u, int64_t tn, REAL *y, REAL *hs, REAL *as, REAL *prod) {
  REAL hl[NB], at[NB], pl[NB];
  for (int64_t n = 0; n < nb; n++) {
    hl[n] = h[n];
    pl[n] = prod ? prod[n] : 1;
  }
  for (int64_t t = 0; t < tn; t++) {
    REAL dtt = dt[t], dtu = dtt * u[t];
    const REAL *b = Bt + t * bs;
    for (int64_t n = 0; n < nb; n++) at[n] = EXP(dtt * A[n]);
    for (int64_t n = 0; n < nb; n++) hl[n] = at[n] * hl[n] + dtu * b[n];
    if (y) {
      const REAL *c = Ct + t * cs;
      REAL acc = 0;
      for (int64_t n = 0; n < nb; n++) acc += c[n] * hl[n];
      y[t] += acc;
    }
    if (hs)
      for (int64_t n = 0; n < nb; n++) {
        hs[(t + 1) * NB + n] = hl[n];
        as[t * NB + n] = at[n];
      }
    if (prod)
      for (int64_t n = 0; n < nb; n++) pl[n] *= at[n];
  }
  for (int64_t n = 0; n < nb; n++) {
    h[n] = hl[n];
    if (prod) prod[n] = pl[n];
  }
}

// One n-block backwards over tn steps, from the state gradient `carry`
// flowing in from step tn (left as the one flowing out of step 0):
//   g = carry + C_t dy'_t;  carry = a_t g
//   dB_t += g dt_t u_t;  dC_t += dy'_t h_t;  dA += g dt_t a_t h_{t-1}
//   du[t] += dt_t sum_n g B_t;  ddt[t] += sum_n g (A a_t h_{t-1} + B_t u_t)
// dB, dC advance by dbs, dcs per step (0: shared sums). hs, as as chunk_fwd.
static void FN(chunk_bwd)(REAL *carry, const REAL *A, int64_t nb, const REAL *Bt, int64_t bs, const REAL *Ct, int64_t cs,
                          const REAL *dt, const REAL *u, const REAL *dyp, int64_t tn, const REAL *hs, const REAL *as, REAL *du,
                          REAL *ddt, REAL *dA, REAL *dB, int64_t dbs, REAL *dC, int64_t dcs) {
  REAL cl[NB], dAl[NB], s1[NB], s2[NB];
  for (int64_t n = 0; n < nb; n++) {
    cl[n] = carry[n];
    dAl[n] = 0;
  }
  for (int64_t t = tn - 1; t >= 0; t--) {
    const REAL *b = Bt + t * bs, *c = Ct + t * cs, *hp = hs + t * NB, *hc = hp + NB, *at = as + t * NB;
    REAL dtt = dt[t], ut = u[t], dtu = dtt * ut, dy = dyp[t];
    REAL *db = dB + t * dbs, *dc = dC + t * dcs;
    for (int64_t n = 0; n < nb; n++) {
      REAL g = cl[n] + c[n] * dy, ah = at[n] * hp[n];
      db[n] += g * dtu;
      dc[n] += dy * hc[n];
      dAl[n] += g * ah * dtt;
      s1[n] = g * b[n];
      s2[n] = g * (A[n] * ah + b[n] * ut);
      cl[n] = at[n] * g;
    }
    REAL sum1 = 0, sum2 = 0;
    for (int64_t n = 0; n < nb; n++) {
      sum1 += s1[n];
      sum2 += s2[n];
    }
    du[t] += dtt * sum1;
    ddt[t] += sum2;
  }
  for (int64_t n = 0; n < nb; n++) {
    carry[n] = cl[n];
    dA[n] += dAl[n];
  }
}

static REAL *FN(run_of)(const scan_job *j, void *base, int64_t bd, int64_t r) {
  return (REAL *)base + (bd * j->S + r) * j->s.N;
}

// Row bd of a (B, D, N) state tensor into h (zeros without one).
static void FN(load_state)(const gk_tensor *t, int64_t bd, int64_t N, REAL *h) {
  if (!t) {
    for (int64_t n = 0; n < N; n++) h[n] = 0;
    return;
  }
  gk_tensor row = gk_tensor_row(t, 1, bd);
  GK_CAT(gk_load, SFX)(&row, 0, N, h);
}

// ---------------------------------------------------------------- forward

// Level 1: each range but the last from a zero state: end state to run,
// product of the decays to prod.
static void FN(fwd_level1)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  if (tr.r == j->S - 1) return;
  const gk_tensor *const *a = j->a;
  int64_t N = j->s.N;
  REAL raw[TMAX], dt[TMAX], ub[TMAX], Ab[NB], Bt[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      int64_t bd = b * j->s.D + d;
      REAL *e = FN(run_of)(j, j->run, bd, tr.r), *pr = FN(run_of)(j, j->prod, bd, tr.r);
      for (int64_t n = 0; n < N; n++) {
        e[n] = 0;
        pr[n] = 1;
      }
      gk_tensor Arow = gk_tensor_row(a[GK_ARG_A], 1, d);
      for (int64_t c = tr.c0; c < tr.c1; c++) {
        int64_t t0 = c * j->s.T, tn = gk_min64(j->s.T, j->s.L - t0);
        FN(load_dt)(j, bd, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], bd, t0, tn, ub);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          GK_CAT(gk_load, SFX)(&Arow, n0, nb, Ab);
          int64_t bs = FN(load_bc)(j, &j->Bv, j->s.var_b, j->s.Gb, b, d, n0, nb, t0, tn, Bt);
          FN(chunk_fwd)(e + n0, Ab, nb, Bt, bs, NULL, 0, dt, u, tn, NULL, NULL, NULL, pr + n0);
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
      if (j->a[GK_ARG_INITIAL_STATE]) {
        gk_tensor row = gk_tensor_row(j->a[GK_ARG_INITIAL_STATE], 1, bd);
        GK_CAT(gk_load, SFX)(&row, n0, nb, h + n0);
      } else {
        for (int64_t n = 0; n < nb; n++) h[n0 + n] = 0;
      }
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

// Level 3 (the only level when S = 1): each range from its start state.
static void FN(fwd_task)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
  int64_t N = j->s.N;
  REAL raw[TMAX], dt[TMAX], ub[TMAX], zb[TMAX], y[TMAX], yb[TMAX], Ab[NB], Bt[TMAX * NB], Ct[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      int64_t bd = b * j->s.D + d;
      REAL *h = FN(run_of)(j, j->run, bd, tr.r);
      if (j->S == 1) FN(load_state)(a[GK_ARG_INITIAL_STATE], bd, N, h);
      REAL Dd = a[GK_ARG_D] ? (REAL)gk_get(a[GK_ARG_D], d) : 0;
      gk_tensor Arow = gk_tensor_row(a[GK_ARG_A], 1, d), yrow = gk_tensor_row(a[GK_ARG_Y], 1, bd);
      for (int64_t c = tr.c0; c < tr.c1; c++) {
        int64_t t0 = c * j->s.T, tn = gk_min64(j->s.T, j->s.L - t0);
        FN(load_dt)(j, bd, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], bd, t0, tn, ub);
        for (int64_t t = 0; t < tn; t++) y[t] = 0;
        gk_tensor cs = gk_tensor_row(a[GK_ARG_CHUNK_STATES], 1, bd * j->s.nchunks + c);
        GK_CAT(gk_store, SFX)(&cs, 0, N, h);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          GK_CAT(gk_load, SFX)(&Arow, n0, nb, Ab);
          int64_t bs = FN(load_bc)(j, &j->Bv, j->s.var_b, j->s.Gb, b, d, n0, nb, t0, tn, Bt);
          int64_t cst = FN(load_bc)(j, &j->Cv, j->s.var_c, j->s.Gc, b, d, n0, nb, t0, tn, Ct);
          FN(chunk_fwd)(h + n0, Ab, nb, Bt, bs, Ct, cst, dt, u, tn, y, NULL, NULL, NULL);
        }
        const REAL *z = a[GK_ARG_Z] ? FN(load_row)(a[GK_ARG_Z], bd, t0, tn, zb) : NULL;
        REAL *yp = GK_CAT(gk_chunk_out, SFX)(&yrow, t0, yb);
        for (int64_t t = 0; t < tn; t++) {
          REAL v = y[t] + Dd * u[t];
          yp[t] = z ? v * GK_CAT(gk_silu, SFX)(z[t]) : v;
        }
        GK_CAT(gk_chunk_commit, SFX)(&yrow, t0, tn, yp, yb);
      }
      if (tr.r == j->S - 1 && a[GK_ARG_FINAL_STATE]) {
        gk_tensor row = gk_tensor_row(a[GK_ARG_FINAL_STATE], 1, bd);
        GK_CAT(gk_store, SFX)(&row, 0, N, h);
      }
    }
}

// ---------------------------------------------------------------- backward

// Level 1: each range but the first backwards from a zero state gradient:
// the gradient flowing out of its first step to run, the decay product to prod.
static void FN(bwd_level1)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  if (tr.r == 0) return;
  const gk_tensor *const *a = j->a;
  int64_t N = j->s.N;
  REAL raw[TMAX], dt[TMAX], dyb[TMAX], zb[TMAX], dyp[TMAX], Ab[NB], Ct[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      int64_t bd = b * j->s.D + d;
      REAL *R = FN(run_of)(j, j->run, bd, tr.r), *P = FN(run_of)(j, j->prod, bd, tr.r);
      for (int64_t n = 0; n < N; n++) {
        R[n] = 0;
        P[n] = 1;
      }
      gk_tensor Arow = gk_tensor_row(a[GK_ARG_A], 1, d);
      for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
        int64_t t0 = c * j->s.T, tn = gk_min64(j->s.T, j->s.L - t0);
        FN(load_dt)(j, bd, t0, tn, raw, dt);
        FN(load_dyp)(j, bd, t0, tn, dyb, zb, dyp);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          GK_CAT(gk_load, SFX)(&Arow, n0, nb, Ab);
          int64_t cs = FN(load_bc)(j, &j->Cv, j->s.var_c, j->s.Gc, b, d, n0, nb, t0, tn, Ct);
          REAL *Rn = R + n0, *Pn = P + n0;
          for (int64_t t = tn - 1; t >= 0; t--) {
            const REAL *cr = Ct + t * cs;
            for (int64_t n = 0; n < nb; n++) {
              REAL at = EXP(dt[t] * Ab[n]);
              Rn[n] = at * (Rn[n] + cr[n] * dyp[t]);
              Pn[n] *= at;
            }
          }
        }
      }
    }
}

// Level 2, task = ROWS_PER_TASK (b, d): carry_{S-1} = dfinal_state or 0,
// carry_{r-1} = P_r carry_r + R_r, the carries replacing R in run.
static void FN(bwd_level2)(const scan_job *j, int64_t task) {
  int64_t N = j->s.N, S_ = j->S, end = gk_min64(j->s.B * j->s.D, (task + 1) * ROWS_PER_TASK);
  REAL fin[NB];
  for (int64_t bd = task * ROWS_PER_TASK; bd < end; bd++)
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
      int64_t nb = gk_min64(NB, N - n0);
      if (j->a[GK_ARG_DFINAL_STATE]) {
        gk_tensor row = gk_tensor_row(j->a[GK_ARG_DFINAL_STATE], 1, bd);
        GK_CAT(gk_load, SFX)(&row, n0, nb, fin);
      } else {
        for (int64_t n = 0; n < nb; n++) fin[n] = 0;
      }
      for (int64_t n = 0; n < nb; n++) {
        REAL carry = fin[n];
        for (int64_t r = S_ - 1; r >= 0; r--) {
          REAL *slot = FN(run_of)(j, j->run, bd, r) + n0 + n;
          REAL R = r > 0 ? *slot : 0;
          *slot = carry;
          if (r > 0) carry = FN(run_of)(j, j->prod, bd, r)[n0 + n] * carry + R;
        }
      }
    }
}

// Level 3 (the only level when S = 1): each range backwards from its carry,
// recomputing each chunk's states from its saved chunk state.
static void FN(bwd_task)(const scan_job *j, int64_t task) {
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
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
  REAL Ab[NB], Bt[TMAX * NB], Ct[TMAX * NB], hs[(TMAX + 1) * NB], as[TMAX * NB], dBt[TMAX * NB], dCt[TMAX * NB];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t d = tr.d0; d < tr.d1; d++) {
      int64_t bd = b * s->D + d;
      REAL *carry = FN(run_of)(j, j->run, bd, tr.r), *slot = (REAL *)j->params + (tr.slot * s->D + d) * K;
      if (j->S == 1) FN(load_state)(a[GK_ARG_DFINAL_STATE], bd, N, carry);
      REAL Dd = a[GK_ARG_D] ? (REAL)gk_get(a[GK_ARG_D], d) : 0, dD = 0, ddb = 0;
      gk_tensor Arow = gk_tensor_row(a[GK_ARG_A], 1, d);
      for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
        int64_t t0 = c * s->T, tn = gk_min64(s->T, L - t0);
        FN(load_dt)(j, bd, t0, tn, raw, dt);
        const REAL *u = FN(load_row)(a[GK_ARG_U], bd, t0, tn, ub);
        FN(load_dyp)(j, bd, t0, tn, dyb, zb, dyp);
        for (int64_t t = 0; t < tn; t++) du[t] = ddt[t] = yp[t] = 0;
        gk_tensor cs = gk_tensor_row(a[GK_ARG_CHUNK_STATES], 1, bd * s->nchunks + c);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
          int64_t nb = gk_min64(NB, N - n0);
          GK_CAT(gk_load, SFX)(&Arow, n0, nb, Ab);
          int64_t bs = FN(load_bc)(j, &j->Bv, var_b, s->Gb, b, d, n0, nb, t0, tn, Bt);
          int64_t cst = FN(load_bc)(j, &j->Cv, var_c, s->Gc, b, d, n0, nb, t0, tn, Ct);
          GK_CAT(gk_load, SFX)(&cs, n0, nb, hs);
          REAL h[NB];
          for (int64_t n = 0; n < nb; n++) h[n] = hs[n];
          FN(chunk_fwd)(h, Ab, nb, Bt, bs, Ct, cst, dt, u, tn, a[GK_ARG_Z] ? yp : NULL, hs, as, NULL);
          for (int64_t i = 0; i < tn * NB; i++) dBt[i] = dCt[i] = 0;
          REAL *dB = var_b ? dBt : slot + j->off_dB + n0, *dC = var_c ? dCt : slot + j->off_dC + n0;
          FN(chunk_bwd)(carry + n0, Ab, nb, Bt, bs, Ct, cst, dt, u, dyp, tn, hs, as, du, ddt, slot + n0, dB,
                        var_b ? NB : 0, dC, var_c ? NB : 0);
          const REAL *tiles[2] = {dBt, dCt};
          for (int i = 0; i < 2; i++)
            for (int64_t n = 0; parts[i] && n < nb; n++) {
              REAL *p = parts[i] + ((tr.p * s->B + b) * N + n0 + n) * L + t0;
              for (int64_t t = 0; t < tn; t++) p[t] += tiles[i][t * NB + n];
            }
        }
        // The chunk's du, ddelta, dz rows, and its dD, ddelta_bias terms.
        const REAL *dsts[3] = {du, ddt, yp};
        for (int64_t t = 0; t < tn; t++) {
          du[t] += Dd * dyp[t];
          dD += dyp[t] * u[t];
          if (j->plan->desc.scan.delta_softplus) ddt[t] *= GK_CAT(gk_dsoftplus, SFX)(raw[t], 1, 20);
          ddb += ddt[t];
          if (a[GK_ARG_Z]) yp[t] = dyb[t] * (yp[t] + Dd * u[t]) * GK_CAT(gk_dsilu, SFX)(zb[t]);
        }
        const gk_arg_kind outs[3] = {GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DZ};
        for (int i = 0; i < 3; i++) {
          if (!a[outs[i]]) continue;
          gk_tensor row = gk_tensor_row(a[outs[i]], 1, bd);
          REAL *o = GK_CAT(gk_chunk_out, SFX)(&row, t0, ob);
          for (int64_t t = 0; t < tn; t++) o[t] = dsts[i][t];
          GK_CAT(gk_chunk_commit, SFX)(&row, t0, tn, o, ob);
        }
      }
      slot[j->off_dD] += dD;
      slot[j->off_ddb] += ddb;
      if (tr.r == 0 && a[GK_ARG_DINITIAL_STATE]) {
        gk_tensor row = gk_tensor_row(a[GK_ARG_DINITIAL_STATE], 1, bd);
        GK_CAT(gk_store, SFX)(&row, 0, N, carry);
      }
    }
}

// out[i] = sum (+ out's old value with accumulate), flat indices [i0, i0 + n).
static void FN(store_sum)(const gk_tensor *out, int64_t i0, const REAL *sum, int64_t n, bool accumulate) {
  for (int64_t i = 0; i < n; i++) gk_set(out, i0 + i, sum[i] + (accumulate ? (REAL)gk_get(out, i0 + i) : 0));
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
        if (k < s->N) FN(store_sum)(j->a[GK_ARG_DA], d * s->N + k, sum + i, 1, acc);
        else if (k < j->off_dC) FN(store_sum)(&j->dBv, d * s->N + k - j->off_dB, sum + i, 1, acc);
        else if (k < j->off_dD) FN(store_sum)(&j->dCv, d * s->N + k - j->off_dC, sum + i, 1, acc);
        else if (k == j->off_dD && j->a[GK_ARG_DD]) FN(store_sum)(j->a[GK_ARG_DD], d, sum + i, 1, acc);
        else if (k == j->off_ddb && j->a[GK_ARG_DDELTA_BIAS])
          FN(store_sum)(j->a[GK_ARG_DDELTA_BIAS], d, sum + i, 1, acc);
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
    gk_tensor out = gk_tensor_row(is_c ? &j->dCv : &j->dBv, 1, row);
    for (int64_t t0 = 0; t0 < s->L; t0 += TILE) {
      int64_t m = gk_min64(TILE, s->L - t0);
      for (int64_t t = 0; t < m; t++) sum[t] = 0;
      for (int64_t q = 0; q < j->Pd; q++) {
        const REAL *p = parts + (((g * j->Pd + q) * s->B + b) * s->N + n) * s->L + t0;
        for (int64_t t = 0; t < m; t++) sum[t] += p[t];
      }
      GK_CAT(gk_store, SFX)(&out, t0, m, sum);
    }
  }
}
