/// gradkern: forward and backward kernels for training neural networks.
///
/// Everything goes through one plan lifecycle:
///
///   gk_op_desc d;                         // 1. describe the op
///   gk_op_desc_init(&d, GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, shape);
///   gk_plan *p;
///   gk_plan_create(&d, &p);               // 2. the library selects a kernel
///   gk_plan_check(p, args, nargs);        // 3. (optional) check tensors
///   size_t ws; gk_plan_workspace_size(p, &ws);  // 4. caller owns memory
///   gk_plan_run(p, args, nargs, buf, ws); // 5. run (re-checks the tensors)
///   gk_plan_destroy(p);
///
/// Conventions
/// - Every function returns a gk_status; results come back through
///   out-parameters. On failure gk_last_error() gives a message naming the
///   argument and the values that were wrong. Nothing is written to any output
///   tensor by a call that is rejected. The library never aborts on bad input.
/// - Shapes and strides are in elements; any strides are accepted for inputs
///   (transposed and sliced views, stride 0 for broadcast). Outputs must not
///   overlap themselves, each other, or an input (except the in-place cases
///   each op documents).
/// - f16 and bf16 are storage types: kernels load them, compute in f32 and
///   round to nearest even on store. f64 computes in f64.
/// - Every floating tensor of an op has desc.dtype, except where an op says
///   otherwise: the saved statistics and states it names, and the parameters
///   that follow desc.param_dtype. With f16 or bf16 activations, parameters
///   may be kept in f32 (desc.param_dtype = GK_F32), as mixed-precision
///   training (torch autocast, mamba-ssm) keeps them: RMSNorm/LayerNorm
///   weight and bias, linear's bias and the selective scan's A, D and
///   delta_bias (and B and C through desc.scan.b_dtype, c_dtype). Their gradients
///   have the parameter's dtype, are summed in f32 and, with
///   desc.accumulate = 1, added to the f32 gradient in place.
/// - Parameter gradients (dweight, dbias) are OVERWRITTEN by default
///   (`desc.accumulate = 0`); with `desc.accumulate = 1` they are added to
///   (`+=`), so gradients can be summed over micro-batches. Input gradients
///   (dx, dgate) are always overwritten.
/// - Results are deterministic: bit-identical from run to run and for any
///   thread count (reductions combine fixed-size blocks in a fixed order).
#ifndef GRADKERN_H
#define GRADKERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The version, kept here only: CMakeLists.txt reads these three lines for
// project(VERSION), and gk_version() returns GK_VERSION_STRING.
#define GK_VERSION_MAJOR 0
#define GK_VERSION_MINOR 1
#define GK_VERSION_PATCH 0
#define GK_VERSION_STR_(x) #x
#define GK_VERSION_STR(x) GK_VERSION_STR_(x)
/// "MAJOR.MINOR.PATCH", e.g. "0.1.0".
#define GK_VERSION_STRING \
  GK_VERSION_STR(GK_VERSION_MAJOR) "." GK_VERSION_STR(GK_VERSION_MINOR) "." GK_VERSION_STR(GK_VERSION_PATCH)

/// The library's version, GK_VERSION_STRING of the header it was built
/// with (compare with the macro to catch a header of another version).
const char *gk_version(void);

/// Largest tensor rank.
#define GK_MAX_RANK 8

// ---------------------------------------------------------------- status

typedef enum gk_status {
  GK_SUCCESS = 0,                ///< the call did what it was asked
  GK_ERR_NULL_POINTER = 1,       ///< a required pointer argument is NULL
  GK_ERR_INVALID_VALUE = 2,      ///< a scalar option is out of range (eps, dim, beta, enum...)
  GK_ERR_BAD_RANK = 3,           ///< a tensor's rank is not what the op needs, or over GK_MAX_RANK
  GK_ERR_BAD_SHAPE = 4,          ///< a dimension is negative/zero where not allowed, or shapes disagree
  GK_ERR_BAD_DTYPE = 5,          ///< a tensor's dtype is not the plan's, not a known dtype, or the desc's
                                 ///< dtypes are not a combination the op takes
  GK_ERR_BAD_STRIDES = 6,        ///< an output's strides make it overlap itself
  GK_ERR_BAD_ALIGNMENT = 7,      ///< a data pointer is not aligned to its element size
  GK_ERR_ALIASING = 8,           ///< an output overlaps an input or another output where not allowed
  GK_ERR_MISSING_ARGUMENT = 9,   ///< a tensor the op needs was not passed
  GK_ERR_UNEXPECTED_ARGUMENT = 10, ///< a tensor was passed that the op does not take, or twice
  GK_ERR_WORKSPACE_TOO_SMALL = 11, ///< workspace smaller than gk_plan_workspace_size()
  GK_ERR_UNSUPPORTED = 12,       ///< valid request that no kernel implements (backend, combination)
  GK_ERR_BAD_DEVICE = 13,        ///< tensor on a device the plan's kernel cannot reach
  GK_ERR_OUT_OF_MEMORY = 14,     ///< the library could not allocate its own small state
  GK_ERR_INTERNAL = 15,          ///< a bug in gradkern: please report it
  GK_ERR_NON_FINITE = 16,        ///< gk_clip_grad_norm: the total norm is inf or NaN (nothing was scaled)
} gk_status;

/// A short constant description of a status ("bad shape", ...). Never NULL.
const char *gk_status_string(gk_status status);

/// The message of the last failed call on this thread: it names the argument
/// and the values that were wrong. Empty string after a successful call.
const char *gk_last_error(void);

/// Record `message` (NULL: empty) as this thread's last error, what
/// gk_last_error() returns, and return `status`: for code built on gradkern
/// that reports its own failures the same way.
gk_status gk_set_error(gk_status status, const char *message);

// ---------------------------------------------------------------- dtypes

typedef enum gk_dtype {
  GK_F32 = 0,
  GK_F64 = 1,
  GK_F16 = 2,   ///< IEEE binary16, storage only: computed in f32
  GK_BF16 = 3,  ///< bfloat16, storage only: computed in f32
  GK_I32 = 4,   ///< for indices (token ids, targets)
  GK_I64 = 5,   ///< for indices (token ids, targets)
} gk_dtype;

