// Training on the Vulkan device through the model API (src/nn/model.h): the
// default Mamba (width 64, state 16, 2 layers), its time-invariant ablation
// and a small LLaMA (4 heads, 2 key/value heads) train STEPS steps on the
// device (forward, backward, clipping by the global norm and AdamW on
// Vulkan buffers; only the tokens go up and the loss comes down, plus
// Mamba's A = -exp(A_log)) and on the CPU, from the same weights on the same
// batches of the selective-copying task. Checked: the first step's
// gradients (relative L2 error), every step's loss (relative to the CPU's),
// that the loss falls, and the weights after the last step. Then what a
// device run refuses. Fails, with the reason, without a Vulkan device.
// With the argument `quick`, a few steps (for the sanitized build).
#include "harness.h"
#include "nn/data.h"
#include "nn/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 8, SEQ = 64, STEPS = 50 };

// `test_train_vulkan quick` (its run under AddressSanitizer): QUICK_STEPS
// steps of each model, the same checks but the falling loss.
enum { QUICK_STEPS = 3 };
static int steps = STEPS;

// Bounds (measured on lavapipe: the printed lines): every loss within
// LOSS_REL of the CPU's (1.2e-7 for Mamba, 7.8e-6 for LLaMA seen), the first
// gradients within GRAD_REL (2e-7 to 4e-7 seen), the last weights within the
// case's weight_rel (relative L2 over all of them: 2.4e-7 for Mamba). LLaMA's
// query and key projections start with gradients near AdamW's eps (1e-8),
// where the update g / (|g| + eps) turns rounding into direction: their
// weights drift apart by a few percent (1.2e-2 over all weights seen) while
// the losses agree to 1e-5; with eps 1e-5 the weights agree to 8e-6.
static const double LOSS_REL = 1e-3, GRAD_REL = 1e-4;

typedef struct model_case {
  const char *name;
  gk_arch arch;
  int selection;
  double weight_rel;
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
  double loss[STEPS], norm[STEPS];  // the first `steps`
  int64_t n;               // parameters
  float *grad0, *weights;  // the first step's gradients, the last weights (n each; the caller frees them)
} trained;

// STEPS steps on the Vulkan device (on_device) or the CPU.
static bool train(const model_case *mc, const gk_task *task, bool on_device, trained *out) {
  const char *where = on_device ? "vulkan" : "cpu";
  gk_model m;
  gk_model_config c = config_of(mc, task->vocab_size);
  gk_run *run = NULL;
  gk_buffer *moments = NULL;
  bool ok = gk_model_init(&m, &c, 7) == GK_SUCCESS;
  size_t bytes = sizeof(float) * (size_t)m.n_total;
  out->n = m.n_total;
  out->grad0 = ok ? malloc(bytes) : NULL;
  out->weights = ok ? malloc(bytes) : NULL;
  float *host_moments = ok ? calloc(2, bytes) : NULL;
  ok = ok && out->grad0 && out->weights && host_moments;
  gk_tensor mo = gk_t1(host_moments, m.n_total), v = gk_t1(host_moments + m.n_total, m.n_total);
  if (ok && on_device) {
    ok = gk_model_to_device(&m, GK_BACKEND_VULKAN) == GK_SUCCESS &&
         gk_buffer_alloc(GK_BACKEND_VULKAN, 2 * bytes, &moments) == GK_SUCCESS &&
         gk_buffer_upload(moments, 0, host_moments, 2 * bytes) == GK_SUCCESS;
    if (ok) {
      mo = gk_t1(gk_buffer_address(moments), m.n_total);
      mo.device = v.device = GK_DEVICE_VULKAN;
      v.data = (float *)mo.data + m.n_total;
      ok = gk_run_create_device(&m, BATCH, SEQ, true, &run) == GK_SUCCESS;
    }
  } else if (ok) {
    ok = gk_run_create(&m, BATCH, SEQ, true, &run) == GK_SUCCESS;
  }
  int32_t inputs[BATCH * SEQ], targets[BATCH * SEQ];
  for (int step = 0; step < steps && ok; step++) {
    gk_task_batch(task, GK_SPLIT_TRAIN, 3, step, BATCH, SEQ, inputs, targets);
    ok = gk_run_step(run, inputs, targets, &out->loss[step]) == GK_SUCCESS;
    if (ok && step == 0) {
      ok = !on_device || gk_model_download(&m) == GK_SUCCESS;
      memcpy(out->grad0, m.g, bytes);
    }
    if (ok) ok = update(&m, mo, v, step + 1, &out->norm[step]) == GK_SUCCESS;
  }
  if (ok && on_device) ok = gk_model_download(&m) == GK_SUCCESS;
  if (ok) memcpy(out->weights, m.w, bytes);
  check(ok, "%s on %s: %s", mc->name, where, gk_last_error());
  gk_run_free(run);
  gk_buffer_free(moments);
  free(host_moments);
  gk_model_free(&m);
  return ok;
}

