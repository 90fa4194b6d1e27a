// The transformer ops (linear, matmul, ...): for every op x dtype x layout
// the threaded CPU kernel against the f64 reference, forward and backward,
// no byte written outside an output's elements, accumulation of parameter
// gradients, linear with an f32 bias on f16/bf16 x; the reference and the
// CPU kernel against central finite differences in f64; bit-identity across
// thread counts 1, 2, 3.
#include "arg_dtypes.h"
#include "plan_harness.h"

static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};

// Under AddressSanitizer the thread-count checks run in f32 only and the
// transposed layout is left out (the plain build runs them all), to keep the
// sanitized run short.
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
static const size_t thread_dtypes = SANITIZED ? 1 : 4;

// ---------------------------------------------------------------- argument roles

static bool is_index_kind(int k) { return k == GK_ARG_TARGET || k == GK_ARG_INDEX; }
// Saved statistics and scalar losses: f32 (f64 for f64).
static bool is_stat_kind(int k) {
  return k == GK_ARG_RSTD || k == GK_ARG_MEAN || k == GK_ARG_LOSS || k == GK_ARG_DLOSS || k == GK_ARG_LSE;
}
// Tensors forward reads.
static bool is_fwd_input(int k) {
  return k == GK_ARG_X || k == GK_ARG_WEIGHT || k == GK_ARG_BIAS || k == GK_ARG_A || k == GK_ARG_B ||
         k == GK_ARG_LOGITS || k == GK_ARG_Q || k == GK_ARG_K || k == GK_ARG_V || is_index_kind(k);
}
// Upstream gradients backward reads.
static bool is_upstream(int k) { return k == GK_ARG_DY || k == GK_ARG_DLOSS; }
// Forward outputs whose values backward reads (saved for backward).
static bool is_fwd_output(int k) { return k == GK_ARG_Y || k == GK_ARG_LSE || is_stat_kind(k); }
static bool is_input(gk_direction dir, int k) {
  if (dir == GK_FORWARD) return is_fwd_input(k);
  return is_fwd_input(k) || is_upstream(k) || is_fwd_output(k);
}
// (input, its gradient) pairs for finite differences.
static const int grad_pairs[][2] = {{GK_ARG_X, GK_ARG_DX}, {GK_ARG_WEIGHT, GK_ARG_DWEIGHT},
                                    {GK_ARG_BIAS, GK_ARG_DBIAS}, {GK_ARG_A, GK_ARG_DA}, {GK_ARG_B, GK_ARG_DB},
                                    {GK_ARG_LOGITS, GK_ARG_DLOGITS}, {GK_ARG_Q, GK_ARG_DQ},
                                    {GK_ARG_K, GK_ARG_DK}, {GK_ARG_V, GK_ARG_DV}};
// (forward output, its upstream gradient) pairs: the finite-difference loss
// is sum(output * upstream).
static const int out_pairs[][2] = {{GK_ARG_Y, GK_ARG_DY}, {GK_ARG_LOSS, GK_ARG_DLOSS}};

static double g_xscale = 1.0;      // magnitude of x-like inputs
static double g_ignore_frac = 0.0; // fraction of targets set to ignore_index

static void fill_input(const gk_op_desc *d, const gk_tensor *t, int k) {
  int64_t n = gk_tensor_numel(t);
  if (k == GK_ARG_X || k == GK_ARG_A || k == GK_ARG_LOGITS || k == GK_ARG_Q || k == GK_ARG_K)
    tfill(t, -g_xscale, g_xscale);
  else if (k == GK_ARG_TARGET) {
    int64_t V = d->shape[d->rank - 1];
    for (int64_t i = 0; i < n; i++)
      tset(t, i, rng_uniform(0, 1) < g_ignore_frac ? (double)d->ce.ignore_index : (double)(rng_next() % (uint64_t)V));
  } else if (k == GK_ARG_INDEX) {
    for (int64_t i = 0; i < n; i++) tset(t, i, (double)(rng_next() % (uint64_t)d->embedding.num_embeddings));
  } else tfill(t, -1, 1);
}

// ---------------------------------------------------------------- reports

// Largest relative error |cpu - ref| / max(|ref|, 1e-2) per op and dtype.
static double worst_op[GK_OP_COUNT_][4];

