// The conv1d CPU kernels for one accumulator type REAL with suffix SFX;
// included by conv1d.c (see there for the tiles, tasks and workspace).
// Everything here is GK_INLINE, so each ISA copy of a task compiles it for
// its level.
//
// Two kinds of loops, one per layout, each over the unit-stride dimension:
//   runs  (B, D, L): i walks the steps of one channel; weights are scalars,
//         the taps are the run shifted by k.
//   lanes (B, L, D): i walks the channels of one step; weights are rows of
//         the transposed weights wt (W, D), the taps are the rows p .. p+k.
// Taps come in register blocks of KB; sums over k and over t are in a fixed
// order (k increasing; runs: LANES partial sums per k, then the lanes in
// order), so results depend on the problem size only.

// ---------------------------------------------------------------- runs

// acc[i] = (first ? bias : acc[i]) + sum_{k<kb} w[k] xp[i+k], i < n.
GK_INLINE void FN(taps_run_k)(REAL *restrict acc, bool first, REAL bias, const REAL *xp, const REAL *w, const int kb,
                              int64_t n) {
  REAL wk[KB];
  for (int k = 0; k < kb; k++) wk[k] = w[k];
  if (first)
    for (int64_t i = 0; i < n; i++) {
      REAL s = bias;
      for (int k = 0; k < kb; k++) s += wk[k] * xp[i + k];
      acc[i] = s;
    }
  else
    for (int64_t i = 0; i < n; i++) {
      REAL s = acc[i];
      for (int k = 0; k < kb; k++) s += wk[k] * xp[i + k];
      acc[i] = s;
    }
}

// taps_run_k with kb (1 .. KB) a constant, so its loop over k unrolls.
GK_INLINE void FN(taps_run)(REAL *restrict acc, bool first, REAL bias, const REAL *xp, const REAL *w, int64_t kb,
                            int64_t n) {
  switch (kb) {
  case 1: FN(taps_run_k)(acc, first, bias, xp, w, 1, n); break;
  case 2: FN(taps_run_k)(acc, first, bias, xp, w, 2, n); break;
  case 3: FN(taps_run_k)(acc, first, bias, xp, w, 3, n); break;
  default: FN(taps_run_k)(acc, first, bias, xp, w, KB, n); break;
  }
}

// LANES partial sums in one vector (gcc's vector extension: one register
// at AVX-512 for f32, several at lower levels, the same lanes at every level).
typedef REAL FN(lanes) __attribute__((vector_size(LANES * sizeof(REAL))));

// (Vectors pass by pointer: by value they would change the ABI per level.)
GK_INLINE REAL FN(lanes_sum)(const FN(lanes) *v) {
  REAL s = 0;
  for (int l = 0; l < LANES; l++) s += (*v)[l];
  return s;
}

// sums[k] += sum_{i<n} g[i] xp[i+k], k < kb: lane l sums the i = l mod LANES,
// then the lanes are added in order.
GK_INLINE void FN(dots_run_k)(REAL *sums, const REAL *g, const REAL *xp, const int kb, int64_t n) {
  FN(lanes) acc[KB];
  for (int k = 0; k < kb; k++) acc[k] = (FN(lanes)){0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES) {
    FN(lanes) gv, xv;
    LANES_AT(gv, g + i);
    for (int k = 0; k < kb; k++) {
      LANES_AT(xv, xp + i + k);
      acc[k] += gv * xv;
    }
  }
  for (int l = 0; i + l < n; l++)
    for (int k = 0; k < kb; k++) acc[k][l] += g[i + l] * xp[i + l + k];
  for (int k = 0; k < kb; k++) sums[k] += FN(lanes_sum)(&acc[k]);
}

GK_INLINE void FN(dots_run)(REAL *sums, const REAL *g, const REAL *xp, int64_t kb, int64_t n) {
  switch (kb) {
  case 1: FN(dots_run_k)(sums, g, xp, 1, n); break;
  case 2: FN(dots_run_k)(sums, g, xp, 2, n); break;
  case 3: FN(dots_run_k)(sums, g, xp, 3, n); break;
  default: FN(dots_run_k)(sums, g, xp, KB, n); break;
  }
}

// sum_{i<n} g[i], lane by lane as dots_run_k.
GK_INLINE REAL FN(sum_run)(const REAL *g, int64_t n) {
  FN(lanes) acc = {0}, gv;
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES) {
    LANES_AT(gv, g + i);
    acc += gv;
  }
  for (int l = 0; i + l < n; l++) acc[l] += g[i + l];
  return FN(lanes_sum)(&acc);
}

// Starts loading element t of row r (t may run past the row: rows follow
// each other) of each of the nts tensors ts that are contiguous (the last
// one for writing) and have it; PF elements from there are read or written
// soon.
GK_INLINE void FN(prefetch_runs)(const conv_job *j, const conv_rows *const *ts, int nts, int64_t r, int64_t t) {
  for (int q = 0; q < nts; q++) {
    int64_t e = r * j->row_len + t;
    if (!ts[q]->mem || e >= ts[q]->numel) continue;
    const char *p = ts[q]->mem + e * ts[q]->es;
    if (q == nts - 1) __builtin_prefetch(p, 1);
    else __builtin_prefetch(p, 0);
  }
}

