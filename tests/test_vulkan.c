// The Vulkan backend beyond the op comparisons of the plan harness (which
// test_ops, test_transformer and test_mamba run on it with
// GK_TEST_BACKEND=vulkan): it is registered and has a device (else this
// fails with the reason), bad input gets a status and a message and writes
// nothing, runs recorded into one batch see each other's results, results
// are bit-identical run to run, and a count past one dispatch's 65535
// workgroups is covered by the shaders' grid-stride loops. The optimizers
// on Vulkan tensors: AdamW and gradient clipping against the same calls on
// host copies of the data, and their bad input (device_optim.h), with one
// tensor past 65535 workgroups of 256.
#include "device_optim.h"
#include "harness.h"

#include <float.h>
#include <stdint.h>

static gk_tensor vk_tensor(gk_buffer *buf, size_t offset, gk_dtype dt, int rank, const int64_t *shape) {
  gk_tensor t;
  gk_tensor_init(&t, (char *)gk_buffer_address(buf) + offset, dt, rank, shape);
  t.device = GK_DEVICE_VULKAN;
  return t;
}

static gk_plan *plan_of(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, GK_F32, rank, shape);
  d.backend = GK_BACKEND_VULKAN;
  gk_plan *p = NULL;
  check(gk_plan_create(&d, &p) == GK_SUCCESS, "%s plan on vulkan: %s", gk_op_name(op), gk_last_error());
  return p;
}

// The backend is there, with a device.
static bool test_registered(void) {
  for (int i = 0; i < gk_backend_count(); i++) {
    gk_backend_info bi;
    gk_backend_get(i, &bi);
    if (bi.id != GK_BACKEND_VULKAN) continue;
    check(!strcmp(bi.name, "vulkan") && bi.device == GK_DEVICE_VULKAN, "vulkan backend listed as %s", bi.name);
    check(bi.available, "the vulkan backend has no device: %s", bi.reason);
    return bi.available;
  }
  check(false, "the library was built without the vulkan backend");
  return false;
}

// Tensors on the wrong device, a tensor reaching past its buffer, a plan of
// another backend, an allocation past the device's memory: a status and a
// message naming the argument; the output buffer is left as it was.
static void test_bad_input(void) {
  int64_t shape[1] = {100};
  gk_buffer *bx, *by;
  check(gk_buffer_alloc(GK_BACKEND_VULKAN, 400, &bx) == GK_SUCCESS, "alloc: %s", gk_last_error());
  check(gk_buffer_alloc(GK_BACKEND_VULKAN, 400, &by) == GK_SUCCESS, "alloc: %s", gk_last_error());
  float host[100], canary[100], back[100];
  for (int i = 0; i < 100; i++) {
    host[i] = (float)i - 50;
    canary[i] = 12345.0f;
  }
  gk_buffer_upload(bx, 0, host, sizeof host);
  gk_buffer_upload(by, 0, canary, sizeof canary);
  gk_plan *p = plan_of(GK_OP_RELU, GK_FORWARD, 1, shape);
  gk_tensor x = vk_tensor(bx, 0, GK_F32, 1, shape), y = vk_tensor(by, 0, GK_F32, 1, shape), hx;
  gk_tensor_init(&hx, host, GK_F32, 1, shape);

  gk_arg on_host[2] = {{GK_ARG_X, hx}, {GK_ARG_Y, y}};
  gk_status s = gk_plan_run(p, on_host, 2, NULL, 0);
  check(s == GK_ERR_BAD_DEVICE && strstr(gk_last_error(), "'x'"), "host x on a vulkan plan: %s (%s)",
        gk_status_string(s), gk_last_error());

  // 100 floats from byte 4 of a 400-byte buffer: one past its end.
  gk_tensor past = vk_tensor(bx, 4, GK_F32, 1, shape);
  gk_arg too_small[2] = {{GK_ARG_X, past}, {GK_ARG_Y, y}};
  s = gk_plan_run(p, too_small, 2, NULL, 0);
  check(s != GK_SUCCESS && strstr(gk_last_error(), "'x'"), "x past its buffer: %s (%s)", gk_status_string(s),
        gk_last_error());

  // A vulkan tensor handed to a cpu plan.
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_RELU, GK_FORWARD, GK_F32, 1, shape);
  d.backend = GK_BACKEND_CPU;
  gk_plan *cpu;
  check(gk_plan_create(&d, &cpu) == GK_SUCCESS, "cpu plan: %s", gk_last_error());
  gk_arg to_cpu[2] = {{GK_ARG_X, x}, {GK_ARG_Y, y}};
  s = gk_plan_run(cpu, to_cpu, 2, NULL, 0);
  check(s == GK_ERR_BAD_DEVICE, "vulkan x on a cpu plan: %s (%s)", gk_status_string(s), gk_last_error());
  gk_plan_destroy(cpu);

  check(gk_buffer_download(by, 0, back, sizeof back) == GK_SUCCESS && !memcmp(back, canary, sizeof back),
        "a rejected run wrote to y");

  // A buffer far past any device's memory.
  gk_buffer *huge = NULL;
  s = gk_buffer_alloc(GK_BACKEND_VULKAN, (size_t)1 << 50, &huge);
  check(s == GK_ERR_OUT_OF_MEMORY && huge == NULL && strlen(gk_last_error()) > 0, "a 2^50-byte buffer: %s (%s)",
        gk_status_string(s), gk_last_error());

  // The plan runs on good tensors after all that.
  gk_arg good[2] = {{GK_ARG_X, x}, {GK_ARG_Y, y}};
  check(gk_plan_run(p, good, 2, NULL, 0) == GK_SUCCESS, "relu: %s", gk_last_error());
  gk_buffer_download(by, 0, back, sizeof back);
  bool ok = true;
  for (int i = 0; i < 100; i++) ok &= back[i] == (host[i] > 0 ? host[i] : 0);
  check(ok, "relu on vulkan after the rejected runs");
  gk_plan_destroy(p);
  gk_buffer_free(bx);
  gk_buffer_free(by);
}