/// desc.param_dtype, desc.scan.b_dtype and desc.scan.c_dtype (ints holding a
/// gk_dtype) set to this follow desc.dtype. Not a tensor dtype.
#define GK_DTYPE_SAME (-1)

/// Name ("f32", "bf16", ...) or "?" for an unknown value.
const char *gk_dtype_name(gk_dtype dtype);
/// Size of one element in bytes, 0 for an unknown dtype.
size_t gk_dtype_size(gk_dtype dtype);

/// Conversions, rounding to nearest even (NaN stays NaN, overflow gives inf).
uint16_t gk_f32_to_f16(float x);
float gk_f16_to_f32(uint16_t h);
uint16_t gk_f32_to_bf16(float x);
float gk_bf16_to_f32(uint16_t h);

// ---------------------------------------------------------------- tensors

typedef enum gk_device_type {
  GK_DEVICE_CPU = 0,
  GK_DEVICE_CUDA = 1,
  GK_DEVICE_VULKAN = 2,  ///< memory of the Vulkan backend's device (gk_buffer_alloc(GK_BACKEND_VULKAN))
  GK_DEVICE_WEBGPU = 3,   ///< a buffer of the host's WebGPU device (gk_buffer_alloc on GK_BACKEND_WEBGPU)
} gk_device_type;

/// A view of memory the caller owns. Maps one-to-one onto DLPack's DLTensor
/// (see gk_tensor_from_dlpack). Strides are in elements and may be any value.
typedef struct gk_tensor {
  void *data;                      ///< address of element (0, ..., 0)
  gk_dtype dtype;
  gk_device_type device;
  int device_id;
  int rank;                        ///< 0 .. GK_MAX_RANK
  int64_t shape[GK_MAX_RANK];
  int64_t strides[GK_MAX_RANK];    ///< in elements
} gk_tensor;

/// Fill *t as a contiguous row-major tensor on the CPU.
gk_status gk_tensor_init(gk_tensor *t, void *data, gk_dtype dtype, int rank,
                         const int64_t *shape);
/// Number of elements (product of the shape; 1 for rank 0).
int64_t gk_tensor_numel(const gk_tensor *t);

/// DLPack's DLTensor, field for field (DLPack v0.8 / v1 ABI), so a
/// `DLTensor *` from dlpack.h can be cast to `const gk_dlpack_tensor *`.
typedef struct gk_dlpack_tensor {
  void *data;
  struct { int32_t device_type; int32_t device_id; } device;  ///< kDLCPU = 1, kDLCUDA = 2
  int32_t ndim;
  struct { uint8_t code; uint8_t bits; uint16_t lanes; } dtype; ///< code: 0 int, 2 float, 4 bfloat
  int64_t *shape;
  int64_t *strides;                ///< NULL means contiguous row-major
  uint64_t byte_offset;
} gk_dlpack_tensor;

/// Make a gk_tensor from a DLPack tensor (no copy).
gk_status gk_tensor_from_dlpack(const gk_dlpack_tensor *src, gk_tensor *dst);
/// Describe a gk_tensor as a DLPack tensor. `shape` and `strides` are
/// caller-owned arrays of at least src->rank entries that dst will point to.
gk_status gk_tensor_to_dlpack(const gk_tensor *src, gk_dlpack_tensor *dst,
                              int64_t *shape, int64_t *strides);

// ---------------------------------------------------------------- ops

