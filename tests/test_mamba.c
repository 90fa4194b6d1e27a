// The Mamba op set: causal conv1d and the selective scan. The threaded CPU
// kernels against the f64 reference in every dtype, layout and option; the
// reference and the CPU kernel against central finite differences in f64;
// bit-identity across thread counts 1, 2, 3; a sequence run in two pieces
// (state carried forward, state gradient carried backward) against the
// whole; accumulation of parameter gradients; f32 parameters (A, D,
// delta_bias, B, C) with f16/bf16 activations against the reference; no
// byte written outside an output's elements.
#include "arg_dtypes.h"
#include "plan_harness.h"

static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};

static bool is_output(gk_direction dir, int k) {
  if (dir == GK_FORWARD) return k == GK_ARG_Y || k == GK_ARG_FINAL_STATE || k == GK_ARG_CHUNK_STATES;
  switch (k) {
  case GK_ARG_DX: case GK_ARG_DWEIGHT: case GK_ARG_DBIAS: case GK_ARG_DINITIAL_STATE: case GK_ARG_DU:
  case GK_ARG_DDELTA: case GK_ARG_DA: case GK_ARG_DB: case GK_ARG_DC: case GK_ARG_DD: case GK_ARG_DZ:
  case GK_ARG_DDELTA_BIAS: return true;
  default: return false;
  }
}

// Parameter gradients: overwritten, or added to with desc.accumulate.
static bool is_param_grad(const gk_op_desc *d, int k) {
  if (k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS || k == GK_ARG_DA || k == GK_ARG_DD || k == GK_ARG_DDELTA_BIAS)
    return true;
  if (k == GK_ARG_DB) return d->scan.b_layout == GK_SCAN_SHARED;
  if (k == GK_ARG_DC) return d->scan.c_layout == GK_SCAN_SHARED;
  return false;
}

// Random values for input k: decays exp(dt A) < 1 (A < 0, dt > 0 before
// any softplus), everything else of order 1.
static void fill_input(const gk_op_desc *d, const gk_tensor *t, int k) {
  switch (k) {
  case GK_ARG_A: tfill(t, -1.5, -0.2); break;
  case GK_ARG_DELTA: if (d->scan.delta_softplus) tfill(t, -2, 1); else tfill(t, 0.05, 0.6); break;
  case GK_ARG_DELTA_BIAS: tfill(t, 0, 0.3); break;
  case GK_ARG_Z: tfill(t, -2, 2); break;
  default: tfill(t, -1, 1); break;
  }
}

static const char *describe(const gk_op_desc *d, layout lay, char *buf, size_t n) {
  if (d->op == GK_OP_CONV1D)
    snprintf(buf, n, "conv1d %s %s [%lld,%lld,%lld] W=%lld cl=%d bias=%d silu=%d init=%d final=%d %s",
             d->direction == GK_FORWARD ? "fwd" : "bwd", gk_dtype_name(d->dtype), (long long)d->shape[0],
             (long long)d->shape[1], (long long)d->shape[2], (long long)d->conv.width, d->conv.channel_last,
             d->conv.has_bias, d->conv.silu, d->conv.has_initial_state, d->conv.has_final_state, layout_name[lay]);
  else
    snprintf(buf, n,
             "scan %s %s (A %s, B %s, C %s) [%lld,%lld,%lld] N=%lld B=%d C=%d G=%lld D=%d z=%d db=%d sp=%d init=%d "
             "final=%d T=%lld %s",
             d->direction == GK_FORWARD ? "fwd" : "bwd", gk_dtype_name(d->dtype),
             gk_dtype_name(expected_arg_dtype(d, GK_ARG_A)), gk_dtype_name(expected_arg_dtype(d, GK_ARG_B)),
             gk_dtype_name(expected_arg_dtype(d, GK_ARG_C)), (long long)d->shape[0],
             (long long)d->shape[1], (long long)d->shape[2], (long long)d->scan.d_state, d->scan.b_layout,
             d->scan.c_layout, (long long)d->scan.groups, d->scan.has_D, d->scan.has_z, d->scan.has_delta_bias,
             d->scan.delta_softplus, d->scan.has_initial_state, d->scan.has_final_state,
             (long long)d->scan.chunk_size, layout_name[lay]);
  return buf;
}

