// The Vulkan backend beyond the op comparisons of the plan harness (which
// test_ops, test_transformer and test_mamba run on it with
// GK_TEST_BACKEND=vulkan): it is registered and has a device (else this
// fails with the reason), bad input gets a status and a message and writes
// nothing, runs recorded into one batch see each other's results, results
// are bit-identical run to run, and a count past one dispatch's 65535
// workgroups is covered by the shaders' grid-stride loops. The optimizers
// on Vulkan tensors: AdamW and gradient clipping against the same calls on
// host copies of the data, and their bad input.
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

// ---------------------------------------------------------------- optimizers

// A tensor in a vulkan buffer of its own and its twin on the host
// (contiguous), holding the same values. Where it lies in its buffer:
// contiguous at offset 0 (bound in place), contiguous 4 bytes in (not at a
// descriptor's alignment: gathered and scattered), or transposed (rank 2,
// column-major: gathered and scattered). The buffer's other words hold
// FILLER, which no call may change.
typedef enum place { IN_PLACE, UNALIGNED, COLUMN_MAJOR } place;
typedef struct twin {
  gk_buffer *buf;
  size_t words;  // of the buffer
  gk_tensor dev, host;
  int64_t numel;
} twin;
#define FILLER (-7777.0f)

static twin twin_make(gk_dtype dt, int rank, const int64_t *shape, place where) {
  twin t;
  gk_tensor_init(&t.host, NULL, dt, rank, shape);
  t.numel = gk_tensor_numel(&t.host);
  t.host.data = calloc((size_t)(t.numel ? t.numel : 1), gk_dtype_size(dt));
  size_t offset = where == UNALIGNED ? 4 : 0;
  t.words = (size_t)t.numel * gk_dtype_size(dt) / 4 + 2;
  check(gk_buffer_alloc(GK_BACKEND_VULKAN, t.words * 4, &t.buf) == GK_SUCCESS, "alloc: %s", gk_last_error());
  t.dev = vk_tensor(t.buf, offset, dt, rank, shape);
  if (where == COLUMN_MAJOR) {
    t.dev.strides[0] = 1;
    t.dev.strides[1] = shape[0];
  }
  return t;
}

static void twin_free(twin *t) {
  gk_buffer_free(t->buf);
  free(t->host.data);
}

// Word index in the buffer of element i (row-major) of an f32 device tensor.
static int64_t word_of(const twin *t, int64_t i) {
  int64_t w = ((char *)t->dev.data - (char *)gk_buffer_address(t->buf)) / 4;
  for (int k = t->dev.rank - 1; k >= 0; k--) {
    w += i % t->dev.shape[k] * t->dev.strides[k];
    i /= t->dev.shape[k];
  }
  return w;
}

// The host values (f32) into the device tensor, FILLER around them.
static void twin_upload(twin *t) {
  float *image = malloc(t->words * 4);
  for (size_t w = 0; w < t->words; w++) image[w] = FILLER;
  for (int64_t i = 0; i < t->numel; i++) image[word_of(t, i)] = ((float *)t->host.data)[i];
  check(gk_buffer_upload(t->buf, 0, image, t->words * 4) == GK_SUCCESS, "upload: %s", gk_last_error());
  free(image);
}

// The device tensor's values (f32, row-major) into out; false when a word
// outside it is no longer FILLER.
static bool twin_download(const twin *t, float *out) {
  float *image = malloc(t->words * 4);
  check(gk_buffer_download(t->buf, 0, image, t->words * 4) == GK_SUCCESS, "download: %s", gk_last_error());
  bool filler = true;
  for (int64_t i = 0; i < t->numel; i++) {
    out[i] = image[word_of(t, i)];
    image[word_of(t, i)] = FILLER;
  }
  for (size_t w = 0; w < t->words; w++) filler &= image[w] == FILLER;
  free(image);
  return filler;
}

