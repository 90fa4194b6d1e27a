// The WebAssembly kernel ABI layer (wasm/abi/abi.c), built natively on an
// arena standing in for linear memory:
// - every op x direction x dtype: the tensors of each region are the ones
//   the README's table lists, in its order; a call through the ABI gives what
//   the plan API gives run directly on separately allocated tensors, from an
//   op description built here from the params as the table defines them
//   (the extended forms too: from_output, the split gated form, f32
//   parameters in the 16-bit modules, i64 indices, channel-last conv1d; and
//   SGD and clipping against gk_sgd_step / gk_clip_grad_norm);
// - the bad inputs: offsets and sizes past the end of memory, u32
//   wrap-around, regions in the module's memory, overlapping regions, short
//   params, unknown and wrong dtypes, zero dims and sizes, misalignment, a
//   bad value of each extended form's field and of the optimizers'; each
//   returns its code and leaves the host's memory unchanged, byte for byte;
//   and random changes of good calls' descriptors and params: a rejected
//   call changes nothing, an accepted one writes only its output.
// With `--write-cases DIR` it writes, for the node tests of the modules,
// every case's memory image before and after the native call (cases.json,
// *.bin); nothing of it is committed.
#include "gradkern_abi.h"
#include "harness.h"

#include <stdint.h>

enum { HOST_START = 65536, MEM_BYTES = 512 << 10 };

static const char *const dtype_names[] = {"f32", "f64", "f16", "bf16"};

static bool is_optim(gk_op op) {
  return op == GK_ABI_OP_ADAMW || op == GK_ABI_OP_SGD || op == GK_ABI_OP_CLIP_GRAD_NORM;
}

static const char *op_name(gk_op op) {
  if (op == GK_ABI_OP_ADAMW) return "adamw";
  if (op == GK_ABI_OP_SGD) return "sgd";
  if (op == GK_ABI_OP_CLIP_GRAD_NORM) return "clip_grad_norm";
  return gk_op_name(op);
}

// ---------------------------------------------------------------- the cases

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

// A case: the op and its params without the dtype field, and the fields of
// the extended form after it (nnext of them; MIXED: f32 in the f16 and bf16
// modules, the module's dtype in the others; SAME: the module's dtype).
typedef struct abi_case {
  gk_op op;
  const char *variant;
  uint32_t nfields;
  uint32_t fields[16];
  uint32_t nnext;
  uint32_t next[4];
} abi_case;

enum { MIXED = 0xFFFFFF01u, SAME = 0xFFFFFF02u };

static uint32_t next_field(const abi_case *c, int i, gk_dtype dt) {
  if (c->next[i] == SAME) return (uint32_t)dt;
  if (c->next[i] != MIXED) return c->next[i];
  return dt == GK_F16 || dt == GK_BF16 ? GK_F32 : (uint32_t)dt;
}
// The extended field i, or its default when the case uses the base form.
static uint32_t ext_or(const abi_case *c, int i, gk_dtype dt, uint32_t dflt) {
  return (uint32_t)i < c->nnext ? next_field(c, i, dt) : dflt;
}

// f32 fields by their bits (a static initializer cannot reinterpret a float).
#define F(bits) ((uint32_t)(bits))
static const abi_case cases[] = {
    {GK_OP_RELU, "", 2, {5, 12}, 0, {0}},
    {GK_OP_GELU, "erf", 3, {5, 12, 0}, 0, {0}},
    {GK_OP_GELU, "tanh", 3, {5, 12, 1}, 0, {0}},
    {GK_OP_SILU, "", 2, {5, 12}, 0, {0}},
    {GK_OP_SIGMOID, "", 2, {5, 12}, 0, {0}},
    {GK_OP_SOFTPLUS, "", 4, {5, 12, F(0x3fc00000 /* 1.5f */), F(0x40000000 /* 2.0f */)}, 0, {0}},
    {GK_OP_GLU, "", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 0, {0}},
    {GK_OP_REGLU, "", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 0, {0}},
    {GK_OP_SWIGLU, "", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 0, {0}},
    {GK_OP_GEGLU, "", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 0, {0}},
    {GK_OP_RMSNORM, "", 3, {F(0x3727c5ac /* 1e-5f */), 12, 5}, 0, {0}},
    {GK_OP_LAYERNORM, "", 3, {F(0x3727c5ac /* 1e-5f */), 12, 5}, 0, {0}},
    {GK_OP_LINEAR, "bias", 4, {6, 10, 7, 1}, 0, {0}},
    {GK_OP_LINEAR, "nobias", 4, {6, 10, 7, 0}, 0, {0}},
    {GK_OP_MATMUL, "", 7, {2, 5, 6, 7, 0, 0, 0}, 0, {0}},
    {GK_OP_MATMUL, "trans_shared", 7, {2, 5, 6, 7, 1, 1, 1}, 0, {0}},
    {GK_OP_SOFTMAX, "", 2, {5, 12}, 0, {0}},
    {GK_OP_LOG_SOFTMAX, "", 2, {5, 12}, 0, {0}},
    {GK_OP_CROSS_ENTROPY, "mean", 5, {6, 9, 0, (uint32_t)-100, F(0x3dcccccd /* 0.1f */)}, 0, {0}},
    {GK_OP_CROSS_ENTROPY, "sum", 5, {6, 9, 1, 2, F(0x00000000 /* 0.0f */)}, 0, {0}},
    {GK_OP_EMBEDDING, "", 4, {7, 11, 6, 3}, 0, {0}},
    {GK_OP_ROPE, "bthd", 8, {2, 5, 3, 8, 0, 0, F(0x461c4000 /* 10000.0f */), 3}, 0, {0}},
    {GK_OP_ROPE, "bhtd_interleaved", 8, {2, 5, 3, 8, 1, 1, F(0x43fa0000 /* 500.0f */), 0}, 0, {0}},
    {GK_OP_ATTENTION, "causal_gqa", 7, {2, 4, 2, 9, 8, 1, F(0x00000000 /* 0.0f */)}, 0, {0}},
    {GK_OP_ATTENTION, "full", 7, {1, 2, 2, 7, 4, 0, F(0x3e99999a /* 0.3f */)}, 0, {0}},
    {GK_OP_ADD, "", 5, {5, 12, 1, 12, F(0x3f000000 /* 0.5f */)}, 0, {0}},
    {GK_OP_MUL, "", 5, {5, 12, 5, 1, F(0x3fc00000 /* 1.5f */)}, 0, {0}},
    {GK_OP_CONV1D, "all", 8, {2, 6, 9, 4, 1, 1, 1, 1}, 0, {0}},
    {GK_OP_CONV1D, "plain", 8, {2, 6, 9, 3, 1, 0, 0, 0}, 0, {0}},
    {GK_OP_SELECTIVE_SCAN, "all", 14, {2, 6, 10, 4, 1, 0, 1, 1, 1, 1, 1, 1, 1, 4}, 0, {0}},
    {GK_OP_SELECTIVE_SCAN, "grouped", 14, {2, 6, 10, 4, 2, 2, 3, 0, 0, 0, 0, 0, 0, 64}, 0, {0}},
    {GK_ABI_OP_ADAMW, "", 7, {9, F(0x3c23d70a /* 0.01f */), F(0x3f666666 /* 0.9f */), F(0x3f7fbe77 /* 0.999f */), F(0x322bcc77 /* 1e-08f */), F(0x3d4ccccd /* 0.05f */), 3}, 0, {0}},
    // The extended forms (fields after dtype) and the other optimizers.
    {GK_OP_RELU, "from_output", 2, {5, 12}, 1, {1}},
    {GK_OP_SIGMOID, "from_output", 2, {5, 12}, 1, {1}},
    {GK_OP_GLU, "split", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 2, {1, 1}},
    {GK_OP_REGLU, "split", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 2, {1, 1}},
    {GK_OP_SWIGLU, "split", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 2, {1, 1}},
    {GK_OP_SWIGLU, "split_rows", 3, {6, 10, F(0x3f800000 /* 1.0f */)}, 2, {1, 0}},
    {GK_OP_GEGLU, "split", 3, {5, 12, F(0x3f800000 /* 1.0f */)}, 2, {1, 1}},
    {GK_OP_RMSNORM, "mixed", 3, {F(0x3727c5ac /* 1e-5f */), 12, 5}, 1, {MIXED}},
    {GK_OP_LAYERNORM, "mixed", 3, {F(0x3727c5ac /* 1e-5f */), 12, 5}, 1, {MIXED}},
    {GK_OP_LINEAR, "mixed", 4, {6, 10, 7, 1}, 1, {MIXED}},
    {GK_OP_CROSS_ENTROPY, "i64", 5, {6, 9, 0, (uint32_t)-100, F(0x3dcccccd /* 0.1f */)}, 1, {GK_I64}},
    {GK_OP_EMBEDDING, "i64", 4, {7, 11, 6, 3}, 1, {GK_I64}},
    {GK_OP_CONV1D, "channel_last", 8, {2, 6, 9, 4, 1, 1, 1, 1}, 1, {1}},
    {GK_OP_CONV1D, "channel_last_plain", 8, {2, 6, 9, 3, 1, 0, 0, 0}, 1, {1}},
    {GK_OP_SELECTIVE_SCAN, "mixed", 14, {2, 6, 10, 4, 1, 0, 1, 1, 1, 1, 1, 1, 1, 4}, 3, {MIXED, MIXED, MIXED}},
    {GK_OP_SELECTIVE_SCAN, "mixed_c", 14, {2, 6, 10, 4, 2, 2, 3, 0, 0, 0, 0, 0, 0, 64}, 3, {MIXED, SAME, MIXED}},
    {GK_ABI_OP_SGD, "momentum", 7, {9, F(0x3c23d70a /* 0.01f */), F(0x3f666666 /* 0.9f */), F(0x3dcccccd /* 0.1f */), F(0x3d4ccccd /* 0.05f */), 0, 3}, 0, {0}},
    {GK_ABI_OP_SGD, "nesterov_first", 7, {9, F(0x3c23d70a /* 0.01f */), F(0x3f666666 /* 0.9f */), 0, 0, 1, 1}, 0, {0}},
    {GK_ABI_OP_SGD, "plain", 7, {9, F(0x3dcccccd /* 0.1f */), 0, 0, F(0x3d4ccccd /* 0.05f */), 0, 2}, 0, {0}},
    {GK_ABI_OP_CLIP_GRAD_NORM, "clipped", 2, {9, F(0x3f000000 /* 0.5f */)}, 0, {0}},
    {GK_ABI_OP_CLIP_GRAD_NORM, "unclipped", 2, {9, F(0x42c80000 /* 100.0f */)}, 0, {0}},
};
#undef F