// Tolerance of cpu against ref. The scan's parameter gradients are sums
// over batch, steps and states; they get 4x the elementwise tolerance.
static tol tol_for(const gk_op_desc *d, int k, gk_dtype out_dtype) {
  (void)out_dtype;
  tol t = tol_of(d->dtype);
  if (d->op == GK_OP_SELECTIVE_SCAN && is_param_grad(d, k) && d->dtype == GK_F32) {
    t.rtol *= 4;
    t.atol *= 4;
  }
  return t;
}

static bool is_output_of(const gk_op_desc *d, int k) { return is_output(d->direction, k); }

// Every argument in the layout asked for.
static const plan_roles roles = {.is_output = is_output_of, .dtype_of = expected_arg_dtype, .fill = fill_input,
                                 .tol_for = tol_for, .describe = describe};

// Tensors for d: inputs in layout `lay` (copied from `from` where it has
// them, else random), outputs as canaries.
static void build(const gk_op_desc *d, layout lay, const argset *from, argset *s) {
  if (!plan_build(&roles, d, lay, from, s)) check(false, "build: %s", gk_last_error());
}

// Parameter gradients with accumulate = 1 add to what the outputs held.
static void check_accumulate(const gk_op_desc *bwd, layout lay, const argset *s, const argset *ref_out) {
  char name[320];
  describe(bwd, lay, name, sizeof name);
  gk_op_desc acc = *bwd;
  acc.accumulate = 1;
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    if (!backend_takes(&acc, be)) continue;
    argset o;
    tbuf prior[GK_ARG_COUNT_];
    clone_outputs(&roles, bwd, s, lay, &o);
    for (int k = 0; k < GK_ARG_COUNT_; k++)
      if (o.have[k] && is_param_grad(bwd, k)) {
        tfill(&o.b[k].t, -2, 2);
        prior[k] = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
        tcopy_values(&prior[k].t, &o.b[k].t);
      }
    check(run_desc(&acc, be, &o) == GK_SUCCESS, "%s accumulate %s: %s", name, gk_backend_name(be), gk_last_error());
    for (int k = 0; k < GK_ARG_COUNT_; k++) {
      if (!o.have[k] || !is_output(bwd->direction, k)) continue;
      tbuf want = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
      int64_t n = gk_tensor_numel(&want.t);
      bool param = is_param_grad(bwd, k);
      for (int64_t i = 0; i < n; i++)
        tset(&want.t, i, (param ? tget(&prior[k].t, i) : 0.0) + tget(&ref_out->b[k].t, i));
      tol tl = tol_for(bwd, k, bwd->dtype);
      tl.rtol *= 2;  // two roundings: of the overwrite result and of the sum
      tl.atol *= 2;
      double r = tcompare(&o.b[k].t, &want.t, tl, false);
      check(r <= 1.0, "%s accumulate %s: %s off by %.3g tolerances", name, gk_backend_name(be),
            gk_arg_name((gk_arg_kind)k), r);
      tbuf_free(&want);
      if (param) tbuf_free(&prior[k]);
    }
    free_outputs(&roles, bwd, &o);
  }
}

static int count_configs;

// Forward and backward of one description in one memory layout; backward
// reuses forward's inputs and the reference's saved chunk states.
static void test_config(gk_op_desc fd, layout lay, bool accumulate) {
  const gk_op_desc *fwd = &fd;
  gk_op_desc bwd = fd;
  bwd.direction = GK_BACKWARD;
  argset fin, fref, bin, bref;
  build(fwd, lay, NULL, &fin);
  compare_backends(&roles, fwd, lay, &fin, &fref);
  build(&bwd, lay, &fin, &bin);
  if (bin.have[GK_ARG_CHUNK_STATES]) tcopy_values(&bin.b[GK_ARG_CHUNK_STATES].t, &fref.b[GK_ARG_CHUNK_STATES].t);
  compare_backends(&roles, &bwd, lay, &bin, &bref);
  if (accumulate) check_accumulate(&bwd, lay, &bin, &bref);
  free_outputs(&roles, &bwd, &bref);
  free_outputs(&roles, fwd, &fref);
  argset_free(&bin);
  argset_free(&fin);
  count_configs++;
}