// The largest relative error of the device tensor against its twin,
// |dev - host| / |host| elementwise, or / max |host| (normwise); -1 when a
// word around it changed.
static double twin_error(const twin *t, bool normwise) {
  float *d = malloc((size_t)(t->numel ? t->numel : 1) * 4);
  const float *h = t->host.data;
  double worst = twin_download(t, d) ? 0 : -1, floor = 1e-30;
  for (int64_t i = 0; normwise && i < t->numel; i++) floor = fmax(floor, fabs(h[i]));
  for (int64_t i = 0; worst >= 0 && i < t->numel; i++)
    worst = fmax(worst, fabs((double)d[i] - h[i]) / fmax(fabs(h[i]), floor));
  free(d);
  return worst;
}

// Whether the device tensor holds exactly the bits of `want` (row-major),
// its surroundings untouched.
static bool twin_bits(const twin *t, const float *want) {
  float *d = malloc((size_t)(t->numel ? t->numel : 1) * 4);
  bool same = twin_download(t, d) && !memcmp(d, want, (size_t)t->numel * 4);
  free(d);
  return same;
}

static void twin_fill(twin *t, double lo, double hi) {
  for (int64_t i = 0; i < t->numel; i++) ((float *)t->host.data)[i] = (float)rng_uniform(lo, hi);
  twin_upload(t);
}

// The optimizer lists: odd sizes, one past 65536 elements, an empty one,
// every place; BIG adds one past 65535 workgroups of 256.
enum { NOPT = 7, BIG = 65535 * 256 + 1000 };
static const int opt_rank[NOPT + 1] = {1, 2, 2, 2, 1, 2, 1, 1};
static const int64_t opt_shape[NOPT + 1][2] = {{7}, {3, 5}, {33, 65}, {301, 257}, {0}, {17, 9}, {1001}, {BIG}};
static const place opt_place[NOPT + 1] = {IN_PLACE, COLUMN_MAJOR, IN_PLACE, IN_PLACE,
                                          IN_PLACE, UNALIGNED,    UNALIGNED, IN_PLACE};

typedef struct opt_lists {
  int n;
  twin t[4][NOPT + 1];  // params, grads, exp_avg, exp_avg_sq
  gk_tensor dev[4][NOPT + 1], host[4][NOPT + 1];
} opt_lists;

static void opt_lists_make(opt_lists *o, int n, gk_dtype param_dtype) {
  o->n = n;
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < n; i++) {
      o->t[r][i] = twin_make(r < 2 ? param_dtype : GK_F32, opt_rank[i], opt_shape[i], opt_place[i]);
      o->dev[r][i] = o->t[r][i].dev;
      o->host[r][i] = o->t[r][i].host;
    }
}

static void opt_lists_free(opt_lists *o) {
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < o->n; i++) twin_free(&o->t[r][i]);
}

static double worst_adamw[2][3];  // elementwise, normwise: params, exp_avg, exp_avg_sq

