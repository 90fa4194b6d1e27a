// `gradkern train`: a Mamba or LLaMA language model trained end to end.
//
// Each step: batch `step` of the task (a pure function of seed and step, so
// a resumed run sees the same data), forward, loss, backward, global-norm
// clipping, AdamW (decayed matrices and embedding; norms, biases, A_log, D,
// dt_bias without decay) at the scheduled learning rate. With --dtype bf16
// or f16 the runs compute in 16 bits over f32 master weights (mixed
// precision, src/nn/model.h); f16 scales the loss dynamically and skips the
// steps whose gradients overflow. With --device vulkan or webgpu, forward,
// backward, clipping and AdamW run on that device. Every eval_every
// steps and at the end: held-out loss and token accuracy (synthetic tasks)
// or bits per byte (text). Checkpoints (safetensors: weights by name, AdamW
// moments, and metadata described at "checkpoints" below) are written
// atomically, and only with a finite state; the output files are checked
// before the first step. Under mpirun the ranks train data-parallel (see
// "data-parallel" below and src/nn/dist.h).
#include "train.h"

#include "eval_lengths.h"

#include "nn/dist.h"
#include "nn/bpe.h"
#include "nn/fileio.h"
#include "nn/hf.h"
#include "nn/layers.h"
#include "nn/plot.h"
#include "nn/progress.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  gk_bpe *tokenizer;               // --tokenizer (NULL: bytes)
  char *tokenizer_path;            // its absolute path, recorded in checkpoints
  gk_st_dtype hf_dtype;            // --init: the dtype of the model directory's tensors
  gk_task task;
  gk_model model;
  gk_run *run, *eval_run;
  float *exp_avg, *exp_avg_sq;
  // --device vulkan|webgpu: the training run, the AdamW moments (exp_avg
  // then exp_avg_sq, n_total each) and the model's device copy live on the
  // device; the host copies (weights, moments) are brought up to date
  // before each evaluation and checkpoint (sync_device). Evaluation runs on
  // the host.
  gk_buffer *dev_moments;
  int64_t step;                    // steps done
  int32_t *inputs, *targets;
  int eval_len;                    // sequence length of evaluation
  gk_progress progress;
  gk_loss_scaler scaler;           // --dtype f16: the dynamic loss scale (else unused)
  double *loss_x, *loss_y, *eval_x, *eval_y;
  int64_t n_loss, n_eval;
  double train_loss;               // the last training loss (NAN: none yet)
  eval_result ev;                  // the last evaluation (NANs: none yet)
  const char *last_checkpoint;     // the last checkpoint this invocation wrote (NULL: none)
  // Data-parallel: rank of world; each rank computes rows [rank * batch,
  // (rank + 1) * batch) of every global batch of world * batch. With
  // --zero 1, exp_avg and exp_avg_sq hold only the shard [lo, hi) of the
  // flat parameter array; otherwise lo = 0, hi = n_total.
  gk_dist *dist;
  gk_grad_sync *sync;
  int rank, world;
  int64_t lo, hi;
  bool follower_stop;              // stopping because another rank failed (it gives the message)
  const gk_train_hooks *hooks;     // a program embedding the trainer (NULL: none)
} trainer;

// The checkpoint a failed run can go back to: the last one written, else
// the one it resumed from (checked when it was loaded); NULL for none.
static const char *last_good(const trainer *t) { return t->last_checkpoint ? t->last_checkpoint : t->a.resume; }

// ---------------------------------------------------------------- checkpoints
//
// A checkpoint holds every parameter by name and the AdamW moments
// (optimizer.exp_avg, optimizer.exp_avg_sq), with metadata:
//   format   "gradkern-checkpoint-1"
//   config   everything that shapes the weights, the computation or the batches
//            (config_string);
//            a checkpoint of another configuration is refused, but for
//            its seq_len and batch (global: --batch times the ranks):
//            another --seq-len or batch is a change of the run (with
//            --allow-changes a run trained on short sequences goes on
//            with longer ones, in smaller batches)
//   step     steps done;  seed
//   steps lr min_lr warmup weight_decay clip   the run's options (run_options)
//   data_bytes data_crc32                      --task text: the data file
//   tokenizer                                  --tokenizer: its absolute path (its
//                                              fingerprint is in config)
//   dtype                                      what the run computed in (f32, bf16,
//                                              f16); the weights are the f32 masters
//                                              whatever it is, so a run resumes in
//                                              any dtype (with a note when it changes)
//   loss_scale loss_scale_good_steps skipped_steps   f16: the loss scaler's state
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
           c->arch == GK_ARCH_LLAMA ? c->rope_theta : 0, gk_task_name(t->a.task), t->a.seq_len,
           t->a.batch * t->world);
  // A norm epsilon other than the default 1e-5 (from --init).
  if (c->norm_eps != 1e-5) snprintf(buf + strlen(buf), n - strlen(buf), " norm_eps=%.17g", c->norm_eps);
  // An untied LM head (from --init) is one more weight.
  if (c->untied_head) snprintf(buf + strlen(buf), n - strlen(buf), " untied_head=1");
  // Selective copying of other sizes than the starting 8 data tokens of 8 values.
  if (t->a.task == GK_TASK_COPY && (t->a.copy_data != 8 || t->a.copy_values != 8))
    snprintf(buf + strlen(buf), n - strlen(buf), " copy_data=%d copy_values=%d", t->a.copy_data, t->a.copy_values);
  // With --tokenizer: which tokenizer (another one makes other batches).
  if (t->tokenizer)
    snprintf(buf + strlen(buf), n - strlen(buf), " tokenizer=%08x", (unsigned)gk_bpe_fingerprint(t->tokenizer));
}

