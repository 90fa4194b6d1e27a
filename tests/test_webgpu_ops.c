// Every op x direction of the WebGPU backend in f32 against the reference
// backend, through the plan harness (plan_harness.h): odd sizes, sizes
// past one 64-wide workgroup and past one dispatch's 65535 workgroups, every layout the harness makes (contiguous,
// transposed, strided) for the tensors the ops take as views, accumulation
// of parameter gradients, bit-identical repeated runs, and no byte written
// outside an output's elements; bad input on the GPU path (wrong device,
// a tensor past its buffer, an index out of range, an unsupported dtype:
// a status and message, nothing written); the optional features: the row
// reductions in subgroups and plain on an adapter with subgroups, and the
// per-dispatch GPU times (timestamp-query) or their refusal. The same in f16
// and bf16 (each op's first configurations, contiguous: read and written in
// place where the family packs them; strided: staged), with f32 parameters
// for the norms, linear and the scan, and 16-bit tensors at 2-byte places
// (a start in the middle of a word, the other half of its edge words
// untouched); their rounding to nearest even gives ref's bits. Built for WebAssembly (make wasm) and run
// in Node by tests/wasm/webgpu_ops.mjs, which hands it a WebGPU device;
// without one the test fails with the reason.
//
// Usage: test_webgpu_ops [--quick] [families...]   (default: every family;
// --quick: the first configuration of each op, contiguous only, for
// slow adapters such as Chromium's SwiftShader)
#include "arg_dtypes.h"
#include "plan_harness.h"
#include "../src/webgpu/webgpu.h"

typedef struct shape_case {
  int rank;
  int64_t shape[GK_MAX_RANK];
} shape_case;

static bool is_index_kind(int k) { return k == GK_ARG_TARGET || k == GK_ARG_INDEX; }
static bool is_stat_kind(int k) {
  return k == GK_ARG_RSTD || k == GK_ARG_MEAN || k == GK_ARG_LOSS || k == GK_ARG_DLOSS || k == GK_ARG_LSE ||
         k == GK_ARG_CHUNK_STATES;
}

static bool is_output(const gk_op_desc *d, int k) {
  if (d->direction == GK_FORWARD)
    return k == GK_ARG_Y || k == GK_ARG_MEAN || k == GK_ARG_RSTD || k == GK_ARG_LOSS || k == GK_ARG_DLOGITS ||
           k == GK_ARG_LSE || k == GK_ARG_FINAL_STATE || k == GK_ARG_CHUNK_STATES;
  switch (k) {
  case GK_ARG_DX: case GK_ARG_DGATE: case GK_ARG_DWEIGHT: case GK_ARG_DBIAS: case GK_ARG_DA: case GK_ARG_DB:
  case GK_ARG_DLOGITS: case GK_ARG_DQ: case GK_ARG_DK: case GK_ARG_DV: case GK_ARG_DINITIAL_STATE:
  case GK_ARG_DU: case GK_ARG_DDELTA: case GK_ARG_DC: case GK_ARG_DD: case GK_ARG_DZ: case GK_ARG_DDELTA_BIAS:
    return true;
  default: return false;
  }
}

// Parameter gradients: overwritten, or added to with desc.accumulate.
static bool is_param_grad(const gk_op_desc *d, int k) {
  if (d->direction != GK_BACKWARD) return false;
  bool scan = d->op == GK_OP_SELECTIVE_SCAN;
  if (k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS) return d->op != GK_OP_ADD && d->op != GK_OP_MUL;
  if (scan && (k == GK_ARG_DA || k == GK_ARG_DD || k == GK_ARG_DDELTA_BIAS)) return true;
  if (scan && k == GK_ARG_DB) return d->scan.b_layout == GK_SCAN_SHARED;
  if (scan && k == GK_ARG_DC) return d->scan.c_layout == GK_SCAN_SHARED;
  return false;
}

static double g_ignore_frac;  // share of cross-entropy targets set to ignore_index

static void fill_input(const gk_op_desc *d, const gk_tensor *t, int k) {
  int64_t n = gk_tensor_numel(t);
  if (k == GK_ARG_TARGET) {
    int64_t V = d->shape[d->rank - 1];
    for (int64_t i = 0; i < n; i++)
      tset(t, i, rng_uniform(0, 1) < g_ignore_frac ? (double)d->ce.ignore_index : (double)(rng_next() % (uint64_t)V));
  } else if (k == GK_ARG_INDEX) {
    for (int64_t i = 0; i < n; i++) tset(t, i, (double)(rng_next() % (uint64_t)d->embedding.num_embeddings));
  } else if (d->op == GK_OP_SELECTIVE_SCAN && k == GK_ARG_A) tfill(t, -1.5, -0.2);
  else if (d->op == GK_OP_SELECTIVE_SCAN && k == GK_ARG_DELTA)
    tfill(t, d->scan.delta_softplus ? -2 : 0.05, d->scan.delta_softplus ? 1 : 0.6);
  else if (d->op == GK_OP_SELECTIVE_SCAN && k == GK_ARG_DELTA_BIAS) tfill(t, 0, 0.3);
  else if ((d->op == GK_OP_RMSNORM || d->op == GK_OP_LAYERNORM) && k == GK_ARG_WEIGHT) tfill(t, 0.5, 1.5);
  else if (k == GK_ARG_X || k == GK_ARG_GATE) {
    // |x| in [0.05, 3]: away from relu's kink, both signs.
    for (int64_t i = 0; i < n; i++) {
      double v = rng_uniform(0.05, 3);
      tset(t, i, rng_next() & 1 ? v : -v);
    }
  } else tfill(t, -1, 1);
}

static const char *g_variant = "";
static const char *describe(const gk_op_desc *d, layout lay, char *buf, size_t n) {
  char shape[128] = "";
  for (int i = 0; i < d->rank; i++)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), i ? ",%lld" : "%lld", (long long)d->shape[i]);
  snprintf(buf, n, "%s %s %s%s [%s] %s %s", gk_op_name(d->op), d->direction == GK_FORWARD ? "fwd" : "bwd",
           gk_dtype_name(d->dtype), d->param_dtype == GK_F32 && d->dtype != GK_F32 ? " (f32 params)" : "", shape,
           g_variant, layout_name[lay]);
  return buf;
}

// The output dtype's tolerance, the f32 one widened as the CPU op tests
// widen it: sums of many products (linear, matmul), the scan's parameter
// gradients (sums over batch, steps and states); and the norms' dweight and
// dbias, sums over every row in f32: their rounding error grows with the
// rows (about rows x 2^-24 for these terms of about 1, random-walk, so
// rows x 2^-22 leaves a margin), which past one dispatch (66001 rows) is
// more than the elementwise tolerance.
static tol tol_for(const gk_op_desc *d, int k, gk_dtype dt) {
  tol t = tol_of(dt);
  if ((d->op == GK_OP_LINEAR || d->op == GK_OP_MATMUL) && t.atol < 1e-4) t.atol = 1e-4;
  if ((d->op == GK_OP_RMSNORM || d->op == GK_OP_LAYERNORM) && (k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS)) {
    int64_t rows = 1;
    for (int i = 0; i < d->rank - d->norm.normalized_rank; i++) rows *= d->shape[i];
    t.atol += (double)rows * 0x1p-22;
  }
  if (d->op == GK_OP_SELECTIVE_SCAN && is_param_grad(d, k)) {
    t.rtol *= 4;
    t.atol *= 4;
  }
  return t;
}

static bool is_plain(int k) { return is_stat_kind(k) || is_index_kind(k); }

static const plan_roles roles = {.is_output = is_output, .dtype_of = expected_arg_dtype, .contiguous = is_plain,
                                 .fill = fill_input, .tol_for = tol_for, .describe = describe};

// ---------------------------------------------------------------- checks

// Parameter gradients with accumulate = 1 on the WebGPU backend add to
// what the outputs held.
static void check_accumulate(const gk_op_desc *bwd, layout lay, const argset *s, const argset *ref_out) {
  bool any = false;
  for (int k = 0; k < GK_ARG_COUNT_; k++) any |= s->have[k] && is_param_grad(bwd, k);
  if (!any) return;
  char name[320];
  describe(bwd, lay, name, sizeof name);
  gk_op_desc acc = *bwd;
  acc.accumulate = 1;
  argset o;
  clone_outputs(&roles, bwd, s, lay, &o);
  tbuf prior[GK_ARG_COUNT_];
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (o.have[k] && is_param_grad(bwd, k)) {
      tfill(&o.b[k].t, -2, 2);
      prior[k] = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
      tcopy_values(&prior[k].t, &o.b[k].t);
    }
  check(run_desc(&acc, GK_BACKEND_WEBGPU, &o) == GK_SUCCESS, "%s accumulate: %s", name, gk_last_error());
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!o.have[k] || !is_param_grad(bwd, k)) continue;
    tbuf want = tbuf_make(GK_F64, o.b[k].t.rank, o.b[k].t.shape, CONTIGUOUS);
    int64_t n = gk_tensor_numel(&want.t);
    for (int64_t i = 0; i < n; i++) tset(&want.t, i, tget(&prior[k].t, i) + tget(&ref_out->b[k].t, i));
    tol tl = tol_for(bwd, k, o.b[k].t.dtype);
    tl.rtol *= 2;  // two roundings in 16 bits: of the reference's gradient and of the sum
    tl.atol *= 2;
    double r = tcompare(&o.b[k].t, &want.t, tl, false);
    char note[400] = "";
    tbuf again;
    size_t differing;
    if (r > 1.0 && device_reread(&o, k, &again, &differing)) {
      reread_note(note, sizeof note, differing, tcompare(&again.t, &want.t, tl, false) <= 1.0);
      tbuf_free(&again);
    }
    check(r <= 1.0, "%s accumulate: %s off by %.3g tolerances%s", name, gk_arg_name((gk_arg_kind)k), r, note);
    tbuf_free(&want);
    tbuf_free(&prior[k]);
  }
  free_outputs(&roles, bwd, &o);
}

// Two runs on the WebGPU backend give the same bits in every output.
static void check_repeatable(const gk_op_desc *d, const argset *in) {
  char name[320];
  describe(d, CONTIGUOUS, name, sizeof name);
  argset runs[2];
  for (int i = 0; i < 2; i++) {
    clone_outputs(&roles, d, in, CONTIGUOUS, &runs[i]);
    check(run_desc(d, GK_BACKEND_WEBGPU, &runs[i]) == GK_SUCCESS, "%s: %s", name, gk_last_error());
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!in->have[k] || !is_output(d, k)) continue;
    bool same = tbits_equal(&runs[0].b[k].t, &runs[1].b[k].t);
    // (the second run's output read again: passes if it then equals the first run's)
    char note[400] = "";
    tbuf again;
    size_t differing;
    if (!same && device_reread(&runs[1], k, &again, &differing)) {
      reread_note(note, sizeof note, differing, tbits_equal(&runs[0].b[k].t, &again.t));
      tbuf_free(&again);
    }
    check(same, "%s: output %s differs between two runs%s", name, gk_arg_name((gk_arg_kind)k), note);
  }
  for (int i = 0; i < 2; i++) free_outputs(&roles, d, &runs[i]);
}

static int configs, ops_seen[GK_OP_COUNT_];

// Forward then backward of one configuration in one layout: each against
// ref (and cpu), backward on the forward's inputs and ref's saved outputs
// (y too, for relu and sigmoid from the output: act.from_output, an option
// of the backward only, cleared in the forward).
static void test_config(const gk_op_desc *cfg, layout lay) {
  gk_op_desc fwd_desc = *cfg, bwd = *cfg;
  fwd_desc.act.from_output = 0;
  bwd.direction = GK_BACKWARD;
  const gk_op_desc *fwd = &fwd_desc;
  argset fin, fref, bin, bref;
  if (!plan_build(&roles, fwd, lay, NULL, &fin)) {
    char name[320];
    check(false, "%s: plan: %s", describe(fwd, lay, name, sizeof name), gk_last_error());
    return;
  }
  compare_backends(&roles, fwd, lay, &fin, &fref);
  plan_build(&roles, &bwd, lay, NULL, &bin);
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!bin.have[k] || is_output(&bwd, k) || k == GK_ARG_DY || k == GK_ARG_DLOSS || k == GK_ARG_DFINAL_STATE)
      continue;
    const argset *src = fin.have[k] && !is_output(fwd, k) ? &fin : &fref;
    if (src->have[k]) tcopy_values(&bin.b[k].t, &src->b[k].t);
  }
  compare_backends(&roles, &bwd, lay, &bin, &bref);
  check_accumulate(&bwd, lay, &bin, &bref);
  if (lay == CONTIGUOUS) {
    check_repeatable(fwd, &fin);
    check_repeatable(&bwd, &bin);
  }
  free_outputs(&roles, &bwd, &bref);
  free_outputs(&roles, fwd, &fref);
  argset_free(&bin);
  argset_free(&fin);
  configs++;
  ops_seen[fwd->op]++;
}

static bool g_quick;
// The op tests' dtype, and their parameters' (param_dtype: GK_DTYPE_SAME,
// or f32 with f16/bf16 tensors); in f16 and bf16 each op runs its first
// HALF_CONFIGS configurations (odd sizes, past one workgroup), contiguous
// (f16/bf16 tensors read and written in place where the family packs them)
// and strided (staged through the arena); with --quick the first,
// contiguous.
static gk_dtype g_dtype = GK_F32;
static int g_param_dtype = GK_DTYPE_SAME;
enum { HALF_CONFIGS = 3 };
static int half_seen[GK_OP_COUNT_];

static void run_layouts(const gk_op_desc *d, const char *variant) {
  g_variant = variant;
  if (d->dtype != GK_F32) {
    if (half_seen[d->op]++ >= (g_quick ? 1 : HALF_CONFIGS)) return;
    test_config(d, CONTIGUOUS);
    if (!g_quick) test_config(d, STRIDED);
    return;
  }
  if (g_quick && ops_seen[d->op] >= 1) return;
  for (int lay = 0; lay < (g_quick ? 1 : LAYOUT_COUNT); lay++) test_config(d, (layout)lay);
}