typedef enum gk_op {
  // Elementwise activations: x -> y (same shape).
  // Backward: (dy, x) -> dx. In place allowed: y may be x, dx may be dy or x
  // (the very same view; any other overlap is rejected).
  // With act.from_output = 1 (relu and sigmoid, backward only) the backward
  // takes the forward's output instead of its input, as PyTorch's autograd
  // saves it: (dy, y) -> dx, with GK_ARG_Y in place of GK_ARG_X (dx may be
  // dy or y): sigmoid dx = dy * y * (1 - y), relu dx = dy * (y > 0), the
  // same gradient as from x (y > 0 exactly where x > 0), without recomputing
  // the activation, so no x need be kept.
  GK_OP_RELU = 0,      ///< y = max(x, 0); dx = dy * (x > 0)
  GK_OP_GELU = 1,      ///< y = x * Phi(x) (act.approximate: erf, or tanh form)
  GK_OP_SILU = 2,      ///< y = x * sigmoid(x)
  GK_OP_SIGMOID = 3,   ///< y = 1 / (1 + exp(-x)), computed stably
  GK_OP_SOFTPLUS = 4,  ///< y = log(1 + exp(beta x)) / beta, or x where beta x > threshold

  // Gated activations y = a * act(b) (act: GLU sigmoid, ReGLU relu, SwiGLU
  // silu, GeGLU gelu with act.approximate).
  //  GK_GATED_SPLIT (torch.nn.functional.glu): X of shape S is split
  //    along gated.dim into halves a = first half, b = second half;
  //    Y has S with S[dim] halved. Backward: (DY, X) -> DX (shape S: da | db).
  //  GK_GATED_TWO_TENSOR (two tensors): a = X, b = GATE, same shape S;
  //    Y has shape S. Backward: (DY, X, GATE) -> DX, DGATE.
  // No output may overlap an input.
  GK_OP_GLU = 5,
  GK_OP_REGLU = 6,
  GK_OP_SWIGLU = 7,
  GK_OP_GEGLU = 8,

  // Norms over the trailing norm.normalized_rank dims of X (shape S = lead x
  // norm; "row" = one index of the leading dims, C = number of elements of
  // the normalized dims). WEIGHT and BIAS have the normalized dims' shape
  // and dtype desc.param_dtype (f32 allowed with f16/bf16 X), as do DWEIGHT
  // and DBIAS.
  // The saved statistics MEAN and RSTD have the leading dims' shape and dtype
  // f32 (f64 when the op's dtype is f64).
  //  RMSNorm:   rstd = 1/sqrt(mean(x^2) + eps); y = x * rstd * w
  //  LayerNorm: mean, rstd = 1/sqrt(var + eps) (biased var);
  //             y = (x - mean) * rstd * w + b
  // Forward:  X, [WEIGHT], [BIAS] -> Y, RSTD, (MEAN for LayerNorm)
  // Backward: DY, X, [WEIGHT], RSTD, (MEAN) -> DX, [DWEIGHT], [DBIAS]
  // (WEIGHT/BIAS present when norm.has_weight / norm.has_bias.)
  GK_OP_RMSNORM = 9,
  GK_OP_LAYERNORM = 10,

  // Linear layer (torch.nn.functional.linear): X (..., K) is the desc shape,
  // N = linear.out_features.
  //   y (..., N) = x W^T + b,  W (N, K), b (N) when linear.has_bias.
  // Forward:  X, WEIGHT, [BIAS] -> Y
  // Backward: DY, X, WEIGHT -> DX (=), DWEIGHT (= or += per desc.accumulate),
  //           [DBIAS] (= or +=):  dx = dy W, dW = dy^T x, db = sum_rows dy.
  // W, X, Y and their gradients have desc.dtype; b and db desc.param_dtype
  // (f32 allowed with f16/bf16 X, as under torch autocast).
  // Computed by a packed, cache-blocked matrix product with f32 accumulation
  // (f64 for f64); each output element is summed over K in one fixed order.
  GK_OP_LINEAR = 11,
  // Batched matrix product C = op(A) op(B) (torch.matmul with transposes).
  // A is the desc shape: (..., M, K), or (..., K, M) with matmul.trans_a.
  // B: (..., K, N), or (..., N, K) with matmul.trans_b; its batch dims "..."
  // are A's, or B has rank 2 and is shared by every batch (matmul.shared_b).
  // N = matmul.n. C = Y (..., M, N).
  // Forward:  A, B -> Y
  // Backward: DY, A, B -> DA (=), DB (=; summed over the batch when shared).
  GK_OP_MATMUL = 12,
  // Softmax and log-softmax along softmax.dim of X (any shape, rank >= 1),
  // computed stably (the row max is subtracted before exp).
  //   softmax:     y = exp(x - max) / sum(exp(x - max))
  //   log_softmax: y = x - max - log(sum(exp(x - max)))
  // Forward:  X -> Y.  Backward: DY, Y -> DX (=):
  //   softmax:     dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy)
  // In place allowed: Y may be X; DX may be DY or Y (the very same view).
  GK_OP_SOFTMAX = 13,
  GK_OP_LOG_SOFTMAX = 14,
  // Cross-entropy from logits (torch.nn.functional.cross_entropy with class
  // index targets): LOGITS (..., V) is the desc shape, TARGET (...) holds
  // class indices of dtype desc.index_dtype. Per row r with target t (rows
  // whose target is ce.ignore_index count for nothing), eps = ce.label_smoothing:
  //   lse = log(sum_j exp(x_j)) (computed stably),
  //   loss_r = (1 - eps) (lse - x_t) + eps (lse - sum_j x_j / V)
  //   LOSS (a scalar, f32; f64 for f64) = sum_r loss_r, divided by the
  //   number of rows not ignored for GK_REDUCTION_MEAN (NaN when all are
  //   ignored, as torch).
  //   dlogits_r = g (softmax(x_r) - (1 - eps) onehot(t) - eps / V), 0 for
  //   ignored rows, g = dloss (/ rows not ignored for the mean).
  // Forward:  LOGITS, TARGET -> LOSS, and DLOGITS (=) when ce.fused_grad = 1,
  //           with dloss = ce.grad_scale: the gradient in the same pass.
  // Backward: DLOSS (scalar, LOSS's dtype), LOGITS, TARGET -> DLOGITS (=).
  // DLOGITS may be the very same view as LOGITS: the gradient then overwrites
  // the logits, so no second (rows, V) buffer is needed. A target outside
  // 0..V-1 that is not ignore_index is GK_ERR_INVALID_VALUE, found before
  // anything is written.
  GK_OP_CROSS_ENTROPY = 15,
  // Embedding lookup (torch.nn.functional.embedding): INDEX has the desc
  // shape S and dtype desc.index_dtype; WEIGHT is (V, D) with
  // V = embedding.num_embeddings, D = embedding.dim.
  // Forward:  WEIGHT, INDEX -> Y (S..., D): y[p] = W[index[p]]
  // Backward: DY (S..., D), INDEX -> DWEIGHT (V, D), = or += per
  //           desc.accumulate: dW[v] = sum of dy[p] over the p with
  //           index[p] = v, in order of p (bit-identical for any thread
  //           count); the row embedding.padding_idx gets no gradient (0, or
  //           left as it was with accumulate). An index outside 0..V-1 is
  //           GK_ERR_INVALID_VALUE, found before anything is written.
  GK_OP_EMBEDDING = 16,
  // Rotary position embedding on X of rank 4, (B, T, H, Dh) or (B, H, T, Dh)
  // (rope.layout), Dh even. Position p = rope.offset + t; pair i of
  // Dh / 2 turns by angle p theta^(-2i / Dh) (theta = rope.theta), computed
  // in f64. Pairs are (i, i + Dh/2) for GK_ROPE_HALF (rotate-half, LLaMA/HF)
  // or (2i, 2i + 1) for GK_ROPE_INTERLEAVED:
  //   (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)
  // Forward: X -> Y. Backward: DY -> DX (=), the inverse rotation.
  // In place allowed: Y may be X, DX may be DY (the very same view).
  GK_OP_ROPE = 17,
  // Scaled dot-product attention, causal or not, with grouped-query heads:
  // Q (B, H, T, Dh) is the desc shape; K, V are (B, Hkv, T, Dh) with
  // Hkv = attn.kv_heads dividing H; query head h reads kv head h / (H / Hkv)
  // (torch: k.repeat_interleave(H / Hkv, dim=1)).
  //   s_ij = scale q_i . k_j  (keys j <= i when attn.causal)
  //   lse_i = log(sum_j exp(s_ij)),  o_i = sum_j exp(s_ij - lse_i) v_j
  // Forward:  Q, K, V -> Y = O (B, H, T, Dh), LSE (B, H, T) (f32; f64 for f64),
  //           flash-attention style: tiles of keys with an online softmax,
  //           never a (T, T) matrix; only the row log-sum-exp is saved.
  // Backward: DY = dO, Q, K, V, Y = O, LSE -> DQ, DK, DV (=), recomputing the
  //           scores tile by tile: with p_ij = exp(s_ij - lse_i),
  //           D_i = dO_i . o_i, ds_ij = p_ij (dO_i . v_j - D_i):
  //           dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i,
  //           dv_j = sum_i p_ij dO_i (summed over the heads sharing a kv head).
  // Workspace grows linearly with T.
  GK_OP_ATTENTION = 18,
  // Elementwise binary ops with broadcasting (numpy rules: shapes aligned at
  // the trailing dim, each pair of dims equal or one of them 1). A has the
  // desc shape; B has binary.b_shape (rank binary.b_rank); Y has the
  // broadcast shape. alpha = binary.alpha.
  //   add: y = a + alpha b          mul: y = alpha a b
  // Forward:  A, B -> Y. In place allowed: Y may be A or B (the very same view).
  // Backward: DY (add), or DY, A, B (mul) -> DA, DB (=), each summed over the
  //   dims its operand was broadcast along, in a fixed order:
  //   add: da = sum dy, db = alpha sum dy;  mul: da = alpha sum dy b, db = alpha sum dy a
  GK_OP_ADD = 19,
  GK_OP_MUL = 20,

  // Causal depthwise conv1d (causal-conv1d's causal_conv1d_fn). desc.shape is
  // X's: (B, D, L), or (B, L, D) with conv.channel_last. W = conv.width >= 1.
  //   xpad[b,d,p] = INITIAL_STATE[b,d,p] (zeros without one) for p < W-1,
  //                 x[b,d,p-(W-1)] otherwise;  p = 0 .. L+W-2
  //   y[b,d,t] = act(bias[d] + sum_{k<W} weight[d,k] xpad[b,d,t+k])
  //   (act: identity, or SiLU with conv.silu = 1). FINAL_STATE[b,d,j] =
  //   xpad[b,d,L+j], j < W-1: the last W-1 inputs, to continue the sequence.
  // WEIGHT (D, W); BIAS (D); INITIAL_STATE, FINAL_STATE, DINITIAL_STATE,
  // DFINAL_STATE (B, D, W-1); all in desc.dtype.
  // Forward:  X, WEIGHT, [BIAS], [INITIAL_STATE] -> Y, [FINAL_STATE]
  // Backward: DY, X, WEIGHT, [BIAS], [INITIAL_STATE], [DFINAL_STATE]
  //           -> DX, DWEIGHT, [DBIAS], [DINITIAL_STATE]
  // (BIAS with conv.has_bias, in backward only with conv.silu, which
  // recomputes the pre-activation; INITIAL_STATE and DINITIAL_STATE with
  // conv.has_initial_state; FINAL_STATE and DFINAL_STATE with
  // conv.has_final_state: the gradient flowing into the final state.)
  // DX and DINITIAL_STATE are overwritten; DWEIGHT, DBIAS follow desc.accumulate.
  GK_OP_CONV1D = 21,

  // Selective scan (mamba-ssm's selective_scan_fn). desc.shape is U's:
  // (B, D, L); N = scan.d_state. U, DELTA, Z, Y (B, D, L); A (D, N);
  // B and C each (D, N) (GK_SCAN_SHARED), (B, N, L) (GK_SCAN_BATCH) or
  // (B, G, N, L) (GK_SCAN_GROUPED, G = scan.groups divides D; channel d uses
  // group d / (D/G); per-batch B and C share their groups, as in mamba-ssm:
  // BATCH with GROUPED needs groups = 1); D (D); DELTA_BIAS (D).
  // Dtypes (mamba-ssm's mixed precision included): U, DELTA, Z, Y and their
  // gradients desc.dtype; A, D, DELTA_BIAS, DA, DD, DDELTA_BIAS
  // desc.param_dtype; B, DB desc.scan.b_dtype; C, DC desc.scan.c_dtype;
  // each of these three is desc.dtype or, with f16/bf16 desc.dtype, f32
  // (mamba-ssm: A, D, delta_bias and shared B/C f32, per-batch B/C as u).
  //   dt[b,d,t] = delta + delta_bias[d], then softplus(.) with
  //               scan.delta_softplus (threshold 20, as torch and mamba-ssm)
  //   h_t[n]   = exp(dt A[d,n]) h_{t-1}[n] + dt B_t[n] u_t   (h_{-1} = INITIAL_STATE or 0)
  //   y_t      = (sum_n C_t[n] h_t[n] + D[d] u_t) * (z ? silu(z_t) : 1)
  // The state h is kept in f32 (f64 for f64) whatever desc.dtype is:
  // INITIAL_STATE and FINAL_STATE (the state after the last step) are
  // (B, D, N) in that dtype. Forward saves CHUNK_STATES (B, D, nchunks, N)
  // in that dtype, nchunks = ceil(L / scan.chunk_size): the state before
  // each chunk's first step; backward recomputes the states of one chunk at
  // a time from it, so memory is O(B D N L / chunk_size), not O(B D N L).
  // Forward:  U, DELTA, A, B, C, [D], [Z], [DELTA_BIAS], [INITIAL_STATE]
  //           -> Y, CHUNK_STATES, [FINAL_STATE]
  // Backward: DY, U, DELTA, A, B, C, [D], [Z], [DELTA_BIAS], [INITIAL_STATE],
  //           [DFINAL_STATE], CHUNK_STATES -> DU, DDELTA, DA, DB, DC, [DD],
  //           [DZ], [DDELTA_BIAS], [DINITIAL_STATE]
  // (optional ones with scan.has_D, has_z, has_delta_bias,
  // has_initial_state, has_final_state; DFINAL_STATE, in the state dtype, is
  // the gradient flowing into the final state, as when a sequence is
  // processed in pieces.) DU, DDELTA, DZ, DINITIAL_STATE and
  // the per-batch DB/DC (BATCH, GROUPED layouts) are overwritten; DA, DD,
  // DDELTA_BIAS and SHARED DB/DC are parameter gradients: desc.accumulate.
  GK_OP_SELECTIVE_SCAN = 22,

  GK_OP_COUNT_ = 23    ///< number of ops (not an op)
} gk_op;