// Three dependent runs recorded into one batch (no synchronize between
// them), one download at the end: y = silu(relu(x) + x).
static void test_batched_runs(void) {
  enum { N = 3000 };
  int64_t shape[1] = {N};
  gk_buffer *bx, *bt, *bu, *by;
  gk_buffer_alloc(GK_BACKEND_VULKAN, N * 4, &bx);
  gk_buffer_alloc(GK_BACKEND_VULKAN, N * 4, &bt);
  gk_buffer_alloc(GK_BACKEND_VULKAN, N * 4, &bu);
  gk_buffer_alloc(GK_BACKEND_VULKAN, N * 4, &by);
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)rng_uniform(-3, 3);
  gk_buffer_upload(bx, 0, x, sizeof x);
  gk_tensor tx = vk_tensor(bx, 0, GK_F32, 1, shape), tt = vk_tensor(bt, 0, GK_F32, 1, shape),
            tu = vk_tensor(bu, 0, GK_F32, 1, shape), ty = vk_tensor(by, 0, GK_F32, 1, shape);
  gk_plan *relu = plan_of(GK_OP_RELU, GK_FORWARD, 1, shape), *add = plan_of(GK_OP_ADD, GK_FORWARD, 1, shape),
          *silu = plan_of(GK_OP_SILU, GK_FORWARD, 1, shape);
  gk_arg a1[2] = {{GK_ARG_X, tx}, {GK_ARG_Y, tt}};
  gk_arg a2[3] = {{GK_ARG_A, tt}, {GK_ARG_B, tx}, {GK_ARG_Y, tu}};
  gk_arg a3[2] = {{GK_ARG_X, tu}, {GK_ARG_Y, ty}};
  check(gk_plan_run(relu, a1, 2, NULL, 0) == GK_SUCCESS && gk_plan_run(add, a2, 3, NULL, 0) == GK_SUCCESS &&
            gk_plan_run(silu, a3, 2, NULL, 0) == GK_SUCCESS,
        "batched runs: %s", gk_last_error());
  check(gk_buffer_download(by, 0, y, sizeof y) == GK_SUCCESS, "download: %s", gk_last_error());
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double u = (x[i] > 0 ? x[i] : 0) + x[i], want = u / (1 + exp(-u));
    worst = fmax(worst, fabs(y[i] - want) / fmax(fabs(want), 1e-2));
  }
  check(worst < 1e-5, "silu(relu(x) + x) through one batch: rel err %.3g", worst);
  gk_plan_destroy(relu);
  gk_plan_destroy(add);
  gk_plan_destroy(silu);
  gk_buffer_free(bx);
  gk_buffer_free(bt);
  gk_buffer_free(bu);
  gk_buffer_free(by);
}

