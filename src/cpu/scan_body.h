// The selective scan CPU kernels for one type REAL (dtype REAL_DT) with
// suffix SFX: decays EXP2(dt A EXP_SCALE) (EXP2_WIDE where |dt A EXP_SCALE|
// may pass EXP_SAFE), softplus SOFTPLUS and its
// derivative DSOFTPLUS, SILU and DSILU; included by scan.c (see there for
// the lanes, the work grid and the levels).

// ---------------------------------------------------------------- access

// n elements of t from element offset `off`, `stride` apart, as REAL.
static void FN(vload)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, REAL *out) {
  const char *p = (const char *)t->data + off * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: for (int64_t i = 0; i < n; i++) out[i] = (REAL)((const float *)p)[i * stride]; break;
  case GK_F64: for (int64_t i = 0; i < n; i++) out[i] = (REAL)((const double *)p)[i * stride]; break;
  case GK_F16:
    if (stride == 1) for (int64_t i = 0; i < n; i++) out[i] = gk_f16_to_f32_inline(((const uint16_t *)p)[i]);
    else for (int64_t i = 0; i < n; i++) out[i] = gk_f16_to_f32_inline(((const uint16_t *)p)[i * stride]);
    break;
  case GK_BF16:
    if (stride == 1) for (int64_t i = 0; i < n; i++) out[i] = gk_bf16_to_f32_inline(((const uint16_t *)p)[i]);
    else for (int64_t i = 0; i < n; i++) out[i] = gk_bf16_to_f32_inline(((const uint16_t *)p)[i * stride]);
    break;
  default: break;  // the plan admits floating tensors only
  }
}

// The same, rounded to nearest even into t's dtype.
static void FN(vstore)(const gk_tensor *t, int64_t off, int64_t stride, int64_t n, const REAL *in) {
  char *p = (char *)t->data + off * (int64_t)gk_dtype_size(t->dtype);
  switch (t->dtype) {
  case GK_F32: for (int64_t i = 0; i < n; i++) ((float *)p)[i * stride] = (float)in[i]; break;
  case GK_F64: for (int64_t i = 0; i < n; i++) ((double *)p)[i * stride] = (double)in[i]; break;
  case GK_F16:
    if (stride == 1) for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = gk_f32_to_f16_inline((float)in[i]);
    else for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i * stride] = gk_f32_to_f16_inline((float)in[i]);
    break;
  case GK_BF16:
    if (stride == 1) for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = gk_f32_to_bf16_inline((float)in[i]);
    else for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i * stride] = gk_f32_to_bf16_inline((float)in[i]);
    break;
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

// ---------------------------------------------------------------- lanes

// A row of W lanes: tiles are LANES[step], per-state values one LANES. Every
// loop over the lanes is a plain loop of W iterations, vectorised by the
// compiler in each instruction-set copy (one AVX-512 register of f32, two
// AVX2 ones).
typedef REAL FN(lanes)[W];
#define LANES FN(lanes)
#define FOR_LANES(l) for (int l = 0; l < W; l++)

// Lanes l < nd from t at element offsets off + l stride, zero above.
static void FN(lanes_in)(const gk_tensor *t, int64_t off, int64_t stride, int64_t nd, REAL *out) {
  FOR_LANES(l) out[l] = 0;
  FN(vload)(t, off, stride, nd, out);
}

// The lanes of a (D, N) tensor (A, shared B or C) at state n.
static void FN(dn_lanes)(const gk_tensor *t, int64_t d0, int64_t nd, int64_t n, REAL *out) {
  FN(lanes_in)(t, at2(t, d0, n), t->strides[0], nd, out);
}

// The lanes of a 1-D (D) tensor (D, delta_bias) from channel d0.
static void FN(d_lanes)(const gk_tensor *t, int64_t d0, int64_t nd, REAL *out) {
  FN(lanes_in)(t, d0 * t->strides[0], t->strides[0], nd, out);
}

// out[l stride] += v[l] for lanes l < nd.
static void FN(lanes_add)(REAL *out, int64_t stride, int64_t nd, const REAL *v) {
  for (int64_t l = 0; l < nd; l++) out[l * stride] += v[l];
}

// The transposes below go through W x W blocks: rows copied into blk,
// then out[t][l] = blk[l][t] as plain loops (vectorised into shuffles).

// tile[t][l] = x[b, d0 + l, t0 + t] for t < tn, l < nd, zero for l >= nd
// (rows up to tn rounded up to W written). Channels one apart (the (B, L, D)
// layouts of a model's projections): a step's lanes are copied as they lie
// (converted from a 16-bit dtype). Otherwise each channel's row is taken
// (gathered when its steps lie apart, converted) and the rows transposed.
GK_INLINE void FN(load_tile)(const gk_tensor *x, int64_t b, int64_t d0, int64_t nd, int64_t t0, int64_t tn,
                             LANES *tile) {
  if (x->dtype == REAL_DT && x->strides[1] == 1) {
    const REAL *p = (const REAL *)x->data + at3(x, b, d0, t0);
    int64_t step = x->strides[2], rows_end = gk_ceil_div(tn, W) * W;
    for (int64_t t = 0; t < tn; t++)
      FOR_LANES(l) tile[t][l] = l < nd ? p[t * step + l] : 0;
    for (int64_t t = tn; t < rows_end; t++) FOR_LANES(l) tile[t][l] = 0;
    return;
  }
  if (x->strides[1] == 1) {  // channels one apart in another dtype: a step's lanes converted as they lie
    int64_t rows_end = gk_ceil_div(tn, W) * W;
    for (int64_t t = 0; t < rows_end; t++) FOR_LANES(l) tile[t][l] = 0;
    for (int64_t t = 0; t < tn; t++) FN(vload)(x, at3(x, b, d0, t0 + t), 1, nd, tile[t]);
    return;
  }
  static const REAL zeros[TMAX];
  REAL bufs[W][TMAX], blk[W][W];
  const REAL *rows[W];
  for (int64_t l = 0; l < W; l++)
    rows[l] = l < nd ? FN(vin)(x, at3(x, b, d0 + l, t0), x->strides[2], tn, bufs[l]) : zeros;
  for (int64_t t1 = 0; t1 < tn; t1 += W) {
    if (t1 + W <= tn)
      FOR_LANES(l) for (int i = 0; i < W; i++) blk[l][i] = rows[l][t1 + i];
    else
      FOR_LANES(l) for (int i = 0; i < W; i++) blk[l][i] = t1 + i < tn ? rows[l][t1 + i] : 0;
    for (int i = 0; i < W; i++) FOR_LANES(l) tile[t1 + i][l] = blk[l][i];
  }
}