/// Lower-case name ("swiglu", ...) or "?" for an unknown op.
const char *gk_op_name(gk_op op);

typedef enum gk_direction {
  GK_FORWARD = 0,
  GK_BACKWARD = 1,
} gk_direction;

typedef enum gk_backend {
  GK_BACKEND_AUTO = 0, ///< the fastest kernel that supports the request
  GK_BACKEND_REF = 1,  ///< the plain scalar reference kernel (the oracle)
  GK_BACKEND_CPU = 2,  ///< the threaded CPU kernel
  GK_BACKEND_CUDA = 3, ///< CUDA GPU kernels (not built yet: GK_ERR_UNSUPPORTED)
  GK_BACKEND_VULKAN = 4, ///< Vulkan compute shaders on a GPU (GK_VULKAN_DEVICE picks it), tensors in its buffers
  GK_BACKEND_WEBGPU = 5, ///< WGSL compute shaders on the host's WebGPU device (WebAssembly build only)
} gk_backend;

/// "auto", a registered backend's name ("cpu", "ref"), the name of a
/// built-in backend this library was built without ("cuda", "vulkan",
/// "webgpu"), or "?".
const char *gk_backend_name(gk_backend backend);

/// One registered backend. Which backends exist is decided when the library
/// is built; a backend whose device is absent here is still listed, with
/// available = 0 and the reason, and selects no kernel.
typedef struct gk_backend_info {
  gk_backend id;
  const char *name;          ///< "cpu", "ref"
  gk_device_type device;     ///< where its tensors live
  int available;             ///< 1: it can run in this process
  const char *reason;        ///< why not, when available = 0 ("" otherwise)
} gk_backend_info;

