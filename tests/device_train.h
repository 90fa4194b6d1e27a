// Training on a device backend through the model API (src/nn/model.h)
// against the same training on the CPU backend, shared by
// test_train_vulkan (native) and test_train_webgpu (WebAssembly, on a
// WebGPU device): a model trains `steps` steps on the device (forward,
// backward, clipping by the global norm and AdamW on device buffers; only
// the tokens go up and the loss comes down, plus Mamba's A = -exp(A_log))
// and on the CPU, from the same weights on the same batches of the
// selective-copying task. Checked: the first step's gradients (relative L2
// error), every step's loss (relative to the CPU's), that the loss falls,
// and the weights after the last step. Then what a device run refuses.
#ifndef GK_TEST_DEVICE_TRAIN_H
#define GK_TEST_DEVICE_TRAIN_H

#include "harness.h"
#include "nn/data.h"
#include "nn/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The device, the run's shape, and the bounds on the losses (relative to
// the CPU's) and the first gradients (relative L2).
typedef struct device_train {
  gk_backend backend;
  int batch, seq, steps;
  double loss_rel, grad_rel;
  bool quick;  // a few steps (the sanitized build's run): too few for the loss to be seen falling
} device_train;

typedef struct model_case {
  const char *name;
  gk_arch arch;
  int selection;
  double weight_rel;  // bound on the last weights' relative L2 error
} model_case;

static gk_model_config config_of(const model_case *mc, int vocab) {
  gk_model_config c = {0};
  c.arch = mc->arch;
  c.vocab = vocab;
  c.d_model = 64;
  c.n_layers = 2;
  c.d_state = 16;
  c.selection = mc->selection;
  c.heads = 4;
  c.kv_heads = 2;
  return c;
}

// Elements [first, first + n) of a (n_total) view of the weights,
// gradients or moments, wherever they live.
static gk_tensor part(gk_tensor all, int64_t first, int64_t n) {
  all.data = (float *)all.data + first;
  all.shape[0] = n;
  return all;
}

// Clipping to norm 1 and AdamW (lr 6e-3, betas 0.9/0.95, weight decay 0.1
// on the decayed group), as the training program, on the tensors' device.
static gk_status update(gk_model *m, gk_tensor mo, gk_tensor v, int64_t step, double *norm) {
  gk_tensor g = gk_model_grads(m), w = gk_model_weights(m);
  gk_status s = gk_clip_grad_norm(1, &g, 1.0, norm);
  gk_adamw_config cfg;
  gk_adamw_config_init(&cfg);
  cfg.lr = 6e-3;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  int64_t begin[2] = {0, m->n_decay}, end[2] = {m->n_decay, m->n_total};
  for (int grp = 0; grp < 2 && s == GK_SUCCESS; grp++) {
    int64_t len = end[grp] - begin[grp], b = begin[grp];
    cfg.weight_decay = grp ? 0 : 0.1;
    gk_tensor tp = part(w, b, len), tg = part(g, b, len), tm = part(mo, b, len), tv = part(v, b, len);
    s = gk_adamw_step(&cfg, 1, &tp, &tg, &tm, &tv, NULL, step);
  }
  return s;
}