// LayerNorm backward (row trees, column sums) and linear backward run twice
// give the same bits.
static void test_deterministic(void) {
  int64_t shape[2] = {67, 300};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_LINEAR, GK_BACKWARD, GK_F32, 2, shape);
  d.linear.out_features = 45;
  d.backend = GK_BACKEND_VULKAN;
  gk_plan *p;
  check(gk_plan_create(&d, &p) == GK_SUCCESS, "linear plan: %s", gk_last_error());
  size_t nx = 67 * 300, nw = 45 * 300, ny = 67 * 45;
  gk_buffer *b;
  size_t total = (2 * nx + 2 * nw + ny + 45) * 4;
  gk_buffer_alloc(GK_BACKEND_VULKAN, total, &b);
  float *host = malloc(total);
  for (size_t i = 0; i < total / 4; i++) host[i] = (float)rng_uniform(-1, 1);
  gk_buffer_upload(b, 0, host, total);
  int64_t sw[2] = {45, 300}, sy[2] = {67, 45}, sb[1] = {45};
  size_t o = 0;
  gk_tensor x = vk_tensor(b, o, GK_F32, 2, shape), dx = vk_tensor(b, o += nx * 4, GK_F32, 2, shape);
  gk_tensor w = vk_tensor(b, o += nx * 4, GK_F32, 2, sw), dw = vk_tensor(b, o += nw * 4, GK_F32, 2, sw);
  gk_tensor dy = vk_tensor(b, o += nw * 4, GK_F32, 2, sy), db = vk_tensor(b, o += ny * 4, GK_F32, 1, sb);
  gk_arg args[6] = {{GK_ARG_DY, dy}, {GK_ARG_X, x}, {GK_ARG_WEIGHT, w},
                    {GK_ARG_DX, dx}, {GK_ARG_DWEIGHT, dw}, {GK_ARG_DBIAS, db}};
  float *first = malloc(total), *second = malloc(total);
  check(gk_plan_run(p, args, 6, NULL, 0) == GK_SUCCESS, "linear bwd: %s", gk_last_error());
  gk_buffer_download(b, 0, first, total);
  check(gk_plan_run(p, args, 6, NULL, 0) == GK_SUCCESS, "linear bwd: %s", gk_last_error());
  gk_buffer_download(b, 0, second, total);
  check(!memcmp(first, second, total), "linear backward on vulkan differs between two runs");
  free(first);
  free(second);
  free(host);
  gk_buffer_free(b);
  gk_plan_destroy(p);
}

// More elements than 65535 workgroups of 256 invocations: every one is
// computed (the grid-stride loop), none past the end written.
static void test_past_one_dispatch(void) {
  const int64_t n = 65535LL * 256 + 1000;
  int64_t shape[1] = {n};
  gk_buffer *b;
  check(gk_buffer_alloc(GK_BACKEND_VULKAN, (size_t)(2 * n + 1) * 4, &b) == GK_SUCCESS, "alloc: %s", gk_last_error());
  float *host = malloc((size_t)(2 * n + 1) * 4);
  for (int64_t i = 0; i < 2 * n + 1; i++) host[i] = i < n ? (float)((i % 7) - 3) : -1.0f;
  gk_buffer_upload(b, 0, host, (size_t)(2 * n + 1) * 4);
  gk_plan *p = plan_of(GK_OP_RELU, GK_FORWARD, 1, shape);
  gk_arg args[2] = {{GK_ARG_X, vk_tensor(b, 0, GK_F32, 1, shape)}, {GK_ARG_Y, vk_tensor(b, (size_t)n * 4, GK_F32, 1, shape)}};
  check(gk_plan_run(p, args, 2, NULL, 0) == GK_SUCCESS, "relu of %lld: %s", (long long)n, gk_last_error());
  gk_buffer_download(b, 0, host, (size_t)(2 * n + 1) * 4);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += host[n + i] != (float)((i % 7) > 3 ? (i % 7) - 3 : 0);
  check(bad == 0 && host[2 * n] == -1.0f, "relu of %lld elements: %lld wrong, guard %g", (long long)n, (long long)bad,
        host[2 * n]);
  gk_plan_destroy(p);
  gk_buffer_free(b);
  free(host);
}

int main(void) {
  if (test_registered()) {
    test_bad_input();
    test_batched_runs();
    test_deterministic();
    test_past_one_dispatch();
    device_optim_tests(GK_BACKEND_VULKAN, 65535 * 256 + 1000);
  }
  return finish("test_vulkan");
}
