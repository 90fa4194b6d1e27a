// `gradkern train`: a Mamba or LLaMA language model trained end to end.
//
// Each step: batch `step` of the task (a pure function of seed and step, so
// a resumed run sees the same data), forward, loss, backward, global-norm
// clipping, AdamW (decayed matrices and embedding; norms, biases, A_log, D,
// dt_bias without decay) at the scheduled learning rate. Every eval_every
// steps and at the end: held-out loss and token accuracy (synthetic tasks)
// or bits per byte (text). Checkpoints (safetensors: weights by name, AdamW
// moments, configuration and step in the metadata) are written atomically.
#include "train.h"

#include "nn/layers.h"
#include "nn/plot.h"
#include "nn/progress.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The built-in selective-copying task: 8 data tokens of 8 values scattered
// in the first 56 of 64 positions, reproduced after 8 markers.
enum { COPY_DATA = 8, COPY_VALUES = 8 };

// Defaults: a 2-layer Mamba of width 64 on selective copying, sized to reach
// 95% held-out accuracy within 5 minutes on 2 cores.
static gk_train_args train_defaults(void) {
  gk_train_args a = gk_train_defaults;
  a.steps = 1500;
  a.batch = 32;
  a.seq_len = 64;
  a.lr = 6e-3;
  a.min_lr = 3e-4;
  a.warmup = 100;
  a.eval_every = 250;
  a.eval_batches = 8;
  return a;
}

typedef struct trainer {
  gk_train_args a;
  gk_task task;
  gk_model model;
  gk_run *run, *eval_run;
  float *exp_avg, *exp_avg_sq;
  int64_t step;                    // steps done
  int32_t *inputs, *targets;
  int eval_len;                    // sequence length of evaluation
  gk_progress progress;
  double *loss_x, *loss_y, *eval_x, *eval_y;
  int64_t n_loss, n_eval;
  const char *last_checkpoint;
} trainer;

// ---------------------------------------------------------------- checkpoints

// The configuration stored with a checkpoint: everything that shapes the
// weights, the optimizer state or the data.
static void config_string(const trainer *t, char *buf, size_t n) {
  const gk_model_config *c = &t->model.cfg;
  snprintf(buf, n,
           "arch=%s vocab=%d d_model=%d n_layers=%d expand=%d d_conv=%d d_state=%d dt_rank=%d selection=%d "
           "heads=%d kv_heads=%d d_ff=%d rope_theta=%g task=%s seq_len=%d batch=%d",
           c->arch == GK_ARCH_MAMBA ? "mamba" : "llama", c->vocab, c->d_model, c->n_layers,
           c->arch == GK_ARCH_MAMBA ? c->expand : 0, c->arch == GK_ARCH_MAMBA ? c->d_conv : 0,
           c->arch == GK_ARCH_MAMBA ? c->d_state : 0, c->arch == GK_ARCH_MAMBA ? c->dt_rank : 0,
           c->arch == GK_ARCH_MAMBA ? c->selection : 0, c->arch == GK_ARCH_LLAMA ? c->heads : 0,
           c->arch == GK_ARCH_LLAMA ? c->kv_heads : 0, c->arch == GK_ARCH_LLAMA ? c->d_ff : 0,
           c->arch == GK_ARCH_LLAMA ? c->rope_theta : 0, gk_task_name(t->a.task), t->a.seq_len, t->a.batch);
}

static gk_status save_checkpoint(trainer *t, const char *path) {
  gk_model *m = &t->model;
  int n = m->nparams + 2;
  gk_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  if (!ts) return gk_fail(GK_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    ts[i] = (gk_st_tensor){p->name, GK_ST_F32, p->rank, {p->shape[0], p->shape[1]}, m->w + p->offset,
                           (size_t)p->numel * sizeof(float)};
  }
  ts[m->nparams] = (gk_st_tensor){"optimizer.exp_avg", GK_ST_F32, 1, {m->n_total}, t->exp_avg,
                                  (size_t)m->n_total * sizeof(float)};
  ts[m->nparams + 1] = (gk_st_tensor){"optimizer.exp_avg_sq", GK_ST_F32, 1, {m->n_total}, t->exp_avg_sq,
                                      (size_t)m->n_total * sizeof(float)};
  char config[512], step[32], seed[32];
  config_string(t, config, sizeof config);
  snprintf(step, sizeof step, "%lld", (long long)t->step);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)t->a.seed);
  gk_st_meta meta[4] = {{"format", "gradkern-checkpoint-1"}, {"config", config}, {"step", step}, {"seed", seed}};
  gk_status s = gk_st_save(path, ts, (size_t)n, meta, 4);
  free(ts);
  if (s == GK_SUCCESS) t->last_checkpoint = path;
  return s;
}

