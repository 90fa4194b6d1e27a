// The optimizers on a device backend's tensors (gk_adamw_step and
// gk_clip_grad_norm through the backend's hooks) against the same calls on
// host copies of the data, and their bad input; shared by test_vulkan
// (native) and test_train_webgpu (WebAssembly, on a WebGPU device).
// device_optim_tests(backend, big) runs them all; `big` elements make a
// tensor past one dispatch of the backend's shaders.
#ifndef GK_TEST_DEVICE_OPTIM_H
#define GK_TEST_DEVICE_OPTIM_H

#include "harness.h"

#include <stdint.h>

// The device under test (set by device_optim_tests).
static struct {
  gk_backend backend;
  gk_device_type device;
  const char *name;
  int64_t big;
} opt_dev;

// A tensor in a device buffer of its own and its twin on the host
// (contiguous), holding the same values. Where it lies in its buffer:
// contiguous at offset 0, contiguous 4 bytes in (Vulkan: not at a
// descriptor's alignment, gathered and scattered), or transposed (rank 2,
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
  check(gk_buffer_alloc(opt_dev.backend, t.words * 4, &t.buf) == GK_SUCCESS, "alloc: %s", gk_last_error());
  gk_tensor_init(&t.dev, (char *)gk_buffer_address(t.buf) + offset, dt, rank, shape);
  t.dev.device = opt_dev.device;
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
// every place; the last (opt_dev.big elements) is past one dispatch.
enum { NOPT = 7 };
static const int opt_rank[NOPT + 1] = {1, 2, 2, 2, 1, 2, 1, 1};
static const int64_t opt_shape[NOPT][2] = {{7}, {3, 5}, {33, 65}, {301, 257}, {0}, {17, 9}, {1001}};
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
      o->t[r][i] = twin_make(r < 2 ? param_dtype : GK_F32, opt_rank[i], i < NOPT ? opt_shape[i] : &opt_dev.big,
                             opt_place[i]);
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
    check(s == GK_SUCCESS, "adamw on %s, step %lld: %s", opt_dev.name, (long long)step, gk_last_error());
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
        "adamw on %s (wd %g, beta1 %g, %d tensors, %s) vs the host: largest relative error params %.3g, "
        "exp_avg %.3g, exp_avg_sq %.3g (-1: a word around a tensor changed)", opt_dev.name, weight_decay, beta1, n,
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
    printf("adamw on %s vs the host, 5 steps, %s: largest relative error params %.3g, exp_avg %.3g, exp_avg_sq "
           "%.3g\n", opt_dev.name, k ? "signed data, normwise" : "positive data, elementwise", worst_adamw[k][0],
           worst_adamw[k][1], worst_adamw[k][2]);
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
  check(s == GK_SUCCESS, "clip on %s, max_norm 1e30: %s", opt_dev.name, gk_last_error());
  s = gk_clip_grad_norm(o.n, o.dev[1], 1e30, &dev_again);
  bool same = true;
  for (int i = 0; i < o.n; i++) same &= twin_bits(&g[i], before[i]);
  check(s == GK_SUCCESS && same && dev_norm == dev_again,
        "clip on %s with max_norm past the norm: gradients changed or the norm differs (%.17g, %.17g)", opt_dev.name,
        dev_norm, dev_again);

  s = gk_clip_grad_norm(o.n, o.dev[1], 1.0, &dev_norm);
  check(s == GK_SUCCESS, "clip on %s: %s", opt_dev.name, gk_last_error());
  check(gk_clip_grad_norm(o.n, o.host[1], 1.0, &host_norm) == GK_SUCCESS, "clip on the host: %s", gk_last_error());
  double norm_err = fabs(dev_norm - host_norm) / host_norm, grad_err = 0;
  for (int i = 0; i < o.n; i++) grad_err = fmax(grad_err, twin_error(&g[i], false));
  printf("clip on %s vs the host: norm %.9g vs %.9g, relative error %.3g; scaled gradients, largest relative "
         "error %.3g\n", opt_dev.name, dev_norm, host_norm, norm_err, grad_err);
  check(norm_err < 1e-5, "clip on %s: norm %.17g, the host's %.17g", opt_dev.name, dev_norm, host_norm);
  check(grad_err >= 0 && grad_err < 1e-6, "clip on %s: scaled gradients off by %.3g relative (-1: a word "
        "around a tensor changed)", opt_dev.name, grad_err);

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
          "clip on %s with a %s gradient: %s (%s), norm %g, gradients %s", opt_dev.name, k ? "NaN" : "infinite",
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
  char on_dev[64], params_on_dev[80], past[80], what[80];
  snprintf(on_dev, sizeof on_dev, "device %d (%s)", (int)opt_dev.device, opt_dev.name);
  snprintf(params_on_dev, sizeof params_on_dev, "params[0] on %s", on_dev);
  snprintf(past, sizeof past, "does not lie within one buffer of backend '%s'", opt_dev.name);