// x[b, d0 + l, t0 + t] = tile[t][l] for t < tn, l < nd (channels one apart:
// a step's lanes copied or converted as they lie, as in load_tile).
GK_INLINE void FN(store_tile)(const gk_tensor *x, int64_t b, int64_t d0, int64_t nd, int64_t t0, int64_t tn,
                              const LANES *tile) {
  if (x->dtype == REAL_DT && x->strides[1] == 1) {
    REAL *p = (REAL *)x->data + at3(x, b, d0, t0);
    int64_t step = x->strides[2];
    for (int64_t t = 0; t < tn; t++)
      for (int64_t l = 0; l < nd; l++) p[t * step + l] = tile[t][l];
    return;
  }
  if (x->strides[1] == 1) {
    for (int64_t t = 0; t < tn; t++) FN(vstore)(x, at3(x, b, d0, t0 + t), 1, nd, tile[t]);
    return;
  }
  REAL bufs[W][TMAX], blk[W][W];
  REAL *rows[W];
  for (int64_t l = 0; l < nd; l++) rows[l] = FN(vout)(x, at3(x, b, d0 + l, t0), x->strides[2], bufs[l]);
  for (int64_t t1 = 0; t1 < tn; t1 += W) {
    for (int i = 0; i < W; i++) FOR_LANES(l) blk[l][i] = tile[t1 + i][l];
    if (t1 + W <= tn)  // (a fixed count: a vector copy, not a call)
      for (int64_t l = 0; l < nd; l++)
        for (int i = 0; i < W; i++) rows[l][t1 + i] = blk[l][i];
    else
      for (int64_t l = 0; l < nd; l++)
        for (int64_t i = 0; t1 + i < tn; i++) rows[l][t1 + i] = blk[l][i];
  }
  for (int64_t l = 0; l < nd; l++)
    FN(vcommit)(x, at3(x, b, d0 + l, t0), x->strides[2], tn, rows[l], bufs[l]);
}

// out[t] += the sum of v[t]'s lanes, t < tn: W steps at a time, transposed
// as in store_tile, then the lanes summed pairwise (lane l + W/2 into l, then
// l + W/4 into l, ...: a tree of depth log2 W rather than a chain of W - 1).
GK_INLINE void FN(add_lane_sums)(const LANES *restrict v, int64_t tn, REAL *restrict out) {
  REAL blk[W][W];
  for (int64_t t1 = 0; t1 < tn; t1 += W) {
    for (int i = 0; i < W; i++) FOR_LANES(l) blk[l][i] = v[t1 + i][l];
    for (int h = W / 2; h >= 1; h /= 2)
      for (int l = 0; l < h; l++)
        for (int i = 0; i < W; i++) blk[l][i] += blk[l + h][i];
    int64_t rows = gk_min64(W, tn - t1);
    for (int64_t i = 0; i < rows; i++) out[t1 + i] += blk[0][i];
  }
}

// Prefetches the lines load_tile / store_tile (write) will touch (x may be
// NULL): a lane's steps one apart line by line; steps apart one per step
// (one lane for all when the channels lie one apart: a step's lanes share
// its one or two lines).
static void FN(prefetch_tile)(const gk_tensor *x, int64_t b, int64_t d0, int64_t nd, int64_t t0, int64_t tn,
                              bool write) {
  if (!x) return;
#define PREFETCH(q)                   \
  do {                                \
    if (write) __builtin_prefetch(q, 1, 3); \
    else __builtin_prefetch(q, 0, 3);  \
  } while (0)
  int64_t es = (int64_t)gk_dtype_size(x->dtype), step = x->strides[2] * es, lane = x->strides[1] * es;
  const char *base = (const char *)x->data + at3(x, b, d0, t0) * es;
  bool adjacent = lane == es;
  for (int64_t l = 0; l < (adjacent ? 1 : nd); l++) {
    const char *p = base + l * lane;
    if (step == es)
      for (int64_t o = 0; o < tn * es; o += 64) PREFETCH(p + o);
    else
      for (int64_t t = 0; t < tn; t++) {
        PREFETCH(p + t * step);
        if (adjacent) PREFETCH(p + t * step + (nd - 1) * es);
      }
  }
#undef PREFETCH
}

// The state buffer (run or prod) of block k of part p, batch b, range r: [N][W].
static LANES *FN(states)(const scan_job *j, void *base, int64_t b, int64_t r, int64_t p, int64_t k) {
  return (LANES *)base + (((b * j->S + r) * j->Pc + p) * j->MB + k) * j->s.N;
}

// ---------------------------------------------------------------- math

