// Accuracy against test length (gradkern train --eval-lengths), the
// measurement of the Mamba paper's induction-heads table: a model trained
// on one length is tested on held-out sequences of other lengths.
//
// Each length gets up to --eval-sequences held-out sequences, fewer where
// that would pass --eval-tokens tokens (but at least one), 8 at a time. A Mamba runs them in pieces of --eval-chunk
// tokens with its conv and scan states carried from piece to piece
// (src/nn/chunked.h), so its memory is that of one piece at any length;
// only the token arrays (2 x 4 bytes per token of the batch) grow. A LLaMA
// runs each batch as whole sequences (its attention sees all of them at
// once): a length whose run would hold more than --eval-memory MiB is
// reported as not run, with the memory it needs. The accuracy counts the
// answers, the positions that have a target (induction: the last; copy: the
// positions after the markers), as the training run's evaluation does.
#include "eval_lengths.h"

#include "nn/chunked.h"
#include "nn/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EVAL_BATCH = 8 };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Answers counted over a length's batches.
typedef struct tally {
  const int32_t *targets;  // (batch, T) of the current batch
  int64_t T, correct, answers;
  int V, batch;
} tally;

// Rows of logits (rows of V) against targets at the same rows: the argmax
// (the lowest index among equals) right or wrong where there is a target.
static void count(tally *t, const float *logits, const int32_t *targets, int64_t rows) {
  for (int64_t j = 0; j < rows; j++) {
    if (targets[j] == GK_IGNORE_INDEX) continue;
    const float *row = logits + j * t->V;
    int best = 0;
    for (int v = 1; v < t->V; v++)
      if (row[v] > row[best]) best = v;
    t->correct += best == targets[j];
    t->answers++;
  }
}

// A piece of every sequence of the batch (chunked.h's callback).
static gk_status count_piece(void *ctx, int64_t first, int n, const float *logits) {
  tally *t = ctx;
  for (int b = 0; b < t->batch; b++)
    count(t, logits + (int64_t)b * n * t->V, t->targets + b * t->T + first, n);
  return GK_SUCCESS;
}

typedef struct length_result {
  int64_t length;
  int ran;               // 0: not run (why in reason)
  int whole;             // 1: whole sequences, 0: pieces
  int64_t correct, answers, sequences;
  double seconds, mib;
  char reason[256];
} length_result;

// One length: its batches through the model (or why not).
static gk_status eval_length(gk_model *m, const gk_task *task, const gk_train_args *a, length_result *r) {
  int64_t L = r->length;
  if (gk_task_check_seq_len(task, GK_SPLIT_EVAL, (int)L) != GK_SUCCESS) {
    snprintf(r->reason, sizeof r->reason, "%s", gk_last_error());
    return GK_SUCCESS;
  }
  int64_t sequences = a->eval_tokens / L;
  if (sequences > a->eval_sequences) sequences = a->eval_sequences;
  if (sequences < 1) sequences = 1;
  int batch = sequences < EVAL_BATCH ? (int)sequences : EVAL_BATCH;
  int64_t batches = sequences / batch;
  r->whole = m->cfg.arch != GK_ARCH_MAMBA;
  gk_status s;
  gk_run *run = NULL;
  gk_chunked *pieces = NULL;
  if (r->whole) {
    size_t bytes;
    if ((s = gk_run_measure(m, batch, (int)L, false, &bytes)) != GK_SUCCESS) return s;
    r->mib = (double)bytes / (1 << 20);
    if (r->mib > a->eval_memory) {
      snprintf(r->reason, sizeof r->reason,
               "a whole-sequence run of %d x %lld tokens needs %.0f MiB, over --eval-memory %d MiB (attention sees the "
               "whole sequence at once)", batch, (long long)L, r->mib, a->eval_memory);
      return GK_SUCCESS;
    }
    s = gk_run_create(m, batch, (int)L, false, &run);
  } else {
    s = gk_chunked_create(m, batch, L < a->eval_chunk ? (int)L : a->eval_chunk, &pieces);
  }
  size_t n = (size_t)batch * (size_t)L;
  int32_t *inputs = malloc(sizeof(int32_t) * n), *targets = malloc(sizeof(int32_t) * n);
  if (s == GK_SUCCESS && (!inputs || !targets))
    s = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "--eval-lengths: no memory for %d sequences of %lld tokens", batch,
                   (long long)L);
  tally t = {targets, L, 0, 0, m->cfg.vocab, batch};
  double start = now();
  for (int64_t i = 0; i < batches && s == GK_SUCCESS; i++) {
    s = gk_task_rows(task, GK_SPLIT_EVAL, a->seed, i, batch, 0, batch, (int)L, inputs, targets);
    if (s == GK_SUCCESS && run && (s = gk_run_forward(run, inputs)) == GK_SUCCESS)
      count(&t, gk_run_logits(run), targets, (int64_t)n);
    else if (s == GK_SUCCESS && pieces)
      s = gk_chunked_run(pieces, inputs, L, count_piece, &t);
  }
  r->seconds = now() - start;
  if (pieces) r->mib = (double)gk_chunked_bytes(pieces) / (1 << 20);
  r->ran = s == GK_SUCCESS;
  r->correct = t.correct;
  r->answers = t.answers;
  r->sequences = batches * batch;
  gk_run_free(run);
  gk_chunked_free(pieces);
  free(inputs);
  free(targets);
  return s;
}