static gk_status load_checkpoint(trainer *t, const char *path) {
  gk_model *m = &t->model;
  gk_st_file *f;
  gk_status s = gk_st_load(path, &f);
  if (s != GK_SUCCESS) return s;
  const char *format = gk_st_metadata(f, "format"), *config = gk_st_metadata(f, "config"),
             *step = gk_st_metadata(f, "step"), *seed = gk_st_metadata(f, "seed");
  char want[512];
  config_string(t, want, sizeof want);
  if (!format || strcmp(format, "gradkern-checkpoint-1") || !config || !step || !seed) {
    s = gk_fail(GK_NN_ERR_FILE, "checkpoint '%s' is not a gradkern training checkpoint (metadata format, config, "
                "step and seed missing)", path);
  } else if (strcmp(config, want)) {
    s = gk_fail(GK_ERR_INVALID_VALUE, "checkpoint '%s' was made with another configuration:\n  checkpoint: %s\n"
                "  this run:   %s", path, config, want);
  } else {
    char *end;
    long long st = strtoll(step, &end, 10);
    unsigned long long sd = strtoull(seed, NULL, 10);
    if (*end || st < 0) s = gk_fail(GK_NN_ERR_FILE, "checkpoint '%s': step '%s' is not a count", path, step);
    else if (sd != t->a.seed)
      s = gk_fail(GK_ERR_INVALID_VALUE, "checkpoint '%s' was made with --seed %llu, this run has --seed %llu", path,
                  sd, (unsigned long long)t->a.seed);
    for (int i = 0; i < m->nparams && s == GK_SUCCESS; i++) {
      const gk_param *p = &m->params[i];
      s = gk_st_read(f, p->name, GK_ST_F32, p->rank, p->shape, m->w + p->offset);
    }
    if (s == GK_SUCCESS) s = gk_st_read(f, "optimizer.exp_avg", GK_ST_F32, 1, &m->n_total, t->exp_avg);
    if (s == GK_SUCCESS) s = gk_st_read(f, "optimizer.exp_avg_sq", GK_ST_F32, 1, &m->n_total, t->exp_avg_sq);
    if (s == GK_SUCCESS) t->step = st;
  }
  gk_st_close(f);
  return s;
}

// ---------------------------------------------------------------- evaluation

typedef struct eval_result {
  double loss, accuracy;
} eval_result;

