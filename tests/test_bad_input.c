// Bad input: every rejected call returns its status and a message naming the
// argument, and writes nothing to any output.
#include "arg_dtypes.h"
#include "bad_input_harness.h"

static gk_op_desc desc(gk_op op, gk_direction dir, gk_dtype dt, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, dt, rank, shape);
  return d;
}

static bool is_stat(int k) { return k == GK_ARG_RSTD || k == GK_ARG_MEAN; }

// Inputs (the saved statistics and y too, in backward) in [0.5, 1].
static void fill(const gk_op_desc *d, const gk_tensor *t, int k) {
  bool saved_in = (is_stat(k) || k == GK_ARG_Y) && d->direction == GK_BACKWARD;
  if (k == GK_ARG_X || k == GK_ARG_DY || k == GK_ARG_WEIGHT || k == GK_ARG_GATE || saved_in) tfill(t, 0.5, 1.0);
}

// The statistics are outputs when y is passed (forward); y is an input of a
// backward from the output (act.from_output).
static bool is_output(fixture *f, int k) {
  return (k == GK_ARG_Y && f->dir == GK_FORWARD) || k == GK_ARG_DX || k == GK_ARG_DGATE || k == GK_ARG_DWEIGHT ||
         k == GK_ARG_DBIAS || (is_stat(k) && arg_of(f, GK_ARG_Y) && f->dir == GK_FORWARD);
}

static const fixture_roles fixture_roles_of_file = {.dtype_of = expected_arg_dtype, .fill = fill,
                                                    .is_output = is_output};

