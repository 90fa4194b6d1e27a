// The command lines of `gradkern train` and `gradkern sample`: every option,
// its default, its allowed values, and the --help text made from them.
//
// Parsing is strict: numbers must be whole and in range ("abc", "nan",
// "1e999", "-1" for a learning rate, "0" for a number of layers are errors),
// unknown options and stray arguments are errors, and the options are
// checked against each other (--data only with --task text, --heads only
// with --model llama, ...). Every message names the option and the value.
// Both "--opt VALUE" and "--opt=VALUE" are accepted; an option given twice
// is an error. Messages carry no "see --help" hint: the caller adds one.
#ifndef GK_TRAIN_ARGS_H
#define GK_TRAIN_ARGS_H

#include "gradkern.h"
#include "nn/data.h"

#include <stdint.h>
#include <stdio.h>

typedef enum gk_model_kind {
  GK_MODEL_MAMBA = 0,
  GK_MODEL_LLAMA = 1,
} gk_model_kind;

// "mamba", "llama", or "?".
const char *gk_model_name(gk_model_kind model);

typedef struct gk_train_args {
  gk_model_kind model;        // --model mamba|llama
  gk_task_kind task;          // --task copy|induction|text
  const char *data;           // --data FILE: the text file of --task text (NULL: none)
  const char *tokenizer;      // --tokenizer PATH: BPE tokens instead of bytes (src/nn/bpe.h; NULL: bytes)
  const char *init;           // --init DIR: start from this Hugging Face Mamba model (src/nn/hf.h; NULL: random)
  const char *save_hf;        // --save-hf DIR: at the end, write the model there in Hugging Face's format
  int layers;                 // --layers N: blocks
  int width;                  // --width D: d_model
  int state;                  // --state N: d_state of the selective scan (mamba)
  int heads;                  // --heads H: attention heads (llama)
  int kv_heads;               // --kv-heads H: key/value heads (llama), divides heads
  int64_t steps;              // --steps N: optimizer steps of the whole run
  int batch;                  // --batch B: sequences per step
  int seq_len;                // --seq-len T: tokens per training sequence
  double lr;                  // --lr: peak learning rate
  double min_lr;              // --min-lr: learning rate at the end of the cosine decay
                              // (not given: scaled with --lr as the starting values are)
  int64_t warmup;             // --warmup: steps of linear warmup
                              // (not given: scaled with --steps as the starting values are)
  double weight_decay;        // --weight-decay: AdamW's decoupled weight decay
  double clip;                // --clip: largest global gradient norm (0: no clipping)
  int threads;                // --threads: CPU threads (0: GK_NUM_THREADS, else all processors)
  uint64_t seed;              // --seed: weights and data
  gk_dtype dtype;             // --dtype f32|bf16|f16 (16-bit compute over f32 master weights; f16: loss scaling)
  gk_backend device;          // --device cpu|vulkan|webgpu: where training runs (GK_BACKEND_CPU, _VULKAN, _WEBGPU)
  int selection;              // 1; 0 with --no-selection (delta, B, C input-independent)
  int64_t eval_every;         // --eval-every K: evaluate every K steps (0: only at the end)
  int eval_batches;           // --eval-batches N: batches per evaluation
  const char *checkpoint;     // --checkpoint FILE: write the checkpoint here (NULL: none)
  int64_t checkpoint_every;   // --checkpoint-every K: every K steps (0: only at the end)
  const char *resume;         // --resume FILE: continue the run saved in FILE (NULL: none)
  int64_t stop_after;         // --stop-after N: stop after N steps of this invocation (0: at --steps);
                              // the schedule still spans --steps, so a run can be cut in pieces
  const char *plot;           // --plot FILE.svg: loss curves (NULL: none)
  int quiet;                  // --quiet: only the summary and errors
  int allow_changes;          // --allow-changes: --resume although options or data differ from the checkpoint's
  int zero;                   // --zero 0|1: under mpirun, 1 shards the AdamW moments across the ranks
  int rank_timeout;           // --rank-timeout S: under mpirun, a step longer than S seconds stops the job (0: never)
  // Selective copying's sizes, and the test lengths of --eval-lengths.
  int copy_data;              // --copy-data K: data tokens to reproduce
  int copy_values;            // --copy-values V: values a data token takes (vocabulary V + 2)
  const char *eval_lengths;   // --eval-lengths L1,L2,...: after training, accuracy at each length (NULL: none)
  int eval_sequences;         // --eval-sequences N: sequences per length, at most (see eval_tokens)
  int64_t eval_tokens;        // --eval-tokens N: tokens per length, at most (but one sequence)
  int eval_chunk;             // --eval-chunk N: mamba: a test sequence goes in pieces of N tokens
  int eval_memory;            // --eval-memory MIB: llama: the largest whole-sequence run at a length
  const char *eval_out;       // --eval-out FILE.json: the accuracy per length as JSON (NULL: none)
  uint64_t given;             // which options the command line set: see gk_train_args_given
} gk_train_args;