typedef struct trained {
  double *loss, *norm;     // per step
  float *grad0, *weights;  // the first step's gradients, the last weights (n_total each)
  double seconds;          // the steps' wall time (the update and the loss's read back included)
} trained;

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// dt->steps steps on the device (on_device) or the CPU.
static bool train(const device_train *dt, const model_case *mc, const gk_task *task, bool on_device, trained *out) {
  const char *where = on_device ? gk_backend_name(dt->backend) : "cpu";
  gk_model m;
  gk_model_config c = config_of(mc, task->vocab_size);
  gk_run *run = NULL;
  gk_buffer *moments = NULL;
  bool ok = gk_model_init(&m, &c, 7) == GK_SUCCESS;
  size_t bytes = sizeof(float) * (size_t)m.n_total, tokens = (size_t)dt->batch * (size_t)dt->seq;
  float *host_moments = ok ? calloc(2, bytes) : NULL;
  int32_t *inputs = malloc(2 * tokens * sizeof *inputs), *targets = inputs + tokens;
  ok = ok && host_moments && inputs;
  gk_tensor mo = gk_t1(host_moments, m.n_total), v = gk_t1(host_moments + m.n_total, m.n_total);
  if (ok && on_device) {
    ok = gk_model_to_device(&m, dt->backend) == GK_SUCCESS &&
         gk_buffer_alloc(dt->backend, 2 * bytes, &moments) == GK_SUCCESS &&
         gk_buffer_upload(moments, 0, host_moments, 2 * bytes) == GK_SUCCESS;
    if (ok) {
      mo = gk_t1(gk_buffer_address(moments), m.n_total);
      mo.device = gk_model_weights(&m).device;
      v = part(mo, m.n_total, m.n_total);
      ok = gk_run_create_device(&m, dt->batch, dt->seq, true, &run) == GK_SUCCESS;
    }
  } else if (ok) {
    ok = gk_run_create(&m, dt->batch, dt->seq, true, &run) == GK_SUCCESS;
  }
  double start = seconds_now();
  for (int step = 0; step < dt->steps && ok; step++) {
    gk_task_batch(task, GK_SPLIT_TRAIN, 3, step, dt->batch, dt->seq, inputs, targets);
    ok = gk_run_step(run, inputs, targets, &out->loss[step]) == GK_SUCCESS;
    if (ok && step == 0) {
      ok = !on_device || gk_model_download(&m) == GK_SUCCESS;
      memcpy(out->grad0, m.g, bytes);
    }
    if (ok) ok = update(&m, mo, v, step + 1, &out->norm[step]) == GK_SUCCESS;
  }
  out->seconds = seconds_now() - start;
  if (ok && on_device) ok = gk_model_download(&m) == GK_SUCCESS;
  if (ok) memcpy(out->weights, m.w, bytes);
  check(ok, "%s on %s: %s", mc->name, where, gk_last_error());
  gk_run_free(run);
  gk_buffer_free(moments);
  free(host_moments);
  free(inputs);
  gk_model_free(&m);
  return ok;
}

static void trained_free(trained *t) {
  free(t->loss);
  free(t->norm);
  free(t->grad0);
  free(t->weights);
}

static void test_against_cpu(const device_train *dt, const model_case *mc, const gk_task *task) {
  const char *dev_name = gk_backend_name(dt->backend);
  gk_model probe;
  gk_model_config c = config_of(mc, task->vocab_size);
  if (gk_model_init(&probe, &c, 7) != GK_SUCCESS) {
    check(false, "%s: %s", mc->name, gk_last_error());
    return;
  }
  int64_t n = probe.n_total;
  gk_model_free(&probe);
  trained t[2];
  bool allocated = true;
  for (int k = 0; k < 2; k++) {
    t[k].loss = malloc(sizeof(double) * (size_t)dt->steps);
    t[k].norm = malloc(sizeof(double) * (size_t)dt->steps);
    t[k].grad0 = malloc(sizeof(float) * (size_t)n);
    t[k].weights = malloc(sizeof(float) * (size_t)n);
    allocated &= t[k].loss && t[k].norm && t[k].grad0 && t[k].weights;
  }
  if (!allocated) {
    check(false, "%s: no memory", mc->name);
  } else if (train(dt, mc, task, false, &t[0]) && train(dt, mc, task, true, &t[1])) {
    const trained *cpu = &t[0], *dev = &t[1];
    double gerr = rel_l2(dev->grad0, cpu->grad0, n), werr = rel_l2(dev->weights, cpu->weights, n);
    double worst = 0, worst_norm = 0;
    int worst_step = 0, last = dt->steps - 1;
    for (int s = 0; s < dt->steps; s++) {
      double err = fabs(dev->loss[s] - cpu->loss[s]) / cpu->loss[s];
      if (!(err <= worst)) {
        worst = err;
        worst_step = s;
      }
      double nerr = fabs(dev->norm[s] - cpu->norm[s]) / cpu->norm[s];
      if (!(nerr <= worst_norm)) worst_norm = nerr;
    }
    check(gerr <= dt->grad_rel, "%s: first gradient's relative error %.3g > %.0e", mc->name, gerr, dt->grad_rel);
    check(worst <= dt->loss_rel, "%s: step %d loss %.6f on %s, %.6f on cpu: relative error %.3g > %.0e", mc->name,
          worst_step + 1, dev->loss[worst_step], dev_name, cpu->loss[worst_step], worst, dt->loss_rel);
    check(werr <= mc->weight_rel, "%s: weights after %d steps: relative error %.3g > %.0e", mc->name, dt->steps, werr,
          mc->weight_rel);
    check(dt->quick || dev->loss[last] < 0.95 * dev->loss[0], "%s: the loss did not fall on %s (%.4f -> %.4f)",
          mc->name, dev_name, dev->loss[0], dev->loss[last]);
    printf("%s: loss %.4f -> %.4f on %s (cpu %.4f -> %.4f), worst step %d at %.2g relative; gradient norms within "
           "%.2g; first gradient's error %.2g, weights after %d steps %.2g; %.1f ms a step on %s, %.1f on cpu\n",
           mc->name, dev->loss[0], dev->loss[last], dev_name, cpu->loss[0], cpu->loss[last], worst_step + 1, worst,
           worst_norm, gerr, dt->steps, werr, 1e3 * dev->seconds / dt->steps, dev_name, 1e3 * cpu->seconds / dt->steps);
  }
  for (int k = 0; k < 2; k++) trained_free(&t[k]);
}

