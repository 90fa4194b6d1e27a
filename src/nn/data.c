// The synthetic tasks and byte-level text (layouts in data.h).
#include "data.h"

#include "fileio.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *gk_task_name(gk_task_kind kind) {
  switch (kind) {
  case GK_TASK_COPY: return "copy";
  case GK_TASK_INDUCTION: return "induction";
  case GK_TASK_TEXT: return "text";
  case GK_TASK_COUNT_: break;
  }
  return "?";
}

gk_status gk_task_init_copy(gk_task *task, int n_data, int n_values) {
  if (!task) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_init_copy: task is NULL");
  memset(task, 0, sizeof *task);
  if (n_data < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "selective copying: n_data is %d, must be at least 1", n_data);
  if (n_values < 1 || n_values > 1 << 20)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "selective copying: n_values is %d, must be in [1, %d]", n_values, 1 << 20);
  task->kind = GK_TASK_COPY;
  task->n_data = n_data;
  task->n_values = n_values;
  task->noise_token = 0;
  task->marker_token = n_values + 1;
  task->vocab_size = n_values + 2;
  return GK_SUCCESS;
}

gk_status gk_task_init_induction(gk_task *task, int n_values) {
  if (!task) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_init_induction: task is NULL");
  memset(task, 0, sizeof *task);
  if (n_values < 2 || n_values > 1 << 20)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "induction heads: n_values is %d, must be in [2, %d]", n_values, 1 << 20);
  task->kind = GK_TASK_INDUCTION;
  task->n_values = n_values;
  task->trigger_token = n_values;
  task->vocab_size = n_values + 1;
  return GK_SUCCESS;
}

// The text's length in the units of the windows: tokens with a tokenizer, else bytes.
static size_t text_units(const gk_task *task) { return task->tokens ? task->n_tokens : task->text_len; }

// Read the file, tokenize it when a tokenizer is given, and split it.
static gk_status init_text(gk_task *task, const char *path, int seq_len, gk_bpe *tokenizer) {
  if (!task) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_init_text: task is NULL");
  memset(task, 0, sizeof *task);
  if (!path) return gk_nn_fail(GK_ERR_NULL_POINTER, "text task: no data file given");
  if (seq_len < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "text task: sequence length %d must be at least 1", seq_len);
  unsigned char *bytes;
  size_t n;
  gk_status st = gk_nn_read_file(path, "data file", &bytes, &n);
  if (st) return st;
  size_t window = (size_t)seq_len + 1;
  if (n == 0) {
    free(bytes);
    return gk_nn_fail(GK_NN_ERR_FILE, "data file '%s' is empty", path);
  }
  task->text = bytes;
  task->text_len = n;
  const char *unit = "byte";
  if (tokenizer) {
    gk_bpe_ids ids = {0};
    size_t used;
    if ((st = gk_bpe_encode(tokenizer, bytes, n, 1, &used, &ids))) {
      gk_bpe_ids_free(&ids);
      free(bytes);
      memset(task, 0, sizeof *task);
      return gk_nn_fail(st, "data file '%s': %s", path, gk_last_error());
    }
    task->tokens = ids.data;
    task->n_tokens = ids.len;
    unit = "token";
  }
  size_t units = text_units(task);
  size_t eval_len = units / 10 > window ? units / 10 : window;
  if (units < 2 * window || units - eval_len < window) {
    free(task->tokens);
    free(bytes);
    memset(task, 0, sizeof *task);
    return gk_nn_fail(GK_NN_ERR_FILE,
                   "data file '%s' has %zu %s%s, too short for sequence length %d: it needs at least %zu (one "
                   "training and one held-out window of %zu %ss)",
                   path, units, unit, gk_plural((long long)units), seq_len, 2 * window, window, unit);
  }
  task->kind = GK_TASK_TEXT;
  task->vocab_size = tokenizer ? gk_bpe_vocab_size(tokenizer) : 256;
  task->train_len = units - eval_len;
  task->eval_bytes = n - (tokenizer ? 0 : task->train_len);
  for (size_t i = 0; tokenizer && i < task->train_len; i++) {
    size_t len = 0;
    gk_bpe_token_bytes(tokenizer, task->tokens[i], &len);
    task->eval_bytes -= len;
  }
  return GK_SUCCESS;
}