// Five AdamW steps on the device and on the host twins from the same
// parameters and gradients (moments from zero), compared after each step.
// The host's AVX levels contract m + w (g - m) and v beta2 + w2 g g into
// FMAs (one rounding where the shader may round twice), so m and v can
// differ by an ulp per step, and where values cross zero that is no bound
// on the elementwise relative error. Signed data are compared normwise
// (against each tensor's largest entry); positive data (parameters in
// [0.5, 1], gradients in [0.25, 1]: nothing cancels) element by element.
static void test_adamw_case(double weight_decay, double beta1, int n, bool positive) {
  gk_adamw_config c;
  gk_adamw_config_init(&c);
  c.lr = 1e-2;
  c.weight_decay = weight_decay;
  c.beta1 = beta1;
  opt_lists o;
  opt_lists_make(&o, n, GK_F32);
  for (int i = 0; i < n; i++) {
    twin_fill(&o.t[0][i], positive ? 0.5 : -1, 1);
    twin_fill(&o.t[2][i], 0, 0);
    twin_fill(&o.t[3][i], 0, 0);
  }
  double worst[3] = {0};
  for (int64_t step = 1; step <= 5; step++) {
    for (int i = 0; i < n; i++) twin_fill(&o.t[1][i], positive ? 0.25 : -1, 1);
    gk_status s = gk_adamw_step(&c, n, o.dev[0], o.dev[1], o.dev[2], o.dev[3], NULL, step);
    check(s == GK_SUCCESS, "adamw on vulkan, step %lld: %s", (long long)step, gk_last_error());
    s = gk_adamw_step(&c, n, o.host[0], o.host[1], o.host[2], o.host[3], NULL, step);
    check(s == GK_SUCCESS, "adamw on the host, step %lld: %s", (long long)step, gk_last_error());
    for (int r = 0; r < 3; r++)
      for (int i = 0; i < n; i++) {
        double e = twin_error(&o.t[r == 0 ? 0 : r + 1][i], !positive);
        worst[r] = e < 0 || worst[r] < 0 ? -1 : fmax(worst[r], e);
      }
  }
  for (int r = 0; r < 3; r++) worst_adamw[!positive][r] = fmax(worst_adamw[!positive][r], worst[r]);
  check(worst[0] >= 0 && worst[1] >= 0 && worst[2] >= 0 && worst[0] < 1e-6 && worst[1] < 1e-6 && worst[2] < 1e-6,
        "adamw on vulkan (wd %g, beta1 %g, %d tensors, %s) vs the host: largest relative error params %.3g, "
        "exp_avg %.3g, exp_avg_sq %.3g (-1: a word around a tensor changed)", weight_decay, beta1, n,
        positive ? "positive data, elementwise" : "signed data, normwise", worst[0], worst[1], worst[2]);
  opt_lists_free(&o);
}

// Both lerp forms (1 - beta1 < 0.5: m + w (g - m); else g - (g - m)(1 - w)),
// with and without weight decay, on both kinds of data.
static void test_adamw(void) {
  test_adamw_case(0.1, 0.9, NOPT + 1, false);
  test_adamw_case(0, 0.3, NOPT, false);
  test_adamw_case(0.1, 0.3, NOPT, true);
  test_adamw_case(0, 0.9, NOPT, true);
  for (int k = 0; k < 2; k++)
    printf("adamw on vulkan vs the host, 5 steps, %s: largest relative error params %.3g, exp_avg %.3g, exp_avg_sq "
           "%.3g\n", k ? "signed data, normwise" : "positive data, elementwise", worst_adamw[k][0], worst_adamw[k][1],
           worst_adamw[k][2]);
}

