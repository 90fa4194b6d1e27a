// The native side of the WebAssembly op tests (tests/wasm/ops.test.mjs):
// for every op, direction and dtype (with a few option sets per op), random
// inputs and the native library's outputs, written at test time to
// DIR/manifest.json (the cases: description, tensors, tolerance) and
// DIR/data.bin (the tensors' bytes). The node test runs each description on
// the same inputs in gradkern.wasm and compares the outputs within the
// tolerances of the C op tests (tol_of of the output's dtype; linear and
// matmul in f32 with atol 1e-4 as test_transformer; the scan's parameter
// gradients in f32 at 4x as test_mamba).
//
// The inputs of a backward case that forward produces (y, rstd, mean, lse,
// chunk_states) come from a native forward run on the same inputs, so they
// are consistent; every other input is random (indices in range).
//
// usage: wasm_reference DIR
#include "arg_dtypes.h"
#include "core/internal.h"  // the plan's argument specs: which arguments it writes
#include "gradkern.h"
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *manifest, *data;
static long data_offset;
static int cases;

// ---------------------------------------------------------------- a description and its JSON

// A description and the JSON the JavaScript API takes for it (the fields
// set, by C name).
typedef struct case_desc {
  gk_op_desc d;
  char json[1024];
  size_t len;
} case_desc;

static void json_add(case_desc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_add(case_desc *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->json + c->len, sizeof c->json - c->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof c->json - c->len) {
    fprintf(stderr, "wasm_reference: a description's JSON is too long\n");
    exit(1);
  }
  c->len += (size_t)n;
}

// desc.FIELD = VALUE, recorded for JavaScript under the field's C name.
#define SET(c, field, value) ((c)->d.field = (value), json_add(c, ", \"" #field "\": %.17g", (double)(value)))

static void set_b_shape(case_desc *c, int rank, const int64_t *shape) {
  c->d.binary.b_rank = rank;
  json_add(c, ", \"binary.b_shape\": [");
  for (int i = 0; i < rank; i++) {
    c->d.binary.b_shape[i] = shape[i];
    json_add(c, "%s%lld", i ? ", " : "", (long long)shape[i]);
  }
  json_add(c, "]");
}

static case_desc begin(gk_op op, gk_dtype dt, int rank, const int64_t *shape) {
  case_desc c;
  memset(&c, 0, sizeof c);
  if (gk_op_desc_init(&c.d, op, GK_FORWARD, dt, rank, shape) != GK_SUCCESS) {
    fprintf(stderr, "wasm_reference: %s\n", gk_last_error());
    exit(1);
  }
  json_add(&c, "\"op\": \"%s\", \"dtype\": \"%s\", \"shape\": [", gk_op_name(op), gk_dtype_name(dt));
  for (int i = 0; i < rank; i++) json_add(&c, "%s%lld", i ? ", " : "", (long long)shape[i]);
  json_add(&c, "]");
  return c;
}

// ---------------------------------------------------------------- tensors

typedef struct tensor_set {
  bool have[GK_ARG_COUNT_], output[GK_ARG_COUNT_];
  gk_tensor t[GK_ARG_COUNT_];
} tensor_set;

static void tensor_set_free(tensor_set *s) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k]) free(s->t[k].data);
  memset(s, 0, sizeof *s);
}

static bool is_index(int k) { return k == GK_ARG_TARGET || k == GK_ARG_INDEX; }

static void fill_random(const gk_op_desc *d, const gk_tensor *t, int k) {
  int64_t n = gk_tensor_numel(t);
  int64_t limit = d->op == GK_OP_EMBEDDING ? d->embedding.num_embeddings : d->shape[d->rank - 1];
  for (int64_t i = 0; i < n; i++) {
    double v = rng_uniform(-1, 1);
    if (is_index(k)) v = (double)(int64_t)rng_uniform(0, (double)limit);
    // The scan's decays exp(delta A) below 1: A < 0, delta > 0.
    if (d->op == GK_OP_SELECTIVE_SCAN && k == GK_ARG_A) v = -0.5 - fabs(v);
    if (d->op == GK_OP_SELECTIVE_SCAN && k == GK_ARG_DELTA) v = 0.1 + 0.5 * fabs(v);
    tset(t, i, v);
  }
}

