// Internal declarations shared by the core, the op definitions and kernels.
#ifndef GK_INTERNAL_H
#define GK_INTERNAL_H

#include "gradkern.h"
#include <stdbool.h>

// ---------------------------------------------------------------- errors
// Record a message for gk_last_error() and return `status`.
gk_status gk_fail(gk_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gk_clear_error(void);
// Write "[2, 3, 4]" into buf.
const char *gk_format_shape(char *buf, size_t size, int rank, const int64_t *shape);

// ---------------------------------------------------------------- plans
// What a plan expects of one argument.
typedef struct gk_arg_spec {
  bool used;
  bool is_output;
  gk_dtype dtype;
  int rank;
  int64_t shape[GK_MAX_RANK];
  uint64_t alias_ok;         // bit k: this output may be exactly the view of arg k
  // Index tensors (i32/i64): index_limit > 0 means every element must lie
  // in 0 .. index_limit-1, or equal `ignore` when has_ignore. gk_plan_run
  // checks the values before any kernel runs.
  int64_t index_limit;
  bool has_ignore;
  int64_t ignore;
} gk_arg_spec;

typedef struct gk_kernel gk_kernel;

typedef struct gk_backend_table gk_backend_table;

// AdamW's scalars of one step, formed in double by src/optim/optim.c (as
// Python does) and cast to the compute type where they are used.
typedef struct gk_adamw_scalars {
  double decay;       // 1 - lr wd
  double step_size;   // lr / (1 - beta1^step)
  double bc2_sqrt;    // sqrt(1 - beta2^step)
} gk_adamw_scalars;

struct gk_plan {
  gk_op_desc desc;                     // normalised by the op's describe()
  gk_arg_spec args[GK_ARG_COUNT_];
  const gk_backend_table *backend;     // the backend of the selected kernel
  const gk_kernel *kernel;
  void *state;                         // the kernel's per-plan state (its init), or NULL
  char kernel_name[64];                // "<op>_<fwd|bwd>__<kernel>"
  char declined[512];                  // "backend/kernel: reason; ..." of kernels passed over
  size_t workspace_bytes;
};

// Tensors handed to a kernel, indexed by gk_arg_kind (NULL when absent).
typedef const gk_tensor *gk_kernel_args[GK_ARG_COUNT_];

// One implementation of one op in one direction. Its lifecycle in a plan:
// decline (may refuse the checked description) -> init (per-plan state) ->
// workspace -> run (any number of times, from any threads) -> fini.
struct gk_kernel {
  const char *name;                    // implementation: "ref", "cpu_threads"
  gk_backend backend;
  const char *isa;                     // NULL: the level gk_isa_level() picked
  // NULL, or the reason this kernel does not take the plan's description
  // (then selection moves on). NULL function: takes every description.
  const char *(*decline)(const gk_plan *plan);
  // NULL: needs no workspace.
  size_t (*workspace)(const gk_plan *plan);
  gk_status (*run)(const gk_plan *plan, const gk_kernel_args args, void *workspace);
  // What a plan of this kernel computes (math, accumulator, determinism);
  // NULL: the backend's `precision`.
  void (*precision)(const gk_plan *plan, gk_plan_info *info);
  // Per-plan state (a GPU backend's compiled pipelines): init sets
  // plan->state or fails with a status and message (selection then moves
  // on, the message kept as the reason); fini frees it. NULL: none.
  gk_status (*init)(gk_plan *plan);
  void (*fini)(gk_plan *plan);
};

// ---------------------------------------------------------------- backends
// A backend: its kernels per (op, direction), fastest first, and how it
// reports what a plan of it computes. See README "Adding a backend".
struct gk_backend_table {
  const char *name;                    // "cpu", "ref"
  gk_backend id;
  gk_device_type device;               // where its tensors live
  // NULL when the backend can run in this process; else why not (no device,
  // no driver). Asked once, at registration.
  const char *(*unavailable)(void);
  // A line on the device it runs on (gk_backend_device_description); NULL: "".
  const char *(*device_description)(void);
  // Precision and determinism of a plan whose kernel is this backend's and
  // has no `precision` of its own: sets info->math, info->accumulator and
  // info->deterministic.
  void (*precision)(const gk_plan *plan, gk_plan_info *info);
  // kernels[op][direction]: a NULL-terminated list, in order of preference
  // (NULL: none for that op and direction).
  const gk_kernel *const *kernels[GK_OP_COUNT_][GK_BACKWARD + 1];
  // Device memory, for a backend whose device is not the host (NULL for
  // host backends: core then allocates host memory and copies with memcpy).
  // A buffer is the backend's opaque handle; offsets are in bytes.
  gk_status (*buffer_alloc)(size_t bytes, void **handle);
  void (*buffer_free)(void *handle);
  gk_status (*buffer_upload)(void *handle, size_t offset, const void *src, size_t bytes);
  gk_status (*buffer_download)(void *handle, size_t offset, void *dst, size_t bytes);
  // Wait for every run submitted (NULL: runs are synchronous).
  gk_status (*synchronize)(void);
  // The optimizers on tensors in the backend's buffers (NULL: not on this
  // device; host backends leave them NULL: src/optim runs host tensors).
  // src/optim/optim.c calls them after its checks (hyperparameters, dtypes,
  // shapes, every tensor on this backend's device and inside one of its
  // buffers, no overlap) and keeps the arithmetic around them (the scalars,
  // the norm, the clipping factor, the non-finite rule) and hands them f32
  // tensors only; a hook refuses what it does not run (GK_ERR_UNSUPPORTED,
  // naming the argument) before it writes anything. Work may still run when
  // they return, as a plan's does.
  // adamw_step: one AdamW step (f32 parameters: no master weights).
  gk_status (*adamw_step)(const gk_adamw_config *c, const gk_adamw_scalars *k, int n, const gk_tensor *params,
                          const gk_tensor *grads, const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq);
  // sum_squares: *sum = the sum over the n tensors, in order, of each one's
  // sum of squared elements (in the backend's precision); waits for it.
  gk_status (*sum_squares)(int n, const gk_tensor *grads, double *sum);
  // scale: every element of the n tensors *= factor, in their dtype.
  gk_status (*scale)(int n, const gk_tensor *grads, double factor);
};

// Device buffers of a backend. gk_buffer_find: the live buffer holding the
// addresses [lo, hi), its handle and the offset of lo in it. gk_buffer_resolve:
// the same for every element of t, *offset being that of t->data (element
// 0). False when no one buffer of the backend holds them. For core's checks
// and device kernels.
bool gk_buffer_find(const gk_backend_table *backend, uintptr_t lo, uintptr_t hi, void **handle, size_t *offset);
bool gk_buffer_resolve(const gk_backend_table *backend, const gk_tensor *t, void **handle, size_t *offset);

// The kernel table of a backend with one kernel per op family and
// direction, named <prefix>_<family>_fwd and <prefix>_<family>_bwd (as the
// cpu and ref backends are).
#define GK_FAMILY_KERNELS_(prefix, family)                         \
  {(const gk_kernel *const[]){&prefix##_##family##_fwd, NULL},     \
   (const gk_kernel *const[]){&prefix##_##family##_bwd, NULL}}
#define GK_KERNELS_PER_FAMILY(prefix)                                                                   \
  {[GK_OP_RELU] = GK_FAMILY_KERNELS_(prefix, activation), [GK_OP_GELU] = GK_FAMILY_KERNELS_(prefix, activation), \
   [GK_OP_SILU] = GK_FAMILY_KERNELS_(prefix, activation), [GK_OP_SIGMOID] = GK_FAMILY_KERNELS_(prefix, activation), \
   [GK_OP_SOFTPLUS] = GK_FAMILY_KERNELS_(prefix, activation), [GK_OP_GLU] = GK_FAMILY_KERNELS_(prefix, gated),     \
   [GK_OP_REGLU] = GK_FAMILY_KERNELS_(prefix, gated), [GK_OP_SWIGLU] = GK_FAMILY_KERNELS_(prefix, gated),         \
   [GK_OP_GEGLU] = GK_FAMILY_KERNELS_(prefix, gated), [GK_OP_RMSNORM] = GK_FAMILY_KERNELS_(prefix, norm),         \
   [GK_OP_LAYERNORM] = GK_FAMILY_KERNELS_(prefix, norm), [GK_OP_LINEAR] = GK_FAMILY_KERNELS_(prefix, linear),     \
   [GK_OP_MATMUL] = GK_FAMILY_KERNELS_(prefix, matmul), [GK_OP_SOFTMAX] = GK_FAMILY_KERNELS_(prefix, softmax),    \
   [GK_OP_LOG_SOFTMAX] = GK_FAMILY_KERNELS_(prefix, softmax),                                                     \
   [GK_OP_CROSS_ENTROPY] = GK_FAMILY_KERNELS_(prefix, cross_entropy),                                             \
   [GK_OP_EMBEDDING] = GK_FAMILY_KERNELS_(prefix, embedding), [GK_OP_ROPE] = GK_FAMILY_KERNELS_(prefix, rope),    \
   [GK_OP_ATTENTION] = GK_FAMILY_KERNELS_(prefix, attention), [GK_OP_ADD] = GK_FAMILY_KERNELS_(prefix, binary),   \
   [GK_OP_MUL] = GK_FAMILY_KERNELS_(prefix, binary), [GK_OP_CONV1D] = GK_FAMILY_KERNELS_(prefix, conv1d),         \
   [GK_OP_SELECTIVE_SCAN] = GK_FAMILY_KERNELS_(prefix, scan)}

// Add a backend after those built in (which are registered first, in
// preference order: cpu, ref). Its id must be new. Returns GK_SUCCESS, or
// a status with a message; an unavailable backend is registered, listed
// with its reason, and selects no kernel.
gk_status gk_backend_register(const gk_backend_table *backend);
// The registered backends, in preference order (the array stays valid).
int gk_backends(const gk_backend_table *const **list);
const gk_backend_table *gk_backend_find(gk_backend id);
// The reason a registered backend cannot run (NULL when it can).
const char *gk_backend_unavailable_reason(const gk_backend_table *backend);

// An op family: checks the description (normalising it in place) and fills
// the plan's argument specs. Defined in src/ops/<family>.c.
typedef gk_status (*gk_describe_fn)(gk_plan *plan);
gk_status gk_describe_activation(gk_plan *plan);
gk_status gk_describe_gated(gk_plan *plan);
gk_status gk_describe_norm(gk_plan *plan);
gk_status gk_describe_linear(gk_plan *plan);
gk_status gk_describe_matmul(gk_plan *plan);
gk_status gk_describe_softmax(gk_plan *plan);
gk_status gk_describe_cross_entropy(gk_plan *plan);
gk_status gk_describe_embedding(gk_plan *plan);
gk_status gk_describe_rope(gk_plan *plan);
gk_status gk_describe_attention(gk_plan *plan);
gk_status gk_describe_binary(gk_plan *plan);
gk_status gk_describe_conv1d(gk_plan *plan);
gk_status gk_describe_scan(gk_plan *plan);

// Helpers for describe functions.
// desc.<field> = t must be GK_DTYPE_SAME, desc.dtype, or f32 with f16/bf16
// desc.dtype (parameters kept in f32 under mixed precision).
gk_status gk_check_mixed_dtype(const gk_op_desc *d, const char *field, int t);
void gk_spec_set(gk_plan *plan, gk_arg_kind kind, bool is_output, gk_dtype dtype,
                 int rank, const int64_t *shape);
void gk_spec_allow_alias(gk_plan *plan, gk_arg_kind output, gk_arg_kind input);
// Index argument `kind` holds values in 0 .. limit-1 (or `ignore`, when
// has_ignore), checked by gk_plan_run for every backend.
void gk_spec_indices(gk_plan *plan, gk_arg_kind kind, int64_t limit, bool has_ignore, int64_t ignore);
// An op of one tensor to one of the same shape: forward X -> Y (Y may be X);
// backward DY, `saved` (X or Y) -> DX (DX may be DY or `saved`).
void gk_spec_unary(gk_plan *plan, gk_arg_kind saved);

// The tensor an elementwise activation's backward reads besides DY: Y with
// desc.act.from_output (relu, sigmoid), else X.
gk_arg_kind gk_activation_saved(const gk_op_desc *d);

// The gated halves a, b (of x in the split form; x and gate otherwise) and
// their gradients da, db (of dx; dx and dgate). vda, vdb may be NULL.
void gk_gated_views(const gk_plan *plan, const gk_kernel_args a, gk_tensor *va, gk_tensor *vb,
                    gk_tensor *vda, gk_tensor *vdb);

// Checks of plan.c for entry points outside the plan API (optimizers): the
// byte range [*lo, *hi) a tensor can touch (empty when it has no elements),
// and whether two indices of t share an address.
void gk_tensor_byte_range(const gk_tensor *t, uintptr_t *lo, uintptr_t *hi);
bool gk_tensor_overlaps_itself(const gk_tensor *t);

// ---------------------------------------------------------------- tensors
static inline size_t gk_elem_size(gk_dtype d) { return gk_dtype_size(d); }
// Whether the tensor is row-major contiguous.
bool gk_tensor_is_contiguous(const gk_tensor *t);
// Whether every element of t is the one at t->data (each dim of size > 1 has
// stride 0: a scalar broadcast, as autograd hands the dy of a sum).
bool gk_tensor_is_one_value(const gk_tensor *t);
// Element offset (in elements) of the element with row-major flat index `i`.
int64_t gk_tensor_offset(const gk_tensor *t, int64_t i);
// A view of t with dimension `dim` restricted to [start, start + len).
gk_tensor gk_tensor_narrow(const gk_tensor *t, int dim, int64_t start, int64_t len);
// t as `outer` rows of its trailing `inner_rank` dims: the view of row r.
gk_tensor gk_tensor_row(const gk_tensor *t, int inner_rank, int64_t r);

// Elements [start, start + n) of t in row-major order, converted to/from
// float or double (round to nearest even on store).
void gk_load_f32(const gk_tensor *t, int64_t start, int64_t n, float *out);
void gk_store_f32(const gk_tensor *t, int64_t start, int64_t n, const float *in);
void gk_load_f64(const gk_tensor *t, int64_t start, int64_t n, double *out);
void gk_store_f64(const gk_tensor *t, int64_t start, int64_t n, const double *in);
// n contiguous bf16 or f16 elements (dtype dt) widened to f32, or f32 values
// narrowed into them: the conversions gk_load_f32 / gk_store_f32 make for a
// contiguous 16-bit tensor, for kernels that keep its pointer.
void gk_widen16(gk_dtype dt, const uint16_t *src, int64_t n, float *out);
void gk_narrow16(gk_dtype dt, const float *in, int64_t n, uint16_t *dst);

// Chunk access for kernels: a pointer to elements [start, start + n) as
// float/double: the tensor's own memory when it is contiguous in that dtype,
// else `buf` filled by a load. Outputs: write through the returned pointer,
// then call gk_chunk_commit_* (a no-op for the tensor's own memory).
const float *gk_chunk_in_f32(const gk_tensor *t, int64_t start, int64_t n, float *buf);
float *gk_chunk_out_f32(const gk_tensor *t, int64_t start, float *buf);
void gk_chunk_commit_f32(const gk_tensor *t, int64_t start, int64_t n, float *p, const float *buf);
const double *gk_chunk_in_f64(const gk_tensor *t, int64_t start, int64_t n, double *buf);
double *gk_chunk_out_f64(const gk_tensor *t, int64_t start, double *buf);
void gk_chunk_commit_f64(const gk_tensor *t, int64_t start, int64_t n, double *p, const double *buf);

// Element i (row-major flat index) of an i32 or i64 tensor.
static inline int64_t gk_get_index(const gk_tensor *t, int64_t i) {
  const char *p = (const char *)t->data + gk_tensor_offset(t, i) * (int64_t)gk_dtype_size(t->dtype);
  return t->dtype == GK_I32 ? (int64_t) * (const int32_t *)p : *(const int64_t *)p;
}

// One element as double (reference kernels).
double gk_get(const gk_tensor *t, int64_t i);
void gk_set(const gk_tensor *t, int64_t i, double v);

// ---------------------------------------------------------------- ISA
// Kernels compile their hot loops per instruction-set level (isa.h). On one
// machine and level a result never depends on the thread count.
#include "isa.h"

// ---------------------------------------------------------------- threads
// Run fn(ctx, task) for task in [0, ntasks) on the pool. Which thread runs a
// task must not change a result: kernels split work by problem size only.
typedef void (*gk_task_fn)(void *ctx, int64_t task);
void gk_parallel_for(int64_t ntasks, gk_task_fn fn, void *ctx);
#ifdef GK_WASM_THREADS
// A thread of the WebAssembly pool: called by each thread the host starts,
// after it set the instance's stack and thread-local storage; never returns.
void gk_wasm_thread_main(void);
#endif

static inline int64_t gk_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t gk_min64(int64_t a, int64_t b) { return a < b ? a : b; }

#endif