static gk_op_desc make(gk_op op, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, GK_FORWARD, g_dtype, rank, shape);
  if (op == GK_OP_RMSNORM || op == GK_OP_LAYERNORM || op == GK_OP_LINEAR || op == GK_OP_SELECTIVE_SCAN)
    d.param_dtype = g_param_dtype;
  return d;
}
#define MAKE(op, ...) make(op, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

// ---------------------------------------------------------------- the ops

static void test_activations(void) {
  static const shape_case shapes[] = {{1, {7}}, {3, {3, 5, 17}}, {2, {300, 33}}, {1, {0}}};
  for (gk_op op = GK_OP_RELU; op <= GK_OP_SOFTPLUS; op++)
    for (int variant = 0; variant < 2; variant++) {
      if (variant && op == GK_OP_SILU) continue;
      bool from_y = variant && (op == GK_OP_RELU || op == GK_OP_SIGMOID);
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        gk_op_desc d = make(op, shapes[s].rank, shapes[s].shape);
        d.act.approximate = variant ? GK_GELU_TANH : GK_GELU_ERF;
        d.act.from_output = from_y;  // the backward from y
        if (variant && op == GK_OP_SOFTPLUS) {
          d.act.beta = 2;
          d.act.threshold = 3;
        }
        run_layouts(&d, from_y ? "from y" : variant ? "variant" : "");
      }
    }
}

static void test_gated(void) {
  static const shape_case shapes[] = {{3, {4, 6, 8}}, {2, {3, 130}}};
  for (gk_op op = GK_OP_GLU; op <= GK_OP_GEGLU; op++)
    for (int variant = 0; variant < (op == GK_OP_GEGLU ? 2 : 1); variant++)
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int dim = -1; dim < shapes[s].rank; dim++) {
          gk_op_desc d = make(op, shapes[s].rank, shapes[s].shape);
          d.act.approximate = variant ? GK_GELU_TANH : GK_GELU_ERF;
          if (dim < 0) d.gated.form = GK_GATED_TWO_TENSOR;
          else d.gated.dim = dim;
          if (dim >= 0 && shapes[s].shape[dim] % 2) continue;
          run_layouts(&d, dim < 0 ? "two-tensor" : "split");
        }
}

static void test_norms(void) {
  static const shape_case shapes[] = {{2, {5, 7}}, {3, {3, 4, 33}}, {2, {2, 1030}}, {2, {130, 16}}};
  for (gk_op op = GK_OP_RMSNORM; op <= GK_OP_LAYERNORM; op++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int nr = 1; nr <= 2; nr++)
        for (int wb = 0; wb < (op == GK_OP_LAYERNORM ? 4 : 2); wb++) {
          gk_op_desc d = make(op, shapes[s].rank, shapes[s].shape);
          d.norm.normalized_rank = nr;
          d.norm.has_weight = wb & 1;
          d.norm.has_bias = op == GK_OP_LAYERNORM && (wb & 2);
          run_layouts(&d, "");
        }
}

static void test_linear_matmul(void) {
  // (K and N multiples of 4: the products by vec4s, product_vec4, where strides allow)
  struct { int rank; int64_t shape[3], n; } lin[] = {{2, {5, 7}, 9}, {3, {3, 4, 33}, 17}, {2, {70, 40}, 65},
                                                     {2, {37, 20}, 44}};
  for (size_t s = 0; s < sizeof lin / sizeof *lin; s++)
    for (int bias = 0; bias < 2; bias++) {
      gk_op_desc d = make(GK_OP_LINEAR, lin[s].rank, lin[s].shape);
      d.linear.out_features = lin[s].n;
      d.linear.has_bias = bias;
      run_layouts(&d, bias ? "bias" : "no bias");
    }
  struct { int rank; int64_t shape[3], n; } mm[] = {{3, {2, 5, 7}, 9}, {2, {33, 20}, 18}, {3, {2, 40, 70}, 19},
                                                    {3, {2, 37, 20}, 12}};
  for (size_t s = 0; s < sizeof mm / sizeof *mm; s++)
    for (int v = 0; v < 8; v++) {
      if ((v & 4) && mm[s].rank < 3) continue;
      gk_op_desc d = make(GK_OP_MATMUL, mm[s].rank, mm[s].shape);
      d.matmul.n = mm[s].n;
      d.matmul.trans_a = v & 1;
      d.matmul.trans_b = (v >> 1) & 1;
      d.matmul.shared_b = (v >> 2) & 1;
      run_layouts(&d, (const char *[]){"", "ta", "tb", "ta tb", "shared", "ta shared", "tb shared", "ta tb shared"}[v]);
    }
}

static void test_softmax(void) {
  struct { int rank; int64_t shape[3]; int dim; } cases[] = {{2, {5, 7}, -1}, {3, {3, 4, 33}, 1}, {2, {2, 300}, -1},
                                                            {3, {3, 70, 2}, 1}};
  for (gk_op op = GK_OP_SOFTMAX; op <= GK_OP_LOG_SOFTMAX; op++)
    for (size_t s = 0; s < sizeof cases / sizeof *cases; s++) {
      gk_op_desc d = make(op, cases[s].rank, cases[s].shape);
      d.softmax.dim = cases[s].dim;
      run_layouts(&d, "");
    }
}

static void test_cross_entropy(void) {
  static const shape_case shapes[] = {{2, {6, 11}}, {3, {3, 4, 70}}, {1, {5}}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int v = 0; v < 6; v++) {
      gk_op_desc d = make(GK_OP_CROSS_ENTROPY, shapes[s].rank, shapes[s].shape);
      d.ce.reduction = v & 1 ? GK_REDUCTION_SUM : GK_REDUCTION_MEAN;
      d.ce.label_smoothing = v >= 2 ? 0.1 : 0;
      d.ce.fused_grad = v >= 4;
      d.ce.grad_scale = 0.75;
      d.index_dtype = v % 3 ? GK_I64 : GK_I32;
      g_ignore_frac = v >= 2 ? 0.3 : 0;
      run_layouts(&d, (const char *[]){"mean", "sum", "mean smooth", "sum smooth", "mean fused", "sum fused"}[v]);
    }
  g_ignore_frac = 0;
}

static void test_embedding(void) {
  struct { int rank; int64_t shape[2], V, D, pad; } cases[] = {{1, {5}, 11, 9, -1}, {2, {3, 7}, 6, 9, 2},
                                                              {2, {4, 40}, 70, 65, 0}};
  for (size_t s = 0; s < sizeof cases / sizeof *cases; s++)
    for (int i64 = 0; i64 < 2; i64++) {
      gk_op_desc d = make(GK_OP_EMBEDDING, cases[s].rank, cases[s].shape);
      d.embedding.num_embeddings = cases[s].V;
      d.embedding.dim = cases[s].D;
      d.embedding.padding_idx = cases[s].pad;
      d.index_dtype = i64 ? GK_I64 : GK_I32;
      run_layouts(&d, i64 ? "i64" : "i32");
    }
}

static void test_rope(void) {
  static const shape_case shapes[] = {{4, {2, 5, 3, 8}}, {4, {1, 70, 2, 6}}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int v = 0; v < 4; v++) {
      gk_op_desc d = make(GK_OP_ROPE, 4, shapes[s].shape);
      d.rope.layout = v & 1 ? GK_ROPE_BHTD : GK_ROPE_BTHD;
      d.rope.pairing = v & 2 ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
      d.rope.offset = v * 1000;
      d.rope.theta = v == 3 ? 500 : 10000;
      run_layouts(&d, (const char *[]){"bthd half", "bhtd half", "bthd interleaved", "bhtd interleaved"}[v]);
    }
}

static void test_attention(void) {
  struct { int64_t shape[4], kv; } cases[] = {{{2, 4, 9, 8}, 2}, {{1, 2, 70, 16}, 1}, {{1, 3, 5, 4}, 3}};
  for (size_t s = 0; s < sizeof cases / sizeof *cases; s++)
    for (int causal = 0; causal < 2; causal++) {
      gk_op_desc d = make(GK_OP_ATTENTION, 4, cases[s].shape);
      d.attn.kv_heads = cases[s].kv;
      d.attn.causal = causal;
      if (s == 2) d.attn.scale = 0.3;
      run_layouts(&d, causal ? "causal" : "full");
    }
}

static void test_binary(void) {
  struct { int rank; int64_t shape[3]; int b_rank; int64_t b_shape[3]; } cases[] = {
      {2, {5, 7}, 2, {5, 7}}, {1, {130}, 1, {130}}, {2, {5, 7}, 2, {1, 7}}, {2, {5, 7}, 2, {5, 1}},
      {3, {3, 4, 33}, 1, {33}}, {2, {5, 1}, 3, {2, 1, 9}}, {2, {70, 3}, 0, {0}}};
  for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++)
    for (size_t s = 0; s < sizeof cases / sizeof *cases; s++) {
      gk_op_desc d = make(op, cases[s].rank, cases[s].shape);
      d.binary.b_rank = cases[s].b_rank;
      memcpy(d.binary.b_shape, cases[s].b_shape, sizeof cases[s].b_shape);
      d.binary.alpha = s % 2 ? 0.5 : 1;
      run_layouts(&d, "");
    }
}

static void test_conv1d(void) {
  static const shape_case shapes[] = {{3, {2, 5, 9}}, {3, {1, 3, 70}}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int v = 0; v < 6; v++) {
      gk_op_desc d = make(GK_OP_CONV1D, 3, shapes[s].shape);
      d.conv.width = v == 5 ? 1 : s ? 3 : 4;
      d.conv.channel_last = v & 1;
      d.conv.has_bias = v != 2;
      d.conv.silu = v >= 2;
      d.conv.has_initial_state = v >= 3 && v != 5;
      d.conv.has_final_state = v >= 3 && v != 5;
      if (d.conv.channel_last) {
        int64_t L = d.shape[2];
        d.shape[2] = d.shape[1];
        d.shape[1] = L;
      }
      run_layouts(&d, (const char *[]){"", "channel-last", "silu no bias", "silu states cl", "silu states",
                                       "width 1 cl"}[v]);
    }
}

// Every option of the scan in five variants: D, z, delta_bias, softplus, the
// B/C layouts (shared, per batch, grouped), initial and final states.
static const char *const scan_variant_name[] = {"batch/shared", "shared/grouped", "grouped/batch z",
                                                "batch/shared softplus", "shared/batch states"};
static gk_op_desc scan_desc(const int64_t *shape, int64_t N, int64_t chunk_size, int v) {
  gk_op_desc d = make(GK_OP_SELECTIVE_SCAN, 3, shape);
  d.scan.d_state = N;
  d.scan.chunk_size = chunk_size;
  gk_scan_layout lay[] = {GK_SCAN_BATCH, GK_SCAN_SHARED, GK_SCAN_GROUPED, GK_SCAN_BATCH, GK_SCAN_SHARED};
  d.scan.b_layout = lay[v];
  d.scan.c_layout = lay[(v + 1) % 5];
  if (d.scan.b_layout == GK_SCAN_GROUPED || d.scan.c_layout == GK_SCAN_GROUPED)
    d.scan.groups = (d.scan.b_layout == GK_SCAN_BATCH || d.scan.c_layout == GK_SCAN_BATCH) ? 1 : 2;
  d.scan.has_D = v != 1;
  d.scan.has_z = v >= 2;
  d.scan.has_delta_bias = v == 3 || v == 4;
  d.scan.delta_softplus = v >= 3;
  d.scan.has_initial_state = v == 4;
  d.scan.has_final_state = v == 4;
  return d;
}
// The variants in the bit mask `variants`.
enum { SCAN_ALL = 31, SCAN_Z_STATES = 4 | 16 };  // variants 2 (grouped/batch z), 4 (states)
static void scan_variants(const int64_t *shape, int64_t N, int64_t chunk_size, bool all_layouts, int variants) {
  for (int v = 0; v < 5; v++) {
    if (!(variants >> v & 1)) continue;
    gk_op_desc d = scan_desc(shape, N, chunk_size, v);
    if (all_layouts) run_layouts(&d, scan_variant_name[v]);
    else {
      g_variant = scan_variant_name[v];
      test_config(&d, CONTIGUOUS);
    }
  }
}

typedef struct scan_case {
  int64_t shape[3], N, T;  // (B, D, L), d_state, chunk_size
  bool all_layouts;
  int variants;
} scan_case;

static void test_scan(void) {
  if (g_quick) {  // one configuration of each kernel, with every option of variant 4
    for (int path = 1; path <= 2; path++) {
      gk_webgpu_test_scan_path(path);
      gk_op_desc d = scan_desc((const int64_t[]){2, 4, 45}, 16, 16, 4);
      g_variant = scan_variant_name[4];
      test_config(&d, CONTIGUOUS);
    }
    gk_webgpu_test_scan_path(0);
    return;
  }
  static const scan_case sequential[] = {
      {{2, 4, 9}, 4, 4, true, SCAN_ALL}, {{1, 2, 70}, 16, 64, false, SCAN_ALL}},
      parallel[] = {{{1, 2, 1}, 16, 64, false, SCAN_Z_STATES},  {{2, 4, 17}, 16, 4, true, SCAN_ALL},
                    {{1, 2, 32}, 16, 64, false, SCAN_Z_STATES}, {{1, 2, 45}, 16, 16, false, SCAN_Z_STATES},
                    {{1, 2, 173}, 16, 7, false, SCAN_ALL},      {{2, 2, 300}, 4, 100, false, SCAN_Z_STATES},
                    {{1, 2, 70}, 5, 64, false, SCAN_Z_STATES},  {{1, 2, 21}, 64, 5, false, SCAN_Z_STATES}},
      blocks[] = {{{1, 2, 1}, 16, 64, false, SCAN_Z_STATES},    {{1, 2, 173}, 16, 7, false, SCAN_ALL},
                  {{1, 2, 100}, 64, 5, false, SCAN_Z_STATES},   {{1, 2, 1100}, 16, 64, false, SCAN_Z_STATES},
                  {{1, 2, 300}, 4, 100, false, SCAN_Z_STATES}},
      by_shape[] = {{{2, 4, 9}, 16, 64, false, 16}, {{1, 2, 2100}, 16, 64, false, SCAN_Z_STATES}};
  const struct { int path; size_t n; const scan_case *cases; } runs[] = {
      {1, sizeof sequential / sizeof *sequential, sequential}, {2, sizeof parallel / sizeof *parallel, parallel},
      {3, sizeof blocks / sizeof *blocks, blocks}, {0, sizeof by_shape / sizeof *by_shape, by_shape}};
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    gk_webgpu_test_scan_path(runs[i].path);
    for (size_t s = 0; s < runs[i].n; s++)
      scan_variants(runs[i].cases[s].shape, runs[i].cases[s].N, runs[i].cases[s].T, runs[i].cases[s].all_layouts,
                    runs[i].cases[s].variants);
  }
  gk_webgpu_test_scan_path(0);
}