/// Device memory. A backend whose tensors live where the library cannot
/// address them through a C pointer (a GPU buffer, memory owned by a
/// JavaScript host) hands out buffers; a tensor in one is described as
/// usual, with `device` the backend's device type and `data` the buffer's
/// address (gk_buffer_address) plus a byte offset: an address in a range the
/// library reserves for the buffer, not host memory, so the same overlap
/// checks apply and a tensor reaching past its buffer is refused. Plans of
/// the backend run on such tensors; gk_buffer_upload and gk_buffer_download
/// move bytes between host memory and a buffer, and a download waits for the
/// runs before it. The CPU and ref backends give host memory (the address is
/// a real pointer, so their buffers can also be used directly).
typedef struct gk_buffer gk_buffer;

/// A buffer of `bytes` bytes (> 0) on the device of `backend` (a registered
/// backend, not GK_BACKEND_AUTO), aligned to 64 bytes, contents undefined.
gk_status gk_buffer_alloc(gk_backend backend, size_t bytes, gk_buffer **buffer);
/// Free a buffer (NULL: nothing). Runs using it must have finished
/// (gk_backend_synchronize).
void gk_buffer_free(gk_buffer *buffer);
/// The address of the buffer's byte 0, for gk_tensor.data (add the offset).
void *gk_buffer_address(const gk_buffer *buffer);
size_t gk_buffer_size(const gk_buffer *buffer);
/// Copy `bytes` bytes from host memory `src` into the buffer at `offset`.
gk_status gk_buffer_upload(gk_buffer *buffer, size_t offset, const void *src, size_t bytes);
/// Copy `bytes` bytes of the buffer at `offset` into host memory `dst`,
/// after every run already submitted on the backend.
gk_status gk_buffer_download(const gk_buffer *buffer, size_t offset, void *dst, size_t bytes);
/// Wait until every run submitted on `backend` has finished (the CPU and
/// ref backends run synchronously: nothing to wait for).
gk_status gk_backend_synchronize(gk_backend backend);

/// The number of registered backends; gk_backend_get(i) for i in
/// 0 .. count-1 gives them in the order GK_BACKEND_AUTO tries them.
int gk_backend_count(void);
gk_status gk_backend_get(int index, gk_backend_info *info);
/// The device a backend runs on, for people to read: for the vulkan backend
/// the device's name, type, Vulkan version and the features its kernels use;
/// "" for host backends, a backend without a device here, or an unknown id.
const char *gk_backend_device_description(gk_backend backend);

typedef enum gk_gelu_approx {
  GK_GELU_ERF = 0,    ///< exact: x * 0.5 * (1 + erf(x / sqrt 2))
  GK_GELU_TANH = 1,   ///< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
} gk_gelu_approx;

typedef enum gk_reduction {
  GK_REDUCTION_MEAN = 0,  ///< sum over rows not ignored, divided by their number
  GK_REDUCTION_SUM = 1,
} gk_reduction;

typedef enum gk_rope_layout {
  GK_ROPE_BTHD = 0,   ///< x is (B, T, H, Dh)
  GK_ROPE_BHTD = 1,   ///< x is (B, H, T, Dh)
} gk_rope_layout;

typedef enum gk_rope_pairing {
  GK_ROPE_HALF = 0,         ///< pairs (i, i + Dh/2): rotate-half, LLaMA/HF
  GK_ROPE_INTERLEAVED = 1,  ///< pairs (2i, 2i + 1): GPT-J, the RoFormer paper
} gk_rope_pairing;

typedef enum gk_gated_form {
  GK_GATED_SPLIT = 0,
  GK_GATED_TWO_TENSOR = 1,
} gk_gated_form;

/// Layout of the selective scan's B and C.
typedef enum gk_scan_layout {
  GK_SCAN_SHARED = 0,   ///< (D, N): the same for every batch and step
  GK_SCAN_BATCH = 1,    ///< (B, N, L): one per batch and step, shared by the channels
  GK_SCAN_GROUPED = 2,  ///< (B, G, N, L): G groups of D/G channels each
} gk_scan_layout;

