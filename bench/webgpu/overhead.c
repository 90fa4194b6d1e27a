// The cost of one op on the WebGPU backend beyond its shader: a ReLU
// forward of n elements, run on device buffers (built for WebAssembly by
// make wasm; run with node tests/wasm/webgpu_ops.mjs build/wasm/tests/webgpu_overhead.wasm).
//   issue:       the C and worker side of a run (plan_run: staging and
//                dispatch commands queued, posted to the device thread
//                every 32 dispatches), not waiting
//   queued:      runs issued back to back, one wait at the end, time per run
//                (the device thread's WebGPU calls and the GPU's work included)
//   round trip:  each run followed by gk_backend_synchronize
//   download:    4 bytes read back after a run (map and copy)
// on the same buffers, after a warm-up.
#include "gradkern.h"

#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *what) {
  fprintf(stderr, "webgpu_overhead: %s: %s\n", what, gk_last_error());
  return 1;
}

int main(void) {
  static const int64_t sizes[] = {1, 4096, 1 << 20};
  printf("%10s %10s %10s %12s %14s   (ms per run, ReLU forward on WebGPU)\n", "elements", "issue", "queued",
         "round trip", "download 4 B");
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int64_t n = sizes[s];
    gk_buffer *xb, *yb;
    if (gk_buffer_alloc(GK_BACKEND_WEBGPU, (size_t)n * 4, &xb) || gk_buffer_alloc(GK_BACKEND_WEBGPU, (size_t)n * 4, &yb))
      return fail("gk_buffer_alloc");
    gk_op_desc d;
    gk_op_desc_init(&d, GK_OP_RELU, GK_FORWARD, GK_F32, 1, &n);
    d.backend = GK_BACKEND_WEBGPU;
    gk_plan *plan;
    if (gk_plan_create(&d, &plan)) return fail("gk_plan_create");
    gk_arg args[2] = {{GK_ARG_X, {0}}, {GK_ARG_Y, {0}}};
    gk_tensor_init(&args[0].tensor, gk_buffer_address(xb), GK_F32, 1, &n);
    gk_tensor_init(&args[1].tensor, gk_buffer_address(yb), GK_F32, 1, &n);
    args[0].tensor.device = args[1].tensor.device = GK_DEVICE_WEBGPU;
    int runs = n > 100000 ? 20 : 200;
    for (int i = 0; i < 10; i++) gk_plan_run(plan, args, 2, NULL, 0);
    gk_backend_synchronize(GK_BACKEND_WEBGPU);
    double t0 = now();
    for (int i = 0; i < runs; i++)
      if (gk_plan_run(plan, args, 2, NULL, 0)) return fail("gk_plan_run");
    double issue = (now() - t0) / runs;
    if (gk_backend_synchronize(GK_BACKEND_WEBGPU)) return fail("gk_backend_synchronize");
    double queued = (now() - t0) / runs;
    t0 = now();
    for (int i = 0; i < runs; i++) {
      gk_plan_run(plan, args, 2, NULL, 0);
      if (gk_backend_synchronize(GK_BACKEND_WEBGPU)) return fail("gk_backend_synchronize");
    }
    double trip = (now() - t0) / runs;
    float v;
    t0 = now();
    for (int i = 0; i < runs; i++) {
      gk_plan_run(plan, args, 2, NULL, 0);
      if (gk_buffer_download(yb, 0, &v, 4)) return fail("gk_buffer_download");
    }
    double down = (now() - t0) / runs;
    printf("%10lld %10.3f %10.3f %12.3f %14.3f\n", (long long)n, issue * 1e3, queued * 1e3, trip * 1e3, down * 1e3);
    gk_plan_destroy(plan);
    gk_buffer_free(xb);
    gk_buffer_free(yb);
  }
  return 0;
}
