// Every op x dtype x direction x layout: the threaded CPU kernel against the
// f64 reference kernel, the reference against central finite differences in
// f64, bit-identity across thread counts 1, 2, 3, accumulation of parameter
// gradients, in-place use, norms with f32 parameters on f16/bf16 x, relu and
// sigmoid backward from the output y (act.from_output) against the backward
// from x, and no byte written outside an output's elements.
#include "arg_dtypes.h"
#include "plan_harness.h"

static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};

static bool is_stat(int k) { return k == GK_ARG_RSTD || k == GK_ARG_MEAN; }

static bool is_input(gk_direction dir, int k) {
  if (k == GK_ARG_LOGITS || k == GK_ARG_TARGET) return true;  // cross-entropy (test_cross_entropy_rows)
  if (dir == GK_FORWARD) return k == GK_ARG_X || k == GK_ARG_GATE || k == GK_ARG_WEIGHT || k == GK_ARG_BIAS;
  return k == GK_ARG_DLOSS || k == GK_ARG_DY || k == GK_ARG_X || k == GK_ARG_Y || k == GK_ARG_GATE ||
         k == GK_ARG_WEIGHT || k == GK_ARG_RSTD || k == GK_ARG_MEAN;
}

// Backward inputs that are forward outputs (copied from the forward's
// reference run): the norms' saved statistics, and y for relu and sigmoid
// from the output (act.from_output).
static bool is_saved_output(int k) { return k == GK_ARG_RSTD || k == GK_ARG_MEAN || k == GK_ARG_Y; }

// The forward and backward of a configuration: act.from_output, an option
// of the backward only, is cleared in the forward.
static void directions(const gk_op_desc *d, gk_op_desc *fwd, gk_op_desc *bwd) {
  *fwd = *bwd = *d;
  fwd->direction = GK_FORWARD;
  fwd->act.from_output = 0;
  bwd->direction = GK_BACKWARD;
}

static bool is_output(const gk_op_desc *d, int k) { return !is_input(d->direction, k); }

static double g_xscale = 1.0;  // |x| of x-like inputs is at most this

static void fill_input(const gk_op_desc *d, const gk_tensor *t, int k) {
  if (k == GK_ARG_WEIGHT) tfill(t, 0.5, 1.5);
  else if (k == GK_ARG_TARGET)
    for (int64_t i = 0; i < gk_tensor_numel(t); i++) tset(t, i, (double)(rng_next() % (uint64_t)d->shape[d->rank - 1]));
  else if (k == GK_ARG_BIAS) tfill(t, -1, 1);
  else if (k == GK_ARG_X || k == GK_ARG_GATE) {
    // |x| in [0.05, xscale]: away from relu's kink, with both signs.
    int64_t n = gk_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
      double v = rng_uniform(0.05, g_xscale);
      tset(t, i, rng_next() & 1 ? v : -v);
    }
  } else tfill(t, -1, 1);
}

static const char *describe(const gk_op_desc *d, layout lay, char *buf, size_t n) {
  char shape[128] = "[";
  for (int i = 0; i < d->rank; i++)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? ",%lld" : "%lld", (long long)d->shape[i]);
  snprintf(buf, n, "%s %s%s %s (params %s) %s%s form=%d dim=%d nr=%d w=%d b=%d %s", gk_op_name(d->op),
           d->direction == GK_FORWARD ? "fwd" : "bwd", d->act.from_output ? " from y" : "", gk_dtype_name(d->dtype),
           gk_dtype_name(expected_arg_dtype(d, GK_ARG_WEIGHT)), shape, "]", d->gated.form,
           d->gated.dim, d->norm.normalized_rank, d->norm.has_weight, d->norm.has_bias, layout_name[lay]);
  return buf;
}

// Saved statistics stay contiguous; the tolerance is the output's dtype's.
static const plan_roles roles = {
    .is_output = is_output, .dtype_of = expected_arg_dtype, .contiguous = is_stat, .fill = fill_input,
    .describe = describe};

// Allocate s's tensors for d: inputs in layout `lay` filled at random (|x|
// up to xscale), or copied from `from` when it has them (forward tensors
// reused by backward); outputs in layout `lay` (left as canaries).
static void build(const gk_op_desc *d, layout lay, double xscale, const argset *from, argset *s) {
  g_xscale = xscale;
  plan_build(&roles, d, lay, from, s);
}