// ---------------------------------------------------------------- finite differences

// Loss = sum y r + sum final_state rf (r = dy, rf = dfinal_state). For every
// element of every differentiable input, the central difference of the loss
// against backward's gradient, f64, on backend `be`. Returns the largest
// relative error.
static double fd_check(const gk_op_desc *fwd, gk_backend be) {
  gk_op_desc bwd = *fwd;
  bwd.direction = GK_BACKWARD;
  argset f, b;
  build(fwd, CONTIGUOUS, NULL, &f);
  build(&bwd, CONTIGUOUS, &f, &b);
  run_desc(fwd, be, &f);
  if (b.have[GK_ARG_CHUNK_STATES]) tcopy_values(&b.b[GK_ARG_CHUNK_STATES].t, &f.b[GK_ARG_CHUNK_STATES].t);
  if (run_desc(&bwd, be, &b) != GK_SUCCESS) {
    check(false, "fd backward: %s", gk_last_error());
    return INFINITY;
  }
  static const int pairs[][2] = {
      {GK_ARG_X, GK_ARG_DX},         {GK_ARG_WEIGHT, GK_ARG_DWEIGHT}, {GK_ARG_BIAS, GK_ARG_DBIAS},
      {GK_ARG_U, GK_ARG_DU},         {GK_ARG_DELTA, GK_ARG_DDELTA},   {GK_ARG_A, GK_ARG_DA},
      {GK_ARG_B, GK_ARG_DB},         {GK_ARG_C, GK_ARG_DC},           {GK_ARG_D, GK_ARG_DD},
      {GK_ARG_Z, GK_ARG_DZ},         {GK_ARG_DELTA_BIAS, GK_ARG_DDELTA_BIAS},
      {GK_ARG_INITIAL_STATE, GK_ARG_DINITIAL_STATE}};
  static const int outs[][2] = {{GK_ARG_Y, GK_ARG_DY}, {GK_ARG_FINAL_STATE, GK_ARG_DFINAL_STATE}};
  const size_t npairs = sizeof pairs / sizeof *pairs;
  for (size_t p = 0; p < npairs; p++)
    if (f.have[pairs[p][0]])
      check(b.have[pairs[p][1]], "fd: backward gives no %s", gk_arg_name((gk_arg_kind)pairs[p][1]));
  double worst = fd_max_rel_err(fwd, be, &f, &b, pairs, npairs, outs, 2);
  argset_free(&b);
  argset_free(&f);
  return worst;
}

// ---------------------------------------------------------------- threads

// The CPU kernels give the same bits with 1, 2 and 3 threads.
static void test_threads(gk_op_desc fd) {
  const gk_op_desc *fwd = &fd;
  gk_op_desc bwd = fd;
  bwd.direction = GK_BACKWARD;
  argset f, in;
  build(fwd, CONTIGUOUS, NULL, &f);
  run_desc(fwd, GK_BACKEND_CPU, &f);
  build(&bwd, CONTIGUOUS, &f, &in);
  if (in.have[GK_ARG_CHUNK_STATES]) tcopy_values(&in.b[GK_ARG_CHUNK_STATES].t, &f.b[GK_ARG_CHUNK_STATES].t);
  const gk_op_desc *ds[2] = {fwd, &bwd};
  const argset *ins[2] = {&f, &in};
  for (int dir = 0; dir < 2; dir++) {
    check_thread_identity(&roles, ds[dir], ins[dir]);
  }
  argset_free(&in);
  argset_free(&f);
  gk_set_num_threads(2);
}

// ---------------------------------------------------------------- pieces

// A view of the steps [t0, t0 + n) of a (B, D, L) (or (B, L, D) with
// channel_last) tensor, or of a B/C tensor whose last dim is L.
static gk_tensor steps_view(const gk_tensor *t, int dim, int64_t t0, int64_t n) {
  gk_tensor v = *t;
  v.data = (char *)t->data + t0 * t->strides[dim] * (int64_t)gk_dtype_size(t->dtype);
  v.shape[dim] = n;
  return v;
}