static double rel_err(const gk_tensor *got, const gk_tensor *want) {
  int64_t n = gk_tensor_numel(want);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = tget(got, i), b = tget(want, i);
    if ((isnan(a) && isnan(b)) || (isinf(b) && a == b)) continue;
    double r = fabs(a - b) / fmax(fabs(b), 1e-2);
    if (!(r <= worst)) worst = r;
  }
  return worst;
}

static const char *describe(const gk_op_desc *d, layout lay, char *buf, size_t n) {
  char shape[128] = "";
  for (int i = 0; i < d->rank; i++)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? ",%lld" : "%lld", (long long)d->shape[i]);
  snprintf(buf, n, "%s %s %s (bias %s) [%s] %s", gk_op_name(d->op), d->direction == GK_FORWARD ? "fwd" : "bwd",
           gk_dtype_name(d->dtype), gk_dtype_name(expected_arg_dtype(d, GK_ARG_BIAS)), shape, layout_name[lay]);
  return buf;
}

// Tolerance for comparing with the reference: the dtype's, widened for
// sums of many f32 products (f16/bf16 results are rounded once at the end).
static tol tol_for(const gk_op_desc *d, int k, gk_dtype dt) {
  (void)k;
  tol t = tol_of(dt);
  if (dt == GK_F32 && (d->op == GK_OP_LINEAR || d->op == GK_OP_MATMUL)) t.atol = 1e-4;
  return t;
}

// ---------------------------------------------------------------- argument sets

static bool is_output(const gk_op_desc *d, int k) { return !is_input(d->direction, k); }

// Statistics and index tensors stay contiguous.
static bool is_plain(int k) { return is_stat_kind(k) || is_index_kind(k); }

static const plan_roles roles = {.is_output = is_output, .dtype_of = expected_arg_dtype, .contiguous = is_plain,
                                 .fill = fill_input, .tol_for = tol_for, .describe = describe};

// Allocate the tensors of the plan for d in layout `lay` (statistics and
// index tensors contiguous): inputs random, or copied from `from` (forward
// inputs and outputs reused by backward); outputs left as canaries.
static bool build(const gk_op_desc *d, layout lay, const argset *from, argset *s) {
  return plan_build(&roles, d, lay, from, s);
}

static void record_worst(const gk_op_desc *d, const gk_tensor *got, const gk_tensor *want) {
  double e = rel_err(got, want);
  if (e > worst_op[d->op][d->dtype]) worst_op[d->op][d->dtype] = e;
}

// ---------------------------------------------------------------- accumulation

// Parameter gradients with accumulate = 1 add to what the outputs held.
static void check_accumulate(const gk_op_desc *bwd, layout lay, const argset *s, const argset *ref_out) {
  static const int params[] = {GK_ARG_DWEIGHT, GK_ARG_DBIAS};
  if (!s->have[GK_ARG_DWEIGHT] && !s->have[GK_ARG_DBIAS]) return;
  char name[256];
  describe(bwd, lay, name, sizeof name);
  gk_op_desc acc = *bwd;
  acc.accumulate = 1;
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    if (!backend_takes(&acc, be)) continue;
    argset o;
    clone_outputs(&roles, bwd, s, lay, &o);
    tbuf prior[2];
    for (int p = 0; p < 2; p++) {
      int k = params[p];
      if (!o.have[k]) continue;
      tfill(&o.b[k].t, -2, 2);
      prior[p] = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
      tcopy_values(&prior[p].t, &o.b[k].t);
    }
    check(run_desc(&acc, be, &o) == GK_SUCCESS, "%s accumulate %s: %s", name, gk_backend_name(be),
          gk_last_error());
    for (int p = 0; p < 2; p++) {
      int k = params[p];
      if (!o.have[k]) continue;
      tbuf want = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
      int64_t n = gk_tensor_numel(&want.t);
      for (int64_t i = 0; i < n; i++) tset(&want.t, i, tget(&prior[p].t, i) + tget(&ref_out->b[k].t, i));
      tol tl = tol_for(bwd, k, bwd->dtype);
      tl.rtol *= 2;
      tl.atol *= 2;
      double r = tcompare(&o.b[k].t, &want.t, tl, false);
      check(r <= 1.0, "%s accumulate %s: %s off by %.3g tolerances", name, gk_backend_name(be),
            gk_arg_name((gk_arg_kind)k), r);
      tbuf_free(&want);
      tbuf_free(&prior[p]);
    }
    free_outputs(&roles, bwd, &o);
  }
}