// Parameter gradients with accumulate = 1 add to what the outputs held.
static void check_accumulate(const gk_op_desc *bwd, layout lay, const argset *s, const argset *ref_out) {
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
    for (int k = GK_ARG_DWEIGHT; k <= GK_ARG_DBIAS; k += 2)
      if (o.have[k]) tfill(&o.b[k].t, -2, 2);
    tbuf prior[GK_ARG_COUNT_];
    for (int k = GK_ARG_DWEIGHT; k <= GK_ARG_DBIAS; k += 2)
      if (o.have[k]) {
        prior[k] = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
        tcopy_values(&prior[k].t, &o.b[k].t);
      }
    check(run_desc(&acc, be, &o) == GK_SUCCESS, "%s accumulate %s: %s", name, gk_backend_name(be), gk_last_error());
    for (int k = GK_ARG_DWEIGHT; k <= GK_ARG_DBIAS; k += 2) {
      if (!o.have[k]) continue;
      tbuf want = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
      int64_t n = gk_tensor_numel(&want.t);
      for (int64_t i = 0; i < n; i++) tset(&want.t, i, tget(&prior[k].t, i) + tget(&ref_out->b[k].t, i));
      tol tl = tol_of(bwd->dtype);
      tl.rtol *= 2;  // two roundings: of the overwrite result and of the sum
      tl.atol *= 2;
      double r = tcompare(&o.b[k].t, &want.t, tl, false);
      check(r <= 1.0, "%s accumulate %s: %s off by %.3g tolerances", name, gk_backend_name(be),
            gk_arg_name((gk_arg_kind)k), r);
      tbuf_free(&want);
      tbuf_free(&prior[k]);
    }
    free_outputs(&roles, bwd, &o);
  }
}

// The reference backward from y (bwd, act.from_output; its run in bref on
// the inputs of bin) against the reference backward from x (the forward's
// input, in fin) on the same dy: within the dtype's tolerance (y was rounded
// to the dtype), and for relu the same bits.
static void check_from_output(const gk_op_desc *bwd, layout lay, const argset *fin, const argset *bin,
                              const argset *bref) {
  char name[320];
  describe(bwd, lay, name, sizeof name);
  gk_op_desc from_x = *bwd;
  from_x.act.from_output = 0;
  argset s, out;
  plan_build(&roles, &from_x, lay, bin, &s);  // dy from bin
  tcopy_values(&s.b[GK_ARG_X].t, &fin->b[GK_ARG_X].t);
  clone_outputs(&roles, &from_x, &s, lay, &out);
  check(run_desc(&from_x, GK_BACKEND_REF, &out) == GK_SUCCESS, "%s: ref from x: %s", name, gk_last_error());
  const gk_tensor *got = &bref->b[GK_ARG_DX].t, *want = &out.b[GK_ARG_DX].t;
  double e = tcompare(got, want, tol_of(bwd->dtype), false);
  check(e <= 1.0, "%s: ref dx from y differs from ref dx from x by %.3g tolerances", name, e);
  if (bwd->op == GK_OP_RELU) check(tbits_equal(got, want), "%s: relu dx from y differs from dx from x", name);
  free_outputs(&roles, &from_x, &out);
  argset_free(&s);
}

// Forward and backward of one configuration in one dtype and layout.
static void test_config(const gk_op_desc *cfg, layout lay, double xscale) {
  gk_op_desc fwd, bwd;
  directions(cfg, &fwd, &bwd);
  argset fin, fref, bin, bref;
  build(&fwd, lay, xscale, NULL, &fin);
  compare_backends(&roles, &fwd, lay, &fin, &fref);
  // Backward reuses the forward's inputs and the reference's outputs it saves.
  build(&bwd, lay, xscale, NULL, &bin);
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!bin.have[k] || !is_input(GK_BACKWARD, k) || k == GK_ARG_DY) continue;
    const argset *src = is_saved_output(k) ? &fref : &fin;
    tcopy_values(&bin.b[k].t, &src->b[k].t);
  }
  compare_backends(&roles, &bwd, lay, &bin, &bref);
  if (bwd.act.from_output) check_from_output(&bwd, lay, &fin, &bin, &bref);
  check_accumulate(&bwd, lay, &bin, &bref);
  free_outputs(&roles, &bwd, &bref);
  free_outputs(&roles, &fwd, &fref);
  argset_free(&bin);
  argset_free(&fin);
}