// Past one dispatch: more workgroups than maxComputeWorkgroupsPerDimension
// (65535) in one pass, which the backend splits over two dimensions: an
// activation over 256 x 65600 elements (256 a workgroup), an add over
// 64 x 65600 (64 a workgroup), row ops over 66000 rows (their parameter
// gradients summed over as many rows).
static void test_past_one_dispatch(void) {
  if (g_quick) return;
  g_variant = "past one dispatch";
  const struct { gk_op op; int rank; int64_t shape[2]; } cases[] = {
      {GK_OP_SILU, 1, {256 * 65600 + 5}}, {GK_OP_ADD, 1, {64 * 65600 + 5}}, {GK_OP_SOFTMAX, 2, {66000, 3}},
      {GK_OP_RMSNORM, 2, {66001, 2}},
      {GK_OP_CROSS_ENTROPY, 2, {66001, 3}}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    gk_op_desc d = make(cases[c].op, cases[c].rank, cases[c].shape);
    test_config(&d, CONTIGUOUS);
  }
}

// ---------------------------------------------------------------- bad input

// A WebGPU buffer of n f32 values, each `fill`.
static gk_buffer *filled_buffer(int64_t n, float fill) {
  gk_buffer *b = NULL;
  check(gk_buffer_alloc(GK_BACKEND_WEBGPU, (size_t)n * 4, &b) == GK_SUCCESS, "gk_buffer_alloc: %s", gk_last_error());
  float *v = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) v[i] = fill;
  if (b) gk_buffer_upload(b, 0, v, (size_t)n * 4);
  free(v);
  return b;
}

// Every value of the buffer is still `fill`.
static bool untouched(gk_buffer *b, int64_t n, float fill) {
  float *v = malloc((size_t)n * 4);
  bool same = gk_buffer_download(b, 0, v, (size_t)n * 4) == GK_SUCCESS;
  for (int64_t i = 0; i < n && same; i++) same = v[i] == fill;
  free(v);
  return same;
}

static gk_tensor device_tensor(gk_buffer *b, gk_dtype dt, int rank, const int64_t *shape) {
  gk_tensor t;
  gk_tensor_init(&t, gk_buffer_address(b), dt, rank, shape);
  t.device = GK_DEVICE_WEBGPU;
  return t;
}

// Rejected runs on the GPU path: a status, a message naming the argument,
// and nothing written to the output.
static void test_bad_input(void) {
  int64_t n = 16, big = 32;
  gk_op_desc d = make(GK_OP_RELU, 1, &n);
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan = NULL;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "relu plan on webgpu: %s", gk_last_error());
  gk_buffer *xb = filled_buffer(n, 1.5f), *yb = filled_buffer(n, -7.0f);
  float host[16] = {0};
  gk_arg args[2] = {{GK_ARG_X, device_tensor(xb, GK_F32, 1, &n)}, {GK_ARG_Y, device_tensor(yb, GK_F32, 1, &n)}};
  // x in host memory, marked as a CPU tensor: the wrong device.
  gk_arg wrong = args[0];
  gk_tensor_init(&wrong.tensor, host, GK_F32, 1, &n);
  gk_status st = gk_plan_run(plan, (gk_arg[]){wrong, args[1]}, 2, NULL, 0);
  check(st == GK_ERR_BAD_DEVICE && strstr(gk_last_error(), "x"), "host x on webgpu: status %d, '%s'", st,
        gk_last_error());
  // y longer than its buffer.
  gk_arg longer = {GK_ARG_Y, device_tensor(yb, GK_F32, 1, &big)};
  gk_op_desc db = make(GK_OP_RELU, 1, &big);
  db.backend = GK_BACKEND_WEBGPU;
  gk_plan *bigplan = NULL;
  check(gk_plan_create(&db, &bigplan) == GK_SUCCESS, "relu plan: %s", gk_last_error());
  gk_buffer *xbig = filled_buffer(big, 1.5f);
  st = gk_plan_run(bigplan, (gk_arg[]){{GK_ARG_X, device_tensor(xbig, GK_F32, 1, &big)}, longer}, 2, NULL, 0);
  check(st != GK_SUCCESS && strstr(gk_last_error(), "y"), "y past its buffer: status %d, '%s'", st, gk_last_error());
  // y an address in no buffer, marked as a WebGPU tensor.
  gk_arg stray = args[1];
  stray.tensor.data = host;
  st = gk_plan_run(plan, (gk_arg[]){args[0], stray}, 2, NULL, 0);
  check(st != GK_SUCCESS && strstr(gk_last_error(), "y"), "y in no buffer: status %d, '%s'", st, gk_last_error());
  check(untouched(yb, n, -7.0f), "a rejected run wrote to y");
  // A target out of range, found on the device before anything runs.
  int64_t shape[2] = {3, 5};
  gk_op_desc ce = make(GK_OP_CROSS_ENTROPY, 2, shape);
  ce.backend = GK_BACKEND_WEBGPU;
  ce.index_dtype = GK_I32;
  gk_plan *ceplan = NULL;
  check(gk_plan_create(&ce, &ceplan) == GK_SUCCESS, "cross_entropy plan: %s", gk_last_error());
  gk_buffer *lb = filled_buffer(15, 0.25f), *tb = NULL, *outb = filled_buffer(1, -7.0f);
  int32_t targets[3] = {1, 9, 0};
  check(gk_buffer_alloc(GK_BACKEND_WEBGPU, sizeof targets, &tb) == GK_SUCCESS, "alloc: %s", gk_last_error());
  gk_buffer_upload(tb, 0, targets, sizeof targets);
  int64_t rows = 3;
  st = gk_plan_run(ceplan,
                   (gk_arg[]){{GK_ARG_LOGITS, device_tensor(lb, GK_F32, 2, shape)},
                              {GK_ARG_TARGET, device_tensor(tb, GK_I32, 1, &rows)},
                              {GK_ARG_LOSS, device_tensor(outb, GK_F32, 0, NULL)}},
                   3, NULL, 0);
  check(st == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "9"), "target 9 of 5 classes: status %d, '%s'", st,
        gk_last_error());
  check(untouched(outb, 1, -7.0f), "a rejected cross-entropy wrote its loss");
  // What the backend does not compute: f64, with the reason.
  gk_op_desc f64 = d;
  f64.dtype = GK_F64;
  gk_plan *none = NULL;
  st = gk_plan_create(&f64, &none);
  check(st == GK_ERR_UNSUPPORTED && strstr(gk_last_error(), "f32"), "f64 relu on webgpu: status %d, '%s'", st,
        gk_last_error());
  gk_plan_destroy(none);
  // The optimizers' hooks take f32 only: bf16 gradients refused, naming them.
  gk_buffer *hb = filled_buffer(n / 2, 1.0f);
  gk_tensor half_grad = device_tensor(hb, GK_BF16, 1, &n);
  double norm = 0;
  st = gk_clip_grad_norm(1, &half_grad, 1.0, &norm);
  check(st == GK_ERR_UNSUPPORTED && strstr(gk_last_error(), "grads[0]") && strstr(gk_last_error(), "bf16"),
        "clipping bf16 grads on webgpu: status %d, '%s'", st, gk_last_error());
  check(untouched(hb, n / 2, 1.0f), "refused clipping wrote its bf16 grads");
  gk_buffer_free(hb);
  gk_plan_destroy(ceplan);
  gk_plan_destroy(bigplan);
  gk_plan_destroy(plan);
  gk_buffer *bufs[] = {xb, yb, xbig, lb, tb, outb};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gk_buffer_free(bufs[i]);
  configs++;
}

// ---------------------------------------------------------------- tensors bound where they lie

// A tensor of a run placed in one shared buffer at `at`: a word, or for
// an f16/bf16 description a 2-byte unit (its f32 and index tensors at even
// units).
typedef struct placed {
  gk_arg_kind kind;
  int64_t at;
} placed;
enum { MAX_PLACED = 16 };  // tensors of a run in one buffer (check_placed), or refused (check_refused)

enum { CANARY_BYTE = 0xA5 };

// A WebGPU buffer of `bytes` bytes (rounded up to a word), each CANARY_BYTE.
static gk_buffer *canary_buffer(int64_t bytes) {
  size_t size = (size_t)(bytes + 3) / 4 * 4;
  gk_buffer *b = NULL;
  check(gk_buffer_alloc(GK_BACKEND_WEBGPU, size, &b) == GK_SUCCESS, "gk_buffer_alloc: %s", gk_last_error());
  unsigned char *v = malloc(size);
  memset(v, CANARY_BYTE, size);
  if (b) gk_buffer_upload(b, 0, v, size);
  free(v);
  return b;
}

// The families that bind each tensor by itself read and write contiguous
// tensors in their own buffers, and stage through the arena what WebGPU
// would not let them bind (overlapping ranges: in-place runs, neighbours
// within 256 bytes; f16/bf16 tensors outside a packed run or not starting
// on a word). Run d with its tensors at `pl` in one buffer (two kinds at
// the same place: in place) and require the bits of the same run on
// tensors in buffers of their own, inputs not in place unchanged, and
// every other byte of the buffer untouched (the other half of a word a
// 16-bit tensor shares included). Uploads and downloads at 2-byte offsets
// of odd lengths go through the ragged-edge path.
static uint32_t g_packed_limit;  // check_split: the binding limit of the run in one buffer

static void check_placed(const char *what, const gk_op_desc *desc, const placed *pl, int np) {
  gk_op_desc d = *desc;
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan = NULL;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "%s: plan: %s", what, gk_last_error());
  if (!plan) return;
  int64_t unit = gk_dtype_size(d.dtype) == 2 ? 2 : 4;
  gk_arg own[MAX_PLACED], packed[MAX_PLACED];
  gk_buffer *own_buf[MAX_PLACED] = {0};
  unsigned char *data[MAX_PLACED] = {0}, *expect[MAX_PLACED] = {0};
  int64_t n[MAX_PLACED] = {0}, at[MAX_PLACED] = {0}, bytes = 0;  // n, at: each tensor's bytes and first byte
  for (int i = 0; i < np; i++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(plan, pl[i].kind, &rank, shape);
    gk_dtype dt = expected_arg_dtype(&d, pl[i].kind);
    gk_tensor t;
    gk_tensor_init(&t, NULL, dt, rank, shape);
    n[i] = gk_tensor_numel(&t) * (int64_t)gk_dtype_size(dt);
    at[i] = pl[i].at * unit;
    check(at[i] % (int64_t)gk_dtype_size(dt) == 0, "%s: %s placed off its alignment", what, gk_arg_name(pl[i].kind));
    data[i] = malloc((size_t)n[i] + 1);  // (+ 1: an empty tensor's)
    expect[i] = malloc((size_t)n[i] + 1);
    bool output = is_output(&d, pl[i].kind);
    t.data = data[i];
    memset(data[i], CANARY_BYTE, (size_t)n[i]);
    if (!output) fill_input(&d, &t, pl[i].kind);
    // An output in place takes its input's values.
    for (int j = 0; j < np; j++)
      if (output && j != i && pl[j].at == pl[i].at && !is_output(&d, pl[j].kind) && data[j])
        memcpy(data[i], data[j], (size_t)n[i]);
    own_buf[i] = canary_buffer(n[i]);
    gk_buffer_upload(own_buf[i], 0, data[i], (size_t)n[i]);
    own[i] = (gk_arg){pl[i].kind, device_tensor(own_buf[i], dt, rank, shape)};
    packed[i] = own[i];
    if (at[i] + n[i] > bytes) bytes = at[i] + n[i];
  }
  bytes += 280;
  check(gk_plan_run(plan, own, np, NULL, 0) == GK_SUCCESS, "%s: run on own buffers: %s", what, gk_last_error());
  for (int i = 0; i < np; i++) gk_buffer_download(own_buf[i], 0, expect[i], (size_t)n[i]);
  gk_buffer *shared = canary_buffer(bytes);
  for (int i = 0; i < np; i++) {
    packed[i].tensor.data = (char *)gk_buffer_address(shared) + at[i];
    if (!is_output(&d, pl[i].kind)) gk_buffer_upload(shared, (size_t)at[i], data[i], (size_t)n[i]);
  }
  gk_webgpu_test_binding_limit(g_packed_limit);
  check(gk_plan_run(plan, packed, np, NULL, 0) == GK_SUCCESS, "%s: run in one buffer: %s", what, gk_last_error());
  gk_webgpu_test_binding_limit(0);
  unsigned char *got = malloc((size_t)bytes);
  gk_buffer_download(shared, 0, got, (size_t)bytes);
  bool *covered = calloc((size_t)bytes, 1);
  for (int i = 0; i < np; i++) {
    bool written = is_output(&d, pl[i].kind), overwritten = false;
    for (int j = 0; j < np; j++) overwritten |= j != i && pl[j].at == pl[i].at && is_output(&d, pl[j].kind);
    if (overwritten && !written) continue;  // an input in place: its output is checked
    const unsigned char *want = written ? expect[i] : data[i];
    check(!memcmp(got + at[i], want, (size_t)n[i]), "%s: %s differs from the run on buffers of its own", what,
          gk_arg_name(pl[i].kind));
    memset(covered + at[i], 1, (size_t)n[i]);
  }
  for (int64_t b = 0; b < bytes; b++)
    if (!covered[b] && got[b] != CANARY_BYTE) {
      check(false, "%s: byte %lld, outside every tensor, was written", what, (long long)b);
      break;
    }
  free(covered);
  free(got);
  gk_buffer_free(shared);
  for (int i = 0; i < np; i++) {
    gk_buffer_free(own_buf[i]);
    free(data[i]);
    free(expect[i]);
  }
  gk_plan_destroy(plan);
  configs++;
}