// What a device run refuses (a model not on the device, the cpu backend as
// a device, moving a model twice), and a host run of a device model, which
// reads the host copy: its forward loss is the device run's.
static void test_refusals(const device_train *dt, const gk_task *task) {
  const char *dev_name = gk_backend_name(dt->backend);
  model_case mc = {"mamba", GK_ARCH_MAMBA, 1, 0};
  gk_model m;
  gk_model_config c = config_of(&mc, task->vocab_size);
  gk_run *run = NULL;
  if (gk_model_init(&m, &c, 7) != GK_SUCCESS) {
    check(false, "refusals: %s", gk_last_error());
    return;
  }
  check(gk_run_create_device(&m, dt->batch, dt->seq, true, &run) == GK_ERR_INVALID_VALUE && !run &&
        strstr(gk_last_error(), "gk_model_to_device"), "a device run of a host model is refused (%s)", gk_last_error());
  check(gk_model_to_device(&m, GK_BACKEND_CPU) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "cpu"),
        "the cpu backend is not a device (%s)", gk_last_error());
  check(gk_model_download(&m) == GK_ERR_INVALID_VALUE, "download without a device is refused");
  bool ok = gk_model_to_device(&m, dt->backend) == GK_SUCCESS;
  check(ok, "to %s: %s", dev_name, gk_last_error());
  check(!ok || gk_model_to_device(&m, dt->backend) == GK_ERR_INVALID_VALUE, "moving twice is refused");
  // A host run of a device model reads the host copy: its loss equals a
  // host model's.
  size_t tokens = (size_t)dt->batch * (size_t)dt->seq;
  int32_t *inputs = malloc(2 * tokens * sizeof *inputs), *targets = inputs + tokens;
  gk_task_batch(task, GK_SPLIT_TRAIN, 3, 0, dt->batch, dt->seq, inputs, targets);
  double host_loss = NAN, dev_loss = NAN;
  if (ok && gk_run_create(&m, dt->batch, dt->seq, false, &run) == GK_SUCCESS) {
    check(gk_run_step(run, inputs, targets, &host_loss) == GK_SUCCESS, "host run: %s", gk_last_error());
    gk_run_free(run);
  }
  if (ok && gk_run_create_device(&m, dt->batch, dt->seq, false, &run) == GK_SUCCESS) {
    check(gk_run_step(run, inputs, targets, &dev_loss) == GK_SUCCESS, "device run: %s", gk_last_error());
    check(gk_run_logits(run) == NULL, "a device run's logits stay on the device");
    gk_run_free(run);
  }
  check(fabs(dev_loss - host_loss) <= 1e-5 * host_loss, "forward-only loss %.7f on %s, %.7f on the host", dev_loss,
        dev_name, host_loss);
  free(inputs);
  gk_model_free(&m);
}

// The cases against the CPU, then the refusals; false (with the reason
// printed) when the backend cannot run here.
static bool device_train_tests(const device_train *dt, const model_case *cases, int ncases) {
  gk_backend_info info = {0};
  bool found = false;
  for (int i = 0; i < gk_backend_count() && !found; i++)
    found = gk_backend_get(i, &info) == GK_SUCCESS && info.id == dt->backend;
  if (!found || !info.available) {
    fprintf(stderr, "the %s backend cannot run here: %s\n", gk_backend_name(dt->backend),
            found ? info.reason : "it was not built");
    return false;
  }
  printf("device: %s; batch %d x %d, %d steps\n", gk_backend_device_description(dt->backend), dt->batch, dt->seq,
         dt->steps);
  gk_task task;
  if (gk_task_init_copy(&task, 8, 8) != GK_SUCCESS) {
    check(false, "the task: %s", gk_last_error());
    return true;
  }
  for (int i = 0; i < ncases; i++) test_against_cpu(dt, &cases[i], &task);
  test_refusals(dt, &task);
  gk_task_free(&task);
  return true;
}

#endif
