// The WebAssembly kernel ABI (gradkern_abi.h): params structs, the layout
// of each op's tensors in the descriptor's regions, the checks, and the
// call into the plan API. Portable C: a module runs it on its linear memory
// (wasm/abi/module.c), the native tests on an arena standing in for it.
#include "gradkern_abi.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- params
//
// Each op's params struct: little-endian 4-byte fields (u32 unless marked
// i32 or f32), `dtype` (0 f32, 1 f64, 2 f16, 3 bf16), which must be the
// module's, the last field of the base form. The gated ops and RMSNorm also
// take their struct without the dtype field (the form the ABI's first kernels
// defined). Some ops have an extended form: the base form and, after dtype,
// the fields marked "+" (the params size tells which form a host used; an
// absent field takes the default given). Shapes are row-major; every dim
// must be >= 1; flags 0 or 1.
//
//   relu, sigmoid         {num_elements, hidden_dim, dtype, + from_output}   x (num_elements, hidden_dim)
//                         from_output 1 (default 0): backward takes y in place of x (forward ignores it)
//   silu                  {num_elements, hidden_dim, dtype}
//   gelu                  {num_elements, hidden_dim, approximate, dtype}  0 erf, 1 tanh
//   softplus              {num_elements, hidden_dim, f32 beta, f32 threshold, dtype}
//   glu, reglu, swiglu,   {num_elements, hidden_dim, f32 beta, dtype, + split, + split_dim}
//   geglu                 y = x * act(gate); beta must be 1 (geglu: the erf GELU)
//                         split 0 (default): two tensors x, gate (num_elements, hidden_dim);
//                         split 1: one X (num_elements, hidden_dim) split along split_dim (0 or 1,
//                         even there) into halves x | gate (torch's glu), y that dim halved
//   rmsnorm, layernorm    {f32 eps, hidden_dim, num_elements, dtype, + param_dtype}   rows of hidden_dim
//                         param_dtype (default: dtype) of weight, bias and their gradients:
//                         the module's dtype, or 0 (f32) in the f16 and bf16 modules
//   linear                {num_rows, in_features, out_features, has_bias, dtype, + param_dtype}
//                         param_dtype of bias and dbias, as the norms'
//   matmul                {batch, m, k, n, trans_a, trans_b, shared_b, dtype}
//   softmax, log_softmax  {num_elements, hidden_dim, dtype}            along hidden_dim
//   cross_entropy         {num_rows, num_classes, reduction, i32 ignore_index, f32 label_smoothing, dtype,
//                          + index_dtype}   reduction 0 mean, 1 sum
//   embedding             {num_indices, num_embeddings, dim, i32 padding_idx, dtype, + index_dtype}
//                         padding_idx -1: none; index_dtype of target / index: 4 i32 (default), 5 i64
//   rope                  {batch, seq_len, heads, head_dim, layout, pairing, f32 theta, position_offset, dtype}
//                         layout 0 (B,T,H,Dh), 1 (B,H,T,Dh); pairing 0 rotate-half, 1 interleaved
//   attention             {batch, heads, kv_heads, seq_len, head_dim, causal, f32 scale, dtype}
//                         scale 0: 1/sqrt(head_dim)
//   add, mul              {num_rows, hidden_dim, b_rows, b_cols, f32 alpha, dtype}
//                         b (b_rows, b_cols) broadcast: each 1 or a's
//   conv1d                {batch, channels, seq_len, width, has_bias, silu, has_initial_state,
//                          has_final_state, dtype, + channel_last}   x (batch, channels, seq_len),
//                          or (batch, seq_len, channels) with channel_last 1 (default 0)
//   selective_scan        {batch, channels, seq_len, d_state, b_layout, c_layout, groups, has_D, has_z,
//                          has_delta_bias, delta_softplus, has_initial_state, has_final_state,
//                          chunk_size, dtype, + param_dtype, b_dtype, c_dtype}   layouts 0 shared (D,N),
//                          1 batch (B,N,L), 2 grouped (B,G,N,L); param_dtype of A, D, delta_bias and their
//                          gradients, b_dtype of B and dB, c_dtype of C and dC: each the module's dtype,
//                          or 0 (f32) in the f16 and bf16 modules
//   adamw                 {num_elements, f32 lr, f32 beta1, f32 beta2, f32 eps, f32 weight_decay, step, dtype}
//                         one step of torch's AdamW; step counts from 1
//   sgd                   {num_elements, f32 lr, f32 momentum, f32 dampening, f32 weight_decay, nesterov,
//                          step, dtype}   one step of torch's SGD (gk_sgd_step); step counts from 1
//   clip_grad_norm        {num_elements, f32 max_norm, dtype}   torch's clip_grad_norm_ (L2) on one
//                         gradient region (gk_clip_grad_norm)

enum { MAX_FIELDS = 18 };

static uint32_t field_count(gk_op op) {
  switch ((int)op) {  // (the optimizers are past the enum)
  case GK_OP_RELU: case GK_OP_SILU: case GK_OP_SIGMOID: case GK_OP_SOFTMAX: case GK_OP_LOG_SOFTMAX: return 3;
  case GK_OP_GELU: case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU:
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: return 4;
  case GK_OP_SOFTPLUS: case GK_OP_LINEAR: case GK_OP_EMBEDDING: return 5;
  case GK_OP_CROSS_ENTROPY: case GK_OP_ADD: case GK_OP_MUL: return 6;
  case GK_OP_MATMUL: case GK_OP_ATTENTION: return 8;
  case GK_OP_ROPE: case GK_OP_CONV1D: return 9;
  case GK_OP_SELECTIVE_SCAN: return 15;
  case GK_ABI_OP_ADAMW: case GK_ABI_OP_SGD: return 8;
  case GK_ABI_OP_CLIP_GRAD_NORM: return 3;
  default: return 0;
  }
}

// The fields of the extended form (0: the op has none); the fields past
// field_count(op) are the extension's.
static uint32_t ext_count(gk_op op) {
  switch (op) {
  case GK_OP_RELU: case GK_OP_SIGMOID: return 4;                                          // from_output
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU: return 6;         // split, split_dim
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: return 5;                                     // param_dtype
  case GK_OP_LINEAR: return 6;                                                            // param_dtype
  case GK_OP_CROSS_ENTROPY: return 7;                                                     // index_dtype
  case GK_OP_EMBEDDING: return 6;                                                         // index_dtype
  case GK_OP_CONV1D: return 10;                                                           // channel_last
  case GK_OP_SELECTIVE_SCAN: return 18;                                   // param_dtype, b_dtype, c_dtype
  default: return 0;
  }
}