/// Which tensor an argument is. Each op lists the ones it takes above.
typedef enum gk_arg_kind {
  GK_ARG_X = 0,
  GK_ARG_Y = 1,
  GK_ARG_DY = 2,
  GK_ARG_DX = 3,
  GK_ARG_GATE = 4,
  GK_ARG_DGATE = 5,
  GK_ARG_WEIGHT = 6,
  GK_ARG_DWEIGHT = 7,
  GK_ARG_BIAS = 8,
  GK_ARG_DBIAS = 9,
  GK_ARG_MEAN = 10,
  GK_ARG_RSTD = 11,
  GK_ARG_A = 12,
  GK_ARG_B = 13,
  GK_ARG_DA = 14,
  GK_ARG_DB = 15,
  GK_ARG_LOGITS = 16,
  GK_ARG_DLOGITS = 17,
  GK_ARG_TARGET = 18,
  GK_ARG_LOSS = 19,
  GK_ARG_DLOSS = 20,
  GK_ARG_INDEX = 21,
  GK_ARG_Q = 22,
  GK_ARG_K = 23,
  GK_ARG_V = 24,
  GK_ARG_DQ = 25,
  GK_ARG_DK = 26,
  GK_ARG_DV = 27,
  GK_ARG_LSE = 28,
  GK_ARG_INITIAL_STATE = 29,
  GK_ARG_FINAL_STATE = 30,
  GK_ARG_DINITIAL_STATE = 31,
  GK_ARG_DFINAL_STATE = 32,
  GK_ARG_U = 33,
  GK_ARG_DU = 34,
  GK_ARG_DELTA = 35,
  GK_ARG_DDELTA = 36,
  GK_ARG_C = 37,
  GK_ARG_DC = 38,
  GK_ARG_D = 39,
  GK_ARG_DD = 40,
  GK_ARG_Z = 41,
  GK_ARG_DZ = 42,
  GK_ARG_DELTA_BIAS = 43,
  GK_ARG_DDELTA_BIAS = 44,
  GK_ARG_CHUNK_STATES = 45,
  GK_ARG_COUNT_ = 46   ///< number of argument kinds (not a kind)
} gk_arg_kind;

/// Name ("x", "dweight", "A", "delta_bias", ...) or "?".
const char *gk_arg_name(gk_arg_kind kind);

/// One tensor handed to gk_plan_check / gk_plan_run.
typedef struct gk_arg {
  gk_arg_kind kind;
  gk_tensor tensor;
} gk_arg;

/// Everything that defines an op instance. Fill it with gk_op_desc_init,
/// then change the options you need.
typedef struct gk_op_desc {
  gk_op op;
  gk_direction direction;
  gk_dtype dtype;            ///< every floating tensor's dtype (saved stats: see ops)
  gk_backend backend;        ///< default GK_BACKEND_AUTO
  int rank;                  ///< rank of X (the op's main input)
  int64_t shape[GK_MAX_RANK];///< shape of X
  int accumulate;            ///< 0: dweight/dbias = ...; 1: dweight/dbias += ... (default 0)
  struct {
    gk_gelu_approx approximate; ///< GELU and GeGLU (default GK_GELU_ERF)
    int from_output;            ///< 0 or 1: relu and sigmoid backward take (DY, Y) -> DX instead of
                                ///< (DY, X) -> DX (default 0; see GK_OP_RELU)
    double beta;                ///< softplus, > 0 (default 1)
    double threshold;           ///< softplus (default 20)
  } act;
  struct {
    gk_gated_form form;         ///< default GK_GATED_SPLIT
    int dim;                    ///< split dim, -rank .. rank-1 (default -1)
  } gated;
  struct {
    int normalized_rank;        ///< trailing dims normalized, 1 .. rank (default 1)
    double eps;                 ///< > 0 (default 1e-6 RMSNorm, 1e-5 LayerNorm)
    int has_weight;             ///< default 1
    int has_bias;               ///< LayerNorm only (default 1 LayerNorm, 0 RMSNorm)
  } norm;
  struct {
    int64_t out_features;       ///< N, >= 0 (default: the last dim of desc.shape)
    int has_bias;               ///< default 1
  } linear;
  struct {
    int64_t n;                  ///< N, the columns of op(B) and Y, >= 0 (default: the last dim of desc.shape)
    int trans_a;                ///< 1: A is stored (..., K, M) (default 0)
    int trans_b;                ///< 1: B is stored (..., N, K) (default 0)
    int shared_b;               ///< 1: B has rank 2, shared by every batch (default 0)
  } matmul;
  struct {
    int dim;                    ///< softmax dim, -rank .. rank-1 (default -1)
  } softmax;
  gk_dtype index_dtype;         ///< GK_I32 or GK_I64 (default): targets, token ids
  struct {
    gk_reduction reduction;     ///< default GK_REDUCTION_MEAN
    int64_t ignore_index;       ///< rows with this target are ignored (default -100)
    double label_smoothing;     ///< 0 .. 1 (default 0)
    int fused_grad;             ///< 1: forward also writes DLOGITS (default 0)
    double grad_scale;          ///< dloss for fused_grad, finite (default 1)
  } ce;
  struct {
    int64_t num_embeddings;     ///< V, >= 1 (default 0: must be set)
    int64_t dim;                ///< D, >= 0 (default 0: must be set)
    int64_t padding_idx;        ///< 0 .. V-1, or -1 for none (default -1; torch's negative
                                ///< padding_idx p is V + p here)
  } embedding;
  struct {
    gk_rope_layout layout;      ///< default GK_ROPE_BTHD
    gk_rope_pairing pairing;    ///< default GK_ROPE_HALF
    double theta;               ///< base, finite and > 0 (default 10000)
    int64_t offset;             ///< position of t = 0, 0 .. 2^40 (default 0)
  } rope;
  struct {
    int64_t kv_heads;           ///< Hkv, divides H; 0 means H (default 0)
    int causal;                 ///< 1: key j only for queries i >= j (default 1)
    double scale;               ///< finite; 0 means 1 / sqrt(Dh) (default 0)
  } attn;
  struct {
    int b_rank;                 ///< rank of B, 0 .. GK_MAX_RANK (default desc.rank)
    int64_t b_shape[GK_MAX_RANK]; ///< shape of B (default desc.shape)
    double alpha;               ///< finite (default 1)
  } binary;
  struct {
    int64_t width;              ///< W >= 1 (default 4)
    int channel_last;           ///< 0: X is (B, D, L); 1: X is (B, L, D) (default 0)
    int has_bias;               ///< default 1
    int silu;                   ///< fused SiLU on the output (default 0)
    int has_initial_state;      ///< default 0
    int has_final_state;        ///< default 0
  } conv;
  struct {
    int64_t d_state;            ///< N >= 1 (default 16)
    gk_scan_layout b_layout;    ///< default GK_SCAN_BATCH
    gk_scan_layout c_layout;    ///< default GK_SCAN_BATCH
    int64_t groups;             ///< G for the GROUPED layouts, divides D (default 1)
    int has_D;                  ///< default 0
    int has_z;                  ///< default 0
    int has_delta_bias;         ///< default 0
    int delta_softplus;         ///< default 0
    int has_initial_state;      ///< default 0
    int has_final_state;        ///< default 0
    int64_t chunk_size;         ///< steps between saved states, 1 .. 128 (default 64)
    int b_dtype;                ///< gk_dtype of B and dB: GK_DTYPE_SAME (default: desc.dtype), or GK_F32
                                ///< when desc.dtype is f16 or bf16
    int c_dtype;                ///< gk_dtype of C and dC: as b_dtype
  } scan;
  int param_dtype;              ///< gk_dtype of the parameters the ops name (norm weight and bias, linear bias,
                                ///< scan A, D, delta_bias) and of their gradients: GK_DTYPE_SAME (default:
                                ///< desc.dtype, whatever it is set to), or GK_F32 when desc.dtype is f16 or
                                ///< bf16; an op without such parameters takes only desc.dtype (or SAME)
} gk_op_desc;

