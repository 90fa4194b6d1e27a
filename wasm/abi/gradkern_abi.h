// The WebAssembly kernel ABI: one module per op and dtype
// (build/wasm/<op>_<dtype>.wasm), each exporting its memory and five
// functions, importing nothing:
//
//   i32 kernel_init(u32 params_ptr, u32 params_len)  check a params struct (len 0: nothing to check)
//   i32 kernel_forward(u32 desc_ptr)                 run the op forward
//   i32 kernel_backward(u32 desc_ptr)                run it backward: every gradient
//   i32 kernel_info(u32 info_ptr)                    fill a gk_abi_info
//   i32 kernel_cleanup(void)                         nothing to release: returns 0
//
// A call gets a descriptor (gk_abi_desc: ten u32, the byte offset and size of
// five regions of linear memory) and returns a code (GK_ABI_*). Each region
// holds the tensors the layout table (wasm/abi/abi.c, README "WebAssembly
// kernel ABI") lists for the op and direction, packed in that order, each
// starting at the next multiple of 8 bytes from the region's start;
// a region's size must be exactly the end of its last tensor (0 for an empty
// region). Tensors are contiguous, row-major, little-endian, in the module's
// dtype, except index tensors (i32, or i64 as the params say), parameters
// kept in f32 by a 16-bit module's params, and the saved statistics and
// states the table names (f32; f64 in the f64 modules).
//
// Memory. The module's own memory (shadow stack, data, its allocation arena)
// is every byte below the memory's size at instantiation; the host's memory
// is every page it adds with memory.grow. The descriptor, the params and
// every region must lie in the host's memory. A call whose library workspace
// does not fit the module's arena grows the memory for it (re-read
// memory.buffer after a call); those pages are the module's too.
//
// Nothing is trusted: before anything is read or written, the descriptor,
// the params and every region are checked against the memory's current size
// (in 64-bit arithmetic, so no offset + size wraps around), the params
// against their struct, every region's size against the shapes in the
// params, each tensor's alignment against its element size, and the output
// (and, forward, the scratch region, which is written then) against every
// other region for overlap. A rejected call returns its code and leaves the
// host's memory and the memory's size unchanged (in the module's own memory,
// only the shadow stack, the library's one-time set-up on a first call and,
// when the library refuses an option, its error message change).
#ifndef GRADKERN_ABI_H
#define GRADKERN_ABI_H

#include <stdint.h>

#include "gradkern.h"

/// Return codes. 0-3 keep the meanings of the ABI's first kernels.
typedef enum gk_abi_code {
  GK_ABI_OK = 0,
  GK_ABI_INVALID_INPUT = 1,   ///< input region a or b (or backward's scratch) has the wrong size, an index
                              ///< (embedding, cross-entropy target) is out of range, or clipping's norm is
                              ///< not finite
  GK_ABI_INVALID_OUTPUT = 2,  ///< the output region (or forward's scratch) has the wrong size
  GK_ABI_INVALID_PARAMS = 3,  ///< params: wrong size, a zero dim, a flag not 0/1, an option out of range,
                              ///< shapes the op cannot take; kernel_info: info_ptr 0
  GK_ABI_OUT_OF_BOUNDS = 4,   ///< descriptor, params, info or a region not wholly inside the host's memory
  GK_ABI_OVERLAP = 5,         ///< the output (or forward's scratch) overlaps another region
  GK_ABI_UNKNOWN_DTYPE = 6,   ///< params dtype is not 0 f32, 1 f64, 2 f16, 3 bf16
  GK_ABI_WRONG_DTYPE = 7,     ///< params dtype is a dtype, but not this module's
  GK_ABI_MISALIGNED = 8,      ///< a tensor's address is not a multiple of its element size
  GK_ABI_UNSUPPORTED = 9,     ///< a valid request this module does not serve (a gated op's beta != 1, an
                              ///< optimizer's backward)
  GK_ABI_FAILED = 10,         ///< the library failed (out of memory; a bug): nothing was written
} gk_abi_code;