// How many parameter dtype fields (param_dtype, then the scan's b_dtype and
// c_dtype) the extended form has.
static uint32_t param_dtype_fields(gk_op op) {
  if (op == GK_OP_SELECTIVE_SCAN) return 3;
  return op == GK_OP_RMSNORM || op == GK_OP_LAYERNORM || op == GK_OP_LINEAR;
}
static bool has_index_dtype(gk_op op) { return op == GK_OP_CROSS_ENTROPY || op == GK_OP_EMBEDDING; }
static bool is_optimizer(gk_op op) {
  return op == GK_ABI_OP_ADAMW || op == GK_ABI_OP_SGD || op == GK_ABI_OP_CLIP_GRAD_NORM;
}

static bool has_short_form(gk_op op) {
  return op == GK_OP_GLU || op == GK_OP_REGLU || op == GK_OP_SWIGLU || op == GK_OP_GEGLU || op == GK_OP_RMSNORM;
}

uint32_t gk_abi_params_short_size(gk_op op) { return has_short_form(op) ? 4 * (field_count(op) - 1) : 0; }

static float as_f32(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// The fields that are dims (must be >= 1) and flags (0 or 1), by index.
static bool dims_and_flags_ok(gk_op op, const uint32_t *f) {
  static const uint8_t none[] = {0xff};
  const uint8_t *dims = none, *flags = none;
  static const uint8_t rows_cols[] = {0, 1, 0xff}, norm[] = {1, 2, 0xff}, linear[] = {0, 1, 2, 0xff},
                       linear_flags[] = {3, 0xff}, matmul[] = {0, 1, 2, 3, 0xff}, matmul_flags[] = {4, 5, 6, 0xff},
                       ce[] = {0, 1, 0xff}, emb[] = {0, 1, 2, 0xff}, rope[] = {0, 1, 2, 3, 0xff},
                       rope_flags[] = {4, 5, 0xff}, attn[] = {0, 1, 2, 3, 4, 0xff}, attn_flags[] = {5, 0xff},
                       bin[] = {0, 1, 2, 3, 0xff}, conv[] = {0, 1, 2, 3, 0xff},
                       scan[] = {0, 1, 2, 3, 6, 13, 0xff}, scan_flags[] = {7, 8, 9, 10, 11, 12, 0xff},
                       gelu_flags[] = {2, 0xff}, ce_flags[] = {2, 0xff}, adamw[] = {0, 6, 0xff},
                       act_flags[] = {3, 0xff}, gated_flags[] = {4, 5, 0xff},
                       conv_flags[] = {4, 5, 6, 7, 9, 0xff}, sgd_flags[] = {5, 0xff}, clip[] = {0, 0xff};
  switch ((int)op) {
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: dims = norm; break;
  case GK_OP_LINEAR: dims = linear; flags = linear_flags; break;
  case GK_OP_MATMUL: dims = matmul; flags = matmul_flags; break;
  case GK_OP_CROSS_ENTROPY: dims = ce; flags = ce_flags; break;
  case GK_OP_EMBEDDING: dims = emb; break;
  case GK_OP_ROPE: dims = rope; flags = rope_flags; break;
  case GK_OP_ATTENTION: dims = attn; flags = attn_flags; break;
  case GK_OP_ADD: case GK_OP_MUL: dims = bin; break;
  case GK_OP_CONV1D: dims = conv; flags = conv_flags; break;
  case GK_OP_SELECTIVE_SCAN: dims = scan; flags = scan_flags; break;
  case GK_OP_GELU: dims = rows_cols; flags = gelu_flags; break;
  case GK_ABI_OP_ADAMW: dims = adamw; break;
  case GK_ABI_OP_SGD: dims = adamw; flags = sgd_flags; break;  // num_elements, step
  case GK_ABI_OP_CLIP_GRAD_NORM: dims = clip; break;
  case GK_OP_RELU: case GK_OP_SIGMOID: dims = rows_cols; flags = act_flags; break;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU: dims = rows_cols; flags = gated_flags; break;
  default: dims = rows_cols; break;
  }
  for (const uint8_t *i = dims; *i != 0xff; i++)
    if (f[*i] == 0) return false;
  for (const uint8_t *i = flags; *i != 0xff; i++)
    if (f[*i] > 1) return false;
  return true;
}

// Read and check the params at [p, p + len) (in bounds already) into f:
// the base form (with or without dtype) or the extended one; the fields a
// form leaves out take their defaults (the extension's: 0, param_dtype the
// module's dtype, index_dtype i32).
static gk_abi_code read_fields(const uint8_t *p, uint32_t len, gk_op op, gk_dtype dtype, uint32_t *f) {
  uint32_t n = field_count(op), ext = ext_count(op);
  if (n == 0) return GK_ABI_INVALID_PARAMS;
  bool full = len == 4 * n, short_form = has_short_form(op) && len == 4 * (n - 1), extended = ext && len == 4 * ext;
  if (!full && !short_form && !extended) return GK_ABI_INVALID_PARAMS;
  memset(f, 0, 4 * MAX_FIELDS);
  memcpy(f, p, len);
  if (full || extended) {
    uint32_t dt = f[n - 1];
    if (dt > GK_BF16) return GK_ABI_UNKNOWN_DTYPE;
    if (dt != (uint32_t)dtype) return GK_ABI_WRONG_DTYPE;
  }
  for (uint32_t i = n; i < n + param_dtype_fields(op); i++) {
    if (!extended) f[i] = (uint32_t)dtype;
    if (f[i] > GK_BF16) return GK_ABI_UNKNOWN_DTYPE;
    bool half = dtype == GK_F16 || dtype == GK_BF16;
    if (f[i] != (uint32_t)dtype && !(half && f[i] == GK_F32)) return GK_ABI_WRONG_DTYPE;
  }
  if (has_index_dtype(op)) {
    if (!extended) f[n] = GK_I32;
    if (f[n] > GK_I64) return GK_ABI_UNKNOWN_DTYPE;
    if (f[n] != GK_I32 && f[n] != GK_I64) return GK_ABI_WRONG_DTYPE;
  }
  return dims_and_flags_ok(op, f) ? GK_ABI_OK : GK_ABI_INVALID_PARAMS;
}

// The op description the params define.
static gk_abi_code decode_params(const uint8_t *p, uint32_t len, gk_op op, gk_dtype dtype, gk_direction dir,
                                 gk_op_desc *d) {
  uint32_t f[MAX_FIELDS];
  gk_abi_code code = read_fields(p, len, op, dtype, f);
  if (code != GK_ABI_OK) return code;

  int64_t shape[GK_MAX_RANK];
  int rank = 2;
  shape[0] = f[0], shape[1] = f[1];
  switch (op) {
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: shape[0] = f[2], shape[1] = f[1]; break;
  case GK_OP_MATMUL:
    rank = 3, shape[0] = f[0];
    shape[1] = f[4] ? f[2] : f[1], shape[2] = f[4] ? f[1] : f[2];
    break;
  case GK_OP_EMBEDDING: rank = 1, shape[0] = f[0]; break;
  case GK_OP_ROPE:
    rank = 4, shape[0] = f[0], shape[3] = f[3];
    shape[1] = f[4] ? f[2] : f[1], shape[2] = f[4] ? f[1] : f[2];
    break;
  case GK_OP_ATTENTION: rank = 4, shape[0] = f[0], shape[1] = f[1], shape[2] = f[3], shape[3] = f[4]; break;
  case GK_OP_CONV1D: case GK_OP_SELECTIVE_SCAN:
    rank = 3, shape[0] = f[0], shape[1] = f[1], shape[2] = f[2];
    if (op == GK_OP_CONV1D && f[9]) shape[1] = f[2], shape[2] = f[1];  // channel_last: (B, L, D)
    break;
  default: break;
  }
  if (gk_op_desc_init(d, op, dir, dtype, rank, shape) != GK_SUCCESS) return GK_ABI_INVALID_PARAMS;

  switch (op) {
  case GK_OP_RELU: case GK_OP_SIGMOID: d->act.from_output = dir == GK_BACKWARD ? (int)f[3] : 0; break;
  case GK_OP_GELU: d->act.approximate = f[2] ? GK_GELU_TANH : GK_GELU_ERF; break;
  case GK_OP_SOFTPLUS: d->act.beta = as_f32(f[2]), d->act.threshold = as_f32(f[3]); break;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU:
    if (isnan(as_f32(f[2]))) return GK_ABI_INVALID_PARAMS;
    if (as_f32(f[2]) != 1.0f) return GK_ABI_UNSUPPORTED;
    d->gated.form = f[4] ? GK_GATED_SPLIT : GK_GATED_TWO_TENSOR;
    d->gated.dim = (int)f[5];
    break;
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM:
    d->norm.eps = as_f32(f[0]);
    d->norm.has_weight = 1, d->norm.has_bias = op == GK_OP_LAYERNORM;
    d->param_dtype = (int)f[4];
    break;
  case GK_OP_LINEAR:
    d->linear.out_features = f[2], d->linear.has_bias = (int)f[3];
    d->param_dtype = (int)f[5];
    break;
  case GK_OP_MATMUL:
    d->matmul.n = f[3], d->matmul.trans_a = (int)f[4], d->matmul.trans_b = (int)f[5];
    d->matmul.shared_b = (int)f[6];
    break;
  case GK_OP_CROSS_ENTROPY:
    d->index_dtype = (gk_dtype)f[6];
    d->ce.reduction = f[2] ? GK_REDUCTION_SUM : GK_REDUCTION_MEAN;
    d->ce.ignore_index = (int32_t)f[3];
    d->ce.label_smoothing = as_f32(f[4]);
    break;
  case GK_OP_EMBEDDING:
    d->index_dtype = (gk_dtype)f[5];
    d->embedding.num_embeddings = f[1], d->embedding.dim = f[2];
    d->embedding.padding_idx = (int32_t)f[3];
    break;
  case GK_OP_ROPE:
    d->rope.layout = f[4] ? GK_ROPE_BHTD : GK_ROPE_BTHD;
    d->rope.pairing = f[5] ? GK_ROPE_INTERLEAVED : GK_ROPE_HALF;
    d->rope.theta = as_f32(f[6]), d->rope.offset = f[7];
    break;
  case GK_OP_ATTENTION: d->attn.kv_heads = f[2], d->attn.causal = (int)f[5], d->attn.scale = as_f32(f[6]); break;
  case GK_OP_ADD: case GK_OP_MUL:
    d->binary.b_rank = 2, d->binary.b_shape[0] = f[2], d->binary.b_shape[1] = f[3];
    d->binary.alpha = as_f32(f[4]);
    break;
  case GK_OP_CONV1D:
    d->conv.width = f[3], d->conv.has_bias = (int)f[4], d->conv.silu = (int)f[5];
    d->conv.has_initial_state = (int)f[6], d->conv.has_final_state = (int)f[7];
    d->conv.channel_last = (int)f[9];
    break;
  case GK_OP_SELECTIVE_SCAN:
    if (f[4] > GK_SCAN_GROUPED || f[5] > GK_SCAN_GROUPED) return GK_ABI_INVALID_PARAMS;
    d->scan.d_state = f[3], d->scan.b_layout = (gk_scan_layout)f[4], d->scan.c_layout = (gk_scan_layout)f[5];
    d->scan.groups = f[6], d->scan.has_D = (int)f[7], d->scan.has_z = (int)f[8];
    d->scan.has_delta_bias = (int)f[9], d->scan.delta_softplus = (int)f[10];
    d->scan.has_initial_state = (int)f[11], d->scan.has_final_state = (int)f[12];
    d->scan.chunk_size = f[13];
    d->param_dtype = (int)f[15], d->scan.b_dtype = (int)f[16], d->scan.c_dtype = (int)f[17];
    break;
  default: break;
  }
  return GK_ABI_OK;
}

// ---------------------------------------------------------------- layouts
//
// The tensors of each region, in order (an optional one, in brackets, is
// there when the params ask for it). Forward's scratch holds what backward
// needs saved; backward reads it back from its scratch.
//
// op                 | dir | input a            | input b                                   | output                        | scratch
// relu gelu silu     | fwd | x                  | -                                         | y                             | -
//  sigmoid softplus  | bwd | dy                 | x (y: relu, sigmoid with from_output)     | dx                            | -
// glu reglu swiglu   | fwd | x                  | [gate]                                    | y                             | -
//  geglu             | bwd | dy                 | x, [gate]                                 | dx, [dgate]                   | -
//  (split 1: x is the whole X, halved in y; no gate, no dgate: dx is the whole dX)
// rmsnorm            | fwd | x                  | weight                                    | y                             | [rms] (optional)
//                    | bwd | dy                 | x, weight                                 | dx, dweight                   | rms
// layernorm          | fwd | x                  | weight, bias                              | y                             | mean, rstd
//                    | bwd | dy                 | x, weight                                 | dx, dweight, dbias            | mean, rstd
// linear             | fwd | x                  | weight, [bias]                            | y                             | -
//                    | bwd | dy                 | x, weight                                 | dx, dweight, [dbias]          | -
// matmul             | fwd | a                  | b                                         | y                             | -
//                    | bwd | dy                 | a, b                                      | da, db                        | -
// softmax            | fwd | x                  | -                                         | y                             | -
//  log_softmax       | bwd | dy                 | y                                         | dx                            | -
// cross_entropy      | fwd | logits             | target (index_dtype)                      | loss                          | -
//                    | bwd | dloss              | logits, target (index_dtype)              | dlogits                       | -
// embedding          | fwd | weight             | index (index_dtype)                       | y                             | -
//                    | bwd | dy                 | index (index_dtype)                       | dweight                       | -
// rope               | fwd | x                  | -                                         | y                             | -
//                    | bwd | dy                 | -                                         | dx                            | -
// attention          | fwd | q                  | k, v                                      | y (= o)                       | lse
//                    | bwd | dy (= do)          | q, k, v, y (= o)                          | dq, dk, dv                    | lse
// add                | fwd | a                  | b                                         | y                             | -
//                    | bwd | dy                 | -                                         | da, db                        | -
// mul                | fwd | a                  | b                                         | y                             | -
//                    | bwd | dy                 | a, b                                      | da, db                        | -
// conv1d             | fwd | x                  | weight, [bias], [initial_state]           | y, [final_state]              | -
//                    | bwd | dy, [dfinal_state] | x, weight, [bias: with silu],             | dx, dweight, [dbias],         | -
//                    |     |                    |  [initial_state]                          |  [dinitial_state]             |
// selective_scan     | fwd | u, delta, [z]      | A, B, C, [D], [delta_bias],               | y, [final_state]              | chunk_states
//                    |     |                    |  [initial_state]                          |                               |
//                    | bwd | dy, [dfinal_state] | u, delta, A, B, C, [D], [z],              | du, ddelta, dA, dB, dC, [dD], | chunk_states
//                    |     |                    |  [delta_bias], [initial_state]            |  [dz], [ddelta_bias],         |
//                    |     |                    |                                           |  [dinitial_state]             |
// adamw              | fwd | grad               | -                                         | param, exp_avg, exp_avg_sq,   | -
//                    |     |                    |                                           |  [master: f16, bf16]          |
//                    | bwd | (none: code 9)
// sgd                | fwd | grad               | -                                         | param, [momentum_buf:         | -
//                    |     |                    |                                           |  momentum != 0], [master]     |
//                    | bwd | (none: code 9)
// clip_grad_norm     | fwd | -                  | -                                         | grad, total_norm              | -
//                    | bwd | (none: code 9)
// (The optimizers' output regions are read and written: the step updates
// them in place; exp_avg, exp_avg_sq, momentum_buf f32 (f64 for f64), master
// the f32 copy of f16/bf16 params; clipping scales grad in place and writes
// the norm before clipping, one f32 (f64 for f64). A non-finite norm is
// code 1 and writes nothing. Norm weight and bias, linear's bias, the scan's
// A, D, delta_bias and their gradients have param_dtype (the scan's B, dB
// b_dtype; C, dC c_dtype); conv1d's x, y, dx, dy are (B, L, D) with
// channel_last.)
//
// RMSNorm's scratch holds the per-row rms = sqrt(mean(x^2) + eps), as the
// ABI's first RMSNorm kernel stored it (forward writes it when the scratch
// region is at least that size, and ignores a smaller one); the library's
// rstd = 1 / rms is converted on the way. Shapes of every tensor: include/gradkern.h.

enum { REGION_A, REGION_B, REGION_OUT, REGION_SCRATCH, REGION_COUNT = GK_ABI_REGIONS };
enum { END = GK_ARG_COUNT_, MAX_TENSORS = GK_ABI_MAX_TENSORS };

typedef struct layout {
  uint8_t kinds[REGION_COUNT][MAX_TENSORS];
} layout;

#define L(a, b, out, scratch) {{{a, END}, {b, END}, {out, END}, {scratch, END}}}
#define NONE END
#define A_(...) __VA_ARGS__

static const layout *layout_of(gk_op op, gk_direction dir) {
  // (the plan takes x or y: the other has no shape and is left out)
  static const layout act[2] = {L(GK_ARG_X, NONE, GK_ARG_Y, NONE), L(GK_ARG_DY, A_(GK_ARG_X, GK_ARG_Y), GK_ARG_DX, NONE)};
  static const layout gated[2] = {L(GK_ARG_X, GK_ARG_GATE, GK_ARG_Y, NONE),
                                  L(GK_ARG_DY, A_(GK_ARG_X, GK_ARG_GATE), A_(GK_ARG_DX, GK_ARG_DGATE), NONE)};
  static const layout rms[2] = {L(GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_Y, GK_ARG_RSTD),
                                L(GK_ARG_DY, A_(GK_ARG_X, GK_ARG_WEIGHT), A_(GK_ARG_DX, GK_ARG_DWEIGHT), GK_ARG_RSTD)};
  static const layout ln[2] = {
      L(GK_ARG_X, A_(GK_ARG_WEIGHT, GK_ARG_BIAS), GK_ARG_Y, A_(GK_ARG_MEAN, GK_ARG_RSTD)),
      L(GK_ARG_DY, A_(GK_ARG_X, GK_ARG_WEIGHT), A_(GK_ARG_DX, GK_ARG_DWEIGHT, GK_ARG_DBIAS), A_(GK_ARG_MEAN, GK_ARG_RSTD))};
  static const layout linear[2] = {
      L(GK_ARG_X, A_(GK_ARG_WEIGHT, GK_ARG_BIAS), GK_ARG_Y, NONE),
      L(GK_ARG_DY, A_(GK_ARG_X, GK_ARG_WEIGHT), A_(GK_ARG_DX, GK_ARG_DWEIGHT, GK_ARG_DBIAS), NONE)};
  static const layout matmul[2] = {L(GK_ARG_A, GK_ARG_B, GK_ARG_Y, NONE),
                                   L(GK_ARG_DY, A_(GK_ARG_A, GK_ARG_B), A_(GK_ARG_DA, GK_ARG_DB), NONE)};
  static const layout softmax[2] = {L(GK_ARG_X, NONE, GK_ARG_Y, NONE), L(GK_ARG_DY, GK_ARG_Y, GK_ARG_DX, NONE)};
  static const layout ce[2] = {L(GK_ARG_LOGITS, GK_ARG_TARGET, GK_ARG_LOSS, NONE),
                               L(GK_ARG_DLOSS, A_(GK_ARG_LOGITS, GK_ARG_TARGET), GK_ARG_DLOGITS, NONE)};
  static const layout emb[2] = {L(GK_ARG_WEIGHT, GK_ARG_INDEX, GK_ARG_Y, NONE),
                                L(GK_ARG_DY, GK_ARG_INDEX, GK_ARG_DWEIGHT, NONE)};
  static const layout rope[2] = {L(GK_ARG_X, NONE, GK_ARG_Y, NONE), L(GK_ARG_DY, NONE, GK_ARG_DX, NONE)};
  static const layout attn[2] = {
      L(GK_ARG_Q, A_(GK_ARG_K, GK_ARG_V), GK_ARG_Y, GK_ARG_LSE),
      L(GK_ARG_DY, A_(GK_ARG_Q, GK_ARG_K, GK_ARG_V, GK_ARG_Y), A_(GK_ARG_DQ, GK_ARG_DK, GK_ARG_DV), GK_ARG_LSE)};
  static const layout add[2] = {L(GK_ARG_A, GK_ARG_B, GK_ARG_Y, NONE), L(GK_ARG_DY, NONE, A_(GK_ARG_DA, GK_ARG_DB), NONE)};
  static const layout mul[2] = {L(GK_ARG_A, GK_ARG_B, GK_ARG_Y, NONE),
                                L(GK_ARG_DY, A_(GK_ARG_A, GK_ARG_B), A_(GK_ARG_DA, GK_ARG_DB), NONE)};
  static const layout conv[2] = {
      L(GK_ARG_X, A_(GK_ARG_WEIGHT, GK_ARG_BIAS, GK_ARG_INITIAL_STATE), A_(GK_ARG_Y, GK_ARG_FINAL_STATE), NONE),
      L(A_(GK_ARG_DY, GK_ARG_DFINAL_STATE), A_(GK_ARG_X, GK_ARG_WEIGHT, GK_ARG_BIAS, GK_ARG_INITIAL_STATE),
        A_(GK_ARG_DX, GK_ARG_DWEIGHT, GK_ARG_DBIAS, GK_ARG_DINITIAL_STATE), NONE)};
  static const layout scan[2] = {
      L(A_(GK_ARG_U, GK_ARG_DELTA, GK_ARG_Z),
        A_(GK_ARG_A, GK_ARG_B, GK_ARG_C, GK_ARG_D, GK_ARG_DELTA_BIAS, GK_ARG_INITIAL_STATE),
        A_(GK_ARG_Y, GK_ARG_FINAL_STATE), GK_ARG_CHUNK_STATES),
      L(A_(GK_ARG_DY, GK_ARG_DFINAL_STATE),
        A_(GK_ARG_U, GK_ARG_DELTA, GK_ARG_A, GK_ARG_B, GK_ARG_C, GK_ARG_D, GK_ARG_Z, GK_ARG_DELTA_BIAS,
           GK_ARG_INITIAL_STATE),
        A_(GK_ARG_DU, GK_ARG_DDELTA, GK_ARG_DA, GK_ARG_DB, GK_ARG_DC, GK_ARG_DD, GK_ARG_DZ, GK_ARG_DDELTA_BIAS,
           GK_ARG_DINITIAL_STATE),
        GK_ARG_CHUNK_STATES)};
  const layout *l;
  switch (op) {
  case GK_OP_RELU: case GK_OP_GELU: case GK_OP_SILU: case GK_OP_SIGMOID: case GK_OP_SOFTPLUS: l = act; break;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU: l = gated; break;
  case GK_OP_RMSNORM: l = rms; break;
  case GK_OP_LAYERNORM: l = ln; break;
  case GK_OP_LINEAR: l = linear; break;
  case GK_OP_MATMUL: l = matmul; break;
  case GK_OP_SOFTMAX: case GK_OP_LOG_SOFTMAX: l = softmax; break;
  case GK_OP_CROSS_ENTROPY: l = ce; break;
  case GK_OP_EMBEDDING: l = emb; break;
  case GK_OP_ROPE: l = rope; break;
  case GK_OP_ATTENTION: l = attn; break;
  case GK_OP_ADD: l = add; break;
  case GK_OP_MUL: l = mul; break;
  case GK_OP_CONV1D: l = conv; break;
  case GK_OP_SELECTIVE_SCAN: l = scan; break;
  default: return NULL;
  }
  return &l[dir == GK_BACKWARD];
}

// A parameter dtype field's value: the dtype it names, or desc.dtype
// (GK_DTYPE_SAME).
static gk_dtype dtype_or_same(const gk_op_desc *d, int field) { return field >= 0 ? (gk_dtype)field : d->dtype; }

// The dtype of an argument, as include/gradkern.h gives it for the
// descriptions this ABI makes: index tensors desc.index_dtype; norm weight
// and bias, linear's bias, the scan's A, D, delta_bias and their gradients
// desc.param_dtype; the scan's B, dB desc.scan.b_dtype and C, dC
// desc.scan.c_dtype; saved statistics, losses and the scan's states f32 (f64
// for f64); conv1d's states and every other tensor the op's dtype.
static gk_dtype arg_dtype(const gk_op_desc *d, gk_arg_kind k) {
  if (d->op == GK_OP_SELECTIVE_SCAN) switch (k) {
    case GK_ARG_A: case GK_ARG_DA: case GK_ARG_D: case GK_ARG_DD: case GK_ARG_DELTA_BIAS: case GK_ARG_DDELTA_BIAS:
      return dtype_or_same(d, d->param_dtype);
    case GK_ARG_B: case GK_ARG_DB: return dtype_or_same(d, d->scan.b_dtype);
    case GK_ARG_C: case GK_ARG_DC: return dtype_or_same(d, d->scan.c_dtype);
    default: break;
    }
  switch (k) {
  case GK_ARG_TARGET: case GK_ARG_INDEX: return d->index_dtype;
  case GK_ARG_WEIGHT: case GK_ARG_DWEIGHT:
    if (d->op == GK_OP_LINEAR) return d->dtype;
    // fall through
  case GK_ARG_BIAS: case GK_ARG_DBIAS:
    if (d->op == GK_OP_RMSNORM || d->op == GK_OP_LAYERNORM || d->op == GK_OP_LINEAR)
      return dtype_or_same(d, d->param_dtype);
    return d->dtype;
  case GK_ARG_RSTD: case GK_ARG_MEAN: case GK_ARG_LOSS: case GK_ARG_DLOSS: case GK_ARG_LSE:
  case GK_ARG_INITIAL_STATE: case GK_ARG_FINAL_STATE: case GK_ARG_DINITIAL_STATE: case GK_ARG_DFINAL_STATE:
  case GK_ARG_CHUNK_STATES:
    if (d->op == GK_OP_CONV1D) return d->dtype;
    return d->dtype == GK_F64 ? GK_F64 : GK_F32;
  default: return d->dtype;
  }
}

// Lay the region's tensors out; false when a size passes 4 GiB.
static bool plan_region(const gk_plan *plan, const gk_op_desc *d, const uint8_t *kinds, gk_abi_region *r) {
  r->n = 0, r->bytes = 0;
  uint64_t end = 0;
  for (int i = 0; kinds[i] != END; i++) {
    gk_abi_tensor *s = &r->tensors[r->n];
    s->kind = (gk_arg_kind)kinds[i];
    if (gk_plan_arg_shape(plan, s->kind, &s->rank, s->shape) != GK_SUCCESS) return false;
    if (s->rank < 0) continue;  // an optional tensor the params leave out
    s->name = gk_arg_name(s->kind);
    s->dtype = arg_dtype(d, s->kind);
    uint64_t bytes = gk_dtype_size(s->dtype);
    for (int j = 0; j < s->rank; j++) {
      if (s->shape[j] < 0 || (uint64_t)s->shape[j] > (UINT64_C(1) << 32)) return false;
      bytes *= (uint64_t)s->shape[j];
      if (bytes > (UINT64_C(1) << 32)) return false;
    }
    uint64_t start = (end + 7) & ~UINT64_C(7);
    end = start + bytes;
    if (end > UINT32_MAX) return false;
    s->offset = (uint32_t)start, s->bytes = (uint32_t)bytes;
    r->n++;
  }
  r->bytes = (uint32_t)end;
  return true;
}

static gk_abi_code plan_layout(const gk_plan *plan, const gk_op_desc *d, const layout *l, gk_abi_layout *out) {
  for (int i = 0; i < GK_ABI_REGIONS; i++)
    if (!plan_region(plan, d, l->kinds[i], &out->region[i])) return GK_ABI_INVALID_PARAMS;
  return GK_ABI_OK;
}

// ---------------------------------------------------------------- checks

// [offset, offset + size) wholly in the host's memory (size 0: nothing to check).
static bool in_host_memory(const gk_abi_memory *mem, uint32_t offset, uint32_t size) {
  if (size == 0) return true;
  uint64_t lo = offset, hi = (uint64_t)offset + size;
  if (lo < mem->host_start || hi > mem->bytes) return false;
  for (int i = 0; i < mem->n_owned; i++)
    if (lo < mem->owned[i].hi && mem->owned[i].lo < hi) return false;
  return true;
}

static bool overlap(uint32_t a_off, uint32_t a_size, uint32_t b_off, uint32_t b_size) {
  if (a_size == 0 || b_size == 0) return false;
  return (uint64_t)a_off < (uint64_t)b_off + b_size && (uint64_t)b_off < (uint64_t)a_off + a_size;
}

static uint8_t *address(const gk_abi_memory *mem, uint64_t offset) {
  return (uint8_t *)(mem->base + (uintptr_t)offset);
}

static gk_abi_code status_code(gk_status s) {
  switch (s) {
  case GK_SUCCESS: return GK_ABI_OK;
  case GK_ERR_INVALID_VALUE: case GK_ERR_BAD_SHAPE: case GK_ERR_BAD_RANK: return GK_ABI_INVALID_PARAMS;
  case GK_ERR_BAD_DTYPE: return GK_ABI_WRONG_DTYPE;
  case GK_ERR_UNSUPPORTED: return GK_ABI_UNSUPPORTED;
  case GK_ERR_BAD_ALIGNMENT: return GK_ABI_MISALIGNED;
  case GK_ERR_ALIASING: case GK_ERR_BAD_STRIDES: return GK_ABI_OVERLAP;
  default: return GK_ABI_FAILED;
  }
}

// The optimizers' call: the config and the step (optim_layout).
typedef struct optim_call {
  gk_op op;
  gk_adamw_config adamw;
  gk_sgd_config sgd;
  double max_norm;
  int64_t step;
} optim_call;
static gk_abi_code optim_layout(const uint8_t *params, uint32_t len, gk_op op, gk_dtype dtype, gk_direction dir,
                                optim_call *a, gk_abi_layout *lay);

// Read the params at [ptr, ptr + len), checked against memory first.
gk_abi_code gk_abi_check_params(const gk_abi_memory *mem, gk_op op, gk_dtype dtype, uint32_t params_ptr,
                                uint32_t params_len) {
  if (params_len == 0) return GK_ABI_OK;
  if (!in_host_memory(mem, params_ptr, params_len)) return GK_ABI_OUT_OF_BOUNDS;
  if (params_len > 4 * MAX_FIELDS) return GK_ABI_INVALID_PARAMS;
  gk_op_desc d;
  if (is_optimizer(op)) {
    optim_call a;
    gk_abi_layout lay;
    return optim_layout(address(mem, params_ptr), params_len, op, dtype, GK_FORWARD, &a, &lay);
  }
  return decode_params(address(mem, params_ptr), params_len, op, dtype, GK_FORWARD, &d);
}

gk_abi_code gk_abi_info_write(const gk_abi_memory *mem, gk_op op, uint32_t info_ptr, uint32_t name_ptr,
                              uint32_t name_len) {
  if (info_ptr == 0) return GK_ABI_INVALID_PARAMS;
  if (!in_host_memory(mem, info_ptr, 15)) return GK_ABI_OUT_OF_BOUNDS;
  if (info_ptr % 4) return GK_ABI_MISALIGNED;
  gk_abi_info info = {name_ptr, name_len, GK_VERSION_MAJOR, GK_VERSION_MINOR, GK_VERSION_PATCH,
                      !is_optimizer(op)};
  memcpy(address(mem, info_ptr), &info, 15);  // byte 15 is the struct's padding
  return GK_ABI_OK;
}

// ---------------------------------------------------------------- the call

// RMSNorm's saved statistic crosses the ABI as rms = 1 / rstd.
static void invert(void *dst, const void *src, uint64_t n, gk_dtype dt) {
  for (uint64_t i = 0; i < n; i++) {
    if (dt == GK_F64) {
      double v;
      memcpy(&v, (const double *)src + i, sizeof v);
      v = 1.0 / v;
      memcpy((double *)dst + i, &v, sizeof v);
    } else {
      float v;
      memcpy(&v, (const float *)src + i, sizeof v);
      v = 1.0f / v;
      memcpy((float *)dst + i, &v, sizeof v);
    }
  }
}

static void *alloc64(uint64_t bytes) { return aligned_alloc(64, (size_t)((bytes + 63) & ~UINT64_C(63))); }

// The optimizers (AdamW, SGD, clipping): the config, the step and the
// layout from params (in bounds already).

static gk_abi_code optim_layout(const uint8_t *params, uint32_t len, gk_op op, gk_dtype dtype, gk_direction dir,
                                optim_call *a, gk_abi_layout *lay) {
  uint32_t f[MAX_FIELDS];
  gk_abi_code code = read_fields(params, len, op, dtype, f);
  if (code != GK_ABI_OK) return code;
  if (dir == GK_BACKWARD) return GK_ABI_UNSUPPORTED;
  a->op = op;
  bool ok;
  if (op == GK_ABI_OP_ADAMW) {
    gk_adamw_config_init(&a->adamw);
    a->adamw.lr = as_f32(f[1]), a->adamw.beta1 = as_f32(f[2]), a->adamw.beta2 = as_f32(f[3]);
    a->adamw.eps = as_f32(f[4]), a->adamw.weight_decay = as_f32(f[5]);
    a->step = f[6];
    const gk_adamw_config *c = &a->adamw;
    ok = c->lr >= 0 && c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps >= 0 &&
         c->weight_decay >= 0 && isfinite(c->lr) && isfinite(c->eps) && isfinite(c->weight_decay);
  } else if (op == GK_ABI_OP_SGD) {
    gk_sgd_config_init(&a->sgd);
    a->sgd.lr = as_f32(f[1]), a->sgd.momentum = as_f32(f[2]), a->sgd.dampening = as_f32(f[3]);
    a->sgd.weight_decay = as_f32(f[4]), a->sgd.nesterov = (int)f[5];
    a->step = f[6];
    const gk_sgd_config *c = &a->sgd;
    ok = c->lr >= 0 && c->momentum >= 0 && c->weight_decay >= 0 && isfinite(c->lr) && isfinite(c->momentum) &&
         isfinite(c->dampening) && isfinite(c->weight_decay) &&
         (!c->nesterov || (c->momentum > 0 && c->dampening == 0));
  } else {
    a->max_norm = as_f32(f[1]);
    ok = a->max_norm >= 0 && isfinite(a->max_norm);
  }
  if (!ok) return GK_ABI_INVALID_PARAMS;
  memset(lay, 0, sizeof *lay);
  gk_dtype state = dtype == GK_F64 ? GK_F64 : GK_F32;
  bool half = dtype == GK_F16 || dtype == GK_BF16;
  typedef struct { int region; const char *name; gk_dtype dtype; uint32_t numel; } entry;
  entry tensors[5];
  int count = 0;
  if (op == GK_ABI_OP_CLIP_GRAD_NORM) {
    tensors[count++] = (entry){REGION_OUT, "grad", dtype, f[0]};
    tensors[count++] = (entry){REGION_OUT, "total_norm", state, 1};
  } else {
    tensors[count++] = (entry){REGION_A, "grad", dtype, f[0]};
    tensors[count++] = (entry){REGION_OUT, "param", dtype, f[0]};
    if (op == GK_ABI_OP_ADAMW) {
      tensors[count++] = (entry){REGION_OUT, "exp_avg", state, f[0]};
      tensors[count++] = (entry){REGION_OUT, "exp_avg_sq", state, f[0]};
    } else if (a->sgd.momentum != 0) {
      tensors[count++] = (entry){REGION_OUT, "momentum_buf", state, f[0]};
    }
    if (half) tensors[count++] = (entry){REGION_OUT, "master", GK_F32, f[0]};
  }
  uint64_t end[REGION_COUNT] = {0};
  for (int i = 0; i < count; i++) {
    gk_abi_region *r = &lay->region[tensors[i].region];
    gk_abi_tensor *t = &r->tensors[r->n++];
    uint64_t bytes = (uint64_t)tensors[i].numel * gk_dtype_size(tensors[i].dtype);
    uint64_t start = (end[tensors[i].region] + 7) & ~UINT64_C(7);
    end[tensors[i].region] = start + bytes;
    if (start + bytes > UINT32_MAX) return GK_ABI_INVALID_PARAMS;
    *t = (gk_abi_tensor){.kind = GK_ARG_COUNT_, .name = tensors[i].name, .dtype = tensors[i].dtype, .rank = 1,
                         .shape = {tensors[i].numel}, .offset = (uint32_t)start, .bytes = (uint32_t)bytes};
    r->bytes = (uint32_t)(start + bytes);
  }
  return GK_ABI_OK;
}

// The op's description, plan and layout from params (in bounds already).
static gk_abi_code make_plan(const uint8_t *params, uint32_t len, gk_op op, gk_dtype dtype, gk_direction dir,
                             gk_op_desc *d, gk_plan **plan, gk_abi_layout *lay) {
  gk_abi_code code = decode_params(params, len, op, dtype, dir, d);
  if (code != GK_ABI_OK) return code;
  const layout *l = layout_of(op, dir);
  if (!l) return GK_ABI_UNSUPPORTED;
  gk_status s = gk_plan_create(d, plan);
  if (s != GK_SUCCESS) return status_code(s);
  code = plan_layout(*plan, d, l, lay);
  if (code != GK_ABI_OK) gk_plan_destroy(*plan), *plan = NULL;
  return code;
}

gk_abi_code gk_abi_describe(gk_op op, gk_dtype dtype, gk_direction dir, const void *params, uint32_t len,
                            gk_abi_layout *lay) {
  if (len == 0 || len > 4 * MAX_FIELDS) return GK_ABI_INVALID_PARAMS;
  if (is_optimizer(op)) {
    optim_call a;
    return optim_layout(params, len, op, dtype, dir, &a, lay);
  }
  gk_op_desc d;
  gk_plan *plan = NULL;
  gk_abi_code code = make_plan(params, len, op, dtype, dir, &d, &plan, lay);
  gk_plan_destroy(plan);
  return code;
}

// The region checks of a call, in order: sizes against the layout, bounds,
// alignment, overlap of the written regions. used[i] is set to the bytes of
// region i the call touches: a region that holds no tensor is ignored, and
// so is RMSNorm's forward scratch when smaller than the rms (`optional_scratch`).
static gk_abi_code check_regions(const gk_abi_memory *mem, const gk_abi_desc *desc, uint32_t desc_ptr,
                                 const gk_abi_layout *lay, bool fwd, bool optional_scratch, uint32_t *used) {
  const uint32_t off[REGION_COUNT] = {desc->input_a_offset, desc->input_b_offset, desc->output_offset,
                                      desc->scratch_offset};
  const uint32_t size[REGION_COUNT] = {desc->input_a_size, desc->input_b_size, desc->output_size,
                                       desc->scratch_size};
  const gk_abi_region *r = lay->region;
  for (int i = 0; i < REGION_COUNT; i++) used[i] = r[i].n ? size[i] : 0;
  if (optional_scratch && size[REGION_SCRATCH] < r[REGION_SCRATCH].bytes) used[REGION_SCRATCH] = 0;
  for (int i = 0; i < REGION_COUNT; i++) {
    bool written = i == REGION_OUT || (i == REGION_SCRATCH && fwd);
    bool optional = optional_scratch && i == REGION_SCRATCH;
    if (r[i].n && !optional && size[i] != r[i].bytes) return written ? GK_ABI_INVALID_OUTPUT : GK_ABI_INVALID_INPUT;
  }
  for (int i = 0; i < REGION_COUNT; i++)
    if (!in_host_memory(mem, off[i], used[i])) return GK_ABI_OUT_OF_BOUNDS;
  for (int i = 0; i < REGION_COUNT; i++)
    for (int j = 0; j < r[i].n && used[i]; j++)
      if (((uint64_t)off[i] + r[i].tensors[j].offset) % gk_dtype_size(r[i].tensors[j].dtype)) return GK_ABI_MISALIGNED;
  for (int w = 0; w < REGION_COUNT; w++) {
    if (w != REGION_OUT && !(w == REGION_SCRATCH && fwd)) continue;
    for (int i = 0; i < REGION_COUNT; i++)
      if (i != w && overlap(off[w], used[w], off[i], used[i])) return GK_ABI_OVERLAP;
    if (overlap(off[w], used[w], desc->params_offset, desc->params_size) ||
        overlap(off[w], used[w], desc_ptr, sizeof *desc))
      return GK_ABI_OVERLAP;
  }
  return GK_ABI_OK;
}

static gk_abi_code run_optim(const gk_abi_memory *mem, const gk_abi_desc *desc, const gk_abi_layout *lay,
                             const optim_call *a) {
  gk_tensor t[5];
  const gk_abi_region *out = &lay->region[REGION_OUT];
  for (int i = 0; i < out->n; i++)
    gk_tensor_init(&t[1 + i], address(mem, (uint64_t)desc->output_offset + out->tensors[i].offset),
                   out->tensors[i].dtype, 1, out->tensors[i].shape);
  gk_status s;
  if (a->op == GK_ABI_OP_CLIP_GRAD_NORM) {
    double norm = 0;
    s = gk_clip_grad_norm(1, &t[1], a->max_norm, &norm);
    if (s == GK_ERR_NON_FINITE) return GK_ABI_INVALID_INPUT;  // nothing was scaled, nor is the norm written
    if (s == GK_SUCCESS && t[2].dtype == GK_F64) memcpy(t[2].data, &norm, sizeof norm);
    else if (s == GK_SUCCESS) memcpy(t[2].data, &(float){(float)norm}, sizeof(float));
  } else {
    const gk_abi_tensor *g = &lay->region[REGION_A].tensors[0];
    gk_tensor_init(&t[0], address(mem, (uint64_t)desc->input_a_offset + g->offset), g->dtype, 1, g->shape);
    bool half = t[1].dtype == GK_F16 || t[1].dtype == GK_BF16;
    const gk_tensor *master = half ? &t[out->n] : NULL;
    if (a->op == GK_ABI_OP_ADAMW) s = gk_adamw_step(&a->adamw, 1, &t[1], &t[0], &t[2], &t[3], master, a->step);
    else s = gk_sgd_step(&a->sgd, 1, &t[1], &t[0], a->sgd.momentum != 0 ? &t[2] : NULL, master, a->step);
  }
  return s == GK_ERR_INVALID_VALUE ? GK_ABI_INVALID_PARAMS : status_code(s);
}

// Run the plan on the regions (checked).
static gk_abi_code run_plan(const gk_abi_memory *mem, const gk_abi_desc *desc, const gk_plan *plan,
                            const gk_abi_layout *lay, bool fwd, bool rms, bool rms_out) {
  const uint32_t off[REGION_COUNT] = {desc->input_a_offset, desc->input_b_offset, desc->output_offset,
                                      desc->scratch_offset};
  const gk_abi_region *r = lay->region;
  gk_abi_code code = GK_ABI_OK;
  // RMSNorm's rstd lives in the module's memory; the scratch region holds rms.
  void *rstd = NULL, *workspace = NULL;
  size_t ws_bytes = 0;
  const gk_abi_tensor *rstd_t = rms ? &r[REGION_SCRATCH].tensors[0] : NULL;
  uint64_t rows = rms ? rstd_t->bytes / gk_dtype_size(rstd_t->dtype) : 0;
  if (rms) {
    rstd = alloc64(rstd_t->bytes);
    if (!rstd) code = GK_ABI_FAILED;
    else if (!fwd) invert(rstd, address(mem, off[REGION_SCRATCH]), rows, rstd_t->dtype);
  }
  if (code == GK_ABI_OK && gk_plan_workspace_size(plan, &ws_bytes) == GK_SUCCESS && ws_bytes) {
    workspace = alloc64(ws_bytes);
    if (!workspace) code = GK_ABI_FAILED;
  }
  if (code == GK_ABI_OK) {
    gk_arg args[REGION_COUNT * MAX_TENSORS];
    int nargs = 0;
    for (int i = 0; i < REGION_COUNT; i++)
      for (int j = 0; j < r[i].n; j++) {
        const gk_abi_tensor *t = &r[i].tensors[j];
        void *data = t == rstd_t ? rstd : address(mem, (uint64_t)off[i] + t->offset);
        args[nargs].kind = t->kind;
        gk_tensor_init(&args[nargs].tensor, data, t->dtype, t->rank, t->shape);
        nargs++;
      }
    gk_status s = gk_plan_run(plan, args, nargs, workspace, ws_bytes);
    // An index out of range is the caller's input; the library found it before writing.
    code = s == GK_ERR_INVALID_VALUE ? GK_ABI_INVALID_INPUT : status_code(s);
    if (code == GK_ABI_OK && rms_out) invert(address(mem, off[REGION_SCRATCH]), rstd, rows, rstd_t->dtype);
  }
  free(workspace);
  free(rstd);
  return code;
}

gk_abi_code gk_abi_run(const gk_abi_memory *mem, gk_op op, gk_dtype dtype, gk_direction dir, uint32_t desc_ptr) {
  if (!in_host_memory(mem, desc_ptr, sizeof(gk_abi_desc))) return GK_ABI_OUT_OF_BOUNDS;
  gk_abi_desc desc;
  memcpy(&desc, address(mem, desc_ptr), sizeof desc);
  if (!in_host_memory(mem, desc.params_offset, desc.params_size)) return GK_ABI_OUT_OF_BOUNDS;
  if (desc.params_size == 0 || desc.params_size > 4 * MAX_FIELDS) return GK_ABI_INVALID_PARAMS;
  const uint8_t *params = address(mem, desc.params_offset);
  bool fwd = dir == GK_FORWARD, rms = op == GK_OP_RMSNORM;
  gk_abi_layout lay;
  uint32_t used[REGION_COUNT];

  if (is_optimizer(op)) {
    optim_call a;
    gk_abi_code code = optim_layout(params, desc.params_size, op, dtype, dir, &a, &lay);
    if (code == GK_ABI_OK) code = check_regions(mem, &desc, desc_ptr, &lay, fwd, false, used);
    return code == GK_ABI_OK ? run_optim(mem, &desc, &lay, &a) : code;
  }

  gk_op_desc d;
  gk_plan *plan = NULL;
  gk_abi_code code = make_plan(params, desc.params_size, op, dtype, dir, &d, &plan, &lay);
  if (code != GK_ABI_OK) return code;
  code = check_regions(mem, &desc, desc_ptr, &lay, fwd, rms && fwd, used);
  bool rms_out = rms && fwd && used[REGION_SCRATCH];
  if (code == GK_ABI_OK) code = run_plan(mem, &desc, plan, &lay, fwd, rms, rms_out);
  gk_plan_destroy(plan);
  return code;
}