int main(void) {
  int64_t s2[2] = {4, 6}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {4, -3}, odd[2] = {4, 5}, zero[2] = {4, 0};
  gk_op_desc d;
  gk_plan *p;

  // Descriptions.
  expect(gk_plan_create(NULL, &p), GK_ERR_NULL_POINTER, "'desc'", "create with desc NULL");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2);
  expect(gk_plan_create(&d, NULL), GK_ERR_NULL_POINTER, "'plan'", "create with plan NULL");
  expect(gk_op_desc_init(&d, GK_OP_RELU, GK_FORWARD, GK_F32, 9, s9), GK_ERR_BAD_RANK, "rank = 9", "init rank 9");
  expect(gk_op_desc_init(NULL, GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2), GK_ERR_NULL_POINTER, "'desc'", "init NULL");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2);
  d.rank = 9;
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 9", "desc rank over 8");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, neg);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[1] = -3", "negative dim");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_I32, 2, s2);
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.dtype = i32", "integer dtype for relu");
  d = desc(GK_OP_RELU, GK_FORWARD, (gk_dtype)99, 2, s2);
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.dtype", "unknown dtype");
  d = desc((gk_op)99, GK_FORWARD, GK_F32, 2, s2);
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.op = 99", "unknown op");
  d = desc(GK_OP_RELU, (gk_direction)5, GK_F32, 2, s2);
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.direction = 5", "unknown direction");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2);
  d.backend = (gk_backend)9;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.backend = 9", "unknown backend");
  d.backend = GK_BACKEND_CUDA;
  expect(create(&d), GK_ERR_UNSUPPORTED, "cuda", "cuda backend in a CPU build");
  d = desc(GK_OP_GELU, GK_FORWARD, GK_F32, 2, s2);
  d.act.approximate = (gk_gelu_approx)7;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.act.approximate = 7", "unknown gelu approximation");
  d = desc(GK_OP_SOFTPLUS, GK_BACKWARD, GK_F32, 2, s2);
  d.act.beta = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.act.beta = 0", "softplus beta 0");
  d.act.beta = NAN;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.act.beta", "softplus beta NaN");
  d.act.beta = 1;
  d.act.threshold = NAN;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.act.threshold", "softplus threshold NaN");
  // The backward from the output: relu and sigmoid only, backward only, 0 or 1.
  static const struct {
    gk_op op;
    gk_direction dir;
    int value;
    const char *needle;
  } bad_from_output[] = {
      {GK_OP_GELU, GK_BACKWARD, 1, "gelu: desc.act.from_output = 1"},
      {GK_OP_SILU, GK_BACKWARD, 1, "silu: desc.act.from_output = 1"},
      {GK_OP_SOFTPLUS, GK_BACKWARD, 1, "softplus: desc.act.from_output = 1"},
      {GK_OP_GLU, GK_BACKWARD, 1, "glu: desc.act.from_output = 1"},
      {GK_OP_SWIGLU, GK_BACKWARD, 1, "swiglu: desc.act.from_output = 1"},
      {GK_OP_SIGMOID, GK_FORWARD, 1, "sigmoid forward: desc.act.from_output = 1"},
      {GK_OP_RELU, GK_BACKWARD, 2, "relu: desc.act.from_output = 2"},
      {GK_OP_SIGMOID, GK_BACKWARD, -1, "sigmoid: desc.act.from_output = -1"},
  };
  for (size_t i = 0; i < sizeof bad_from_output / sizeof *bad_from_output; i++) {
    d = desc(bad_from_output[i].op, bad_from_output[i].dir, GK_BF16, 2, s2);
    d.act.from_output = bad_from_output[i].value;
    expect(create(&d), GK_ERR_INVALID_VALUE, bad_from_output[i].needle, "act.from_output refused");
  }
  d = desc(GK_OP_GLU, GK_FORWARD, GK_F32, 2, odd);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[1] = 5", "odd split size");
  d = desc(GK_OP_SWIGLU, GK_BACKWARD, GK_F32, 2, s2);
  d.gated.dim = 2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.gated.dim = 2", "split dim out of range");
  d.gated.dim = -3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.gated.dim = -3", "negative split dim out of range");
  d = desc(GK_OP_GEGLU, GK_FORWARD, GK_F32, 0, NULL);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 0", "split of a scalar");
  d = desc(GK_OP_REGLU, GK_FORWARD, GK_F32, 2, s2);
  d.gated.form = (gk_gated_form)5;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.gated.form = 5", "unknown gated form");
  d = desc(GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, s2);
  d.norm.normalized_rank = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.norm.normalized_rank = 0", "normalized rank 0");
  d.norm.normalized_rank = 3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.norm.normalized_rank = 3", "normalized rank over rank");
  d.norm.normalized_rank = 1;
  d.norm.eps = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.norm.eps = 0", "eps 0");
  d.norm.eps = INFINITY;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.norm.eps = inf", "eps inf");
  d.norm.eps = 1e-6;
  d.norm.has_bias = 1;
  expect(create(&d), GK_ERR_UNSUPPORTED, "has_bias", "rmsnorm with bias");
  d = desc(GK_OP_LAYERNORM, GK_FORWARD, GK_F32, 2, zero);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[1] = 0", "empty normalized dim");
  d = desc(GK_OP_LAYERNORM, GK_BACKWARD, GK_F32, 2, s2);
  d.accumulate = 2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.accumulate = 2", "accumulate not 0/1");
  d.accumulate = 0;
  d.norm.has_weight = 3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.norm.has_weight = 3", "has_weight not 0/1");

  // Parameter dtypes: f32 with 16-bit activations only, and only for ops with parameters.
  d = desc(GK_OP_RMSNORM, GK_FORWARD, GK_BF16, 2, s2);
  d.param_dtype = GK_F64;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = f64 with desc.dtype = bf16", "f64 weight, bf16 x");
  d = desc(GK_OP_LAYERNORM, GK_BACKWARD, GK_F32, 2, s2);
  d.param_dtype = GK_BF16;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = bf16 with desc.dtype = f32", "bf16 weight, f32 x");
  d = desc(GK_OP_LAYERNORM, GK_FORWARD, GK_F16, 2, s2);
  d.param_dtype = GK_I32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = i32 (4)", "integer parameter dtype");
  d.param_dtype = 99;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = ? (99)", "unknown parameter dtype");
  d = desc(GK_OP_SILU, GK_BACKWARD, GK_BF16, 2, s2);
  d.param_dtype = GK_F32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "op silu has no parameters", "parameter dtype for silu");

  // Tensors at run time.
  gk_op_desc relu = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2);
  gk_op_desc swiglu_bwd = desc(GK_OP_SWIGLU, GK_BACKWARD, GK_F32, 2, s2);
  gk_op_desc ln_bwd = desc(GK_OP_LAYERNORM, GK_BACKWARD, GK_F32, 2, s2);
  gk_op_desc rms_fwd = desc(GK_OP_RMSNORM, GK_FORWARD, GK_F16, 2, s2);
  gk_op_desc ln_mixed = desc(GK_OP_LAYERNORM, GK_BACKWARD, GK_BF16, 2, s2);
  ln_mixed.param_dtype = GK_F32;
  EXPECT_RUN(&ln_mixed, arg_of(&f, GK_ARG_WEIGHT)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'weight' has dtype bf16 (3), the plan needs f32", "bf16 weight where param_dtype is f32");
  EXPECT_RUN(&ln_mixed, arg_of(&f, GK_ARG_DBIAS)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'dbias' has dtype bf16 (3), the plan needs f32", "bf16 dbias where param_dtype is f32");
  EXPECT_RUN(&ln_mixed, arg_of(&f, GK_ARG_X)->tensor.dtype = GK_F32, GK_ERR_BAD_DTYPE,
             "'x' has dtype f32 (0), the plan needs bf16", "f32 x with f32 parameters");
  EXPECT_RUN(&relu, f.nargs = 1, GK_ERR_MISSING_ARGUMENT, "'y' is missing", "missing output");
  EXPECT_RUN(&relu, (f.args[1] = f.args[0], f.args[1].kind = GK_ARG_GATE), GK_ERR_UNEXPECTED_ARGUMENT, "'gate'",
             "argument the op does not take");
  EXPECT_RUN(&relu, f.args[1] = f.args[0], GK_ERR_UNEXPECTED_ARGUMENT, "'x' is passed twice", "argument twice");
  EXPECT_RUN(&relu, f.args[1].kind = (gk_arg_kind)99, GK_ERR_UNEXPECTED_ARGUMENT, "args[1].kind = 99",
             "unknown argument kind");
  {
    fixture f;
    fixture_make(&f, &fixture_roles_of_file, &relu);
    expect(gk_plan_run(f.plan, NULL, 2, f.ws, f.ws_bytes), GK_ERR_NULL_POINTER, "'args'", "args NULL");
    fixture_free(&f);
  }
  EXPECT_RUN(&relu, f.nargs = -1, GK_ERR_INVALID_VALUE, "nargs = -1", "negative nargs");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.dtype = GK_F64, GK_ERR_BAD_DTYPE, "'x' has dtype f64",
             "dtype mismatch");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_Y)->tensor.shape[1] = 5, GK_ERR_BAD_SHAPE, "'y' has shape [4, 5]",
             "shape mismatch");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_Y)->tensor.rank = 1, GK_ERR_BAD_RANK, "'y' has rank 1", "rank mismatch");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.rank = 9, GK_ERR_BAD_RANK, "'x' has rank 9", "tensor rank 9");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.data = NULL, GK_ERR_NULL_POINTER, "'x' has data = NULL",
             "NULL data");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.data = (char *)f.b[GK_ARG_X].t.data + 1, GK_ERR_BAD_ALIGNMENT,
             "'x'", "misaligned data");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.device = GK_DEVICE_CUDA, GK_ERR_BAD_DEVICE, "'x' is on device 1",
             "tensor on another device");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_Y)->tensor.strides[0] = 0, GK_ERR_BAD_STRIDES, "'y'",
             "output with a zero stride");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_Y)->tensor.strides[0] = 3, GK_ERR_BAD_STRIDES, "'y'",
             "output whose rows overlap");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.data = (float *)arg_of(&f, GK_ARG_Y)->tensor.data + 1,
             GK_ERR_ALIASING, "'y' overlaps input 'x'", "output shifted over its input");
  EXPECT_RUN(&swiglu_bwd, arg_of(&f, GK_ARG_DX)->tensor.data = arg_of(&f, GK_ARG_X)->tensor.data, GK_ERR_ALIASING,
             "'dx' overlaps input 'x'", "gated dx in place of x");
  EXPECT_RUN(&swiglu_bwd, arg_of(&f, GK_ARG_DY)->tensor.shape[1] = 6, GK_ERR_BAD_SHAPE, "'dy' has shape [4, 6]",
             "gated dy of full size");
  // The backward from the output takes y, not x (and the backward from x not y).
  gk_op_desc sigmoid_bwd_y = desc(GK_OP_SIGMOID, GK_BACKWARD, GK_F32, 2, s2);
  gk_op_desc relu_bwd = desc(GK_OP_RELU, GK_BACKWARD, GK_F32, 2, s2);
  sigmoid_bwd_y.act.from_output = 1;
  EXPECT_RUN(&sigmoid_bwd_y, arg_of(&f, GK_ARG_Y)->kind = GK_ARG_X, GK_ERR_UNEXPECTED_ARGUMENT,
             "sigmoid backward: argument 'x' (args[0]) is not taken by this plan", "x for a backward from y");
  EXPECT_RUN(&sigmoid_bwd_y, (arg_of(&f, GK_ARG_Y)->kind = GK_ARG_DX, f.nargs = 2), GK_ERR_MISSING_ARGUMENT,
             "sigmoid backward: argument 'y' is missing", "y missing in a backward from y");
  EXPECT_RUN(&relu_bwd, arg_of(&f, GK_ARG_X)->kind = GK_ARG_Y, GK_ERR_UNEXPECTED_ARGUMENT,
             "relu backward: argument 'y' (args[0]) is not taken by this plan", "y for a backward from x");
  EXPECT_RUN(&sigmoid_bwd_y, arg_of(&f, GK_ARG_DX)->tensor.data = (float *)arg_of(&f, GK_ARG_Y)->tensor.data + 1,
             GK_ERR_ALIASING, "output 'dx' overlaps input 'y' (only the very same view is allowed)",
             "dx shifted over y");
  EXPECT_RUN(&ln_bwd, arg_of(&f, GK_ARG_DBIAS)->tensor.data = arg_of(&f, GK_ARG_DWEIGHT)->tensor.data,
             GK_ERR_ALIASING, "output 'dweight'", "two outputs in one buffer");
  EXPECT_RUN(&ln_bwd, f.ws_bytes = 8, GK_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes = 8", "workspace too small");
  EXPECT_RUN(&ln_bwd, (free(f.ws), f.ws = NULL), GK_ERR_NULL_POINTER, "'workspace'", "workspace NULL");
  {
    fixture f;
    fixture_make(&f, &fixture_roles_of_file, &ln_bwd);
    expect(gk_plan_run(f.plan, f.args, f.nargs, (char *)f.ws + 8, f.ws_bytes), GK_ERR_BAD_ALIGNMENT,
           "workspace", "misaligned workspace");
    check_untouched(&f, "misaligned workspace");
    fixture_free(&f);
  }
  EXPECT_RUN(&ln_bwd, arg_of(&f, GK_ARG_MEAN)->tensor.dtype = GK_F64, GK_ERR_BAD_DTYPE, "'mean' has dtype f64",
             "saved mean of the wrong dtype");
  EXPECT_RUN(&relu, arg_of(&f, GK_ARG_X)->tensor.strides[0] = INT64_MAX / 2, GK_ERR_BAD_STRIDES,
             "'x' with shape [4, 6] and strides", "strides past the address space");
  // An empty tensor's strides too: kernels compute with them (layernorm's
  // row step in bytes overflowed before).
  int64_t no_rows[2] = {0, 6};
  gk_op_desc ln_bwd_empty = desc(GK_OP_LAYERNORM, GK_BACKWARD, GK_F32, 2, no_rows);
  EXPECT_RUN(&ln_bwd_empty, arg_of(&f, GK_ARG_X)->tensor.strides[0] = ((int64_t)1 << 62) + 1, GK_ERR_BAD_STRIDES,
             "'x' with shape [0, 6] and strides", "empty tensor with strides past the address space");
  {
    fixture f;
    fixture_make(&f, &fixture_roles_of_file, &ln_bwd);
    // The workspace placed over dx's memory (dx moved into the workspace buffer).
    arg_of(&f, GK_ARG_DX)->tensor.data = f.ws;
    expect(run(&f), GK_ERR_ALIASING, "workspace overlaps argument 'dx'", "workspace over an output");
    fixture_free(&f);
  }
  EXPECT_RUN(&rms_fwd, arg_of(&f, GK_ARG_RSTD)->tensor.dtype = GK_F16, GK_ERR_BAD_DTYPE, "'rstd' has dtype f16",
             "rstd in f16 (must be f32)");
  EXPECT_RUN(&rms_fwd, arg_of(&f, GK_ARG_WEIGHT)->tensor.shape[0] = 4, GK_ERR_BAD_SHAPE, "'weight' has shape [4]",
             "weight of the wrong size");

  // Other entry points.
  expect(gk_set_num_threads(0), GK_ERR_INVALID_VALUE, "n = 0", "zero threads");
  gk_tensor t;
  expect(gk_tensor_init(&t, NULL, GK_F32, -1, s2), GK_ERR_BAD_RANK, "rank = -1", "tensor rank -1");
  gk_dlpack_tensor dl = {0};
  dl.device.device_type = 1;
  dl.ndim = 2;
  dl.shape = s2;
  dl.dtype.code = 2;
  dl.dtype.bits = 32;
  dl.dtype.lanes = 4;
  expect(gk_tensor_from_dlpack(&dl, &t), GK_ERR_BAD_DTYPE, "lanes = 4", "DLPack vector lanes");
  dl.dtype.lanes = 1;
  dl.device.device_type = 7;
  expect(gk_tensor_from_dlpack(&dl, &t), GK_ERR_BAD_DEVICE, "device_type = 7", "DLPack device");
  size_t bytes;
  expect(gk_plan_workspace_size(NULL, &bytes), GK_ERR_NULL_POINTER, "'plan'", "workspace size of NULL");
  d = desc(GK_OP_RELU, GK_FORWARD, GK_F32, 2, s2);
  gk_plan_create(&d, &p);
  int rank;
  int64_t shape[GK_MAX_RANK];
  expect(gk_plan_arg_shape(p, (gk_arg_kind)99, &rank, shape), GK_ERR_INVALID_VALUE, "kind = 99",
         "argument shape of an unknown kind");
  gk_plan_destroy(p);

  printf("bad inputs checked: %d\n", cases);
  return finish("test_bad_input");
}