// check_placed with the binding limit lowered to `limit` bytes for the run
// in one buffer, so that it runs in pieces (tensors over the limit are
// split, wg_family.split): the same bits as the run in one piece.
static void check_split(const char *what, const gk_op_desc *desc, uint32_t limit, const placed *pl, int np) {
  g_packed_limit = limit;
  check_placed(what, desc, pl, np);
  g_packed_limit = 0;
}

// check_split with the tensors `kinds` one after the other from element 1
// (neighbours, sharing 256-byte blocks), each on its element's alignment.
static void check_split_in_a_row(const char *what, const gk_op_desc *desc, uint32_t limit, const gk_arg_kind *kinds,
                                 int n) {
  gk_op_desc d = *desc;
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan = NULL;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "%s: plan: %s", what, gk_last_error());
  if (!plan) return;
  placed pl[MAX_PLACED];
  int64_t at = 1, unit = gk_dtype_size(d.dtype) == 2 ? 2 : 4;  // (check_placed's unit of places)
  for (int i = 0; i < n; i++) {
    int rank;
    int64_t shape[GK_MAX_RANK], size = (int64_t)gk_dtype_size(expected_arg_dtype(&d, kinds[i]));
    gk_plan_arg_shape(plan, kinds[i], &rank, shape);
    if (size > unit) at = (at + size / unit - 1) / (size / unit) * (size / unit);
    pl[i] = (placed){kinds[i], at};
    int64_t bytes = size;
    for (int k = 0; k < rank; k++) bytes *= shape[k];
    at += (bytes + unit - 1) / unit;
  }
  gk_plan_destroy(plan);
  check_split(what, desc, limit, pl, n);
}

static gk_op_desc backward_of(gk_op_desc d) {
  d.direction = GK_BACKWARD;
  return d;
}

// The families converted after activations and softmax: norms, add/mul,
// gated; neighbours within 256 bytes, in place where the op allows it.
static void test_placement_more(void) {
  int64_t rows[2] = {7, 33}, n = 300, wide[2] = {6, 40};
  gk_op_desc ln = make(GK_OP_LAYERNORM, 2, rows), rms = make(GK_OP_RMSNORM, 2, rows);
  ln.norm.normalized_rank = rms.norm.normalized_rank = 1;
  ln.norm.has_weight = ln.norm.has_bias = 1;
  rms.norm.has_weight = 0;
  check_placed("layernorm, neighbours", &ln,
               (placed[]){{GK_ARG_X, 3}, {GK_ARG_WEIGHT, 234}, {GK_ARG_BIAS, 267}, {GK_ARG_Y, 300}, {GK_ARG_MEAN, 531},
                          {GK_ARG_RSTD, 538}},
               6);
  check_placed("rmsnorm without weight, neighbours", &rms,
               (placed[]){{GK_ARG_X, 64}, {GK_ARG_Y, 295}, {GK_ARG_RSTD, 526}}, 3);
  gk_op_desc ln_bwd = backward_of(ln), rms_bwd = backward_of(rms);
  check_placed("layernorm backward, neighbours", &ln_bwd,
               (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 232}, {GK_ARG_WEIGHT, 463}, {GK_ARG_RSTD, 496}, {GK_ARG_MEAN, 503},
                          {GK_ARG_DX, 510}, {GK_ARG_DWEIGHT, 741}, {GK_ARG_DBIAS, 774}},
               8);
  check_placed("rmsnorm backward without weight, neighbours", &rms_bwd,
               (placed[]){{GK_ARG_DY, 0}, {GK_ARG_X, 231}, {GK_ARG_RSTD, 462}, {GK_ARG_DX, 469}}, 4);
  gk_op_desc add = make(GK_OP_ADD, 1, &n), mul = make(GK_OP_MUL, 1, &n);
  add.binary.b_rank = mul.binary.b_rank = 1;
  add.binary.b_shape[0] = mul.binary.b_shape[0] = n;
  add.binary.alpha = 0.5;
  mul.binary.alpha = 1.5;
  check_placed("add, y in a", &add, (placed[]){{GK_ARG_A, 5}, {GK_ARG_B, 305}, {GK_ARG_Y, 5}}, 3);
  check_placed("mul, y in b", &mul, (placed[]){{GK_ARG_A, 2}, {GK_ARG_B, 302}, {GK_ARG_Y, 302}}, 3);
  gk_op_desc add_bwd = backward_of(add), mul_bwd = backward_of(mul);
  check_placed("add backward, neighbours", &add_bwd, (placed[]){{GK_ARG_DY, 7}, {GK_ARG_DA, 307}, {GK_ARG_DB, 607}}, 3);
  check_placed("mul backward, neighbours", &mul_bwd,
               (placed[]){{GK_ARG_DY, 7}, {GK_ARG_A, 307}, {GK_ARG_B, 607}, {GK_ARG_DA, 907}, {GK_ARG_DB, 1207}}, 5);
  gk_op_desc mul_bc = make(GK_OP_MUL, 2, wide);
  mul_bc.binary.b_rank = 1;
  mul_bc.binary.b_shape[0] = wide[1];
  gk_op_desc mul_bc_bwd = backward_of(mul_bc);
  check_placed("mul broadcast backward, neighbours", &mul_bc_bwd,
               (placed[]){{GK_ARG_DY, 3}, {GK_ARG_A, 243}, {GK_ARG_B, 483}, {GK_ARG_DA, 523}, {GK_ARG_DB, 763}}, 5);
  int64_t gshape[2] = {6, 40};
  gk_op_desc glu = make(GK_OP_GLU, 2, gshape), swiglu = make(GK_OP_SWIGLU, 2, gshape);
  glu.gated.form = GK_GATED_SPLIT;
  glu.gated.dim = -1;
  swiglu.gated.form = GK_GATED_TWO_TENSOR;
  check_placed("glu split, neighbours", &glu, (placed[]){{GK_ARG_X, 1}, {GK_ARG_Y, 241}}, 2);
  gk_op_desc glu_bwd = backward_of(glu), swiglu_bwd = backward_of(swiglu);
  check_placed("glu split backward, neighbours", &glu_bwd,
               (placed[]){{GK_ARG_DY, 0}, {GK_ARG_X, 120}, {GK_ARG_DX, 360}}, 3);
  check_placed("swiglu, neighbours", &swiglu, (placed[]){{GK_ARG_X, 9}, {GK_ARG_GATE, 249}, {GK_ARG_Y, 489}}, 3);
  check_placed("swiglu backward, neighbours", &swiglu_bwd,
               (placed[]){{GK_ARG_DY, 9}, {GK_ARG_X, 249}, {GK_ARG_GATE, 489}, {GK_ARG_DX, 729}, {GK_ARG_DGATE, 969}}, 5);
  int64_t rshape[4] = {2, 5, 3, 8};
  gk_op_desc rope = make(GK_OP_ROPE, 4, rshape);
  rope.rope.offset = 7;
  gk_op_desc rope_bwd = backward_of(rope);
  check_placed("rope, in place", &rope, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 3}}, 2);
  check_placed("rope, neighbours", &rope, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 243}}, 2);
  check_placed("rope backward, dx in dy", &rope_bwd, (placed[]){{GK_ARG_DY, 64}, {GK_ARG_DX, 64}}, 2);
  int64_t positions[2] = {3, 7};
  gk_op_desc emb = make(GK_OP_EMBEDDING, 2, positions);
  emb.embedding.num_embeddings = 6;
  emb.embedding.dim = 9;
  emb.embedding.padding_idx = 2;
  emb.index_dtype = GK_I64;
  gk_op_desc emb_bwd = backward_of(emb);
  emb_bwd.index_dtype = GK_I32;
  check_placed("embedding, neighbours", &emb, (placed[]){{GK_ARG_WEIGHT, 5}, {GK_ARG_INDEX, 60}, {GK_ARG_Y, 102}}, 3);
  check_placed("embedding backward, neighbours", &emb_bwd,
               (placed[]){{GK_ARG_INDEX, 1}, {GK_ARG_DY, 22}, {GK_ARG_DWEIGHT, 211}}, 3);
  int64_t logits[2] = {6, 11};
  gk_op_desc ce = make(GK_OP_CROSS_ENTROPY, 2, logits);
  ce.index_dtype = GK_I32;
  ce.ce.fused_grad = 1;
  ce.ce.grad_scale = 0.5;
  check_placed("cross-entropy fused, neighbours", &ce,
               (placed[]){{GK_ARG_LOGITS, 1}, {GK_ARG_TARGET, 67}, {GK_ARG_LOSS, 73}, {GK_ARG_DLOGITS, 74}}, 4);
  check_placed("cross-entropy fused, dlogits in logits", &ce,
               (placed[]){{GK_ARG_LOGITS, 1}, {GK_ARG_TARGET, 67}, {GK_ARG_LOSS, 73}, {GK_ARG_DLOGITS, 1}}, 4);
  gk_op_desc ce_bwd = backward_of(ce);
  ce_bwd.ce.fused_grad = 0;
  ce_bwd.index_dtype = GK_I64;
  check_placed("cross-entropy backward, dlogits in logits", &ce_bwd,
               (placed[]){{GK_ARG_DLOSS, 0}, {GK_ARG_LOGITS, 2}, {GK_ARG_TARGET, 68}, {GK_ARG_DLOGITS, 2}}, 4);
}

// Run desc (on WebGPU) with the binding limit lowered to `limit`, its
// tensors `kinds` filled with 0.5 (indices 0; as f32 words): refused, GK_ERR_UNSUPPORTED
// with a message naming maxStorageBufferBindingSize (and `names`, where
// given), nothing written to `out`.
static void check_refused(const char *what, const gk_op_desc *desc, uint32_t limit, const gk_arg_kind *kinds, int n,
                          gk_arg_kind out, const char *names) {
  gk_op_desc d = *desc;
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan = NULL;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "%s: plan: %s", what, gk_last_error());
  gk_arg args[MAX_PLACED];
  gk_buffer *bufs[MAX_PLACED] = {0};
  int64_t numel[MAX_PLACED] = {0};
  for (int i = 0; i < n && plan; i++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(plan, kinds[i], &rank, shape);
    gk_dtype dt = expected_arg_dtype(&d, kinds[i]);
    gk_tensor t;
    gk_tensor_init(&t, NULL, dt, rank, shape);
    numel[i] = (gk_tensor_numel(&t) * (int64_t)gk_dtype_size(dt) + 3) / 4;
    bufs[i] = filled_buffer(numel[i], is_index_kind(kinds[i]) ? 0.0f : 0.5f);
    args[i] = (gk_arg){kinds[i], device_tensor(bufs[i], dt, rank, shape)};
  }
  if (plan) {
    gk_webgpu_test_binding_limit(limit);
    gk_status st = gk_plan_run(plan, args, n, NULL, 0);
    gk_webgpu_test_binding_limit(0);
    const char *message = gk_last_error();
    check(st == GK_ERR_UNSUPPORTED && strstr(message, "maxStorageBufferBindingSize") &&
              (!names || strstr(message, names)),
          "%s over the limit: status %d, '%s'", what, st, message);
    for (int i = 0; i < n; i++)
      if (kinds[i] == out) check(untouched(bufs[i], numel[i], 0.5f), "%s, refused, wrote %s", what, gk_arg_name(out));
  }
  for (int i = 0; i < n; i++)
    if (bufs[i]) gk_buffer_free(bufs[i]);
  gk_plan_destroy(plan);
  configs++;
}