// One block's dt over steps [t0, t0 + tn): raw = delta + delta_bias, dt =
// softplus(raw) (raw without delta_softplus); dtu = dt u. Returns the
// largest |dt| (NaNs left out).
GK_INLINE REAL FN(load_dt)(const scan_job *j, int64_t b, int64_t d0, int64_t nd, int64_t t0, int64_t tn,
                           const LANES *u, LANES *raw, LANES *dt, LANES *dtu) {
  FN(load_tile)(j->a[GK_ARG_DELTA], b, d0, nd, t0, tn, raw);
  if (j->a[GK_ARG_DELTA_BIAS]) {
    REAL bias[W];
    FN(d_lanes)(j->a[GK_ARG_DELTA_BIAS], d0, nd, bias);
    for (int64_t t = 0; t < tn; t++) FOR_LANES(l) raw[t][l] += bias[l];
  }
  if (j->plan->desc.scan.delta_softplus)  // (loops of their own, so they vectorise)
    for (int64_t t = 0; t < tn; t++) FOR_LANES(l) dt[t][l] = SOFTPLUS(raw[t][l]);
  else
    memcpy(dt, raw, (size_t)tn * sizeof *dt);
  REAL m[W] = {0}, mx = 0;
  for (int64_t t = 0; t < tn; t++)
    FOR_LANES(l) {
      dtu[t][l] = dt[t][l] * u[t][l];
      REAL v = fabs(dt[t][l]);
      m[l] = v > m[l] ? v : m[l];
    }
  FOR_LANES(l) mx = m[l] > mx ? m[l] : mx;
  return mx;
}

// Whether a block's decays at state n need EXP2_WIDE: whether |dt A2| may
// pass EXP_SAFE, for dtmax = the largest |dt| (not for NaNs: EXP2 keeps them).
GK_INLINE bool FN(wide)(REAL dtmax, const REAL *A2) {
  REAL mx = 0;
  FOR_LANES(l) mx = fabs(A2[l]) > mx ? fabs(A2[l]) : mx;
  return !(dtmax * mx <= EXP_SAFE);
}

// B or C of state n for a block and steps [t0, t0 + tn): per-batch, the
// group's row (*row: one value per step, the same on every lane); shared,
// the lanes' own values (lanes; *row then points at zeros). buf holds a
// converted row.
GK_INLINE void FN(bc_of)(const scan_job *j, const gk_tensor *v, bool var, int64_t G, int64_t b, int64_t d0,
                         int64_t nd, int64_t n, int64_t t0, int64_t tn, REAL *buf, const REAL **row, REAL *lanes) {
  if (!var) {
    FN(dn_lanes)(v, d0, nd, n, lanes);
    for (int64_t t = 0; t < tn; t++) buf[t] = 0;
    *row = buf;
    return;
  }
  FOR_LANES(l) lanes[l] = 0;
  int64_t g = d0 / (j->s.D / G);
  *row = FN(vin)(v, at3(v, b, g, n) + t0 * v->strides[3], v->strides[3], tn, buf);
}

// The step loops below take var_b, var_c (per-batch B, C: the row's value
// at step t on every lane, else the lanes' own) and wide (EXP2_WIDE) as
// arguments. Each is compiled into functions of its own (step_copies, after
// chunk_bwd), one per instruction set and case: constants in the common
// cases (per-batch B and C, or both shared, no wide decays), so that those
// copies have no test in their loops, and the arguments as given otherwise.
// Inlined into the tasks instead, the loops' vectorisation depended on
// everything else in the task: a second constant copy there left gcc's
// per-batch loops scalar (4x1536x1024 N=16 forward 17 -> 41 ms).
#define BC(var, row, lanes, t, l) ((var) ? (row)[t] : (lanes)[l])
#define DECAY(wide, x) ((wide) ? EXP2_WIDE(x) : EXP2(x))

// State n of a block over steps [0, tn), from h (left as the last state):
//   a_t = e^(dt_t A) = DECAY(dt_t A2) (A2 = A EXP_SCALE);  h = a_t h + dtu_t B_t
// and, when given: y[t] += C_t h;  hs[t + 1] = h, as[t] = a_t;  prod *= a_t.
GK_INLINE void FN(chunk_fwd)(bool var_b, bool var_c, bool wide, REAL *h, const REAL *A2, const REAL *Br,
                             const REAL *Bl, const REAL *Cr, const REAL *Cl, const LANES *dt, const LANES *dtu,
                             int64_t tn, LANES *y, LANES *hs, LANES *as, REAL *prod) {
  REAL hl[W], pl[W];
  FOR_LANES(l) {
    hl[l] = h[l];
    pl[l] = prod ? prod[l] : 1;
  }
  for (int64_t t = 0; t < tn; t++) {
    REAL a[W];
    FOR_LANES(l) {
      a[l] = DECAY(wide, dt[t][l] * A2[l]);
      hl[l] = a[l] * hl[l] + dtu[t][l] * BC(var_b, Br, Bl, t, l);
    }
    if (y) FOR_LANES(l) y[t][l] += BC(var_c, Cr, Cl, t, l) * hl[l];
    if (hs) FOR_LANES(l) {
      hs[t + 1][l] = hl[l];
      as[t][l] = a[l];
    }
    if (prod) FOR_LANES(l) pl[l] *= a[l];
  }
  FOR_LANES(l) {
    h[l] = hl[l];
    if (prod) prod[l] = pl[l];
  }
}