// ---------------------------------------------------------------- finite differences

// L = sum(y * r). For each differentiable input element, the central
// difference of L against the backward's gradient (f64, given backend).
static double fd_check(const gk_op_desc *cfg, gk_backend be) {
  gk_op_desc fwd, bwd;
  directions(cfg, &fwd, &bwd);
  argset f, b;
  build(&fwd, CONTIGUOUS, 2.0, NULL, &f);
  build(&bwd, CONTIGUOUS, 2.0, &f, &b);
  run_desc(&fwd, be, &f);
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (b.have[k] && is_saved_output(k)) tcopy_values(&b.b[k].t, &f.b[k].t);
  if (run_desc(&bwd, be, &b) != GK_SUCCESS) return INFINITY;
  static const int pairs[][2] = {{GK_ARG_X, GK_ARG_DX}, {GK_ARG_GATE, GK_ARG_DGATE},
                                 {GK_ARG_WEIGHT, GK_ARG_DWEIGHT}, {GK_ARG_BIAS, GK_ARG_DBIAS}};
  static const int outs[][2] = {{GK_ARG_Y, GK_ARG_DY}};
  double worst = fd_max_rel_err(&fwd, be, &f, &b, pairs, sizeof pairs / sizeof *pairs, outs, 1);
  argset_free(&b);
  argset_free(&f);
  return worst;
}

// ---------------------------------------------------------------- threads

// The CPU kernel gives the same bits with 1, 2 and 3 threads.
static void test_threads(const gk_op_desc *cfg) {
  gk_op_desc fwd, bwd;
  directions(cfg, &fwd, &bwd);
  const gk_op_desc *ds[2] = {&fwd, &bwd};
  argset f;
  build(&fwd, CONTIGUOUS, 3.0, NULL, &f);
  for (int dir = 0; dir < 2; dir++) {
    const gk_op_desc *d = ds[dir];
    argset in;
    if (dir == 0) in = f;
    else {
      run_desc(&fwd, GK_BACKEND_CPU, &f);
      build(d, CONTIGUOUS, 3.0, &f, &in);  // the forward's outputs it saves (rstd, mean, y) too
    }
    check_thread_identity(&roles, d, &in);
    if (dir == 1) argset_free(&in);
  }
  argset_free(&f);
  gk_set_num_threads(2);
}

// ---------------------------------------------------------------- in place

// y = act(x) into x itself, and dx = dy * act'(x) into dy itself and into
// the saved x (or y, from_output) itself, give the same bits as the
// out-of-place run.
static void test_in_place(gk_op op, gk_dtype dt, int from_output) {
  int64_t shape[2] = {37, 1100};
  gk_op_desc d;
  gk_op_desc_init(&d, op, GK_FORWARD, dt, 2, shape);
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    if (!backend_takes(&d, be)) continue;
    argset s;
    build(&d, CONTIGUOUS, 3.0, NULL, &s);
    run_desc(&d, be, &s);
    argset inplace = s;
    inplace.b[GK_ARG_Y] = inplace.b[GK_ARG_X];
    check(run_desc(&d, be, &inplace) == GK_SUCCESS, "%s in place: %s", gk_op_name(op), gk_last_error());
    check(tbits_equal(&s.b[GK_ARG_X].t, &s.b[GK_ARG_Y].t), "%s %s %s forward in place differs", gk_op_name(op),
          gk_dtype_name(dt), gk_backend_name(be));
    argset_free(&s);

    gk_op_desc b = d;
    b.direction = GK_BACKWARD;
    b.act.from_output = from_output;
    gk_arg_kind saved = from_output ? GK_ARG_Y : GK_ARG_X, into[2] = {GK_ARG_DY, saved};
    for (int w = 0; w < 2; w++) {
      build(&b, CONTIGUOUS, 3.0, NULL, &s);
      run_desc(&b, be, &s);
      inplace = s;
      inplace.b[GK_ARG_DX] = inplace.b[into[w]];
      check(run_desc(&b, be, &inplace) == GK_SUCCESS, "%s backward%s in place of %s: %s", gk_op_name(op),
            from_output ? " from y" : "", gk_arg_name(into[w]), gk_last_error());
      check(tbits_equal(&s.b[into[w]].t, &s.b[GK_ARG_DX].t), "%s %s %s backward%s in place of %s differs",
            gk_op_name(op), gk_dtype_name(dt), gk_backend_name(be), from_output ? " from y" : "",
            gk_arg_name(into[w]));
      argset_free(&s);
    }
  }
}