// The most lengths --eval-lengths takes.
enum { GK_MAX_EVAL_LENGTHS = 64 };
// --eval-lengths "64,128,..." as numbers (each 3 .. 2^24, at most
// GK_MAX_EVAL_LENGTHS): *n of them into out; errors name the value.
gk_status gk_train_eval_lengths(const char *list, int64_t *out, int *n);

typedef struct gk_sample_args {
  const char *checkpoint;     // --checkpoint FILE (this or --model is required)
  const char *model_dir;      // --model DIR: a Hugging Face Mamba model directory instead
  const char *prompt;         // --prompt TEXT: bytes to continue (not empty)
  const char *tokenizer;      // --tokenizer PATH: instead of the one the checkpoint names (NULL: that one)
  int tokens;                 // --tokens N: tokens to generate
  double temperature;         // --temperature T: 0 = greedy (argmax)
  int top_k;                  // --top-k K: sample among the K most likely (0: all)
  uint64_t seed;              // --seed
  int threads;                // --threads (0: GK_NUM_THREADS, else all processors)
  uint64_t given;             // see gk_sample_args_given
} gk_sample_args;

// The defaults: a small Mamba on selective copying (to be tuned with the
// model code).
extern const gk_train_args gk_train_defaults;
extern const gk_sample_args gk_sample_defaults;

// Parse the options that follow the subcommand (argv[0] is the first
// option) into *args, which holds the starting values: copy
// gk_train_defaults (or the model code's own defaults) into it first. Options
// not on the command line keep their starting value; `given` records the
// others, so the caller can still apply defaults that depend on another
// option (e.g. a learning rate per --model) where !gk_train_args_given().
// Two such defaults are applied here: without --warmup, a given --steps
// scales the warmup (100 of 1000 steps: 6 of --steps 60), and without
// --min-lr, a given --lr scales the final learning rate. Only the values
// given are checked against each other (--warmup more than --steps, ...).
// With --help or -h anywhere, *help is 1 and nothing else is parsed or
// checked; print the usage then.
gk_status gk_train_args_parse(int argc, char *const *argv, gk_train_args *args, int *help);
gk_status gk_sample_args_parse(int argc, char *const *argv, gk_sample_args *args, int *help);

// Parse `value` as option `name` ("--lr") would be on the command line, with
// the same syntax and range checks, into its field of *args (`given` is left
// alone): for values read back from elsewhere, such as a checkpoint.
gk_status gk_train_args_set(gk_train_args *args, const char *name, const char *value);

// Whether the command line set option `name` (e.g. "--lr"); 0 for an unknown name.
int gk_train_args_given(const gk_train_args *args, const char *name);
int gk_sample_args_given(const gk_sample_args *args, const char *name);

// The --help texts, showing the values of `defaults` (NULL: gk_*_defaults).
void gk_train_usage(FILE *out, const gk_train_args *defaults);
void gk_sample_usage(FILE *out, const gk_sample_args *defaults);

#endif