static int count_configs;

// Forward then backward of one configuration in one layout.
static void test_config(const gk_op_desc *fwd, layout lay) {
  gk_op_desc bwd = *fwd;
  bwd.direction = GK_BACKWARD;
  argset fin, fref, bin, bref;
  if (!build(fwd, lay, NULL, &fin)) {
    check(false, "%s: plan: %s", gk_op_name(fwd->op), gk_last_error());
    return;
  }
  count_configs++;
  compare_backends_recording(&roles, fwd, lay, &fin, &fref, record_worst);
  // Backward: forward's inputs, the reference's saved outputs, random upstream.
  argset saved = fin;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (fref.have[k] && is_fwd_output(k)) saved.b[k] = fref.b[k], saved.have[k] = true;
  build(&bwd, lay, &saved, &bin);
  compare_backends_recording(&roles, &bwd, lay, &bin, &bref, record_worst);
  check_accumulate(&bwd, lay, &bin, &bref);
  free_outputs(&roles, &bwd, &bref);
  free_outputs(&roles, fwd, &fref);
  argset_free(&bin);
  argset_free(&fin);
}

static void test_all_layouts(const gk_op_desc *d) {
  for (layout lay = CONTIGUOUS; lay < LAYOUT_COUNT; lay++)
    if (!SANITIZED || lay != TRANSPOSED) test_config(d, lay);
}

static void test_all_dtypes(gk_op_desc d) {
  for (size_t t = 0; t < 4; t++) {
    d.dtype = dtypes[t];
    test_all_layouts(&d);
  }
}

// ---------------------------------------------------------------- finite differences

static double worst_fd;
static int fd_cases;

// L = sum(output * upstream) over forward's outputs; each differentiable
// input element's central difference against backward's gradient (f64).
static void fd_check(gk_op_desc fwd, gk_backend be) {
  fwd.dtype = GK_F64;
  gk_op_desc bwd = fwd;
  bwd.direction = GK_BACKWARD;
  argset f, b;
  build(&fwd, CONTIGUOUS, NULL, &f);
  check(run_desc(&fwd, be, &f) == GK_SUCCESS, "fd %s forward: %s", gk_op_name(fwd.op), gk_last_error());
  build(&bwd, CONTIGUOUS, &f, &b);
  check(run_desc(&bwd, be, &b) == GK_SUCCESS, "fd %s backward: %s", gk_op_name(fwd.op), gk_last_error());
  double worst = fd_max_rel_err(&fwd, be, &f, &b, grad_pairs, sizeof grad_pairs / sizeof *grad_pairs, out_pairs,
                                sizeof out_pairs / sizeof *out_pairs);
  argset_free(&b);
  argset_free(&f);
  fd_cases++;
  if (worst > worst_fd) worst_fd = worst;
  check(worst <= FD_MAX_REL_ERR, "finite differences %s (%s): max rel err %.3g", gk_op_name(fwd.op),
        gk_backend_name(be), worst);
}

static void fd_every_backend(gk_op_desc d) {
  d.dtype = GK_F64;
  for (int ib = 0; ib < backends_under_test(); ib++)
    if (backend_takes(&d, backend_under_test(ib))) fd_check(d, backend_under_test(ib));
}

// ---------------------------------------------------------------- threads

// The CPU kernel gives the same bits with 1, 2 and 3 threads.
static void test_threads(gk_op_desc fwd) {
  gk_op_desc bwd = fwd;
  bwd.direction = GK_BACKWARD;
  const gk_op_desc *ds[2] = {&fwd, &bwd};
  argset f;
  build(&fwd, CONTIGUOUS, NULL, &f);
  run_desc(&fwd, GK_BACKEND_CPU, &f);
  for (int dir = 0; dir < 2; dir++) {
    const gk_op_desc *d = ds[dir];
    argset in;
    if (dir == 0) in = f;
    else build(d, CONTIGUOUS, &f, &in);
    check_thread_identity(&roles, d, &in);
    if (dir == 1) argset_free(&in);
  }
  argset_free(&f);
  gk_set_num_threads(2);
}

// ---------------------------------------------------------------- configurations

static gk_op_desc make(gk_op op, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, GK_FORWARD, GK_F32, rank, shape);
  return d;
}