// State n of a block backwards over steps [0, tn), from the state gradient
// carry flowing in from step tn (left as the one flowing out of step 0);
// hs, as as chunk_fwd left them. Per step:
//   g = carry + C_t dy'_t;  carry = a_t g;  q = g a_t h_{t-1}
//   dB_t = g dtu_t, dC_t = dy'_t h_t: per step into dBt[t], dCt[t]
//     (per-batch B, C), or summed into dBt[0], dCt[0] (shared)
//   dA += q dt_t;  S1[t] += g B_t;  S2[t] += A q
// (so du_t = D dy'_t + dt_t S1[t], ddt_t = S2[t] + u_t S1[t] once every n is in).
GK_INLINE void FN(chunk_bwd)(bool var_b, bool var_c, bool wide, REAL *carry, const REAL *A, const REAL *Br,
                             const REAL *Bl, const REAL *Cr, const REAL *Cl, const LANES *dt, const LANES *dtu,
                             const LANES *dyp, int64_t tn, const LANES *hs, const LANES *as, REAL *dA, LANES *dBt,
                             LANES *dCt, LANES *S1, LANES *S2) {
  (void)wide;
  REAL cl[W], dAl[W], dBl[W], dCl[W];
  FOR_LANES(l) {
    cl[l] = carry[l];
    dAl[l] = dBl[l] = dCl[l] = 0;
  }
  for (int64_t t = tn - 1; t >= 0; t--)
    FOR_LANES(l) {
      REAL g = cl[l] + BC(var_c, Cr, Cl, t, l) * dyp[t][l], q = g * as[t][l] * hs[t][l];
      REAL gb = g * dtu[t][l], hc = dyp[t][l] * hs[t + 1][l];
      if (var_b) dBt[t][l] = gb;
      else dBl[l] += gb;
      if (var_c) dCt[t][l] = hc;
      else dCl[l] += hc;
      dAl[l] += q * dt[t][l];
      S1[t][l] += g * BC(var_b, Br, Bl, t, l);
      S2[t][l] += A[l] * q;
      cl[l] = as[t][l] * g;
    }
  FOR_LANES(l) {
    carry[l] = cl[l];
    dA[l] += dAl[l];
    if (!var_b) dBt[0][l] += dBl[l];
    if (!var_c) dCt[0][l] += dCl[l];
  }
}

// step_copies: chunk_fwd and chunk_bwd as functions per instruction set
// (ISA: avx512, avx2, scalar; one copy where the target has no levels) and
// case (var: per-batch B and C; shared: both shared; any: the arguments as
// given), each called through FN(fwd_steps) / FN(bwd_steps).
#define STEP_PARAMS_fwd                                                                             \
  bool var_b, bool var_c, bool wide, REAL *restrict h, const REAL *restrict A2, const REAL *restrict Br, \
      const REAL *restrict Bl, const REAL *restrict Cr, const REAL *restrict Cl,                         \
      const LANES *restrict dt, const LANES *restrict dtu, int64_t tn, LANES *restrict y,                \
      LANES *restrict hs, LANES *restrict as, REAL *restrict prod
#define STEP_ARGS_fwd h, A2, Br, Bl, Cr, Cl, dt, dtu, tn, y, hs, as, prod
#define STEP_PARAMS_bwd                                                                              \
  bool var_b, bool var_c, bool wide, REAL *restrict carry, const REAL *restrict A,                      \
      const REAL *restrict Br, const REAL *restrict Bl, const REAL *restrict Cr,                        \
      const REAL *restrict Cl, const LANES *restrict dt, const LANES *restrict dtu,                     \
      const LANES *restrict dyp, int64_t tn, const LANES *restrict hs, const LANES *restrict as,        \
      REAL *restrict dA, LANES *restrict dBt, LANES *restrict dCt, LANES *restrict S1,                  \
      LANES *restrict S2