// v[i] = silu(v[i]) (dy NULL) or dy[i] silu'(v[i]), i < n.
GK_INLINE void FN(act_k)(REAL *v, const REAL *dy, int64_t n) {
  if (dy)
    for (int64_t i = 0; i < n; i++) v[i] = dy[i] * GK_CAT(gk_dsilu, SFX)(v[i]);
  else
    for (int64_t i = 0; i < n; i++) v[i] = GK_CAT(gk_silu, SFX)(v[i]);
}

// Runs: act_k over steps [t0, t0 + n) of row `row`, PF steps at a time, each
// time prefetching PF steps of the tensors ts that come n steps later in
// memory: the next unit's rows, which the hardware prefetcher would start
// late (rows of f32 L = 1024 are one 4 KiB page each).
GK_INLINE void FN(act_run)(const conv_job *j, REAL *v, const REAL *dy, int64_t n, const conv_rows *const *ts,
                           int nts, int64_t row, int64_t t0) {
  int64_t i = 0;
  for (; i + PF <= n; i += PF) {
    FN(prefetch_runs)(j, ts, nts, row, t0 + n + i);
    FN(act_k)(v + i, dy ? dy + i : NULL, PF);
  }
  FN(act_k)(v + i, dy ? dy + i : NULL, n - i);
}

// Elements [start, start + n) of row r of t (a row: the L steps of a channel
// for runs, the D channels of a step for lanes) as REAL: in place when t is
// flat, else in buf (a contiguous 16-bit t, with HALF_ROWS: converted
// straight from its memory); outputs are written through row_out's pointer,
// then row_commit stores buf.
GK_INLINE const REAL *FN(row_in)(const conv_job *j, const conv_rows *t, int64_t r, int64_t start, int64_t n,
                                 REAL *buf) {
  if (t->flat) return (const REAL *)t->flat + r * j->row_len + start;
#if HALF_ROWS
  if (t->half) {
    gk_widen16(t->t->dtype, t->half + r * j->row_len + start, n, buf);
    return buf;
  }
#endif
  gk_tensor v = gk_tensor_row(t->t, 1, r);
  return GK_CAT(gk_chunk_in, SFX)(&v, start, n, buf);
}

GK_INLINE REAL *FN(row_out)(const conv_job *j, const conv_rows *t, int64_t r, int64_t start, REAL *buf) {
  return t->flat ? (REAL *)t->flat + r * j->row_len + start : buf;
}

GK_INLINE void FN(row_commit)(const conv_job *j, const conv_rows *t, int64_t r, int64_t start, int64_t n,
                              const REAL *buf) {
  if (t->flat) return;
#if HALF_ROWS
  if (t->half) {
    gk_narrow16(t->t->dtype, buf, n, (uint16_t *)t->half + r * j->row_len + start);
    return;
  }
#endif
  gk_tensor v = gk_tensor_row(t->t, 1, r);
  GK_CAT(gk_store, SFX)(&v, start, n, buf);
}

// xpad[p0 .. p0+m) of row `row` (= b D + d) as REAL: x's own memory when it
// can be, else buf (at least m elements).
GK_INLINE const REAL *FN(xpad_run)(const conv_job *j, int64_t row, int64_t p0, int64_t m, REAL *buf) {
  int64_t W1 = j->s.W - 1;
  if (p0 >= W1) return FN(row_in)(j, &j->x, row, p0 - W1, m, buf);
  int64_t ni = gk_min64(W1 - p0, m);  // from the initial state
  if (j->a[GK_ARG_INITIAL_STATE]) {
    gk_tensor ir = gk_tensor_row(j->a[GK_ARG_INITIAL_STATE], 1, row);
    GK_CAT(gk_load, SFX)(&ir, p0, ni, buf);
  } else {
    for (int64_t i = 0; i < ni; i++) buf[i] = 0;
  }
  if (m > ni) {
    const REAL *x = FN(row_in)(j, &j->x, row, 0, m - ni, buf + ni);
    if (x != buf + ni) memcpy(buf + ni, x, (size_t)(m - ni) * sizeof(REAL));
  }
  return buf;
}

// Steps [t0, t0 + h) of a run whose taps k0 .. still reach into the initial
// state (they read a filled buffer; the others read x in place).
GK_INLINE int64_t FN(head_len)(const conv_job *j, int64_t t0, int64_t k0, int64_t n) {
  int64_t h = j->s.W - 1 - t0 - k0;
  return h < 0 ? 0 : gk_min64(h, n);
}