static void test_linear(void) {
  static const struct { int rank; int64_t shape[4]; int64_t n; int bias; } cases[] = {
      {2, {5, 7}, 3, 1}, {3, {2, 3, 33}, 40, 1}, {1, {17}, 9, 0}, {2, {1, 1}, 1, 1},
      {2, {203, 70}, 45, 1}, {2, {13, 300}, 37, 0}, {2, {4, 0}, 3, 1}, {2, {0, 5}, 3, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    gk_op_desc d = make(GK_OP_LINEAR, cases[c].rank, cases[c].shape);
    d.linear.out_features = cases[c].n;
    d.linear.has_bias = cases[c].bias;
    test_all_dtypes(d);
    // autocast: an f32 bias (and dbias) with f16/bf16 x and weight
    d.param_dtype = GK_F32;
    for (d.dtype = GK_F16; d.dtype <= GK_BF16; d.dtype++)
      if (d.linear.has_bias) test_all_layouts(&d);
  }
  // dW sums 70000 rows: a K too long for the gemm to keep B's whole panel (f64,
  // where such a long sum stays within the tolerance)
  int64_t tall[2] = {70000, 2};
  gk_op_desc d = make(GK_OP_LINEAR, 2, tall);
  d.linear.out_features = 3;
  d.dtype = GK_F64;
  test_config(&d, CONTIGUOUS);
  int64_t fd[3] = {2, 3, 5};
  d = make(GK_OP_LINEAR, 3, fd);
  d.linear.out_features = 4;
  fd_every_backend(d);
  int64_t big[2] = {100, 300};
  d = make(GK_OP_LINEAR, 2, big);
  d.linear.out_features = 260;
  for (size_t t = 0; t < thread_dtypes; t++) {
    d.dtype = dtypes[t];
    test_threads(d);
  }
  d.dtype = GK_BF16;
  d.param_dtype = GK_F32;
  test_threads(d);
  // bf16 with dW summing 360000 rows: too long a K for the gemm to keep A's
  // whole panel (12 x K) at the bf16 dot-product level (its blocks mode)
  int64_t long_k[2] = {360000, 2};
  d = make(GK_OP_LINEAR, 2, long_k);
  d.linear.out_features = 3;
  d.dtype = GK_BF16;
  test_config(&d, CONTIGUOUS);
  if (!SANITIZED) test_threads(d);
}

static void test_matmul(void) {
  static const struct { int rank; int64_t shape[4]; int64_t n; int ta, tb, shared; } cases[] = {
      {2, {5, 7}, 3, 0, 0, 0},     {3, {2, 6, 9}, 11, 1, 0, 0}, {3, {3, 5, 4}, 6, 0, 1, 0},
      {4, {2, 2, 7, 5}, 4, 1, 1, 0}, {3, {4, 3, 8}, 5, 0, 0, 1}, {3, {2, 40, 70}, 33, 1, 1, 1},
      {2, {1, 1}, 1, 0, 0, 0},     {3, {2, 0, 3}, 4, 0, 0, 0},  {3, {2, 70, 140}, 50, 0, 1, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    gk_op_desc d = make(GK_OP_MATMUL, cases[c].rank, cases[c].shape);
    d.matmul.n = cases[c].n;
    d.matmul.trans_a = cases[c].ta;
    d.matmul.trans_b = cases[c].tb;
    d.matmul.shared_b = cases[c].shared;
    test_all_dtypes(d);
  }
  for (int v = 0; v < 4; v++) {
    int64_t fd[3] = {2, 3, 4};
    gk_op_desc d = make(GK_OP_MATMUL, 3, fd);
    d.matmul.n = 5;
    d.matmul.trans_a = v & 1;
    d.matmul.trans_b = v >> 1;
    d.matmul.shared_b = v == 3;
    fd_every_backend(d);
  }
  int64_t big[3] = {3, 70, 270};
  gk_op_desc d = make(GK_OP_MATMUL, 3, big);
  d.matmul.n = 100;
  d.matmul.shared_b = 1;
  for (size_t t = 0; t < thread_dtypes; t++) {
    d.dtype = dtypes[t];
    test_threads(d);
  }
}

// The output written over an input (the very same view) gives the same bits
// as the out-of-place run, on every backend under test.
static void test_in_place(const gk_op_desc *d, int out, int in) {
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    if (!backend_takes(d, be)) continue;
    argset s;
    build(d, CONTIGUOUS, NULL, &s);
    if (d->direction == GK_BACKWARD && s.have[GK_ARG_Y]) {
      // a plausible saved y: the forward of x = the random values
      gk_op_desc f = *d;
      f.direction = GK_FORWARD;
      argset fs;
      build(&f, CONTIGUOUS, NULL, &fs);
      run_desc(&f, GK_BACKEND_REF, &fs);
      tcopy_values(&s.b[GK_ARG_Y].t, &fs.b[GK_ARG_Y].t);
      argset_free(&fs);
    }
    check(run_desc(d, be, &s) == GK_SUCCESS, "%s in place: %s", gk_op_name(d->op), gk_last_error());
    argset inplace = s;
    inplace.b[out] = inplace.b[in];
    tbuf keep = s.b[in];
    s.b[in] = tbuf_make(keep.t.dtype, keep.t.rank, keep.t.shape, CONTIGUOUS);
    tcopy_values(&s.b[in].t, &keep.t);  // the input's values, kept for after
    check(run_desc(d, be, &inplace) == GK_SUCCESS, "%s in place: %s", gk_op_name(d->op), gk_last_error());
    check(tbits_equal(&keep.t, &s.b[out].t), "%s %s %s %s written over %s differs from out of place",
          gk_op_name(d->op), d->direction ? "bwd" : "fwd", gk_dtype_name(d->dtype), gk_arg_name((gk_arg_kind)out),
          gk_arg_name((gk_arg_kind)in));
    tbuf_free(&keep);
    argset_free(&s);
  }
}

static void test_softmax(void) {
  static const struct { int rank; int64_t shape[4]; int dim; } cases[] = {
      {1, {7}, 0}, {2, {5, 17}, -1}, {2, {5, 17}, 0}, {3, {3, 2, 1030}, 2}, {3, {4, 33, 5}, 1},
      {2, {3, 1}, 1}, {3, {2, 0, 3}, 2}, {3, {2, 3, 0}, 2},
      // rows past the one-pass buffer: 5000 (f64), 9000 (every dtype)
      {2, {2, 5000}, 1}, {2, {2, 9000}, -1}};
  for (gk_op op = GK_OP_SOFTMAX; op <= GK_OP_LOG_SOFTMAX; op++) {
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      gk_op_desc d = make(op, cases[c].rank, cases[c].shape);
      d.softmax.dim = cases[c].dim;
      g_xscale = 3;
      test_all_dtypes(d);
      if (c == 1 || c == 3) {
        g_xscale = 1e4;  // logits of +-1e4: exp of x - max, never of x
        test_all_dtypes(d);
      }
    }
    g_xscale = 3;
    for (int dim = 0; dim < 2; dim++) {
      int64_t fd[3] = {2, 3, 5};
      gk_op_desc d = make(op, 3, fd);
      d.softmax.dim = dim;
      fd_every_backend(d);
    }
    int64_t big[2] = {200, 300};
    gk_op_desc d = make(op, 2, big);
    for (size_t t = 0; t < 4; t++) {
      d.dtype = dtypes[t];
      test_threads(d);
      d.direction = GK_FORWARD;
      test_in_place(&d, GK_ARG_Y, GK_ARG_X);
      d.direction = GK_BACKWARD;
      test_in_place(&d, GK_ARG_DX, GK_ARG_DY);
      test_in_place(&d, GK_ARG_DX, GK_ARG_Y);
      d.direction = GK_FORWARD;
    }
  }
  g_xscale = 1;
}