// ---------------------------------------------------------------- parameter dtype

// desc.param_dtype defaults to GK_DTYPE_SAME: it follows desc.dtype set after
// gk_op_desc_init, and the plan's description gives it resolved.
static void test_param_dtype_default(void) {
  int64_t shape[2] = {3, 8};
  gk_op_desc d, got;
  gk_plan *p = NULL;
  gk_op_desc_init(&d, GK_OP_LAYERNORM, GK_FORWARD, GK_F32, 2, shape);
  check(d.param_dtype == GK_DTYPE_SAME, "param_dtype default %d", d.param_dtype);
  d.dtype = GK_BF16;
  check(gk_plan_create(&d, &p) == GK_SUCCESS && gk_plan_get_desc(p, &got) == GK_SUCCESS &&
            got.param_dtype == GK_BF16,
        "param_dtype follows a later desc.dtype: %s", gk_last_error());
  gk_plan_destroy(p);
  argset s;
  build(&d, CONTIGUOUS, 1.0, NULL, &s);
  check(s.b[GK_ARG_WEIGHT].t.dtype == GK_BF16 && run_desc(&d, GK_BACKEND_AUTO, &s) == GK_SUCCESS,
        "bf16 layernorm with the default param_dtype: %s", gk_last_error());
  argset_free(&s);
  d.param_dtype = GK_F32;
  check(gk_plan_create(&d, &p) == GK_SUCCESS && gk_plan_get_desc(p, &got) == GK_SUCCESS &&
            got.param_dtype == GK_F32,
        "param_dtype f32 kept: %s", gk_last_error());
  gk_plan_destroy(p);
}

// ---------------------------------------------------------------- configurations

typedef struct shape_case { int rank; int64_t shape[4]; } shape_case;

static gk_op_desc make(gk_op op, gk_dtype dt, const shape_case *sc) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, GK_FORWARD, dt, sc->rank, sc->shape);
  return d;
}

static int count_configs;

// A norm's x broadcast along a leading dim (stride 0, as torch's expand
// makes): the CPU kernel reads the rows the reference reads. It once took
// such rows for evenly spaced and read past x (found by tests/fuzz).
static void test_norm_broadcast_rows(void) {
  static const shape_case sc = {3, {5, 6, 2}};
  gk_op_desc d = make(GK_OP_LAYERNORM, GK_F32, &sc);
  argset s, ref_out;
  plan_build(&roles, &d, CONTIGUOUS, NULL, &s);
  s.b[GK_ARG_X].t.strides[1] = 0;
  compare_backends(&roles, &d, CONTIGUOUS, &s, &ref_out);
  free_outputs(&roles, &d, &ref_out);
  argset_free(&s);
}

// dy broadcast from one value (every stride 0: the dy autograd hands the
// backward of y.sum()), over more elements than one task of the threaded
// kernels takes: the CPU kernels read it as the reference does.
static void test_broadcast_scalar_dy(gk_dtype dt) {
  static const shape_case sc = {2, {70, 1030}};
  static const gk_op ops[] = {GK_OP_SILU,    GK_OP_GELU,    GK_OP_SWIGLU, GK_OP_SWIGLU,  GK_OP_RMSNORM,
                              GK_OP_LAYERNORM, GK_OP_SIGMOID, GK_OP_RELU,   GK_OP_SOFTMAX, GK_OP_LOG_SOFTMAX};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    gk_op_desc d = make(ops[i], dt, &sc);
    d.direction = GK_BACKWARD;
    d.act.from_output = ops[i] == GK_OP_SIGMOID || ops[i] == GK_OP_RELU;  // as the binding runs them
    d.gated.dim = 1;
    if (i == 3) d.gated.form = GK_GATED_TWO_TENSOR;
    d.norm.has_weight = 1;
    compare_one_value_dy(&roles, &d);
  }
}

