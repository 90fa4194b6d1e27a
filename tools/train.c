// `gradkern train`: a Mamba or LLaMA language model trained end to end.
//
// Each step: batch `step` of the task (a pure function of seed and step, so
// a resumed run sees the same data), forward, loss, backward, global-norm
// clipping, AdamW (decayed matrices and embedding; norms, biases, A_log, D,
// dt_bias without decay) at the scheduled learning rate. Every eval_every
// steps and at the end: held-out loss and token accuracy (synthetic tasks)
// or bits per byte (text). Checkpoints (safetensors: weights by name, AdamW
// moments, and metadata described at "checkpoints" below) are written
// atomically, and only with a finite state; the output files are checked
// before the first step.
#include "train.h"

#include "nn/fileio.h"
#include "nn/layers.h"
#include "nn/plot.h"
#include "nn/progress.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
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

typedef struct eval_result {
  double loss, accuracy;
} eval_result;

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
  double train_loss;               // the last training loss (NAN: none yet)
  eval_result ev;                  // the last evaluation (NANs: none yet)
  const char *last_checkpoint;     // the last checkpoint this invocation wrote (NULL: none)
} trainer;

// The checkpoint a failed run can go back to: the last one written, else
// the one it resumed from (checked when it was loaded); NULL for none.
static const char *last_good(const trainer *t) { return t->last_checkpoint ? t->last_checkpoint : t->a.resume; }

// ---------------------------------------------------------------- checkpoints
//
// A checkpoint holds every parameter by name and the AdamW moments
// (optimizer.exp_avg, optimizer.exp_avg_sq), with metadata:
//   format   "gradkern-checkpoint-1"
//   config   everything that shapes the weights or the batches (config_string);
//            a checkpoint of another configuration is refused
//   step     steps done;  seed
//   steps lr min_lr warmup weight_decay clip   the run's options (run_options)
//   data_bytes data_crc32                      --task text: the data file
//   train_loss eval_loss eval_accuracy         the last figures, when known
//   crc32:<tensor>                             the checksum of each tensor
// Resuming with other options or data is refused unless --allow-changes.
// Files written before the checksums and the run's options were recorded
// still load, with a note that they cannot be verified or compared.

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

// The options that steer the run without changing any shape, recorded by
// key: resuming with another value is a change.
typedef struct run_option {
  const char *key, *option;
  char kind;  // 'i': int64_t, 'u': uint64_t, 'd': double
  size_t offset;
} run_option;
static const run_option run_options[] = {
    {"seed", "--seed", 'u', offsetof(gk_train_args, seed)},
    {"steps", "--steps", 'i', offsetof(gk_train_args, steps)},
    {"lr", "--lr", 'd', offsetof(gk_train_args, lr)},
    {"min_lr", "--min-lr", 'd', offsetof(gk_train_args, min_lr)},
    {"warmup", "--warmup", 'i', offsetof(gk_train_args, warmup)},
    {"weight_decay", "--weight-decay", 'd', offsetof(gk_train_args, weight_decay)},
    {"clip", "--clip", 'd', offsetof(gk_train_args, clip)},
};
enum { N_RUN_OPTIONS = sizeof run_options / sizeof *run_options };

// Option o of `a` as text: exact ("%.17g" gives back the same double) or
// short for messages.
static void option_str(const run_option *o, const gk_train_args *a, int exact, char *buf, size_t n) {
  const char *field = (const char *)a + o->offset;
  if (o->kind == 'i') snprintf(buf, n, "%lld", (long long)*(const int64_t *)(const void *)field);
  else if (o->kind == 'u') snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field);
  else snprintf(buf, n, exact ? "%.17g" : "%g", *(const double *)(const void *)field);
}