static void test_cross_entropy(void) {
  static const struct { int rank; int64_t shape[4]; } shapes[] = {
      {2, {5, 7}}, {3, {2, 3, 17}}, {2, {3, 1030}}, {1, {9}}, {2, {4, 1}}, {2, {0, 5}}};
  for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
    for (int v = 0; v < 8; v++) {
      gk_op_desc d = make(GK_OP_CROSS_ENTROPY, shapes[c].rank, shapes[c].shape);
      d.index_dtype = v & 1 ? GK_I32 : GK_I64;
      d.ce.reduction = v & 2 ? GK_REDUCTION_SUM : GK_REDUCTION_MEAN;
      d.ce.label_smoothing = v & 4 ? 0.1 : 0.0;
      d.ce.fused_grad = (v + (int)c) & 1;
      d.ce.grad_scale = 0.5;
      d.ce.ignore_index = v < 4 ? -100 : 3;
      g_ignore_frac = v == 5 ? 1.0 : 0.3;  // v = 5: every target ignored
      g_xscale = v == 6 ? 1e4 : 3;          // v = 6: logits of +-1e4
      test_all_dtypes(d);
    }
  g_xscale = 3;
  g_ignore_frac = 0.3;
  for (int v = 0; v < 4; v++) {
    int64_t fd[3] = {2, 3, 6};
    gk_op_desc d = make(GK_OP_CROSS_ENTROPY, 3, fd);
    d.ce.reduction = v & 1 ? GK_REDUCTION_SUM : GK_REDUCTION_MEAN;
    d.ce.label_smoothing = v & 2 ? 0.2 : 0.0;
    fd_every_backend(d);
  }
  int64_t big[2] = {300, 515};
  gk_op_desc d = make(GK_OP_CROSS_ENTROPY, 2, big);
  d.ce.label_smoothing = 0.1;
  d.ce.fused_grad = 1;
  for (size_t t = 0; t < 4; t++) {
    d.dtype = dtypes[t];
    d.direction = GK_FORWARD;
    test_threads(d);
    test_in_place(&d, GK_ARG_DLOGITS, GK_ARG_LOGITS);
    d.direction = GK_BACKWARD;
    test_in_place(&d, GK_ARG_DLOGITS, GK_ARG_LOGITS);
  }
  g_xscale = 1;
  g_ignore_frac = 0;
}