// acc[i] = bias[d] + sum_k w[d,k] xpad[t0+i+k], i < n <= GW.
GK_INLINE void FN(pre_run)(const conv_job *j, int64_t row, int64_t t0, int64_t n, REAL *acc) {
  int64_t W = j->s.W, D = j->s.D, d = row % D;
  const REAL *wt = j->wt;
  REAL w[KB], seg[GW + KB], bias = ((const REAL *)j->bias)[d];
  for (int64_t k0 = 0; k0 < W; k0 += KB) {
    int64_t kb = gk_min64(KB, W - k0), h = FN(head_len)(j, t0, k0, n);
    for (int64_t k = 0; k < kb; k++) w[k] = wt[(k0 + k) * D + d];
    if (h > 0) FN(taps_run)(acc, k0 == 0, bias, FN(xpad_run)(j, row, t0 + k0, h + kb - 1, seg), w, kb, h);
    if (n > h)
      FN(taps_run)(acc + h, k0 == 0, bias, FN(xpad_run)(j, row, t0 + k0 + h, n - h + kb - 1, seg), w, kb, n - h);
  }
}

// g[s .. s+m) of row into g, m <= GW: dy silu'(pre), or dy; 0 outside [0, L).
GK_INLINE void FN(g_run)(const conv_job *j, int64_t row, int64_t s, int64_t m, REAL *g) {
  int64_t a = s > 0 ? s : 0, e = gk_min64(s + m, j->s.L);
  if (e < a) e = a;
  for (int64_t i = 0; i < gk_min64(a - s, m); i++) g[i] = 0;
  for (int64_t i = e - s; i < m; i++) g[i] = 0;
  if (e == a) return;
  REAL dyb[GW], *ga = g + (a - s);
  const REAL *dy = FN(row_in)(j, &j->dy, row, a, e - a, dyb);
  if (j->silu) {
    FN(pre_run)(j, row, a, e - a, ga);
    const conv_rows *next[] = {&j->x, &j->dy, &j->dx};
    FN(act_run)(j, ga, dy, e - a, next, 3, row, a);
  } else {
    for (int64_t i = 0; i < e - a; i++) ga[i] = dy[i];
  }
}

// out[i] = dxpad[p0 + i], i < n <= TILE: sum_k w[k] g[p0+i-k] (+ dfinal_state
// for p >= L), over windows of KG taps (each window's g computed once).
// With part (stride D: part[k D] for dweight[k], part[W D] for dbias), also
// adds the sums of the steps t = p0 - (W-1) + i, the dx steps of out.
GK_INLINE void FN(dxpad_run)(const conv_job *j, int64_t row, int64_t p0, int64_t n, REAL *out, REAL *part) {
  int64_t W = j->s.W, D = j->s.D, L = j->s.L, d = row % D;
  const REAL *wt = j->wt;
  REAL g[GW], wr[KG], seg[GW + KB];
  for (int64_t kw0 = 0; kw0 < W; kw0 += KG) {
    // window of taps [kw0, kw0 + kg): g[s + i + q] pairs with w[kw0 + kg-1 - q]
    int64_t kg = gk_min64(KG, W - kw0), s = p0 - kw0 - kg + 1;
    FN(g_run)(j, row, s, n + kg - 1, g);
    for (int64_t q = 0; q < kg; q++) wr[q] = wt[(kw0 + kg - 1 - q) * D + d];
    for (int64_t q0 = 0; q0 < kg; q0 += KB)
      FN(taps_run)(out, kw0 == 0 && q0 == 0, 0, g + q0, wr + q0, gk_min64(KB, kg - q0), n);
    if (!part || kw0 + kg < W) continue;
    // the last window starts at s = p0 - (W-1): g of the dx steps
    for (int64_t k0 = 0; k0 < W; k0 += KB) {
      int64_t kb = gk_min64(KB, W - k0), h = FN(head_len)(j, s, k0, n);
      REAL sums[KB] = {0};
      if (h > 0) FN(dots_run)(sums, g, FN(xpad_run)(j, row, s + k0, h + kb - 1, seg), kb, h);
      if (n > h) FN(dots_run)(sums, g + h, FN(xpad_run)(j, row, s + k0 + h, n - h + kb - 1, seg), kb, n - h);
      for (int64_t k = 0; k < kb; k++) part[(k0 + k) * D] += sums[k];
    }
    part[W * D] += FN(sum_run)(g, n);
  }
  int64_t pf = p0 > L ? p0 : L;  // dxpad[p] for p >= L gets dfinal_state[p - L]
  if (j->a[GK_ARG_DFINAL_STATE] && p0 + n > pf) {
    gk_tensor fr = gk_tensor_row(j->a[GK_ARG_DFINAL_STATE], 1, row);
    const REAL *df = GK_CAT(gk_chunk_in, SFX)(&fr, pf - L, p0 + n - pf, seg);
    for (int64_t p = pf; p < p0 + n; p++) out[p - p0] += df[p - pf];
  }
}