// The results as JSON, written atomically.
static gk_status write_json(const gk_model *m, const gk_train_args *a, int trained_len, const length_result *r,
                            int n) {
  gk_nn_buf b = {0};
  gk_nn_buf_printf(&b, "{\n  \"model\": \"%s\",\n  \"selection\": %s,\n  \"task\": \"%s\",\n  \"trained_length\": %d,\n"
                   "  \"steps\": %lld,\n  \"seed\": %llu,\n  \"parameters\": %lld,\n  \"eval_chunk\": %d,\n"
                   "  \"lengths\": [",
                   gk_model_name(a->model), a->model == GK_MODEL_MAMBA && a->selection ? "true" : "false",
                   gk_task_name(a->task), trained_len, (long long)a->steps, (unsigned long long)a->seed,
                   (long long)m->n_total, a->eval_chunk);
  for (int i = 0; i < n; i++) {
    gk_nn_buf_printf(&b, "%s\n    {\"length\": %lld, ", i ? "," : "", (long long)r[i].length);
    if (r[i].ran)
      gk_nn_buf_printf(&b, "\"status\": \"ok\", \"mode\": \"%s\", \"accuracy\": %.6f, \"correct\": %lld, "
                       "\"answers\": %lld, \"sequences\": %lld, \"seconds\": %.3f, \"memory_mib\": %.1f}",
                       r[i].whole ? "whole" : "pieces", r[i].answers ? (double)r[i].correct / (double)r[i].answers : 0,
                       (long long)r[i].correct, (long long)r[i].answers, (long long)r[i].sequences, r[i].seconds,
                       r[i].mib);
    else {
      gk_nn_buf_puts(&b, "\"status\": \"not run\", \"reason\": \"");
      for (const char *c = r[i].reason; *c; c++) {  // the messages hold no control characters
        if (*c == '"' || *c == '\\') gk_nn_buf_append(&b, "\\", 1);
        gk_nn_buf_append(&b, c, 1);
      }
      gk_nn_buf_puts(&b, "\"}");
    }
  }
  gk_nn_buf_puts(&b, "\n  ]\n}\n");
  gk_status s = b.failed ? gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "--eval-out: no memory")
                         : gk_nn_write_atomic(a->eval_out, "--eval-out", &(gk_nn_chunk){b.data, b.len}, 1);
  gk_nn_buf_free(&b);
  return s;
}

gk_status gk_eval_lengths(gk_model *m, const gk_task *task, const gk_train_args *a, int trained_len) {
  int64_t lengths[GK_MAX_EVAL_LENGTHS];
  int n;
  gk_status s = gk_train_eval_lengths(a->eval_lengths, lengths, &n);
  if (s != GK_SUCCESS) return s;
  length_result r[GK_MAX_EVAL_LENGTHS];
  memset(r, 0, sizeof r);
  printf("accuracy against test length (trained on %d tokens; held-out sequences, up to %d at a time):\n",
         trained_len, EVAL_BATCH);
  fflush(stdout);
  for (int i = 0; i < n && s == GK_SUCCESS; i++) {
    r[i].length = lengths[i];
    s = eval_length(m, task, a, &r[i]);
    if (s != GK_SUCCESS) break;
    if (!r[i].ran)
      printf("  length %8lld: not run: %s\n", (long long)r[i].length, r[i].reason);
    else
      printf("  length %8lld: accuracy %5.1f%% (%lld of %lld answers, %lld sequences) in %.1f s, %.1f MiB (%s)\n",
             (long long)r[i].length, r[i].answers ? 100.0 * (double)r[i].correct / (double)r[i].answers : 0.0,
             (long long)r[i].correct, (long long)r[i].answers, (long long)r[i].sequences, r[i].seconds, r[i].mib,
             r[i].whole ? "whole sequences" : "in pieces, the state carried");
    fflush(stdout);
  }
  if (s == GK_SUCCESS && a->eval_out) s = write_json(m, a, trained_len, r, n);
  return s;
}