double gk_task_bits_per_byte(const gk_task *task, double loss) {
  if (!task || task->kind != GK_TASK_TEXT || !task->eval_bytes) return NAN;
  return loss / log(2.0) * (double)(text_units(task) - task->train_len) / (double)task->eval_bytes;
}

gk_status gk_task_init_text(gk_task *task, const char *path, int seq_len) {
  return init_text(task, path, seq_len, NULL);
}

gk_status gk_task_init_text_tokens(gk_task *task, const char *path, int seq_len, gk_bpe *tokenizer) {
  if (!tokenizer) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_init_text_tokens: tokenizer is NULL");
  return init_text(task, path, seq_len, tokenizer);
}

void gk_task_free(gk_task *task) {
  if (!task) return;
  free(task->text);
  free(task->tokens);
  memset(task, 0, sizeof *task);
}

gk_status gk_task_check_seq_len(const gk_task *task, gk_split split, int seq_len) {
  if (!task) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_check_seq_len: task is NULL");
  if (split != GK_SPLIT_TRAIN && split != GK_SPLIT_EVAL)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_task_check_seq_len: split %d is not train (0) or eval (1)", (int)split);
  if (seq_len < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "sequence length %d must be at least 1", seq_len);
  int ready = (task->kind == GK_TASK_COPY && task->n_data >= 1 && task->n_values >= 1) ||
              (task->kind == GK_TASK_INDUCTION && task->n_values >= 2) ||
              (task->kind == GK_TASK_TEXT && task->text && task->train_len < text_units(task));
  if (!ready)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "the %s task was not initialised (use gk_task_init_*)",
                   gk_task_name(task->kind));
  switch (task->kind) {
  case GK_TASK_COPY:
    if (seq_len < 2 * task->n_data)
      return gk_nn_fail(GK_ERR_INVALID_VALUE,
                     "selective copying: sequence length %d is too short for %d data tokens: it must be at least %d "
                     "(a region holding them, then as many markers)",
                     seq_len, task->n_data, 2 * task->n_data);
    return GK_SUCCESS;
  case GK_TASK_INDUCTION:
    if (seq_len < 3)
      return gk_nn_fail(GK_ERR_INVALID_VALUE,
                     "induction heads: sequence length %d is too short: it must be at least 3 (trigger, token, "
                     "trigger)",
                     seq_len);
    return GK_SUCCESS;
  case GK_TASK_TEXT: {
    size_t part = split == GK_SPLIT_TRAIN ? task->train_len : text_units(task) - task->train_len;
    if (part < (size_t)seq_len + 1)
      return gk_nn_fail(GK_ERR_INVALID_VALUE,
                     "text: sequence length %d needs windows of %d %s, but the %s part of the data has %zu", seq_len,
                     seq_len + 1, task->tokens ? "tokens" : "bytes", split == GK_SPLIT_TRAIN ? "training" : "held-out", part);
    return GK_SUCCESS;
  }
  case GK_TASK_COUNT_: break;
  }
  return gk_nn_fail(GK_ERR_INVALID_VALUE, "task kind %d is not a task (was the task initialised?)", (int)task->kind);
}

// One selective-copying sequence (layout in data.h).
static void copy_row(const gk_task *task, gk_rng *rng, int T, int32_t *in, int32_t *tgt) {
  int K = task->n_data, R = T - K;
  for (int t = 0; t < T; t++) {
    in[t] = task->noise_token;
    tgt[t] = GK_IGNORE_INDEX;
  }
  // Selection sampling (Knuth's algorithm S): K of the R positions, each
  // K-subset equally likely, visited in increasing order.
  int chosen = 0;
  for (int pos = 0; pos < R && chosen < K; pos++) {
    if ((int)gk_rng_below(rng, (uint64_t)(R - pos)) < K - chosen) {
      int32_t token = 1 + (int32_t)gk_rng_below(rng, (uint64_t)task->n_values);
      in[pos] = token;
      in[R + chosen] = task->marker_token;
      tgt[R + chosen] = token;
      chosen++;
    }
  }
}