// Forward, runs: y over steps [t0, t0 + n) of a row; the last tile of a row
// also writes its final state xpad[L ..].
GK_INLINE void FN(fwd_run)(const conv_job *j, int64_t row, int64_t t0, int64_t n) {
  REAL yb[TILE], seg[TILE];
  REAL *y = FN(row_out)(j, &j->y, row, t0, yb);
  FN(pre_run)(j, row, t0, n, y);
  const conv_rows *next[] = {&j->x, &j->y};
  if (j->silu) FN(act_run)(j, y, NULL, n, next, 2, row, t0);
  FN(row_commit)(j, &j->y, row, t0, n, yb);
  const gk_tensor *fs = j->a[GK_ARG_FINAL_STATE];
  if (fs && t0 + n == j->s.L) {
    gk_tensor fr = gk_tensor_row(fs, 1, row);
    for (int64_t q = 0; q < j->s.W - 1; q += TILE) {
      int64_t m = gk_min64(TILE, j->s.W - 1 - q);
      GK_CAT(gk_store, SFX)(&fr, q, m, FN(xpad_run)(j, row, j->s.L + q, m, seg));
    }
  }
}

// Backward, runs: dx over steps [t0, t0 + n) of a row (dxpad[t0+W-1 ..]) and
// its dweight/dbias sums into part; the first tile of a row also writes
// dinitial_state = dxpad[0 .. W-1).
GK_INLINE void FN(bwd_run)(const conv_job *j, int64_t row, int64_t t0, int64_t n, REAL *part) {
  REAL ob[TILE];
  REAL *dx = FN(row_out)(j, &j->dx, row, t0, ob);
  FN(dxpad_run)(j, row, t0 + j->s.W - 1, n, dx, part);
  FN(row_commit)(j, &j->dx, row, t0, n, ob);
  const gk_tensor *dis = j->a[GK_ARG_DINITIAL_STATE];
  if (dis && t0 == 0) {
    gk_tensor ir = gk_tensor_row(dis, 1, row);
    for (int64_t q = 0; q < j->s.W - 1; q += TILE) {
      int64_t m = gk_min64(TILE, j->s.W - 1 - q);
      REAL *o = GK_CAT(gk_chunk_out, SFX)(&ir, q, ob);
      FN(dxpad_run)(j, row, q, m, o, NULL);
      GK_CAT(gk_chunk_commit, SFX)(&ir, q, m, o, ob);
    }
  }
}

// ---------------------------------------------------------------- lanes

// Lane loops walk columns: LANES channels of a block down the rows of a
// tile, with the weights of a block of KB taps (or the dweight sums) in
// registers. Every tap block runs KB taps: the taps past the width have a
// zero weight and read a zero row, adding +0 (which only turns a -0 sum
// into +0); every element's sum runs in the order of the taps and of the
// rows. A column cut short by the block's end (its last cnt < LANES
// channels) runs the same loop on copies of its rows padded to LANES.
//
// h (a constant; 1 only in the f32 instance, when conv_job.lanes16): the
// rows of x and dy are bf16 read in place, each column widened to REAL in
// registers, and y or dx is rounded to bf16 column by column from the
// tile's REAL sums as it is stored. Otherwise x and dy rows are REAL: in
// place when flat, else converted into row buffers, like y and dx.

// v = the cnt (<= LANES) elements at p, the lanes past cnt 0; and back.
// (A whole vector is one fixed-size copy: a load or store.)
GK_INLINE void FN(lanes_in)(FN(lanes) *v, const REAL *p, int cnt) {
  if (cnt == LANES) {
    memcpy(v, p, sizeof *v);
    return;
  }
  *v = (FN(lanes)){0};
  memcpy(v, p, (size_t)cnt * sizeof(REAL));
}
GK_INLINE void FN(lanes_out)(REAL *p, const FN(lanes) *v, int cnt) {
  if (cnt == LANES) memcpy(p, v, sizeof *v);
  else memcpy(p, v, (size_t)cnt * sizeof(REAL));
}

// v = LANES elements of row r from element c (REAL, or bf16 with h).
GK_INLINE void FN(col_in)(FN(lanes) *v, const void *r, int64_t c, const int h) {
#if HALF_ROWS
  if (h) {
    gk_bf16x16_to_f32((const uint16_t *)r + c, (float *)v);
    return;
  }
#endif
  memcpy(v, (const REAL *)r + c, sizeof *v);
}

// q (LANES elements of es bytes) = elements c .. c+cnt of row, zero padded.
GK_INLINE void *FN(cut_row)(void *q, const void *row, int64_t c, int cnt, size_t es) {
  memset(q, 0, LANES * es);
  return memcpy(q, (const char *)row + c * es, (size_t)cnt * es);
}

// One column of out[i] = (first ? bias : out[i]) + sum_{k<kb} w[k ws] xr[i+k],
// i < n: rows from element c; w and bias at the column's first channel,
// cnt of their elements real.
GK_INLINE void FN(taps_col)(REAL *const *out, int64_t c, bool first, const REAL *bias, const void *const *xr,
                            const REAL *w, int64_t ws, int64_t kb, int64_t n, int cnt, const int h) {
  FN(lanes) wk[KB], b0 = {0}, s, xv;
  for (int k = 0; k < KB; k++) {
    wk[k] = (FN(lanes)){0};
    if (k < kb) FN(lanes_in)(&wk[k], w + k * ws, cnt);
  }
  if (first) FN(lanes_in)(&b0, bias, cnt);
  for (int64_t i = 0; i < n; i++) {
    if (first) s = b0;
    else memcpy(&s, out[i] + c, sizeof s);
    for (int k = 0; k < KB; k++) {
      FN(col_in)(&xv, xr[i + k], c, h);
      s += wk[k] * xv;
    }
    memcpy(out[i] + c, &s, sizeof s);
  }
}