/// Set every field of *desc: the given values plus the defaults listed above.
/// (param_dtype, scan.b_dtype and scan.c_dtype default to GK_DTYPE_SAME, so
/// they follow a later change of desc.dtype; gk_plan_get_desc gives them
/// resolved.)
gk_status gk_op_desc_init(gk_op_desc *desc, gk_op op, gk_direction direction,
                          gk_dtype dtype, int rank, const int64_t *shape);

// ---------------------------------------------------------------- plans

typedef struct gk_plan gk_plan;

/// What a plan's kernel is and what it promises.
typedef struct gk_plan_info {
  const char *kernel;        ///< e.g. "rmsnorm_bwd__cpu_threads"
  gk_backend backend;        ///< the backend of the kernel (GK_BACKEND_CPU, GK_BACKEND_REF, ...)
  const char *isa;           ///< instruction set it runs: "avx512bf16" (AVX-512 with bf16 dot products),
                             ///< "avx512", "avx2" or "scalar" (CPU kernels: the best the CPU has, or the one
                             ///< GK_ISA=avx512bf16|avx512|avx2|scalar forces; ref: "scalar");
                             ///< in WebAssembly "simd128" (the SIMD modules), "simd128-relaxed" (the
                             ///< relaxed-SIMD ones) or "scalar"
  const char *math;          ///< how it computes, e.g. "f32 math, round-to-nearest-even store"
  gk_dtype accumulator;      ///< dtype of sums inside the kernel
  int deterministic;         ///< 1: bit-identical for any run and thread count
  const char *declined;      ///< kernels tried first that declined the description,
                             ///< "backend/kernel: reason; ..." ("" when none)
} gk_plan_info;

/// Check the description and select a kernel. On success *plan owns a copy
/// of the description; destroy it with gk_plan_destroy.
gk_status gk_plan_create(const gk_op_desc *desc, gk_plan **plan);
void gk_plan_destroy(gk_plan *plan);
gk_status gk_plan_get_info(const gk_plan *plan, gk_plan_info *info);
/// The description as the plan normalised it (dim made non-negative, ...).
gk_status gk_plan_get_desc(const gk_plan *plan, gk_op_desc *desc);
/// Bytes of scratch memory gk_plan_run needs (may be 0; then pass NULL).
gk_status gk_plan_workspace_size(const gk_plan *plan, size_t *bytes);
/// The shape the plan expects for argument `kind`: *rank = -1 when the op
/// does not take it. `shape` has room for GK_MAX_RANK entries.
gk_status gk_plan_arg_shape(const gk_plan *plan, gk_arg_kind kind, int *rank,
                            int64_t *shape);
/// Check tensors against the plan: every required argument present, no
/// unknown ones, dtypes, devices, shapes, alignment, overlap.
gk_status gk_plan_check(const gk_plan *plan, const gk_arg *args, int nargs);
/// Check, then run. `workspace` must hold gk_plan_workspace_size() bytes,
/// aligned to 64 bytes.
gk_status gk_plan_run(const gk_plan *plan, const gk_arg *args, int nargs,
                      void *workspace, size_t workspace_bytes);

// ---------------------------------------------------------------- optimizers

// Optimizers and clipping update a list of n tensors in one call. Each
// parameter may have its own shape and dtype; its gradient has the same shape
// and dtype. f16/bf16 parameters are updated through f32 master weights
// (MASTER[i], f32, same shape), then rounded to nearest even into PARAMS[i];
// optimizer state (moments, momentum buffers) is f32, or f64 for f64
// parameters, which are updated in f64. For f32/f64 parameters MASTER may be
// NULL; if given, MASTER[i].data must be NULL for them. Any strides are
// accepted; a tensor that is written (parameter, master, state) must not
// overlap itself or any other tensor of the call. The update is elementwise,
// so results do not depend on the thread count. On a rejected call nothing
// is written.
//
// Devices: the tensors of a call are host tensors (GK_DEVICE_CPU), or all in
// buffers of one device backend (each inside one live buffer; a mix of
// devices is GK_ERR_BAD_DEVICE). gk_adamw_step and gk_clip_grad_norm run on
// GK_DEVICE_VULKAN tensors there, without copying them to the host; SGD on a
// device, or a call on a device whose backend does not run it, fails with
// GK_ERR_UNSUPPORTED. On Vulkan: f32 tensors only (any strides; f16/bf16 parameters with master
// weights and f64 are GK_ERR_UNSUPPORTED), AdamW in f32 in the same order as
// on the host (its scalars formed in double, then cast; sqrt and division as
// the driver rounds them: lavapipe gave the bits of the host's scalar level,
// within a few ulps of its FMA levels); clipping's squares are summed
// in f32 per tensor in a fixed order (workgroup trees of 256; relative error
// of a tensor's sum at most about (34 + numel / 2^20) 2^-24, half that on the
// norm; a gradient past 1.8e19 squares to inf and reads as non-finite), the
// per-tensor sums added in f64 on the host, and the gradients scaled as on
// the host. A device call may still be running when it returns, like a
// plan's run; gk_clip_grad_norm waits for its sum (one download).