/// The optimizers are served as three more ops, after the plan API's: AdamW
/// (gk_adamw_step), SGD (gk_sgd_step) and gradient clipping (gk_clip_grad_norm).
#define GK_ABI_OP_ADAMW ((gk_op)GK_OP_COUNT_)
#define GK_ABI_OP_SGD ((gk_op)(GK_OP_COUNT_ + 1))
#define GK_ABI_OP_CLIP_GRAD_NORM ((gk_op)(GK_OP_COUNT_ + 2))

/// The descriptor: byte offset and size of each region in linear memory.
typedef struct gk_abi_desc {
  uint32_t input_a_offset, input_a_size;
  uint32_t input_b_offset, input_b_size;
  uint32_t output_offset, output_size;
  uint32_t scratch_offset, scratch_size;
  uint32_t params_offset, params_size;
} gk_abi_desc;

/// What kernel_info writes at info_ptr (16 bytes, 4-aligned; byte 15 is
/// padding and left as it was): the module's name ("swiglu_f32", in the
/// module's memory, not NUL-counted), the library's version, and whether
/// kernel_backward runs.
typedef struct gk_abi_info {
  uint32_t name_ptr;
  uint32_t name_len;
  uint16_t version_major, version_minor, version_patch;
  uint8_t supports_backward;
} gk_abi_info;

/// Linear memory as the ABI layer sees it: byte 0 at `base`, `bytes` long,
/// the host's part starting at `host_start`, less the blocks above it that
/// the module grew for itself (owned[0 .. n_owned-1], [lo, hi) each).
/// In a module base is 0; natively (tests) an arena stands in for it.
typedef struct gk_abi_range {
  uint64_t lo, hi;
} gk_abi_range;
typedef struct gk_abi_memory {
  uintptr_t base;
  uint64_t bytes;
  uint64_t host_start;
  const gk_abi_range *owned;
  int n_owned;
} gk_abi_memory;

/// Run `op` in `dtype` on the descriptor at desc_ptr (the body of
/// kernel_forward / kernel_backward).
gk_abi_code gk_abi_run(const gk_abi_memory *mem, gk_op op, gk_dtype dtype, gk_direction dir, uint32_t desc_ptr);
/// Check params as a call would (kernel_init).
gk_abi_code gk_abi_check_params(const gk_abi_memory *mem, gk_op op, gk_dtype dtype, uint32_t params_ptr,
                                uint32_t params_len);
/// Fill the info struct at info_ptr (kernel_info); name lies in the module's memory.
gk_abi_code gk_abi_info_write(const gk_abi_memory *mem, gk_op op, uint32_t info_ptr, uint32_t name_ptr,
                              uint32_t name_len);

/// Where each tensor of a call goes: for each region (a, b, output,
/// scratch), its tensors in order, with their byte offsets from the region's
/// start, and the region's size. For native tools and tests.
enum { GK_ABI_REGIONS = 4, GK_ABI_MAX_TENSORS = 10 };
typedef struct gk_abi_tensor {
  gk_arg_kind kind;  ///< GK_ARG_COUNT_ for the optimizers' tensors, which are not plan arguments
  const char *name;  ///< gk_arg_name(kind), or the optimizers': grad, param, exp_avg, exp_avg_sq,
                     ///< momentum_buf, master, total_norm
  gk_dtype dtype;
  int rank;
  int64_t shape[GK_MAX_RANK];
  uint32_t offset, bytes;
} gk_abi_tensor;
typedef struct gk_abi_region {
  gk_abi_tensor tensors[GK_ABI_MAX_TENSORS];
  int n;
  uint32_t bytes;
} gk_abi_region;
typedef struct gk_abi_layout {
  gk_abi_region region[GK_ABI_REGIONS];
} gk_abi_layout;
gk_abi_code gk_abi_describe(gk_op op, gk_dtype dtype, gk_direction dir, const void *params, uint32_t len,
                            gk_abi_layout *layout);

/// Size in bytes of the op's params struct without its dtype field, the form
/// the hosts of the two first kernels pass (SwiGLU and the other gated ops,
/// RMSNorm); 0 for the ops that have no such form.
uint32_t gk_abi_params_short_size(gk_op op);

#endif