#define STEP_ARGS_bwd carry, A, Br, Bl, Cr, Cl, dt, dtu, dyp, tn, hs, as, dA, dBt, dCt, S1, S2
// FN(DIR_CASE_ISA): chunk_DIR with var_b, var_c, wide = VB, VC, WD.
#define STEP_COPY(TARGET, DIR, CASE, ISA, VB, VC, WD)                                      \
  TARGET __attribute__((noinline)) static void FN(DIR##_##CASE##_##ISA)(STEP_PARAMS_##DIR) { \
    (void)var_b, (void)var_c, (void)wide;                                                  \
    FN(chunk_##DIR)(VB, VC, WD, STEP_ARGS_##DIR);                                          \
  }
#define STEP_COPIES(TARGET, ISA)                                                                      \
  STEP_COPY(TARGET, fwd, var, ISA, true, true, false)                                                 \
  STEP_COPY(TARGET, fwd, shared, ISA, false, false, false)                                            \
  STEP_COPY(TARGET, fwd, any, ISA, var_b, var_c, wide)                                                \
  STEP_COPY(TARGET, bwd, var, ISA, true, true, false)                                                 \
  STEP_COPY(TARGET, bwd, shared, ISA, false, false, false)                                            \
  STEP_COPY(TARGET, bwd, any, ISA, var_b, var_c, wide)
#if GK_X86
STEP_COPIES(GK_TARGET_AVX512, avx512)
STEP_COPIES(GK_TARGET_AVX2, avx2)
#endif
STEP_COPIES(, scalar)

// The copy for a case on this machine's instruction set.
#if GK_X86
#define STEP_PICK(dir, ...)                                                                          \
  switch (gk_isa_level()) {                                                                          \
  case GK_ISA_AVX512BF16:                                                                            \
  case GK_ISA_AVX512: FN(dir##_avx512)(__VA_ARGS__); return;                                         \
  case GK_ISA_AVX2: FN(dir##_avx2)(__VA_ARGS__); return;                                             \
  default: FN(dir##_scalar)(__VA_ARGS__); return;                                                    \
  }
#else
#define STEP_PICK(dir, ...) { FN(dir##_scalar)(__VA_ARGS__); }
#endif
#define STEP_CASES(fwd_or_bwd, ARGS)                                                                 \
  do {                                                                                               \
    if (var_b && var_c && !wide) STEP_PICK(fwd_or_bwd##_var, var_b, var_c, wide, ARGS)               \
    else if (!var_b && !var_c && !wide) STEP_PICK(fwd_or_bwd##_shared, var_b, var_c, wide, ARGS)     \
    else STEP_PICK(fwd_or_bwd##_any, var_b, var_c, wide, ARGS)                                       \
  } while (0)
static void FN(fwd_steps)(STEP_PARAMS_fwd) { STEP_CASES(fwd, STEP_ARGS_fwd); }
static void FN(bwd_steps)(STEP_PARAMS_bwd) { STEP_CASES(bwd, STEP_ARGS_bwd); }

// ---------------------------------------------------------------- forward

// Level 1: each range but the last from a zero state: end state to run,
// product of the decays to prod.
GK_INLINE void BODY(fwd_level1)(void *ctx, int64_t task) {
  const scan_job *j = ctx;
  task_range tr = range_of(j, task);
  if (tr.r == j->S - 1) return;
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N;
  LANES raw[TMAX], dt[TMAX], u[TMAX], dtu[TMAX];
  REAL Bbuf[TMAX];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t c = tr.c0; c < tr.c1; c++) {
      int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0);
      for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W) {
        int64_t nd = gk_min64(W, tr.d1 - d0);
        LANES *e = FN(states)(j, j->run, b, tr.r, tr.p, k), *pr = FN(states)(j, j->prod, b, tr.r, tr.p, k);
        if (c == tr.c0)
          for (int64_t n = 0; n < N; n++) FOR_LANES(l) {
              e[n][l] = 0;
              pr[n][l] = 1;
            }
        FN(load_tile)(a[GK_ARG_U], b, d0, nd, t0, tn, u);
        REAL dtmax = FN(load_dt)(j, b, d0, nd, t0, tn, u, raw, dt, dtu);
        for (int64_t n = 0; n < N; n++) {
          const REAL *Br;
          REAL Bl[W], A2[W];
          FN(bc_of)(j, &j->Bv, s->var_b, s->Gb, b, d0, nd, n, t0, tn, Bbuf, &Br, Bl);
          FN(dn_lanes)(a[GK_ARG_A], d0, nd, n, A2);
          FOR_LANES(l) A2[l] *= EXP_SCALE;
          FN(fwd_steps)(s->var_b, true, FN(wide)(dtmax, A2), e[n], A2, Br, Bl, Br, Bl, dt, dtu, tn,
                      NULL, NULL, NULL, pr[n]);
        }
      }
    }
}

// Level 2, task = (batch, part): start_0 = h0, start_{r+1} = P_r start_r +
// E_r, the starts replacing the end states in run.
static void FN(fwd_level2)(const scan_job *j, int64_t task) {
  int64_t b = task / j->Pc, p = task % j->Pc, N = j->s.N, d0, d1;
  part_channels(j, p, &d0, &d1);
  const gk_tensor *H0 = j->a[GK_ARG_INITIAL_STATE];
  for (int64_t k = 0; k * W < d1 - d0; k++)
    for (int64_t n = 0; n < N; n++) {
      REAL h[W] = {0};
      if (H0) FN(vload)(H0, at3(H0, b, d0 + k * W, n), H0->strides[1], gk_min64(W, d1 - d0 - k * W), h);
      for (int64_t r = 0; r < j->S; r++) {
        REAL *run = FN(states)(j, j->run, b, r, p, k)[n], *P = FN(states)(j, j->prod, b, r, p, k)[n];
        FOR_LANES(l) {
          REAL E = r + 1 < j->S ? run[l] : 0;
          run[l] = h[l];
          if (r + 1 < j->S) h[l] = P[l] * h[l] + E;
        }
      }
    }
}

// Level 3 (the only level when S = 1): each range from its start state,
// block by block, chunk by chunk, state by state.
GK_INLINE void BODY(fwd_task)(void *ctx, int64_t task) {
  const scan_job *j = ctx;
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  const gk_tensor *CS = a[GK_ARG_CHUNK_STATES], *FS = a[GK_ARG_FINAL_STATE], *H0 = a[GK_ARG_INITIAL_STATE];
  int64_t N = s->N;
  LANES raw[TMAX], dt[TMAX], u[TMAX], dtu[TMAX], z[TMAX], y[TMAX];
  REAL Bbuf[TMAX], Cbuf[TMAX];
  for (int64_t b = tr.b0; b < tr.b1; b++) {
    for (int64_t k = 0, d0 = tr.d0; j->S == 1 && d0 < tr.d1; k++, d0 += W) {
      LANES *h = FN(states)(j, j->run, b, 0, tr.p, k);
      memset(h, 0, (size_t)N * sizeof *h);
      for (int64_t n = 0; H0 && n < N; n++)
        FN(vload)(H0, at3(H0, b, d0, n), H0->strides[1], gk_min64(W, tr.d1 - d0), h[n]);
    }
    for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W)
      for (int64_t c = tr.c0; c < tr.c1; c++) {
        int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0), nd = gk_min64(W, tr.d1 - d0);
        LANES *st = FN(states)(j, j->run, b, tr.r, tr.p, k);
        if (c + 1 < tr.c1) {  // the block's next chunk
          int64_t t1 = t0 + s->T, tn1 = gk_min64(s->T, s->L - t1);
          const gk_arg_kind ins[3] = {GK_ARG_U, GK_ARG_DELTA, GK_ARG_Z};
          for (int i = 0; i < 3; i++) FN(prefetch_tile)(a[ins[i]], b, d0, nd, t1, tn1, false);
          FN(prefetch_tile)(a[GK_ARG_Y], b, d0, nd, t1, tn1, true);
        }
        FN(load_tile)(a[GK_ARG_U], b, d0, nd, t0, tn, u);
        REAL dtmax = FN(load_dt)(j, b, d0, nd, t0, tn, u, raw, dt, dtu);
        memset(y, 0, (size_t)tn * sizeof *y);
        for (int64_t n = 0; n < N; n++) {
          const REAL *Br, *Cr;
          REAL Bl[W], Cl[W], A2[W];
          FN(vstore)(CS, at3(CS, b, d0, c) + n * CS->strides[3], CS->strides[1], nd, st[n]);
          FN(bc_of)(j, &j->Bv, s->var_b, s->Gb, b, d0, nd, n, t0, tn, Bbuf, &Br, Bl);
          FN(bc_of)(j, &j->Cv, s->var_c, s->Gc, b, d0, nd, n, t0, tn, Cbuf, &Cr, Cl);
          FN(dn_lanes)(a[GK_ARG_A], d0, nd, n, A2);
          FOR_LANES(l) A2[l] *= EXP_SCALE;
          FN(fwd_steps)(s->var_b, s->var_c, FN(wide)(dtmax, A2), st[n], A2, Br, Bl, Cr, Cl, dt, dtu,
                      tn, y, NULL, NULL, NULL);
        }
        // y = (y' + D u) silu(z)
        if (a[GK_ARG_D]) {
          REAL Dd[W];
          FN(d_lanes)(a[GK_ARG_D], d0, nd, Dd);
          for (int64_t t = 0; t < tn; t++) FOR_LANES(l) y[t][l] += Dd[l] * u[t][l];
        }
        if (a[GK_ARG_Z]) {
          FN(load_tile)(a[GK_ARG_Z], b, d0, nd, t0, tn, z);
          for (int64_t t = 0; t < tn; t++) FOR_LANES(l) y[t][l] *= SILU(z[t][l]);
        }
        FN(store_tile)(a[GK_ARG_Y], b, d0, nd, t0, tn, y);
      }
    if (tr.r == j->S - 1 && FS)
      for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W)
        for (int64_t n = 0; n < N; n++)
          FN(vstore)(FS, at3(FS, b, d0, n), FS->strides[1], gk_min64(W, tr.d1 - d0),
                     FN(states)(j, j->run, b, tr.r, tr.p, k)[n]);
  }
}

// ---------------------------------------------------------------- backward

// dy' = dy silu(z) (dy without z) over a block's chunk; dy and z tiles kept.
GK_INLINE void FN(load_dyp)(const scan_job *j, int64_t b, int64_t d0, int64_t nd, int64_t t0, int64_t tn,
                            LANES *dy, LANES *z, LANES *dyp) {
  FN(load_tile)(j->a[GK_ARG_DY], b, d0, nd, t0, tn, dy);
  if (j->a[GK_ARG_Z]) {
    FN(load_tile)(j->a[GK_ARG_Z], b, d0, nd, t0, tn, z);
    for (int64_t t = 0; t < tn; t++) FOR_LANES(l) dyp[t][l] = dy[t][l] * SILU(z[t][l]);
  } else {
    memcpy(dyp, dy, (size_t)tn * sizeof *dy);
  }
}

// Level 1: each range but the first backwards from a zero state gradient:
// R = a_t (R + C_t dy'_t) to run, the decay product to prod.
GK_INLINE void BODY(bwd_level1)(void *ctx, int64_t task) {
  const scan_job *j = ctx;
  task_range tr = range_of(j, task);
  if (tr.r == 0) return;
  const gk_tensor *const *a = j->a;
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N;
  LANES raw[TMAX], dt[TMAX], u[TMAX], dtu[TMAX], dy[TMAX], z[TMAX], dyp[TMAX];
  REAL Cbuf[TMAX];
  for (int64_t b = tr.b0; b < tr.b1; b++)
    for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
      int64_t t0 = c * s->T, tn = gk_min64(s->T, s->L - t0);
      for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W) {
        int64_t nd = gk_min64(W, tr.d1 - d0);
        LANES *R = FN(states)(j, j->run, b, tr.r, tr.p, k), *P = FN(states)(j, j->prod, b, tr.r, tr.p, k);
        if (c == tr.c1 - 1)
          for (int64_t n = 0; n < N; n++) FOR_LANES(l) {
              R[n][l] = 0;
              P[n][l] = 1;
            }
        FN(load_tile)(a[GK_ARG_U], b, d0, nd, t0, tn, u);
        REAL dtmax = FN(load_dt)(j, b, d0, nd, t0, tn, u, raw, dt, dtu);
        FN(load_dyp)(j, b, d0, nd, t0, tn, dy, z, dyp);
        for (int64_t n = 0; n < N; n++) {
          const REAL *Cr;
          REAL Cl[W], A2[W];
          FN(bc_of)(j, &j->Cv, s->var_c, s->Gc, b, d0, nd, n, t0, tn, Cbuf, &Cr, Cl);
          FN(dn_lanes)(a[GK_ARG_A], d0, nd, n, A2);
          FOR_LANES(l) A2[l] *= EXP_SCALE;
          bool wide = FN(wide)(dtmax, A2), var_c = s->var_c;
          for (int64_t t = tn - 1; t >= 0; t--)
            FOR_LANES(l) {
              REAL at = DECAY(wide, dt[t][l] * A2[l]);
              R[n][l] = at * (R[n][l] + BC(var_c, Cr, Cl, t, l) * dyp[t][l]);
              P[n][l] *= at;
            }
        }
      }
    }
}

