// The conv1d CPU kernels for one accumulator type REAL with suffix SFX; included
// by conv1d.c (see there for the task structure).

// xpad[p0 .. p0+m) of row `row` (= b D + d) as REAL: x's own memory when it can
// be, else buf (at least m elements).
static const REAL *FN(xpad_seg)(const conv_job *j, int64_t row, int64_t p0, int64_t m, REAL *buf) {
  int64_t W1 = j->s.W - 1;
  gk_tensor xr = gk_tensor_row(&j->x, 1, row);
  if (p0 >= W1) return GK_CAT(gk_chunk_in, SFX)(&xr, p0 - W1, m, buf);
  int64_t ni = gk_min64(W1 - p0, m);  // from the initial state
  if (j->a[GK_ARG_INITIAL_STATE]) {
    gk_tensor ir = gk_tensor_row(j->a[GK_ARG_INITIAL_STATE], 1, row);
    GK_CAT(gk_load, SFX)(&ir, p0, ni, buf);
  } else {
    for (int64_t i = 0; i < ni; i++) buf[i] = 0;
  }
  if (m > ni) GK_CAT(gk_load, SFX)(&xr, 0, m - ni, buf + ni);
  return buf;
}

// acc[i] = bias + sum_k w[k] xpad[t0 + i + k], i < n <= TILE.
static void FN(pre_tile)(const conv_job *j, int64_t row, int64_t t0, int64_t n, REAL *acc) {
  int64_t d = row % j->s.D, W = j->s.W;
  REAL seg[TILE + KB], wb[KB];
  REAL bias = j->a[GK_ARG_BIAS] ? (REAL)gk_get(j->a[GK_ARG_BIAS], d) : 0;
  for (int64_t i = 0; i < n; i++) acc[i] = bias;
  gk_tensor wr = gk_tensor_row(j->a[GK_ARG_WEIGHT], 1, d);
  for (int64_t k0 = 0; k0 < W; k0 += KB) {
    int64_t kb = gk_min64(KB, W - k0);
    const REAL *w = GK_CAT(gk_chunk_in, SFX)(&wr, k0, kb, wb);
    const REAL *xp = FN(xpad_seg)(j, row, t0 + k0, n + kb - 1, seg);
    for (int64_t k = 0; k < kb; k++) {
      REAL wk = w[k];
      for (int64_t i = 0; i < n; i++) acc[i] += wk * xp[i + k];
    }
  }
}

// Task -> rows [*r0, *r1) and tile [*t0, *t0 + *n).
static void FN(task_range)(const conv_job *j, int64_t task, int64_t *r0, int64_t *r1, int64_t *t0, int64_t *n) {
  int64_t rb = task / j->ntiles, ti = task % j->ntiles;
  *r0 = rb * j->rows_per_task;
  *r1 = gk_min64(j->s.B * j->s.D, *r0 + j->rows_per_task);
  *t0 = ti * TILE;
  *n = gk_min64(TILE, j->s.L - *t0);
}

static void FN(conv_fwd_task)(const conv_job *j, int64_t task) {
  int64_t r0, r1, t0, n;
  FN(task_range)(j, task, &r0, &r1, &t0, &n);
  bool silu = j->plan->desc.conv.silu;
  const gk_tensor *fs = j->a[GK_ARG_FINAL_STATE];
  REAL acc[TILE], yb[TILE], seg[TILE];
  for (int64_t row = r0; row < r1; row++) {
    FN(pre_tile)(j, row, t0, n, acc);
    gk_tensor yr = gk_tensor_row(&j->y, 1, row);
    REAL *yp = GK_CAT(gk_chunk_out, SFX)(&yr, t0, yb);
    for (int64_t i = 0; i < n; i++) yp[i] = silu ? GK_CAT(gk_silu, SFX)(acc[i]) : acc[i];
    GK_CAT(gk_chunk_commit, SFX)(&yr, t0, n, yp, yb);
    if (fs && t0 + n == j->s.L) {  // the last tile writes the final state xpad[L ..]
      gk_tensor fr = gk_tensor_row(fs, 1, row);
      for (int64_t q = 0; q < j->s.W - 1; q += TILE) {
        int64_t m = gk_min64(TILE, j->s.W - 1 - q);
        GK_CAT(gk_store, SFX)(&fr, q, m, FN(xpad_seg)(j, row, j->s.L + q, m, seg));
      }
    }
  }
}

// Pass 1: g = dy * act'(pre) into the workspace.
static void FN(conv_g_task)(const conv_job *j, int64_t task) {
  int64_t r0, r1, t0, n;
  FN(task_range)(j, task, &r0, &r1, &t0, &n);
  bool silu = j->plan->desc.conv.silu;
  REAL acc[TILE];
  for (int64_t row = r0; row < r1; row++) {
    REAL *g = (REAL *)j->g + row * j->s.L + t0;
    gk_tensor dyr = gk_tensor_row(&j->dy, 1, row);
    GK_CAT(gk_load, SFX)(&dyr, t0, n, g);
    if (!silu) continue;
    FN(pre_tile)(j, row, t0, n, acc);
    for (int64_t i = 0; i < n; i++) g[i] *= GK_CAT(gk_dsilu, SFX)(acc[i]);
  }
}

// sum_i a[i] b[i] over LANES partial sums.
static REAL FN(lane_dot)(const REAL *a, const REAL *b, int64_t n) {
  REAL acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * b[i + l];
  for (; i < n; i++) acc[0] += a[i] * b[i];
  REAL s = 0;
  for (int l = 0; l < LANES; l++) s += acc[l];
  return s;
}

