// The backend registry: the built-in backends listed in preference order;
// a third backend added at run time (the reference kernels under the name
// "toy", on a device type of its own) is selected by naming it, declines
// with reasons that the plan reports, builds and frees per-plan state, and
// gets the core's checks (device, index values) without any core edit; an
// unavailable backend is listed with its reason and selects nothing.
#include "core/internal.h"
#include "harness.h"

extern const gk_backend_table gk_ref_backend;

#define TOY_ID ((gk_backend)7)
#define ABSENT_ID ((gk_backend)8)
#define TOY_DEVICE ((gk_device_type)5)

// A kernel that takes no f64 description, tried before the ref kernel.
static const char *decline_f64(const gk_plan *plan) {
  return plan->desc.dtype == GK_F64 ? "toy takes no f64" : NULL;
}
static gk_status never_run(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)plan, (void)a, (void)ws;
  return gk_fail(GK_ERR_INTERNAL, "toy_f32: ran");
}
static const gk_kernel toy_picky = {.name = "toy_picky", .backend = TOY_ID, .decline = decline_f64,
                                    .run = never_run};

// The ref relu kernel with per-plan state: init and fini are counted.
static int inits, finis;
static gk_status count_init(gk_plan *plan) {
  inits++;
  plan->state = &inits;
  return GK_SUCCESS;
}
static void count_fini(gk_plan *plan) {
  finis += plan->state == &inits;
}

static const char *absent(void) { return "no toy device in this process"; }