// The norms' backward with parameter gradients split by rows (150 x 9,
// 300 x 5: 5400, 6000 bytes, over `limit`, uneven pieces; each piece's
// sums of dweight and dbias as partials, added up in piece order: the
// unsplit run's values within the tolerance, not its bits): LayerNorm
// with weight and bias, RMSNorm with weight, against ref and cpu (and
// accumulate); a row over the limit refused naming x, and partials over
// it (60 x 33: 30 pieces of 66 words) refused.
static void test_split_norm_params(uint32_t limit) {
  int64_t rows[2][2] = {{150, 9}, {300, 5}}, wide[2] = {3, 1100}, narrow[2] = {60, 33};
  for (int ln = 0; ln < (g_quick ? 1 : 2); ln++) {
    gk_op_desc d = make(ln ? GK_OP_LAYERNORM : GK_OP_RMSNORM, 2, rows[ln]);
    d.norm.normalized_rank = 1;
    d.norm.has_weight = 1;
    d.norm.has_bias = ln;
    g_variant = "split";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc wide_bwd = backward_of(make(GK_OP_LAYERNORM, 2, wide));
  wide_bwd.norm.normalized_rank = 1;
  wide_bwd.norm.has_weight = wide_bwd.norm.has_bias = 1;
  check_refused("layernorm backward, a row over the limit", &wide_bwd, limit,
                (gk_arg_kind[]){GK_ARG_DY, GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_RSTD, GK_ARG_MEAN, GK_ARG_DX, GK_ARG_DWEIGHT,
                                GK_ARG_DBIAS},
                8, GK_ARG_DX, "x");
  gk_op_desc many_bwd = backward_of(make(GK_OP_LAYERNORM, 2, narrow));
  many_bwd.norm.normalized_rank = 1;
  many_bwd.norm.has_weight = many_bwd.norm.has_bias = 1;
  check_refused("layernorm backward, partials over the limit", &many_bwd, limit,
                (gk_arg_kind[]){GK_ARG_DY, GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_RSTD, GK_ARG_MEAN, GK_ARG_DX, GK_ARG_DWEIGHT,
                                GK_ARG_DBIAS},
                8, GK_ARG_DX, "scratch");
}

// Cross-entropy split by rows (45 x 29 logits, 5220 bytes, over `limit`:
// uneven pieces), forward, backward and fused, each mean and sum, with and
// without label smoothing and ignored rows, and bf16 logits (45 x 61,
// staged): against ref and cpu (the
// split run's total is its fixed-order sum over all rows: the unsplit
// run's bits, required in place and between neighbours); a row over the
// limit refused naming logits.
static void test_split_cross_entropy(uint32_t limit) {
  int64_t logits[2] = {45, 29}, wide[3] = {3, 13, 31}, long_rows[2] = {3, 1100};
  for (int v = 0; v < (g_quick ? 1 : 4); v++) {
    gk_op_desc d = make(GK_OP_CROSS_ENTROPY, v == 3 ? 3 : 2, v == 3 ? wide : logits);
    d.ce.reduction = v & 1 ? GK_REDUCTION_SUM : GK_REDUCTION_MEAN;
    d.ce.label_smoothing = v ? 0.1 : 0;
    d.ce.fused_grad = v >= 2;
    d.ce.grad_scale = 0.75;
    d.index_dtype = v & 1 ? GK_I64 : GK_I32;
    g_ignore_frac = v ? 0.3 : 0;
    g_variant = (const char *[]){"split mean", "split sum smooth", "split mean fused", "split sum fused"}[v];
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  if (!g_quick) {
    int64_t half_logits[2] = {45, 61};
    gk_op_desc half = make(GK_OP_CROSS_ENTROPY, 2, half_logits);
    half.dtype = GK_BF16;
    half.index_dtype = GK_I32;
    half.ce.fused_grad = 1;
    g_variant = "split fused";
    gk_webgpu_test_binding_limit(limit);
    test_config(&half, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  g_ignore_frac = 0.3;
  gk_op_desc ce = make(GK_OP_CROSS_ENTROPY, 2, logits);
  ce.index_dtype = GK_I32;
  ce.ce.fused_grad = 1;
  ce.ce.label_smoothing = 0.1;
  ce.ce.grad_scale = 0.5;
  check_split("cross-entropy fused split, dlogits in logits", &ce, limit,
              (placed[]){{GK_ARG_LOGITS, 3}, {GK_ARG_TARGET, 1310}, {GK_ARG_LOSS, 1360}, {GK_ARG_DLOGITS, 3}}, 4);
  gk_op_desc ce_bwd = backward_of(ce);
  ce_bwd.ce.fused_grad = 0;
  ce_bwd.ce.reduction = GK_REDUCTION_SUM;
  ce_bwd.index_dtype = GK_I64;
  check_split("cross-entropy backward split, neighbours", &ce_bwd, limit,
              (placed[]){{GK_ARG_DLOSS, 0}, {GK_ARG_LOGITS, 1}, {GK_ARG_TARGET, 1306}, {GK_ARG_DLOGITS, 1396}}, 4);
  g_ignore_frac = 0;
  gk_op_desc wide_rows = make(GK_OP_CROSS_ENTROPY, 2, long_rows);
  wide_rows.index_dtype = GK_I32;
  wide_rows.ce.fused_grad = 1;
  wide_rows.ce.grad_scale = 1;
  check_refused("cross-entropy fused, a row over the limit", &wide_rows, limit,
                (gk_arg_kind[]){GK_ARG_LOGITS, GK_ARG_TARGET, GK_ARG_LOSS, GK_ARG_DLOGITS}, 4, GK_ARG_DLOGITS,
                "logits");
}

// The embedding forward of `d` into y, a strided view (rows of D + 3,
// staged through the arena), with the binding limit at `limit` (0: the
// device's): every word of y's buffer, gaps included, into `out`.
static void embedding_strided_y(const gk_op_desc *d, uint32_t limit, float *out) {
  int64_t P = d->shape[0] * d->shape[1], V = d->embedding.num_embeddings, D = d->embedding.dim, row = D + 3;
  gk_plan *plan = NULL;
  check(gk_plan_create(d, &plan) == GK_SUCCESS, "embedding plan: %s", gk_last_error());
  gk_buffer *w = filled_buffer(V * D, 0), *idx = filled_buffer(P, 0), *y = filled_buffer(P * row, -7);
  float *wv = malloc((size_t)(V * D) * 4);
  int32_t *iv = malloc((size_t)P * 4);
  for (int64_t i = 0; i < V * D; i++) wv[i] = (float)i * 0.25f;
  for (int64_t q = 0; q < P; q++) iv[q] = (int32_t)((q * 37 + 11) % V);
  gk_buffer_upload(w, 0, wv, (size_t)(V * D) * 4);
  gk_buffer_upload(idx, 0, iv, (size_t)P * 4);
  int64_t wshape[2] = {V, D}, yshape[3] = {d->shape[0], d->shape[1], D};
  gk_arg args[3] = {{GK_ARG_WEIGHT, device_tensor(w, GK_F32, 2, wshape)},
                    {GK_ARG_INDEX, device_tensor(idx, GK_I32, 2, d->shape)},
                    {GK_ARG_Y, device_tensor(y, GK_F32, 3, yshape)}};
  args[2].tensor.strides[0] = d->shape[1] * row;
  args[2].tensor.strides[1] = row;
  gk_webgpu_test_binding_limit(limit);
  check(plan && gk_plan_run(plan, args, 3, NULL, 0) == GK_SUCCESS, "embedding, y strided: %s", gk_last_error());
  gk_webgpu_test_binding_limit(0);
  gk_buffer_download(y, 0, out, (size_t)(P * row) * 4);
  free(wv);
  free(iv);
  gk_buffer_free(w);
  gk_buffer_free(idx);
  gk_buffer_free(y);
  gk_plan_destroy(plan);
}

// Embedding split by the rows of weight (forward) and dweight (backward):
// 97 x 13 (5044 bytes, over `limit`, uneven pieces), 21 positions, a
// padding row: against ref and cpu (and accumulate); the unsplit run's
// bits with neighbours, and with y strided (staged: a piece writes some of
// its rows, the others kept, gaps untouched); indices and y over the limit
// (not split) refused naming y.
static void test_split_embedding(uint32_t limit) {
  int64_t positions[2] = {3, 7}, many[2] = {40, 30};
  for (int i64 = 0; i64 < (g_quick ? 1 : 2); i64++) {
    gk_op_desc d = make(GK_OP_EMBEDDING, 2, positions);
    d.embedding.num_embeddings = 97;
    d.embedding.dim = 13;
    d.embedding.padding_idx = i64 ? 5 : -1;
    d.index_dtype = i64 ? GK_I64 : GK_I32;
    g_variant = i64 ? "split i64 padding" : "split i32";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc emb = make(GK_OP_EMBEDDING, 2, positions);
  emb.embedding.num_embeddings = 97;
  emb.embedding.dim = 13;
  emb.embedding.padding_idx = 2;
  emb.index_dtype = GK_I32;
  check_split("embedding split, neighbours", &emb, limit,
              (placed[]){{GK_ARG_INDEX, 0}, {GK_ARG_WEIGHT, 21}, {GK_ARG_Y, 1282}}, 3);
  gk_op_desc emb_bwd = backward_of(emb);
  emb_bwd.index_dtype = GK_I64;
  check_split("embedding backward split, neighbours", &emb_bwd, limit,
              (placed[]){{GK_ARG_INDEX, 0}, {GK_ARG_DY, 42}, {GK_ARG_DWEIGHT, 315}}, 3);
  gk_op_desc strided = emb;
  strided.backend = GK_BACKEND_WEBGPU;
  float whole_run[21 * 16], split_run[21 * 16];
  embedding_strided_y(&strided, 0, whole_run);
  embedding_strided_y(&strided, limit, split_run);
  check(!memcmp(whole_run, split_run, sizeof whole_run), "embedding split, y strided: differs from the unsplit run");
  configs++;
  gk_op_desc long_emb = make(GK_OP_EMBEDDING, 2, many);
  long_emb.embedding.num_embeddings = 97;
  long_emb.embedding.dim = 13;
  long_emb.embedding.padding_idx = -1;
  long_emb.index_dtype = GK_I32;
  check_refused("embedding, y over the limit", &long_emb, limit,
                (gk_arg_kind[]){GK_ARG_WEIGHT, GK_ARG_INDEX, GK_ARG_Y}, 3, GK_ARG_Y, "y");
}

// Linear split by output feature (5 x 7 -> 211: W 5908 bytes, y 4220;
// 3 x 4 x 8 -> 150, K a multiple of 4; over `limit`, uneven pieces), with
// and without bias, and in f16 (5 x 7 -> 311, staged): against ref and cpu
// (and accumulate); the unsplit run's bits (dx's sums carried from piece
// to piece, in f32 for an f16 dx; y's and dy's columns staged a row at a
// time) with neighbours, in f32 and f16; x over the limit refused naming x.
static void test_split_linear(uint32_t limit) {
  struct { int rank; int64_t shape[3], n; } lin[] = {{2, {5, 7}, 211}, {3, {3, 4, 8}, 150}};
  for (int v = 0; v < (g_quick ? 1 : 3); v++) {
    gk_op_desc d = make(GK_OP_LINEAR, lin[v / 2].rank, lin[v / 2].shape);
    d.linear.out_features = lin[v / 2].n;
    d.linear.has_bias = v != 0;
    g_variant = v ? "split bias" : "split";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  int64_t x[2] = {5, 7}, wide[2] = {3, 1100};
  gk_op_desc half = make(GK_OP_LINEAR, 2, x);
  half.dtype = half.param_dtype = GK_F16;
  half.linear.out_features = 311;
  half.linear.has_bias = 1;
  for (int dir = 0; dir < (g_quick ? 0 : 2); dir++) {
    g_variant = "split bias";
    gk_op_desc d = dir ? backward_of(half) : half;
    argset in, ref_out;
    gk_webgpu_test_binding_limit(limit);
    check(plan_build(&roles, &d, CONTIGUOUS, NULL, &in), "linear f16 split: plan: %s", gk_last_error());
    compare_backends(&roles, &d, CONTIGUOUS, &in, &ref_out);
    gk_webgpu_test_binding_limit(0);
    free_outputs(&roles, &d, &ref_out);
    argset_free(&in);
    configs++;
  }
  gk_op_desc half_bwd = backward_of(half);
  if (!g_quick)
    check_split("linear backward f16 split, neighbours", &half_bwd, limit,
                (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 1556}, {GK_ARG_WEIGHT, 1591}, {GK_ARG_DX, 3768},
                           {GK_ARG_DWEIGHT, 3803}, {GK_ARG_DBIAS, 5980}},
                6);
  gk_op_desc lin_fwd = make(GK_OP_LINEAR, 2, x);
  lin_fwd.linear.out_features = 211;
  lin_fwd.linear.has_bias = 1;
  check_split("linear split, neighbours", &lin_fwd, limit,
              (placed[]){{GK_ARG_X, 0}, {GK_ARG_WEIGHT, 35}, {GK_ARG_BIAS, 1512}, {GK_ARG_Y, 1723}}, 4);
  gk_op_desc lin_bwd = backward_of(lin_fwd);
  check_split("linear backward split, neighbours", &lin_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 1056}, {GK_ARG_WEIGHT, 1091}, {GK_ARG_DX, 2568},
                         {GK_ARG_DWEIGHT, 2603}, {GK_ARG_DBIAS, 4080}},
              6);
  gk_op_desc long_x = make(GK_OP_LINEAR, 2, wide);
  long_x.linear.out_features = 5;
  long_x.linear.has_bias = 0;
  check_refused("linear, x over the limit", &long_x, limit, (gk_arg_kind[]){GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_Y}, 3,
                GK_ARG_Y, "x");
}

// Matmul split by column of Y (2 x 5 x 7 @ 7 x 211: B 5908 bytes shared,
// twice that a batch each, Y 8440; over `limit`, uneven pieces): plain, B
// transposed, B shared, A and B transposed with B shared, against ref and
// cpu (and accumulate); the unsplit run's bits (dA's sums carried, in f32
// for a bf16 dA) with neighbours, in f32 and bf16.
static void test_split_matmul(uint32_t limit) {
  int64_t a[3] = {2, 5, 7};
  for (int v = 0; v < (g_quick ? 1 : 4); v++) {
    gk_op_desc d = make(GK_OP_MATMUL, 3, a);
    d.matmul.n = 211;
    d.matmul.trans_a = v == 3;
    d.matmul.trans_b = v == 1 || v == 3;
    d.matmul.shared_b = v >= 2;
    g_variant = (const char *[]){"split", "split tb", "split shared", "split ta tb shared"}[v];
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc mm = make(GK_OP_MATMUL, 3, a);
  mm.matmul.n = 211;
  gk_op_desc mm_bwd = backward_of(mm);
  for (int bf16 = 0; bf16 < (g_quick ? 1 : 2); bf16++) {
    mm_bwd.dtype = bf16 ? GK_BF16 : GK_F32;
    check_split(bf16 ? "matmul backward bf16 split, neighbours" : "matmul backward split, neighbours", &mm_bwd, limit,
                (placed[]){{GK_ARG_DY, 1}, {GK_ARG_A, 2111}, {GK_ARG_B, 2181}, {GK_ARG_DA, 5135}, {GK_ARG_DB, 5205}},
                5);
  }
}

// RoPE split by row of Dh (2 x 13 x 3 x 16, 2 x 3 x 13 x 16: 4992 bytes,
// over `limit`, uneven pieces; a row's position from its index in the
// whole run), both layouts and pairings, offset 7: against ref and cpu;
// the unsplit run's bits in place.
static void test_split_rope(uint32_t limit) {
  int64_t bthd[4] = {2, 13, 3, 16}, bhtd[4] = {2, 3, 13, 16};
  for (int v = 0; v < (g_quick ? 1 : 2); v++) {
    gk_op_desc d = make(GK_OP_ROPE, 4, v ? bhtd : bthd);
    d.rope.layout = v ? GK_ROPE_BHTD : GK_ROPE_BTHD;
    d.rope.pairing = v ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
    d.rope.offset = 7;
    g_variant = v ? "split bhtd interleaved" : "split bthd half";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc rope = make(GK_OP_ROPE, 4, bthd);
  rope.rope.offset = 7;
  check_split("rope split, in place", &rope, limit, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 3}}, 2);
  gk_op_desc rope_bwd = backward_of(rope);
  check_split("rope backward split, neighbours", &rope_bwd, limit, (placed[]){{GK_ARG_DY, 1}, {GK_ARG_DX, 1249}}, 2);
}

// A binary op's description: a of `rank` dims `a`, b of `b_rank` dims `b`.
static gk_op_desc binary_desc(gk_op op, int rank, const int64_t *a, int b_rank, const int64_t *b, double alpha) {
  gk_op_desc d = make(op, rank, a);
  d.binary.b_rank = b_rank;
  memcpy(d.binary.b_shape, b, (size_t)b_rank * sizeof *b);
  d.binary.alpha = alpha;
  return d;
}

// Broadcast add and mul split by the leading dims of y (over `limit`,
// uneven pieces): b broadcast along dim 0 (30 x 7 x 9 + 7 x 9: y 7560
// bytes, b bound whole by every piece, db's sums carried from piece to
// piece), both split with b broadcast inside a unit (12 x 5 x 20 * 12 x 1 x
// 20), a broadcast (40 * 35 x 40, da carried, alpha 1.5): against ref and
// cpu; the unsplit run's bits with neighbours (the carried gradient
// staged), in f32 and in f16 (the carried sums in f32, rounded once); b
// over the limit (2 x 1100 + 1100) refused naming b.
static void test_split_binary(uint32_t limit) {
  int64_t a3[3] = {30, 7, 9}, b2[2] = {7, 9}, m3[3] = {12, 5, 20}, m3b[3] = {12, 1, 20}, row[1] = {40},
          rows[2] = {35, 40}, wide[2] = {2, 1100}, wide_b[1] = {1100};
  gk_op_desc cases[] = {binary_desc(GK_OP_ADD, 3, a3, 2, b2, 0.5), binary_desc(GK_OP_MUL, 3, m3, 3, m3b, 1),
                        binary_desc(GK_OP_MUL, 1, row, 2, rows, 1.5)};
  for (int v = 0; v < (g_quick ? 1 : 3); v++) {
    g_variant = (const char *[]){"split, b whole", "split, both split", "split, a whole"}[v];
    gk_webgpu_test_binding_limit(limit);
    test_config(&cases[v], CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc add_bwd = backward_of(cases[0]), mul_bwd = backward_of(cases[2]);
  check_split("add broadcast split, neighbours", &cases[0], limit,
              (placed[]){{GK_ARG_A, 1}, {GK_ARG_B, 1891}, {GK_ARG_Y, 1954}}, 3);
  check_split("add broadcast backward split, neighbours", &add_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_DA, 1891}, {GK_ARG_DB, 3781}}, 3);
  check_split("mul broadcast backward split, neighbours", &mul_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_A, 1401}, {GK_ARG_B, 1441}, {GK_ARG_DA, 2841}, {GK_ARG_DB, 2881}}, 5);
  gk_op_desc half_bwd = mul_bwd;
  half_bwd.dtype = GK_F16;
  if (!g_quick)
    check_split("mul broadcast backward f16 split, neighbours", &half_bwd, limit,
                (placed[]){{GK_ARG_DY, 1}, {GK_ARG_A, 1401}, {GK_ARG_B, 1441}, {GK_ARG_DA, 2841}, {GK_ARG_DB, 2881}},
                5);
  gk_op_desc long_b = binary_desc(GK_OP_ADD, 2, wide, 1, wide_b, 1);
  check_refused("add, a broadcast b", &long_b, limit, (gk_arg_kind[]){GK_ARG_A, GK_ARG_B, GK_ARG_Y}, 3,
                GK_ARG_Y, "b");
}

// A conv1d of x (2, 13, 100), or (2, 100, 13) channel-last, width w.
static gk_op_desc conv_desc(bool channel_last, int64_t w, bool silu, bool states) {
  int64_t shape[3] = {2, channel_last ? 100 : 13, channel_last ? 13 : 100};
  gk_op_desc d = make(GK_OP_CONV1D, 3, shape);
  d.conv.width = w;
  d.conv.channel_last = channel_last;
  d.conv.has_bias = 1;
  d.conv.silu = silu;
  d.conv.has_initial_state = d.conv.has_final_state = states;
  return d;
}

// Conv1d split by channel (x 10400 bytes, over `limit`, uneven pieces; the
// backward a channel a piece): channel-first width 4, channel-last width 3
// with SiLU and states, against ref and cpu (and accumulate); the unsplit
// run's bits with neighbours (no bias); a channel over the limit (x 2 x 1 x 1100)
// refused naming x.
static void test_split_conv1d(uint32_t limit) {
  for (int v = 0; v < (g_quick ? 1 : 2); v++) {
    gk_op_desc d = conv_desc(v, v ? 3 : 4, v, v);
    g_variant = v ? "split silu states cl" : "split";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc conv = conv_desc(false, 4, true, true);
  conv.conv.has_bias = 0;
  gk_op_desc conv_bwd = backward_of(conv);
  if (!g_quick)
    check_split("conv1d split, neighbours", &conv, limit,
                (placed[]){{GK_ARG_X, 1}, {GK_ARG_WEIGHT, 2601}, {GK_ARG_INITIAL_STATE, 2653}, {GK_ARG_Y, 2731},
                           {GK_ARG_FINAL_STATE, 5331}},
                5);
  check_split("conv1d backward split, neighbours", &conv_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 2601}, {GK_ARG_WEIGHT, 5201}, {GK_ARG_INITIAL_STATE, 5253},
                         {GK_ARG_DFINAL_STATE, 5331}, {GK_ARG_DX, 5409}, {GK_ARG_DWEIGHT, 8009},
                         {GK_ARG_DINITIAL_STATE, 8061}},
              8);
  int64_t long_channel[3] = {2, 1, 1100};
  gk_op_desc long_conv = make(GK_OP_CONV1D, 3, long_channel);
  long_conv.conv.width = 4;
  long_conv.conv.has_bias = 0;
  check_refused("conv1d, a channel", &long_conv, limit,
                (gk_arg_kind[]){GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_Y}, 3, GK_ARG_Y, "x");
}

