// Bad input to conv1d, the selective scan, the optimizers and clipping:
// every rejected call returns its status and a message naming the argument
// and the value, and writes nothing.
#include "arg_dtypes.h"
#include "bad_input_harness.h"

static bool is_output(gk_direction dir, int k) {
  if (dir == GK_FORWARD) return k == GK_ARG_Y || k == GK_ARG_FINAL_STATE || k == GK_ARG_CHUNK_STATES;
  return k == GK_ARG_DX || k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS || k == GK_ARG_DINITIAL_STATE ||
         (k >= GK_ARG_DU && k <= GK_ARG_DDELTA_BIAS && (k - GK_ARG_DU) % 2 == 0);
}

// Inputs in [0.1, 0.5], outputs left as canaries.
static void fill(const gk_op_desc *d, const gk_tensor *t, int k) {
  if (!is_output(d->direction, k)) tfill(t, 0.1, 0.5);
}

static bool is_fixture_output(fixture *f, int k) { return is_output(f->dir, k); }

static const fixture_roles fixture_roles_of_file = {.dtype_of = expected_arg_dtype, .fill = fill,
                                                    .is_output = is_fixture_output};

static gk_op_desc conv(gk_direction dir, int64_t W) {
  int64_t shape[3] = {2, 4, 9};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_CONV1D, dir, GK_F32, 3, shape);
  d.conv.width = W;
  return d;
}

static gk_op_desc scan(gk_direction dir, gk_dtype dt) {
  int64_t shape[3] = {2, 4, 9};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, dir, dt, 3, shape);
  d.scan.d_state = 3;
  d.scan.has_D = d.scan.has_z = d.scan.has_initial_state = 1;
  d.scan.chunk_size = 4;
  return d;
}

// ---------------------------------------------------------------- optimizers

enum { NP = 2 };

// Two parameters of each list an optimizer takes, with known contents.
typedef struct opt_fixture {
  tbuf p[NP], g[NP], m[NP], v[NP], master[NP];
  gk_tensor tp[NP], tg[NP], tm[NP], tv[NP], tmaster[NP];
} opt_fixture;

static void opt_make(opt_fixture *o, gk_dtype dt) {
  int64_t shapes[NP][2] = {{3, 4}, {5, 1}};
  gk_dtype st = dt == GK_F64 ? GK_F64 : GK_F32;
  for (int i = 0; i < NP; i++) {
    o->p[i] = tbuf_make(dt, 2, shapes[i], CONTIGUOUS);
    o->g[i] = tbuf_make(dt, 2, shapes[i], CONTIGUOUS);
    o->m[i] = tbuf_make(st, 2, shapes[i], CONTIGUOUS);
    o->v[i] = tbuf_make(st, 2, shapes[i], CONTIGUOUS);
    o->master[i] = tbuf_make(GK_F32, 2, shapes[i], CONTIGUOUS);
    tfill(&o->p[i].t, -1, 1);
    tfill(&o->g[i].t, -1, 1);
    tfill(&o->m[i].t, 0, 0.1);
    tfill(&o->v[i].t, 0, 0.1);
    tfill(&o->master[i].t, -1, 1);
    o->tp[i] = o->p[i].t;
    o->tg[i] = o->g[i].t;
    o->tm[i] = o->m[i].t;
    o->tv[i] = o->v[i].t;
    o->tmaster[i] = o->master[i].t;
  }
}

// A digest of every byte the fixture holds, to see that nothing changed.
static uint64_t opt_digest(const opt_fixture *o) {
  uint64_t h = 1469598103934665603ull;
  const tbuf *all[5] = {o->p, o->g, o->m, o->v, o->master};
  for (int l = 0; l < 5; l++)
    for (int i = 0; i < NP; i++)
      for (size_t k = 0; k < all[l][i].bytes + 2 * GUARD; k++) h = (h ^ all[l][i].alloc[k]) * 1099511628211ull;
  return h;
}