// One induction-heads sequence (layout in data.h).
static void induction_row(const gk_task *task, gk_rng *rng, int T, int32_t *in, int32_t *tgt) {
  for (int t = 0; t < T; t++) {
    in[t] = (int32_t)gk_rng_below(rng, (uint64_t)task->n_values);
    tgt[t] = GK_IGNORE_INDEX;
  }
  int p = (int)gk_rng_below(rng, (uint64_t)(T - 2));
  int32_t x = (int32_t)gk_rng_below(rng, (uint64_t)task->n_values);
  in[p] = task->trigger_token;
  in[p + 1] = x;
  in[T - 1] = task->trigger_token;
  tgt[T - 1] = x;
}

static void text_window(const gk_task *task, size_t start, int T, int32_t *in, int32_t *tgt) {
  if (task->tokens) {
    memcpy(in, task->tokens + start, (size_t)T * sizeof *in);
    memcpy(tgt, task->tokens + start + 1, (size_t)T * sizeof *tgt);
    return;
  }
  const unsigned char *s = task->text + start;
  for (int t = 0; t < T; t++) {
    in[t] = s[t];
    tgt[t] = s[t + 1];
  }
}

int64_t gk_task_eval_windows(const gk_task *task, int seq_len) {
  if (!task || task->kind != GK_TASK_TEXT) return -1;
  size_t eval_len = text_units(task) - task->train_len;
  if (seq_len < 1 || eval_len < (size_t)seq_len + 1) return 0;
  return (int64_t)((eval_len - 1) / (size_t)seq_len);
}

gk_status gk_task_batch(const gk_task *task, gk_split split, uint64_t seed, int64_t index, int batch, int seq_len,
                        int32_t *inputs, int32_t *targets) {
  return gk_task_rows(task, split, seed, index, batch, 0, batch, seq_len, inputs, targets);
}

gk_status gk_task_rows(const gk_task *task, gk_split split, uint64_t seed, int64_t index, int batch, int first,
                       int rows, int seq_len, int32_t *inputs, int32_t *targets) {
  if (!task || !inputs || !targets)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_task_batch: %s is NULL", !task ? "task" : !inputs ? "inputs" : "targets");
  if (batch < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_task_batch: batch %d must be at least 1", batch);
  if (index < 0) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_task_batch: index %lld is negative", (long long)index);
  if (first < 0 || rows < 1 || rows > batch - first)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_task_rows: rows [%d, %d + %d) are not within the batch of %d", first,
                      first, rows, batch);
  gk_status st = gk_task_check_seq_len(task, split, seq_len);
  if (st) return st;
  size_t T = (size_t)seq_len;
  if (task->kind == GK_TASK_TEXT && split == GK_SPLIT_EVAL) {
    int64_t windows = gk_task_eval_windows(task, seq_len);
    for (int r = 0; r < rows; r++) {
      int b = first + r;
      int32_t *in = inputs + (size_t)r * T, *tgt = targets + (size_t)r * T;
      int64_t w = index <= (INT64_MAX - b) / batch ? index * batch + b : INT64_MAX;
      if (w < windows) {
        text_window(task, task->train_len + (size_t)w * T, seq_len, in, tgt);
      } else {
        for (size_t t = 0; t < T; t++) {
          in[t] = 0;
          tgt[t] = GK_IGNORE_INDEX;
        }
      }
    }
    return GK_SUCCESS;
  }
  // One stream per batch, drawn row after row: the rows before `first` are
  // drawn too (into the first output row, overwritten after), so that row
  // b is the same whichever part of the batch is asked for.
  gk_rng rng;
  gk_rng_seed_stream(&rng, seed, (uint64_t)split, (uint64_t)index);
  for (int b = 0; b < first + rows; b++) {
    int r = b < first ? 0 : b - first;
    int32_t *in = inputs + (size_t)r * T, *tgt = targets + (size_t)r * T;
    switch (task->kind) {
    case GK_TASK_COPY: copy_row(task, &rng, seq_len, in, tgt); break;
    case GK_TASK_INDUCTION: induction_row(task, &rng, seq_len, in, tgt); break;
    default: text_window(task, (size_t)gk_rng_below(&rng, task->train_len - T), seq_len, in, tgt); break;
    }
  }
  return GK_SUCCESS;
}