// out[i][c] = (first ? bias[c] : out[i][c]) + sum_{k<kb} w[k ws + c] xr[i+k][c],
// i < n, c < nd; xr has n + KB - 1 rows (zero rows past n + kb - 1).
GK_INLINE void FN(taps_cols)(REAL *const *out, bool first, const REAL *bias, const void *const *xr, const REAL *w,
                             int64_t ws, int64_t kb, int64_t n, int64_t nd, const int h) {
  REAL ocut[(NT + KG) * LANES], xcut[(NT + KG + KB) * LANES], *oc[NT + KG];
  const void *xc[NT + KG + KB];
  for (int64_t c = 0; c < nd; c += LANES) {
    int cnt = (int)gk_min64(LANES, nd - c);
    bool cut = cnt < LANES;
    if (cut) {
      size_t es = h ? sizeof(uint16_t) : sizeof(REAL);
      for (int64_t r = 0; r < n + KB - 1; r++) xc[r] = FN(cut_row)((char *)xcut + r * LANES * es, xr[r], c, cnt, es);
      for (int64_t i = 0; i < n; i++) oc[i] = FN(cut_row)(ocut + i * LANES, out[i], c, first ? 0 : cnt, sizeof(REAL));
    }
    FN(taps_col)(cut ? oc : out, cut ? 0 : c, first, bias + c, cut ? xc : xr, w + c, ws, kb, n, cnt, h);
    for (int64_t i = 0; cut && i < n; i++) memcpy(out[i] + c, oc[i], (size_t)cnt * sizeof(REAL));
  }
}

// One column of part[k D] += sum_{i<n} g[i] xr[i+k], k < kb (rows in
// order); with xr NULL, part[0] += sum_{i<n} g[i]. Rows from element c,
// part at the column's first channel, cnt of its elements real.
GK_INLINE void FN(dots_col)(REAL *part, int64_t D, int64_t c, const REAL *const *g, const void *const *xr,
                            int64_t kb, int64_t n, int cnt, const int h) {
  FN(lanes) acc[KB], gv, xv;
  for (int k = 0; k < KB; k++) {
    acc[k] = (FN(lanes)){0};
    if (k < (xr ? kb : 1)) FN(lanes_in)(&acc[k], part + k * D, cnt);
  }
  for (int64_t i = 0; i < n; i++) {
    memcpy(&gv, g[i] + c, sizeof gv);
    if (!xr) acc[0] += gv;
    for (int k = 0; xr && k < KB; k++) {
      FN(col_in)(&xv, xr[i + k], c, h);
      acc[k] += gv * xv;
    }
  }
  for (int k = 0; k < (xr ? kb : 1); k++) FN(lanes_out)(part + k * D, &acc[k], cnt);
}

// part[k D + c] += sum_{i<n} g[i][c] xr[i+k][c], k < kb, c < nd; xr as in
// taps_cols; with xr NULL, part[c] += sum_{i<n} g[i][c].
GK_INLINE void FN(dots_cols)(REAL *part, int64_t D, const REAL *const *g, const void *const *xr, int64_t kb,
                             int64_t n, int64_t nd, const int h) {
  REAL gcut[NT * LANES], xcut[(NT + KB) * LANES];
  const REAL *gc[NT];
  const void *xc[NT + KB];
  for (int64_t c = 0; c < nd; c += LANES) {
    int cnt = (int)gk_min64(LANES, nd - c);
    bool cut = cnt < LANES;
    if (cut) {
      size_t es = h ? sizeof(uint16_t) : sizeof(REAL);
      for (int64_t i = 0; i < n; i++) gc[i] = FN(cut_row)(gcut + i * LANES, g[i], c, cnt, sizeof(REAL));
      for (int64_t r = 0; xr && r < n + KB - 1; r++)
        xc[r] = FN(cut_row)((char *)xcut + r * LANES * es, xr[r], c, cnt, es);
    }
    if (xr) FN(dots_col)(part + c, D, cut ? 0 : c, cut ? gc : g, cut ? xc : xr, kb, n, cnt, h);
    else FN(dots_col)(part + c, D, cut ? 0 : c, cut ? gc : g, NULL, 0, n, cnt, 0);
  }
}