// The README's table: the tensors of each region (a | b | output | scratch),
// for the cases above (their optional tensors present or not).
static const char *table_layout(const abi_case *c, gk_direction dir);
static const char *expected_layout(const abi_case *c, gk_dtype dt, gk_direction dir, char *buf, size_t size) {
  const char *want = table_layout(c, dir);
  snprintf(buf, size, want, is_optim(c->op) && (dt == GK_F16 || dt == GK_BF16) ? ", master" : "");
  return buf;
}

static const char *table_layout(const abi_case *c, gk_direction dir) {
  bool fwd = dir == GK_FORWARD;
  switch ((int)c->op) {  // (the optimizers are past the enum)
  case GK_OP_RELU: case GK_OP_GELU: case GK_OP_SILU: case GK_OP_SIGMOID: case GK_OP_SOFTPLUS:
    if (c->nnext && c->next[0]) return fwd ? "x | - | y | -" : "dy | y | dx | -";  // from_output
    return fwd ? "x | - | y | -" : "dy | x | dx | -";
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU:
    if (c->nnext && c->next[0]) return fwd ? "x | - | y | -" : "dy | x | dx | -";  // split
    return fwd ? "x | gate | y | -" : "dy | x, gate | dx, dgate | -";
  case GK_OP_RMSNORM: return fwd ? "x | weight | y | rstd" : "dy | x, weight | dx, dweight | rstd";
  case GK_OP_LAYERNORM:
    return fwd ? "x | weight, bias | y | mean, rstd" : "dy | x, weight | dx, dweight, dbias | mean, rstd";
  case GK_OP_LINEAR:
    if (c->fields[3]) return fwd ? "x | weight, bias | y | -" : "dy | x, weight | dx, dweight, dbias | -";
    return fwd ? "x | weight | y | -" : "dy | x, weight | dx, dweight | -";
  case GK_OP_MATMUL: return fwd ? "A | B | y | -" : "dy | A, B | dA, dB | -";
  case GK_OP_SOFTMAX: case GK_OP_LOG_SOFTMAX: return fwd ? "x | - | y | -" : "dy | y | dx | -";
  case GK_OP_CROSS_ENTROPY: return fwd ? "logits | target | loss | -" : "dloss | logits, target | dlogits | -";
  case GK_OP_EMBEDDING: return fwd ? "weight | index | y | -" : "dy | index | dweight | -";
  case GK_OP_ROPE: return fwd ? "x | - | y | -" : "dy | - | dx | -";
  case GK_OP_ATTENTION: return fwd ? "q | k, v | y | lse" : "dy | q, k, v, y | dq, dk, dv | lse";
  case GK_OP_ADD: return fwd ? "A | B | y | -" : "dy | - | dA, dB | -";
  case GK_OP_MUL: return fwd ? "A | B | y | -" : "dy | A, B | dA, dB | -";
  case GK_OP_CONV1D:
    if (c->fields[6])
      return fwd ? "x | weight, bias, initial_state | y, final_state | -"
                 : "dy, dfinal_state | x, weight, bias, initial_state | dx, dweight, dbias, dinitial_state | -";
    return fwd ? "x | weight, bias | y | -" : "dy | x, weight | dx, dweight, dbias | -";  // bias read only with silu
  case GK_OP_SELECTIVE_SCAN:
    if (c->fields[7])
      return fwd ? "u, delta, z | A, B, C, D, delta_bias, initial_state | y, final_state | chunk_states"
                 : "dy, dfinal_state | u, delta, A, B, C, D, z, delta_bias, initial_state | "
                   "du, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dinitial_state | chunk_states";
    return fwd ? "u, delta | A, B, C | y | chunk_states" : "dy | u, delta, A, B, C | du, ddelta, dA, dB, dC | chunk_states";
  case GK_ABI_OP_ADAMW: return "grad | - | param, exp_avg, exp_avg_sq%s | -";
  case GK_ABI_OP_SGD: return c->fields[2] ? "grad | - | param, momentum_buf%s | -" : "grad | - | param%s | -";
  case GK_ABI_OP_CLIP_GRAD_NORM: return "- | - | grad, total_norm | -";
  default: return "?";
  }
}