// Level 2, task = (batch, part): carry_{S-1} = dfinal_state or 0,
// carry_{r-1} = P_r carry_r + R_r, the carries replacing R in run.
static void FN(bwd_level2)(const scan_job *j, int64_t task) {
  int64_t b = task / j->Pc, p = task % j->Pc, N = j->s.N, d0, d1;
  part_channels(j, p, &d0, &d1);
  const gk_tensor *DF = j->a[GK_ARG_DFINAL_STATE];
  for (int64_t k = 0; k * W < d1 - d0; k++)
    for (int64_t n = 0; n < N; n++) {
      REAL carry[W] = {0};
      if (DF) FN(vload)(DF, at3(DF, b, d0 + k * W, n), DF->strides[1], gk_min64(W, d1 - d0 - k * W), carry);
      for (int64_t r = j->S - 1; r >= 0; r--) {
        REAL *run = FN(states)(j, j->run, b, r, p, k)[n], *P = FN(states)(j, j->prod, b, r, p, k)[n];
        FOR_LANES(l) {
          REAL R = r > 0 ? run[l] : 0;
          run[l] = carry[l];
          if (r > 0) carry[l] = P[l] * carry[l] + R;
        }
      }
    }
}

// Level 3 (the only level when S = 1): each range backwards from its carry,
// block by block, chunk by chunk (last first), state by state, each state's
// steps recomputed from the saved chunk state.
GK_INLINE void BODY(bwd_task)(void *ctx, int64_t task) {
  const scan_job *j = ctx;
  task_range tr = range_of(j, task);
  const gk_tensor *const *a = j->a;
  const gk_tensor *CS = a[GK_ARG_CHUNK_STATES], *DI = a[GK_ARG_DINITIAL_STATE], *DF = a[GK_ARG_DFINAL_STATE];
  const gk_scan_dims *s = &j->s;
  int64_t N = s->N, L = s->L, K = j->K, D = s->D;
  int64_t ts = tr.c0 * s->T, te = gk_min64(L, tr.c1 * s->T);  // the range's steps
  bool var_b = s->var_b, var_c = s->var_c, has_z = a[GK_ARG_Z] != NULL;
  // params is NULL when the workspace is empty (D = 0: no slot to clear),
  // and NULL + 0 is undefined behaviour in C.
  REAL *slot = j->params ? (REAL *)j->params + tr.slot * D * K : NULL;
  for (int64_t i = tr.d0 * K; i < tr.d1 * K; i++) slot[i] = 0;
  REAL *parts[2] = {var_b ? (REAL *)j->varB : NULL, var_c ? (REAL *)j->varC : NULL};
  for (int i = 0; i < 2; i++)
    for (int64_t b = tr.b0; parts[i] && b < tr.b1; b++)
      for (int64_t n = 0; n < N; n++) {
        REAL *p = parts[i] + ((tr.p * s->B + b) * N + n) * L;
        for (int64_t t = ts; t < te; t++) p[t] = 0;
      }
  LANES raw[TMAX], dt[TMAX], u[TMAX], dtu[TMAX], dy[TMAX], z[TMAX], dyp[TMAX], yp[TMAX], S1[TMAX], S2[TMAX];
  LANES hs[TMAX + 1], as[TMAX], dBt[TMAX], dCt[TMAX];
  REAL Bbuf[TMAX], Cbuf[TMAX];
  for (int64_t b = tr.b0; b < tr.b1; b++) {
    for (int64_t k = 0, d0 = tr.d0; j->S == 1 && d0 < tr.d1; k++, d0 += W) {
      LANES *g = FN(states)(j, j->run, b, 0, tr.p, k);
      memset(g, 0, (size_t)N * sizeof *g);
      for (int64_t n = 0; DF && n < N; n++)
        FN(vload)(DF, at3(DF, b, d0, n), DF->strides[1], gk_min64(W, tr.d1 - d0), g[n]);
    }
    for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W)
      for (int64_t c = tr.c1 - 1; c >= tr.c0; c--) {
        int64_t t0 = c * s->T, tn = gk_min64(s->T, L - t0), nd = gk_min64(W, tr.d1 - d0);
        LANES *carry = FN(states)(j, j->run, b, tr.r, tr.p, k);
        if (c > tr.c0) {  // the block's next chunk (backwards)
          int64_t t1 = t0 - s->T;
          const gk_arg_kind ins[4] = {GK_ARG_U, GK_ARG_DELTA, GK_ARG_DY, GK_ARG_Z};
          const gk_arg_kind outs[3] = {GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DZ};
          for (int i = 0; i < 4; i++) FN(prefetch_tile)(a[ins[i]], b, d0, nd, t1, s->T, false);
          for (int i = 0; i < 3; i++) FN(prefetch_tile)(a[outs[i]], b, d0, nd, t1, s->T, true);
        }
        REAL *sl = slot + d0 * K;
        FN(load_tile)(a[GK_ARG_U], b, d0, nd, t0, tn, u);
        REAL dtmax = FN(load_dt)(j, b, d0, nd, t0, tn, u, raw, dt, dtu);
        FN(load_dyp)(j, b, d0, nd, t0, tn, dy, z, dyp);
        memset(S1, 0, (size_t)tn * sizeof *S1);
        memset(S2, 0, (size_t)tn * sizeof *S2);
        memset(yp, 0, (size_t)tn * sizeof *yp);
        for (int64_t n = 0; n < N; n++) {
          const REAL *Br, *Cr;
          REAL Bl[W], Cl[W], A[W], A2[W], dA[W] = {0};
          FN(bc_of)(j, &j->Bv, var_b, s->Gb, b, d0, nd, n, t0, tn, Bbuf, &Br, Bl);
          FN(bc_of)(j, &j->Cv, var_c, s->Gc, b, d0, nd, n, t0, tn, Cbuf, &Cr, Cl);
          FN(dn_lanes)(a[GK_ARG_A], d0, nd, n, A);
          FOR_LANES(l) A2[l] = A[l] * EXP_SCALE;
          FN(vload)(CS, at3(CS, b, d0, c) + n * CS->strides[3], CS->strides[1], nd, hs[0]);
          for (int64_t l = nd; l < W; l++) hs[0][l] = 0;
          REAL h[W];
          FOR_LANES(l) h[l] = hs[0][l];
          bool wide = FN(wide)(dtmax, A2);
          FN(fwd_steps)(var_b, var_c, wide, h, A2, Br, Bl, Cr, Cl, dt, dtu, tn, has_z ? yp : NULL, hs,
                      as, NULL);
          FOR_LANES(l) dBt[0][l] = dCt[0][l] = 0;  // the shared sums
          FN(bwd_steps)(var_b, var_c, wide, carry[n], A, Br, Bl, Cr, Cl, dt, dtu, dyp, tn, hs, as, dA,
                      dBt, dCt, S1, S2);
          FN(lanes_add)(sl + n, K, nd, dA);
          if (var_b) FN(add_lane_sums)(dBt, tn, parts[0] + ((tr.p * s->B + b) * N + n) * L + t0);
          else FN(lanes_add)(sl + j->off_dB + n, K, nd, dBt[0]);
          if (var_c) FN(add_lane_sums)(dCt, tn, parts[1] + ((tr.p * s->B + b) * N + n) * L + t0);
          else FN(lanes_add)(sl + j->off_dC + n, K, nd, dCt[0]);
        }
        // du = D dy' + dt S1;  ddt = (S2 + u S1) softplus'(raw);
        // dz = dy (y' + D u) silu'(z);  dD += dy' u;  ddelta_bias += ddt.
        REAL Dd[W] = {0}, dD[W] = {0}, ddb[W] = {0};
        bool sp = j->plan->desc.scan.delta_softplus;
        if (a[GK_ARG_D]) FN(d_lanes)(a[GK_ARG_D], d0, nd, Dd);
        for (int64_t t = 0; t < tn; t++)
          FOR_LANES(l) {
            S2[t][l] += u[t][l] * S1[t][l];
            S1[t][l] = Dd[l] * dyp[t][l] + dt[t][l] * S1[t][l];
          }
        if (sp)
          for (int64_t t = 0; t < tn; t++) FOR_LANES(l) S2[t][l] *= DSOFTPLUS(raw[t][l]);
        for (int64_t t = 0; t < tn; t++)
          FOR_LANES(l) {
            dD[l] += dyp[t][l] * u[t][l];
            ddb[l] += S2[t][l];
          }
        FN(lanes_add)(sl + j->off_dD, K, nd, dD);
        FN(lanes_add)(sl + j->off_ddb, K, nd, ddb);
        if (has_z)
          for (int64_t t = 0; t < tn; t++)
            FOR_LANES(l) yp[t][l] = dy[t][l] * (yp[t][l] + Dd[l] * u[t][l]) * DSILU(z[t][l]);
        const LANES *srcs[3] = {S1, S2, yp};
        const gk_arg_kind outs[3] = {GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DZ};
        for (int i = 0; i < 3; i++)
          if (a[outs[i]]) FN(store_tile)(a[outs[i]], b, d0, nd, t0, tn, srcs[i]);
      }
    if (tr.r == 0 && DI)
      for (int64_t k = 0, d0 = tr.d0; d0 < tr.d1; k++, d0 += W)
        for (int64_t n = 0; n < N; n++)
          FN(vstore)(DI, at3(DI, b, d0, n), DI->strides[1], gk_min64(W, tr.d1 - d0),
                     FN(states)(j, j->run, b, tr.r, tr.p, k)[n]);
  }
}