// The step dim of argument k, or -1 when it has none.
static int step_dim(const gk_op_desc *d, int k) {
  if (d->op == GK_OP_CONV1D)
    return (k == GK_ARG_X || k == GK_ARG_Y || k == GK_ARG_DY || k == GK_ARG_DX) ? (d->conv.channel_last ? 1 : 2)
                                                                                  : -1;
  if (k == GK_ARG_U || k == GK_ARG_DELTA || k == GK_ARG_Z || k == GK_ARG_Y || k == GK_ARG_DY ||
      k == GK_ARG_DU || k == GK_ARG_DDELTA || k == GK_ARG_DZ)
    return 2;
  if ((k == GK_ARG_B || k == GK_ARG_DB) && d->scan.b_layout != GK_SCAN_SHARED)
    return d->scan.b_layout == GK_SCAN_BATCH ? 2 : 3;
  if ((k == GK_ARG_C || k == GK_ARG_DC) && d->scan.c_layout != GK_SCAN_SHARED)
    return d->scan.c_layout == GK_SCAN_BATCH ? 2 : 3;
  return -1;
}

// Runs the sequence whole (initial state in, final state out) and in two
// pieces [0, L1), [L1, L): forward carries the final state of the first
// piece in as the initial state of the second; backward carries the second
// piece's initial-state gradient into the first piece's final-state
// gradient. Outputs over steps must match the whole run's, state and
// parameter gradients the whole's (parameters: the sum of the pieces).
static void test_pieces(gk_op_desc whole, int64_t L1, gk_backend be) {
  if (whole.op == GK_OP_CONV1D) whole.conv.has_initial_state = whole.conv.has_final_state = 1;
  else whole.scan.has_initial_state = whole.scan.has_final_state = 1;
  int ldim = whole.op == GK_OP_CONV1D && whole.conv.channel_last ? 1 : 2;
  int64_t L = whole.shape[ldim];
  gk_op_desc piece[2] = {whole, whole}, bwd = whole;
  piece[0].shape[ldim] = L1;
  piece[1].shape[ldim] = L - L1;
  bwd.direction = GK_BACKWARD;
  argset f, b;
  build(&whole, CONTIGUOUS, NULL, &f);
  check(run_desc(&whole, be, &f) == GK_SUCCESS, "pieces: whole forward: %s", gk_last_error());
  build(&bwd, CONTIGUOUS, &f, &b);
  if (b.have[GK_ARG_CHUNK_STATES]) tcopy_values(&b.b[GK_ARG_CHUNK_STATES].t, &f.b[GK_ARG_CHUNK_STATES].t);
  check(run_desc(&bwd, be, &b) == GK_SUCCESS, "pieces: whole backward: %s", gk_last_error());
  char name[320];
  describe(&whole, CONTIGUOUS, name, sizeof name);
  tol tl = tol_of(whole.dtype);
  if (whole.dtype == GK_F32) tl = (tol){1e-5, 1e-5};

  // Forward: pieces in order, the state carried.
  argset pf[2], pb[2];
  tbuf carry = tbuf_make(f.b[GK_ARG_INITIAL_STATE].t.dtype, 3, f.b[GK_ARG_INITIAL_STATE].t.shape, CONTIGUOUS);
  tcopy_values(&carry.t, &f.b[GK_ARG_INITIAL_STATE].t);
  for (int p = 0; p < 2; p++) {
    int64_t t0 = p ? L1 : 0, n = piece[p].shape[ldim];
    argset v;
    memset(&v, 0, sizeof v);
    for (int k = 0; k < GK_ARG_COUNT_; k++) {
      if (!f.have[k] || is_output(GK_FORWARD, k)) continue;
      v.have[k] = true;
      v.b[k] = f.b[k];
      int sd = step_dim(&whole, k);
      if (sd >= 0) v.b[k].t = steps_view(&f.b[k].t, sd, t0, n);
    }
    v.b[GK_ARG_INITIAL_STATE] = carry;
    build(&piece[p], CONTIGUOUS, &v, &pf[p]);
    check(run_desc(&piece[p], be, &pf[p]) == GK_SUCCESS, "pieces: forward %d: %s", p, gk_last_error());
    gk_tensor want = steps_view(&f.b[GK_ARG_Y].t, step_dim(&whole, GK_ARG_Y), t0, n);
    double r = tcompare(&pf[p].b[GK_ARG_Y].t, &want, tl, false);
    check(r <= 1, "%s: y of piece %d off by %.3g tolerances", name, p, r);
    tcopy_values(&carry.t, &pf[p].b[GK_ARG_FINAL_STATE].t);
  }
  double r = tcompare(&carry.t, &f.b[GK_ARG_FINAL_STATE].t, tl, false);
  check(r <= 1, "%s: final state of the pieces off by %.3g tolerances", name, r);

  // Backward: pieces in reverse order, the state gradient carried.
  tcopy_values(&carry.t, &b.b[GK_ARG_DFINAL_STATE].t);
  for (int p = 1; p >= 0; p--) {
    int64_t t0 = p ? L1 : 0, n = piece[p].shape[ldim];
    gk_op_desc pd = piece[p];
    pd.direction = GK_BACKWARD;
    argset v;
    memset(&v, 0, sizeof v);
    for (int k = 0; k < GK_ARG_COUNT_; k++) {
      if (!b.have[k] || is_output(GK_BACKWARD, k)) continue;
      v.have[k] = true;
      v.b[k] = b.b[k];
      int sd = step_dim(&whole, k);
      if (sd >= 0) v.b[k].t = steps_view(&b.b[k].t, sd, t0, n);
    }
    v.b[GK_ARG_INITIAL_STATE] = pf[p].b[GK_ARG_INITIAL_STATE];
    v.b[GK_ARG_DFINAL_STATE] = carry;
    v.have[GK_ARG_CHUNK_STATES] = false;
    build(&pd, CONTIGUOUS, &v, &pb[p]);
    if (pb[p].have[GK_ARG_CHUNK_STATES]) tcopy_values(&pb[p].b[GK_ARG_CHUNK_STATES].t, &pf[p].b[GK_ARG_CHUNK_STATES].t);
    check(run_desc(&pd, be, &pb[p]) == GK_SUCCESS, "pieces: backward %d: %s", p, gk_last_error());
    for (int k = 0; k < GK_ARG_COUNT_; k++) {
      int sd = step_dim(&whole, k);
      if (!b.have[k] || !is_output(GK_BACKWARD, k) || sd < 0 || k == GK_ARG_DINITIAL_STATE) continue;
      gk_tensor want = steps_view(&b.b[k].t, sd, t0, n);
      double e = tcompare(&pb[p].b[k].t, &want, tl, false);
      check(e <= 1, "%s: %s of piece %d off by %.3g tolerances", name, gk_arg_name((gk_arg_kind)k), p, e);
    }
    tcopy_values(&carry.t, &pb[p].b[GK_ARG_DINITIAL_STATE].t);
  }
  r = tcompare(&carry.t, &b.b[GK_ARG_DINITIAL_STATE].t, tl, false);
  check(r <= 1, "%s: initial state gradient of the pieces off by %.3g tolerances", name, r);
  // Gradients summed over steps: the pieces add up to the whole.
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!b.have[k] || !is_output(GK_BACKWARD, k) || step_dim(&whole, k) >= 0 || k == GK_ARG_DINITIAL_STATE)
      continue;
    tbuf sum = tbuf_make(GK_F64, b.b[k].t.rank, b.b[k].t.shape, CONTIGUOUS);
    for (int64_t i = 0; i < gk_tensor_numel(&sum.t); i++)
      tset(&sum.t, i, tget(&pb[0].b[k].t, i) + tget(&pb[1].b[k].t, i));
    double e = tcompare(&sum.t, &b.b[k].t, tl, false);
    check(e <= 1, "%s: %s summed over the pieces off by %.3g tolerances", name, gk_arg_name((gk_arg_kind)k), e);
    tbuf_free(&sum);
  }
  for (int p = 0; p < 2; p++) {  // the pieces own copies of everything
    argset_free(&pf[p]);
    argset_free(&pb[p]);
  }
  tbuf_free(&carry);
  argset_free(&b);
  argset_free(&f);
}