// Clipping on the device against the host: the norm, the scaled gradients;
// a max_norm past the norm leaves them bit-identical (and the norm is the
// same bits twice); a non-finite gradient scales nothing.
static void test_clip(void) {
  opt_lists o;
  opt_lists_make(&o, NOPT + 1, GK_F32);
  twin *g = o.t[1];
  float *before[NOPT + 1];
  for (int i = 0; i < o.n; i++) {
    twin_fill(&g[i], -1, 1);
    before[i] = malloc((size_t)(g[i].numel ? g[i].numel : 1) * 4);
    memcpy(before[i], g[i].host.data, (size_t)g[i].numel * 4);
  }
  double dev_norm = 0, dev_again = 1, host_norm = 0;
  gk_status s = gk_clip_grad_norm(o.n, o.dev[1], 1e30, &dev_norm);
  check(s == GK_SUCCESS, "clip on vulkan, max_norm 1e30: %s", gk_last_error());
  s = gk_clip_grad_norm(o.n, o.dev[1], 1e30, &dev_again);
  bool same = true;
  for (int i = 0; i < o.n; i++) same &= twin_bits(&g[i], before[i]);
  check(s == GK_SUCCESS && same && dev_norm == dev_again,
        "clip on vulkan with max_norm past the norm: gradients changed or the norm differs (%.17g, %.17g)", dev_norm,
        dev_again);

  s = gk_clip_grad_norm(o.n, o.dev[1], 1.0, &dev_norm);
  check(s == GK_SUCCESS, "clip on vulkan: %s", gk_last_error());
  check(gk_clip_grad_norm(o.n, o.host[1], 1.0, &host_norm) == GK_SUCCESS, "clip on the host: %s", gk_last_error());
  double norm_err = fabs(dev_norm - host_norm) / host_norm, grad_err = 0;
  for (int i = 0; i < o.n; i++) grad_err = fmax(grad_err, twin_error(&g[i], false));
  printf("clip on vulkan vs the host: norm %.9g vs %.9g, relative error %.3g; scaled gradients, largest relative "
         "error %.3g\n", dev_norm, host_norm, norm_err, grad_err);
  check(norm_err < 1e-5, "clip on vulkan: norm %.17g, the host's %.17g", dev_norm, host_norm);
  check(grad_err >= 0 && grad_err < 1e-6, "clip on vulkan: scaled gradients off by %.3g relative (-1: a word "
        "around a tensor changed)", grad_err);

  // One infinite element in the 4th tensor (one NaN in another run): nothing scaled.
  for (int k = 0; k < 2; k++) {
    ((float *)g[3].host.data)[1234] = k ? NAN : INFINITY;
    twin_upload(&g[3]);
    for (int i = 0; i < o.n; i++) twin_download(&g[i], before[i]);
    s = gk_clip_grad_norm(o.n, o.dev[1], 1.0, &dev_norm);
    char message[512];
    snprintf(message, sizeof message, "%s", gk_last_error());
    same = true;
    for (int i = 0; i < o.n; i++) same &= twin_bits(&g[i], before[i]);
    check(s == GK_ERR_NON_FINITE && !isfinite(dev_norm) && strstr(message, "nothing was scaled") && same,
          "clip on vulkan with a %s gradient: %s (%s), norm %g, gradients %s", k ? "NaN" : "infinite",
          gk_status_string(s), message, dev_norm, same ? "as they were" : "changed");
  }
  for (int i = 0; i < o.n; i++) free(before[i]);
  opt_lists_free(&o);
}

// The bytes of every buffer of the lists, to see that a rejected call wrote nothing.
typedef struct snapshot { unsigned char *bytes[4][NOPT + 1]; } snapshot;
static void snapshot_take(const opt_lists *o, snapshot *sn) {
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < o->n; i++) {
      sn->bytes[r][i] = malloc(o->t[r][i].words * 4);
      gk_buffer_download(o->t[r][i].buf, 0, sn->bytes[r][i], o->t[r][i].words * 4);
    }
}
static bool snapshot_same(const opt_lists *o, snapshot *sn) {
  bool same = true;
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < o->n; i++) {
      unsigned char *now = malloc(o->t[r][i].words * 4);
      same &= gk_buffer_download(o->t[r][i].buf, 0, now, o->t[r][i].words * 4) == GK_SUCCESS &&
              !memcmp(now, sn->bytes[r][i], o->t[r][i].words * 4);
      free(now);
      free(sn->bytes[r][i]);
    }
  return same;
}

#define EXPECT_OPT_FAIL(o, call, want, part1, part2, what)                                                           \
  do {                                                                                                               \
    snapshot sn_;                                                                                                    \
    snapshot_take(o, &sn_);                                                                                          \
    gk_status s_ = (call);                                                                                           \
    char m_[512];                                                                                                    \
    snprintf(m_, sizeof m_, "%s", gk_last_error());                                                                  \
    bool named_ = strstr(m_, part1) && strstr(m_, part2);                                                           \
    check(s_ == (want) && named_ && snapshot_same(o, &sn_), "%s: %s (%s), want %s naming %s and %s, nothing written", \
          what, gk_status_string(s_), m_, gk_status_string(want), part1, part2);                                    \
  } while (0)

