// Bad input to the transformer ops: every rejected call returns its status
// and a message naming the argument and the value, and writes nothing to any
// output (nor to the logits a rejected in-place cross-entropy would have
// overwritten).
#include "arg_dtypes.h"
#include "bad_input_harness.h"

static gk_op_desc desc(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, GK_F32, rank, shape);
  return d;
}

static bool is_output(gk_direction dir, int k) {
  if (dir == GK_FORWARD)
    return k == GK_ARG_Y || k == GK_ARG_LSE || k == GK_ARG_LOSS || k == GK_ARG_DLOGITS;
  return k == GK_ARG_DX || k == GK_ARG_DWEIGHT || k == GK_ARG_DBIAS || k == GK_ARG_DA || k == GK_ARG_DB ||
         k == GK_ARG_DLOGITS || k == GK_ARG_DQ || k == GK_ARG_DK || k == GK_ARG_DV;
}

// Inputs valid (floats in [0.5, 1], indices 0), outputs left as canaries.
static void fill(const gk_op_desc *d, const gk_tensor *t, int k) {
  if (is_output(d->direction, k)) return;
  if (k == GK_ARG_TARGET || k == GK_ARG_INDEX) tfill(t, 0, 0);
  else tfill(t, 0.5, 1.0);
}

static bool is_fixture_output(fixture *f, int k) { return is_output(f->dir, k); }

static const fixture_roles fixture_roles_of_file = {.dtype_of = expected_arg_dtype, .fill = fill,
                                                    .is_output = is_fixture_output};

static void set_index(fixture *f, gk_arg_kind k, int64_t i, int64_t v) { tset(&f->b[k].t, i, (double)v); }