static void layout_string(const gk_abi_layout *l, char *buf, size_t size) {
  size_t used = 0;
  for (int r = 0; r < GK_ABI_REGIONS; r++) {
    if (r) used += (size_t)snprintf(buf + used, size - used, " | ");
    if (!l->region[r].n) used += (size_t)snprintf(buf + used, size - used, "-");
    for (int i = 0; i < l->region[r].n; i++)
      used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", l->region[r].tensors[i].name);
  }
}

// The op description the table's params define, built here on their own.
static void desc_of(const abi_case *c, gk_dtype dt, gk_direction dir, gk_op_desc *d) {
  const uint32_t *f = c->fields;
  float fl[16];
  memcpy(fl, f, sizeof fl);
  int64_t s[4] = {f[0], f[1], 0, 0};
  switch (c->op) {
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM:
    s[0] = f[2], s[1] = f[1];
    gk_op_desc_init(d, c->op, dir, dt, 2, s);
    d->norm.eps = fl[0], d->norm.has_weight = 1, d->norm.has_bias = c->op == GK_OP_LAYERNORM;
    d->param_dtype = (int)ext_or(c, 0, dt, (uint32_t)dt);
    return;
  case GK_OP_MATMUL:
    s[0] = f[0], s[1] = f[4] ? f[2] : f[1], s[2] = f[4] ? f[1] : f[2];
    gk_op_desc_init(d, c->op, dir, dt, 3, s);
    d->matmul.n = f[3], d->matmul.trans_a = (int)f[4], d->matmul.trans_b = (int)f[5], d->matmul.shared_b = (int)f[6];
    return;
  case GK_OP_EMBEDDING:
    gk_op_desc_init(d, c->op, dir, dt, 1, s);
    d->index_dtype = (gk_dtype)ext_or(c, 0, dt, GK_I32), d->embedding.num_embeddings = f[1], d->embedding.dim = f[2];
    d->embedding.padding_idx = (int32_t)f[3];
    return;
  case GK_OP_ROPE: {
    int64_t r[4] = {f[0], f[4] ? f[2] : f[1], f[4] ? f[1] : f[2], f[3]};
    gk_op_desc_init(d, c->op, dir, dt, 4, r);
    d->rope.layout = (gk_rope_layout)f[4], d->rope.pairing = (gk_rope_pairing)f[5];
    d->rope.theta = fl[6], d->rope.offset = f[7];
    return;
  }
  case GK_OP_ATTENTION: {
    int64_t q[4] = {f[0], f[1], f[3], f[4]};
    gk_op_desc_init(d, c->op, dir, dt, 4, q);
    d->attn.kv_heads = f[2], d->attn.causal = (int)f[5], d->attn.scale = fl[6];
    return;
  }
  case GK_OP_CONV1D: case GK_OP_SELECTIVE_SCAN: {
    bool channel_last = c->op == GK_OP_CONV1D && ext_or(c, 0, dt, 0);
    int64_t x[3] = {f[0], channel_last ? f[2] : f[1], channel_last ? f[1] : f[2]};
    gk_op_desc_init(d, c->op, dir, dt, 3, x);
    if (c->op == GK_OP_CONV1D) {
      d->conv.channel_last = channel_last;
      d->conv.width = f[3], d->conv.has_bias = (int)f[4], d->conv.silu = (int)f[5];
      d->conv.has_initial_state = (int)f[6], d->conv.has_final_state = (int)f[7];
    } else {
      d->scan.d_state = f[3], d->scan.b_layout = (gk_scan_layout)f[4], d->scan.c_layout = (gk_scan_layout)f[5];
      d->scan.groups = f[6], d->scan.has_D = (int)f[7], d->scan.has_z = (int)f[8];
      d->scan.has_delta_bias = (int)f[9], d->scan.delta_softplus = (int)f[10];
      d->scan.has_initial_state = (int)f[11], d->scan.has_final_state = (int)f[12], d->scan.chunk_size = f[13];
      d->param_dtype = (int)ext_or(c, 0, dt, (uint32_t)dt);
      d->scan.b_dtype = (int)ext_or(c, 1, dt, (uint32_t)dt), d->scan.c_dtype = (int)ext_or(c, 2, dt, (uint32_t)dt);
    }
    return;
  }
  default: break;
  }
  gk_op_desc_init(d, c->op, dir, dt, 2, s);
  switch (c->op) {
  case GK_OP_GELU: d->act.approximate = (gk_gelu_approx)f[2]; break;
  case GK_OP_SOFTPLUS: d->act.beta = fl[2], d->act.threshold = fl[3]; break;
  case GK_OP_RELU: case GK_OP_SIGMOID: d->act.from_output = dir == GK_BACKWARD && ext_or(c, 0, dt, 0); break;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU:
    d->gated.form = ext_or(c, 0, dt, 0) ? GK_GATED_SPLIT : GK_GATED_TWO_TENSOR;
    d->gated.dim = (int)ext_or(c, 1, dt, 0);
    break;
  case GK_OP_LINEAR:
    d->linear.out_features = f[2], d->linear.has_bias = (int)f[3];
    d->param_dtype = (int)ext_or(c, 0, dt, (uint32_t)dt);
    break;
  case GK_OP_CROSS_ENTROPY:
    d->index_dtype = (gk_dtype)ext_or(c, 0, dt, GK_I32), d->ce.reduction = (gk_reduction)f[2], d->ce.ignore_index = (int32_t)f[3];
    d->ce.label_smoothing = fl[4];
    break;
  case GK_OP_ADD: case GK_OP_MUL:
    d->binary.b_rank = 2, d->binary.b_shape[0] = f[2], d->binary.b_shape[1] = f[3], d->binary.alpha = fl[4];
    break;
  default: break;
  }
}

// ---------------------------------------------------------------- host memory

typedef struct host {
  uint8_t *mem;
  uint8_t *before;  // the memory before the call
  gk_abi_memory m;
  uint32_t next;  // bump allocation of host offsets
} host;

static void host_init(host *h) {
  h->mem = calloc(1, MEM_BYTES);
  h->m = (gk_abi_memory){.base = (uintptr_t)h->mem, .bytes = MEM_BYTES, .host_start = HOST_START};
  h->next = HOST_START;
}

