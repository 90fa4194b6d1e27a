// The Vulkan backend's internals, shared by device.c (instance, device,
// memory, batched command buffers, pipelines) and kernels.c (the kernels
// per op family and direction: which shaders they dispatch, with what).
//
// Every shader sees the same interface (shaders/common.glsl): binding 0 is
// an array of VK_SLOTS storage buffers of 32-bit words ("slots"), bound per
// dispatch with push descriptors, and up to 128 bytes of push constants.
// Kernels work on contiguous f32 (and i32 index) tensors: an argument that
// is one already (contiguous f32, its offset aligned for a descriptor) is
// bound where it lies; any other (strided, broadcast, f16/bf16, i64) is
// first gathered into a contiguous temporary by the gather shader, and an
// output that is not is computed into one and scattered back (rounded to
// nearest even for f16/bf16).
#ifndef GK_VULKAN_BACKEND_H
#define GK_VULKAN_BACKEND_H

#include "../core/internal.h"

#include <vulkan/vulkan.h>

enum { VK_SLOTS = 24, VK_PUSH_BYTES = 128 };

// A range of a VkBuffer bound to one slot.
typedef struct vk_binding {
  VkBuffer buffer;
  VkDeviceSize offset, range;
} vk_binding;

// One run of a plan being recorded: each argument as a contiguous tensor.
typedef struct vk_run {
  const gk_plan *plan;
  vk_binding arg[GK_ARG_COUNT_];       // every argument the run has
  bool have[GK_ARG_COUNT_];
  int64_t numel[GK_ARG_COUNT_];
  const gk_tensor *scatter_to[GK_ARG_COUNT_];  // outputs computed into a temporary: where they go
  uint32_t half;  // 0: f32 bindings; 1, 2: every argument f16, bf16 in place, two elements a word (half.glsl)
} vk_run;

// ---------------------------------------------------------------- device.c
// The backend table's hooks (gk_backend_table).
const char *vk_unavailable(void);
// The device the backend runs on (its index among the instance's devices)
// and whether its buffers are mapped host-visible memory; NULL, or why none.
const char *vk_device_choice(uint32_t *index, bool *mapped);
gk_status vk_buffer_alloc(size_t bytes, void **handle);
void vk_buffer_free(void *handle);
gk_status vk_buffer_upload(void *handle, size_t offset, const void *src, size_t bytes);
gk_status vk_buffer_download(void *handle, size_t offset, void *dst, size_t bytes);
gk_status vk_synchronize(void);
// The whole of a buffer from vk_buffer_alloc, as a binding.
vk_binding vk_buffer_binding(void *handle);
// The device: name, type, API version, the features the kernels use.
const char *vk_device_description(void);
// Begin recording (takes the backend's recording lock; flushes a full
// batch) and end it (releases it): around the dispatches of a plan's run
// (vk_run_begin, vk_run_end) or of an optimizer call.
void vk_record_begin(void);
void vk_record_end(void);
void vk_run_begin(vk_run *r, const gk_plan *plan);
void vk_run_end(vk_run *r);
// While recording: submit the batch, wait for it, and copy `bytes` from
// `temp` (a temporary's host address from vk_temp) to dst before the
// temporaries are released.
gk_status vk_flush_read(const void *temp, void *dst, size_t bytes);
// A tensor in a buffer of the backend (any strides) as a contiguous f32/i32
// binding: where it lies when it is one (contiguous f32/i32 at an aligned
// offset), else a temporary (*temp), gathered unless it is an output that is
// only written (load false). An output in a temporary goes back with
// vk_scatter after the dispatches that write it.
gk_status vk_bind(const gk_tensor *t, bool output, bool load, vk_binding *out, bool *temp);
// A contiguous f16/bf16 tensor bound where it lies, as the 32-bit words that
// hold its elements (the last one half its when the count is odd); false
// (nothing bound) when it is not contiguous 16-bit at an aligned offset.
bool vk_bind_words16(const gk_tensor *t, vk_binding *out);
gk_status vk_scatter(const gk_tensor *t, vk_binding from);
// The argument as a contiguous f32/i32 binding (vk_bind), its temporary
// gathered for inputs and outputs that accumulate; vk_scatter_outputs
// scatters the outputs' temporaries back.
gk_status vk_bind_input(vk_run *r, gk_arg_kind k, const gk_tensor *t);
gk_status vk_bind_output(vk_run *r, gk_arg_kind k, const gk_tensor *t, bool accumulates);
// Gather any view of a tensor in a buffer of the backend (any strides,
// stride 0 for broadcast) into a new contiguous f32/i32 temporary.
gk_status vk_gather(const gk_tensor *view, vk_binding *out);
gk_status vk_scatter_outputs(vk_run *r);
// A temporary of `bytes` bytes (contents undefined), live until the batch
// ends; *host, when not NULL, gets its host address for the host to write
// before the batch is submitted.
gk_status vk_temp(size_t bytes, vk_binding *out, void **host);
// A binding that no shader reads (for slots a dispatch leaves unused).
vk_binding vk_unused(void);
// Record one dispatch of shader `name` (its pipeline made by vk_pipelines)
// with the given slots (the rest unused) and push constants, followed by a
// barrier that makes its writes visible to the next dispatch.
gk_status vk_dispatch(const char *name, const vk_binding *slots, int nslots, const void *push, size_t push_bytes,
                      uint32_t groups_x, uint32_t groups_y, uint32_t groups_z);
// Make sure the pipelines of the named shaders (NULL-terminated) exist.
gk_status vk_pipelines(const char *const *names);
// Groups of `size` invocations for n items, capped at the dispatch limit
// (shaders loop with a grid stride past it).
uint32_t vk_groups(int64_t n, int size);
// Whether the device stores 16-bit floats (f16/bf16 outputs).
bool vk_has_16bit_storage(void);

#endif