// A configuration string without its integer field `key` (" seq_len=",
// " batch=") into rest, and the field's value (0 if it has none).
static void split_field(const char *config, const char *key, char *rest, size_t n, int *value) {
  const char *at = strstr(config, key);
  size_t len = strlen(key);
  *value = 0;
  if (!at) {
    snprintf(rest, n, "%s", config);
    return;
  }
  char *end;
  long v = strtol(at + len, &end, 10);
  if (end == at + len || v < 1 || v > INT_MAX) end = (char *)at;  // not a number: kept, so the strings differ
  else *value = (int)v;
  snprintf(rest, n, "%.*s%s", (int)(at - config), config, end);
}

// A configuration string without the fields a resumed run may change, its
// sequence length and its (global) batch, into rest, and their values.
static void split_changeable(const char *config, char *rest, size_t n, int *seq_len, int *batch) {
  char tmp[512];
  split_field(config, " seq_len=", tmp, sizeof tmp, seq_len);
  split_field(tmp, " batch=", rest, n, batch);
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
  enum { MAX_META = 3 + N_RUN_OPTIONS + 6 + 4 };
  char config[512], step[32], values[N_RUN_OPTIONS][40], data_bytes[32], data_crc[16], figures[3][40], scaler[3][40];
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
  if (t->tokenizer_path) meta[nmeta++] = (gk_st_meta){"tokenizer", t->tokenizer_path};
  meta[nmeta++] = (gk_st_meta){"dtype", gk_dtype_name(t->a.dtype)};
  if (t->a.dtype == GK_F16) {
    snprintf(scaler[0], sizeof scaler[0], "%.17g", t->scaler.scale);
    snprintf(scaler[1], sizeof scaler[1], "%lld", (long long)t->scaler.good_steps);
    snprintf(scaler[2], sizeof scaler[2], "%lld", (long long)t->scaler.skipped);
    meta[nmeta++] = (gk_st_meta){"loss_scale", scaler[0]};
    meta[nmeta++] = (gk_st_meta){"loss_scale_good_steps", scaler[1]};
    meta[nmeta++] = (gk_st_meta){"skipped_steps", scaler[2]};
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

// The checkpoint's dtype against this run's: a note when they differ (the
// f32 masters carry over); f16 to f16 takes the loss scaler's state back.
// Files without a dtype were trained in f32.
static gk_status resume_dtype(trainer *t, const gk_st_file *f, const char *path) {
  const char *saved = gk_st_metadata(f, "dtype");
  if (!saved) saved = "f32";
  const char *mine = gk_dtype_name(t->a.dtype);
  if (strcmp(saved, mine))
    fprintf(stderr, "gradkern train: note: checkpoint '%s' was trained in %s; continuing in %s from its f32 master "
            "weights\n", path, saved, mine);
  if (t->a.dtype != GK_F16 || strcmp(saved, "f16")) return GK_SUCCESS;
  const char *scale = gk_st_metadata(f, "loss_scale"), *good = gk_st_metadata(f, "loss_scale_good_steps"),
             *skipped = gk_st_metadata(f, "skipped_steps");
  double x;
  uint64_t g, k;
  if (!scale || !good || !skipped || !parse_real(scale, &x) || !(x > 0) || !parse_u64(good, &g) ||
      !parse_u64(skipped, &k))
    return gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': an f16 run's loss_scale, loss_scale_good_steps or "
                      "skipped_steps is missing or not valid", path);
  t->scaler.scale = x;
  t->scaler.good_steps = (int64_t)g;
  t->scaler.skipped = (int64_t)k;
  return GK_SUCCESS;
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
  char want[512], want_rest[512], have_rest[512] = "";
  int want_seq_len, have_seq_len = 0, want_batch, have_batch = 0;
  config_string(t, want, sizeof want);
  split_changeable(want, want_rest, sizeof want_rest, &want_seq_len, &want_batch);
  if (config) split_changeable(config, have_rest, sizeof have_rest, &have_seq_len, &have_batch);
  uint64_t st;
  gk_nn_buf diff = {0};
  int unrecorded = 0, ok = 1;
  if (!format || strcmp(format, "gradkern-checkpoint-1") || !config || !step || !seed) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s' is not a gradkern training checkpoint (metadata format, config, "
                "step and seed missing)", path);
  } else if (strcmp(have_rest, want_rest)) {
    s = gk_nn_fail(GK_ERR_INVALID_VALUE, "checkpoint '%s' was made with another configuration:\n  checkpoint: %s\n"
                "  this run:   %s", path, config, want);
  } else if (!parse_u64(step, &st) || st < 1 || st > (uint64_t)1e12) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint '%s': metadata step '%.40s' is not a step count (1 to 1000000000000)",
                path, step);
  } else {
    s = compare_run(t, f, path, &diff, &unrecorded);
    if (have_seq_len != want_seq_len)
      gk_nn_buf_printf(&diff, "  --seq-len %d (the checkpoint: %d)\n", want_seq_len, have_seq_len);
    if (have_batch != want_batch && t->world == 1)
      gk_nn_buf_printf(&diff, "  --batch %d (the checkpoint: %d sequences a step)\n", want_batch, have_batch);
    else if (have_batch != want_batch)
      gk_nn_buf_printf(&diff, "  --batch %d on %d ranks: %d sequences a step (the checkpoint: %d)\n", t->a.batch,
                       t->world, want_batch, have_batch);
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
    if (s == GK_SUCCESS) s = resume_dtype(t, f, path);
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
  const char *outs[3] = {a->checkpoint, a->plot, a->eval_out}, *names[3] = {"--checkpoint", "--plot", "--eval-out"};
  for (int k = 0; k < 3; k++) {
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

// Each rank evaluates its rows of the global batches; the sums are added
// over the ranks.
static gk_status evaluate(trainer *t, eval_result *out) {
  gk_run *r = t->eval_run;
  int B = t->a.batch, T = t->eval_len, global = B * t->world;
  int64_t rows = (int64_t)B * T, V = t->model.cfg.vocab;
  double loss_sum = 0;
  int64_t counted = 0, correct = 0;
  int batches = t->a.eval_batches;
  int64_t windows = gk_task_eval_windows(&t->task, t->eval_len);
  int64_t covering = (windows + global - 1) / global;  // batches that hold every window
  if (windows > 0 && covering < batches) batches = (int)covering;
  for (int i = 0; i < batches; i++) {
    gk_status s = gk_task_rows(&t->task, GK_SPLIT_EVAL, t->a.seed, i, global, t->rank * B, B, T, t->inputs,
                               t->targets);
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
  double sums[3] = {loss_sum, (double)counted, (double)correct};
  gk_status s = gk_dist_sum(t->dist, sums, 3);
  if (s != GK_SUCCESS) return s;
  loss_sum = sums[0];
  counted = (int64_t)sums[1];
  correct = (int64_t)sums[2];
  out->loss = counted ? loss_sum / (double)counted : NAN;
  out->accuracy = counted ? (double)correct / (double)counted : NAN;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- data-parallel
//
// Every rank holds the whole weights and gradients; rank 0 alone reads and
// writes checkpoints and prints. A failure that every rank sees alike (a
// non-finite loss or norm, a checkpoint rank 0 could not read or write)
// stops every rank with the same exit code, rank 0 giving the message; any
// other failure on one rank stops the whole job (gk_dist_abort).

// Whether the moments are sharded across more than one rank.
static bool sharded(const trainer *t) { return t->hi - t->lo < t->model.n_total; }

// After rank 0's *failed: 0 if it did not fail; else 1, and a rank other
// than 0 marks itself to stop without a message (rank 0 gives it).
static int agree_with_rank0(trainer *t, int *failed) {
  if (gk_dist_broadcast(t->dist, failed, sizeof *failed) != GK_SUCCESS) {
    fprintf(stderr, "gradkern train: rank %d: %s\n", t->rank, gk_last_error());
    gk_dist_abort(t->dist, 1);
  }
  return *failed != 0;
}

// With sharded moments, rank 0 holds whole ones (gathered, or to be filled
// by a checkpoint) while it saves or loads; *shard keeps its own.
static void whole_moments(trainer *t, float *shard[2], bool gather) {
  shard[0] = t->exp_avg;
  shard[1] = t->exp_avg_sq;
  if (!sharded(t)) return;
  float *whole[2] = {NULL, NULL};
  size_t n = (size_t)t->model.n_total;
  if (t->rank == 0 && (!(whole[0] = calloc(n, sizeof(float))) || !(whole[1] = calloc(n, sizeof(float))))) {
    fprintf(stderr, "gradkern train: rank 0: no memory for the whole AdamW moments (%zu floats)\n", 2 * n);
    gk_dist_abort(t->dist, 1);
  }
  for (int k = 0; k < 2 && gather; k++)
    if (gk_dist_gather(t->dist, shard[k], whole[k], t->model.n_total) != GK_SUCCESS) {
      fprintf(stderr, "gradkern train: rank %d: %s\n", t->rank, gk_last_error());
      gk_dist_abort(t->dist, 1);
    }
  if (t->rank == 0) {
    t->exp_avg = whole[0];
    t->exp_avg_sq = whole[1];
  }
}

// Back to this rank's own moments (freeing rank 0's whole ones).
static void shard_moments(trainer *t, float *shard[2]) {
  if (t->exp_avg != shard[0]) {
    free(t->exp_avg);
    free(t->exp_avg_sq);
  }
  t->exp_avg = shard[0];
  t->exp_avg_sq = shard[1];
}

// --resume: rank 0 reads the checkpoint, whatever the number of ranks that
// wrote it, and hands the state to the others.
static gk_status resume(trainer *t) {
  if (t->world == 1) return load_checkpoint(t, t->a.resume);
  gk_model *m = &t->model;
  float *shard[2];
  whole_moments(t, shard, false);
  gk_status s = t->rank == 0 ? load_checkpoint(t, t->a.resume) : GK_SUCCESS;
  int failed = s != GK_SUCCESS;
  if (agree_with_rank0(t, &failed)) {
    shard_moments(t, shard);
    if (t->rank) t->follower_stop = true;
    return t->rank ? GK_ERR_INVALID_VALUE : s;
  }
  double figures[4] = {(double)t->step, t->train_loss, t->ev.loss, t->ev.accuracy};
  s = gk_dist_broadcast(t->dist, figures, sizeof figures);
  if (s == GK_SUCCESS) s = gk_dist_broadcast(t->dist, m->w, sizeof(float) * (size_t)m->n_total);
  for (int k = 0; k < 2 && s == GK_SUCCESS; k++) {
    float *whole = k ? t->exp_avg_sq : t->exp_avg;
    s = sharded(t) ? gk_dist_scatter(t->dist, whole, shard[k], m->n_total)
                   : gk_dist_broadcast(t->dist, whole, sizeof(float) * (size_t)m->n_total);
  }
  shard_moments(t, shard);
  t->step = (int64_t)figures[0];
  t->train_loss = figures[1];
  t->ev = (eval_result){figures[2], figures[3]};
  return s;
}

// A checkpoint of the whole state, written by rank 0 (the moments gathered
// when sharded). Every rank returns rank 0's status.
static gk_status save_everywhere(trainer *t, const char *path) {
  if (t->world == 1) return save_checkpoint(t, path);
  float *shard[2];
  whole_moments(t, shard, true);
  gk_status s = t->rank == 0 ? save_checkpoint(t, path) : GK_SUCCESS;
  shard_moments(t, shard);
  int failed = s != GK_SUCCESS;
  if (agree_with_rank0(t, &failed) && t->rank) {
    t->follower_stop = true;
    return GK_ERR_INVALID_VALUE;
  }
  if (!failed) t->last_checkpoint = path;
  return s;
}

// The step's batch (this rank's rows of the global batch), forward and
// backward; then the gradient and the loss of the whole global batch: each
// rank's part weighs its share of the counted targets, as in one process's
// mean. The buckets reduce during backward (gk_grad_sync).
static gk_status train_step(trainer *t, double *loss) {
  const gk_train_args *a = &t->a;
  gk_status s = gk_task_rows(&t->task, GK_SPLIT_TRAIN, a->seed, t->step, a->batch * t->world, t->rank * a->batch,
                             a->batch, a->seq_len, t->inputs, t->targets);
  if (s != GK_SUCCESS) return s;
  if (t->world == 1) return gk_run_step(t->run, t->inputs, t->targets, loss);
  double mine = 0, counted;
  for (int64_t i = 0; i < (int64_t)a->batch * a->seq_len; i++) mine += t->targets[i] != GK_IGNORE_INDEX;
  counted = mine;
  if ((s = gk_dist_sum(t->dist, &counted, 1)) != GK_SUCCESS) return s;
  gk_grad_sync_begin(t->sync, counted > 0 ? mine / counted : 0);
  s = gk_run_step(t->run, t->inputs, t->targets, loss);
  if (s == GK_SUCCESS) s = gk_grad_sync_end(t->sync);
  double sum = mine > 0 ? *loss * mine : 0;
  if (s == GK_SUCCESS) s = gk_dist_sum(t->dist, &sum, 1);
  *loss = counted > 0 ? sum / counted : NAN;
  return s;
}

// f16: the gradients divided by the loss scale (this rank's shard when
// sharded), the scale updated; false (on every rank) when any gradient of
// any rank is not finite: the step is skipped.
static gk_status unscale_gradients(trainer *t, bool *finite) {
  int bad = !gk_loss_scaler_unscale(&t->scaler, t->model.g + t->lo, t->hi - t->lo);
  gk_status s = gk_dist_max(t->dist, &bad);
  if (s != GK_SUCCESS) return s;
  *finite = !bad;
  gk_loss_scaler_update(&t->scaler, *finite);
  return GK_SUCCESS;
}

// Clipping by the global norm (0: measure only). Sharded: each rank's
// shard's sum of squares, added over the ranks; each scales its shard.
static gk_status clip_gradients(trainer *t, double *norm) {
  double max_norm = t->a.clip > 0 ? t->a.clip : DBL_MAX;
  if (!t->a.zero) {
    gk_tensor grads = gk_model_grads(&t->model);
    return gk_clip_grad_norm(1, &grads, max_norm, norm);
  }
  float *g = t->model.g;
  double sumsq = 0;
  for (int64_t i = t->lo; i < t->hi; i++) sumsq += (double)g[i] * g[i];
  gk_status s = gk_dist_sum(t->dist, &sumsq, 1);
  if (s != GK_SUCCESS) return s;
  *norm = sqrt(sumsq);
  if (!isfinite(*norm)) return gk_nn_fail(GK_ERR_NON_FINITE, "the global gradient norm is %g", *norm);
  float scale = (float)(max_norm / (*norm + 1e-6));
  if (max_norm / (*norm + 1e-6) < 1)
    for (int64_t i = t->lo; i < t->hi; i++) g[i] *= scale;
  return GK_SUCCESS;
}

// The weights must be the same on every rank: rank 0's checksum of each
// parameter against every rank's. Differing: a message naming the first
// differing tensor, and GK_ERR_INTERNAL on every rank.
static gk_status check_replicas(trainer *t) {
  if (t->world == 1) return GK_SUCCESS;
  const gk_model *m = &t->model;
  uint32_t *crc = malloc(2 * sizeof(uint32_t) * (size_t)m->nparams);
  if (!crc) gk_dist_abort(t->dist, 1);
  uint32_t *rank0 = crc + m->nparams;
  for (int i = 0; i < m->nparams; i++)
    rank0[i] = crc[i] = gk_st_crc32(0, m->w + m->params[i].offset, sizeof(float) * (size_t)m->params[i].numel);
  gk_status s = gk_dist_broadcast(t->dist, rank0, sizeof(uint32_t) * (size_t)m->nparams);
  int first = 0;  // nparams - the first differing parameter (0: none), largest over the ranks
  for (int i = m->nparams - 1; i >= 0; i--)
    if (crc[i] != rank0[i]) first = m->nparams - i;
  int differs = first;
  free(crc);
  if (s == GK_SUCCESS) s = gk_dist_max(t->dist, &first);
  if (s != GK_SUCCESS) return s;
  if (!first) return GK_SUCCESS;
  return gk_nn_fail(GK_ERR_INTERNAL, "step %lld: the weights differ between the ranks (%s): the first differing "
                    "tensor is '%s'", (long long)t->step, differs ? "this rank's differ from rank 0's" : "another "
                    "rank's differ from rank 0's", m->params[m->nparams - first].name);
}

// ---------------------------------------------------------------- the run

// Elements [first, first + n) of a rank-1 view.
static gk_tensor part(gk_tensor all, int64_t first, int64_t n) {
  all.data = (float *)all.data + first;
  all.shape[0] = n;
  return all;
}

// The AdamW moments (which 0: exp_avg, 1: exp_avg_sq) of this rank's shard,
// on the device with --device vulkan|webgpu.
static gk_tensor moments(const trainer *t, int which) {
  int64_t n = t->hi - t->lo;
  if (!t->dev_moments) return gk_t1(which ? t->exp_avg_sq : t->exp_avg, n);
  gk_tensor v = part(gk_model_grads(&t->model), 0, n);
  v.data = (float *)gk_buffer_address(t->dev_moments) + which * n;
  return v;
}

// --device vulkan|webgpu: the device's weights, gradients and moments into the
// host copies (up = false: before evaluating or saving), or the host's
// weights and moments onto the device (up: after setting up or resuming).
static gk_status sync_device(trainer *t, bool up) {
  if (!t->dev_moments) return GK_SUCCESS;
  size_t bytes = sizeof(float) * (size_t)t->model.n_total;
  gk_status s = up ? gk_model_upload(&t->model) : gk_model_download(&t->model);
  for (int k = 0; k < 2 && s == GK_SUCCESS; k++) {
    float *host = k ? t->exp_avg_sq : t->exp_avg;
    s = up ? gk_buffer_upload(t->dev_moments, k * bytes, host, bytes)
           : gk_buffer_download(t->dev_moments, k * bytes, host, bytes);
  }
  return s;
}

// `path` made absolute against the working directory (malloc'd; NULL on failure).
static char *absolute_path(const char *path) {
  char cwd[4096];
  if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return NULL;
  size_t n = strlen(path) + (path[0] == '/' ? 0 : strlen(cwd) + 1) + 1;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s%s%s", path[0] == '/' ? "" : cwd, path[0] == '/' ? "" : "/", path);
  return out;
}

// What each rank sets up on its own: the task, the model, the runs, the
// optimizer state.
static gk_status setup_here(trainer *t) {
  gk_train_args *a = &t->a;
  gk_status s;
  if (a->task == GK_TASK_COPY) s = gk_task_init_copy(&t->task, a->copy_data, a->copy_values);
  else if (a->task == GK_TASK_INDUCTION) s = gk_task_init_induction(&t->task, GK_INDUCTION_DEFAULT_VALUES);
  else if (!a->tokenizer) s = gk_task_init_text(&t->task, a->data, a->seq_len);
  else if ((s = gk_bpe_load(a->tokenizer, &t->tokenizer)) == GK_SUCCESS) {  // BPE tokens
    if (!(t->tokenizer_path = absolute_path(a->tokenizer)))
      s = gk_nn_fail(GK_NN_ERR_FILE, "--tokenizer '%s': cannot make its path absolute: %s", a->tokenizer,
                     strerror(errno));
    else s = gk_task_init_text_tokens(&t->task, a->data, a->seq_len, t->tokenizer);
  }
  if (s != GK_SUCCESS) return s;
  // Induction heads: evaluated on sequences 4 times longer than trained.
  t->eval_len = a->task == GK_TASK_INDUCTION ? 4 * a->seq_len : a->seq_len;
  if ((s = gk_task_check_seq_len(&t->task, GK_SPLIT_TRAIN, a->seq_len)) != GK_SUCCESS) return s;
  if ((s = gk_task_check_seq_len(&t->task, GK_SPLIT_EVAL, t->eval_len)) != GK_SUCCESS) return s;
  gk_loss_scaler_init(&t->scaler, 65536, 2000);  // f16 (torch's GradScaler's defaults)
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
  if (a->save_hf) {  // checked before the run, as --checkpoint is
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/model.safetensors", a->save_hf);
    if ((s = gk_nn_check_writable(probe, "--save-hf")) != GK_SUCCESS) return s;
  }
  if (a->init) {  // a Hugging Face model directory instead of random weights
    if ((s = gk_hf_load(a->init, &t->model, &t->hf_dtype)) != GK_SUCCESS) return s;
    if (t->model.cfg.vocab < t->task.vocab_size)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--init '%s' has %d tokens, fewer than the %d of the data's %s", a->init,
                        t->model.cfg.vocab, t->task.vocab_size, a->tokenizer ? "tokenizer" : "bytes");
  } else if ((s = gk_model_init(&t->model, &c, a->seed)) != GK_SUCCESS)
    return s;
  if (a->device != GK_BACKEND_CPU) {
    if (t->world > 1)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "--device %s trains in one process, not under mpirun (%d ranks)",
                        gk_backend_name(a->device), t->world);
    size_t bytes = 2 * sizeof(float) * (size_t)t->model.n_total;
    if ((s = gk_model_to_device(&t->model, a->device)) != GK_SUCCESS ||
        (s = gk_buffer_alloc(a->device, bytes, &t->dev_moments)) != GK_SUCCESS ||
        (s = gk_run_create_device(&t->model, a->batch, a->seq_len, true, &t->run)) != GK_SUCCESS)
      return s;
  } else if ((s = gk_run_create_dtype(&t->model, a->batch, a->seq_len, true, a->dtype, &t->run)) != GK_SUCCESS) {
    return s;
  }
  if ((s = gk_run_create_dtype(&t->model, a->batch, t->eval_len, false, a->dtype, &t->eval_run)) != GK_SUCCESS)
    return s;
  t->lo = 0;
  t->hi = t->model.n_total;
  if (a->zero) gk_dist_shard(t->dist, t->rank, t->model.n_total, &t->lo, &t->hi);
  size_t n = (size_t)(t->hi - t->lo) + 1;
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
  if ((s = sync_device(t, true)) != GK_SUCCESS) return s;  // the zero moments
  if (t->world > 1 && (s = gk_grad_sync_create(t->dist, &t->model, a->zero, &t->sync)) != GK_SUCCESS) return s;
  if (t->world > 1) gk_run_on_grads_ready(t->run, gk_grad_sync_ready, t->sync);
  return GK_SUCCESS;
}

// Every rank's setup (a rank that failed stops the others, quietly), then
// --resume.
static gk_status setup(trainer *t) {
  gk_train_args *a = &t->a;
  gk_status s = setup_here(t);
  int failed = s != GK_SUCCESS;
  if (gk_dist_max(t->dist, &failed) != GK_SUCCESS) return GK_ERR_INTERNAL;
  if (failed && s == GK_SUCCESS) {
    t->follower_stop = true;
    return GK_ERR_INVALID_VALUE;
  }
  if (s != GK_SUCCESS) return s;
  if (a->resume && ((s = resume(t)) != GK_SUCCESS || (s = sync_device(t, true)) != GK_SUCCESS)) return s;
  if (t->step > a->steps)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--resume: the checkpoint is at step %lld, past --steps %lld",
                   (long long)t->step, (long long)a->steps);
  return GK_SUCCESS;
}

static void teardown(trainer *t) {
  gk_grad_sync_free(t->sync);
  gk_bpe_free(t->tokenizer);
  free(t->tokenizer_path);
  gk_run_free(t->run);
  gk_run_free(t->eval_run);
  gk_buffer_free(t->dev_moments);
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
  for (int group = 0; group < 2; group++) {  // within this rank's shard [lo, hi)
    int64_t b = begin[group] > t->lo ? begin[group] : t->lo, e = end[group] < t->hi ? end[group] : t->hi, n = e - b;
    if (n <= 0) continue;
    gk_tensor p = part(gk_model_weights(m), b, n), g = part(gk_model_grads(m), b, n),
              mo = part(moments(t, 0), b - t->lo, n), v = part(moments(t, 1), b - t->lo, n);
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

// A failure of this rank alone: with other ranks, the whole job stops.
static int fail_here(trainer *t, const char *what) {
  if (t->world == 1) return fail(what);
  fprintf(stderr, "gradkern train: rank %d: %s: %s; stopping every rank\n", t->rank, what, gk_last_error());
  gk_dist_abort(t->dist, 1);
  return 1;
}

// The same for a failure within a step: "step N, <what>".
static int fail_in_step(trainer *t, const char *step, const char *what) {
  char both[128];
  snprintf(both, sizeof both, "%s, %s", step, what);
  return fail_here(t, both);
}

// A failure every rank sees alike (rank 0 gives the message).
static int fail_everywhere(trainer *t, const char *what) {
  if (t->rank == 0 && !t->follower_stop) return fail(what);
  return 1;
}

// Under mpirun: join the job; rank 0 alone writes to stdout; each rank's
// threads default to a share of the processors of its machine.
static int join_ranks(trainer *t) {
  int launched = gk_dist_launched();
  if (!gk_dist_built_with_mpi() && launched > 1) {
    fprintf(stderr, "gradkern train: this gradkern was built without MPI, so it cannot join a job of %d processes "
            "(install an MPI such as Debian's libopenmpi-dev and rebuild, or run one process)\n", launched);
    return 2;
  }
  if (gk_dist_init(&t->dist) != GK_SUCCESS) {
    fprintf(stderr, "gradkern train: %s\n", gk_last_error());
    return 1;
  }
  t->rank = gk_dist_rank(t->dist);
  t->world = gk_dist_size(t->dist);
  int local = gk_dist_local_size();
  if (local > 1 && t->a.threads == 0 && !getenv("GK_NUM_THREADS")) {
    int share = gk_get_num_threads() / local;
    gk_set_num_threads(share > 1 ? share : 1);
  }
  return 0;
}

// The reduction's figures, on rank 0 after the run (per step, per rank).
static void print_dist_figures(const trainer *t, int64_t steps) {
  if (t->world == 1 || steps == 0) return;
  gk_grad_sync_stats st = gk_grad_sync_get_stats(t->sync);
  double per = 1.0 / (double)(st.steps ? st.steps : 1);
  printf("data-parallel: %d ranks%s; gradients in %lld buckets per step, %.2f MiB sent per step by rank 0 "
         "(plus %.2f MiB of parameters gathered); %.2f ms per step in the buckets during backward, %.2f ms waiting "
         "after it\n",
         t->world, t->a.zero ? " (AdamW moments sharded)" : "", (long long)(st.buckets * per + 0.5),
         st.bytes_sent * per / (1 << 20),
         t->a.zero ? 4.0 * (double)(t->model.n_total - (t->hi - t->lo)) / (1 << 20) : 0.0, 1e3 * st.busy_seconds * per,
         1e3 * st.wait_seconds * per);
}

static int train_main(trainer *tp);

int gk_cmd_train(int argc, char **argv) { return gk_train_run(argc, argv, NULL); }

int gk_train_run(int argc, char **argv, const gk_train_hooks *hooks) {
  trainer t;
  memset(&t, 0, sizeof t);
  t.hooks = hooks;
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
  int rc = join_ranks(&t);
  if (rc == 0) rc = train_main(&t);
  gk_dist_free(t.dist);
  return rc;
}

static int train_main(trainer *tp) {
  trainer t = *tp;
  gk_train_args *a = &t.a;
  gk_dist_watchdog(t.dist, a->rank_timeout, "starting (checking the outputs, setting up, resuming)");
  // The output files are checked by rank 0 (which writes them).
  int bad_outputs = t.rank == 0 && check_outputs(a) != GK_SUCCESS;
  if (bad_outputs) fprintf(stderr, "gradkern train: %s\n", gk_last_error());
  if (agree_with_rank0(&t, &bad_outputs)) return 2;
  t.train_loss = NAN;
  t.ev = (eval_result){NAN, NAN};
  if (setup(&t) != GK_SUCCESS) {
    int rc = 1;
    if (!t.follower_stop && t.world == 1) rc = fail("setup");
    else if (!t.follower_stop) fprintf(stderr, "gradkern train: rank %d: setup: %s\n", t.rank, gk_last_error());
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
  // weights, gradients, two moments (this rank's share of them)
  size_t param_bytes = ((size_t)m->n_total * 2 + (size_t)(t.hi - t.lo) * 2) * sizeof(float);
  if (!a->quiet && t.world == 1)
    printf("%s on %s: %d layer%s, width %d, %lld parameters; batch %d x %d tokens; memory %.1f MiB "
           "(parameters and AdamW %.1f, training activations %.1f, evaluation %.1f); %d thread%s\n",
           gk_model_name(a->model), gk_task_name(a->task), a->layers, gk_plural(a->layers), a->width,
           (long long)m->n_total, a->batch, a->seq_len,
           (param_bytes + gk_run_bytes(t.run) + gk_run_bytes(t.eval_run)) * mib, param_bytes * mib,
           gk_run_bytes(t.run) * mib, gk_run_bytes(t.eval_run) * mib, gk_get_num_threads(),
           gk_plural(gk_get_num_threads()));
  else if (!a->quiet)
    printf("%s on %s: %d layer%s, width %d, %lld parameters; batch %d x %d tokens on %d ranks (%d each); memory per "
           "rank %.1f MiB (parameters and AdamW %.1f%s, gradient buckets %.1f, training activations %.1f, evaluation "
           "%.1f); %d thread%s per rank\n",
           gk_model_name(a->model), gk_task_name(a->task), a->layers, gk_plural(a->layers), a->width,
           (long long)m->n_total, a->batch * t.world, a->seq_len, t.world, a->batch,
           (param_bytes + 2 * (size_t)m->n_total * sizeof(float) + gk_run_bytes(t.run) + gk_run_bytes(t.eval_run)) *
               mib,
           param_bytes * mib, a->zero ? ", moments sharded" : "", 2 * (double)m->n_total * sizeof(float) * mib,
           gk_run_bytes(t.run) * mib, gk_run_bytes(t.eval_run) * mib, gk_get_num_threads(),
           gk_plural(gk_get_num_threads()));
  if (!a->quiet && a->dtype != GK_F32)
    printf("mixed precision: %s weights, activations and gradients, f32 master weights, sums, loss and AdamW%s\n",
           gk_dtype_name(a->dtype), a->dtype == GK_F16 ? "; loss scale 65536 at the start, doubled after 2000 "
           "finite steps, halved with the step skipped when a gradient overflows" : "");
  if (!a->quiet && a->device != GK_BACKEND_CPU)
    printf("device: %s, %s: weights, gradients, AdamW moments and training activations on it; evaluation on the "
           "host\n", gk_backend_name(a->device), gk_backend_device_description(a->device));
  gk_lr_schedule sched;
  gk_lr_schedule_init(&sched, a->lr, a->min_lr, a->warmup, a->steps);
  gk_progress_init(&t.progress, stdout, a->quiet ? GK_PROGRESS_QUIET : GK_PROGRESS_AUTO, a->steps, t.step,
                   (int64_t)a->batch * t.world * a->seq_len, 50);
  double loss = NAN;
  int rc = 0;
  int64_t first = t.step;
  // Test-only faults (tests/mpi_train.py): "perturb@R" changes a weight of
  // rank R after the first step (for check_replicas), "hang@R" stops rank R
  // in the second step (for --rank-timeout).
  const char *fault = getenv("GK_TEST_FAULT");
  int fault_rank = fault && strchr(fault, '@') ? atoi(strchr(fault, '@') + 1) : -1;
  bool perturb = fault_rank == t.rank && !strncmp(fault, "perturb@", 8);
  bool hang = fault_rank == t.rank && !strncmp(fault, "hang@", 5);
  while (t.step < a->steps) {
    char what[64];
    snprintf(what, sizeof what, "step %lld", (long long)t.step + 1);
    gk_dist_watchdog(t.dist, a->rank_timeout, what);
    if (hang && t.step == first + 1) gk_dist_test_hang(t.dist);
    bool scaled = a->dtype == GK_F16, finite = true;
    gk_status s = scaled ? gk_run_set_loss_scale(t.run, t.scaler.scale) : GK_SUCCESS;
    if (s == GK_SUCCESS) s = train_step(&t, &loss);
    if (s != GK_SUCCESS) {
      rc = fail_in_step(&t, what, "forward and backward");
      break;
    }
    if (scaled && isfinite(loss) && unscale_gradients(&t, &finite) != GK_SUCCESS) {
      rc = fail_in_step(&t, what, "loss scaling");
      break;
    }
    double norm = 0;
    if (finite) s = clip_gradients(&t, &norm);
    if (!isfinite(loss) || s == GK_ERR_NON_FINITE) {
      if (t.rank == 0)
        fprintf(stderr, "gradkern train: step %lld: the %s is %s; stopping before the update%s%s\n",
                (long long)t.step + 1, isfinite(loss) ? "gradient norm" : "loss",
                isfinite(loss) ? (isnan(norm) ? "NaN" : "infinite") : (isnan(loss) ? "NaN" : "infinite"),
                last_good(&t) ? "; the last good checkpoint is " : "", last_good(&t) ? last_good(&t) : "");
      rc = 1;
      break;
    }
    if (finite && (s != GK_SUCCESS || optimizer_step(&t, gk_lr_at(&sched, t.step)) != GK_SUCCESS)) {
      rc = fail_in_step(&t, what, "optimizer");
      break;
    }
    if (sharded(&t) && gk_dist_allgather(t.dist, m->w, m->n_total) != GK_SUCCESS) {
      rc = fail_in_step(&t, what, "gathering the parameters");
      break;
    }
    t.step++;
    if (perturb && t.step == first + 1) m->w[m->params[GK_PARAM_NORM_F].offset] += 1e-3f;
    t.train_loss = loss;
    t.loss_x[t.n_loss] = (double)t.step;
    t.loss_y[t.n_loss++] = loss;
    if (scaled) gk_progress_set_extra(&t.progress, "scale %g skipped %lld", t.scaler.scale, (long long)t.scaler.skipped);
    gk_progress_update(&t.progress, t.step, loss, gk_lr_at(&sched, t.step - 1));
    bool stop = t.hooks && t.hooks->on_step &&
                t.hooks->on_step(t.hooks->ctx, t.step, a->steps, loss, gk_lr_at(&sched, t.step - 1));
    bool last = t.step == a->steps || (a->stop_after > 0 && t.step - first == a->stop_after) || stop;
    bool eval = (a->eval_every > 0 && t.step % a->eval_every == 0) || last;
    bool save = a->checkpoint && ((a->checkpoint_every > 0 && t.step % a->checkpoint_every == 0) || last);
    if ((eval || save) && sync_device(&t, false) != GK_SUCCESS) {
      rc = fail("copying the state from the device");
      break;
    }
    if ((eval || save) && check_replicas(&t) != GK_SUCCESS) {
      rc = t.rank == 0 ? fail("data-parallel") : 1;
      break;
    }
    if (eval) {
      if (evaluate(&t, &t.ev) != GK_SUCCESS) {
        rc = fail_in_step(&t, what, "evaluation");
        break;
      }
      t.eval_x[t.n_eval] = (double)t.step;
      t.eval_y[t.n_eval++] = t.ev.loss;
      if (t.hooks && t.hooks->on_eval)
        t.hooks->on_eval(t.hooks->ctx, t.step, t.ev.loss, a->task == GK_TASK_TEXT ? NAN : t.ev.accuracy);
      if (a->task == GK_TASK_TEXT)
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, %.3f bits per byte", (long long)t.step,
                         t.ev.loss, gk_task_bits_per_byte(&t.task, t.ev.loss));
      else
        gk_progress_note(&t.progress, "step %lld: eval loss %.4f, eval accuracy %.1f%%", (long long)t.step,
                         t.ev.loss, 100 * t.ev.accuracy);
    }
    if (save && save_everywhere(&t, a->checkpoint) != GK_SUCCESS) {
      rc = fail_everywhere(&t, "checkpoint");
      break;
    }
    if (last) break;
  }
  gk_dist_watchdog(t.dist, 0, NULL);
  if (rc == 0 && a->save_hf && t.rank == 0 &&
      gk_hf_save(a->save_hf, &t.model, a->init ? t.hf_dtype : GK_ST_F32) != GK_SUCCESS)
    rc = fail("--save-hf");
  if (rc == 0 && a->plot && t.rank == 0) {
    gk_plot_series series[2] = {{"training loss", t.loss_x, t.loss_y, (size_t)t.n_loss, 0},
                                {"evaluation loss", t.eval_x, t.eval_y, (size_t)t.n_eval, 1}};
    gk_plot plot = {"gradkern train", "step", "loss (nats per token)", 1, 800, 480};
    if (gk_plot_write(a->plot, &plot, series, 2) != GK_SUCCESS) rc = fail("plot");
  }
  if (rc == 0 && a->eval_lengths && t.rank == 0 && gk_eval_lengths(&t.model, &t.task, a, a->seq_len) != GK_SUCCESS)
    rc = fail("--eval-lengths");
  if (rc == 0) {
    if (!a->quiet) print_dist_figures(&t, t.step - first);
    gk_run_summary sum = {t.train_loss, t.ev.loss, a->task == GK_TASK_TEXT ? NAN : t.ev.accuracy,
                          a->task == GK_TASK_TEXT ? gk_task_bits_per_byte(&t.task, t.ev.loss) : NAN, t.last_checkpoint};
    gk_progress_summary(&t.progress, &sum);
  }
  teardown(&t);
  return rc;
}