static uint32_t host_place(host *h, uint32_t bytes) {
  uint32_t at = h->next;
  h->next = (at + bytes + 63) & ~63u;
  return at;
}

// One prepared call: params, regions filled with inputs, the descriptor.
typedef struct call {
  gk_abi_layout lay;
  gk_abi_desc desc;
  uint32_t desc_ptr, params_len, dtype_at;  // dtype_at: the dtype field's byte offset in the params
  uint32_t off[GK_ABI_REGIONS];
} call;

static void fill_tensor(host *h, uint32_t at, const gk_abi_tensor *t, const abi_case *c) {
  gk_tensor v;
  gk_tensor_init(&v, h->mem + at, t->dtype, t->rank, t->shape);
  int64_t n = gk_tensor_numel(&v);
  for (int64_t i = 0; i < n; i++) {
    double x = rng_uniform(-1, 1);
    if (t->kind == GK_ARG_INDEX || t->kind == GK_ARG_TARGET) {
      int32_t classes = (int32_t)c->fields[1];
      int32_t k = (int32_t)(rng_next() % (uint64_t)classes);
      if (t->kind == GK_ARG_TARGET && i == 1) k = (int32_t)c->fields[3];  // an ignored row (or class 2)
      if (t->dtype == GK_I64) memcpy(h->mem + at + 8 * i, &(int64_t){k}, 8);
      else memcpy(h->mem + at + 4 * i, &k, 4);
      continue;
    }
    if (t->kind == GK_ARG_RSTD) x = rng_uniform(0.5, 2);  // rms, positive
    if (!strcmp(t->name, "exp_avg_sq")) x = rng_uniform(0, 1);
    tset(&v, i, x);
  }
}

static void prepare(host *h, const abi_case *c, gk_dtype dt, gk_direction dir, call *k) {
  uint32_t params[20];
  memcpy(params, c->fields, 4 * c->nfields);
  params[c->nfields] = (uint32_t)dt;
  for (uint32_t i = 0; i < c->nnext; i++) params[c->nfields + 1 + i] = next_field(c, (int)i, dt);
  k->params_len = 4 * (c->nfields + 1 + c->nnext);
  k->dtype_at = 4 * c->nfields;
  gk_abi_code code = gk_abi_describe(c->op, dt, dir, params, k->params_len, &k->lay);
  check(code == GK_ABI_OK, "%s %s: describe gave %d", op_name(c->op), dtype_names[dt], code);
  uint32_t p = host_place(h, k->params_len);
  memcpy(h->mem + p, params, k->params_len);
  for (int r = 0; r < GK_ABI_REGIONS; r++) {
    const gk_abi_region *reg = &k->lay.region[r];
    k->off[r] = reg->bytes ? host_place(h, reg->bytes) : 0;
    bool input = r == 0 || r == 1 || (r == 3 && dir == GK_BACKWARD) || is_optim(c->op);  // optimizers: in place
    for (int i = 0; i < reg->n; i++) {
      uint32_t at = k->off[r] + reg->tensors[i].offset;
      if (input) fill_tensor(h, at, &reg->tensors[i], c);
      else memset(h->mem + at, 0xAB, reg->tensors[i].bytes);
    }
  }
  k->desc = (gk_abi_desc){k->off[0], k->lay.region[0].bytes, k->off[1], k->lay.region[1].bytes,
                          k->off[2], k->lay.region[2].bytes, k->off[3], k->lay.region[3].bytes,
                          p, k->params_len};
  k->desc_ptr = host_place(h, sizeof k->desc);
  memcpy(h->mem + k->desc_ptr, &k->desc, sizeof k->desc);
}

// ---------------------------------------------------------------- ABI against the plan API

// Run the plan directly on separately allocated copies of the call's inputs;
// compare its outputs with the ABI's.
// The optimizers: gk_adamw_step, gk_sgd_step, gk_clip_grad_norm on copies,
// with the config the params define.
static void compare_optim(host *h, const abi_case *c, gk_dtype dt, const call *k) {
  float fl[16];
  memcpy(fl, c->fields, sizeof fl);
  gk_tensor t[6];
  void *bufs[6];
  int n = 0;
  for (int r = 0; r < GK_ABI_REGIONS; r += 2)
    for (int i = 0; i < k->lay.region[r].n; i++, n++) {
      const gk_abi_tensor *a = &k->lay.region[r].tensors[i];
      bufs[n] = calloc(1, a->bytes + 8);
      memcpy(bufs[n], h->before + k->off[r] + a->offset, a->bytes);
      gk_tensor_init(&t[n], bufs[n], a->dtype, 1, a->shape);
    }
  bool half = dt == GK_F16 || dt == GK_BF16;
  gk_status s;
  if (c->op == GK_ABI_OP_ADAMW) {
    gk_adamw_config cfg;
    gk_adamw_config_init(&cfg);
    cfg.lr = fl[1], cfg.beta1 = fl[2], cfg.beta2 = fl[3], cfg.eps = fl[4], cfg.weight_decay = fl[5];
    s = gk_adamw_step(&cfg, 1, &t[1], &t[0], &t[2], &t[3], half ? &t[4] : NULL, c->fields[6]);
  } else if (c->op == GK_ABI_OP_SGD) {
    gk_sgd_config cfg;
    gk_sgd_config_init(&cfg);
    cfg.lr = fl[1], cfg.momentum = fl[2], cfg.dampening = fl[3], cfg.weight_decay = fl[4];
    cfg.nesterov = (int)c->fields[5];
    bool mom = cfg.momentum != 0;
    s = gk_sgd_step(&cfg, 1, &t[1], &t[0], mom ? &t[2] : NULL, half ? &t[mom ? 3 : 2] : NULL, c->fields[6]);
  } else {
    double norm = -1;
    s = gk_clip_grad_norm(1, &t[0], fl[1], &norm);
    tset(&t[1], 0, norm);
    check(norm > 0 && (norm > fl[1]) == !strcmp(c->variant, "clipped"), "clip %s: norm %g", c->variant, norm);
  }
  check(s == GK_SUCCESS, "%s %s: %s", op_name(c->op), dtype_names[dt], gk_last_error());
  int first = c->op == GK_ABI_OP_CLIP_GRAD_NORM ? 0 : 1;
  for (int i = 0; i < k->lay.region[2].n; i++) {
    const gk_abi_tensor *a = &k->lay.region[2].tensors[i];
    gk_tensor got;
    gk_tensor_init(&got, h->mem + k->off[2] + a->offset, a->dtype, 1, a->shape);
    double worst = tcompare(&got, &t[first + i], tol_of(a->dtype), false);
    check(worst <= 1, "%s %s %s: %s differs from the library's call (%.3g of tolerance)", op_name(c->op), c->variant,
          dtype_names[dt], a->name, worst);
  }
  for (int i = 0; i < n; i++) free(bufs[i]);
}

