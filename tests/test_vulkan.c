// The Vulkan backend beyond the op comparisons of the plan harness (which
// test_ops, test_transformer and test_mamba run on it with
// GK_TEST_BACKEND=vulkan): it is registered and has a device (else this
// fails with the reason), bad input gets a status and a message and writes
// nothing, runs recorded into one batch see each other's results, results
// are bit-identical run to run, and a count past one dispatch's 65535
// workgroups is covered by the shaders' grid-stride loops, the products
// (linear, matmul) give the same bits with and without subgroup operations,
// at every subgroup size the driver can be made to use. The optimizers
// on Vulkan tensors: AdamW and gradient clipping against the same calls on
// host copies of the data, and their bad input (device_optim.h), with one
// tensor past 65535 workgroups of 256.
#define _POSIX_C_SOURCE 200809L  // posix_spawn, pipe, setenv (the --products runs)
#include "device_optim.h"
#include "harness.h"

#include <float.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

// ---------------------------------------------------------------- products, plain and with subgroups

// Run d on the Vulkan device with every argument (outputs too, for an
// accumulating gradient) filled from one fixed sequence; append every
// argument's bits after the run to out.
static void product_bits(const gk_op_desc *desc, FILE *out) {
  gk_op_desc d = *desc;
  d.backend = GK_BACKEND_VULKAN;
  gk_plan *p;
  if (gk_plan_create(&d, &p) != GK_SUCCESS) {
    check(false, "%s plan: %s", gk_op_name(d.op), gk_last_error());
    return;
  }
  gk_arg args[GK_ARG_COUNT_];
  gk_buffer *bufs[GK_ARG_COUNT_];
  size_t bytes[GK_ARG_COUNT_];
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK], numel = 1;
    gk_plan_arg_shape(p, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    for (int i = 0; i < rank; i++) numel *= shape[i];
    bytes[n] = (size_t)(numel ? numel : 1) * 4;
    float *host = malloc(bytes[n]);
    for (int64_t i = 0; i < numel; i++) host[i] = (float)rng_uniform(-1, 1);
    check(gk_buffer_alloc(GK_BACKEND_VULKAN, bytes[n], &bufs[n]) == GK_SUCCESS, "alloc: %s", gk_last_error());
    gk_buffer_upload(bufs[n], 0, host, bytes[n]);
    free(host);
    args[n] = (gk_arg){(gk_arg_kind)k, vk_tensor(bufs[n], 0, GK_F32, rank, shape)};
    n++;
  }
  check(gk_plan_run(p, args, n, NULL, 0) == GK_SUCCESS, "%s %s: %s", gk_op_name(d.op),
        d.direction == GK_FORWARD ? "forward" : "backward", gk_last_error());
  for (int i = 0; i < n; i++) {
    void *host = malloc(bytes[i]);
    check(gk_buffer_download(bufs[i], 0, host, bytes[i]) == GK_SUCCESS, "download: %s", gk_last_error());
    fwrite(host, 1, bytes[i], out);
    free(host);
    gk_buffer_free(bufs[i]);
  }
  gk_plan_destroy(p);
}

// What `test_vulkan --products` writes to stdout: the device's line, then
// the bits of the products of linear and matmul, forward and backward, at
// sizes that are not multiples of the 64x64 tile or of the 16-deep slice,
// with bias (forward), accumulation, transposed operands, batches and a
// shared B.
static int products_child(void) {
  printf("%s\n", gk_backend_device_description(GK_BACKEND_VULKAN));
  rng_state = 1;
  int64_t x2[2] = {67, 300}, x3[3] = {2, 70, 130};
  for (int dir = 0; dir < 2; dir++) {
    gk_op_desc d;
    gk_op_desc_init(&d, GK_OP_LINEAR, dir ? GK_BACKWARD : GK_FORWARD, GK_F32, 2, x2);
    d.linear.out_features = 45;
    d.linear.has_bias = !dir;  // dbias is a reduction (the reduce shader), not a product
    d.accumulate = dir;
    product_bits(&d, stdout);
    gk_op_desc_init(&d, GK_OP_LINEAR, dir ? GK_BACKWARD : GK_FORWARD, GK_F32, 3, x3);
    d.linear.out_features = 150;
    d.linear.has_bias = 0;
    product_bits(&d, stdout);
  }
  static const struct { int rank; int64_t shape[4]; int64_t n; int ta, tb, shared; } mm[] = {
      {3, {3, 70, 37}, 90, 0, 0, 0}, {3, {3, 37, 70}, 90, 1, 0, 0}, {3, {3, 70, 37}, 90, 0, 1, 0},
      {3, {3, 70, 37}, 90, 0, 0, 1}, {3, {2, 37, 129}, 65, 1, 1, 1}, {4, {2, 2, 65, 17}, 66, 0, 0, 0}};
  for (size_t c = 0; c < sizeof mm / sizeof *mm; c++)
    for (int dir = 0; dir < 2; dir++) {
      gk_op_desc d;
      gk_op_desc_init(&d, GK_OP_MATMUL, dir ? GK_BACKWARD : GK_FORWARD, GK_F32, mm[c].rank, mm[c].shape);
      d.matmul.n = mm[c].n;
      d.matmul.trans_a = mm[c].ta;
      d.matmul.trans_b = mm[c].tb;
      d.matmul.shared_b = mm[c].shared;
      product_bits(&d, stdout);
    }
  fflush(stdout);
  return t_failed ? 1 : 0;
}