// The tensors of d's plan, contiguous: inputs copied from `from` where it
// has that argument, else random; outputs zero.
static void build(const gk_op_desc *d, const tensor_set *from, tensor_set *s) {
  memset(s, 0, sizeof *s);
  gk_plan *plan;
  if (gk_plan_create(d, &plan) != GK_SUCCESS) {
    fprintf(stderr, "wasm_reference: %s\n", gk_last_error());
    exit(1);
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!plan->args[k].used) continue;
    s->have[k] = true;
    s->output[k] = plan->args[k].is_output;
    gk_dtype dt = expected_arg_dtype(d, k);
    size_t bytes = 1;
    for (int i = 0; i < plan->args[k].rank; i++) bytes *= (size_t)plan->args[k].shape[i];
    s->t[k].data = calloc(1, bytes * gk_dtype_size(dt) + 1);
    gk_tensor_init(&s->t[k], s->t[k].data, dt, plan->args[k].rank, plan->args[k].shape);
    if (s->output[k]) continue;
    if (from && from->have[k]) memcpy(s->t[k].data, from->t[k].data, bytes * gk_dtype_size(dt));
    else fill_random(d, &s->t[k], k);
  }
  gk_plan_destroy(plan);
}

static void run(const gk_op_desc *d, tensor_set *s) {
  gk_arg args[GK_ARG_COUNT_];
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k]) args[n++] = (gk_arg){(gk_arg_kind)k, s->t[k]};
  gk_plan *plan;
  size_t ws = 0;
  gk_status st = gk_plan_create(d, &plan);
  if (st == GK_SUCCESS) st = gk_plan_workspace_size(plan, &ws);
  void *w = ws_alloc(ws);
  if (st == GK_SUCCESS) st = gk_plan_run(plan, args, n, w, ws);
  free(w);
  gk_plan_destroy(plan);
  if (st != GK_SUCCESS) {
    fprintf(stderr, "wasm_reference: %s\n", gk_last_error());
    exit(1);
  }
}

// The tolerance of output k, as the C op tests compare the CPU backend.
static tol tolerance(const gk_op_desc *d, int k, gk_dtype out) {
  tol t = tol_of(out);
  if (out == GK_F32 && (d->op == GK_OP_LINEAR || d->op == GK_OP_MATMUL)) t.atol = 1e-4;
  bool scan_param_grad = k == GK_ARG_DA || k == GK_ARG_DB || k == GK_ARG_DC || k == GK_ARG_DD ||
                         k == GK_ARG_DDELTA_BIAS;
  if (d->op == GK_OP_SELECTIVE_SCAN && scan_param_grad && d->dtype == GK_F32) t = (tol){4e-5, 4e-5};
  return t;
}

// One case into the manifest and data.bin.
static void emit(const case_desc *c, gk_direction dir, const tensor_set *s) {
  fprintf(manifest, "%s\n{\"name\": \"%s %s %s #%d\", \"desc\": {%s, \"direction\": \"%s\"}, \"tensors\": [",
          cases ? "," : "", gk_op_name(c->d.op), dir == GK_FORWARD ? "forward" : "backward",
          gk_dtype_name(c->d.dtype), cases, c->json, dir == GK_FORWARD ? "forward" : "backward");
  gk_op_desc d = c->d;
  d.direction = dir;
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!s->have[k]) continue;
    const gk_tensor *t = &s->t[k];
    size_t bytes = (size_t)gk_tensor_numel(t) * gk_dtype_size(t->dtype);
    tol tl = tolerance(&d, k, t->dtype);
    fprintf(manifest, "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"output\": %s, \"offset\": %ld, \"bytes\": %zu, "
            "\"rtol\": %g, \"atol\": %g}",
            n++ ? ", " : "", gk_arg_name((gk_arg_kind)k), gk_dtype_name(t->dtype), s->output[k] ? "true" : "false",
            data_offset, bytes, tl.rtol, tl.atol);
    if (fwrite(t->data, 1, bytes, data) != bytes) {
      fprintf(stderr, "wasm_reference: writing data.bin failed\n");
      exit(1);
    }
    data_offset += (long)bytes;
  }
  fprintf(manifest, "]}");
  cases++;
}