static void compare_direct(host *h, const abi_case *c, gk_dtype dt, gk_direction dir, const call *k) {
  if (is_optim(c->op)) {
    compare_optim(h, c, dt, k);
    return;
  }
  gk_op_desc d;
  desc_of(c, dt, dir, &d);
  gk_plan *plan = NULL;
  gk_status s = gk_plan_create(&d, &plan);
  check(s == GK_SUCCESS, "%s %s: plan: %s", op_name(c->op), dtype_names[dt], gk_last_error());
  if (s != GK_SUCCESS) return;
  gk_arg args[GK_ABI_REGIONS * GK_ABI_MAX_TENSORS];
  void *bufs[GK_ABI_REGIONS * GK_ABI_MAX_TENSORS];
  int n = 0;
  for (int r = 0; r < GK_ABI_REGIONS; r++)
    for (int i = 0; i < k->lay.region[r].n; i++, n++) {
      const gk_abi_tensor *t = &k->lay.region[r].tensors[i];
      bufs[n] = calloc(1, t->bytes + 8);
      memcpy(bufs[n], h->mem + k->off[r] + t->offset, t->bytes);
      args[n].kind = t->kind;
      gk_tensor_init(&args[n].tensor, bufs[n], t->dtype, t->rank, t->shape);
      // RMSNorm's rms crosses the ABI; the library takes rstd = 1 / rms.
      if (c->op == GK_OP_RMSNORM && t->kind == GK_ARG_RSTD)
        for (int64_t j = 0; j < gk_tensor_numel(&args[n].tensor); j++)
          tset(&args[n].tensor, j, 1.0 / tget(&args[n].tensor, j));
    }
  size_t ws = 0;
  gk_plan_workspace_size(plan, &ws);
  void *w = ws ? aligned_alloc(64, (ws + 63) / 64 * 64) : NULL;
  s = gk_plan_run(plan, args, n, w, ws);
  check(s == GK_SUCCESS, "%s %s: run: %s", op_name(c->op), dtype_names[dt], gk_last_error());
  n = 0;
  for (int r = 0; r < GK_ABI_REGIONS; r++)
    for (int i = 0; i < k->lay.region[r].n; i++, n++) {
      bool written = r == 2 || (r == 3 && dir == GK_FORWARD);
      if (!written) continue;
      const gk_abi_tensor *t = &k->lay.region[r].tensors[i];
      gk_tensor got;
      gk_tensor_init(&got, h->mem + k->off[r] + t->offset, t->dtype, t->rank, t->shape);
      if (c->op == GK_OP_RMSNORM && t->kind == GK_ARG_RSTD)
        for (int64_t j = 0; j < gk_tensor_numel(&args[n].tensor); j++)
          tset(&args[n].tensor, j, 1.0 / tget(&args[n].tensor, j));
      tol tl = tol_of(t->dtype);
      double worst = tcompare(&got, &args[n].tensor, tl, false);
      check(worst <= 1, "%s %s %s %s: %s differs from the plan run directly (%.3g of tolerance)",
            op_name(c->op), c->variant, dtype_names[dt], dir ? "bwd" : "fwd", gk_arg_name(t->kind), worst);
    }
  for (int i = 0; i < n; i++) free(bufs[i]);
  free(w);
  gk_plan_destroy(plan);
}

// ---------------------------------------------------------------- bad new fields

// A bad value of one params field of an f32 case (at: its byte offset in the
// params), or of one word of the host's memory (in_memory: at is then the
// byte offset from the case's first byte), and the code it gets (library:
// the library refuses it, which sets its error message in the module's memory).
typedef struct bad_edit {
  uint32_t at, value;
  int code;
  bool in_memory, library;
  const char *what;
} bad_edit;

static int bad_edits(const abi_case *c, const call *k, bad_edit *out) {
  int n = 0;
  uint32_t e = 4 * (c->nfields + 1);  // the first field after dtype
  const uint32_t NAN_BITS = 0x7fc00000, INF_BITS = 0x7f800000, MINUS_ONE = 0xbf800000;
#define BAD(at_, value_, code_, what_) (out[n++] = (bad_edit){(at_), (value_), (code_), false, false, (what_)})
  switch ((int)c->op) {
  case GK_OP_RELU: case GK_OP_SIGMOID:
    if (c->nnext) BAD(e, 2, GK_ABI_INVALID_PARAMS, "from_output 2");
    break;
  case GK_OP_GLU: case GK_OP_REGLU: case GK_OP_SWIGLU: case GK_OP_GEGLU:
    if (!c->nnext) break;
    BAD(e, 2, GK_ABI_INVALID_PARAMS, "split 2");
    BAD(e + 4, 2, GK_ABI_INVALID_PARAMS, "split_dim 2");
    BAD(8, 0x40000000 /* 2.0f */, GK_ABI_UNSUPPORTED, "beta 2 in the split form");
    if (c->next[1] == 1 && c->fields[0] % 2) {
      BAD(e + 4, 0, GK_ABI_INVALID_PARAMS, "split along an odd dim");
      out[n - 1].library = true;
    }
    break;
  case GK_OP_RMSNORM: case GK_OP_LAYERNORM: case GK_OP_LINEAR:
    if (!c->nnext) break;
    BAD(e, 4, GK_ABI_UNKNOWN_DTYPE, "param_dtype 4");
    BAD(e, GK_F64, GK_ABI_WRONG_DTYPE, "param_dtype f64 in an f32 module");
    BAD(e, GK_BF16, GK_ABI_WRONG_DTYPE, "param_dtype bf16 in an f32 module");
    break;
  case GK_OP_CROSS_ENTROPY: case GK_OP_EMBEDDING:
    if (!c->nnext) break;
    BAD(e, 6, GK_ABI_UNKNOWN_DTYPE, "index_dtype 6");
    BAD(e, GK_F32, GK_ABI_WRONG_DTYPE, "index_dtype f32");
    BAD(e, GK_I32, GK_ABI_INVALID_INPUT, "index_dtype i32 on i64 indices: input b too large");
    break;
  case GK_OP_CONV1D:
    if (c->nnext) BAD(e, 2, GK_ABI_INVALID_PARAMS, "channel_last 2");
    break;
  case GK_OP_SELECTIVE_SCAN:
    if (!c->nnext) break;
    BAD(e, 4, GK_ABI_UNKNOWN_DTYPE, "param_dtype 4");
    BAD(e + 4, GK_F64, GK_ABI_WRONG_DTYPE, "b_dtype f64 in an f32 module");
    BAD(e + 8, GK_F16, GK_ABI_WRONG_DTYPE, "c_dtype f16 in an f32 module");
    break;
  case GK_ABI_OP_SGD:
    BAD(20, 2, GK_ABI_INVALID_PARAMS, "nesterov 2");
    BAD(4, MINUS_ONE, GK_ABI_INVALID_PARAMS, "lr -1");
    BAD(4, NAN_BITS, GK_ABI_INVALID_PARAMS, "lr NaN");
    BAD(16, MINUS_ONE, GK_ABI_INVALID_PARAMS, "weight_decay -1");
    BAD(24, 0, GK_ABI_INVALID_PARAMS, "step 0");
    if (c->fields[2]) {
      BAD(8, MINUS_ONE, GK_ABI_INVALID_PARAMS, "momentum -1");
      BAD(8, INF_BITS, GK_ABI_INVALID_PARAMS, "momentum inf");
      if (!c->fields[5]) BAD(8, 0, GK_ABI_INVALID_OUTPUT, "momentum 0: no momentum_buf, the output region too large");
    } else {
      BAD(8, 0x3f000000 /* 0.5f */, GK_ABI_INVALID_OUTPUT, "momentum 0.5: a momentum_buf, the output region too small");
    }
    if (c->fields[5]) BAD(12, 0x3dcccccd /* 0.1f */, GK_ABI_INVALID_PARAMS, "nesterov with dampening 0.1");
    else if (c->fields[2]) BAD(12, NAN_BITS, GK_ABI_INVALID_PARAMS, "dampening NaN");
    break;
  case GK_ABI_OP_CLIP_GRAD_NORM:
    BAD(4, MINUS_ONE, GK_ABI_INVALID_PARAMS, "max_norm -1");
    BAD(4, NAN_BITS, GK_ABI_INVALID_PARAMS, "max_norm NaN");
    BAD(4, INF_BITS, GK_ABI_INVALID_PARAMS, "max_norm inf");
    // A gradient element inf: the norm is not finite, nothing is written.
    out[n++] = (bad_edit){k->off[2] - HOST_START + 4 * 3, INF_BITS, GK_ABI_INVALID_INPUT, true, true,
                          "a gradient inf: the norm is not finite"};
    out[n++] = (bad_edit){k->off[2] - HOST_START, NAN_BITS, GK_ABI_INVALID_INPUT, true, true,
                          "a gradient NaN: the norm is not finite"};
    break;
  default: break;
  }
#undef BAD
  return n;
}