// xpad[b, p, d0 .. d0+nd) as REAL (bf16 with h): x's own memory when it
// can be, else buf (room for nd REAL).
GK_INLINE const void *FN(xpad_line)(const conv_job *j, int64_t b, int64_t p, int64_t d0, int64_t nd, REAL *buf,
                                    const int h) {
  int64_t W1 = j->s.W - 1;
#if HALF_ROWS
  if (h && p >= W1) return j->x.half + (b * j->s.L + p - W1) * j->s.D + d0;
#endif
  if (p >= W1) return FN(row_in)(j, &j->x, b * j->s.L + p - W1, d0, nd, buf);
  if (j->a[GK_ARG_INITIAL_STATE]) {
    gk_tensor l = state_line(j->a[GK_ARG_INITIAL_STATE], b, p);
#if HALF_ROWS
    if (h) {  // the state is bf16 too (lanes16): its elements copied
      for (int64_t i = 0; i < nd; i++) ((uint16_t *)buf)[i] = ((const uint16_t *)l.data)[(d0 + i) * l.strides[0]];
      return buf;
    }
#endif
    return GK_CAT(gk_chunk_in, SFX)(&l, d0, nd, buf);
  }
  memset(buf, 0, (size_t)nd * (h ? sizeof(uint16_t) : sizeof(REAL)));
  return buf;
}

// acc[i] = bias + sum_k wt[k] xpad[t0+i+k] for the rows i < n <= NT + KG - 1
// of a lane block (row stride DB).
GK_INLINE void FN(pre_lanes)(const conv_job *j, int64_t b, int64_t t0, int64_t n, int64_t d0, int64_t nd, REAL *acc,
                             const int h) {
  int64_t W = j->s.W, D = j->s.D;
  const REAL *wt = j->wt, *bias = (const REAL *)j->bias + d0;
  REAL xbuf[(NT + KG + KB) * DB], *out[NT + KG], zero[DB] = {0};
  const void *xr[NT + KG + KB];
  for (int64_t i = 0; i < n; i++) out[i] = acc + i * DB;
  for (int64_t k0 = 0; k0 < W; k0 += KB) {
    int64_t kb = gk_min64(KB, W - k0);
    for (int64_t r = 0; r < n + KB - 1; r++)
      xr[r] = r < n + kb - 1 ? FN(xpad_line)(j, b, t0 + k0 + r, d0, nd, xbuf + r * DB, h) : zero;
    FN(taps_cols)(out, k0 == 0, bias, xr, wt + k0 * D + d0, D, kb, n, nd, h);
  }
}

// gr[c..c+cnt) = dy silu'(gr), or dy, for dy = elements c .. c+cnt of
// row dy (cnt <= LANES).
GK_INLINE void FN(g_col)(REAL *gr, const void *dy, int64_t c, bool silu, const int cnt, const int h) {
  REAL d[LANES], cut[LANES];
  FN(lanes) dv;
  if (cnt < LANES) FN(col_in)(&dv, FN(cut_row)(cut, dy, c, cnt, h ? sizeof(uint16_t) : sizeof(REAL)), 0, h);
  else FN(col_in)(&dv, dy, c, h);
  memcpy(d, &dv, sizeof d);
  if (silu)
    for (int l = 0; l < cnt; l++) gr[c + l] = d[l] * GK_CAT(gk_dsilu, SFX)(gr[c + l]);
  else
    for (int l = 0; l < cnt; l++) gr[c + l] = d[l];
}

// g rows [s, s+m) of a lane block into g (row stride DB), m <= NT + KG - 1:
// dy silu'(pre), or dy; 0 outside [0, L).
GK_INLINE void FN(g_lanes)(const conv_job *j, int64_t b, int64_t s, int64_t m, int64_t d0, int64_t nd, REAL *g,
                           const int h) {
  int64_t a = s > 0 ? s : 0, e = gk_min64(s + m, j->s.L);
  for (int64_t r = 0; r < m; r++)
    if (s + r < a || s + r >= e)
      for (int64_t c = 0; c < nd; c++) g[r * DB + c] = 0;
  if (e <= a) return;
  if (j->silu) FN(pre_lanes)(j, b, a, e - a, d0, nd, g + (a - s) * DB, h);
  REAL dyb[DB];
  for (int64_t t = a; t < e; t++) {
    int64_t r = b * j->s.L + t;
#if HALF_ROWS
    const void *dy = h ? (const void *)(j->dy.half + r * j->s.D + d0) : FN(row_in)(j, &j->dy, r, d0, nd, dyb);
#else
    const void *dy = FN(row_in)(j, &j->dy, r, d0, nd, dyb);
#endif
    REAL *gr = g + (t - s) * DB;
    int64_t c = 0;
    for (; c + LANES <= nd; c += LANES) FN(g_col)(gr, dy, c, j->silu, LANES, h);
    if (c < nd) FN(g_col)(gr, dy, c, j->silu, (int)(nd - c), h);
  }
}