static int option_equal(const run_option *o, const gk_train_args *x, const gk_train_args *y) {
  const char *fx = (const char *)x + o->offset, *fy = (const char *)y + o->offset;
  if (o->kind == 'i') return *(const int64_t *)(const void *)fx == *(const int64_t *)(const void *)fy;
  if (o->kind == 'u') return *(const uint64_t *)(const void *)fx == *(const uint64_t *)(const void *)fy;
  return *(const double *)(const void *)fx == *(const double *)(const void *)fy;
}

// A finite number written with "%.17g" (no blanks, nothing after it).
static int parse_real(const char *s, double *out) {
  if (!*s || !(s[0] == '-' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) return 0;
  char *end;
  *out = strtod(s, &end);
  return *end == 0 && isfinite(*out);
}

// Digits only, no leading zero (but "0"), below 2^64.
static int parse_u64(const char *s, uint64_t *out) {
  if (!*s || (s[0] == '0' && s[1])) return 0;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

// The data file's size and checksum, recorded so that a resumed run can
// tell another file from the one it was trained on.
static void data_identity(const trainer *t, char *bytes, size_t nb, char *crc, size_t nc) {
  snprintf(bytes, nb, "%zu", t->task.text_len);
  snprintf(crc, nc, "%08x", (unsigned)gk_st_crc32(0, t->task.text, t->task.text_len));
}

// The parameter that holds element i of the flat parameter array (or, in
// the padding after a parameter, that parameter): the one starting last at
// or before i (the array lists them in another order than their offsets).
static const gk_param *param_at(const gk_model *m, int64_t i) {
  const gk_param *p = &m->params[0];
  for (int k = 0; k < m->nparams; k++)
    if (m->params[k].offset <= i && (p->offset > i || m->params[k].offset > p->offset)) p = &m->params[k];
  return p;
}

// Whether the training state may be saved or resumed: every weight and
// first moment finite, every second moment finite and not negative (AdamW
// takes its square root). If not, what is wrong into buf and 0.
static int state_ok(const trainer *t, char *buf, size_t n) {
  const gk_model *m = &t->model;
  const float *arrays[3] = {m->w, t->exp_avg, t->exp_avg_sq};
  static const char *const what[3] = {"weight", "AdamW first moment (exp_avg) of", "AdamW second moment (exp_avg_sq) of"};
  for (int a = 0; a < 3; a++)
    for (int64_t i = 0; i < m->n_total; i++) {
      float x = arrays[a][i];
      if (isfinite(x) && !(a == 2 && x < 0)) continue;
      const gk_param *p = param_at(m, i);
      snprintf(buf, n, "the %s '%s' is %g at element %lld", what[a], p->name, (double)x, (long long)(i - p->offset));
      return 0;
    }
  return 1;
}

static gk_status save_checkpoint(trainer *t, const char *path) {
  char why[256];
  if (!state_ok(t, why, sizeof why))
    return gk_nn_fail(GK_ERR_NON_FINITE, "step %lld: %s; '%s' was not written%s%s", (long long)t->step, why, path,
                   last_good(t) ? "; the last good checkpoint is " : "", last_good(t) ? last_good(t) : "");
  gk_model *m = &t->model;
  int n = m->nparams + 2;
  gk_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  if (!ts) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    ts[i] = (gk_st_tensor){p->name, GK_ST_F32, p->rank, {p->shape[0], p->shape[1]}, m->w + p->offset,
                           (size_t)p->numel * sizeof(float)};
  }
  ts[m->nparams] = (gk_st_tensor){"optimizer.exp_avg", GK_ST_F32, 1, {m->n_total}, t->exp_avg,
                                  (size_t)m->n_total * sizeof(float)};
  ts[m->nparams + 1] = (gk_st_tensor){"optimizer.exp_avg_sq", GK_ST_F32, 1, {m->n_total}, t->exp_avg_sq,
                                      (size_t)m->n_total * sizeof(float)};
  enum { MAX_META = 3 + N_RUN_OPTIONS + 5 };
  char config[512], step[32], values[N_RUN_OPTIONS][40], data_bytes[32], data_crc[16], figures[3][40];
  gk_st_meta meta[MAX_META];
  size_t nmeta = 0;
  config_string(t, config, sizeof config);
  snprintf(step, sizeof step, "%lld", (long long)t->step);
  meta[nmeta++] = (gk_st_meta){"format", "gradkern-checkpoint-1"};
  meta[nmeta++] = (gk_st_meta){"config", config};
  meta[nmeta++] = (gk_st_meta){"step", step};
  for (int k = 0; k < N_RUN_OPTIONS; k++) {
    option_str(&run_options[k], &t->a, 1, values[k], sizeof values[k]);
    meta[nmeta++] = (gk_st_meta){run_options[k].key, values[k]};
  }
  if (t->a.task == GK_TASK_TEXT) {
    data_identity(t, data_bytes, sizeof data_bytes, data_crc, sizeof data_crc);
    meta[nmeta++] = (gk_st_meta){"data_bytes", data_bytes};
    meta[nmeta++] = (gk_st_meta){"data_crc32", data_crc};
  }
  const char *figure_keys[3] = {"train_loss", "eval_loss", "eval_accuracy"};
  double figure_values[3] = {t->train_loss, t->ev.loss, t->a.task == GK_TASK_TEXT ? NAN : t->ev.accuracy};
  for (int k = 0; k < 3; k++)
    if (isfinite(figure_values[k])) {
      snprintf(figures[k], sizeof figures[k], "%.17g", figure_values[k]);
      meta[nmeta++] = (gk_st_meta){figure_keys[k], figures[k]};
    }
  gk_status s = gk_st_save_checksummed(path, ts, (size_t)n, meta, nmeta);
  free(ts);
  if (s == GK_SUCCESS) t->last_checkpoint = path;
  return s;
}

// The differences between this run and the checkpoint's recorded options
// and data, one "  --opt this (the checkpoint: that)" line each, into *diff.
// Values that are recorded but not valid are errors; options or data not
// recorded (older files) are counted in *unrecorded.
static gk_status compare_run(const trainer *t, const gk_st_file *f, const char *path, gk_nn_buf *diff,
                             int *unrecorded) {
  *unrecorded = 0;
  char mine[64], theirs[64], my_bytes[32], my_crc[16];
  for (int k = 0; k < N_RUN_OPTIONS; k++) {
    const run_option *o = &run_options[k];
    const char *v = gk_st_metadata(f, o->key);
    if (!v) {
      (*unrecorded)++;
      continue;
    }
    // Parsed as the option would be on the command line: the same syntax
    // and range checks.
    gk_train_args saved = t->a;
    if (gk_train_args_set(&saved, o->option, v) != GK_SUCCESS) {
      char why[300];
      snprintf(why, sizeof why, "%s", gk_last_error());
      return gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': metadata %s '%.40s' is not valid (%s)", path, o->key, v, why);
    }
    if (!option_equal(o, &saved, &t->a)) {
      option_str(o, &t->a, 0, mine, sizeof mine);
      option_str(o, &saved, 0, theirs, sizeof theirs);
      gk_nn_buf_printf(diff, "  %s %s (the checkpoint: %s)\n", o->option, mine, theirs);
    }
  }
  if (t->a.task != GK_TASK_TEXT) return GK_SUCCESS;
  const char *bytes = gk_st_metadata(f, "data_bytes"), *crc = gk_st_metadata(f, "data_crc32");
  if (!bytes || !crc) {
    (*unrecorded)++;
    return GK_SUCCESS;
  }
  uint64_t nbytes;
  int crc_ok = strlen(crc) == 8 && strspn(crc, "0123456789abcdef") == 8;
  if (!parse_u64(bytes, &nbytes) || !crc_ok)
    return gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': metadata %s '%.40s' is not valid (%s)", path,
                   crc_ok ? "data_bytes" : "data_crc32", crc_ok ? bytes : crc,
                   crc_ok ? "a byte count" : "8 lowercase hex digits");
  data_identity(t, my_bytes, sizeof my_bytes, my_crc, sizeof my_crc);
  if (nbytes != t->task.text_len || strcmp(crc, my_crc))
    gk_nn_buf_printf(diff, "  --data '%s': %s byte%s, crc32 %s (the checkpoint's data: %s byte%s, crc32 %s)\n",
                     t->a.data, my_bytes, gk_plural((long long)t->task.text_len), my_crc, bytes,
                     gk_plural((long long)nbytes), crc);
  return GK_SUCCESS;
}