// ---------------------------------------------------------------- the cases for node

static FILE *json;
static int json_count;

static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  check(f && fwrite(data, 1, bytes, f) == bytes, "cannot write %s", path);
  if (f) fclose(f);
}

// The host memory image [HOST_START, end of the call) before and after the
// native call, and where the written tensors are.
static void write_case(const char *dir, const host *h, const uint8_t *before, uint32_t lo, uint32_t hi,
                       const abi_case *c, gk_dtype dt, gk_direction dir_, const call *k) {
  char name[160], file[200];
  snprintf(name, sizeof name, "%s%s%s_%s_%s", op_name(c->op), *c->variant ? "_" : "", c->variant,
           dtype_names[dt], dir_ ? "bwd" : "fwd");
  snprintf(file, sizeof file, "%s.in.bin", name);
  write_file(dir, file, before + lo, hi - lo);
  snprintf(file, sizeof file, "%s.out.bin", name);
  write_file(dir, file, h->mem + lo, hi - lo);
  fprintf(json, "%s{\"name\":\"%s\",\"module\":\"%s_%s\",\"direction\":\"%s\",\"base\":%u,\"bytes\":%u,"
                "\"desc\":%u,\"dtype_at\":%u,\"extended\":%s,\"bad\":[",
          json_count++ ? ",\n" : "", name, op_name(c->op), dtype_names[dt], dir_ ? "backward" : "forward", lo,
          hi - lo, k->desc_ptr, k->dtype_at, c->nnext ? "true" : "false");
  bad_edit bad[16];
  int nbad = dt == GK_F32 ? bad_edits(c, k, bad) : 0;
  for (int i = 0; i < nbad; i++)
    fprintf(json, "%s{\"at\":%u,\"value\":%u,\"code\":%d,\"memory\":%s,\"library\":%s,\"what\":\"%s\"}", i ? "," : "",
            bad[i].at, bad[i].value, bad[i].code, bad[i].in_memory ? "true" : "false", bad[i].library ? "true" : "false",
            bad[i].what);
  fprintf(json, "],\"outputs\":[");
  int n = 0;
  for (int r = 2; r < GK_ABI_REGIONS; r++) {
    if (r == 3 && dir_ == GK_BACKWARD) continue;
    for (int i = 0; i < k->lay.region[r].n; i++) {
      const gk_abi_tensor *t = &k->lay.region[r].tensors[i];
      tol tl = tol_of(t->dtype);
      fprintf(json, "%s{\"name\":\"%s\",\"dtype\":\"%s\",\"offset\":%u,\"bytes\":%u,\"rtol\":%g,\"atol\":%g}",
              n++ ? "," : "", t->name, gk_dtype_name(t->dtype), k->off[r] + t->offset, t->bytes,
              tl.rtol, tl.atol);
    }
  }
  fprintf(json, "]}");
}

// ---------------------------------------------------------------- bad inputs

static host bad_host;

// Run a prepared call with a changed descriptor (written at a fresh place) and
// check the code and that the host's memory did not change.
static void expect_code(host *h, const call *k, gk_abi_desc d, const abi_case *c, gk_direction dir, int want,
                        const char *what) {
  uint32_t at = host_place(h, sizeof d);
  memcpy(h->mem + at, &d, sizeof d);
  uint8_t *before = malloc(MEM_BYTES);
  memcpy(before, h->mem, MEM_BYTES);
  int got = gk_abi_run(&h->m, c->op, GK_F32, dir, at);
  check(got == want, "%s %s: %s: code %d, want %d", op_name(c->op), dir ? "bwd" : "fwd", what, got, want);
  check(memcmp(before, h->mem, MEM_BYTES) == 0, "%s: %s: memory changed", op_name(c->op), what);
  free(before);
  (void)k;
}