// ---------------------------------------------------------------- configurations

static gk_op_desc conv_desc(gk_dtype dt, int64_t B, int64_t D, int64_t L, int64_t W, int channel_last) {
  int64_t shape[3] = {B, channel_last ? L : D, channel_last ? D : L};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, dt, 3, shape);
  d.conv.width = W;
  d.conv.channel_last = channel_last;
  return d;
}

// Scan options as bits: 1 D, 2 z, 4 delta_bias, 8 softplus, 16 initial state, 32 final state.
static gk_op_desc scan_desc(gk_dtype dt, int64_t B, int64_t D, int64_t L, int64_t N, gk_scan_layout bl,
                            gk_scan_layout cl, int64_t G, int opts, int64_t chunk) {
  int64_t shape[3] = {B, D, L};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, dt, 3, shape);
  d.scan.d_state = N;
  d.scan.b_layout = bl;
  d.scan.c_layout = cl;
  d.scan.groups = G;
  d.scan.has_D = opts & 1;
  d.scan.has_z = opts >> 1 & 1;
  d.scan.has_delta_bias = opts >> 2 & 1;
  d.scan.delta_softplus = opts >> 3 & 1;
  d.scan.has_initial_state = opts >> 4 & 1;
  d.scan.has_final_state = opts >> 5 & 1;
  d.scan.chunk_size = chunk;
  return d;
}