static void test_embedding(void) {
  static const struct { int rank; int64_t shape[4]; int64_t V, D, pad; } cases[] = {
      {2, {3, 5}, 7, 6, -1}, {1, {40}, 5, 9, 2}, {2, {2, 20}, 50, 1030, 0}, {0, {0}, 3, 4, 1},
      {1, {0}, 3, 4, -1},    {3, {2, 2, 3}, 1, 3, -1}, {1, {6}, 4, 0, -1},
      {1, {700}, 1000, 3, -1}};  // more rows and positions than a GPU sort's workgroup
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (int it = 0; it < 2; it++) {
      gk_op_desc d = make(GK_OP_EMBEDDING, cases[c].rank, cases[c].shape);
      d.embedding.num_embeddings = cases[c].V;
      d.embedding.dim = cases[c].D;
      d.embedding.padding_idx = cases[c].pad;
      d.index_dtype = it ? GK_I32 : GK_I64;
      test_all_dtypes(d);
    }
  int64_t fd[2] = {3, 4};
  gk_op_desc d = make(GK_OP_EMBEDDING, 2, fd);
  d.embedding.num_embeddings = 5;
  d.embedding.dim = 3;
  fd_every_backend(d);  // no padding_idx: its row has no gradient, unlike the finite difference
  int64_t big[1] = {3000};
  d = make(GK_OP_EMBEDDING, 1, big);
  d.embedding.num_embeddings = 300;
  d.embedding.dim = 200;
  d.embedding.padding_idx = 0;
  for (size_t t = 0; t < thread_dtypes; t++) {
    d.dtype = dtypes[t];
    test_threads(d);
  }
}