static void bad_inputs(const abi_case *c, gk_direction dir) {
  host *h = &bad_host;
  h->next = HOST_START;
  memset(h->mem, 0, MEM_BYTES);
  call k;
  prepare(h, c, GK_F32, dir, &k);
  gk_abi_desc d = k.desc;
  uint32_t end = (uint32_t)h->m.bytes;
  // Each region: past the end, wrapping around u32, in the module's memory, zero size.
  uint32_t *offs[4] = {&d.input_a_offset, &d.input_b_offset, &d.output_offset, &d.scratch_offset};
  uint32_t *sizes[4] = {&d.input_a_size, &d.input_b_size, &d.output_size, &d.scratch_size};
  static const char *const names[4] = {"input a", "input b", "output", "scratch"};
  for (int r = 0; r < 4; r++) {
    if (!*sizes[r]) continue;
    char what[96];
    bool written = r == 2 || (r == 3 && dir == GK_FORWARD);
    gk_abi_desc e = d;
    *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = end - *sizes[r] / 2;
    snprintf(what, sizeof what, "%s past the end of memory", names[r]);
    expect_code(h, &k, e, c, dir, GK_ABI_OUT_OF_BOUNDS, what);
    e = d;
    *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = UINT32_MAX - 3;
    snprintf(what, sizeof what, "%s offset + size wraps around", names[r]);
    expect_code(h, &k, e, c, dir, GK_ABI_OUT_OF_BOUNDS, what);
    e = d;
    *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = 1024;
    snprintf(what, sizeof what, "%s in the module's memory", names[r]);
    expect_code(h, &k, e, c, dir, GK_ABI_OUT_OF_BOUNDS, what);
    bool optional = c->op == GK_OP_RMSNORM && r == 3 && dir == GK_FORWARD;
    if (!optional) {
      e = d;
      *(uint32_t *)((char *)&e + ((char *)sizes[r] - (char *)&d)) = 0;
      snprintf(what, sizeof what, "%s size 0", names[r]);
      expect_code(h, &k, e, c, dir, written ? GK_ABI_INVALID_OUTPUT : GK_ABI_INVALID_INPUT, what);
      e = d;
      *(uint32_t *)((char *)&e + ((char *)sizes[r] - (char *)&d)) += 8;
      snprintf(what, sizeof what, "%s 8 bytes too large", names[r]);
      expect_code(h, &k, e, c, dir, written ? GK_ABI_INVALID_OUTPUT : GK_ABI_INVALID_INPUT, what);
    }
    if (written) {
      // Overlapping: the written region over each other region, the params, the descriptor.
      for (int o = 0; o < 4; o++) {
        if (o == r || !*sizes[o]) continue;
        e = d;
        *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = *offs[o];
        snprintf(what, sizeof what, "%s over %s", names[r], names[o]);
        expect_code(h, &k, e, c, dir, GK_ABI_OVERLAP, what);
      }
      e = d;
      *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = d.params_offset & ~7u;
      snprintf(what, sizeof what, "%s over the params", names[r]);
      expect_code(h, &k, e, c, dir, GK_ABI_OVERLAP, what);
      // Misaligned: a fresh place, 2 bytes off (f32 tensors).
      e = d;
      *(uint32_t *)((char *)&e + ((char *)offs[r] - (char *)&d)) = host_place(h, *sizes[r] + 8) + 2;
      snprintf(what, sizeof what, "%s misaligned", names[r]);
      expect_code(h, &k, e, c, dir, GK_ABI_MISALIGNED, what);
    }
  }
  // The descriptor itself out of bounds.
  uint8_t *before = malloc(MEM_BYTES);
  memcpy(before, h->mem, MEM_BYTES);
  check(gk_abi_run(&h->m, c->op, GK_F32, dir, end - 20) == GK_ABI_OUT_OF_BOUNDS, "descriptor past the end");
  check(gk_abi_run(&h->m, c->op, GK_F32, dir, UINT32_MAX - 8) == GK_ABI_OUT_OF_BOUNDS, "descriptor wrapping");
  check(gk_abi_run(&h->m, c->op, GK_F32, dir, 0) == GK_ABI_OUT_OF_BOUNDS, "descriptor at 0");
  check(memcmp(before, h->mem, MEM_BYTES) == 0, "descriptor checks changed memory");
  free(before);
  // Params: short, empty, past the end, unknown and wrong dtype, a zero dim.
  gk_abi_desc e = d;
  // (4 short is the short form, and of an extended form the base form: 2 short then)
  e.params_size -= c->nnext ? 2 : gk_abi_params_short_size(c->op) ? 8 : 4;
  expect_code(h, &k, e, c, dir, GK_ABI_INVALID_PARAMS, "params short");
  e = d, e.params_size = 2;
  expect_code(h, &k, e, c, dir, GK_ABI_INVALID_PARAMS, "params 2 bytes");
  e = d, e.params_size = 0;
  expect_code(h, &k, e, c, dir, GK_ABI_INVALID_PARAMS, "params empty");
  e = d, e.params_offset = end - 4;
  expect_code(h, &k, e, c, dir, GK_ABI_OUT_OF_BOUNDS, "params past the end");
  uint32_t p = host_place(h, k.params_len);
  memcpy(h->mem + p, h->mem + d.params_offset, k.params_len);
  e = d, e.params_offset = p;
  uint32_t bad = 7;
  memcpy(h->mem + p + k.dtype_at, &bad, 4);
  expect_code(h, &k, e, c, dir, GK_ABI_UNKNOWN_DTYPE, "params dtype 7");
  bad = GK_F64;
  memcpy(h->mem + p + k.dtype_at, &bad, 4);
  expect_code(h, &k, e, c, dir, GK_ABI_WRONG_DTYPE, "params dtype f64 in an f32 module");
  bad = GK_F32;
  memcpy(h->mem + p + k.dtype_at, &bad, 4);
  uint32_t zero = 0;
  int dim = c->op == GK_OP_RMSNORM || c->op == GK_OP_LAYERNORM ? 1 : 0;
  memcpy(h->mem + p + 4 * dim, &zero, 4);
  expect_code(h, &k, e, c, dir, GK_ABI_INVALID_PARAMS, "a zero dim");
  // The new fields' bad values (and clipping's non-finite gradients), each alone.
  bad_edit edits[16];
  int nedits = bad_edits(c, &k, edits);
  for (int i = 0; i < nedits; i++) {
    if (edits[i].in_memory) {
      uint32_t at = HOST_START + edits[i].at, was;
      memcpy(&was, h->mem + at, 4);
      memcpy(h->mem + at, &edits[i].value, 4);
      expect_code(h, &k, d, c, dir, edits[i].code, edits[i].what);
      memcpy(h->mem + at, &was, 4);
      continue;
    }
    memcpy(h->mem + p, h->mem + d.params_offset, k.params_len);
    memcpy(h->mem + p + edits[i].at, &edits[i].value, 4);
    expect_code(h, &k, e, c, dir, edits[i].code, edits[i].what);
  }
}

// Random descriptors and params: each field or params byte of a good call
// changed to an edge value (0, the end of memory, near 2^32, another field's
// value, off by a few). A rejected call changes nothing; an accepted one
// writes only its output region (and forward's scratch). Any access outside
// the arena is an ASan report in test_wasm_abi_asan.
static void random_inputs(const abi_case *c, gk_direction dir, int rounds) {
  host *h = &bad_host;
  uint8_t *before = malloc(MEM_BYTES);
  for (int round = 0; round < rounds; round++) {
    h->next = HOST_START;
    memset(h->mem, 0, MEM_BYTES);
    call k;
    prepare(h, c, GK_F32, dir, &k);
    uint32_t f[10];
    memcpy(f, &k.desc, sizeof f);
    int changes = 1 + (int)(rng_next() % 3);
    for (int i = 0; i < changes; i++) {
      uint32_t end = (uint32_t)h->m.bytes, pick = (uint32_t)(rng_next() % 10), small = (uint32_t)(rng_next() % 16);
      uint32_t edges[] = {0, small, end - small, end + small, UINT32_MAX - small, f[rng_next() % 10],
                          f[pick] + small, f[pick] - small, (uint32_t)rng_next()};
      if (rng_next() % 4 == 0) {  // a params byte
        uint32_t at = k.desc.params_offset + (uint32_t)(rng_next() % k.params_len);
        h->mem[at] = (uint8_t)(rng_next() % 4 == 0 ? 0 : rng_next());
      } else {
        f[pick] = edges[rng_next() % (sizeof edges / sizeof edges[0])];
      }
    }
    memcpy(h->mem + k.desc_ptr, f, sizeof f);
    memcpy(before, h->mem, MEM_BYTES);
    gk_abi_code code = gk_abi_run(&h->m, c->op, GK_F32, dir, k.desc_ptr);
    gk_abi_desc d;
    memcpy(&d, f, sizeof d);
    if (code == GK_ABI_OK) {
      // Only the output (and forward's scratch) may differ.
      uint64_t lo[2] = {d.output_offset, dir == GK_FORWARD ? d.scratch_offset : 0};
      uint64_t hi[2] = {lo[0] + d.output_size, dir == GK_FORWARD ? lo[1] + d.scratch_size : 0};
      bool outside = false;
      for (uint64_t i = 0; i < MEM_BYTES && !outside; i++)
        if (h->mem[i] != before[i] && !(i >= lo[0] && i < hi[0]) && !(i >= lo[1] && i < hi[1])) outside = true;
      check(!outside, "%s %s: an accepted random call wrote outside its output", op_name(c->op), dir ? "bwd" : "fwd");
    } else {
      check(memcmp(before, h->mem, MEM_BYTES) == 0, "%s %s: a rejected random call (code %d) changed memory",
            op_name(c->op), dir ? "bwd" : "fwd", code);
    }
  }
  free(before);
}

