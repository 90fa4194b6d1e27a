// "toy": a third backend for the tests, added at run time with no change to
// the library: the reference kernels behind device buffers of its own (host
// memory behind handles the tensors never point to), on a device type of
// its own. The harness runs every op on it against ref like any backend
// (plan_harness.h); test_backends.c checks the registry and device memory
// with it. toy_backend_register() adds it (and, for test_backends.c, an
// unavailable backend "absent").
#ifndef GK_TEST_TOY_BACKEND_H
#define GK_TEST_TOY_BACKEND_H

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

extern const gk_backend_table gk_ref_backend;

#define TOY_ID ((gk_backend)7)
#define ABSENT_ID ((gk_backend)8)
#define TOY_DEVICE ((gk_device_type)5)

// Its memory: host memory behind a handle that tensors never point to
// (their addresses are those the library reserves for each buffer).
static int live_buffers;
static gk_status toy_alloc(size_t bytes, void **handle) {
  *handle = calloc(1, bytes);
  if (!*handle) return gk_fail(GK_ERR_OUT_OF_MEMORY, "toy: no memory for %zu bytes", bytes);
  live_buffers++;
  return GK_SUCCESS;
}
static void toy_free(void *handle) {
  live_buffers--;
  free(handle);
}
static gk_status toy_upload(void *handle, size_t offset, const void *src, size_t bytes) {
  memcpy((char *)handle + offset, src, bytes);
  return GK_SUCCESS;
}
static gk_status toy_download(void *handle, size_t offset, void *dst, size_t bytes) {
  memcpy(dst, (const char *)handle + offset, bytes);
  return GK_SUCCESS;
}

// The ref kernel of the plan's op and direction.
static const gk_kernel *ref_kernel(const gk_plan *plan) {
  return gk_ref_backend.kernels[plan->desc.op][plan->desc.direction][0];
}
static size_t toy_workspace(const gk_plan *plan) {
  return ref_kernel(plan)->workspace ? ref_kernel(plan)->workspace(plan) : 0;
}
// The ref kernel, run on the host memory behind each tensor's buffer.
static gk_status toy_run(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  gk_tensor host[GK_ARG_COUNT_];
  gk_kernel_args h;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    h[k] = NULL;
    if (!a[k]) continue;
    void *mem;
    size_t offset;
    if (!gk_buffer_resolve(plan->backend, a[k], &mem, &offset))
      return gk_fail(GK_ERR_INTERNAL, "toy: '%s' is not in a toy buffer", gk_arg_name((gk_arg_kind)k));
    host[k] = *a[k];
    host[k].data = (char *)mem + offset;
    h[k] = &host[k];
  }
  void *ws_mem = NULL;
  size_t ws_offset = 0;
  if (plan->workspace_bytes &&
      !gk_buffer_find(plan->backend, (uintptr_t)ws, (uintptr_t)ws + plan->workspace_bytes, &ws_mem, &ws_offset))
    return gk_fail(GK_ERR_INTERNAL, "toy: the workspace is not in a toy buffer");
  return ref_kernel(plan)->run(plan, h, ws_mem ? (char *)ws_mem + ws_offset : NULL);
}

// The kernels: for relu forward one that declines f64, then one with
// counted per-plan state; the plain one for every other op and direction.
static const char *decline_f64(const gk_plan *plan) {
  return plan->desc.dtype == GK_F64 ? "toy takes no f64" : NULL;
}
static int inits, finis;
static gk_status count_init(gk_plan *plan) {
  inits++;
  plan->state = &inits;
  return GK_SUCCESS;
}
static void count_fini(gk_plan *plan) { finis += plan->state == &inits; }
// toy_picky says what it computes itself (the others take the backend's:
// ref's).
static void picky_precision(const gk_plan *plan, gk_plan_info *info) {
  (void)plan;
  info->math = "f64 math on the toy device";
  info->accumulator = GK_F64;
  info->deterministic = 1;
}
static const gk_kernel toy_picky = {.name = "toy_picky", .backend = TOY_ID, .decline = decline_f64,
                                    .workspace = toy_workspace, .run = toy_run, .precision = picky_precision};
static const gk_kernel toy_counted = {.name = "toy_counted", .backend = TOY_ID, .workspace = toy_workspace,
                                      .run = toy_run, .init = count_init, .fini = count_fini};
static const gk_kernel toy_kernel = {.name = "toy", .backend = TOY_ID, .workspace = toy_workspace, .run = toy_run};
static const gk_kernel *const relu_fwd[] = {&toy_picky, &toy_counted, NULL};
static const gk_kernel *const every_op[] = {&toy_kernel, NULL};

static const char *absent(void) { return "no toy device in this process"; }

// The toy backend and "absent" (registered, but with no device).
static gk_backend_table toy_backend = {.name = "toy", .id = TOY_ID, .device = TOY_DEVICE, .buffer_alloc = toy_alloc,
                                       .buffer_free = toy_free, .buffer_upload = toy_upload,
                                       .buffer_download = toy_download};
static gk_backend_table absent_backend;

static inline gk_status toy_backend_register(void) {
  toy_backend.precision = gk_ref_backend.precision;
  for (int op = 0; op < GK_OP_COUNT_; op++)
    for (int dir = 0; dir < 2; dir++) toy_backend.kernels[op][dir] = every_op;
  toy_backend.kernels[GK_OP_RELU][GK_FORWARD] = relu_fwd;
  gk_status s = gk_backend_register(&toy_backend);
  if (s != GK_SUCCESS) return s;
  absent_backend = toy_backend;
  absent_backend.name = "absent";
  absent_backend.id = ABSENT_ID;
  absent_backend.unavailable = absent;
  return gk_backend_register(&absent_backend);
}

#endif