// The selective scan split by channel, or by group of channels (B 2 x 32 x
// 40 steps, N 4: the sequential kernel; 2 x 16 x 70: the parallel one; an
// arena of over `limit`, uneven pieces): every variant of scan_variants
// (per-batch B or C bound whole, dB or dC summed over every channel from
// piece to piece; grouped in 8 groups: a group a unit) against ref and
// cpu (and accumulate); the unsplit run's bits with neighbours in the first
// three variants, and in f16 with per-batch B (dB's sums carried in f32,
// rounded once).
static gk_op_desc split_scan_desc(const int64_t *shape, int v) {
  gk_op_desc d = scan_desc(shape, 4, 16, v);
  if (d.scan.groups == 2) d.scan.groups = 8;  // (2 or 4 channels a unit)
  return d;
}
static void test_split_scan(uint32_t limit) {
  const int64_t sequential[3] = {2, 32, 40}, parallel[3] = {2, 16, 70};
  char variant[64];
  for (int path = 0; path < 2; path++)
    for (int v = 0; v < (g_quick ? 1 : 5); v++) {
      gk_op_desc d = split_scan_desc(path ? parallel : sequential, v);
      snprintf(variant, sizeof variant, "split %s %s", path ? "parallel" : "sequential", scan_variant_name[v]);
      g_variant = variant;
      gk_webgpu_test_binding_limit(limit);
      test_config(&d, CONTIGUOUS);
      gk_webgpu_test_binding_limit(0);
    }
  // Variants 0 (per-batch B, shared C, D), 1 (shared B, C in two groups), 2 (B in one group, per-batch C, D, z).
  const gk_arg_kind inputs[] = {GK_ARG_U, GK_ARG_DELTA, GK_ARG_A, GK_ARG_B, GK_ARG_C, GK_ARG_CHUNK_STATES, GK_ARG_DY,
                                GK_ARG_D, GK_ARG_Z},
                    outputs[] = {GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DA, GK_ARG_DB, GK_ARG_DC, GK_ARG_DD, GK_ARG_DZ};
  for (int v = 0; v < (g_quick ? 1 : 3); v++) {
    gk_op_desc bwd = backward_of(split_scan_desc(v == 0 ? sequential : parallel, v));
    gk_arg_kind kinds[MAX_PLACED];
    int n = 0;
    for (int i = 0; i < 9; i++)
      if ((inputs[i] != GK_ARG_D || bwd.scan.has_D) && (inputs[i] != GK_ARG_Z || bwd.scan.has_z))
        kinds[n++] = inputs[i];
    for (int i = 0; i < 7; i++)
      if ((outputs[i] != GK_ARG_DD || bwd.scan.has_D) && (outputs[i] != GK_ARG_DZ || bwd.scan.has_z))
        kinds[n++] = outputs[i];
    char what[96];
    snprintf(what, sizeof what, "scan backward split, %s, neighbours", scan_variant_name[v]);
    check_split_in_a_row(what, &bwd, limit, kinds, n);
    if (v || g_quick) continue;
    gk_op_desc half_b = bwd;
    half_b.dtype = half_b.scan.b_dtype = GK_F16;
    half_b.scan.c_dtype = GK_F32;
    check_split_in_a_row("scan backward f16 split, per-batch B, neighbours", &half_b, limit, kinds, n);
  }
}

// Attention split by (batch, kv head) pair (q 2 x 4 x 24 x 8 with 2 kv
// heads, 2 x 3 x 24 x 8 with 3; an arena over `limit`, uneven pieces),
// full and causal, against ref and cpu; the unsplit run's bits with
// neighbours; a unit over the limit (a head of 1100 x 8) refused naming y
// (as wide as q) and its bytes.
static void test_split_attention(uint32_t limit) {
  int64_t gqa[4] = {2, 4, 24, 8}, mha[4] = {2, 3, 24, 8}, long_head[4] = {1, 1, 1100, 8};
  for (int v = 0; v < (g_quick ? 1 : 2); v++) {
    gk_op_desc d = make(GK_OP_ATTENTION, 4, v ? mha : gqa);
    d.attn.kv_heads = v ? 3 : 2;
    d.attn.causal = v;
    g_variant = v ? "split causal" : "split full gqa";
    gk_webgpu_test_binding_limit(limit);
    test_config(&d, CONTIGUOUS);
    gk_webgpu_test_binding_limit(0);
  }
  gk_op_desc attn = make(GK_OP_ATTENTION, 4, gqa);
  attn.attn.kv_heads = 2;
  attn.attn.causal = 1;
  gk_op_desc attn_bwd = backward_of(attn);
  check_split_in_a_row("attention split, neighbours", &attn, limit,
                       (gk_arg_kind[]){GK_ARG_Q, GK_ARG_K, GK_ARG_V, GK_ARG_Y, GK_ARG_LSE}, 5);
  check_split_in_a_row("attention backward split, neighbours", &attn_bwd, limit,
                       (gk_arg_kind[]){GK_ARG_Q, GK_ARG_K, GK_ARG_V, GK_ARG_Y, GK_ARG_LSE, GK_ARG_DY, GK_ARG_DQ,
                                       GK_ARG_DK, GK_ARG_DV},
                       9);
  gk_op_desc long_attn = make(GK_OP_ATTENTION, 4, long_head);
  check_refused("attention, a head", &long_attn, limit,
                (gk_arg_kind[]){GK_ARG_Q, GK_ARG_K, GK_ARG_V, GK_ARG_Y, GK_ARG_LSE}, 5, GK_ARG_Y, "y: 35200 bytes");
}