// out[i][c] = dxpad[b, p0 + i, d0 + c], i < n <= NT: as dxpad_run, per lane.
// With part (part[k D + c] for dweight[k], part[W D + c] for dbias of
// channel d0 + c), also adds the sums of the dx steps t = p0 - (W-1) + i.
GK_INLINE void FN(dxpad_lanes)(const conv_job *j, int64_t b, int64_t p0, int64_t n, int64_t d0, int64_t nd,
                               REAL *const *out, REAL *part, const int h) {
  int64_t W = j->s.W, D = j->s.D, L = j->s.L;
  const REAL *wt = j->wt;
  REAL g[(NT + KG - 1) * DB], xbuf[(NT + KB - 1) * DB], zero[DB] = {0};
  const REAL *gr[NT];
  const void *gw[NT + KG + KB], *xr[NT + KB - 1];
  for (int64_t i = 0; i < n; i++) gr[i] = g + i * DB;
  for (int64_t kw0 = 0; kw0 < W; kw0 += KG) {
    int64_t kg = gk_min64(KG, W - kw0), s = p0 - kw0 - kg + 1;
    FN(g_lanes)(j, b, s, n + kg - 1, d0, nd, g, h);
    for (int64_t r = 0; r < n + kg - 1 + KB; r++) gw[r] = r < n + kg - 1 ? g + r * DB : zero;
    for (int64_t q0 = 0; q0 < kg; q0 += KB)  // g row s + i + q pairs with w[kw0 + kg-1 - q]
      FN(taps_cols)(out, kw0 == 0 && q0 == 0, zero, gw + q0, wt + (kw0 + kg - 1 - q0) * D + d0, -D,
                    gk_min64(KB, kg - q0), n, nd, 0);
    if (!part || kw0 + kg < W) continue;
    // the last window starts at s = p0 - (W-1): g of the dx steps
    for (int64_t k0 = 0; k0 < W; k0 += KB) {
      int64_t kb = gk_min64(KB, W - k0);
      for (int64_t r = 0; r < n + KB - 1; r++)
        xr[r] = r < n + kb - 1 ? FN(xpad_line)(j, b, s + k0 + r, d0, nd, xbuf + r * DB, h) : zero;
      FN(dots_cols)(part + k0 * D, D, gr, xr, kb, n, nd, h);
    }
    FN(dots_cols)(part + W * D, D, gr, NULL, 0, n, nd, 0);
  }
  const gk_tensor *dfs = j->a[GK_ARG_DFINAL_STATE];
  for (int64_t p = p0 > L ? p0 : L; dfs && p < p0 + n; p++) {
    gk_tensor l = state_line(dfs, b, p - L);
    const REAL *df = GK_CAT(gk_chunk_in, SFX)(&l, d0, nd, xbuf);
    for (int64_t c = 0; c < nd; c++) out[p - p0][c] += df[c];
  }
}

#if HALF_ROWS
// dst[c..c+cnt) = a[c..c+cnt) rounded to bf16 in registers.
GK_INLINE void FN(bf16_col_out)(uint16_t *dst, const REAL *a, int64_t c, const int cnt) {
  float v[LANES] = {0};
  uint16_t o[LANES];
  memcpy(v, a + c, (size_t)cnt * sizeof *v);
  gk_f32x16_to_bf16(v, o);
  memcpy(dst + c, o, (size_t)cnt * sizeof *o);
}

// Row r of t (contiguous bf16), channels d0 .. d0+nd, = a.
GK_INLINE void FN(bf16_row_out)(const conv_job *j, const conv_rows *t, int64_t r, int64_t d0, int64_t nd,
                                const REAL *a) {
  uint16_t *dst = (uint16_t *)t->half + r * j->row_len + d0;
  int64_t c = 0;
  for (; c + LANES <= nd; c += LANES) FN(bf16_col_out)(dst, a, c, LANES);
  if (c < nd) FN(bf16_col_out)(dst, a, c, (int)(nd - c));
}
#endif

// Forward, lanes: y over rows [t0, t0 + n) (n <= NT) of channels
// [d0, d0 + nd); the last tile also writes the final state xpad[L ..].
GK_INLINE void FN(fwd_lanes)(const conv_job *j, int64_t b, int64_t t0, int64_t n, int64_t d0, int64_t nd,
                             const int h) {
  REAL yb[NT * DB], acc[NT * DB];
  FN(pre_lanes)(j, b, t0, n, d0, nd, acc, h);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = b * j->s.L + t0 + i;
    REAL *a = acc + i * DB;
#if HALF_ROWS
    if (h) {  // SiLU in place on the REAL sums, then rounded as stored
      if (j->silu)
        for (int64_t c = 0; c < nd; c++) a[c] = GK_CAT(gk_silu, SFX)(a[c]);
      FN(bf16_row_out)(j, &j->y, r, d0, nd, a);
      continue;
    }
#endif
    REAL *y = FN(row_out)(j, &j->y, r, d0, yb + i * DB);
    if (j->silu)
      for (int64_t c = 0; c < nd; c++) y[c] = GK_CAT(gk_silu, SFX)(a[c]);
    else
      for (int64_t c = 0; c < nd; c++) y[c] = a[c];
    FN(row_commit)(j, &j->y, r, d0, nd, yb + i * DB);
  }
  const gk_tensor *fs = j->a[GK_ARG_FINAL_STATE];
  if (fs && t0 + n == j->s.L)
    for (int64_t q = 0; q < j->s.W - 1; q++) {
      gk_tensor l = state_line(fs, b, q);
      const void *xl = FN(xpad_line)(j, b, j->s.L + q, d0, nd, yb, h);
#if HALF_ROWS
      if (h) {  // the state is bf16 too (lanes16): x's elements copied
        for (int64_t i = 0; i < nd; i++) ((uint16_t *)l.data)[(d0 + i) * l.strides[0]] = ((const uint16_t *)xl)[i];
        continue;
      }
#endif
      GK_CAT(gk_store, SFX)(&l, d0, nd, xl);
    }
}

