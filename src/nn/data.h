// Training data: the synthetic tasks of the Mamba paper, generated on the fly
// from a seed, and byte-level text from a file.
//
// A batch is two int32 arrays of shape (batch, seq_len), row-major: `inputs`
// (token ids) and `targets`. targets[b][t] is the token the model must
// predict at position t, having seen inputs[b][0..t]; positions where
// nothing is asked hold GK_IGNORE_INDEX, so the loss and the token accuracy
// count the answer positions only.
//
// Batches are pure functions of (task, split, seed, index, batch, seq_len):
// the training batch of step s is gk_task_batch(task, GK_SPLIT_TRAIN, seed,
// s, ...), so a resumed run sees exactly the batches of an uninterrupted one
// without saving any generator state. The two splits draw from independent
// random streams (synthetic tasks) or from disjoint parts of the file (text).
// Row b of a batch does not depend on the batch size (the rows are drawn in
// order from one stream per batch; text eval rows are windows by number), so
// a batch can be made in parts (gk_task_rows).
//
// Tasks (vocabularies and sequence layouts):
//  copy, selective copying: vocabulary n_values + 2: 0 = noise, 1..n_values
//    data, n_values + 1 = marker. A sequence of length T holds a region of
//    R = T - K positions: noise, except K data tokens drawn uniformly from
//    1..n_values at K distinct positions chosen uniformly (K = n_data); then
//    K markers. The target at marker j (position R + j) is the j-th data token
//    in order of position; everything else is ignored. Needs T >= 2 K.
//  induction, induction heads: vocabulary n_values + 1: 0..n_values-1
//    content, n_values = trigger. Positions 0..T-2 hold random content tokens
//    except that at one random position p in [0, T-3] the trigger appears,
//    followed by a random content token X at p + 1; the last position holds
//    the trigger again, and its target is X (the only target). The trigger
//    appears nowhere else. Evaluate at longer T than trained. Needs T >= 3.
//  text, byte-level language modelling: vocabulary 256 (the bytes). The last
//    10% of the file (at least seq_len + 1 bytes) is held out for
//    evaluation; the rest is for training. Training rows are windows of
//    T + 1 bytes starting uniformly at random in the training part: inputs
//    bytes [s, s+T), targets [s+1, s+T]. Evaluation rows are the held-out
//    part's consecutive windows: window w starts at train_len + w T; row b of
//    eval batch i is window i * batch + b, and rows past the last window are
//    all GK_IGNORE_INDEX (inputs 0), so every held-out window is counted
//    exactly once over ceil(windows / batch) batches.
//  text with a tokenizer (gk_task_init_text_tokens): the same over the
//    file's BPE tokens instead of its bytes; the vocabulary is the
//    tokenizer's, and lengths above count tokens.
#ifndef GK_NN_DATA_H
#define GK_NN_DATA_H

#include "bpe.h"
#include "nn.h"

#include <stddef.h>
#include <stdint.h>

// The target of positions the loss ignores (as torch's cross_entropy).
#define GK_IGNORE_INDEX (-100)

// Defaults of the paper's settings: 16 data tokens and a vocabulary of 16
// (selective copying), a vocabulary of 16 (induction heads).
#define GK_COPY_DEFAULT_DATA 16
#define GK_COPY_DEFAULT_VALUES 14
#define GK_INDUCTION_DEFAULT_VALUES 15

typedef enum gk_task_kind {
  GK_TASK_COPY = 0,
  GK_TASK_INDUCTION = 1,
  GK_TASK_TEXT = 2,
  GK_TASK_COUNT_ = 3  // number of tasks (not a task)
} gk_task_kind;

// "copy", "induction", "text", or "?".
const char *gk_task_name(gk_task_kind kind);

typedef enum gk_split {
  GK_SPLIT_TRAIN = 0,
  GK_SPLIT_EVAL = 1,
} gk_split;

typedef struct gk_task {
  gk_task_kind kind;
  int vocab_size;
  int n_data;            // copy: K, the data tokens to reproduce
  int n_values;          // copy, induction: number of data/content token values
  int noise_token;       // copy: 0
  int marker_token;      // copy: n_values + 1
  int trigger_token;     // induction: n_values
  unsigned char *text;   // text: the whole file
  size_t text_len;       // text: its length in bytes
  int32_t *tokens;       // text with a tokenizer: the file's tokens (NULL: bytes)
  size_t n_tokens;       // text with a tokenizer: how many
  size_t eval_bytes;     // text: bytes of the held-out part
  size_t train_len;      // text: bytes (tokens) [0, train_len) train, the rest is held out
} gk_task;

// Set up a task. Free every task with gk_task_free.
gk_status gk_task_init_copy(gk_task *task, int n_data, int n_values);
gk_status gk_task_init_induction(gk_task *task, int n_values);
// Read the file at `path` and split it for windows of seq_len + 1 bytes;
// missing, empty and too-short files are errors that say what is needed.
gk_status gk_task_init_text(gk_task *task, const char *path, int seq_len);
// The same over the file's tokens by `tokenizer` (which the task does not keep).
gk_status gk_task_init_text_tokens(gk_task *task, const char *path, int seq_len, gk_bpe *tokenizer);
void gk_task_free(gk_task *task);

// Whether sequences of length seq_len can be made for `split`; the message
// says what the task needs when not.
gk_status gk_task_check_seq_len(const gk_task *task, gk_split split, int seq_len);

// Fill inputs and targets, each (batch, seq_len), with batch `index` of
// `split` (index >= 0).
gk_status gk_task_batch(const gk_task *task, gk_split split, uint64_t seed, int64_t index, int batch, int seq_len,
                        int32_t *inputs, int32_t *targets);
// Rows [first, first + rows) of that batch of `batch` rows into inputs and
// targets, each (rows, seq_len): the same sequences gk_task_batch gives
// there, so the ranks of a data-parallel run, each asking for its part,
// together see the whole batch of one process.
gk_status gk_task_rows(const gk_task *task, gk_split split, uint64_t seed, int64_t index, int batch, int first,
                       int rows, int seq_len, int32_t *inputs, int32_t *targets);

// text: the number of held-out windows of seq_len (an evaluation covers them
// all in ceil(windows / batch) batches). Synthetic tasks: -1 (any number of
// evaluation batches can be drawn).
int64_t gk_task_eval_windows(const gk_task *task, int seq_len);

// text: a loss in nats per token (per byte without a tokenizer) as bits per
// byte, at the held-out part's ratio of tokens to bytes.
double gk_task_bits_per_byte(const gk_task *task, double loss);

#endif