static void test_rope(void) {
  static const struct { int64_t shape[4]; } shapes[] = {
      {{2, 5, 3, 8}}, {{1, 1, 1, 2}}, {{1, 3, 2, 6}}, {{2, 17, 2, 64}}, {{1, 2, 2, 0}}, {{1, 1, 4, 600}}, {{2, 1000, 7, 4}}, {{3, 7, 999, 6}}};
  for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
    for (int v = 0; v < 4; v++) {
      gk_op_desc d = make(GK_OP_ROPE, 4, shapes[c].shape);
      d.rope.layout = v & 1 ? GK_ROPE_BHTD : GK_ROPE_BTHD;
      d.rope.pairing = v & 2 ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
      d.rope.offset = (int64_t)c * 7;
      d.rope.theta = c & 1 ? 500000.0 : 10000.0;
      test_all_dtypes(d);
    }
  for (int v = 0; v < 4; v++) {
    int64_t fd[4] = {1, 3, 2, 6};
    gk_op_desc d = make(GK_OP_ROPE, 4, fd);
    d.rope.layout = v & 1 ? GK_ROPE_BHTD : GK_ROPE_BTHD;
    d.rope.pairing = v & 2 ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
    d.rope.offset = 5;
    fd_every_backend(d);
  }
  // dy broadcast from one value (every stride 0: the dy autograd hands the
  // backward of y.sum()), over more rows than one task of the CPU kernel.
  for (int v = 0; v < 4; v++) {
    int64_t rows[4] = {2, 40, 8, 64};
    gk_op_desc d = make(GK_OP_ROPE, 4, rows);
    d.direction = GK_BACKWARD;
    d.rope.layout = v & 1 ? GK_ROPE_BHTD : GK_ROPE_BTHD;
    d.rope.pairing = v & 2 ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
    for (size_t t = 0; t < 4; t++) {
      d.dtype = dtypes[t];
      compare_one_value_dy(&roles, &d);
    }
  }
  int64_t big[4] = {2, 100, 4, 128};
  gk_op_desc d = make(GK_OP_ROPE, 4, big);
  d.rope.offset = 1000;
  for (size_t t = 0; t < 4; t++) {
    d.dtype = dtypes[t];
    d.direction = GK_FORWARD;
    if (t < thread_dtypes) test_threads(d);
    test_in_place(&d, GK_ARG_Y, GK_ARG_X);
    d.direction = GK_BACKWARD;
    test_in_place(&d, GK_ARG_DX, GK_ARG_DY);
  }
}

static gk_op_desc attention(int64_t B, int64_t H, int64_t T, int64_t Dh, int64_t Hkv, int causal) {
  int64_t q[4] = {B, H, T, Dh};
  gk_op_desc d = make(GK_OP_ATTENTION, 4, q);
  d.attn.kv_heads = Hkv;
  d.attn.causal = causal;
  return d;
}

// A long sequence: forward and backward run at T (with finite gradients);
// the workspace for T = 8192 is far below T^2 floats.
static void test_attention_long(int64_t T) {
  gk_op_desc d = attention(1, 1, 8192, 16, 1, 1);
  size_t ws[2];
  for (int dir = 0; dir < 2; dir++) {
    gk_plan *p;
    d.direction = (gk_direction)dir;
    check(gk_plan_create(&d, &p) == GK_SUCCESS, "attention T=8192: %s", gk_last_error());
    gk_plan_workspace_size(p, &ws[dir]);
    gk_plan_destroy(p);
  }
  double limit = 8192.0 * 8192 * 4 / 16;
  check((double)ws[0] < limit && (double)ws[1] < limit,
        "attention T=8192: workspace %zu / %zu bytes, not < T*T*4/16 = %.0f", ws[0], ws[1], limit);
  printf("attention T=8192 Dh=16: workspace forward %zu, backward %zu bytes (T*T*4 = %.0f)\n", ws[0], ws[1],
         8192.0 * 8192 * 4);
  d = attention(1, 1, T, 16, 1, 1);
  argset f, b;
  build(&d, CONTIGUOUS, NULL, &f);
  check(run_desc(&d, GK_BACKEND_CPU, &f) == GK_SUCCESS, "attention T=%lld forward: %s", (long long)T,
        gk_last_error());
  d.direction = GK_BACKWARD;
  build(&d, CONTIGUOUS, &f, &b);
  check(run_desc(&d, GK_BACKEND_CPU, &b) == GK_SUCCESS, "attention T=%lld backward: %s", (long long)T,
        gk_last_error());
  bool finite = true;
  for (int k = GK_ARG_DQ; k <= GK_ARG_DV; k++)
    for (int64_t i = 0; i < gk_tensor_numel(&b.b[k].t); i += 97) finite &= isfinite(tget(&b.b[k].t, i));
  check(finite, "attention T=%lld: gradients not finite", (long long)T);
  argset_free(&b);
  argset_free(&f);
}