// Softmax and log_softmax backward with dx over 16 MiB (gk_stream_output,
// src/cpu/stream_store.h), written by non-temporal stores in f32 and f64
// rows over 8 KiB (16-bit dx as usual): rows of 2049
// (a partial chunk, rows not 16-byte aligned) against the reference, with a
// dense dy and a dy of one value; the same bits with 1, 2 and 3 threads.
static void test_softmax_streamed_dx(gk_dtype dt) {
  const shape_case sc = {2, {(int64_t)((16 << 20) / (2049 * gk_dtype_size(dt)) + 1), 2049}};
  for (gk_op op = GK_OP_SOFTMAX; op <= GK_OP_LOG_SOFTMAX; op++) {
    gk_op_desc cfg = make(op, dt, &sc), fwd, d;
    directions(&cfg, &fwd, &d);
    argset f, s, ref_out;
    build(&fwd, CONTIGUOUS, 3.0, NULL, &f);
    run_desc(&fwd, GK_BACKEND_CPU, &f);
    build(&d, CONTIGUOUS, 3.0, &f, &s);  // y from the forward
    argset_free(&f);
    compare_backends(&roles, &d, CONTIGUOUS, &s, &ref_out);
    check_thread_identity(&roles, &d, &s);
    free_outputs(&roles, &d, &ref_out);
    argset_free(&s);
    compare_one_value_dy(&roles, &d);
  }
}

// ReLU forward with y of 32 MiB (RELU_STREAM_BYTES, src/cpu/activation.c),
// written by non-temporal stores from a stack chunk: rows of 2049 (a
// partial chunk at the end of the last task) against the reference, the
// same bits with 1, 2 and 3 threads.
static void test_relu_streamed_y(gk_dtype dt) {
  const shape_case sc = {2, {(int64_t)((32 << 20) / (2049 * gk_dtype_size(dt)) + 1), 2049}};
  gk_op_desc d = make(GK_OP_RELU, dt, &sc);
  argset s, ref_out;
  build(&d, CONTIGUOUS, 3.0, NULL, &s);
  compare_backends(&roles, &d, CONTIGUOUS, &s, &ref_out);
  check_thread_identity(&roles, &d, &s);
  free_outputs(&roles, &d, &ref_out);
  argset_free(&s);
}

// Cross-entropy backward on rows of 8192 logits (the longest that the 16-bit
// and strided forms keep as exponentials in a row buffer, src/cpu/cross_entropy.c)
// and of 8200 (exponentials computed again for the gradient): against the
// reference, with label smoothing, the same bits with 1, 2 and 3 threads.
static void test_cross_entropy_rows(gk_dtype dt) {
  static const shape_case shapes[] = {{2, {3, 8192}}, {2, {3, 8200}}};
  for (size_t i = 0; i < 2; i++) {
    gk_op_desc d = make(GK_OP_CROSS_ENTROPY, dt, &shapes[i]);
    d.direction = GK_BACKWARD;
    d.ce.label_smoothing = 0.1;
    for (layout lay = CONTIGUOUS; lay < LAYOUT_COUNT; lay++) {
      argset s, ref_out;
      build(&d, lay, 3.0, NULL, &s);
      compare_backends(&roles, &d, lay, &s, &ref_out);
      if (lay == CONTIGUOUS) check_thread_identity(&roles, &d, &s);
      free_outputs(&roles, &d, &ref_out);
      argset_free(&s);
    }
  }
}

static void run_all_layouts(gk_op_desc d, double xscale) {
  for (layout lay = CONTIGUOUS; lay < LAYOUT_COUNT; lay++) {
    test_config(&d, lay, xscale);
    count_configs++;
  }
}