// Pass 2: task = (channel d, group): for the group's (b, tile) items, dx and
// dinitial_state, and the group's dweight | dbias partial sums.
static void FN(conv_bwd_task)(const conv_job *j, int64_t task) {
  int64_t d = task / j->groups, grp = task % j->groups, W = j->s.W, L = j->s.L;
  const gk_tensor *dfs = j->a[GK_ARG_DFINAL_STATE], *dis = j->a[GK_ARG_DINITIAL_STATE];
  REAL *part = (REAL *)j->partials + (grp * j->s.D + d) * (W + 1);
  for (int64_t k = 0; k <= W; k++) part[k] = 0;
  gk_tensor wr = gk_tensor_row(j->a[GK_ARG_WEIGHT], 1, d);
  REAL acc[TILE], dxb[TILE], seg[TILE + KB], wb[KB];
  int64_t end = gk_min64(j->s.B * j->ntiles, (grp + 1) * j->per_group);
  for (int64_t it = grp * j->per_group; it < end; it++) {
    int64_t b = it / j->ntiles, row = b * j->s.D + d, t0 = (it % j->ntiles) * TILE, n = gk_min64(TILE, L - t0);
    const REAL *g = (const REAL *)j->g + row * L;
    // dx[t] = sum_k w[k] g[t + W-1-k] (for t + W-1-k < L) + dfinal_state[t + W-1 - L]
    for (int64_t i = 0; i < n; i++) acc[i] = 0;
    if (dfs) {
      gk_tensor dfr = gk_tensor_row(dfs, 1, row);
      for (int64_t t = gk_min64(t0 + n, L - W + 1 > t0 ? L - W + 1 : t0); t < t0 + n; t++)
        acc[t - t0] = (REAL)gk_get(&dfr, t + W - 1 - L);
    }
    for (int64_t k0 = 0; k0 < W; k0 += KB) {
      int64_t kb = gk_min64(KB, W - k0);
      const REAL *w = GK_CAT(gk_chunk_in, SFX)(&wr, k0, kb, wb);
      for (int64_t k = k0; k < k0 + kb; k++) {
        int64_t hi = gk_min64(n, L - W + 1 + k - t0);  // i < hi: g index in range
        const REAL *gk = g + t0 + W - 1 - k;
        for (int64_t i = 0; i < hi; i++) acc[i] += w[k - k0] * gk[i];
      }
    }
    gk_tensor dxr = gk_tensor_row(&j->dx, 1, row);
    REAL *dxp = GK_CAT(gk_chunk_out, SFX)(&dxr, t0, dxb);
    for (int64_t i = 0; i < n; i++) dxp[i] = acc[i];
    GK_CAT(gk_chunk_commit, SFX)(&dxr, t0, n, dxp, dxb);
    // dinitial_state[q] = sum_k w[k] g[q-k] (0 <= q-k < L) + dfinal_state[q - L]
    if (dis && t0 == 0) {
      gk_tensor dir = gk_tensor_row(dis, 1, row), dfr = {0};
      if (dfs) dfr = gk_tensor_row(dfs, 1, row);
      for (int64_t q = 0; q < W - 1; q++) {
        REAL v = dfs && q >= L ? (REAL)gk_get(&dfr, q - L) : 0;
        for (int64_t k = q - L + 1 > 0 ? q - L + 1 : 0; k <= q; k++) v += (REAL)gk_get(&wr, k) * g[q - k];
        gk_set(&dir, q, v);
      }
    }
    // dweight[k] += sum_t g[t] xpad[t + k];  dbias += sum_t g[t]
    for (int64_t k0 = 0; k0 < W; k0 += KB) {
      int64_t kb = gk_min64(KB, W - k0);
      const REAL *xp = FN(xpad_seg)(j, row, t0 + k0, n + kb - 1, seg);
      for (int64_t k = 0; k < kb; k++) part[k0 + k] += FN(lane_dot)(g + t0, xp + k, n);
    }
    REAL sum = 0;
    for (int64_t i = 0; i < n; i++) sum += g[t0 + i];
    part[W] += sum;
  }
}

// Pass 3: task = REDUCE_ROWS channels: dweight, dbias = sum of the group
// partials in group order (+ the old values with accumulate).
static void FN(conv_reduce_task)(const conv_job *j, int64_t task) {
  int64_t W = j->s.W, d1 = gk_min64(j->s.D, (task + 1) * REDUCE_ROWS);
  const gk_tensor *dw = j->a[GK_ARG_DWEIGHT], *db = j->a[GK_ARG_DBIAS];
  bool accumulate = j->plan->desc.accumulate;
  for (int64_t d = task * REDUCE_ROWS; d < d1; d++)
    for (int64_t k0 = 0; k0 <= W; k0 += KB) {
      int64_t m = gk_min64(KB, W + 1 - k0);
      REAL sum[KB];
      for (int64_t i = 0; i < m; i++) sum[i] = 0;
      for (int64_t grp = 0; grp < j->groups; grp++) {
        const REAL *p = (const REAL *)j->partials + (grp * j->s.D + d) * (W + 1) + k0;
        for (int64_t i = 0; i < m; i++) sum[i] += p[i];
      }
      for (int64_t i = 0; i < m; i++) {
        int64_t k = k0 + i;
        if (k < W) gk_set(dw, d * W + k, sum[i] + (accumulate ? (REAL)gk_get(dw, d * W + k) : 0));
        else if (db) gk_set(db, d, sum[i] + (accumulate ? (REAL)gk_get(db, d) : 0));
      }
    }
}
