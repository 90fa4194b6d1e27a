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
} gk_arg_spec;

typedef struct gk_kernel gk_kernel;

struct gk_plan {
  gk_op_desc desc;                     // normalised by the op's describe()
  gk_arg_spec args[GK_ARG_COUNT_];
  const gk_kernel *kernel;
  char kernel_name[64];                // "<op>_<fwd|bwd>__<kernel>"
  size_t workspace_bytes;
};

// Tensors handed to a kernel, indexed by gk_arg_kind (NULL when absent).
typedef const gk_tensor *gk_kernel_args[GK_ARG_COUNT_];

struct gk_kernel {
  const char *name;                    // implementation: "ref", "cpu_threads"
  gk_backend backend;
  const char *isa;                     // NULL: the level gk_isa_level() picked
  // NULL: supports every description of its op and direction.
  bool (*supports)(const gk_op_desc *desc);
  // NULL: needs no workspace.
  size_t (*workspace)(const gk_plan *plan);
  gk_status (*run)(const gk_plan *plan, const gk_kernel_args args, void *workspace);
};

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
void gk_spec_set(gk_plan *plan, gk_arg_kind kind, bool is_output, gk_dtype dtype,
                 int rank, const int64_t *shape);
void gk_spec_allow_alias(gk_plan *plan, gk_arg_kind output, gk_arg_kind input);
// An op of one tensor to one of the same shape: forward X -> Y (Y may be X);
// backward DY, `saved` (X or Y) -> DX (DX may be DY or `saved`).
void gk_spec_unary(gk_plan *plan, gk_arg_kind saved);

// The gated halves a, b (of x in the split form; x and gate otherwise) and
// their gradients da, db (of dx; dx and dgate). vda, vdb may be NULL.
void gk_gated_views(const gk_plan *plan, const gk_kernel_args a, gk_tensor *va, gk_tensor *vb,
                    gk_tensor *vda, gk_tensor *vdb);

// Kernel tables, in order of preference (fastest first), per op and direction.
// Each family defines its own, see src/ref and src/cpu.
extern const gk_kernel gk_ref_activation_fwd, gk_ref_activation_bwd;
extern const gk_kernel gk_ref_gated_fwd, gk_ref_gated_bwd;
extern const gk_kernel gk_ref_norm_fwd, gk_ref_norm_bwd;
extern const gk_kernel gk_cpu_activation_fwd, gk_cpu_activation_bwd;
extern const gk_kernel gk_cpu_gated_fwd, gk_cpu_gated_bwd;
extern const gk_kernel gk_cpu_norm_fwd, gk_cpu_norm_bwd;
extern const gk_kernel gk_ref_linear_fwd, gk_ref_linear_bwd, gk_cpu_linear_fwd, gk_cpu_linear_bwd;
extern const gk_kernel gk_ref_matmul_fwd, gk_ref_matmul_bwd, gk_cpu_matmul_fwd, gk_cpu_matmul_bwd;
extern const gk_kernel gk_ref_softmax_fwd, gk_ref_softmax_bwd, gk_cpu_softmax_fwd, gk_cpu_softmax_bwd;
extern const gk_kernel gk_ref_cross_entropy_fwd, gk_ref_cross_entropy_bwd;
extern const gk_kernel gk_cpu_cross_entropy_fwd, gk_cpu_cross_entropy_bwd;
extern const gk_kernel gk_ref_embedding_fwd, gk_ref_embedding_bwd, gk_cpu_embedding_fwd, gk_cpu_embedding_bwd;
extern const gk_kernel gk_ref_rope_fwd, gk_ref_rope_bwd, gk_cpu_rope_fwd, gk_cpu_rope_bwd;
extern const gk_kernel gk_ref_attention_fwd, gk_ref_attention_bwd, gk_cpu_attention_fwd, gk_cpu_attention_bwd;
extern const gk_kernel gk_ref_binary_fwd, gk_ref_binary_bwd, gk_cpu_binary_fwd, gk_cpu_binary_bwd;
extern const gk_kernel gk_ref_conv1d_fwd, gk_ref_conv1d_bwd, gk_cpu_conv1d_fwd, gk_cpu_conv1d_bwd;
extern const gk_kernel gk_ref_scan_fwd, gk_ref_scan_bwd, gk_cpu_scan_fwd, gk_cpu_scan_bwd;

// Checks of plan.c for entry points outside the plan API (optimizers): the
// byte range [*lo, *hi) a tensor can touch (empty when it has no elements),
// and whether two indices of t share an address.
void gk_tensor_byte_range(const gk_tensor *t, uintptr_t *lo, uintptr_t *hi);
bool gk_tensor_overlaps_itself(const gk_tensor *t);

// ---------------------------------------------------------------- tensors
static inline size_t gk_elem_size(gk_dtype d) { return gk_dtype_size(d); }
// Whether the tensor is row-major contiguous.
bool gk_tensor_is_contiguous(const gk_tensor *t);
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

static inline int64_t gk_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t gk_min64(int64_t a, int64_t b) { return a < b ? a : b; }

#endif