int main(void) {
  register_test_backends();
  gk_set_num_threads(2);
  static const shape_case act_shapes[] = {{0, {0}}, {1, {1}}, {1, {7}}, {3, {3, 5, 17}}, {4, {2, 1, 4, 9}},
                                          {2, {300, 33}}, {1, {0}}};
  static const shape_case gated_shapes[] = {{3, {4, 6, 8}}, {3, {2, 1, 6}}, {2, {3, 130}}, {1, {2}}};
  // (5, 4100): long rows, forward in blocks of rows (src/cpu/norm.c), a whole block and a part
  static const shape_case norm_shapes[] = {{2, {5, 7}}, {3, {3, 4, 33}}, {2, {2, 1030}}, {2, {130, 16}}, {2, {3, 8300}},
                                           {1, {9}}, {3, {1, 1, 5}}, {2, {5, 4100}}};
  double worst_fd = 0;
  for (size_t t = 0; t < 4; t++) {
    gk_dtype dt = dtypes[t];
    // Elementwise activations, also at large |x| where a naive exp overflows;
    // variant 1: gelu's tanh form, softplus's beta and threshold, relu's and
    // sigmoid's backward from y.
    for (gk_op op = GK_OP_RELU; op <= GK_OP_SOFTPLUS; op++)
      for (int variant = 0; variant < 2; variant++) {
        if (variant && op == GK_OP_SILU) continue;
        for (size_t s = 0; s < sizeof act_shapes / sizeof *act_shapes; s++) {
          gk_op_desc d = make(op, dt, &act_shapes[s]);
          d.act.approximate = variant ? GK_GELU_TANH : GK_GELU_ERF;
          d.act.from_output = variant && (op == GK_OP_RELU || op == GK_OP_SIGMOID);
          if (variant && op == GK_OP_SOFTPLUS) {
            d.act.beta = 2;
            d.act.threshold = 3;
          }
          run_all_layouts(d, 3.0);
          if (s == 5) run_all_layouts(d, dt == GK_F16 ? 6e4 : 1e4);
        }
      }
    // Gated activations, split along every dim and in the two-tensor form.
    for (gk_op op = GK_OP_GLU; op <= GK_OP_GEGLU; op++)
      for (int variant = 0; variant < (op == GK_OP_GEGLU ? 2 : 1); variant++)
        for (size_t s = 0; s < sizeof gated_shapes / sizeof *gated_shapes; s++) {
          const shape_case *sc = &gated_shapes[s];
          for (int dim = -1; dim < sc->rank; dim++) {
            gk_op_desc d = make(op, dt, sc);
            d.act.approximate = variant ? GK_GELU_TANH : GK_GELU_ERF;
            if (dim < 0) d.gated.form = GK_GATED_TWO_TENSOR;
            else d.gated.dim = dim;
            if (d.gated.form == GK_GATED_SPLIT && sc->shape[dim] % 2) continue;
            run_all_layouts(d, 3.0);
          }
        }
    // Norms with and without weight and bias, over 1 and 2 trailing dims.
    for (gk_op op = GK_OP_RMSNORM; op <= GK_OP_LAYERNORM; op++)
      for (size_t s = 0; s < sizeof norm_shapes / sizeof *norm_shapes; s++)
        for (int nr = 1; nr <= 2 && nr <= norm_shapes[s].rank; nr++)
          for (int wb = 0; wb < (op == GK_OP_LAYERNORM ? 4 : 2); wb++) {
            gk_op_desc d = make(op, dt, &norm_shapes[s]);
            d.norm.normalized_rank = nr;
            d.norm.has_weight = wb & 1;
            d.norm.has_bias = op == GK_OP_LAYERNORM && (wb & 2);
            run_all_layouts(d, 3.0);
          }
    if (dt != GK_F64) test_in_place(GK_OP_SILU, dt, 0);
    test_in_place(GK_OP_SIGMOID, dt, 1);
    test_in_place(GK_OP_RELU, dt, 1);
    test_broadcast_scalar_dy(dt);
    test_softmax_streamed_dx(dt);
    test_relu_streamed_y(dt);
  }
  test_in_place(GK_OP_GELU, GK_F64, 0);
  test_norm_broadcast_rows();
  test_param_dtype_default();
  // Norms with an f32 weight and bias on f16/bf16 x (autocast), rows taken
  // whole and in pieces; accumulation into the f32 gradients.
  for (gk_dtype dt = GK_F16; dt <= GK_BF16; dt++)
    for (gk_op op = GK_OP_RMSNORM; op <= GK_OP_LAYERNORM; op++)
      for (size_t s = 0; s < sizeof norm_shapes / sizeof *norm_shapes; s++)
        for (int wb = 1; wb < (op == GK_OP_LAYERNORM ? 4 : 2); wb++) {
          gk_op_desc d = make(op, dt, &norm_shapes[s]);
          d.norm.normalized_rank = s == 1 ? 2 : 1;
          d.norm.has_weight = wb & 1;
          d.norm.has_bias = op == GK_OP_LAYERNORM && (wb & 2);
          d.param_dtype = GK_F32;
          run_all_layouts(d, 3.0);
        }

  // Finite differences: every backward, every backend under test, f64.
  static const shape_case fd_act = {2, {3, 4}}, fd_gated = {2, {4, 6}}, fd_norm = {3, {2, 3, 5}};
  int fd_cases = 0;
  for (int ib = 0; ib < backends_under_test(); ib++) {
    gk_backend be = backend_under_test(ib);
    for (gk_op op = GK_OP_RELU; op <= GK_OP_LAYERNORM; op++)
      for (int variant = 0; variant < 4; variant++) {
        const shape_case *sc = op <= GK_OP_SOFTPLUS ? &fd_act : op <= GK_OP_GEGLU ? &fd_gated : &fd_norm;
        gk_op_desc d = make(op, GK_F64, sc);
        bool gelu_like = op == GK_OP_GELU || op == GK_OP_GEGLU, from_y = op == GK_OP_RELU || op == GK_OP_SIGMOID;
        if (variant == 1 && !gelu_like && op != GK_OP_SOFTPLUS && !from_y && op < GK_OP_GLU) continue;
        if (variant == 1 && gelu_like) d.act.approximate = GK_GELU_TANH;
        if (variant == 1 && from_y) d.act.from_output = 1;
        if (variant == 1 && op == GK_OP_SOFTPLUS) {
          d.act.beta = 0.5;
          d.act.threshold = 0.7;
        }
        if (variant == 1 && op >= GK_OP_GLU && op <= GK_OP_GEGLU) d.gated.dim = 0;
        if (variant == 2 && !(op >= GK_OP_GLU && op <= GK_OP_GEGLU) && op < GK_OP_RMSNORM) continue;
        if (variant == 2 && op >= GK_OP_GLU && op <= GK_OP_GEGLU) d.gated.form = GK_GATED_TWO_TENSOR;
        if (variant == 2 && op >= GK_OP_RMSNORM) d.norm.normalized_rank = 2;
        if (variant == 3 && op < GK_OP_RMSNORM) continue;
        if (variant == 3) d.norm.has_weight = 0;
        gk_op_desc fwd, bwd;
        directions(&d, &fwd, &bwd);
        if (!backend_takes(&bwd, be)) continue;
        double e = fd_check(&d, be);
        fd_cases++;
        if (e > worst_fd) worst_fd = e;
        check(e <= FD_MAX_REL_ERR, "finite differences %s variant %d (%s): max rel err %.3g", gk_op_name(op),
              variant, gk_backend_name(be), e);
      }
  }

  // Thread-count bit-identity on shapes that make several tasks.
  static const shape_case big_act = {2, {3, 50000}}, big_gated = {2, {300, 512}}, big_norm = {2, {2000, 40}};
  for (size_t t = 0; t < 4; t++) {
    for (gk_op op = GK_OP_RELU; op <= GK_OP_LAYERNORM; op++) {
      const shape_case *sc = op <= GK_OP_SOFTPLUS ? &big_act : op <= GK_OP_GEGLU ? &big_gated : &big_norm;
      gk_op_desc d = make(op, dtypes[t], sc);
      test_threads(&d);
      d.act.from_output = 1;
      if (op == GK_OP_RELU || op == GK_OP_SIGMOID) test_threads(&d);
    }
  }

  for (size_t t = 0; t < 4; t++) test_cross_entropy_rows(dtypes[t]);

  printf("configurations: %d (x fwd/bwd x backends); finite-difference cases: %d, worst rel err %.3g; "
         "runs a backend declined (f64): %d\n", count_configs, fd_cases, worst_fd, declined_runs);
  printf("largest relative error, cpu vs ref: f32 %.3g, f64 %.3g, f16 %.3g, bf16 %.3g\n", worst_rel[GK_F32],
         worst_rel[GK_F64], worst_rel[GK_F16], worst_rel[GK_BF16]);
  return finish("test_ops");
}