static void test_against_cpu(const model_case *mc, const gk_task *task) {
  trained *t = calloc(2, sizeof *t);
  if (!t) {
    check(false, "%s: no memory", mc->name);
  } else if (train(mc, task, false, &t[0]) && train(mc, task, true, &t[1])) {
    const trained *cpu = &t[0], *dev = &t[1];
    double gerr = rel_l2(dev->grad0, cpu->grad0, cpu->n), werr = rel_l2(dev->weights, cpu->weights, cpu->n);
    double worst = 0, worst_norm = 0;
    int worst_step = 0;
    for (int s = 0; s < steps; s++) {
      double err = fabs(dev->loss[s] - cpu->loss[s]) / cpu->loss[s];
      if (!(err <= worst)) {
        worst = err;
        worst_step = s;
      }
      double nerr = fabs(dev->norm[s] - cpu->norm[s]) / cpu->norm[s];
      if (!(nerr <= worst_norm)) worst_norm = nerr;
    }
    check(gerr <= GRAD_REL, "%s: first gradient's relative error %.3g > %.0e", mc->name, gerr, GRAD_REL);
    check(worst <= LOSS_REL, "%s: step %d loss %.6f on vulkan, %.6f on cpu: relative error %.3g > %.0e", mc->name,
          worst_step + 1, dev->loss[worst_step], cpu->loss[worst_step], worst, LOSS_REL);
    check(werr <= mc->weight_rel, "%s: weights after %d steps: relative error %.3g > %.0e", mc->name, steps, werr,
          mc->weight_rel);
    check(steps < STEPS || dev->loss[steps - 1] < 0.95 * dev->loss[0], "%s: the loss did not fall on vulkan (%.4f -> "
          "%.4f)", mc->name, dev->loss[0], dev->loss[steps - 1]);
    printf("%s: loss %.4f -> %.4f on vulkan (cpu %.4f -> %.4f), worst step %d at %.2g relative; gradient norms within "
           "%.2g; first gradient's error %.2g, weights after %d steps %.2g\n", mc->name, dev->loss[0],
           dev->loss[steps - 1], cpu->loss[0], cpu->loss[steps - 1], worst_step + 1, worst, worst_norm, gerr, steps,
           werr);
  }
  for (int k = 0; t && k < 2; k++) {
    free(t[k].grad0);
    free(t[k].weights);
  }
  free(t);
}

// What a device run refuses: a model not on the device, a 16-bit run, a
// piece run of a device model is a host run (reading the host copy).
static void test_refusals(const gk_task *task) {
  model_case mc = {"mamba", GK_ARCH_MAMBA, 1, 0};
  gk_model m;
  gk_model_config c = config_of(&mc, task->vocab_size);
  gk_run *run = NULL;
  if (gk_model_init(&m, &c, 7) != GK_SUCCESS) {
    check(false, "refusals: %s", gk_last_error());
    return;
  }
  check(gk_run_create_device(&m, BATCH, SEQ, true, &run) == GK_ERR_INVALID_VALUE && !run &&
        strstr(gk_last_error(), "gk_model_to_device"), "a device run of a host model is refused (%s)", gk_last_error());
  check(gk_model_to_device(&m, GK_BACKEND_CPU) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "cpu"),
        "the cpu backend is not a device (%s)", gk_last_error());
  check(gk_model_download(&m) == GK_ERR_INVALID_VALUE, "download without a device is refused");
  bool ok = gk_model_to_device(&m, GK_BACKEND_VULKAN) == GK_SUCCESS;
  check(ok, "to vulkan: %s", gk_last_error());
  check(!ok || gk_model_to_device(&m, GK_BACKEND_VULKAN) == GK_ERR_INVALID_VALUE, "moving twice is refused");
  // A host run of a device model reads the host copy: its loss equals a
  // host model's.
  int32_t inputs[BATCH * SEQ], targets[BATCH * SEQ];
  gk_task_batch(task, GK_SPLIT_TRAIN, 3, 0, BATCH, SEQ, inputs, targets);
  double host_loss = NAN, dev_loss = NAN;
  if (ok && gk_run_create(&m, BATCH, SEQ, false, &run) == GK_SUCCESS) {
    check(gk_run_step(run, inputs, targets, &host_loss) == GK_SUCCESS, "host run: %s", gk_last_error());
    gk_run_free(run);
  }
  if (ok && gk_run_create_device(&m, BATCH, SEQ, false, &run) == GK_SUCCESS) {
    check(gk_run_step(run, inputs, targets, &dev_loss) == GK_SUCCESS, "device run: %s", gk_last_error());
    check(gk_run_logits(run) == NULL, "a device run's logits stay on the device");
    gk_run_free(run);
  }
  check(fabs(dev_loss - host_loss) <= 1e-5 * host_loss, "forward-only loss %.7f on vulkan, %.7f on the host", dev_loss,
        host_loss);
  gk_model_free(&m);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "quick")) steps = QUICK_STEPS;
  gk_backend_info vk = {0};
  for (int i = 0; i < gk_backend_count(); i++) {
    gk_backend_info info;
    if (gk_backend_get(i, &info) == GK_SUCCESS && info.id == GK_BACKEND_VULKAN) vk = info;
  }
  if (!vk.available) {
    fprintf(stderr, "test_train_vulkan: the vulkan backend cannot run here: %s\n",
            vk.name ? vk.reason : "it was not built");
    return 1;
  }
  printf("device: %s\n", gk_backend_device_description(GK_BACKEND_VULKAN));
  gk_task task;
  if (gk_task_init_copy(&task, 8, 8) != GK_SUCCESS) return 1;
  const model_case cases[] = {{"mamba", GK_ARCH_MAMBA, 1, 1e-3}, {"mamba --no-selection", GK_ARCH_MAMBA, 0, 1e-3},
                              {"llama", GK_ARCH_LLAMA, 1, 5e-2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_against_cpu(&cases[i], &task);
  test_refusals(&task);
  gk_task_free(&task);
  return finish("test_train_vulkan");
}