static gk_status evaluate(trainer *t, eval_result *out) {
  gk_run *r = t->eval_run;
  int B = t->a.batch, T = t->eval_len;
  int64_t rows = (int64_t)B * T, V = t->model.cfg.vocab;
  double loss_sum = 0;
  int64_t counted = 0, correct = 0;
  int batches = t->a.eval_batches;
  int64_t windows = gk_task_eval_windows(&t->task, t->eval_len);
  if (windows > 0) batches = (int)gk_min64(batches, gk_ceil_div(windows, B));
  for (int i = 0; i < batches; i++) {
    gk_status s = gk_task_batch(&t->task, GK_SPLIT_EVAL, t->a.seed, i, B, T, t->inputs, t->targets);
    double loss;
    if (s == GK_SUCCESS) s = gk_run_step(r, t->inputs, t->targets, &loss);
    if (s != GK_SUCCESS) return s;
    int64_t n = 0;
    const float *logits = gk_run_logits(r);
    for (int64_t j = 0; j < rows; j++) {
      if (t->targets[j] == GK_IGNORE_INDEX) continue;
      const float *row = logits + j * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
      correct += best == t->targets[j];
      n++;
    }
    if (n) loss_sum += loss * (double)n;
    counted += n;
  }
  out->loss = counted ? loss_sum / (double)counted : NAN;
  out->accuracy = counted ? (double)correct / (double)counted : NAN;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- the run

static gk_status setup(trainer *t) {
  gk_train_args *a = &t->a;
  gk_status s;
  if (a->task == GK_TASK_COPY) s = gk_task_init_copy(&t->task, COPY_DATA, COPY_VALUES);
  else if (a->task == GK_TASK_INDUCTION) s = gk_task_init_induction(&t->task, GK_INDUCTION_DEFAULT_VALUES);
  else s = gk_task_init_text(&t->task, a->data, a->seq_len);
  if (s != GK_SUCCESS) return s;
  // Induction heads: evaluated on sequences 4 times longer than trained.
  t->eval_len = a->task == GK_TASK_INDUCTION ? 4 * a->seq_len : a->seq_len;
  if ((s = gk_task_check_seq_len(&t->task, GK_SPLIT_TRAIN, a->seq_len)) != GK_SUCCESS) return s;
  if ((s = gk_task_check_seq_len(&t->task, GK_SPLIT_EVAL, t->eval_len)) != GK_SUCCESS) return s;
  if (a->dtype != GK_F32)
    return gk_fail(GK_ERR_UNSUPPORTED, "--dtype %s: this build trains in f32 only", gk_dtype_name(a->dtype));
  if (a->threads > 0 && (s = gk_set_num_threads(a->threads)) != GK_SUCCESS) return s;

  gk_model_config c = {0};
  c.arch = a->model == GK_MODEL_MAMBA ? GK_ARCH_MAMBA : GK_ARCH_LLAMA;
  c.vocab = t->task.vocab_size;
  c.d_model = a->width;
  c.n_layers = a->layers;
  c.d_state = a->state;
  c.selection = a->selection;
  c.heads = a->heads;
  c.kv_heads = a->kv_heads;
  if ((s = gk_model_init(&t->model, &c, a->seed)) != GK_SUCCESS) return s;
  if ((s = gk_run_create(&t->model, a->batch, a->seq_len, true, &t->run)) != GK_SUCCESS) return s;
  if ((s = gk_run_create(&t->model, a->batch, t->eval_len, false, &t->eval_run)) != GK_SUCCESS) return s;
  size_t n = (size_t)t->model.n_total;
  t->exp_avg = calloc(n, sizeof(float));
  t->exp_avg_sq = calloc(n, sizeof(float));
  size_t tokens = (size_t)a->batch * (size_t)(t->eval_len > a->seq_len ? t->eval_len : a->seq_len);
  t->inputs = malloc(tokens * sizeof(int32_t));
  t->targets = malloc(tokens * sizeof(int32_t));
  size_t curve = (size_t)a->steps + 2;
  t->loss_x = malloc(curve * sizeof(double));
  t->loss_y = malloc(curve * sizeof(double));
  t->eval_x = malloc(curve * sizeof(double));
  t->eval_y = malloc(curve * sizeof(double));
  if (!t->exp_avg || !t->exp_avg_sq || !t->inputs || !t->targets || !t->loss_x || !t->loss_y || !t->eval_x ||
      !t->eval_y)
    return gk_fail(GK_ERR_OUT_OF_MEMORY, "train: no memory for the optimizer state");
  if (a->resume && (s = load_checkpoint(t, a->resume)) != GK_SUCCESS) return s;
  if (t->step > a->steps)
    return gk_fail(GK_ERR_INVALID_VALUE, "--resume: the checkpoint is at step %lld, past --steps %lld",
                   (long long)t->step, (long long)a->steps);
  return GK_SUCCESS;
}

static void teardown(trainer *t) {
  gk_run_free(t->run);
  gk_run_free(t->eval_run);
  gk_model_free(&t->model);
  gk_task_free(&t->task);
  free(t->exp_avg);
  free(t->exp_avg_sq);
  free(t->inputs);
  free(t->targets);
  free(t->loss_x);
  free(t->loss_y);
  free(t->eval_x);
  free(t->eval_y);
}

// AdamW over the decayed parameters, then over the others without decay.
static gk_status optimizer_step(trainer *t, double lr) {
  gk_model *m = &t->model;
  gk_adamw_config cfg;
  gk_adamw_config_init(&cfg);
  cfg.lr = lr;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.weight_decay = t->a.weight_decay;
  int64_t begin[2] = {0, m->n_decay}, end[2] = {m->n_decay, m->n_total};
  for (int group = 0; group < 2; group++) {
    int64_t n = end[group] - begin[group], b = begin[group];
    if (n == 0) continue;
    gk_tensor p = gk_t1(m->w + b, n), g = gk_t1(m->g + b, n), mo = gk_t1(t->exp_avg + b, n),
              v = gk_t1(t->exp_avg_sq + b, n);
    if (group == 1) cfg.weight_decay = 0;
    gk_status s = gk_adamw_step(&cfg, 1, &p, &g, &mo, &v, NULL, t->step + 1);
    if (s != GK_SUCCESS) return s;
  }
  return GK_SUCCESS;
}

static int fail(const char *what) {
  fprintf(stderr, "gradkern train: %s: %s\n", what, gk_last_error());
  return 1;
}

int gk_cmd_train(int argc, char **argv) {
  trainer t;
  memset(&t, 0, sizeof t);
  t.a = train_defaults();
  int help = 0;
  gk_train_args defaults = t.a;
  if (gk_train_args_parse(argc, argv, &t.a, &help) != GK_SUCCESS) {
    fprintf(stderr, "gradkern train: %s\n(see gradkern train --help)\n", gk_last_error());
    return 2;
  }
  if (help) {
    gk_train_usage(stdout, &defaults);
    return 0;
  }
  gk_train_args *a = &t.a;
  if (setup(&t) != GK_SUCCESS) {
    int rc = fail("setup");
    teardown(&t);
    return rc;
  }
  gk_model *m = &t.model;
  double mib = 1.0 / (1 << 20);
  size_t param_bytes = (size_t)m->n_total * sizeof(float) * 4;  // weights, gradients, two moments
  if (!a->quiet)
    printf("%s on %s: %d layers, width %d, %lld parameters; batch %d x %d tokens; memory %.1f MiB "
           "(parameters and AdamW %.1f, training activations %.1f, evaluation %.1f); %d threads\n",
           gk_model_name(a->model), gk_task_name(a->task), a->layers, a->width, (long long)m->n_total, a->batch,
           a->seq_len, (param_bytes + gk_run_bytes(t.run) + gk_run_bytes(t.eval_run)) * mib, param_bytes * mib,
           gk_run_bytes(t.run) * mib, gk_run_bytes(t.eval_run) * mib, gk_get_num_threads());
  gk_lr_schedule sched;
  gk_lr_schedule_init(&sched, a->lr, a->min_lr, a->warmup, a->steps);
  gk_progress_init(&t.progress, stdout, a->quiet ? GK_PROGRESS_QUIET : GK_PROGRESS_AUTO, a->steps, t.step,
                   (int64_t)a->batch * a->seq_len, 50);
  double loss = NAN;
  eval_result ev = {NAN, NAN};
  int rc = 0;
  int64_t first = t.step;
  while (t.step < a->steps) {
    gk_status s = gk_task_batch(&t.task, GK_SPLIT_TRAIN, a->seed, t.step, a->batch, a->seq_len, t.inputs, t.targets);
    if (s == GK_SUCCESS) s = gk_run_step(t.run, t.inputs, t.targets, &loss);
    if (s != GK_SUCCESS) {
      rc = fail("training step");
      break;
    }
    double norm = 0;
    gk_tensor grads = gk_t1(m->g, m->n_total);
    s = gk_clip_grad_norm(1, &grads, a->clip > 0 ? a->clip : DBL_MAX, &norm);  // 0: measure only
    if (!isfinite(loss) || s == GK_ERR_NON_FINITE) {
      fprintf(stderr, "gradkern train: step %lld: the %s is %s; stopping before the update%s%s\n",
              (long long)t.step + 1, isfinite(loss) ? "gradient norm" : "loss",
              isfinite(loss) ? (isnan(norm) ? "NaN" : "infinite") : (isnan(loss) ? "NaN" : "infinite"),
              t.last_checkpoint ? "; the last good checkpoint is " : "",
              t.last_checkpoint ? t.last_checkpoint : "");
      rc = 1;
      break;
    }
    if (s != GK_SUCCESS || optimizer_step(&t, gk_lr_at(&sched, t.step)) != GK_SUCCESS) {
      rc = fail("optimizer");
      break;
    }
    t.step++;
    t.loss_x[t.n_loss] = (double)t.step;
    t.loss_y[t.n_loss++] = loss;
    gk_progress_update(&t.progress, t.step, loss, gk_lr_at(&sched, t.step - 1));
    bool last = t.step == a->steps || (a->stop_after > 0 && t.step - first == a->stop_after);
    if ((a->eval_every > 0 && t.step % a->eval_every == 0) || last) {
      if (evaluate(&t, &ev) != GK_SUCCESS) {
        rc = fail("evaluation");
        break;
      }
      t.eval_x[t.n_eval] = (double)t.step;
      t.eval_y[t.n_eval++] = ev.loss;
      if (a->task == GK_TASK_TEXT)
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, %.3f bits per byte", (long long)t.step, ev.loss,
                         ev.loss / log(2.0));
      else
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, eval accuracy %.1f%%", (long long)t.step, ev.loss,
                         100 * ev.accuracy);
    }
    if (a->checkpoint && ((a->checkpoint_every > 0 && t.step % a->checkpoint_every == 0) || last)) {
      if (save_checkpoint(&t, a->checkpoint) != GK_SUCCESS) {
        rc = fail("checkpoint");
        break;
      }
    }
    if (last) break;
  }
  if (rc == 0 && a->plot) {
    gk_plot_series series[2] = {{"training loss", t.loss_x, t.loss_y, (size_t)t.n_loss, 0},
                                {"evaluation loss", t.eval_x, t.eval_y, (size_t)t.n_eval, 1}};
    gk_plot plot = {"gradkern train", "step", "loss (nats per token)", 1, 800, 480};
    if (gk_plot_write(a->plot, &plot, series, 2) != GK_SUCCESS) rc = fail("plot");
  }
  if (rc == 0) {
    gk_run_summary sum = {loss, ev.loss, a->task == GK_TASK_TEXT ? NAN : ev.accuracy,
                          a->task == GK_TASK_TEXT ? ev.loss / log(2.0) : NAN, t.last_checkpoint};
    gk_progress_summary(&t.progress, &sum);
  }
  teardown(&t);
  return rc;
}