// ---------------------------------------------------------------- main

static void info_and_init(void) {
  host h;
  host_init(&h);
  uint32_t at = host_place(&h, 16);
  memset(h.mem + at, 0xEE, 16);
  check(gk_abi_info_write(&h.m, GK_OP_SWIGLU, at, 1234, 10) == GK_ABI_OK, "info");
  gk_abi_info info;
  memcpy(&info, h.mem + at, sizeof info);
  check(info.name_ptr == 1234 && info.name_len == 10 && info.version_major == GK_VERSION_MAJOR &&
            info.version_minor == GK_VERSION_MINOR && info.supports_backward == 1 && h.mem[at + 15] == 0xEE,
        "info fields");
  for (gk_op op = GK_ABI_OP_ADAMW; op <= GK_ABI_OP_CLIP_GRAD_NORM; op = (gk_op)(op + 1)) {
    check(gk_abi_info_write(&h.m, op, at, 1234, 10) == GK_ABI_OK, "info %s", op_name(op));
    check(h.mem[at + 14] == 0, "%s: supports_backward 0", op_name(op));
  }
  check(gk_abi_info_write(&h.m, GK_OP_SWIGLU, 0, 1, 1) == GK_ABI_INVALID_PARAMS, "info at 0");
  check(gk_abi_info_write(&h.m, GK_OP_SWIGLU, MEM_BYTES - 8, 1, 1) == GK_ABI_OUT_OF_BOUNDS, "info past the end");
  check(gk_abi_info_write(&h.m, GK_OP_SWIGLU, at + 2, 1, 1) == GK_ABI_MISALIGNED, "info misaligned");
  uint32_t params[3] = {4, 8, f32_bits(1.0f)};
  uint32_t p = host_place(&h, sizeof params);
  memcpy(h.mem + p, params, sizeof params);
  check(gk_abi_check_params(&h.m, GK_OP_SWIGLU, GK_F32, p, 12) == GK_ABI_OK, "init: the short SwiGLU params");
  check(gk_abi_check_params(&h.m, GK_OP_SWIGLU, GK_F32, p, 8) == GK_ABI_INVALID_PARAMS, "init: params short");
  check(gk_abi_check_params(&h.m, GK_OP_SWIGLU, GK_F32, 0, 0) == GK_ABI_OK, "init: no params");
  check(gk_abi_check_params(&h.m, GK_OP_SWIGLU, GK_F32, MEM_BYTES - 4, 12) == GK_ABI_OUT_OF_BOUNDS, "init: past the end");
  params[2] = f32_bits(2.0f);
  memcpy(h.mem + p, params, sizeof params);
  check(gk_abi_check_params(&h.m, GK_OP_SWIGLU, GK_F32, p, 12) == GK_ABI_UNSUPPORTED, "init: SwiGLU beta 2");
  free(h.mem);
}

int main(int argc, char **argv) {
  const char *out_dir = argc == 3 && !strcmp(argv[1], "--write-cases") ? argv[2] : NULL;
  if (argc > 1 && !out_dir) {
    fprintf(stderr, "usage: test_wasm_abi [--write-cases DIR]\n");
    return 2;
  }
  if (out_dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/cases.json", out_dir);
    json = fopen(path, "w");
    if (!json) {
      fprintf(stderr, "test_wasm_abi: cannot write %s\n", path);
      return 1;
    }
    fprintf(json, "{\"host_start\":%d,\"cases\":[\n", HOST_START);
  }
  info_and_init();
  host h;
  host_init(&h);
  uint8_t *before = malloc(MEM_BYTES);
  int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (int ci = 0; ci < ncases; ci++)
    for (int dt = GK_F32; dt <= GK_BF16; dt++)
      for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++) {
        const abi_case *c = &cases[ci];
        memset(h.mem, 0, MEM_BYTES);
        h.next = HOST_START;
        if (is_optim(c->op) && dir == GK_BACKWARD) {
          uint32_t params[8];
          memcpy(params, c->fields, 4 * c->nfields);
          params[c->nfields] = (uint32_t)dt;
          gk_abi_layout lay;
          check(gk_abi_describe(c->op, (gk_dtype)dt, GK_BACKWARD, params, 4 * (c->nfields + 1), &lay) ==
                    GK_ABI_UNSUPPORTED,
                "%s has no backward", op_name(c->op));
          continue;
        }
        call k;
        prepare(&h, c, (gk_dtype)dt, (gk_direction)dir, &k);
        char got[512], table[512];
        layout_string(&k.lay, got, sizeof got);
        const char *want = expected_layout(c, (gk_dtype)dt, (gk_direction)dir, table, sizeof table);
        check(!strcmp(got, want), "%s %s: layout \"%s\", the table says \"%s\"", op_name(c->op),
              dir ? "bwd" : "fwd", got, want);
        memcpy(before, h.mem, MEM_BYTES);
        h.before = before;
        gk_abi_code code = gk_abi_run(&h.m, c->op, (gk_dtype)dt, (gk_direction)dir, k.desc_ptr);
        check(code == GK_ABI_OK, "%s %s %s %s: code %d", op_name(c->op), c->variant, dtype_names[dt],
              dir ? "bwd" : "fwd", code);
        compare_direct(&h, c, (gk_dtype)dt, (gk_direction)dir, &k);
        if (out_dir) write_case(out_dir, &h, before, HOST_START, h.next, c, (gk_dtype)dt, (gk_direction)dir, &k);
      }
  free(before);
  free(h.mem);
  host_init(&bad_host);
  for (int ci = 0; ci < ncases; ci++)
    for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++)
      if (!is_optim(cases[ci].op) || dir == GK_FORWARD) {
        bad_inputs(&cases[ci], (gk_direction)dir);
        random_inputs(&cases[ci], (gk_direction)dir, 200);
      }
  free(bad_host.mem);
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  return finish("test_wasm_abi");
}
