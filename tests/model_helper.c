// Helper of tests/python/test_models.py: runs a small gradkern model and
// writes what the PyTorch twin must reproduce.
//
//   model_helper ARCH SELECTION OUT.safetensors [DTYPE]
//
// ARCH is mamba or llama; DTYPE f32 (default) or bf16, what the run computes
// in (bf16: mixed precision over the f32 weights, src/nn/model.h). The file holds the initial weights (by parameter
// name, as checkpoints), one batch of the selective-copying task
// ("batch.inputs", "batch.targets", int32 (4, 32)), the loss and every
// gradient of step 0 ("grad.<name>", "loss0"), and the losses of 10 AdamW
// steps with clipping ("losses", f64 (10)). The model and optimizer
// settings are in the metadata.
//
//   model_helper hf DIR OUT.safetensors [SAVE_DIR F32|F16|BF16]
//
// reads the Hugging Face Mamba directory DIR (src/nn/hf.h) and writes the
// logits of a fixed batch ("inputs" int32 (2, 16), "logits" f32 (32, V)),
// the losses of 20 AdamW steps on it ("finetune_losses" f64 (20)), and the
// first step's gradients of the embedding and the head ("grad.embedding",
// "grad.head" f32 (V, D): the same with a tied head); with SAVE_DIR, first
// writes the model there in that dtype.
#include "nn/data.h"
#include "nn/hf.h"
#include "nn/layers.h"
#include "nn/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 4, SEQ = 32, STEPS = 10 };

// The `hf` mode (see the top).
static int hf_mode(int argc, char **argv) {
  gk_set_num_threads(2);
  gk_model m;
  gk_st_dtype dtype;
  if (gk_hf_load(argv[2], &m, &dtype) != GK_SUCCESS) {
    fprintf(stderr, "model_helper: %s\n", gk_last_error());
    return 1;
  }
  if (argc == 6) {
    gk_st_dtype out = !strcmp(argv[5], "F16") ? GK_ST_F16 : !strcmp(argv[5], "BF16") ? GK_ST_BF16 : GK_ST_F32;
    if (gk_hf_save(argv[4], &m, out) != GK_SUCCESS) {
      fprintf(stderr, "model_helper: %s\n", gk_last_error());
      return 1;
    }
  }
  enum { HB = 2, HT = 16, HSTEPS = 20 };
  int32_t inputs[HB * HT], targets[HB * HT];
  for (int i = 0; i < HB * HT; i++) inputs[i] = (int32_t)((i * 7 + 3) % m.cfg.vocab);
  for (int i = 0; i < HB * HT; i++) targets[i] = (i + 1) % HT ? inputs[i + 1] : GK_IGNORE_INDEX;
  gk_run *run;
  size_t nl = (size_t)HB * HT * (size_t)m.cfg.vocab;
  float *logits = malloc(nl * sizeof *logits);
  double losses[HSTEPS];
  if (!logits || gk_run_create(&m, HB, HT, true, &run) != GK_SUCCESS || gk_run_forward(run, inputs) != GK_SUCCESS) {
    fprintf(stderr, "model_helper: %s\n", gk_last_error());
    return 1;
  }
  memcpy(logits, gk_run_logits(run), nl * sizeof *logits);
  float *mo = calloc((size_t)m.n_total, 4), *v = calloc((size_t)m.n_total, 4);
  const gk_param *emb = &m.params[GK_PARAM_EMBEDDING], *head = gk_model_head(&m);
  float *grads = malloc(2 * (size_t)emb->numel * sizeof *grads);  // the embedding's, then the head's
  if (!mo || !v || !grads) return 1;
  for (int step = 0; step < HSTEPS; step++) {
    if (gk_run_step(run, inputs, targets, &losses[step]) != GK_SUCCESS) return 1;
    if (step == 0) {
      memcpy(grads, m.g + emb->offset, (size_t)emb->numel * sizeof *grads);
      memcpy(grads + emb->numel, m.g + head->offset, (size_t)emb->numel * sizeof *grads);
    }
    gk_adamw_config cfg;
    gk_adamw_config_init(&cfg);
    cfg.lr = 1e-3;
    gk_tensor tp = gk_t1(m.w, m.n_total), tg = gk_t1(m.g, m.n_total), tm = gk_t1(mo, m.n_total),
              tv = gk_t1(v, m.n_total);
    if (gk_adamw_step(&cfg, 1, &tp, &tg, &tm, &tv, NULL, step + 1) != GK_SUCCESS) return 1;
  }
  gk_st_tensor ts[5] = {{"inputs", GK_ST_I32, 2, {HB, HT}, inputs, 0},
                        {"logits", GK_ST_F32, 2, {HB * HT, m.cfg.vocab}, logits, 0},
                        {"finetune_losses", GK_ST_F64, 1, {HSTEPS}, losses, 0},
                        {"grad.embedding", GK_ST_F32, 2, {emb->shape[0], emb->shape[1]}, grads, 0},
                        {"grad.head", GK_ST_F32, 2, {emb->shape[0], emb->shape[1]}, grads + emb->numel, 0}};
  gk_st_meta meta = {"dtype", gk_st_dtype_name(dtype)};
  int rc = gk_st_save(argv[3], ts, 5, &meta, 1) != GK_SUCCESS;
  if (rc) fprintf(stderr, "model_helper: %s\n", gk_last_error());
  free(logits);
  free(grads);
  free(mo);
  free(v);
  gk_run_free(run);
  gk_model_free(&m);
  return rc;
}

