// The backend registry and device memory: the built-in backends listed in
// preference order; a third backend added at run time ("toy": the reference
// kernels behind device buffers of its own, on a device type of its own) is
// selected by naming it, declines with reasons that the plan reports, builds
// and frees per-plan state, runs on tensors in its buffers (uploaded and
// downloaded through the API), and gets the core's checks (device, buffer
// bounds, index values) without any core edit; an unavailable backend is
// listed with its reason and selects nothing.
#include "harness.h"
#include "toy_backend.h"

// ---------------------------------------------------------------- helpers

// A tensor of `shape` at byte `offset` of buf.
static gk_tensor in_buffer(const gk_buffer *buf, size_t offset, gk_dtype dt, int rank, const int64_t *shape) {
  gk_tensor t;
  gk_tensor_init(&t, (char *)gk_buffer_address(buf) + offset, dt, rank, shape);
  t.device = TOY_DEVICE;
  return t;
}

static void test_registry(void) {
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  // cpu, ref, then vulkan when the library was built with it.
  int builtin = 2 + (gk_backend_find(GK_BACKEND_VULKAN) != NULL);
  check(n == builtin && !strcmp(list[0]->name, "cpu") && !strcmp(list[1]->name, "ref") &&
            (builtin == 2 || !strcmp(list[2]->name, "vulkan")),
        "built-in backends: %d, want cpu, ref (and vulkan)", n);
  check(toy_backend_register() == GK_SUCCESS, "register toy and absent: %s", gk_last_error());
  toy_backend.kernels[GK_OP_MATMUL][GK_FORWARD] = NULL;  // here toy has no matmul forward
  check(gk_backend_register(&toy_backend) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "already taken by 'toy'"),
        "a second backend with toy's id: %s", gk_last_error());

  check(gk_backend_count() == builtin + 2, "gk_backend_count = %d, want %d", gk_backend_count(), builtin + 2);
  gk_backend_info bi;
  check(gk_backend_get(builtin, &bi) == GK_SUCCESS && bi.id == TOY_ID && !strcmp(bi.name, "toy") &&
            bi.device == TOY_DEVICE && bi.available && !strcmp(bi.reason, ""),
        "gk_backend_get(%d): %s", builtin, bi.name);
  check(gk_backend_get(builtin + 1, &bi) == GK_SUCCESS && !bi.available && strstr(bi.reason, "no toy device"),
        "gk_backend_get(%d): available %d, reason '%s'", builtin + 1, bi.available, bi.reason);
  check(gk_backend_get(builtin + 2, &bi) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "index = "),
        "gk_backend_get(%d): %s", builtin + 2, gk_last_error());
  check(!strcmp(gk_backend_name(TOY_ID), "toy"), "gk_backend_name(%d) = %s", (int)TOY_ID, gk_backend_name(TOY_ID));
  gk_buffer *b = NULL;
  check(gk_buffer_alloc(ABSENT_ID, 64, &b) == GK_ERR_UNSUPPORTED && strstr(gk_last_error(), "no toy device"),
        "a buffer of the absent backend: %s", gk_last_error());
}

// Selection: auto keeps the CPU kernel; naming toy walks toy's list.
static void test_selection(void) {
  int64_t shape[2] = {3, 5};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_RELU, GK_FORWARD, GK_F64, 2, shape);
  gk_plan *plan = NULL;
  gk_plan_info pi;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "auto relu: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(pi.backend == GK_BACKEND_CPU, "auto relu chose backend %d", (int)pi.backend);
  gk_plan_destroy(plan);

  d.backend = TOY_ID;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy relu f64: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(!strcmp(pi.kernel, "relu_fwd__toy_counted") && !strcmp(pi.declined, "toy/toy_picky: toy takes no f64") &&
            !strcmp(pi.math, "f64 math") && inits == 1,
        "toy relu f64: kernel %s, declined '%s', inits %d", pi.kernel, pi.declined, inits);
  gk_plan_destroy(plan);
  check(finis == 1, "fini ran %d times, want 1", finis);

  d.dtype = GK_F32;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy relu f32: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(!strcmp(pi.kernel, "relu_fwd__toy_picky") && !strcmp(pi.declined, "") &&
            !strcmp(pi.math, "f64 math on the toy device"),
        "toy relu f32: %s, math '%s'", pi.kernel, pi.math);
  gk_plan_destroy(plan);
  check(inits == 1 && finis == 1, "a kernel without state: inits %d, finis %d", inits, finis);

  int64_t mshape[2] = {4, 4};
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 2, mshape);
  d.backend = TOY_ID;
  check(gk_plan_create(&d, &plan) == GK_ERR_UNSUPPORTED &&
            strstr(gk_last_error(), "no toy kernel implements matmul forward in f32: toy: has no kernel"),
        "toy matmul: %s", gk_last_error());
  d.backend = ABSENT_ID;
  check(gk_plan_create(&d, &plan) == GK_ERR_UNSUPPORTED &&
            strstr(gk_last_error(), "absent: no toy device in this process"),
        "absent backend: %s", gk_last_error());
}