// Mixed devices, a tensor past its buffer, f16 parameters, SGD: a status, a
// message naming the argument, nothing written.
static void test_opt_bad_input(void) {
  gk_adamw_config c;
  gk_adamw_config_init(&c);
  opt_lists o;
  opt_lists_make(&o, NOPT, GK_F32);
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < o.n; i++) twin_fill(&o.t[r][i], 0.1, 1);
  gk_tensor grads[NOPT];
  memcpy(grads, o.dev[1], sizeof grads);

  grads[2] = o.host[1][2];
  EXPECT_OPT_FAIL(&o, gk_adamw_step(&c, o.n, o.dev[0], grads, o.dev[2], o.dev[3], NULL, 1), GK_ERR_BAD_DEVICE,
                  "'grads[2]' is on device 0 (cpu)", "params[0] on device 2 (vulkan)", "adamw, a host gradient");
  EXPECT_OPT_FAIL(&o, gk_clip_grad_norm(o.n, grads, 1.0, &(double){0}), GK_ERR_BAD_DEVICE, "'grads[2]'",
                  "device 0 (cpu)", "clip, a host gradient among vulkan ones");
  memcpy(grads, o.host[1], sizeof grads);
  grads[5] = o.dev[1][5];
  EXPECT_OPT_FAIL(&o, gk_clip_grad_norm(o.n, grads, 1.0, &(double){0}), GK_ERR_BAD_DEVICE, "'grads[5]'",
                  "device 2 (vulkan)", "clip, a vulkan gradient among host ones");

  // exp_avg_sq[6] (1001 floats, 4 bytes into a buffer of 1003 words) moved
  // 8 bytes on: its last element is past the buffer's end.
  gk_tensor v[NOPT];
  memcpy(v, o.dev[3], sizeof v);
  v[6].data = (char *)v[6].data + 8;
  EXPECT_OPT_FAIL(&o, gk_adamw_step(&c, o.n, o.dev[0], o.dev[1], o.dev[2], v, NULL, 1), GK_ERR_BAD_DEVICE,
                  "'exp_avg_sq[6]'", "does not lie within one buffer of backend 'vulkan'", "adamw, past a buffer");

  gk_sgd_config sc;
  gk_sgd_config_init(&sc);
  EXPECT_OPT_FAIL(&o, gk_sgd_step(&sc, o.n, o.dev[0], o.dev[1], NULL, NULL, 1), GK_ERR_UNSUPPORTED, "SGD",
                  "device 2 (vulkan)", "sgd on vulkan");
  opt_lists_free(&o);

  // f16 parameters and gradients, f32 moments and master weights, all on the device.
  opt_lists h;
  opt_lists_make(&h, 3, GK_F16);
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < h.n; i++) {
      void *ones = memset(malloc(h.t[r][i].words * 4), 0x3c, h.t[r][i].words * 4);  // f16 1.06, f32 0.0115
      gk_buffer_upload(h.t[r][i].buf, 0, ones, h.t[r][i].words * 4);
      free(ones);
    }
  opt_lists m;
  opt_lists_make(&m, 3, GK_F32);
  EXPECT_OPT_FAIL(&h, gk_adamw_step(&c, h.n, h.dev[0], h.dev[1], h.dev[2], h.dev[3], m.dev[0], 1),
                  GK_ERR_UNSUPPORTED, "'params[0]' is f16", "f32 tensors only", "adamw, f16 parameters on vulkan");
  EXPECT_OPT_FAIL(&h, gk_clip_grad_norm(h.n, h.dev[1], 1.0, &(double){0}), GK_ERR_UNSUPPORTED, "'grads[0]' is f16",
                  "f32 tensors only", "clip, f16 gradients on vulkan");
  opt_lists_free(&m);
  opt_lists_free(&h);
}

int main(void) {
  if (test_registered()) {
    test_bad_input();
    test_batched_runs();
    test_deterministic();
    test_past_one_dispatch();
    test_adamw();
    test_clip();
    test_opt_bad_input();
  }
  return finish("test_vulkan");
}