ISA_VARIANTS(FN(fwd_level1), (void *ctx, int64_t task), (ctx, task))
ISA_VARIANTS(FN(fwd_task), (void *ctx, int64_t task), (ctx, task))
ISA_VARIANTS(FN(bwd_level1), (void *ctx, int64_t task), (ctx, task))
ISA_VARIANTS(FN(bwd_task), (void *ctx, int64_t task), (ctx, task))

#undef LANES
#undef FOR_LANES
#undef BC
#undef DECAY
#undef STEP_PARAMS_fwd
#undef STEP_ARGS_fwd
#undef STEP_PARAMS_bwd
#undef STEP_ARGS_bwd
#undef STEP_COPY
#undef STEP_COPIES
#undef STEP_PICK
#undef STEP_CASES

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
  REAL sum[W];
  for (int64_t d = task * ROWS_PER_TASK; d < end; d++)
    for (int64_t k0 = 0; k0 < K; k0 += W) {
      int64_t m = gk_min64(W, K - k0);
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

// The includer's parameters, undefined for its next instantiation.
#undef REAL
#undef REAL_DT
#undef SFX
#undef EXP_SCALE
#undef EXP2
#undef EXP2_WIDE
#undef EXP_SAFE
#undef SOFTPLUS
#undef DSOFTPLUS
#undef SILU
#undef DSILU