int main(void) {
  gk_op_desc d;
  int64_t x2[2] = {4, 6}, x3[3] = {2, 3, 5}, x1[1] = {5}, q[4] = {1, 4, 6, 8}, r4[4] = {1, 3, 2, 8};

  // ---- descriptions
  d = desc(GK_OP_LINEAR, GK_FORWARD, 2, x2);
  d.linear.out_features = -1;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.linear.out_features = -1", "linear negative N");
  d = desc(GK_OP_LINEAR, GK_BACKWARD, 0, NULL);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 0", "linear of a scalar");
  d = desc(GK_OP_LINEAR, GK_BACKWARD, 2, x2);
  d.dtype = GK_F16;
  d.param_dtype = GK_BF16;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.param_dtype = bf16 with desc.dtype = f16", "linear bf16 bias, f16 x");
  d = desc(GK_OP_MATMUL, GK_FORWARD, 2, x2);
  d.dtype = GK_BF16;
  d.param_dtype = GK_F32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "op matmul has no parameters", "matmul with a parameter dtype");
  d = desc(GK_OP_MATMUL, GK_FORWARD, 1, x1);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 1", "matmul of a vector");
  d = desc(GK_OP_MATMUL, GK_BACKWARD, 2, x2);
  d.accumulate = 1;
  expect(create(&d), GK_ERR_UNSUPPORTED, "desc.accumulate = 1", "matmul accumulate");
  d = desc(GK_OP_MATMUL, GK_FORWARD, 2, x2);
  d.matmul.trans_a = 2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.matmul.trans_a = 2", "matmul trans_a not 0/1");
  d = desc(GK_OP_SOFTMAX, GK_FORWARD, 2, x2);
  d.softmax.dim = 2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.softmax.dim = 2", "softmax dim out of range");
  d = desc(GK_OP_LOG_SOFTMAX, GK_BACKWARD, 0, NULL);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 0", "log_softmax of a scalar");
  d = desc(GK_OP_CROSS_ENTROPY, GK_FORWARD, 2, x2);
  d.index_dtype = GK_F32;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.index_dtype = f32", "cross-entropy float targets");
  d = desc(GK_OP_CROSS_ENTROPY, GK_FORWARD, 2, x2);
  d.ce.label_smoothing = 1.5;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.ce.label_smoothing = 1.5", "label smoothing over 1");
  d.ce.label_smoothing = 0;
  d.ce.reduction = (gk_reduction)7;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.ce.reduction = 7", "unknown reduction");
  d.ce.reduction = GK_REDUCTION_SUM;
  d.ce.grad_scale = INFINITY;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.ce.grad_scale = inf", "infinite grad scale");
  int64_t novocab[2] = {4, 0};
  d = desc(GK_OP_CROSS_ENTROPY, GK_BACKWARD, 2, novocab);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[1] = 0", "cross-entropy with no classes");
  d = desc(GK_OP_EMBEDDING, GK_FORWARD, 2, x2);
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.embedding.num_embeddings = 0", "embedding without a vocabulary");
  d.embedding.num_embeddings = 9;
  d.embedding.dim = 4;
  d.embedding.padding_idx = 9;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.embedding.padding_idx = 9", "padding_idx out of range");
  d.embedding.padding_idx = -1;
  // An empty weight (dim 0) of a vocabulary so large that the backward's
  // workspace size overflowed before.
  d.direction = GK_BACKWARD;
  d.embedding.dim = 0;
  d.embedding.num_embeddings = INT64_MAX;
  expect(create(&d), GK_ERR_BAD_SHAPE, "num_embeddings = 9223372036854775807 is too large", "vocabulary past int64");
  d.direction = GK_FORWARD;
  d.embedding.dim = 4;
  d.embedding.num_embeddings = 9;
  d.index_dtype = GK_BF16;
  expect(create(&d), GK_ERR_BAD_DTYPE, "desc.index_dtype = bf16", "embedding bf16 indices");
  int64_t odd[4] = {1, 3, 2, 7};
  d = desc(GK_OP_ROPE, GK_FORWARD, 4, odd);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[3] = 7", "rope odd head dim");
  d = desc(GK_OP_ROPE, GK_BACKWARD, 3, x3);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 3", "rope rank 3");
  d = desc(GK_OP_ROPE, GK_FORWARD, 4, r4);
  d.rope.theta = 0;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.rope.theta = 0", "rope theta 0");
  d.rope.theta = 10000;
  d.rope.offset = -2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.rope.offset = -2", "rope negative offset");
  d.rope.offset = 0;
  d.rope.pairing = (gk_rope_pairing)4;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.rope.pairing = 4", "unknown rope pairing");
  d = desc(GK_OP_ATTENTION, GK_FORWARD, 4, q);
  d.attn.kv_heads = 3;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.attn.kv_heads = 3 does not divide H = 4", "Hkv not dividing H");
  d.attn.kv_heads = -2;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.attn.kv_heads = -2", "negative Hkv");
  d.attn.kv_heads = 2;
  d.attn.scale = NAN;
  expect(create(&d), GK_ERR_INVALID_VALUE, "desc.attn.scale", "attention scale NaN");
  d = desc(GK_OP_ATTENTION, GK_BACKWARD, 3, x3);
  expect(create(&d), GK_ERR_BAD_RANK, "desc.rank = 3", "attention rank 3");
  int64_t b_bad[2] = {4, 5};
  d = desc(GK_OP_ADD, GK_FORWARD, 2, x2);
  d.binary.b_rank = 2;
  memcpy(d.binary.b_shape, b_bad, sizeof b_bad);
  expect(create(&d), GK_ERR_BAD_SHAPE, "desc.shape[1] = 6 and desc.binary.b_shape[1] = 5", "add shapes that do not broadcast");
  d = desc(GK_OP_MUL, GK_BACKWARD, 2, x2);
  d.binary.b_rank = 9;
  expect(create(&d), GK_ERR_BAD_RANK, "desc.binary.b_rank = 9", "mul b rank 9");

  // ---- tensors and data at run time
  gk_op_desc lin = desc(GK_OP_LINEAR, GK_FORWARD, 3, x3);
  lin.linear.out_features = 4;
  EXPECT_RUN(&lin, arg_of(&f, GK_ARG_WEIGHT)->tensor.shape[1] = 4, GK_ERR_BAD_SHAPE, "'weight' has shape [4, 4]",
             "linear weight of the wrong K");
  EXPECT_RUN(&lin, arg_of(&f, GK_ARG_BIAS)->tensor.shape[0] = 5, GK_ERR_BAD_SHAPE, "'bias' has shape [5]",
             "linear bias of the wrong size");
  gk_op_desc lin_mixed = lin;
  lin_mixed.direction = GK_BACKWARD;
  lin_mixed.dtype = GK_BF16;
  lin_mixed.param_dtype = GK_F32;
  EXPECT_RUN(&lin_mixed, arg_of(&f, GK_ARG_DBIAS)->tensor.dtype = GK_BF16, GK_ERR_BAD_DTYPE,
             "'dbias' has dtype bf16 (3), the plan needs f32", "linear bf16 dbias where param_dtype is f32");
  EXPECT_RUN(&lin_mixed, arg_of(&f, GK_ARG_WEIGHT)->tensor.dtype = GK_F32, GK_ERR_BAD_DTYPE,
             "'weight' has dtype f32 (0), the plan needs bf16", "linear f32 weight (only the bias is f32)");
  gk_op_desc mm = desc(GK_OP_MATMUL, GK_BACKWARD, 3, x3);
  EXPECT_RUN(&mm, arg_of(&f, GK_ARG_B)->tensor.shape[0] = 3, GK_ERR_BAD_SHAPE, "'B' has shape [3, 5, 5]",
             "matmul b with the wrong batch");
  gk_op_desc sm = desc(GK_OP_SOFTMAX, GK_BACKWARD, 2, x2);
  EXPECT_RUN(&sm, f.nargs--, GK_ERR_MISSING_ARGUMENT, "'dx' is missing", "softmax backward without dx");

  gk_op_desc ce = desc(GK_OP_CROSS_ENTROPY, GK_FORWARD, 2, x2);
  EXPECT_RUN(&ce, set_index(&f, GK_ARG_TARGET, 3, 6), GK_ERR_INVALID_VALUE, "target[3] = 6 is outside 0..5",
             "target out of range");
  EXPECT_RUN(&ce, set_index(&f, GK_ARG_TARGET, 0, -1), GK_ERR_INVALID_VALUE, "target[0] = -1", "negative target");
  EXPECT_RUN(&ce, arg_of(&f, GK_ARG_TARGET)->tensor.dtype = GK_I32, GK_ERR_BAD_DTYPE, "'target' has dtype i32",
             "targets of the other index dtype");
  EXPECT_RUN(&ce, (arg_of(&f, GK_ARG_LOSS)->tensor.rank = 1, arg_of(&f, GK_ARG_LOSS)->tensor.shape[0] = 1),
             GK_ERR_BAD_RANK, "'loss' has rank 1", "loss as a vector");
  {
    // fused gradient in place over the logits, with a bad target: the logits stay
    gk_op_desc fused = ce;
    fused.ce.fused_grad = 1;
    fixture f;
    fixture_make(&f, &fixture_roles_of_file, &fused);
    *arg_of(&f, GK_ARG_DLOGITS) = (gk_arg){GK_ARG_DLOGITS, f.b[GK_ARG_LOGITS].t};
    set_index(&f, GK_ARG_TARGET, 2, 100);
    tbuf keep = tbuf_make(GK_F32, 2, x2, CONTIGUOUS);
    tcopy_values(&keep.t, &f.b[GK_ARG_LOGITS].t);
    expect(run(&f), GK_ERR_INVALID_VALUE, "target[2] = 100", "in-place fused cross-entropy, bad target");
    check(tbits_equal(&keep.t, &f.b[GK_ARG_LOGITS].t), "in-place fused cross-entropy: logits written");
    check_untouched(&f, "in-place fused cross-entropy");
    tbuf_free(&keep);
    fixture_free(&f);
  }
  gk_op_desc ce_b = desc(GK_OP_CROSS_ENTROPY, GK_BACKWARD, 2, x2);
  EXPECT_RUN(&ce_b, arg_of(&f, GK_ARG_DLOGITS)->tensor.data = (float *)arg_of(&f, GK_ARG_LOGITS)->tensor.data + 1,
             GK_ERR_ALIASING, "'dlogits' overlaps input 'logits'", "dlogits shifted over the logits");

  gk_op_desc emb = desc(GK_OP_EMBEDDING, GK_FORWARD, 2, x2);
  emb.embedding.num_embeddings = 10;
  emb.embedding.dim = 3;
  EXPECT_RUN(&emb, set_index(&f, GK_ARG_INDEX, 2, 10), GK_ERR_INVALID_VALUE, "index[2] = 10 is outside 0..9",
             "token id past the vocabulary");
  EXPECT_RUN(&emb, arg_of(&f, GK_ARG_INDEX)->tensor.dtype = GK_F32, GK_ERR_BAD_DTYPE, "'index' has dtype f32",
             "float token ids");
  gk_op_desc emb_b = emb;
  emb_b.direction = GK_BACKWARD;
  emb_b.index_dtype = GK_I32;
  EXPECT_RUN(&emb_b, set_index(&f, GK_ARG_INDEX, 23, -5), GK_ERR_INVALID_VALUE, "index[23] = -5",
             "negative token id in backward");

  gk_op_desc att = desc(GK_OP_ATTENTION, GK_FORWARD, 4, q);
  att.attn.kv_heads = 2;
  EXPECT_RUN(&att, arg_of(&f, GK_ARG_K)->tensor.shape[1] = 4, GK_ERR_BAD_SHAPE, "'k' has shape [1, 4, 6, 8]",
             "k with H heads instead of Hkv");
  EXPECT_RUN(&att, arg_of(&f, GK_ARG_LSE)->tensor.dtype = GK_F16, GK_ERR_BAD_DTYPE, "'lse' has dtype f16",
             "lse in f16");
  gk_op_desc att_b = att;
  att_b.direction = GK_BACKWARD;
  EXPECT_RUN(&att_b, arg_of(&f, GK_ARG_V)->tensor.shape[2] = 5, GK_ERR_BAD_SHAPE, "'v' has shape [1, 2, 5, 8]",
             "v of another length");

  int64_t bias[1] = {6};
  gk_op_desc add = desc(GK_OP_ADD, GK_FORWARD, 2, x2);
  add.binary.b_rank = 1;
  add.binary.b_shape[0] = 6;
  EXPECT_RUN(&add, arg_of(&f, GK_ARG_Y)->tensor.data = arg_of(&f, GK_ARG_B)->tensor.data, GK_ERR_ALIASING,
             "'y' overlaps input 'B'", "y over a broadcast operand");
  gk_op_desc mul_b = desc(GK_OP_MUL, GK_BACKWARD, 1, bias);
  mul_b.binary.b_rank = 2;
  memcpy(mul_b.binary.b_shape, x2, sizeof x2);
  EXPECT_RUN(&mul_b, arg_of(&f, GK_ARG_DA)->tensor.shape[0] = 4, GK_ERR_BAD_SHAPE, "'dA' has shape [4]",
             "da of the broadcast shape");

  gk_op_desc rope = desc(GK_OP_ROPE, GK_FORWARD, 4, r4);
  EXPECT_RUN(&rope, arg_of(&f, GK_ARG_Y)->tensor.strides[3] = 0, GK_ERR_BAD_STRIDES, "'y'",
             "rope output with a zero stride");

  printf("bad inputs checked: %d\n", cases);
  return finish("test_transformer_bad_input");
}