// A metadata figure (train_loss, ...): NAN when absent; *ok 0 when present
// but not a finite number.
static double figure(const gk_st_file *f, const char *key, int *ok) {
  const char *v = gk_st_metadata(f, key);
  double x;
  if (!v) return NAN;
  if (!parse_real(v, &x)) {
    *ok = 0;
    return NAN;
  }
  return x;
}

static gk_status load_checkpoint(trainer *t, const char *path) {
  gk_model *m = &t->model;
  gk_st_file *f;
  gk_status s = gk_st_load(path, &f);
  if (s != GK_SUCCESS) return s;
  size_t checked;
  if ((s = gk_st_verify_checksums(f, &checked)) != GK_SUCCESS) {
    gk_st_close(f);
    return s;
  }
  const char *format = gk_st_metadata(f, "format"), *config = gk_st_metadata(f, "config"),
             *step = gk_st_metadata(f, "step"), *seed = gk_st_metadata(f, "seed");
  char want[512];
  config_string(t, want, sizeof want);
  uint64_t st;
  gk_nn_buf diff = {0};
  int unrecorded = 0, ok = 1;
  if (!format || strcmp(format, "gradkern-checkpoint-1") || !config || !step || !seed) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s' is not a gradkern training checkpoint (metadata format, config, "
                "step and seed missing)", path);
  } else if (strcmp(config, want)) {
    s = gk_nn_fail(GK_ERR_INVALID_VALUE, "checkpoint '%s' was made with another configuration:\n  checkpoint: %s\n"
                "  this run:   %s", path, config, want);
  } else if (!parse_u64(step, &st) || st < 1 || st > (uint64_t)1e12) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': metadata step '%.40s' is not a step count (1 to 1000000000000)",
                path, step);
  } else {
    s = compare_run(t, f, path, &diff, &unrecorded);
    t->train_loss = figure(f, "train_loss", &ok);
    t->ev.loss = figure(f, "eval_loss", &ok);
    t->ev.accuracy = figure(f, "eval_accuracy", &ok);
    if (s == GK_SUCCESS && !ok)
      s = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': metadata train_loss, eval_loss or eval_accuracy is not a "
                  "finite number", path);
    if (s == GK_SUCCESS && diff.failed) s = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "checkpoint '%s': no memory", path);
    if (s == GK_SUCCESS && diff.len && !t->a.allow_changes)
      s = gk_nn_fail(GK_ERR_INVALID_VALUE,
                  "--resume '%s': this run differs from the checkpoint's:\n%sadd --allow-changes to continue with "
                  "the changes",
                  path, diff.data);
    for (int i = 0; i < m->nparams && s == GK_SUCCESS; i++) {
      const gk_param *p = &m->params[i];
      s = gk_st_read(f, p->name, GK_ST_F32, p->rank, p->shape, m->w + p->offset);
    }
    if (s == GK_SUCCESS) s = gk_st_read(f, "optimizer.exp_avg", GK_ST_F32, 1, &m->n_total, t->exp_avg);
    if (s == GK_SUCCESS) s = gk_st_read(f, "optimizer.exp_avg_sq", GK_ST_F32, 1, &m->n_total, t->exp_avg_sq);
    char why[256];
    if (s == GK_SUCCESS && !state_ok(t, why, sizeof why))
      s = gk_nn_fail(GK_ERR_NON_FINITE, "checkpoint '%s' cannot be resumed: %s", path, why);
    if (s == GK_SUCCESS) t->step = (int64_t)st;
  }
  if (s == GK_SUCCESS && diff.len)
    fprintf(stderr, "gradkern train: note: continuing the run of '%s' with changes (--allow-changes):\n%s", path,
            diff.data);
  if (s == GK_SUCCESS && !checked)
    fprintf(stderr, "gradkern train: note: checkpoint '%s' has no checksums (an older file): its data cannot be "
            "verified\n", path);
  if (s == GK_SUCCESS && unrecorded)
    fprintf(stderr, "gradkern train: note: checkpoint '%s' does not record its run's options%s (an older file): "
            "they cannot be compared with this run's\n", path, t->a.task == GK_TASK_TEXT ? " and data" : "");
  gk_nn_buf_free(&diff);
  gk_st_close(f);
  return s;
}