/// torch.optim.AdamW (amsgrad = False, maximize = False):
///   p *= 1 - lr wd;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
///   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
typedef struct gk_adamw_config {
  double lr;            ///< >= 0 (default 1e-3)
  double beta1, beta2;  ///< in [0, 1) (default 0.9, 0.999)
  double eps;           ///< >= 0 (default 1e-8)
  double weight_decay;  ///< >= 0 (default 1e-2)
} gk_adamw_config;

gk_status gk_adamw_config_init(gk_adamw_config *config);
/// One AdamW step. `step` counts from 1 (this step included). EXP_AVG and
/// EXP_AVG_SQ start as zeros before step 1 and are updated in place.
gk_status gk_adamw_step(const gk_adamw_config *config, int n, const gk_tensor *params,
                        const gk_tensor *grads, const gk_tensor *exp_avg,
                        const gk_tensor *exp_avg_sq, const gk_tensor *master, int64_t step);

/// torch.optim.SGD (maximize = False):
///   g += wd p;  buf = step == 1 ? g : momentum buf + (1 - dampening) g
///   g = nesterov ? g + momentum buf : buf   (when momentum != 0);  p -= lr g
typedef struct gk_sgd_config {
  double lr;            ///< >= 0 (default 1e-3)
  double momentum;      ///< >= 0 (default 0)
  double dampening;     ///< default 0
  double weight_decay;  ///< >= 0 (default 0)
  int nesterov;         ///< needs momentum > 0 and dampening 0 (default 0)
} gk_sgd_config;

gk_status gk_sgd_config_init(gk_sgd_config *config);
/// One SGD step. MOMENTUM_BUF is required when momentum != 0 (else it must
/// be NULL); at step 1 it is overwritten with the gradient, as torch's first
/// step creates the buffer.
gk_status gk_sgd_step(const gk_sgd_config *config, int n, const gk_tensor *params,
                      const gk_tensor *grads, const gk_tensor *momentum_buf,
                      const gk_tensor *master, int64_t step);

/// torch.nn.utils.clip_grad_norm_ with norm_type 2: the total L2 norm of
/// the n gradients (squares summed in f64 in a fixed order; on Vulkan per
/// tensor in f32, see above) goes to
/// *total_norm; when max_norm / (norm + 1e-6) < 1, every gradient is scaled
/// by it in place. A non-finite norm returns GK_ERR_NON_FINITE (with
/// *total_norm set) and scales nothing. max_norm >= 0.
gk_status gk_clip_grad_norm(int n, const gk_tensor *grads, double max_norm, double *total_norm);

// ---------------------------------------------------------------- bindings

/// sizeof a public struct by name ("gk_tensor", "gk_arg", "gk_op_desc",
/// "gk_plan_info", "gk_dlpack_tensor"), 0 for any other name: lets a binding
/// that mirrors the structs (Python's ctypes) check its layout on load.
size_t gk_struct_size(const char *name);

// ---------------------------------------------------------------- threads

// Thread safety. Every function may be called from any thread, and from
// several threads at once:
// - A plan is immutable once created: any number of threads may call
//   gk_plan_check, gk_plan_workspace_size, gk_plan_get_info and gk_plan_run
//   on one plan at the same time, each with its own outputs and workspace
//   (tensors written by one call must not be read or written by another).
//   gk_plan_destroy must not overlap any other use of that plan.
// - The CPU kernels share one process-wide pool of worker threads (or an
//   OpenMP runtime's team: gk_set_openmp_runtime). One run at a time uses the pool; a run that starts while the pool is busy (another
//   thread's run, or a call made from inside a kernel) runs its tasks on its
//   own calling thread. Results are the same bits either way.
// - gk_set_num_threads changes a process-wide count that each parallel
//   section of a run reads when it starts: runs in flight finish correctly
//   (a section already started keeps its threads) and results do not depend
//   on it. A plan's workspace size is fixed when the plan is created (it may
//   grow with the thread count at that moment); a plan run with more threads
//   than it was sized for uses as many as its workspace has room for.
// - gk_last_error() is per thread: it describes the calling thread's last
//   failed call.
// - Optimizer steps and gk_clip_grad_norm follow the same rules: calls on
//   disjoint tensors may run at once.

/// Threads used by CPU kernels. Default: GK_NUM_THREADS from the environment,
/// else the number of online processors. n >= 1. In WebAssembly: 1 without
/// threads; in the build with threads (gradkern-threads.wasm) at most 1 +
/// the pool threads the host started (wasm/thread.mjs), all by default.
gk_status gk_set_num_threads(int n);
int gk_get_num_threads(void);

/// Run the CPU kernels' parallel sections on the thread team of a GNU
/// OpenMP runtime already loaded in the process (`library`: its path or
/// soname, such as "libgomp.so.1"; libgomp and runtimes that export its
/// GOMP_parallel entry point), instead of gradkern's own pool; NULL goes
/// back to the pool (the default). For programs that also run OpenMP code
/// between gradkern's calls (PyTorch's CPU ops): OpenMP's idle threads spin
/// for a while after each parallel region, and gradkern's own threads share
/// the cores with them; on the same team the two take turns. It costs where
/// a third pool runs next (OpenBLAS's threads, in torch's matrix products,
/// then meet OpenMP's spinning after gradkern's sections). Each section
/// runs gk_get_num_threads() threads; tasks are handed out as in the pool,
/// so results are the same bits either way. Unavailable in WebAssembly
/// (GK_ERR_UNSUPPORTED: no OpenMP runtime there); a library that is not
/// loaded, or has no GOMP_parallel, is GK_ERR_INVALID_VALUE naming it.
gk_status gk_set_openmp_runtime(const char *library);
/// The library given to gk_set_openmp_runtime, or NULL (the pool); valid
/// until the next gk_set_openmp_runtime.
const char *gk_get_openmp_runtime(void);

#ifdef __cplusplus
}
#endif
#endif