static void test_attention(void) {
  static const struct { int64_t B, H, T, Dh, Hkv; } cases[] = {
      {1, 1, 1, 4, 1}, {2, 2, 5, 8, 2}, {1, 4, 50, 16, 2}, {1, 2, 97, 20, 1}, {2, 3, 13, 64, 3}, {1, 1, 0, 4, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (int causal = 0; causal < 2; causal++) {
      gk_op_desc d = attention(cases[c].B, cases[c].H, cases[c].T, cases[c].Dh, cases[c].Hkv, causal);
      if (c == 2) d.attn.scale = 0.3;
      g_xscale = 2;
      test_all_dtypes(d);
    }
  // several query and key blocks, in f32 and f64 (causal only when sanitized)
  for (int causal = SANITIZED; causal < 2; causal++) {
    gk_op_desc d = attention(1, 2, 450, 12, 1, causal);
    d.dtype = GK_F32;
    test_config(&d, CONTIGUOUS);
    d.dtype = GK_F64;
    test_config(&d, STRIDED);
  }
  for (int v = 0; v < 3; v++) {
    gk_op_desc d = attention(1, 2, 5, 3, v == 2 ? 1 : 2, v != 1);
    fd_every_backend(d);
  }
  gk_op_desc d = attention(1, 4, 250, 16, 2, 1);
  for (size_t t = 0; t < thread_dtypes; t++) {
    d.dtype = dtypes[t];
    test_threads(d);
  }
  g_xscale = 1;
}

static gk_op_desc binary(gk_op op, int ra, const int64_t *sa, int rb, const int64_t *sb) {
  gk_op_desc d = make(op, ra, sa);
  d.binary.b_rank = rb;
  for (int i = 0; i < rb; i++) d.binary.b_shape[i] = sb[i];
  return d;
}

static void test_binary(void) {
  static const struct { int ra; int64_t a[4]; int rb; int64_t b[4]; } cases[] = {
      {2, {3, 4}, 2, {3, 4}}, {3, {2, 3, 4}, 1, {4}},    {3, {2, 3, 4}, 2, {3, 1}}, {1, {4}, 3, {2, 3, 4}},
      {3, {2, 1, 4}, 3, {1, 3, 1}}, {1, {5}, 0, {0}}, {0, {0}, 0, {0}},    {3, {2, 0, 3}, 1, {3}},
      {2, {3, 1}, 2, {3, 0}}, {2, {40, 700}, 1, {700}}, {2, {600, 3}, 2, {600, 1}}};
  for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      gk_op_desc d = binary(op, cases[c].ra, cases[c].a, cases[c].rb, cases[c].b);
      d.binary.alpha = c & 1 ? -0.5 : 1.0;
      test_all_dtypes(d);
    }
  for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++)
    for (size_t c = 1; c < 5; c++) {
      gk_op_desc d = binary(op, cases[c].ra, cases[c].a, cases[c].rb, cases[c].b);
      d.binary.alpha = 0.7;
      fd_every_backend(d);
    }
  int64_t big[3] = {50, 30, 400}, bias[1] = {400}, small[3] = {5, 6, 40};
  for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++) {
    gk_op_desc d = binary(op, 3, big, 1, bias);
    for (size_t t = 0; t < 4; t++) {
      d.dtype = dtypes[t];
      if (t < thread_dtypes) test_threads(d);
      gk_op_desc same = binary(op, 3, small, 3, small);
      same.dtype = dtypes[t];
      test_in_place(&same, GK_ARG_Y, GK_ARG_A);
      test_in_place(&same, GK_ARG_Y, GK_ARG_B);
    }
  }
}

int main(void) {
  register_test_backends();
  gk_set_num_threads(2);
  test_attention();
  test_linear();
  test_matmul();
  test_attention_long(SANITIZED ? 1024 : 8192);
  test_binary();
  test_rope();
  test_embedding();
  test_softmax();
  test_cross_entropy();
  printf("configurations: %d (x fwd/bwd x backends); finite-difference cases: %d, worst rel err %.3g\n",
         count_configs, fd_cases, worst_fd);
  printf("largest relative error, cpu vs ref (|cpu - ref| / max(|ref|, 1e-2)):\n");
  for (int op = 0; op < GK_OP_COUNT_; op++) {
    double any = 0;
    for (int t = 0; t < 4; t++) any += worst_op[op][t];
    if (any == 0) continue;
    printf("  %-14s f32 %.3g  f64 %.3g  f16 %.3g  bf16 %.3g\n", gk_op_name((gk_op)op), worst_op[op][GK_F32],
           worst_op[op][GK_F64], worst_op[op][GK_F16], worst_op[op][GK_BF16]);
  }
  return finish("test_transformer");
}