// The files the run will write, checked before it starts (so that a long run
// is not lost at its end): each must be writable, and neither may be the
// --data or --resume file or the other output. Temporary files that a killed
// run left beside them are removed.
static gk_status check_outputs(const gk_train_args *a) {
  const char *outs[2] = {a->checkpoint, a->plot}, *names[2] = {"--checkpoint", "--plot"};
  for (int k = 0; k < 2; k++) {
    if (!outs[k]) continue;
    if (a->data && gk_nn_same_file(outs[k], a->data))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s '%s' is the --data file: the run would overwrite its text", names[k],
                     outs[k]);
    if (k == 1 && a->checkpoint && gk_nn_same_file(a->plot, a->checkpoint))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--plot '%s' is the --checkpoint file", a->plot);
    if (k == 1 && a->resume && gk_nn_same_file(a->plot, a->resume))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--plot '%s' is the --resume file: the plot would overwrite it", a->plot);
    int removed = gk_nn_remove_stale_temps(outs[k]);
    if (removed)
      fprintf(stderr, "gradkern train: note: removed %d temporary file%s that a killed run left beside '%s'\n",
              removed, gk_plural(removed), outs[k]);
    gk_status s = gk_nn_check_writable(outs[k], names[k]);
    if (s != GK_SUCCESS) return s;
  }
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- evaluation