#define WHAT(...) (snprintf(what, sizeof what, __VA_ARGS__), what)

  grads[2] = o.host[1][2];
  EXPECT_OPT_FAIL(&o, gk_adamw_step(&c, o.n, o.dev[0], grads, o.dev[2], o.dev[3], NULL, 1), GK_ERR_BAD_DEVICE,
                  "'grads[2]' is on device 0 (cpu)", params_on_dev, "adamw, a host gradient");
  EXPECT_OPT_FAIL(&o, gk_clip_grad_norm(o.n, grads, 1.0, &(double){0}), GK_ERR_BAD_DEVICE, "'grads[2]'",
                  "device 0 (cpu)", WHAT("clip, a host gradient among %s ones", opt_dev.name));
  memcpy(grads, o.host[1], sizeof grads);
  grads[5] = o.dev[1][5];
  EXPECT_OPT_FAIL(&o, gk_clip_grad_norm(o.n, grads, 1.0, &(double){0}), GK_ERR_BAD_DEVICE, "'grads[5]'", on_dev,
                  WHAT("clip, a %s gradient among host ones", opt_dev.name));

  // exp_avg_sq[6] (1001 floats, 4 bytes into a buffer of 1003 words) moved
  // 8 bytes on: its last element is past the buffer's end.
  gk_tensor v[NOPT];
  memcpy(v, o.dev[3], sizeof v);
  v[6].data = (char *)v[6].data + 8;
  EXPECT_OPT_FAIL(&o, gk_adamw_step(&c, o.n, o.dev[0], o.dev[1], o.dev[2], v, NULL, 1), GK_ERR_BAD_DEVICE,
                  "'exp_avg_sq[6]'", past, "adamw, past a buffer");

  gk_sgd_config sc;
  gk_sgd_config_init(&sc);
  EXPECT_OPT_FAIL(&o, gk_sgd_step(&sc, o.n, o.dev[0], o.dev[1], NULL, NULL, 1), GK_ERR_UNSUPPORTED, "SGD", on_dev,
                  WHAT("sgd on %s", opt_dev.name));
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
                  GK_ERR_UNSUPPORTED, "'params[0]' is f16", "f32 tensors only",
                  WHAT("adamw, f16 parameters on %s", opt_dev.name));
  EXPECT_OPT_FAIL(&h, gk_clip_grad_norm(h.n, h.dev[1], 1.0, &(double){0}), GK_ERR_UNSUPPORTED, "'grads[0]' is f16",
                  "f32 tensors only", WHAT("clip, f16 gradients on %s", opt_dev.name));
#undef WHAT
  opt_lists_free(&m);
  opt_lists_free(&h);
}

// AdamW, clipping and their bad input on `backend`'s tensors; the last
// tensor of the lists has `big` elements.
static void device_optim_tests(gk_backend backend, int64_t big) {
  gk_backend_info info = {0};
  for (int i = 0; i < gk_backend_count(); i++)
    if (gk_backend_get(i, &info) == GK_SUCCESS && info.id == backend) break;
  opt_dev.backend = backend;
  opt_dev.device = info.device;
  opt_dev.name = gk_backend_name(backend);
  opt_dev.big = big;
  test_adamw();
  test_clip();
  test_opt_bad_input();
}

#endif