// `self --products` run with GK_VULKAN_SUBGROUPS and LP_NATIVE_VECTOR_WIDTH
// (lavapipe's vector width: its subgroup size is width / 32; NULL: unset)
// as given; its output (malloc'd) in *out, its size returned; 0 on failure.
static size_t products_run(const char *self, const char *subgroups, const char *width, char **out) {
  const char *names[2] = {"GK_VULKAN_SUBGROUPS", "LP_NATIVE_VECTOR_WIDTH"}, *values[2] = {subgroups, width};
  char *saved[2];
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(names[i]);
    saved[i] = v ? strdup(v) : NULL;
    if (values[i]) setenv(names[i], values[i], 1);
    else unsetenv(names[i]);
  }
  int fd[2];
  pid_t pid = -1;
  size_t n = 0, cap = 1 << 20;
  *out = malloc(cap);
  if (pipe(fd) == 0) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    char *argv[3] = {(char *)self, "--products", NULL};
    if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    ssize_t got;
    while ((got = read(fd[0], *out + n, cap - n)) > 0)
      if ((n += (size_t)got) == cap) *out = realloc(*out, cap *= 2);
    close(fd[0]);
  }
  for (int i = 0; i < 2; i++) {
    if (saved[i]) setenv(names[i], saved[i], 1);
    else unsetenv(names[i]);
    free(saved[i]);
  }
  int status = 0;
  bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  check(ok, "test_vulkan --products with GK_VULKAN_SUBGROUPS=%s LP_NATIVE_VECTOR_WIDTH=%s failed", subgroups,
        width ? width : "(unset)");
  return ok ? n : 0;
}

// The products with the plain gemm and with its subgroup build, at the
// driver's subgroup size and (lavapipe) at 4 and 16: the same bits, and the
// same as the ref backend's within the tolerance (test_transformer does
// that, both ways).
static void test_products_subgroups(const char *self) {
  char *plain, *sg;
  size_t n = products_run(self, "0", NULL, &plain);
  static const char *const widths[] = {NULL, "128", "512"};
  for (int w = 0; w < 3 && n; w++) {
    size_t m = products_run(self, "1", widths[w], &sg);
    char *line = memchr(sg, '\n', m), *plain_line = memchr(plain, '\n', n);
    if (m && line && plain_line) {
      *line = 0;
      bool quads = strstr(sg, "products by quad broadcasts") != NULL;
      size_t head = (size_t)(line + 1 - sg), plain_head = (size_t)(plain_line + 1 - plain);
      bool same = m - head == n - plain_head && !memcmp(line + 1, plain_line + 1, m - head);
      const char *size = strstr(sg, "subgroups of");
      int len = size ? (int)strcspn(size, "(") : 0;
      while (len && size[len - 1] == ' ') len--;
      printf("products, plain vs %.*s: %s\n", len, size ? size : "", !quads ? "not compared (no subgroup products)"
                                                             : same ? "bit-identical" : "DIFFERENT");
      if (quads) check(same, "products with subgroups (%s) differ from the plain ones", sg);
    }
    free(sg);
  }
  free(plain);
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

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--products")) return products_child();
  if (test_registered()) {
    test_products_subgroups(argv[0]);
    test_bad_input();
    test_batched_runs();
    test_deterministic();
    test_past_one_dispatch();
    device_optim_tests(GK_BACKEND_VULKAN, 65535 * 256 + 1000);
  }
  return finish("test_vulkan");
}
