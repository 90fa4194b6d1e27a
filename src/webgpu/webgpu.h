// The WebGPU backend (WebAssembly build only): WGSL compute shaders run on
// the host's GPUDevice through the imports of module "gk_webgpu", which
// wasm/webgpu.mjs implements. Buffers and pipelines are named by ids this
// side chooses, so no call but a read or a wait waits for the host.
#ifndef GK_WEBGPU_H
#define GK_WEBGPU_H

#include "../core/internal.h"

#include <stdint.h>

#define GK_WEBGPU_IMPORT(name) __attribute__((import_module("gk_webgpu"), import_name(#name)))

// Limits the host's device was created with (device_info's `limits`), its
// optional features and the adapter's subgroup sizes.
enum {
  WG_LIMIT_STORAGE_BINDING,    // maxStorageBufferBindingSize, bytes
  WG_LIMIT_BUFFER_SIZE,        // maxBufferSize, bytes (clamped to 2^32 - 1)
  WG_LIMIT_GROUPS_PER_DIM,     // maxComputeWorkgroupsPerDimension
  WG_LIMIT_INVOCATIONS,        // maxComputeInvocationsPerWorkgroup
  WG_LIMIT_FEATURES,           // the WG_FEATURE_* bits of the features the device was requested with
  WG_LIMIT_SUBGROUP_MIN,       // subgroupMinSize, subgroupMaxSize (0 without subgroups)
  WG_LIMIT_SUBGROUP_MAX,
  WG_LIMIT_COUNT
};
// Optional WebGPU features the backend uses where the adapter has them.
enum {
  WG_FEATURE_SUBGROUPS = 1,    // subgroups: the row reductions' subgroup pipelines (kernels.c, optim.c)
  WG_FEATURE_TIMESTAMPS = 2,   // timestamp-query: per-dispatch GPU times (gk_webgpu_timing)
};

// 1 when the host gave a device (limits filled, the adapter's description
// in `text`), else 0 with the reason in `text` (NUL-terminated, at most
// `cap` bytes).
GK_WEBGPU_IMPORT(device_info) int32_t gkwg_device_info(char *text, uint32_t cap, uint32_t *limits);
// A storage buffer of `bytes` bytes (a multiple of 4), zeroed; its id is `id`.
GK_WEBGPU_IMPORT(buffer_create) void gkwg_buffer_create(uint32_t id, uint32_t bytes);
GK_WEBGPU_IMPORT(buffer_destroy) void gkwg_buffer_destroy(uint32_t id);
// Queue a write of host bytes (offset and bytes multiples of 4).
GK_WEBGPU_IMPORT(buffer_write) void gkwg_buffer_write(uint32_t id, uint32_t offset, const void *src, uint32_t bytes);
// After everything queued: copy bytes into host memory. 0, or 1 with the
// device's error in `message`.
GK_WEBGPU_IMPORT(buffer_read)
int32_t gkwg_buffer_read(uint32_t id, uint32_t offset, void *dst, uint32_t bytes, char *message, uint32_t cap);
// Queue a copy between buffers (offsets and bytes multiples of 4).
GK_WEBGPU_IMPORT(buffer_copy)
void gkwg_buffer_copy(uint32_t src, uint32_t src_offset, uint32_t dst, uint32_t dst_offset, uint32_t bytes);
// A compute pipeline from WGSL text (`len` bytes), a NUL-terminated entry
// point and NUL-terminated values of the shader's override constants
// ("NAME=value,NAME=value", or "" for none).
GK_WEBGPU_IMPORT(pipeline_create)
void gkwg_pipeline_create(uint32_t id, const char *wgsl, uint32_t len, const char *entry, const char *overrides);
GK_WEBGPU_IMPORT(pipeline_destroy) void gkwg_pipeline_destroy(uint32_t id);
// Name a pipeline ("family.entry", `len` bytes) for the kernel times JavaScript reads.
GK_WEBGPU_IMPORT(pipeline_label) void gkwg_pipeline_label(uint32_t id, const char *text, uint32_t len);
// One storage binding of a dispatch: buffer `id` from byte `offset` (a
// multiple of 256), `size` bytes (0: to the buffer's end).
typedef struct wg_binding {
  uint32_t binding, id, offset, size;
} wg_binding;

// Queue a dispatch of groups_x x groups_y workgroups: binding 0 the
// `params_bytes` bytes of params as a uniform buffer, then the `nbindings`
// storage bindings.
GK_WEBGPU_IMPORT(dispatch)
void gkwg_dispatch(uint32_t pipeline, const wg_binding *bindings, uint32_t nbindings, const void *params,
                   uint32_t params_bytes, uint32_t groups_x, uint32_t groups_y);
// The end of an op: the host runs what was queued, without this side
// waiting (it may hold small ops back to post them with later ones, or
// with the next read or wait).
GK_WEBGPU_IMPORT(submit) void gkwg_submit(void);
// Wait for everything queued: 0, or 1 with the device's error in `message`.
GK_WEBGPU_IMPORT(wait) int32_t gkwg_wait(char *message, uint32_t cap);
// Time every dispatch from now on (on = 1: timestamp writes at the start
// and end of its compute pass) or not (0). Only with WG_FEATURE_TIMESTAMPS.
GK_WEBGPU_IMPORT(timing) void gkwg_timing(int32_t on);

// One timed dispatch: its pipeline and the GPU's timestamps (ns) at the
// start and end of its compute pass.
typedef struct gk_webgpu_kernel_time {
  uint32_t pipeline, pad;
  double begin_ns, end_ns;
} gk_webgpu_kernel_time;
// After everything queued: the times of the dispatches timed since the last
// call, in dispatch order, at most `cap`; their count, or -1 with the
// device's error in `message`.
GK_WEBGPU_IMPORT(kernel_times)
int32_t gkwg_kernel_times(gk_webgpu_kernel_time *dst, uint32_t cap, char *message, uint32_t message_cap);

// Per-dispatch GPU times (off by default: timing costs a query per pass and
// a read back per batch). gk_webgpu_timing(1) starts timing every dispatch,
// GK_ERR_UNSUPPORTED with "no timestamp-query on this adapter" where the
// device lacks the feature; gk_webgpu_kernel_times waits for everything
// queued and gives the times of the dispatches since the last call (at most
// `cap` into `times`, their count in *count).
gk_status gk_webgpu_timing(int on);
gk_status gk_webgpu_kernel_times(gk_webgpu_kernel_time *times, int cap, int *count);

// A test knob: use `bytes` as maxStorageBufferBindingSize where it is
// below the device's (0: the device's again), so that tests reach the
// split of runs over it (wg_family.split) with small tensors.
void gk_webgpu_test_binding_limit(uint32_t bytes);
// A test knob: plans created while it is set use the plain (workgroup-tree)
// reductions even where the device has subgroups, so both are tested there.
void gk_webgpu_test_plain_reductions(bool plain);
// Whether plans created now use the subgroup reductions: the device has
// subgroups and the knob above is off.
bool wg_subgroups(void);
// A test and bench knob: plans of the selective scan created from now on
// (and run before the knob changes) take the sequential kernel (1), the
// parallel one (2; 3: with the most blocks a workgroup; where L > 0), or
// choose by shape (0).
void gk_webgpu_test_scan_path(int path);

#endif