static void opt_free(opt_fixture *o) {
  for (int i = 0; i < NP; i++) {
    tbuf_free(&o->p[i]);
    tbuf_free(&o->g[i]);
    tbuf_free(&o->m[i]);
    tbuf_free(&o->v[i]);
    tbuf_free(&o->master[i]);
  }
}

// Build a fixture in dtype dt, run `call` after `mutate`, expect a rejection
// and unchanged memory.
#define EXPECT_OPT(dt, mutate, call, status, needle, what)                               \
  do {                                                                                   \
    opt_fixture o;                                                                       \
    opt_make(&o, dt);                                                                    \
    mutate;                                                                              \
    uint64_t before = opt_digest(&o);                                                    \
    expect(call, status, needle, what);                                                  \
    check(opt_digest(&o) == before, "%s: a rejected call wrote memory", what);           \
    opt_free(&o);                                                                        \
  } while (0)

int main(void) {
  gk_op_desc d;
  int64_t s2[2] = {4, 9};

  // ---- conv1d descriptions
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 2, s2);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 2", "conv1d of rank 2");
  d = conv(GK_FORWARD, 0);
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.conv.width = 0", "conv1d width 0");
  d = conv(GK_BACKWARD, -3);
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.conv.width = -3", "conv1d negative width");
  d = conv(GK_FORWARD, 4);
  d.conv.silu = 2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.conv.silu = 2", "conv1d silu not 0/1");
  d = conv(GK_FORWARD, 4);
  d.conv.channel_last = -1;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.conv.channel_last = -1", "conv1d channel_last not 0/1");

  // ---- scan descriptions
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 2, s2);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 2", "scan of rank 2");
  d = scan(GK_FORWARD, GK_F32);
  d.scan.d_state = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.d_state = 0", "scan d_state 0");
  d = scan(GK_FORWARD, GK_F32);
  d.scan.chunk_size = 129;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.chunk_size = 129", "scan chunk over 128");
  d = scan(GK_BACKWARD, GK_F32);
  d.scan.b_layout = GK_SCAN_GROUPED;
  d.scan.c_layout = GK_SCAN_GROUPED;
  d.scan.groups = 3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.groups = 3", "scan groups not dividing D");
  d.scan.groups = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.groups = 0", "scan groups 0");
  d = scan(GK_FORWARD, GK_F32);
  d.scan.c_layout = (gk_scan_layout)7;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.c_layout = 7", "scan unknown layout");
  d = scan(GK_FORWARD, GK_F32);
  d.scan.b_layout = GK_SCAN_BATCH;
  d.scan.c_layout = GK_SCAN_GROUPED;
  d.scan.groups = 2;
  expect(create(&d), GK_ERR_UNSUPPORTED, "same groups", "scan B and C with different groups");
  d = scan(GK_FORWARD, GK_F32);
  d.scan.has_z = 5;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.scan.has_z = 5", "scan has_z not 0/1");
  d = scan(GK_BACKWARD, GK_F32);
  d.accumulate = 3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.accumulate = 3", "scan accumulate not 0/1");

  // ---- scan dtypes: parameters and B, C in f32 with 16-bit activations only
  d = scan(GK_FORWARD, GK_BF16);
  d.param_dtype = GK_F64;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = f64 with desc.dtype = bf16", "scan f64 A, bf16 u");
  d = scan(GK_BACKWARD, GK_F32);
  d.scan.b_dtype = GK_F16;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.scan.b_dtype = f16 with desc.dtype = f32", "scan f16 B, f32 u");
  d = scan(GK_FORWARD, GK_F64);
  d.scan.c_dtype = GK_F32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.scan.c_dtype = f32 with desc.dtype = f64", "scan f32 C, f64 u");
  d = scan(GK_FORWARD, GK_F16);
  d.scan.c_dtype = GK_BF16;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.scan.c_dtype = bf16 with desc.dtype = f16", "scan bf16 C, f16 u");
  d = scan(GK_FORWARD, GK_F16);
  d.scan.b_dtype = GK_I64;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.scan.b_dtype = i64 (5)", "scan integer B dtype");
  d = conv(GK_BACKWARD, 4);
  d.dtype = GK_BF16;
  d.param_dtype = GK_F32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "op conv1d has no parameters", "conv1d f32 weight, bf16 x");

  // ---- scan tensors: shapes that disagree among u, delta, A, B, C, z, and more
  gk_op_desc sf = scan(GK_FORWARD, GK_F32), sb = scan(GK_BACKWARD, GK_F32), sh = scan(GK_FORWARD, GK_F16);
  EXPECT_RUN(&sf, arg_of(&f, GK_ARG_DELTA)->tensor.shape[2] = 8, GK_ERR_BAD_SHAPE, "'delta' has shape [2, 4, 8]",
             "delta shorter than u");
  EXPECT_RUN(&sf, arg_of(&f, GK_ARG_U)->tensor.shape[1] = 5, GK_ERR_BAD_SHAPE, "'u' has shape [2, 5, 9]",
             "u with more channels");
  EXPECT_RUN(&sf, arg_of(&f, GK_ARG_A)->tensor.shape[1] = 4, GK_ERR_BAD_SHAPE, "'A' has shape [4, 4]",
             "A with another d_state");
  EXPECT_RUN(&sb, arg_of(&f, GK_ARG_B)->tensor.shape[2] = 8, GK_ERR_BAD_SHAPE, "'B' has shape [2, 3, 8]",
             "B with fewer steps");
  EXPECT_RUN(&sf, (arg_of(&f, GK_ARG_C)->tensor.rank = 2, arg_of(&f, GK_ARG_C)->tensor.shape[0] = 4),
             GK_ERR_BAD_RANK, "'C' has rank 2", "shared C where per-batch C is planned");
  EXPECT_RUN(&sb, arg_of(&f, GK_ARG_Z)->tensor.shape[0] = 1, GK_ERR_BAD_SHAPE, "'z' has shape [1, 4, 9]",
             "z of another batch");
  EXPECT_RUN(&sb, arg_of(&f, GK_ARG_DB)->tensor.shape[1] = 4, GK_ERR_BAD_SHAPE, "'dB' has shape [2, 4, 9]",
             "dB with another d_state");
  EXPECT_RUN(&sh, arg_of(&f, GK_ARG_INITIAL_STATE)->tensor.dtype = GK_F16, GK_ERR_BAD_DTYPE,
             "'initial_state' has dtype f16", "f16 initial state (the state is f32)");
  EXPECT_RUN(&sh, arg_of(&f, GK_ARG_CHUNK_STATES)->tensor.shape[2] = 2, GK_ERR_BAD_SHAPE,
             "'chunk_states' has shape [2, 4, 2, 3]", "chunk states for another chunk size");
  EXPECT_RUN(&sf, *arg_of(&f, GK_ARG_D) = f.args[--f.nargs], GK_ERR_MISSING_ARGUMENT, "'D' is missing",
             "D missing with has_D");
  EXPECT_RUN(&sf, (f.args[f.nargs] = *arg_of(&f, GK_ARG_Y), f.args[f.nargs++].kind = GK_ARG_FINAL_STATE),
             GK_ERR_UNEXPECTED_ARGUMENT, "'final_state'", "final state without has_final_state");
  EXPECT_RUN(&sb, arg_of(&f, GK_ARG_DC)->tensor.data = arg_of(&f, GK_ARG_DB)->tensor.data, GK_ERR_ALIASING,
             "'dB' overlaps output 'dC'", "dB and dC in one buffer");
  EXPECT_RUN(&sb, arg_of(&f, GK_ARG_DU)->tensor.data = arg_of(&f, GK_ARG_U)->tensor.data, GK_ERR_ALIASING,
             "'du' overlaps input 'u'", "du in place of u");
  EXPECT_RUN(&sb, f.ws_bytes = 64, GK_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes = 64", "scan workspace too small");
  // mixed precision: each tensor in the dtype its field gives
  gk_op_desc sm = scan(GK_BACKWARD, GK_BF16);
  sm.param_dtype = sm.scan.c_dtype = GK_F32;
  EXPECT_RUN(&sm, arg_of(&f, GK_ARG_A)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'A' has dtype bf16 (3), the plan needs f32", "scan bf16 A where param_dtype is f32");
  EXPECT_RUN(&sm, arg_of(&f, GK_ARG_DD)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'dD' has dtype bf16 (3), the plan needs f32", "scan bf16 dD where param_dtype is f32");
  EXPECT_RUN(&sm, arg_of(&f, GK_ARG_B)->tensor.dtype = GK_F32, GK_ERR_BAD_DTYPE,
             "'B' has dtype f32 (0), the plan needs bf16", "scan f32 B where b_dtype follows u");
  EXPECT_RUN(&sm, arg_of(&f, GK_ARG_DC)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'dC' has dtype bf16 (3), the plan needs f32", "scan bf16 dC where c_dtype is f32");

  // ---- conv1d tensors
  gk_op_desc cf = conv(GK_FORWARD, 4), cb = conv(GK_BACKWARD, 4);
  cf.conv.has_initial_state = 1;
  cb.conv.silu = 1;
  EXPECT_RUN(&cf, arg_of(&f, GK_ARG_WEIGHT)->tensor.shape[1] = 5, GK_ERR_BAD_SHAPE, "'weight' has shape [4, 5]",
             "weight wider than the plan");
  EXPECT_RUN(&cf, arg_of(&f, GK_ARG_INITIAL_STATE)->tensor.shape[2] = 4, GK_ERR_BAD_SHAPE,
             "'initial_state' has shape [2, 4, 4]", "initial state of width W (not W-1)");
  EXPECT_RUN(&cb, arg_of(&f, GK_ARG_DX)->tensor.data = arg_of(&f, GK_ARG_X)->tensor.data, GK_ERR_ALIASING,
             "'dx' overlaps input 'x'", "conv dx in place of x");
  EXPECT_RUN(&cb, arg_of(&f, GK_ARG_BIAS)->tensor.shape[0] = 2, GK_ERR_BAD_SHAPE, "'bias' has shape [2]",
             "conv bias of the wrong size");

  // ---- AdamW
  gk_adamw_config ac;
  gk_adamw_config_init(&ac);
  EXPECT_OPT(GK_F32, (void)0, gk_adamw_step(NULL, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_NULL_POINTER,
             "'config'", "adamw config NULL");
  EXPECT_OPT(GK_F32, ac.lr = -1, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_INVALID_VALUE,
             "config->lr = -1", "adamw negative lr");
  gk_adamw_config_init(&ac);
  EXPECT_OPT(GK_F32, ac.beta2 = 1, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_INVALID_VALUE,
             "config->beta2 = 1", "adamw beta2 1");
  gk_adamw_config_init(&ac);
  EXPECT_OPT(GK_F32, (void)0, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 0), GK_ERR_INVALID_VALUE,
             "step = 0", "adamw step 0");
  EXPECT_OPT(GK_F32, (void)0, gk_adamw_step(&ac, -1, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_INVALID_VALUE,
             "n = -1", "adamw negative n");
  EXPECT_OPT(GK_F32, o.tg[1].shape[0] = 4, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1),
             GK_ERR_BAD_SHAPE, "'grads[1]' has shape [4, 1]", "adamw grad of another shape");
  EXPECT_OPT(GK_BF16, o.tm[0].dtype = GK_F16, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, o.tmaster, 1),
             GK_ERR_BAD_DTYPE, "'exp_avg[0]' has dtype f16", "adamw f16 moments for bf16 parameters");
  EXPECT_OPT(GK_BF16, (void)0, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_NULL_POINTER,
             "'master' is NULL", "adamw bf16 parameters without master weights");
  EXPECT_OPT(GK_F32, (void)0, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, o.tmaster, 1),
             GK_ERR_UNEXPECTED_ARGUMENT, "'master[0]'", "adamw master weights for f32 parameters");
  EXPECT_OPT(GK_F32, o.tv[1] = o.tp[1], gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_ALIASING,
             "overlaps", "adamw exp_avg_sq in the parameter's memory");
  EXPECT_OPT(GK_F32, o.tg[0] = o.tp[0], gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1), GK_ERR_ALIASING,
             "overlaps", "adamw gradient in the parameter's memory");
  EXPECT_OPT(GK_F32, o.tp[0].strides[0] = 0, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1),
             GK_ERR_BAD_STRIDES, "'params[0]'", "adamw parameter overlapping itself");
  EXPECT_OPT(GK_F32, o.tp[1].device = GK_DEVICE_CUDA, gk_adamw_step(&ac, NP, o.tp, o.tg, o.tm, o.tv, NULL, 1),
             GK_ERR_BAD_DEVICE, "'params[1]' is on device 1", "adamw parameter on another device");

  // ---- SGD
  gk_sgd_config sc;
  gk_sgd_config_init(&sc);
  sc.momentum = 0.9;
  sc.dampening = 0.1;
  sc.nesterov = 1;
  EXPECT_OPT(GK_F32, (void)0, gk_sgd_step(&sc, NP, o.tp, o.tg, o.tm, NULL, 2), GK_ERR_INVALID_VALUE, "nesterov",
             "sgd nesterov with dampening");
  sc.dampening = 0;
  EXPECT_OPT(GK_F32, (void)0, gk_sgd_step(&sc, NP, o.tp, o.tg, NULL, NULL, 2), GK_ERR_NULL_POINTER,
             "'momentum_buf'", "sgd momentum without buffers");
  gk_sgd_config_init(&sc);
  EXPECT_OPT(GK_F32, (void)0, gk_sgd_step(&sc, NP, o.tp, o.tg, o.tm, NULL, 2), GK_ERR_UNEXPECTED_ARGUMENT,
             "'momentum_buf'", "sgd buffers without momentum");
  EXPECT_OPT(GK_F64, o.tg[0].dtype = GK_F32, gk_sgd_step(&sc, NP, o.tp, o.tg, NULL, NULL, 1), GK_ERR_BAD_DTYPE,
             "'grads[0]' has dtype f32", "sgd f32 gradient for an f64 parameter");

  // ---- clipping
  double norm;
  EXPECT_OPT(GK_F32, (void)0, gk_clip_grad_norm(NP, o.tg, NAN, &norm), GK_ERR_INVALID_VALUE, "max_norm",
             "clip max_norm NaN");
  EXPECT_OPT(GK_F32, (void)0, gk_clip_grad_norm(NP, o.tg, -1, &norm), GK_ERR_INVALID_VALUE, "max_norm = -1",
             "clip negative max_norm");
  EXPECT_OPT(GK_F32, (void)0, gk_clip_grad_norm(NP, o.tg, 1, NULL), GK_ERR_NULL_POINTER, "'total_norm'",
             "clip total_norm NULL");
  EXPECT_OPT(GK_F32, o.tg[1] = o.tg[0], gk_clip_grad_norm(NP, o.tg, 1, &norm), GK_ERR_ALIASING,
             "'grads[1]' overlaps 'grads[0]'", "clip the same gradient twice");
  EXPECT_OPT(GK_F32, o.tg[0].dtype = GK_I32, gk_clip_grad_norm(NP, o.tg, 1, &norm), GK_ERR_BAD_DTYPE,
             "'grads[0]' has dtype i32", "clip integer gradients");
  EXPECT_OPT(GK_F32, (void)0, gk_clip_grad_norm(NP, NULL, 1, &norm), GK_ERR_NULL_POINTER, "'grads'",
             "clip grads NULL");

  printf("bad inputs checked: %d\n", cases);
  return finish("test_bad_input_mamba");
}