int main(void) {
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  check(n == 2 && !strcmp(list[0]->name, "cpu") && !strcmp(list[1]->name, "ref"),
        "built-in backends: %d, want cpu then ref", n);

  // The toy backend: ref's kernels on device TOY_DEVICE; for relu f64
  // forward a kernel that declines first, then ref's with counted state.
  static gk_backend_table toy;
  toy = gk_ref_backend;
  toy.name = "toy";
  toy.id = TOY_ID;
  toy.device = TOY_DEVICE;
  static gk_kernel counted;
  counted = *gk_ref_backend.kernels[GK_OP_RELU][GK_FORWARD][0];
  counted.init = count_init;
  counted.fini = count_fini;
  static const gk_kernel *relu_fwd[3] = {&toy_picky, &counted, NULL};
  toy.kernels[GK_OP_RELU][GK_FORWARD] = relu_fwd;
  toy.kernels[GK_OP_MATMUL][GK_FORWARD] = NULL;
  check(gk_backend_register(&toy) == GK_SUCCESS, "register toy: %s", gk_last_error());
  check(gk_backend_register(&toy) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "already taken by 'toy'"),
        "a second backend with toy's id: %s", gk_last_error());
  static gk_backend_table missing;
  missing = toy;
  missing.name = "absent";
  missing.id = ABSENT_ID;
  missing.unavailable = absent;
  check(gk_backend_register(&missing) == GK_SUCCESS, "register absent: %s", gk_last_error());

  check(gk_backend_count() == 4, "gk_backend_count = %d, want 4", gk_backend_count());
  gk_backend_info bi;
  check(gk_backend_get(2, &bi) == GK_SUCCESS && bi.id == TOY_ID && !strcmp(bi.name, "toy") &&
            bi.device == TOY_DEVICE && bi.available && !strcmp(bi.reason, ""),
        "gk_backend_get(2): %s", bi.name);
  check(gk_backend_get(3, &bi) == GK_SUCCESS && !bi.available && strstr(bi.reason, "no toy device"),
        "gk_backend_get(3): available %d, reason '%s'", bi.available, bi.reason);
  check(gk_backend_get(4, &bi) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "index = 4"),
        "gk_backend_get(4): %s", gk_last_error());
  check(!strcmp(gk_backend_name(TOY_ID), "toy"), "gk_backend_name(%d) = %s", TOY_ID, gk_backend_name(TOY_ID));

  // auto still picks the CPU kernel; naming toy picks toy's.
  int64_t shape[2] = {3, 5};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_RELU, GK_FORWARD, GK_F64, 2, shape);
  gk_plan *plan;
  gk_plan_info pi;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "auto relu: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(pi.backend == GK_BACKEND_CPU, "auto relu chose backend %d", (int)pi.backend);
  gk_plan_destroy(plan);

  d.backend = TOY_ID;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy relu f64: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(pi.backend == GK_BACKEND_REF && !strcmp(pi.declined, "toy/toy_picky: toy takes no f64") &&
            !strcmp(pi.math, "f64 math") && inits == 1,
        "toy relu f64: kernel %s, declined '%s', inits %d", pi.kernel, pi.declined, inits);

  // The toy plan runs on toy-device tensors (ref's kernels read them as
  // host memory); a host tensor is refused, naming the argument.
  double x[15], y[15], want[15];
  for (int i = 0; i < 15; i++) {
    x[i] = i - 7.5;
    want[i] = x[i] > 0 ? x[i] : 0;
  }
  gk_arg args[2];
  gk_tensor_init(&args[0].tensor, x, GK_F64, 2, shape);
  gk_tensor_init(&args[1].tensor, y, GK_F64, 2, shape);
  args[0].kind = GK_ARG_X;
  args[1].kind = GK_ARG_Y;
  check(gk_plan_run(plan, args, 2, NULL, 0) == GK_ERR_BAD_DEVICE && strstr(gk_last_error(), "'x' is on device 0"),
        "host tensors on the toy plan: %s", gk_last_error());
  args[0].tensor.device = args[1].tensor.device = TOY_DEVICE;
  check(gk_plan_run(plan, args, 2, NULL, 0) == GK_SUCCESS && !memcmp(y, want, sizeof y), "toy relu run: %s",
        gk_last_error());
  gk_plan_destroy(plan);
  check(finis == 1, "fini ran %d times, want 1", finis);

  // f32: toy_picky takes it (and its run reports itself).
  d.dtype = GK_F32;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy relu f32: %s", gk_last_error());
  gk_plan_get_info(plan, &pi);
  check(!strcmp(pi.kernel, "relu_fwd__toy_picky") && !strcmp(pi.declined, ""), "toy relu f32: %s", pi.kernel);
  gk_plan_destroy(plan);
  check(inits == 1 && finis == 1, "a kernel without state: inits %d, finis %d", inits, finis);

  // No kernel: every reason is in the message.
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

  // The core checks index values for every backend, before the kernel runs.
  int64_t ishape[1] = {3};
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 1, ishape);
  d.embedding.num_embeddings = 4;
  d.embedding.dim = 2;
  d.backend = TOY_ID;
  check(gk_plan_create(&d, &plan) == GK_SUCCESS, "toy embedding: %s", gk_last_error());
  int64_t idx[3] = {1, 4, 0}, wshape[2] = {4, 2}, yshape[2] = {3, 2};
  float w[8] = {0}, out[6];
  for (int i = 0; i < 6; i++) out[i] = 42;
  gk_arg eargs[3];
  gk_tensor_init(&eargs[0].tensor, idx, GK_I64, 1, ishape);
  gk_tensor_init(&eargs[1].tensor, w, GK_F32, 2, wshape);
  gk_tensor_init(&eargs[2].tensor, out, GK_F32, 2, yshape);
  eargs[0].kind = GK_ARG_INDEX;
  eargs[1].kind = GK_ARG_WEIGHT;
  eargs[2].kind = GK_ARG_Y;
  for (int i = 0; i < 3; i++) eargs[i].tensor.device = TOY_DEVICE;
  check(gk_plan_run(plan, eargs, 3, NULL, 0) == GK_ERR_INVALID_VALUE &&
            strstr(gk_last_error(), "index[1] = 4 is outside 0..3") && out[0] == 42,
        "toy embedding with a bad index: %s", gk_last_error());
  gk_plan_destroy(plan);
  return finish("test_backends");
}