// mamba-ssm's mixed precision: A, D, delta_bias in f32 (param_dtype), B and
// C each in f32 or the activations' dtype.
static gk_op_desc scan_mixed(gk_op_desc d, bool b_f32, bool c_f32) {
  d.param_dtype = GK_F32;
  if (b_f32) d.scan.b_dtype = GK_F32;
  if (c_f32) d.scan.c_dtype = GK_F32;
  return d;
}

static gk_op_desc conv_opts(gk_op_desc d, int opts) {
  d.conv.has_bias = opts & 1;
  d.conv.silu = opts >> 1 & 1;
  d.conv.has_initial_state = opts >> 2 & 1;
  d.conv.has_final_state = opts >> 3 & 1;
  return d;
}

int main(void) {
  register_test_backends();
  gk_set_num_threads(2);
  static const gk_scan_layout layouts_bc[3] = {GK_SCAN_SHARED, GK_SCAN_BATCH, GK_SCAN_GROUPED};

  // ---- cpu against ref
  for (size_t ti = 0; ti < 4; ti++) {
    gk_dtype dt = dtypes[ti];
    // conv1d: both layouts, W = 1..5, every option, L < W - 1 too; memory layouts in turn.
    for (int cl = 0; cl < 2; cl++)
      for (int64_t W = 1; W <= 5; W++)
        for (int opts = 0; opts < 16; opts++) {
          layout lay = (layout)((W + opts) % LAYOUT_COUNT);
          test_config(conv_opts(conv_desc(dt, 2, 3, 9, W, cl), opts), lay, opts == 5);
          if (opts % 4 == 0) test_config(conv_opts(conv_desc(dt, 2, 3, 2, W, cl), opts), lay, false);
        }
    // conv1d: several tiles and width blocks (L > 1024, W > 64), L = 1, L = 0.
    test_config(conv_opts(conv_desc(dt, 2, 3, 2100, 4, 0), 15), CONTIGUOUS, true);
    test_config(conv_opts(conv_desc(dt, 1, 2, 1500, 70, 1), 15), STRIDED, false);
    test_config(conv_opts(conv_desc(dt, 2, 3, 2100, 40, 0), 15), STRIDED, true);
    test_config(conv_opts(conv_desc(dt, 1, 2, 30, 70, 0), 15), CONTIGUOUS, false);
    test_config(conv_opts(conv_desc(dt, 2, 200, 20, 33, 1), 7), CONTIGUOUS, true);
    test_config(conv_opts(conv_desc(dt, 2, 5, 1030, 17, 0), 6), TRANSPOSED, false);
    test_config(conv_opts(conv_desc(dt, 3, 4, 1, 3, 0), 15), TRANSPOSED, false);
    test_config(conv_opts(conv_desc(dt, 2, 2, 0, 3, 1), 15), CONTIGUOUS, false);
    // conv1d contiguous (16-bit rows widened and narrowed straight from the
    // tensor's memory): D past a lane block and not a multiple of 16, L past
    // a tile by less than 16; with SiLU and without, every state.
    test_config(conv_opts(conv_desc(dt, 2, 200, 37, 4, 1), 15), CONTIGUOUS, true);
    test_config(conv_opts(conv_desc(dt, 2, 5, 1030, 4, 0), 13), CONTIGUOUS, false);
    // No batch, no channels (batch 0 once divided by zero in gk_plan_create).
    test_config(conv_opts(conv_desc(dt, 0, 3, 9, 4, 0), 15), CONTIGUOUS, false);
    test_config(conv_opts(conv_desc(dt, 2, 0, 9, 4, 1), 15), CONTIGUOUS, false);

    // scan: B and C in every layout pair (grouped ones with G = 2), options in turn.
    for (int bl = 0; bl < 3; bl++)
      for (int cl = 0; cl < 3; cl++) {
        if (bl && cl && bl != cl) continue;  // per-batch B and C share their groups
        for (int opts = 0; opts < 64; opts += 7) {
          layout lay = (layout)((bl + cl + opts) % LAYOUT_COUNT);
          gk_op_desc d = scan_desc(dt, 2, 4, 37, 3, layouts_bc[bl], layouts_bc[cl], 2, opts, 16);
          test_config(d, lay, opts == 63 || opts == 7);
        }
      }
    // every option alone and all together, mixed shared / per-batch layouts
    for (int opts = 1; opts <= 32; opts *= 2)
      test_config(scan_desc(dt, 2, 3, 20, 4, GK_SCAN_BATCH, GK_SCAN_SHARED, 1, opts, 8), CONTIGUOUS,
                  false);
    test_config(scan_desc(dt, 2, 3, 20, 4, GK_SCAN_SHARED, GK_SCAN_GROUPED, 3, 63, 8), STRIDED, true);
    // L = 1; N = 1; N = 512 with small B, D; L a multiple of the chunk; L = 0;
    // enough steps for a sequence cut in ranges (two-level scan).
    test_config(scan_desc(dt, 3, 4, 1, 5, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 63, 64), CONTIGUOUS,
                false);
    test_config(scan_desc(dt, 2, 3, 29, 1, GK_SCAN_GROUPED, GK_SCAN_GROUPED, 3, 63, 4), TRANSPOSED,
                false);
    test_config(scan_desc(dt, 1, 2, 12, 512, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 63, 5), CONTIGUOUS,
                true);
    test_config(scan_desc(dt, 1, 2, 12, 512, GK_SCAN_SHARED, GK_SCAN_SHARED, 1, 63, 64), STRIDED,
                false);
    test_config(scan_desc(dt, 2, 2, 32, 3, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 63, 16), CONTIGUOUS,
                false);
    test_config(scan_desc(dt, 2, 2, 0, 3, GK_SCAN_BATCH, GK_SCAN_SHARED, 1, 63, 16), CONTIGUOUS,
                false);
    // All empty: no workspace at all (the backward once did NULL + 0 with it).
    test_config(scan_desc(dt, 0, 0, 0, 3, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 0, 16), CONTIGUOUS, false);
    test_config(scan_desc(dt, 1, 2, 300, 20, GK_SCAN_GROUPED, GK_SCAN_GROUPED, 2, 63, 3),
                CONTIGUOUS, true);
  }

  // ---- cpu against ref with f32 parameters and 16-bit activations: every
  // B/C dtype pair, layouts and options in turn, accumulation into f32
  // gradients; the two-level scan
  for (gk_dtype dt = GK_F16; dt <= GK_BF16; dt++)
    for (int bc = 0; bc < 4; bc++) {
      for (int bl = 0; bl < 3; bl++) {
        int cl = (bl + bc) % 3;
        if (bl && cl && bl != cl) cl = 0;
        int opts = bc == 3 ? 63 : 7 + 8 * bl + 16 * bc;
        gk_op_desc d = scan_desc(dt, 2, 4, 37, 3, layouts_bc[bl], layouts_bc[cl], 2, opts, 16);
        test_config(scan_mixed(d, bc & 1, bc >> 1), (layout)((bl + bc) % LAYOUT_COUNT), bl != 1);
      }
      test_config(scan_mixed(scan_desc(dt, 1, 2, 300, 20, GK_SCAN_GROUPED, GK_SCAN_GROUPED, 2, 63, 3), bc & 1,
                             bc >> 1), CONTIGUOUS, bc == 3);
    }

  // ---- finite differences in f64, every backend under test: every input's gradient
  double worst_fd = 0;
  int fd_cases = 0;
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    gk_op_desc cases[16];
    int n = 0;
    cases[n++] = conv_opts(conv_desc(GK_F64, 2, 2, 6, 3, 0), 15);
    cases[n++] = conv_opts(conv_desc(GK_F64, 1, 2, 3, 5, 1), 15);
    cases[n++] = conv_opts(conv_desc(GK_F64, 2, 2, 5, 1, 0), 1);
    cases[n++] = conv_opts(conv_desc(GK_F64, 1, 3, 4, 2, 1), 6);
    for (int bl = 0; bl < 3; bl++)
      cases[n++] = scan_desc(GK_F64, 2, 2, 7, 2, layouts_bc[bl], layouts_bc[bl], bl == 2 ? 2 : 1, 63, 3);
    cases[n++] = scan_desc(GK_F64, 1, 2, 5, 3, GK_SCAN_SHARED, GK_SCAN_BATCH, 1, 63 - 8, 2);
    cases[n++] = scan_desc(GK_F64, 2, 1, 4, 2, GK_SCAN_BATCH, GK_SCAN_SHARED, 1, 0, 4);
    cases[n++] = scan_desc(GK_F64, 1, 2, 40, 2, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 63, 2);  // ranges
    for (int i = 0; i < n; i++) {
      if (!backend_takes(&cases[i], be)) continue;
      double e = fd_check(&cases[i], be);
      fd_cases++;
      if (e > worst_fd) worst_fd = e;
      char name[320];
      check(e <= FD_MAX_REL_ERR, "finite differences %s (%s): max rel err %.3g",
            describe(&cases[i], CONTIGUOUS, name, sizeof name), gk_backend_name(be), e);
    }
  }

  // ---- thread-count bit-identity: sizes with many tasks, one-level and two-level scans
  for (size_t ti = 0; ti < 4; ti++) {
    gk_dtype dt = dtypes[ti];
    test_threads(conv_opts(conv_desc(dt, 2, 40, 2100, 4, 0), 15));
    test_threads(conv_opts(conv_desc(dt, 3, 70, 30, 3, 1), 7));
    test_threads(conv_opts(conv_desc(dt, 2, 300, 70, 20, 1), 15));
    test_threads(conv_opts(conv_desc(dt, 2, 30, 3000, 20, 0), 15));
    test_threads(scan_desc(dt, 1, 3, 700, 20, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 63, 16));
    test_threads(scan_desc(dt, 2, 3, 500, 4, GK_SCAN_SHARED, GK_SCAN_SHARED, 1, 63, 8));
    test_threads(scan_desc(dt, 3, 96, 40, 17, GK_SCAN_GROUPED, GK_SCAN_GROUPED, 4, 63, 16));
  }

  // ---- a sequence in two pieces equals it whole
  for (int ib = 0; ib < backends_under_test(); ib++)
    for (size_t ti = 0; ti < 2; ti++) {
      gk_dtype dt = dtypes[ti];
      gk_backend be = backend_under_test(ib);
      gk_op_desc probe = conv_desc(dt, 2, 3, 40, 4, 0);
      if (!backend_takes(&probe, be)) continue;
      test_pieces(conv_opts(conv_desc(dt, 2, 3, 40, 4, 0), 3), 17, be);
      test_pieces(conv_opts(conv_desc(dt, 2, 3, 20, 5, 1), 1), 2, be);
      test_pieces(scan_desc(dt, 2, 3, 50, 4, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 15, 8), 24, be);
      test_pieces(scan_desc(dt, 1, 4, 40, 3, GK_SCAN_GROUPED, GK_SCAN_SHARED, 2, 3, 5), 13, be);
      test_pieces(scan_desc(dt, 1, 2, 600, 6, GK_SCAN_BATCH, GK_SCAN_BATCH, 1, 11, 8), 296, be);
    }

  printf("configurations: %d (x fwd/bwd x backends); finite-difference cases: %d, worst rel err %.3g\n",
         count_configs, fd_cases, worst_fd);
  printf("largest relative error, cpu vs ref: f32 %.3g, f64 %.3g, f16 %.3g, bf16 %.3g\n", worst_rel[GK_F32],
         worst_rel[GK_F64], worst_rel[GK_F16], worst_rel[GK_BF16]);
  return finish("test_mamba");
}