// Runs over the binding limit (lowered to 4000 bytes) in pieces of whole
// elements or rows, pieces ending within 256-byte blocks: far apart,
// neighbours, in place; then the families with sums over every piece, or
// pieces of columns, channels, heads (test_split_norm_params ...
// test_split_attention; the arena families under a higher limit, as many
// tensors take 256 bytes each there), each with its refusals (--quick:
// each against ref in its first configuration only, without the 16-bit
// bit checks and with one scan variant's, for Chromium's SwiftShader).
static void test_split(void) {
  const uint32_t limit = 4000;
  int64_t n = 3000, srows[2] = {40, 50}, nrows[2] = {60, 33}, grows[2] = {40, 66};
  gk_op_desc relu = make(GK_OP_RELU, 1, &n), gelu_bwd = backward_of(make(GK_OP_GELU, 1, &n));
  check_split("relu split, far apart", &relu, limit, (placed[]){{GK_ARG_X, 64}, {GK_ARG_Y, 3200}}, 2);
  check_split("relu split, neighbours", &relu, limit, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 3003}}, 2);
  check_split("relu split, in place", &relu, limit, (placed[]){{GK_ARG_X, 5}, {GK_ARG_Y, 5}}, 2);
  check_split("gelu backward split, dx in dy", &gelu_bwd, limit,
              (placed[]){{GK_ARG_X, 1}, {GK_ARG_DY, 3001}, {GK_ARG_DX, 3001}}, 3);
  gk_op_desc softmax = make(GK_OP_SOFTMAX, 2, srows), lsm_bwd = backward_of(make(GK_OP_LOG_SOFTMAX, 2, srows));
  check_split("softmax split, in place", &softmax, limit, (placed[]){{GK_ARG_X, 9}, {GK_ARG_Y, 9}}, 2);
  check_split("log_softmax backward split, neighbours", &lsm_bwd, limit,
              (placed[]){{GK_ARG_DY, 0}, {GK_ARG_Y, 2001}, {GK_ARG_DX, 4001}}, 3);
  gk_op_desc ln = make(GK_OP_LAYERNORM, 2, nrows);
  ln.norm.normalized_rank = 1;
  ln.norm.has_weight = ln.norm.has_bias = 1;
  check_split("layernorm split, neighbours", &ln, limit,
              (placed[]){{GK_ARG_X, 3}, {GK_ARG_WEIGHT, 1983}, {GK_ARG_BIAS, 2016}, {GK_ARG_Y, 2049}, {GK_ARG_MEAN, 4029},
                         {GK_ARG_RSTD, 4089}},
              6);
  gk_op_desc rms_bwd = backward_of(make(GK_OP_RMSNORM, 2, nrows));
  rms_bwd.norm.normalized_rank = 1;
  rms_bwd.norm.has_weight = 0;
  check_split("rmsnorm backward without weight split, neighbours", &rms_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 1981}, {GK_ARG_RSTD, 3961}, {GK_ARG_DX, 4021}}, 4);
  gk_op_desc add = make(GK_OP_ADD, 1, &n), mul_bwd = backward_of(make(GK_OP_MUL, 1, &n));
  add.binary.b_rank = mul_bwd.binary.b_rank = 1;
  add.binary.b_shape[0] = mul_bwd.binary.b_shape[0] = n;
  add.binary.alpha = 0.5;
  mul_bwd.binary.alpha = 1.5;
  check_split("add split, y in b", &add, limit, (placed[]){{GK_ARG_A, 7}, {GK_ARG_B, 3007}, {GK_ARG_Y, 3007}}, 3);
  check_split("mul backward split, neighbours", &mul_bwd, limit,
              (placed[]){{GK_ARG_DY, 7}, {GK_ARG_A, 3007}, {GK_ARG_B, 6007}, {GK_ARG_DA, 9007}, {GK_ARG_DB, 12007}}, 5);
  gk_op_desc geglu = make(GK_OP_GEGLU, 2, grows), swiglu_bwd = backward_of(make(GK_OP_SWIGLU, 1, &n));
  geglu.gated.form = GK_GATED_SPLIT;
  geglu.gated.dim = 1;
  swiglu_bwd.gated.form = GK_GATED_TWO_TENSOR;
  gk_op_desc geglu_bwd = backward_of(geglu);
  check_split("geglu split form split, neighbours", &geglu, limit, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 2643}}, 2);
  check_split("geglu split form backward split, neighbours", &geglu_bwd, limit,
              (placed[]){{GK_ARG_DY, 3}, {GK_ARG_X, 1323}, {GK_ARG_DX, 3963}}, 3);
  check_split("swiglu backward split, neighbours", &swiglu_bwd, limit,
              (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 3001}, {GK_ARG_GATE, 6001}, {GK_ARG_DX, 9001}, {GK_ARG_DGATE, 12001}},
              5);
  test_split_norm_params(limit);
  test_split_cross_entropy(limit);
  test_split_embedding(limit);
  test_split_linear(limit);
  test_split_matmul(limit);
  test_split_rope(limit);
  test_split_binary(limit);
  test_split_conv1d(2 * limit);
  test_split_scan(7 * limit);
  test_split_attention(4 * limit);
}

// f16 and bf16: every op family (run_layouts: the first configurations,
// contiguous and strided), then norms, linear and the scan with f32
// parameters.
static void test_half(void) {
  void (*const op_tests[])(void) = {test_activations, test_gated, test_norms, test_linear_matmul, test_softmax,
                                    test_cross_entropy, test_embedding, test_rope, test_attention, test_binary,
                                    test_conv1d, test_scan};
  for (g_dtype = GK_F16; g_dtype <= GK_BF16; g_dtype++) {
    memset(half_seen, 0, sizeof half_seen);
    for (size_t t = 0; t < sizeof op_tests / sizeof *op_tests; t++) op_tests[t]();
    memset(half_seen, 0, sizeof half_seen);
    g_param_dtype = GK_F32;
    test_norms();
    test_linear_matmul();
    test_scan();
    g_param_dtype = GK_DTYPE_SAME;
  }
  g_dtype = GK_F32;
}

// f16/bf16 results rounded to nearest even as the reference rounds them:
// add and mul with alpha 1 (one correctly rounded f32 operation, then the
// rounding to 16 bits) give ref's bits, packed (contiguous) and staged
// (strided), on random values and on pairs whose results are ties, f16
// subnormals (read and written) or overflow (inf); inf times 0 stays NaN.
static void test_rounding(void) {
  const double u8 = ldexp(1, -8), u11 = ldexp(1, -11), s12 = ldexp(1, -12);
  const double pairs[][2] = {{1 + 2 * u8, u8}, {1, u8}, {-(1 + 2 * u8), -u8}, {1 + 2 * u11, u11}, {1, u11},
                             {65504, 16}, {65504, 8}, {s12, 1.5 * s12}, {s12, 1.25 * s12},
                             {u8, u8 * (1 + 2 * u11)}, {ldexp(1, -20), ldexp(3, -24)}, {INFINITY, 0}, {-3, 1e-3}};
  int npairs = (int)(sizeof pairs / sizeof *pairs);
  g_variant = "";
  for (g_dtype = GK_F16; g_dtype <= GK_BF16; g_dtype++)
    for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++)
      for (layout lay = CONTIGUOUS; lay <= STRIDED; lay += STRIDED - CONTIGUOUS) {
        int64_t n = 300;
        gk_op_desc d = make(op, 1, &n);
        d.binary.b_rank = 1;
        d.binary.b_shape[0] = n;
        char name[320];
        describe(&d, lay, name, sizeof name);
        argset in, ref, got;
        plan_build(&roles, &d, lay, NULL, &in);
        for (int i = 0; i < npairs; i++) {
          tset(&in.b[GK_ARG_A].t, i, pairs[i][0]);
          tset(&in.b[GK_ARG_B].t, i, pairs[i][1]);
        }
        clone_outputs(&roles, &d, &in, lay, &ref);
        clone_outputs(&roles, &d, &in, lay, &got);
        check(run_desc(&d, GK_BACKEND_REF, &ref) == GK_SUCCESS, "%s: ref: %s", name, gk_last_error());
        check(run_desc(&d, GK_BACKEND_WEBGPU, &got) == GK_SUCCESS, "%s: %s", name, gk_last_error());
        const gk_tensor *want = &ref.b[GK_ARG_Y].t, *have = &got.b[GK_ARG_Y].t;
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; i++) {
          uint16_t w = ((const uint16_t *)want->data)[elem_offset(want, i)];
          uint16_t h = ((const uint16_t *)have->data)[elem_offset(have, i)];
          bool both_nan = isnan(tget(want, i)) && isnan(tget(have, i));
          wrong += w != h && !both_nan;
        }
        check(wrong == 0, "%s: %lld of %lld results are not ref's bits", name, (long long)wrong, (long long)n);
        check(tbuf_canaries_intact(&got.b[GK_ARG_Y]), "%s: bytes outside y were written", name);
        free_outputs(&roles, &d, &got);
        free_outputs(&roles, &d, &ref);
        argset_free(&in);
        configs++;
      }
  g_dtype = GK_F32;
}

// f16 and bf16 tensors where they lie: packed runs (even counts from a
// word), staged ones (an odd count, its last word's other half the
// canary; a start in the middle of a word, its other half another
// tensor's; in place; neighbours), the two giving the same bits; f32
// parameters beside 16-bit tensors; runs split in pieces. Places in 2-byte
// units.
static void test_placement_half(void) {
  for (g_dtype = GK_F16; g_dtype <= GK_BF16; g_dtype++) {
    int64_t n = 301, even = 300, rows[2] = {7, 33}, srows[2] = {5, 41}, gshape[2] = {6, 42}, big = 3001;
    gk_op_desc relu = make(GK_OP_RELU, 1, &n), relu_even = make(GK_OP_RELU, 1, &even);
    gk_op_desc gelu_bwd = backward_of(make(GK_OP_GELU, 1, &n)), gelu_bwd_even = backward_of(make(GK_OP_GELU, 1, &even));
    check_placed("relu 16-bit, packed", &relu_even, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 512}}, 2);
    check_placed("relu 16-bit, an odd count (staged)", &relu, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 512}}, 2);
    check_placed("relu 16-bit, y from the middle of x's last word", &relu, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 301}},
                 2);
    check_placed("relu 16-bit, in place from the middle of a word", &relu, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 3}}, 2);
    check_placed("gelu backward 16-bit, packed", &gelu_bwd_even,
                 (placed[]){{GK_ARG_X, 0}, {GK_ARG_DY, 512}, {GK_ARG_DX, 1024}}, 3);
    check_placed("gelu backward 16-bit, neighbours in shared words", &gelu_bwd,
                 (placed[]){{GK_ARG_X, 1}, {GK_ARG_DY, 302}, {GK_ARG_DX, 603}}, 3);
    gk_op_desc add = make(GK_OP_ADD, 1, &even), mul = make(GK_OP_MUL, 1, &n);
    add.binary.b_rank = mul.binary.b_rank = 1;
    add.binary.b_shape[0] = even;
    mul.binary.b_shape[0] = n;
    add.binary.alpha = 0.5;
    mul.binary.alpha = 1.5;
    gk_op_desc mul_bwd = backward_of(mul), mul_bwd_even = mul_bwd;
    mul_bwd_even.shape[0] = mul_bwd_even.binary.b_shape[0] = even;
    check_placed("add 16-bit, packed", &add, (placed[]){{GK_ARG_A, 0}, {GK_ARG_B, 512}, {GK_ARG_Y, 1024}}, 3);
    check_placed("add 16-bit, y in b from the middle of a word", &add,
                 (placed[]){{GK_ARG_A, 1}, {GK_ARG_B, 301}, {GK_ARG_Y, 301}}, 3);
    check_placed("mul backward 16-bit, packed", &mul_bwd_even,
                 (placed[]){{GK_ARG_DY, 0}, {GK_ARG_A, 512}, {GK_ARG_B, 1024}, {GK_ARG_DA, 1536}, {GK_ARG_DB, 2048}},
                 5);
    check_placed("mul backward 16-bit, neighbours", &mul_bwd,
                 (placed[]){{GK_ARG_DY, 1}, {GK_ARG_A, 302}, {GK_ARG_B, 603}, {GK_ARG_DA, 904}, {GK_ARG_DB, 1205}}, 5);
    gk_op_desc glu = make(GK_OP_GLU, 2, gshape), swiglu_bwd = backward_of(make(GK_OP_SWIGLU, 1, &even));
    glu.gated.form = GK_GATED_SPLIT;
    glu.gated.dim = -1;
    swiglu_bwd.gated.form = GK_GATED_TWO_TENSOR;
    gk_op_desc glu_bwd = backward_of(glu), glu_rows = glu;
    glu_rows.gated.dim = 0;  // a half of 3 x 42: whole words (the last dim's half, 21, is not)
    check_placed("glu split 16-bit, an odd half (staged)", &glu, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 512}}, 2);
    check_placed("glu split backward 16-bit, an odd half (staged)", &glu_bwd,
                 (placed[]){{GK_ARG_DY, 0}, {GK_ARG_X, 512}, {GK_ARG_DX, 1024}}, 3);
    check_placed("glu split 16-bit along dim 0, packed", &glu_rows, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 512}}, 2);
    check_placed("glu split 16-bit along dim 0, neighbours", &glu_rows, (placed[]){{GK_ARG_X, 1}, {GK_ARG_Y, 253}}, 2);
    check_placed("swiglu backward 16-bit, packed", &swiglu_bwd,
                 (placed[]){{GK_ARG_DY, 0}, {GK_ARG_X, 512}, {GK_ARG_GATE, 1024}, {GK_ARG_DX, 1536},
                            {GK_ARG_DGATE, 2048}}, 5);
    gk_op_desc ln = make(GK_OP_LAYERNORM, 2, rows);
    ln.norm.normalized_rank = 1;
    ln.norm.has_weight = ln.norm.has_bias = 1;
    ln.param_dtype = GK_F32;
    gk_op_desc ln_bwd = backward_of(ln);
    ln_bwd.accumulate = 1;
    check_placed("layernorm 16-bit, f32 weight and bias, neighbours", &ln,
                 (placed[]){{GK_ARG_X, 1}, {GK_ARG_WEIGHT, 232}, {GK_ARG_BIAS, 298}, {GK_ARG_Y, 364},
                            {GK_ARG_MEAN, 596}, {GK_ARG_RSTD, 610}}, 6);
    check_placed("layernorm backward 16-bit, f32 weight, accumulating, neighbours", &ln_bwd,
                 (placed[]){{GK_ARG_DY, 1}, {GK_ARG_X, 232}, {GK_ARG_WEIGHT, 464}, {GK_ARG_RSTD, 530},
                            {GK_ARG_MEAN, 544}, {GK_ARG_DX, 559}, {GK_ARG_DWEIGHT, 790}, {GK_ARG_DBIAS, 856}}, 8);
    gk_op_desc softmax = make(GK_OP_SOFTMAX, 2, srows);
    check_placed("softmax 16-bit, in place from the middle of a word", &softmax,
                 (placed[]){{GK_ARG_X, 5}, {GK_ARG_Y, 5}}, 2);
    int64_t logits[2] = {6, 11}, positions[2] = {3, 7};
    gk_op_desc ce = make(GK_OP_CROSS_ENTROPY, 2, logits);
    ce.index_dtype = GK_I64;
    ce.ce.fused_grad = 1;
    check_placed("cross-entropy fused 16-bit, i64 targets, neighbours", &ce,
                 (placed[]){{GK_ARG_LOGITS, 1}, {GK_ARG_TARGET, 68}, {GK_ARG_LOSS, 92}, {GK_ARG_DLOGITS, 95}}, 4);
    gk_op_desc emb = make(GK_OP_EMBEDDING, 2, positions);
    emb.embedding.num_embeddings = 6;
    emb.embedding.dim = 9;
    emb.index_dtype = GK_I32;
    gk_op_desc emb_bwd = backward_of(emb);
    emb_bwd.accumulate = 1;
    check_placed("embedding 16-bit, table from the middle of a word", &emb,
                 (placed[]){{GK_ARG_WEIGHT, 3}, {GK_ARG_INDEX, 58}, {GK_ARG_Y, 101}}, 3);
    check_placed("embedding backward 16-bit, accumulating, neighbours", &emb_bwd,
                 (placed[]){{GK_ARG_INDEX, 0}, {GK_ARG_DY, 42}, {GK_ARG_DWEIGHT, 231}}, 3);
    int64_t big_even = big - 1;
    gk_op_desc relu_big = make(GK_OP_RELU, 1, &big), relu_big_even = make(GK_OP_RELU, 1, &big_even);
    gk_op_desc add_big = make(GK_OP_ADD, 1, &big);
    add_big.binary.b_rank = 1;
    add_big.binary.b_shape[0] = big;
    check_split("relu 16-bit split, packed", &relu_big_even, 4000, (placed[]){{GK_ARG_X, 0}, {GK_ARG_Y, 3072}}, 2);
    check_split("relu 16-bit split, neighbours", &relu_big, 4000, (placed[]){{GK_ARG_X, 1}, {GK_ARG_Y, 3002}}, 2);
    check_split("add 16-bit split, y in a", &add_big, 4000,
                (placed[]){{GK_ARG_A, 3}, {GK_ARG_B, 3004}, {GK_ARG_Y, 3}}, 3);
  }
  g_dtype = GK_F32;
}