// Softmax forward and backward on toy buffers against the CPU backend on
// host memory; the device and buffer checks.
static void test_device_memory(void) {
  int64_t shape[2] = {6, 40};
  enum { N = 240 };
  size_t bytes = N * sizeof(float);
  float x[N], dy[N], y_cpu[N], dx_cpu[N], y_toy[N], dx_toy[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)rng_uniform(-3, 3);
    dy[i] = (float)rng_uniform(-1, 1);
  }
  // Host: the CPU backend.
  gk_op_desc f, bw;
  gk_op_desc_init(&f, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 2, shape);
  bw = f;
  bw.direction = GK_BACKWARD;
  gk_plan *pf = NULL, *pb = NULL;
  gk_arg a[3];
  check(gk_plan_create(&f, &pf) == GK_SUCCESS && gk_plan_create(&bw, &pb) == GK_SUCCESS, "cpu softmax: %s",
        gk_last_error());
  a[0] = (gk_arg){GK_ARG_X, {0}};
  a[1] = (gk_arg){GK_ARG_Y, {0}};
  gk_tensor_init(&a[0].tensor, x, GK_F32, 2, shape);
  gk_tensor_init(&a[1].tensor, y_cpu, GK_F32, 2, shape);
  check(gk_plan_run(pf, a, 2, NULL, 0) == GK_SUCCESS, "cpu softmax fwd: %s", gk_last_error());
  a[0] = (gk_arg){GK_ARG_DY, {0}};
  a[2] = (gk_arg){GK_ARG_DX, {0}};
  gk_tensor_init(&a[0].tensor, dy, GK_F32, 2, shape);
  gk_tensor_init(&a[2].tensor, dx_cpu, GK_F32, 2, shape);
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_SUCCESS, "cpu softmax bwd: %s", gk_last_error());
  gk_plan_destroy(pf);
  gk_plan_destroy(pb);

  // Toy: x, y, dy, dx in one buffer at 4 offsets.
  f.backend = bw.backend = TOY_ID;
  check(gk_plan_create(&f, &pf) == GK_SUCCESS && gk_plan_create(&bw, &pb) == GK_SUCCESS, "toy softmax: %s",
        gk_last_error());
  gk_buffer *buf = NULL, *other = NULL;
  check(gk_buffer_alloc(TOY_ID, 4 * bytes, &buf) == GK_SUCCESS && live_buffers == 1, "toy buffer: %s",
        gk_last_error());
  check(gk_buffer_size(buf) == 4 * bytes, "gk_buffer_size = %zu", gk_buffer_size(buf));
  check(gk_buffer_upload(buf, 0, x, bytes) == GK_SUCCESS && gk_buffer_upload(buf, 2 * bytes, dy, bytes) == GK_SUCCESS,
        "upload: %s", gk_last_error());
  check(gk_buffer_upload(buf, 3 * bytes + 4, x, bytes) == GK_ERR_INVALID_VALUE &&
            strstr(gk_last_error(), "past the buffer's"),
        "an upload past the end: %s", gk_last_error());
  a[0] = (gk_arg){GK_ARG_X, in_buffer(buf, 0, GK_F32, 2, shape)};
  a[1] = (gk_arg){GK_ARG_Y, in_buffer(buf, bytes, GK_F32, 2, shape)};
  check(gk_plan_run(pf, a, 2, NULL, 0) == GK_SUCCESS, "toy softmax fwd: %s", gk_last_error());
  a[0] = (gk_arg){GK_ARG_DY, in_buffer(buf, 2 * bytes, GK_F32, 2, shape)};
  a[2] = (gk_arg){GK_ARG_DX, in_buffer(buf, 3 * bytes, GK_F32, 2, shape)};
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_SUCCESS, "toy softmax bwd: %s", gk_last_error());
  check(gk_backend_synchronize(TOY_ID) == GK_SUCCESS, "synchronize: %s", gk_last_error());
  check(gk_buffer_download(buf, bytes, y_toy, bytes) == GK_SUCCESS &&
            gk_buffer_download(buf, 3 * bytes, dx_toy, bytes) == GK_SUCCESS,
        "download: %s", gk_last_error());
  double worst = 0;
  for (int i = 0; i < N; i++) {
    worst = fmax(worst, fabs(y_toy[i] - y_cpu[i]) / (1e-5 + 1e-5 * fabs(y_cpu[i])));
    worst = fmax(worst, fabs(dx_toy[i] - dx_cpu[i]) / (1e-5 + 1e-5 * fabs(dx_cpu[i])));
  }
  check(worst <= 1, "toy softmax against cpu: %.3g tolerances", worst);

  // A tensor reaching past its buffer, one in another buffer's overlap-free
  // range, and a host pointer are refused, naming the argument.
  a[2].tensor = in_buffer(buf, 3 * bytes + 4, GK_F32, 2, shape);
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_ERR_BAD_DEVICE && strstr(gk_last_error(), "'dx'") &&
            strstr(gk_last_error(), "does not lie within one buffer of backend 'toy'"),
        "dx past the buffer: %s", gk_last_error());
  check(gk_buffer_alloc(TOY_ID, bytes, &other) == GK_SUCCESS, "second buffer: %s", gk_last_error());
  a[2].tensor = in_buffer(other, 0, GK_F32, 2, shape);
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_SUCCESS, "dx in a second buffer: %s", gk_last_error());
  gk_tensor_init(&a[2].tensor, dx_toy, GK_F32, 2, shape);
  a[2].tensor.device = TOY_DEVICE;
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_ERR_BAD_DEVICE, "dx in host memory on the toy device: %s",
        gk_last_error());
  a[2].tensor.device = GK_DEVICE_CPU;
  check(gk_plan_run(pb, a, 3, NULL, 0) == GK_ERR_BAD_DEVICE && strstr(gk_last_error(), "'dx' is on device 0"),
        "a host tensor on the toy plan: %s", gk_last_error());
  gk_buffer_free(other);
  gk_buffer_free(buf);
  check(live_buffers == 0, "%d toy buffers left after gk_buffer_free", live_buffers);
  gk_plan_destroy(pf);
  gk_plan_destroy(pb);

  // A host backend's buffer is host memory at its own address.
  check(gk_buffer_alloc(GK_BACKEND_CPU, 100, &buf) == GK_SUCCESS && (uintptr_t)gk_buffer_address(buf) % 64 == 0,
        "cpu buffer: %s", gk_last_error());
  check(gk_buffer_upload(buf, 0, x, 100) == GK_SUCCESS && !memcmp(gk_buffer_address(buf), x, 100), "cpu upload");
  gk_buffer_free(buf);
}