// Backward, lanes: dx over rows [t0, t0 + n) of channels [d0, d0 + nd) and
// their dweight/dbias sums into part; the first tile also writes
// dinitial_state = dxpad[0 .. W-1).
GK_INLINE void FN(bwd_lanes)(const conv_job *j, int64_t b, int64_t t0, int64_t n, int64_t d0, int64_t nd,
                             REAL *part, const int h) {
  REAL ob[NT * DB], *out[NT];
  for (int64_t i = 0; i < n; i++)
    out[i] = h ? ob + i * DB : FN(row_out)(j, &j->dx, b * j->s.L + t0 + i, d0, ob + i * DB);
  FN(dxpad_lanes)(j, b, t0 + j->s.W - 1, n, d0, nd, out, part, h);
  for (int64_t i = 0; i < n; i++) {
#if HALF_ROWS
    if (h) {
      FN(bf16_row_out)(j, &j->dx, b * j->s.L + t0 + i, d0, nd, ob + i * DB);
      continue;
    }
#endif
    FN(row_commit)(j, &j->dx, b * j->s.L + t0 + i, d0, nd, ob + i * DB);
  }
  const gk_tensor *dis = j->a[GK_ARG_DINITIAL_STATE];
  if (!dis || t0 != 0) return;
  for (int64_t q0 = 0; q0 < j->s.W - 1; q0 += NT) {
    int64_t m = gk_min64(NT, j->s.W - 1 - q0);
    for (int64_t i = 0; i < m; i++) out[i] = ob + i * DB;
    FN(dxpad_lanes)(j, b, q0, m, d0, nd, out, NULL, h);
    for (int64_t i = 0; i < m; i++) {
      gk_tensor l = state_line(dis, b, q0 + i);
      GK_CAT(gk_store, SFX)(&l, d0, nd, out[i]);
    }
  }
}

// ---------------------------------------------------------------- tasks

// Forward task: units [task u_per, (task+1) u_per) of (row, tile) (runs) or
// (b, tile, lane block) (lanes).
GK_INLINE void FN(conv_fwd_task)(const conv_job *j, int64_t task) {
  int64_t end = gk_min64(j->units, (task + 1) * j->units_per_task);
  for (int64_t u = task * j->units_per_task; u < end; u++) {
    if (j->cl) {
      int64_t cb = u % j->nblocks, ti = u / j->nblocks % j->ntiles, b = u / j->nblocks / j->ntiles;
      int64_t t0 = ti * NT, d0 = cb * DB;
      int64_t n = gk_min64(NT, j->s.L - t0), nd = gk_min64(DB, j->s.D - d0);
      if (HALF_ROWS && j->lanes16) FN(fwd_lanes)(j, b, t0, n, d0, nd, HALF_ROWS);
      else FN(fwd_lanes)(j, b, t0, n, d0, nd, 0);
    } else {
      int64_t ti = u % j->ntiles, t0 = ti * TILE;
      FN(fwd_run)(j, u / j->ntiles, t0, gk_min64(TILE, j->s.L - t0));
    }
  }
}

// Backward task = (group, block): the group's (b, tile) items in order, each
// over the block's channels (runs: one run per channel), adding to the
// group's dweight | dbias partial sums part[group][k][d] (k = W: dbias).
GK_INLINE void FN(conv_bwd_task)(const conv_job *j, int64_t task) {
  int64_t grp = task / j->nblocks, W = j->s.W, D = j->s.D, L = j->s.L, tl = j->cl ? NT : TILE;
  int64_t d0 = task % j->nblocks * j->block, nd = gk_min64(j->block, D - d0);
  REAL *part = (REAL *)j->partials + grp * (W + 1) * D + d0;
  for (int64_t k = 0; k <= W; k++)
    for (int64_t c = 0; c < nd; c++) part[k * D + c] = 0;
  int64_t end = gk_min64(j->s.B * j->ntiles, (grp + 1) * j->per_group);
  for (int64_t it = grp * j->per_group; it < end; it++) {
    int64_t b = it / j->ntiles, t0 = it % j->ntiles * tl, n = gk_min64(tl, L - t0);
    if (j->cl && HALF_ROWS && j->lanes16) FN(bwd_lanes)(j, b, t0, n, d0, nd, part, HALF_ROWS);
    else if (j->cl) FN(bwd_lanes)(j, b, t0, n, d0, nd, part, 0);
    else
      for (int64_t c = 0; c < nd; c++) FN(bwd_run)(j, b * D + d0 + c, t0, n, part + c);
  }
}