static void test_placement(void) {
  int64_t n = 300, rows[2] = {7, 50};
  gk_op_desc relu = make(GK_OP_RELU, 1, &n), gelu_bwd = make(GK_OP_GELU, 1, &n);
  gelu_bwd.direction = GK_BACKWARD;
  gk_op_desc softmax = make(GK_OP_SOFTMAX, 2, rows), softmax_bwd = softmax;
  softmax_bwd.direction = GK_BACKWARD;
  // Both at 256-byte boundaries, far apart: each bound where it lies.
  check_placed("relu, both bound", &relu, (placed[]){{GK_ARG_X, 64}, {GK_ARG_Y, 1024}}, 2);
  // Unaligned starts whose 256-byte ranges overlap: y staged.
  check_placed("relu, neighbours", &relu, (placed[]){{GK_ARG_X, 3}, {GK_ARG_Y, 303}}, 2);
  check_placed("relu, in place", &relu, (placed[]){{GK_ARG_X, 5}, {GK_ARG_Y, 5}}, 2);
  check_placed("gelu backward, neighbours", &gelu_bwd,
               (placed[]){{GK_ARG_X, 1}, {GK_ARG_DY, 301}, {GK_ARG_DX, 640}}, 3);
  check_placed("gelu backward, dx in dy", &gelu_bwd, (placed[]){{GK_ARG_X, 0}, {GK_ARG_DY, 512}, {GK_ARG_DX, 512}}, 3);
  gk_op_desc sigmoid_y = make(GK_OP_SIGMOID, 1, &n);
  sigmoid_y.direction = GK_BACKWARD;
  sigmoid_y.act.from_output = 1;
  check_placed("sigmoid backward from y, dx in y", &sigmoid_y,
               (placed[]){{GK_ARG_Y, 7}, {GK_ARG_DY, 1024}, {GK_ARG_DX, 7}}, 3);
  check_placed("softmax, in place", &softmax, (placed[]){{GK_ARG_X, 9}, {GK_ARG_Y, 9}}, 2);
  check_placed("softmax backward, dx in y", &softmax_bwd,
               (placed[]){{GK_ARG_DY, 0}, {GK_ARG_Y, 700}, {GK_ARG_DX, 700}}, 3);
  test_placement_more();
}

// ---------------------------------------------------------------- optional features

// Whether the device has an optional feature: its description names it
// ("; optional features: subgroups (8-8 wide), timestamp-query").
static bool device_has(const char *feature) {
  return strstr(gk_backend_device_description(GK_BACKEND_WEBGPU), feature) != NULL;
}

// A WebGPU buffer holding the n f32 values v.
static gk_buffer *buffer_of(const float *v, int64_t n) {
  gk_buffer *b = NULL;
  check(gk_buffer_alloc(GK_BACKEND_WEBGPU, (size_t)(n ? n : 1) * 4, &b) == GK_SUCCESS, "gk_buffer_alloc: %s",
        gk_last_error());
  if (b && n) gk_buffer_upload(b, 0, v, (size_t)n * 4);
  return b;
}

// A softmax plan's precision text names the reduction it uses.
static void check_reduction_text(bool subgroups) {
  int64_t shape[2] = {4, 9};
  gk_op_desc d = make(GK_OP_SOFTMAX, 2, shape);
  d.backend = GK_BACKEND_WEBGPU;
  gk_plan *plan = NULL;
  gk_plan_info info;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS && gk_plan_get_info(plan, &info) == GK_SUCCESS, "softmax plan: %s",
        gk_last_error());
  if (plan)
    check((strstr(info.math, "subgroupAdd") != NULL) == subgroups, "%s: the plan's math says '%s'", g_variant,
          info.math);
  gk_plan_destroy(plan);
}

// Clipping's sum of squares over three gradients (one shorter than a
// subgroup, one ragged, one of several workgroups) against the sum in
// double; the same bits twice.
static void check_sum_squares(void) {
  const int64_t n[3] = {5, 70, 5000};
  gk_buffer *bufs[3];
  gk_tensor grads[3];
  double want = 0;
  for (int i = 0; i < 3; i++) {
    float *v = malloc((size_t)n[i] * 4);
    for (int64_t j = 0; j < n[i]; j++) {
      v[j] = (float)rng_uniform(-1, 1);
      want += (double)v[j] * v[j];
    }
    bufs[i] = buffer_of(v, n[i]);
    grads[i] = device_tensor(bufs[i], GK_F32, 1, &n[i]);
    free(v);
  }
  want = sqrt(want);
  double norms[2] = {0, 0};
  for (int run = 0; run < 2; run++)
    check(gk_clip_grad_norm(3, grads, 1e30, &norms[run]) == GK_SUCCESS, "%s: clip_grad_norm: %s", g_variant,
          gk_last_error());
  check(fabs(norms[0] - want) <= 1e-6 * want, "%s: clipping's norm %.9g, want %.9g", g_variant, norms[0], want);
  check(!memcmp(&norms[0], &norms[1], sizeof norms[0]), "%s: clipping's norm differs between two runs", g_variant);
  for (int i = 0; i < 3; i++) gk_buffer_free(bufs[i]);
}

// The row reductions (softmax and log-softmax forward and backward, the
// norms with their dweight/dbias sums, cross-entropy, clipping's sum of
// squares) where the device has subgroups: the subgroup pipelines, then the
// plain ones forced by the test knob, each against ref and bit-identical run
// to run (test_config); rows shorter than a subgroup, past one, ragged
// (3, 13, 70), parameter sums over as many rows. Elsewhere the plain ones.
static void test_reductions(void) {
  bool subgroups = device_has("subgroups (");
  for (int plain = !subgroups; plain < 2; plain++) {
    gk_webgpu_test_plain_reductions(plain);
    g_variant = plain ? "plain reductions" : "subgroup reductions";
    check_reduction_text(!plain);
    const int64_t lens[] = {3, 13, 70};
    for (int i = g_quick ? 2 : 0; i < 3; i++) {  // --quick: rows of 70 only
      int64_t L = lens[i];
      gk_op_desc sm = MAKE(GK_OP_SOFTMAX, 5, L), lsm = MAKE(GK_OP_LOG_SOFTMAX, 4, L);
      sm.softmax.dim = lsm.softmax.dim = -1;
      gk_op_desc ln = MAKE(GK_OP_LAYERNORM, 9, L), rms = MAKE(GK_OP_RMSNORM, L, 6);
      ln.norm.normalized_rank = rms.norm.normalized_rank = 1;
      ln.norm.has_weight = ln.norm.has_bias = rms.norm.has_weight = 1;
      gk_op_desc ce = MAKE(GK_OP_CROSS_ENTROPY, 6, L), ce_rows = MAKE(GK_OP_CROSS_ENTROPY, L, 5);
      ce.index_dtype = ce_rows.index_dtype = GK_I32;
      ce.ce.label_smoothing = 0.1;
      ce_rows.ce.reduction = GK_REDUCTION_SUM;
      const gk_op_desc *cases[] = {&sm, &lsm, &ln, &rms, &ce, &ce_rows};
      for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) test_config(cases[c], CONTIGUOUS);
    }
    check_sum_squares();
  }
  gk_webgpu_test_plain_reductions(false);
}

// d run `runs` times on WebGPU, on the harness's inputs (plan_build).
static void run_on_device(const gk_op_desc *d, int runs) {
  argset s;
  char name[320];
  check(plan_build(&roles, d, CONTIGUOUS, NULL, &s), "%s: plan: %s", describe(d, CONTIGUOUS, name, sizeof name),
        gk_last_error());
  for (int r = 0; r < runs; r++)
    check(run_desc(d, GK_BACKEND_WEBGPU, &s) == GK_SUCCESS, "%s: %s", describe(d, CONTIGUOUS, name, sizeof name),
          gk_last_error());
  argset_free(&s);
}

// Per-dispatch GPU times. Where the device has timestamp-query: after
// gk_webgpu_timing(1), one time per dispatch of the runs (softmax: 1 pass,
// twice; LayerNorm's backward with dweight: 2; cross-entropy's forward: 2),
// each positive, in dispatch order; none for runs after timing is off.
// Without the feature both calls fail with the reason (no zeros).
static void test_timestamps(void) {
  int64_t rows[2] = {7, 50};
  gk_op_desc sm = make(GK_OP_SOFTMAX, 2, rows), ln_bwd = make(GK_OP_LAYERNORM, 2, rows);
  gk_op_desc ce = make(GK_OP_CROSS_ENTROPY, 2, rows);
  ln_bwd.direction = GK_BACKWARD;
  ln_bwd.norm.has_weight = 1;
  ce.index_dtype = GK_I32;
  gk_webgpu_kernel_time times[16];
  int count = -1;
  if (!device_has("timestamp-query")) {
    gk_status st = gk_webgpu_timing(1);
    check(st == GK_ERR_UNSUPPORTED && strstr(gk_last_error(), "no timestamp-query on this adapter"),
          "timing without timestamp-query: status %d, '%s'", st, gk_last_error());
    st = gk_webgpu_kernel_times(times, 16, &count);
    check(st == GK_ERR_UNSUPPORTED && count == 0 && strstr(gk_last_error(), "no timestamp-query"),
          "kernel times without timestamp-query: status %d, %d times, '%s'", st, count, gk_last_error());
    return;
  }
  check(gk_webgpu_timing(1) == GK_SUCCESS, "gk_webgpu_timing(1): %s", gk_last_error());
  run_on_device(&sm, 2);
  run_on_device(&ln_bwd, 1);
  run_on_device(&ce, 1);
  check(gk_webgpu_kernel_times(times, 16, &count) == GK_SUCCESS, "kernel times: %s", gk_last_error());
  check(count == 6, "%d kernel times for 6 dispatches", count);
  for (int i = 0; i < count; i++) {
    check(times[i].end_ns > times[i].begin_ns, "dispatch %d: begins at %.0f ns, ends at %.0f", i, times[i].begin_ns,
          times[i].end_ns);
    if (i) check(times[i].begin_ns >= times[i - 1].end_ns, "dispatch %d begins at %.0f ns, before %d ends (%.0f)", i,
                 times[i].begin_ns, i - 1, times[i - 1].end_ns);
  }
  check(gk_webgpu_timing(0) == GK_SUCCESS, "gk_webgpu_timing(0): %s", gk_last_error());
  run_on_device(&sm, 1);
  check(gk_webgpu_kernel_times(times, 16, &count) == GK_SUCCESS && count == 0,
        "kernel times after timing is off: %d, %s", count, gk_last_error());
  configs++;
}

static const struct {
  const char *name;
  void (*run)(void);
} families[] = {{"activation", test_activations}, {"gated", test_gated}, {"norm", test_norms},
                {"linear", test_linear_matmul}, {"softmax", test_softmax}, {"cross_entropy", test_cross_entropy},
                {"embedding", test_embedding}, {"rope", test_rope}, {"attention", test_attention},
                {"binary", test_binary}, {"conv1d", test_conv1d}, {"scan", test_scan},
                {"dispatch", test_past_one_dispatch}, {"placement", test_placement},
                {"split", test_split}, {"reductions", test_reductions}, {"timestamps", test_timestamps},
                {"half", test_half}, {"placement_half", test_placement_half}, {"rounding", test_rounding},
                {"bad_input", test_bad_input}};

int main(int argc, char **argv) {
  gk_backend_info bi = {0};
  bool found = false;
  for (int i = 0; i < gk_backend_count(); i++)
    if (gk_backend_get(i, &bi) == GK_SUCCESS && bi.id == GK_BACKEND_WEBGPU) {
      found = true;
      break;
    }
  if (!found || !bi.available) {
    fprintf(stderr, "FAIL test_webgpu_ops: the WebGPU backend is %s\n", found ? bi.reason : "not built in");
    return 1;
  }
  printf("device: %s\n", gk_backend_device_description(GK_BACKEND_WEBGPU));
  int named = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--quick")) g_quick = true;
    else named++;
  }
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    bool wanted = named == 0;
    for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], families[f].name);
    if (wanted) families[f].run();
  }
  printf("configurations x layouts: %d (each forward and backward, against ref and cpu); per op:", configs);
  for (int op = 0; op < GK_OP_COUNT_; op++)
    if (ops_seen[op]) printf(" %s %d", gk_op_name((gk_op)op), ops_seen[op]);
  printf("\n");
  return finish("test_webgpu_ops");
}