// The core checks index values for every backend, before the kernel runs.
static void test_index_check(void) {
  int64_t ishape[1] = {3}, wshape[2] = {4, 2}, yshape[2] = {3, 2};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 1, ishape);
  d.embedding.num_embeddings = 4;
  d.embedding.dim = 2;
  d.backend = TOY_ID;
  gk_plan *plan = NULL;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy embedding: %s", gk_last_error());
  int64_t idx[3] = {1, 4, 0};
  float w[8] = {0}, out[6];
  for (int i = 0; i < 6; i++) out[i] = 42;
  gk_buffer *buf = NULL;
  gk_buffer_alloc(TOY_ID, 24 + 32 + 24, &buf);
  gk_buffer_upload(buf, 0, idx, 24);
  gk_buffer_upload(buf, 24, w, 32);
  gk_buffer_upload(buf, 56, out, 24);
  gk_arg a[3] = {{GK_ARG_INDEX, in_buffer(buf, 0, GK_I64, 1, ishape)},
                 {GK_ARG_WEIGHT, in_buffer(buf, 24, GK_F32, 2, wshape)},
                 {GK_ARG_Y, in_buffer(buf, 56, GK_F32, 2, yshape)}};
  check(gk_plan_run(plan, a, 3, NULL, 0) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "index[1] = 4 is outside 0..3"),
        "toy embedding with a bad index: %s", gk_last_error());
  gk_buffer_download(buf, 56, out, 24);
  check(out[0] == 42, "the bad index wrote y[0] = %g", out[0]);
  gk_buffer_free(buf);
  gk_plan_destroy(plan);
}

int main(void) {
  test_registry();
  test_selection();
  test_device_memory();
  test_index_check();
  return finish("test_backends");
}