// Forward on random inputs; then backward, its saved inputs from forward
// (with from_output, relu and sigmoid backward from y: the option, the
// backward's only, set after the forward).
static void forward_then_backward(case_desc c, bool from_output) {
  tensor_set fwd, bwd;
  build(&c.d, NULL, &fwd);
  run(&c.d, &fwd);
  emit(&c, GK_FORWARD, &fwd);
  if (from_output) SET(&c, act.from_output, 1);
  // Forward's inputs and outputs, by argument kind, feed backward's inputs.
  gk_op_desc b = c.d;
  b.direction = GK_BACKWARD;
  tensor_set fwd_all = fwd;
  for (int k = 0; k < GK_ARG_COUNT_; k++) fwd_all.output[k] = false;
  build(&b, &fwd_all, &bwd);
  run(&b, &bwd);
  emit(&c, GK_BACKWARD, &bwd);
  tensor_set_free(&fwd);
  tensor_set_free(&bwd);
}

static void forward_and_backward(case_desc c) { forward_then_backward(c, false); }

// ---------------------------------------------------------------- the cases

static void op_cases(gk_dtype dt) {
  int64_t ew[2] = {3, 37};
  const gk_op acts[] = {GK_OP_RELU, GK_OP_GELU, GK_OP_SILU, GK_OP_SIGMOID, GK_OP_SOFTPLUS};
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) forward_and_backward(begin(acts[i], dt, 2, ew));
  forward_then_backward(begin(GK_OP_RELU, dt, 2, ew), true);
  forward_then_backward(begin(GK_OP_SIGMOID, dt, 2, ew), true);
  case_desc c = begin(GK_OP_GELU, dt, 2, ew);
  SET(&c, act.approximate, GK_GELU_TANH);
  forward_and_backward(c);
  c = begin(GK_OP_SOFTPLUS, dt, 2, ew);
  SET(&c, act.beta, 2.0);
  SET(&c, act.threshold, 1.0);
  forward_and_backward(c);

  int64_t split[3] = {2, 3, 34};
  const gk_op gated[] = {GK_OP_GLU, GK_OP_REGLU, GK_OP_SWIGLU, GK_OP_GEGLU};
  for (size_t i = 0; i < sizeof gated / sizeof gated[0]; i++) forward_and_backward(begin(gated[i], dt, 3, split));
  int64_t split1[3] = {2, 6, 17};
  c = begin(GK_OP_SWIGLU, dt, 3, split1);
  SET(&c, gated.dim, 1);
  forward_and_backward(c);
  c = begin(GK_OP_GEGLU, dt, 2, ew);
  SET(&c, gated.form, GK_GATED_TWO_TENSOR);
  SET(&c, act.approximate, GK_GELU_TANH);
  forward_and_backward(c);

  int64_t rows[2] = {5, 24};
  forward_and_backward(begin(GK_OP_RMSNORM, dt, 2, rows));
  forward_and_backward(begin(GK_OP_LAYERNORM, dt, 2, rows));
  int64_t rows3[3] = {3, 4, 6};
  c = begin(GK_OP_LAYERNORM, dt, 3, rows3);
  SET(&c, norm.normalized_rank, 2);
  SET(&c, norm.has_bias, 0);
  forward_and_backward(c);

  int64_t lin[3] = {2, 3, 20};
  c = begin(GK_OP_LINEAR, dt, 3, lin);
  SET(&c, linear.out_features, 12);
  forward_and_backward(c);
  int64_t mm[3] = {2, 5, 7};
  c = begin(GK_OP_MATMUL, dt, 3, mm);
  SET(&c, matmul.n, 6);
  SET(&c, matmul.trans_b, 1);
  forward_and_backward(c);

  int64_t sm[2] = {4, 33};
  forward_and_backward(begin(GK_OP_SOFTMAX, dt, 2, sm));
  forward_and_backward(begin(GK_OP_LOG_SOFTMAX, dt, 2, sm));
  c = begin(GK_OP_SOFTMAX, dt, 2, sm);
  SET(&c, softmax.dim, 0);
  forward_and_backward(c);

  int64_t logits[2] = {6, 11};
  c = begin(GK_OP_CROSS_ENTROPY, dt, 2, logits);
  SET(&c, ce.label_smoothing, 0.1);
  forward_and_backward(c);
  c = begin(GK_OP_CROSS_ENTROPY, dt, 2, logits);
  SET(&c, ce.reduction, GK_REDUCTION_SUM);
  SET(&c, ce.fused_grad, 1);
  SET(&c, index_dtype, GK_I32);
  forward_and_backward(c);

  int64_t ids[2] = {3, 4};
  c = begin(GK_OP_EMBEDDING, dt, 2, ids);
  SET(&c, embedding.num_embeddings, 10);
  SET(&c, embedding.dim, 6);
  SET(&c, embedding.padding_idx, 2);
  forward_and_backward(c);

  int64_t bthd[4] = {2, 5, 3, 8};
  c = begin(GK_OP_ROPE, dt, 4, bthd);
  SET(&c, rope.offset, 3);
  forward_and_backward(c);
  c = begin(GK_OP_ROPE, dt, 4, bthd);
  SET(&c, rope.layout, GK_ROPE_BHTD);
  SET(&c, rope.pairing, GK_ROPE_INTERLEAVED);
  forward_and_backward(c);

  int64_t q[4] = {1, 4, 9, 8};
  c = begin(GK_OP_ATTENTION, dt, 4, q);
  SET(&c, attn.kv_heads, 2);
  forward_and_backward(c);
  c = begin(GK_OP_ATTENTION, dt, 4, q);
  SET(&c, attn.causal, 0);
  SET(&c, attn.scale, 0.3);
  forward_and_backward(c);

  int64_t a[3] = {3, 4, 5}, bshape[2] = {4, 1};
  const gk_op binary[] = {GK_OP_ADD, GK_OP_MUL};
  for (size_t i = 0; i < 2; i++) {
    c = begin(binary[i], dt, 3, a);
    set_b_shape(&c, 2, bshape);
    SET(&c, binary.alpha, 0.5);
    forward_and_backward(c);
  }

  int64_t bdl[3] = {2, 6, 9};
  c = begin(GK_OP_CONV1D, dt, 3, bdl);
  SET(&c, conv.silu, 1);
  SET(&c, conv.has_initial_state, 1);
  SET(&c, conv.has_final_state, 1);
  forward_and_backward(c);
  c = begin(GK_OP_CONV1D, dt, 3, bdl);
  SET(&c, conv.channel_last, 1);
  SET(&c, conv.width, 3);
  SET(&c, conv.has_bias, 0);
  forward_and_backward(c);

  int64_t u[3] = {2, 4, 10};
  c = begin(GK_OP_SELECTIVE_SCAN, dt, 3, u);
  SET(&c, scan.d_state, 3);
  SET(&c, scan.chunk_size, 4);
  SET(&c, scan.has_D, 1);
  SET(&c, scan.has_z, 1);
  SET(&c, scan.has_delta_bias, 1);
  SET(&c, scan.delta_softplus, 1);
  SET(&c, scan.has_final_state, 1);
  forward_and_backward(c);
  c = begin(GK_OP_SELECTIVE_SCAN, dt, 3, u);
  SET(&c, scan.d_state, 2);
  SET(&c, scan.b_layout, GK_SCAN_SHARED);
  SET(&c, scan.c_layout, GK_SCAN_GROUPED);
  SET(&c, scan.groups, 2);
  SET(&c, scan.has_initial_state, 1);
  forward_and_backward(c);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: wasm_reference DIR\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.json", argv[1]);
  manifest = fopen(path, "w");
  snprintf(path, sizeof path, "%s/data.bin", argv[1]);
  data = fopen(path, "wb");
  if (!manifest || !data) {
    fprintf(stderr, "wasm_reference: cannot write in %s\n", argv[1]);
    return 1;
  }
  fprintf(manifest, "[");
  const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) op_cases(dtypes[i]);
  fprintf(manifest, "\n]\n");
  if (fclose(manifest) != 0 || fclose(data) != 0) {
    fprintf(stderr, "wasm_reference: writing %s failed\n", argv[1]);
    return 1;
  }
  printf("wasm_reference: %d cases in %s\n", cases, argv[1]);
  return 0;
}