static gk_status evaluate(trainer *t, eval_result *out) {
  gk_run *r = t->eval_run;
  int B = t->a.batch, T = t->eval_len;
  int64_t rows = (int64_t)B * T, V = t->model.cfg.vocab;
  double loss_sum = 0;
  int64_t counted = 0, correct = 0;
  int batches = t->a.eval_batches;
  int64_t windows = gk_task_eval_windows(&t->task, t->eval_len);
  int64_t covering = (windows + B - 1) / B;  // batches that hold every window
  if (windows > 0 && covering < batches) batches = (int)covering;
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
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "--dtype %s: this build trains in f32 only", gk_dtype_name(a->dtype));
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
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "train: no memory for the optimizer state");
  if (a->resume && (s = load_checkpoint(t, a->resume)) != GK_SUCCESS) return s;
  if (t->step > a->steps)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--resume: the checkpoint is at step %lld, past --steps %lld",
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

int gk_cmd_train(int argc, char **argv) { return gk_train_run(argc, argv, NULL); }

int gk_train_run(int argc, char **argv, const gk_train_hooks *hooks) {
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
  if (check_outputs(a) != GK_SUCCESS) {
    fprintf(stderr, "gradkern train: %s\n", gk_last_error());
    return 2;
  }
  t.train_loss = NAN;
  t.ev = (eval_result){NAN, NAN};
  if (setup(&t) != GK_SUCCESS) {
    int rc = fail("setup");
    teardown(&t);
    return rc;
  }
  if (a->resume && t.step == a->steps) {
    // Nothing to train: say so, with the figures the checkpoint recorded.
    printf("the run in '%s' is finished: step %lld of --steps %lld (to train on, raise --steps and add "
           "--allow-changes)\n",
           a->resume, (long long)t.step, (long long)a->steps);
    gk_run_summary sum = {t.train_loss, t.ev.loss, a->task == GK_TASK_TEXT ? NAN : t.ev.accuracy,
                          a->task == GK_TASK_TEXT ? t.ev.loss / log(2.0) : NAN, NULL};
    gk_progress_figures(stdout, &sum);
    teardown(&t);
    return 0;
  }
  gk_model *m = &t.model;
  double mib = 1.0 / (1 << 20);
  size_t param_bytes = (size_t)m->n_total * sizeof(float) * 4;  // weights, gradients, two moments
  if (!a->quiet)
    printf("%s on %s: %d layer%s, width %d, %lld parameters; batch %d x %d tokens; memory %.1f MiB "
           "(parameters and AdamW %.1f, training activations %.1f, evaluation %.1f); %d thread%s\n",
           gk_model_name(a->model), gk_task_name(a->task), a->layers, gk_plural(a->layers), a->width,
           (long long)m->n_total, a->batch, a->seq_len,
           (param_bytes + gk_run_bytes(t.run) + gk_run_bytes(t.eval_run)) * mib, param_bytes * mib,
           gk_run_bytes(t.run) * mib, gk_run_bytes(t.eval_run) * mib, gk_get_num_threads(),
           gk_plural(gk_get_num_threads()));
  gk_lr_schedule sched;
  gk_lr_schedule_init(&sched, a->lr, a->min_lr, a->warmup, a->steps);
  gk_progress_init(&t.progress, stdout, a->quiet ? GK_PROGRESS_QUIET : GK_PROGRESS_AUTO, a->steps, t.step,
                   (int64_t)a->batch * a->seq_len, 50);
  double loss = NAN;
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
              last_good(&t) ? "; the last good checkpoint is " : "", last_good(&t) ? last_good(&t) : "");
      rc = 1;
      break;
    }
    if (s != GK_SUCCESS || optimizer_step(&t, gk_lr_at(&sched, t.step)) != GK_SUCCESS) {
      rc = fail("optimizer");
      break;
    }
    t.step++;
    t.train_loss = loss;
    t.loss_x[t.n_loss] = (double)t.step;
    t.loss_y[t.n_loss++] = loss;
    gk_progress_update(&t.progress, t.step, loss, gk_lr_at(&sched, t.step - 1));
    bool stop = hooks && hooks->on_step &&
                hooks->on_step(hooks->ctx, t.step, a->steps, loss, gk_lr_at(&sched, t.step - 1));
    bool last = t.step == a->steps || (a->stop_after > 0 && t.step - first == a->stop_after) || stop;
    if ((a->eval_every > 0 && t.step % a->eval_every == 0) || last) {
      if (evaluate(&t, &t.ev) != GK_SUCCESS) {
        rc = fail("evaluation");
        break;
      }
      t.eval_x[t.n_eval] = (double)t.step;
      t.eval_y[t.n_eval++] = t.ev.loss;
      if (hooks && hooks->on_eval)
        hooks->on_eval(hooks->ctx, t.step, t.ev.loss, a->task == GK_TASK_TEXT ? NAN : t.ev.accuracy);
      if (a->task == GK_TASK_TEXT)
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, %.3f bits per byte", (long long)t.step,
                         t.ev.loss, t.ev.loss / log(2.0));
      else
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, eval accuracy %.1f%%", (long long)t.step,
                         t.ev.loss, 100 * t.ev.accuracy);
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
    gk_run_summary sum = {t.train_loss, t.ev.loss, a->task == GK_TASK_TEXT ? NAN : t.ev.accuracy,
                          a->task == GK_TASK_TEXT ? t.ev.loss / log(2.0) : NAN, t.last_checkpoint};
    gk_progress_summary(&t.progress, &sum);
  }
  teardown(&t);
  return rc;
}