int main(int argc, char **argv) {
  if ((argc == 4 || argc == 6) && !strcmp(argv[1], "hf")) return hf_mode(argc, argv);
  if ((argc != 4 && argc != 5) || (strcmp(argv[1], "mamba") && strcmp(argv[1], "llama")) ||
      (argc == 5 && strcmp(argv[4], "f32") && strcmp(argv[4], "bf16"))) {
    fprintf(stderr, "usage: model_helper mamba|llama SELECTION OUT.safetensors [f32|bf16]\n");
    return 2;
  }
  gk_dtype dtype = argc == 5 && !strcmp(argv[4], "bf16") ? GK_BF16 : GK_F32;
  gk_set_num_threads(2);
  gk_task task;
  if (gk_task_init_copy(&task, 4, 6) != GK_SUCCESS) return 1;
  gk_model_config c = {0};
  c.arch = strcmp(argv[1], "mamba") ? GK_ARCH_LLAMA : GK_ARCH_MAMBA;
  c.vocab = task.vocab_size;
  c.d_model = 32;
  c.n_layers = 2;
  c.d_state = 8;
  c.selection = atoi(argv[2]);
  c.heads = 4;
  c.kv_heads = 2;
  gk_model m;
  gk_run *run;
  if (gk_model_init(&m, &c, 7) != GK_SUCCESS || gk_run_create_dtype(&m, BATCH, SEQ, true, dtype, &run) != GK_SUCCESS) {
    fprintf(stderr, "model_helper: %s\n", gk_last_error());
    return 1;
  }
  int32_t inputs[BATCH * SEQ], targets[BATCH * SEQ];
  gk_task_batch(&task, GK_SPLIT_TRAIN, 3, 0, BATCH, SEQ, inputs, targets);

  int n = 2 * m.nparams + 4, k = 0;
  gk_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  char (*names)[64] = calloc((size_t)m.nparams, 64);
  float *w0 = malloc(sizeof(float) * (size_t)m.n_total), *g0 = malloc(sizeof(float) * (size_t)m.n_total);
  memcpy(w0, m.w, sizeof(float) * (size_t)m.n_total);
  double loss0, losses[STEPS];
  if (gk_run_step(run, inputs, targets, &loss0) != GK_SUCCESS) {
    fprintf(stderr, "model_helper: %s\n", gk_last_error());
    return 1;
  }
  memcpy(g0, m.g, sizeof(float) * (size_t)m.n_total);
  for (int i = 0; i < m.nparams; i++) {
    const gk_param *p = &m.params[i];
    snprintf(names[i], 64, "grad.%s", p->name);
    ts[k++] = (gk_st_tensor){p->name, GK_ST_F32, p->rank, {p->shape[0], p->shape[1]}, w0 + p->offset,
                             (size_t)p->numel * 4};
    ts[k++] = (gk_st_tensor){names[i], GK_ST_F32, p->rank, {p->shape[0], p->shape[1]}, g0 + p->offset,
                             (size_t)p->numel * 4};
  }
  // 10 steps: clip to norm 1, AdamW (lr 1e-2, betas 0.9/0.95, eps 1e-8,
  // weight decay 0.1 on the decayed group), the same batch every step.
  float *mo = calloc((size_t)m.n_total, 4), *v = calloc((size_t)m.n_total, 4);
  for (int step = 0; step < STEPS; step++) {
    if (step && gk_run_step(run, inputs, targets, &losses[step]) != GK_SUCCESS) return 1;
    if (!step) losses[0] = loss0;
    double norm;
    gk_tensor g = gk_t1(m.g, m.n_total);
    gk_clip_grad_norm(1, &g, 1.0, &norm);
    gk_adamw_config cfg;
    gk_adamw_config_init(&cfg);
    cfg.lr = 1e-2;
    cfg.beta1 = 0.9;
    cfg.beta2 = 0.95;
    int64_t begin[2] = {0, m.n_decay}, end[2] = {m.n_decay, m.n_total};
    for (int grp = 0; grp < 2; grp++) {
      int64_t len = end[grp] - begin[grp], b = begin[grp];
      cfg.weight_decay = grp ? 0 : 0.1;
      gk_tensor tp = gk_t1(m.w + b, len), tg = gk_t1(m.g + b, len), tm = gk_t1(mo + b, len), tv = gk_t1(v + b, len);
      if (len && gk_adamw_step(&cfg, 1, &tp, &tg, &tm, &tv, NULL, step + 1) != GK_SUCCESS) return 1;
    }
  }
  float loss32 = (float)loss0;
  ts[k++] = (gk_st_tensor){"batch.inputs", GK_ST_I32, 2, {BATCH, SEQ}, inputs, sizeof inputs};
  ts[k++] = (gk_st_tensor){"batch.targets", GK_ST_I32, 2, {BATCH, SEQ}, targets, sizeof targets};
  ts[k++] = (gk_st_tensor){"loss0", GK_ST_F32, 0, {0}, &loss32, 4};
  ts[k++] = (gk_st_tensor){"losses", GK_ST_F64, 1, {STEPS}, losses, sizeof losses};
  char cfgs[256];
  snprintf(cfgs, sizeof cfgs, "vocab=%d d_model=%d n_layers=%d d_state=%d expand=%d d_conv=%d dt_rank=%d "
           "selection=%d heads=%d kv_heads=%d d_ff=%d rope_theta=%g norm_eps=%g",
           m.cfg.vocab, m.cfg.d_model, m.cfg.n_layers, m.cfg.d_state, m.cfg.expand, m.cfg.d_conv, m.cfg.dt_rank,
           m.cfg.selection, m.cfg.heads, m.cfg.kv_heads, m.cfg.d_ff, m.cfg.rope_theta, m.cfg.norm_eps);
  gk_st_meta meta[2] = {{"arch", argv[1]}, {"config", cfgs}};
  if (gk_st_save(argv[3], ts, (size_t)k, meta, 2) != GK_SUCCESS) {
    fprintf(stderr, "model_helper: %s\n", gk_last_error());
    return 1;
  }
  free(ts);
  free(names);
  free(w0);
  free(g0);
  free(mo);
  free(v);
  gk_run_free(run);
  gk_model_free(&m);
  gk_task_free(&task);
  return 0;
}
