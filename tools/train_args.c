// Command lines of `gradkern train` and `gradkern sample` (see train_args.h):
// one table per command drives the parsing, the range checks and --help.
#include "train_args.h"

#include "nn/plot.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *gk_model_name(gk_model_kind model) {
  switch (model) {
  case GK_MODEL_MAMBA: return "mamba";
  case GK_MODEL_LLAMA: return "llama";
  }
  return "?";
}

const gk_train_args gk_train_defaults = {
    .model = GK_MODEL_MAMBA,
    .task = GK_TASK_COPY,
    .data = NULL,
    .layers = 2,
    .width = 64,
    .state = 16,
    .heads = 4,
    .kv_heads = 2,
    .steps = 1000,
    .batch = 16,
    .seq_len = 256,
    .lr = 3e-3,
    .min_lr = 3e-4,
    .warmup = 100,
    .weight_decay = 0.1,
    .clip = 1.0,
    .threads = 0,
    .seed = 1,
    .dtype = GK_F32,
    .device = GK_BACKEND_CPU,
    .selection = 1,
    .eval_every = 100,
    .eval_batches = 8,
    .checkpoint = NULL,
    .checkpoint_every = 0,
    .stop_after = 0,
    .resume = NULL,
    .plot = NULL,
    .quiet = 0,
    .allow_changes = 0,
    .zero = 0,
    .rank_timeout = 600,
    .copy_data = 8,
    .copy_values = 8,
    .eval_lengths = NULL,
    .eval_sequences = 64,
    .eval_tokens = 1 << 21,
    .eval_chunk = 2048,
    .eval_memory = 2048,
    .eval_out = NULL,
    .given = 0,
};

const gk_sample_args gk_sample_defaults = {
    .checkpoint = NULL,
    .prompt = "\n",
    .tokens = 200,
    .temperature = 0.8,
    .top_k = 40,
    .seed = 1,
    .threads = 0,
    .given = 0,
};

// ---------------------------------------------------------------- tables

typedef enum kind {
  K_INT,     // int field, range [min, max]
  K_INT64,   // int64_t field, range [min, max]
  K_U64,     // uint64_t field, any value
  K_DOUBLE,  // double field, finite, range [min, max] or (min, max] with min_open
  K_STRING,  // const char * field, not empty
  K_FLAG,    // int field set to flag_value; takes no value
  K_CHOICE,  // enum field (int-sized), one of `choices`
} kind;

typedef struct choice {
  const char *name;
  int value;
} choice;

typedef struct option {
  const char *group;      // a --help heading that starts at this option (NULL: none)
  const char *name;       // "--lr"
  const char *metavar;    // the value in --help ("X"); NULL for flags
  kind kind;
  size_t offset;          // of the field in the args struct
  double min, max;
  int min_open;
  const choice *choices;  // K_CHOICE: ends with {NULL, 0}
  int flag_value;         // K_FLAG
  int hide_default;       // 1: the help text says the default itself
  const char *help;
} option;

_Static_assert(sizeof(gk_model_kind) == sizeof(int) && sizeof(gk_task_kind) == sizeof(int) &&
                   sizeof(gk_dtype) == sizeof(int) && sizeof(gk_backend) == sizeof(int),
               "choice fields are int-sized enums");

static const choice model_choices[] = {{"mamba", GK_MODEL_MAMBA}, {"llama", GK_MODEL_LLAMA}, {NULL, 0}};
static const choice task_choices[] = {
    {"copy", GK_TASK_COPY}, {"induction", GK_TASK_INDUCTION}, {"text", GK_TASK_TEXT}, {NULL, 0}};
static const choice dtype_choices[] = {{"f32", GK_F32}, {"bf16", GK_BF16}, {"f16", GK_F16}, {NULL, 0}};
static const choice device_choices[] = {
    {"cpu", GK_BACKEND_CPU}, {"vulkan", GK_BACKEND_VULKAN}, {"webgpu", GK_BACKEND_WEBGPU}, {NULL, 0}};

#define T(field) offsetof(gk_train_args, field)
static const option train_opts[] = {
    {"model", "--model", "mamba|llama", K_CHOICE, T(model), 0, 0, 0, model_choices, 0, 0, "architecture"},
    {NULL, "--layers", "N", K_INT, T(layers), 1, 1024, 0, NULL, 0, 0, "number of blocks"},
    {NULL, "--width", "D", K_INT, T(width), 1, 65536, 0, NULL, 0, 0, "model width d_model"},
    {NULL, "--state", "N", K_INT, T(state), 1, 4096, 0, NULL, 0, 0, "mamba: state size d_state"},
    {NULL, "--no-selection", NULL, K_FLAG, T(selection), 0, 0, 0, NULL, 0, 0,
     "mamba: delta, B and C input-independent (the ablation)"},
    {NULL, "--heads", "H", K_INT, T(heads), 1, 4096, 0, NULL, 0, 0, "llama: attention heads (divides --width)"},
    {NULL, "--kv-heads", "H", K_INT, T(kv_heads), 1, 4096, 0, NULL, 0, 0,
     "llama: key/value heads, divides --heads"},
    {NULL, "--dtype", "f32|bf16|f16", K_CHOICE, T(dtype), 0, 0, 0, dtype_choices, 0, 0,
     "compute precision: bf16/f16 run the model in 16 bits over f32 master weights (f32 sums, loss, AdamW, "
     "checkpoints); f16 adds dynamic loss scaling"},
    {NULL, "--device", "cpu|vulkan|webgpu", K_CHOICE, T(device), 0, 0, 0, device_choices, 0, 0,
     "where training runs: vulkan and webgpu run forward, backward, clipping and AdamW on the device (f32 "
     "only), evaluation on the host; vulkan: the Vulkan device ($GK_VULKAN_DEVICE picks one); webgpu: the "
     "WebAssembly build only (node wasm/gradkern.mjs train, the web page) on the host's WebGPU device"},
    {"task and data", "--task", "copy|induction|text", K_CHOICE, T(task), 0, 0, 0, task_choices, 0, 0,
     "the task (text: bytes of --data)"},
    {NULL, "--data", "FILE", K_STRING, T(data), 0, 0, 0, NULL, 0, 0,
     "text to learn (the last 10% is held out)"},
    {NULL, "--tokenizer", "PATH", K_STRING, T(tokenizer), 0, 0, 0, NULL, 0, 0,
     "text: learn BPE tokens, not bytes (a tokenizer.json, or a directory with GPT-2's encoder.json and vocab.bpe)"},
    {NULL, "--init", "DIR", K_STRING, T(init), 0, 0, 0, NULL, 0, 0,
     "text: fine-tune the Hugging Face Mamba or LLaMA model in DIR (config.json, model.safetensors); it sets the sizes"},
    {NULL, "--save-hf", "DIR", K_STRING, T(save_hf), 0, 0, 0, NULL, 0, 0,
     "at the end, write the model to DIR in Hugging Face's format (in --init's dtype, else F32)"},
    {NULL, "--seq-len", "T", K_INT, T(seq_len), 1, 1 << 24, 0, NULL, 0, 0, "tokens per training sequence"},
    {NULL, "--copy-data", "K", K_INT, T(copy_data), 1, 1 << 20, 0, NULL, 0, 0,
     "copy: data tokens to reproduce (the sequence needs at least 2K tokens)"},
    {NULL, "--copy-values", "V", K_INT, T(copy_values), 1, 1 << 20, 0, NULL, 0, 0,
     "copy: values of a data token (vocabulary V + 2: noise and marker)"},
    {NULL, "--batch", "B", K_INT, T(batch), 1, 1 << 20, 0, NULL, 0, 0, "sequences per step"},
    {NULL, "--seed", "S", K_U64, T(seed), 0, 0, 0, NULL, 0, 0, "seed of the weights and the data"},
    {"optimisation", "--steps", "N", K_INT64, T(steps), 1, 1e12, 0, NULL, 0, 0, "optimizer steps (AdamW)"},
    {NULL, "--lr", "X", K_DOUBLE, T(lr), 0, 10, 1, NULL, 0, 0, "peak learning rate, > 0"},
    {NULL, "--min-lr", "X", K_DOUBLE, T(min_lr), 0, 10, 0, NULL, 0, 0,
     "final learning rate of the cosine decay; unless given, it scales with --lr"},
    {NULL, "--warmup", "N", K_INT64, T(warmup), 0, 1e12, 0, NULL, 0, 0,
     "steps of linear warmup; unless given, it scales with --steps"},
    {NULL, "--weight-decay", "X", K_DOUBLE, T(weight_decay), 0, 100, 0, NULL, 0, 0, "AdamW weight decay"},
    {NULL, "--clip", "X", K_DOUBLE, T(clip), 0, 1e6, 0, NULL, 0, 0, "largest gradient norm (0: no clipping)"},
    {NULL, "--threads", "N", K_INT, T(threads), 0, 1024, 0, NULL, 0, 0,
     "CPU threads (0: $GK_NUM_THREADS or all)"},
    {"evaluation and output", "--eval-every", "K", K_INT64, T(eval_every), 0, 1e12, 0, NULL, 0, 0,
     "evaluate every K steps (0: at the end)"},
    {NULL, "--eval-batches", "N", K_INT, T(eval_batches), 1, 1 << 20, 0, NULL, 0, 0, "batches per evaluation"},
    {NULL, "--checkpoint", "FILE", K_STRING, T(checkpoint), 0, 0, 0, NULL, 0, 0,
     "save the run here (safetensors)"},
    {NULL, "--checkpoint-every", "K", K_INT64, T(checkpoint_every), 0, 1e12, 0, NULL, 0, 0,
     "save every K steps (0: at the end)"},
    {NULL, "--resume", "FILE", K_STRING, T(resume), 0, 0, 0, NULL, 0, 0,
     "continue the run saved in FILE (needs --checkpoint, which may be FILE itself)"},
    {NULL, "--allow-changes", NULL, K_FLAG, T(allow_changes), 0, 0, 0, NULL, 1, 0,
     "with --resume: continue although --data, --steps, --lr, --seq-len, --batch, ... differ from the checkpoint's"},
    {NULL, "--stop-after", "N", K_INT64, T(stop_after), 0, 1e12, 0, NULL, 0, 0,
     "stop after N steps of this invocation (0: at --steps; needs --checkpoint); with --resume, runs in pieces"},
    {NULL, "--plot", "FILE.svg", K_STRING, T(plot), 0, 0, 0, NULL, 0, 0, "draw the training and evaluation loss"},
    {"accuracy against test length (copy, induction; after training)", "--eval-lengths", "L1,L2,...", K_STRING,
     T(eval_lengths), 0, 0, 0, NULL, 0, 0,
     "held-out accuracy at each length (mamba: in pieces, any length; llama: whole sequences, up to --eval-memory)"},
    {NULL, "--eval-sequences", "N", K_INT, T(eval_sequences), 1, 1 << 20, 0, NULL, 0, 0,
     "sequences per length, at most (8 at a time)"},
    {NULL, "--eval-tokens", "N", K_INT64, T(eval_tokens), 1, 1e12, 0, NULL, 0, 0,
     "tokens per length, at most: fewer sequences at long lengths (but at least one)"},
    {NULL, "--eval-chunk", "N", K_INT, T(eval_chunk), 1, 1 << 20, 0, NULL, 0, 0,
     "mamba: tokens per piece (the conv and scan states carried across pieces: memory independent of length)"},
    {NULL, "--eval-memory", "MIB", K_INT, T(eval_memory), 1, 1 << 24, 0, NULL, 0, 0,
     "llama: the largest whole-sequence run; longer lengths are reported as not run"},
    {NULL, "--eval-out", "FILE.json", K_STRING, T(eval_out), 0, 0, 0, NULL, 0, 0,
     "write the accuracy per length (and its time and memory) as JSON"},
    {NULL, "--quiet", NULL, K_FLAG, T(quiet), 0, 0, 0, NULL, 1, 0, "print only the summary and errors"},
    {"data-parallel (mpirun -np N gradkern train ...: --batch sequences per rank)", "--zero", "0|1", K_INT, T(zero), 0,
     1, 0, NULL, 0, 0, "1: each rank keeps only its share of the AdamW moments (ZeRO stage 1)"},
    {NULL, "--rank-timeout", "S", K_INT, T(rank_timeout), 0, 1 << 24, 0, NULL, 0, 0,
     "stop when a step takes longer: a rank died or hangs (0: never)"},
};
#undef T

#define S(field) offsetof(gk_sample_args, field)
static const option sample_opts[] = {
    {NULL, "--checkpoint", "FILE", K_STRING, S(checkpoint), 0, 0, 0, NULL, 0, 0,
     "checkpoint of a text model (this or --model)"},
    {NULL, "--model", "DIR", K_STRING, S(model_dir), 0, 0, 0, NULL, 0, 0,
     "a Hugging Face Mamba or LLaMA model directory (its tokenizer: DIR/tokenizer.json, or --tokenizer)"},
    {NULL, "--prompt", "TEXT", K_STRING, S(prompt), 0, 0, 0, NULL, 0, 1, "text to continue (default: a newline)"},
    {NULL, "--tokens", "N", K_INT, S(tokens), 1, 1 << 24, 0, NULL, 0, 0, "tokens (bytes, or BPE tokens) to generate"},
    {NULL, "--tokenizer", "PATH", K_STRING, S(tokenizer), 0, 0, 0, NULL, 0, 0,
     "the model's tokenizer, when it is no longer where the checkpoint says (checked against it)"},
    {NULL, "--temperature", "T", K_DOUBLE, S(temperature), 0, 100, 0, NULL, 0, 0,
     "sampling temperature (0: always the most likely)"},
    {NULL, "--top-k", "K", K_INT, S(top_k), 0, 1 << 20, 0, NULL, 0, 0, "sample among the K most likely (0: all)"},
    {NULL, "--seed", "S", K_U64, S(seed), 0, 0, 0, NULL, 0, 0, "seed of the sampling"},
    {NULL, "--threads", "N", K_INT, S(threads), 0, 1024, 0, NULL, 0, 0,
     "CPU threads (0: $GK_NUM_THREADS or all)"},
};
#undef S

enum {
  N_TRAIN_OPTS = sizeof train_opts / sizeof *train_opts,
  N_SAMPLE_OPTS = sizeof sample_opts / sizeof *sample_opts,
};
_Static_assert(N_TRAIN_OPTS <= 64 && N_SAMPLE_OPTS <= 64, "the `given` masks have 64 bits");

// ---------------------------------------------------------------- values

// Digits with an optional leading '-': the only integers accepted.
static int integer_syntax(const char *s) {
  if (*s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

// [+-] digits [. digits] [e|E [+-] digits], with at least one mantissa digit.
static int real_syntax(const char *s) {
  if (*s == '+' || *s == '-') s++;
  int digits = 0;
  while (*s >= '0' && *s <= '9') s++, digits++;
  if (*s == '.') {
    s++;
    while (*s >= '0' && *s <= '9') s++, digits++;
  }
  if (!digits) return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (*s < '0' || *s > '9') return 0;
    while (*s >= '0' && *s <= '9') s++;
  }
  return *s == 0;
}

// "1024", "1e+12" -> shortest readable form of a limit.
static const char *limit_str(double v, char *buf, size_t size) {
  snprintf(buf, size, fabs(v) < 1e9 && v == floor(v) ? "%.0f" : "%g", v);
  return buf;
}

static gk_status set_value(const option *o, const char *value, void *base) {
  char *field = (char *)base + o->offset, lim[32];
  const char *v60 = value;
  switch (o->kind) {
  case K_INT:
  case K_INT64: {
    if (!integer_syntax(value)) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is not an integer", o->name, v60);
    errno = 0;
    long long x = strtoll(value, NULL, 10);
    if (errno == ERANGE || (double)x > 1e15 || (double)x < -1e15) {
      if (value[0] == '-') return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be at least %s", o->name, v60,
                                          limit_str(o->min, lim, sizeof lim));
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be at most %s", o->name, v60,
                     limit_str(o->max, lim, sizeof lim));
    }
    if ((double)x < o->min)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be at least %s", o->name, v60,
                     limit_str(o->min, lim, sizeof lim));
    if ((double)x > o->max)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be at most %s", o->name, v60,
                     limit_str(o->max, lim, sizeof lim));
    if (o->kind == K_INT) {
      int i = (int)x;
      memcpy(field, &i, sizeof i);
    } else {
      int64_t i = x;
      memcpy(field, &i, sizeof i);
    }
    return GK_SUCCESS;
  }
  case K_U64: {
    if (value[0] == '-' && integer_syntax(value))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be a non-negative integer", o->name, v60);
    if (!integer_syntax(value)) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is not an integer", o->name, v60);
    errno = 0;
    unsigned long long x = strtoull(value, NULL, 10);
    if (errno == ERANGE)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is out of range (at most %llu)", o->name, v60,
                     (unsigned long long)UINT64_MAX);
    uint64_t u = x;
    memcpy(field, &u, sizeof u);
    return GK_SUCCESS;
  }
  case K_DOUBLE: {
    if (!real_syntax(value)) {
      const char *w = value + (value[0] == '+' || value[0] == '-');
      if (!strcasecmp(w, "nan") || !strcasecmp(w, "inf") || !strcasecmp(w, "infinity"))
        return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is not a finite number", o->name, v60);
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is not a number", o->name, v60);
    }
    errno = 0;
    double x = strtod(value, NULL);
    if (errno == ERANGE || !isfinite(x))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is out of range for a double", o->name, v60);
    if (o->min_open ? !(x > o->min) : !(x >= o->min))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be %s %s", o->name, v60, o->min_open ? ">" : ">=",
                     limit_str(o->min, lim, sizeof lim));
    if (x > o->max)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' must be <= %s", o->name, v60,
                     limit_str(o->max, lim, sizeof lim));
    memcpy(field, &x, sizeof x);
    return GK_SUCCESS;
  }
  case K_STRING:
    if (!*value) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: the value must not be empty", o->name);
    memcpy(field, &value, sizeof value);
    return GK_SUCCESS;
  case K_CHOICE: {
    for (const choice *c = o->choices; c->name; c++)
      if (!strcmp(c->name, value)) {
        memcpy(field, &c->value, sizeof c->value);
        return GK_SUCCESS;
      }
    char list[128] = "";
    for (const choice *c = o->choices; c->name; c++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", c == o->choices ? "" : ", ", c->name);
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: '%.60s' is not one of %s", o->name, v60, list);
  }
  case K_FLAG: memcpy(field, &o->flag_value, sizeof o->flag_value); return GK_SUCCESS;
  }
  return gk_nn_fail(GK_ERR_INTERNAL, "%s: option kind %d", o->name, (int)o->kind);
}

// ---------------------------------------------------------------- parsing

// Parse argv against a table into *base; bit i of *given marks opts[i].
static gk_status parse(const option *opts, size_t nopts, int argc, char *const *argv, void *base, uint64_t *given,
                       int *help) {
  if (!help) return gk_nn_fail(GK_ERR_NULL_POINTER, "argument parser: help is NULL");
  *help = 0;
  if (argc < 0 || (argc && !argv))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "argument parser: argv is NULL or argc %d is negative", argc);
  for (int i = 0; i < argc; i++) {
    if (!argv[i]) return gk_nn_fail(GK_ERR_NULL_POINTER, "argument parser: argv[%d] is NULL", i);
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      *help = 1;
      return GK_SUCCESS;
    }
  }
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0 || !arg[2])
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "unexpected argument '%.60s' (options start with --)", arg);
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    size_t k = 0;
    while (k < nopts && !(strlen(opts[k].name) == len && !strncmp(opts[k].name, arg, len))) k++;
    if (k == nopts) return gk_nn_fail(GK_ERR_INVALID_VALUE, "unknown option '%.*s'", (int)(len < 60 ? len : 60), arg);
    const option *o = &opts[k];
    const char *value = NULL;
    if (o->kind == K_FLAG) {
      if (eq) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s takes no value (got '%.60s')", o->name, eq + 1);
    } else if (eq) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s needs a value (%s)", o->name, o->metavar);
    }
    if (*given >> k & 1) {
      if (value) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s is given twice (again as '%.60s')", o->name, value);
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s is given twice", o->name);
    }
    gk_status st = set_value(o, value, base);
    if (st) return st;
    *given |= 1ull << k;
  }
  return GK_SUCCESS;
}

gk_status gk_train_args_set(gk_train_args *args, const char *name, const char *value) {
  if (!args || !name || !value) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_train_args_set: an argument is NULL");
  for (size_t k = 0; k < N_TRAIN_OPTS; k++)
    if (!strcmp(train_opts[k].name, name) && train_opts[k].kind != K_FLAG) return set_value(&train_opts[k], value, args);
  return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_train_args_set: '%.60s' is not an option that takes a value", name);
}

static int given_bit(const option *opts, size_t nopts, uint64_t given, const char *name) {
  if (!name) return 0;
  for (size_t k = 0; k < nopts; k++)
    if (!strcmp(opts[k].name, name)) return (int)(given >> k & 1);
  return 0;
}

int gk_train_args_given(const gk_train_args *a, const char *name) {
  return a ? given_bit(train_opts, N_TRAIN_OPTS, a->given, name) : 0;
}

int gk_sample_args_given(const gk_sample_args *a, const char *name) {
  return a ? given_bit(sample_opts, N_SAMPLE_OPTS, a->given, name) : 0;
}

// The options must agree with each other.
static gk_status check_train(const gk_train_args *a) {
  if (a->task == GK_TASK_TEXT && !a->data)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--task text needs --data FILE (the text to train on)");
  if (a->task != GK_TASK_TEXT && a->data)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--data '%.60s' is only used by --task text (the task is %s)", a->data,
                   gk_task_name(a->task));
  if (a->task != GK_TASK_TEXT && a->tokenizer)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--tokenizer '%.60s' is only used by --task text (the task is %s)",
                   a->tokenizer, gk_task_name(a->task));
  // --min-lr and --warmup were made to follow --lr and --steps where not
  // given (gk_train_args_parse), so only values the user gave get here.
  if (a->device != GK_BACKEND_CPU && a->dtype != GK_F32)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "--device %s trains in f32, not --dtype %s", gk_backend_name(a->device),
                      gk_dtype_name(a->dtype));
  if (a->min_lr > a->lr)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--min-lr %g is larger than --lr %g", a->min_lr, a->lr);
  if (a->warmup > a->steps)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--warmup %lld is more than --steps %lld", (long long)a->warmup,
                   (long long)a->steps);
  if (a->checkpoint_every > 0 && !a->checkpoint)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--checkpoint-every %lld needs --checkpoint FILE",
                   (long long)a->checkpoint_every);
  if (a->stop_after > 0 && !a->checkpoint)
    return gk_nn_fail(GK_ERR_INVALID_VALUE,
                   "--stop-after %lld needs --checkpoint FILE (the run would stop with nothing saved)",
                   (long long)a->stop_after);
  if (a->resume && !a->checkpoint)
    return gk_nn_fail(GK_ERR_INVALID_VALUE,
                   "--resume '%s' needs --checkpoint FILE (where the continued run is saved; it may be the same "
                   "file)",
                   a->resume);
  if (a->allow_changes && !a->resume)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--allow-changes applies to --resume only");
  if (a->init) {  // the model directory sets the architecture and sizes
    static const char *const sized[] = {"--model", "--layers", "--width", "--state", "--no-selection", "--heads",
                                        "--kv-heads"};
    if (a->task != GK_TASK_TEXT)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--init '%.60s' needs --task text", a->init);
    for (size_t k = 0; k < sizeof sized / sizeof *sized; k++)
      if (gk_train_args_given(a, sized[k]))
        return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s cannot be given with --init '%.60s' (the model directory sets it)",
                          sized[k], a->init);
  }
  if (a->save_hf && a->model == GK_MODEL_MAMBA && !a->selection)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--save-hf '%.60s': a Mamba model without selection has no Hugging Face form",
                      a->save_hf);
  static const char *const llama_only[] = {"--heads", "--kv-heads"};
  static const char *const mamba_only[] = {"--state", "--no-selection"};
  for (int k = 0; k < 2; k++) {
    if (a->model == GK_MODEL_MAMBA && gk_train_args_given(a, llama_only[k]))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s applies to --model llama only (the model is mamba)", llama_only[k]);
    if (a->model == GK_MODEL_LLAMA && gk_train_args_given(a, mamba_only[k]))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s applies to --model mamba only (the model is llama)", mamba_only[k]);
  }
  if (a->model == GK_MODEL_LLAMA) {
    if (a->width % a->heads)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--width %d is not a multiple of --heads %d", a->width, a->heads);
    if (a->heads % a->kv_heads)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--heads %d is not a multiple of --kv-heads %d", a->heads, a->kv_heads);
    if ((a->width / a->heads) % 2)
      return gk_nn_fail(GK_ERR_INVALID_VALUE,
                     "the head size --width / --heads = %d / %d = %d must be even (RoPE rotates pairs)", a->width,
                     a->heads, a->width / a->heads);
  }
  if (a->task != GK_TASK_COPY && (gk_train_args_given(a, "--copy-data") || gk_train_args_given(a, "--copy-values")))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--copy-data and --copy-values apply to --task copy only (the task is %s)",
                      gk_task_name(a->task));
  static const char *const eval_only[] = {"--eval-sequences", "--eval-tokens", "--eval-chunk", "--eval-memory",
                                          "--eval-out"};
  for (size_t k = 0; k < sizeof eval_only / sizeof *eval_only; k++)
    if (!a->eval_lengths && gk_train_args_given(a, eval_only[k]))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s applies to --eval-lengths only", eval_only[k]);
  if (a->eval_lengths) {
    int64_t lengths[GK_MAX_EVAL_LENGTHS];
    int n;
    gk_status st = gk_train_eval_lengths(a->eval_lengths, lengths, &n);
    if (st) return st;
    if (a->task == GK_TASK_TEXT)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths applies to the synthetic tasks (copy, induction), not text");
  }
  if (a->plot && gk_plot_check_path(a->plot)) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", gk_last_error());
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--plot: %s", msg);
  }
  return GK_SUCCESS;
}

gk_status gk_train_eval_lengths(const char *list, int64_t *out, int *n) {
  *n = 0;
  if (!list || !*list) return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths: the list is empty");
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    char item[32];
    if (len == 0 || len >= sizeof item)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths '%.60s': item %d is %s", list, *n + 1,
                        len ? "too long" : "empty");
    memcpy(item, p, len);
    item[len] = 0;
    if (!integer_syntax(item) || item[0] == '-')
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths: '%s' is not a length (a whole number)", item);
    errno = 0;
    long long v = strtoll(item, NULL, 10);
    if (errno == ERANGE || v < 3 || v > 1 << 24)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths: %s must be in [3, %d]", item, 1 << 24);
    if (*n == GK_MAX_EVAL_LENGTHS)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "--eval-lengths: more than %d lengths", GK_MAX_EVAL_LENGTHS);
    out[(*n)++] = v;
    p += len;
    if (!*p) break;
    p++;
  }
  return GK_SUCCESS;
}

gk_status gk_train_args_parse(int argc, char *const *argv, gk_train_args *args, int *help) {
  if (!args) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_train_args_parse: args is NULL");
  args->given = 0;
  const gk_train_args start = *args;
  gk_status st = parse(train_opts, N_TRAIN_OPTS, argc, argv, args, &args->given, help);
  if (st || *help) return st;
  // Defaults that follow another option: the warmup keeps its share of the
  // steps, the final learning rate its share of the peak one.
  if (gk_train_args_given(args, "--steps") && !gk_train_args_given(args, "--warmup") && start.steps > 0) {
    args->warmup = (int64_t)llround((double)start.warmup * (double)args->steps / (double)start.steps);
    if (args->warmup > args->steps) args->warmup = args->steps;
  }
  if (gk_train_args_given(args, "--lr") && !gk_train_args_given(args, "--min-lr") && start.lr > 0)
    args->min_lr = fmin(start.min_lr * (args->lr / start.lr), args->lr);
  return check_train(args);
}

gk_status gk_sample_args_parse(int argc, char *const *argv, gk_sample_args *args, int *help) {
  if (!args) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_sample_args_parse: args is NULL");
  args->given = 0;
  gk_status st = parse(sample_opts, N_SAMPLE_OPTS, argc, argv, args, &args->given, help);
  if (st || *help) return st;
  if (!args->checkpoint && !args->model_dir)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--checkpoint FILE is required (the checkpoint of a text model)");
  if (args->checkpoint && args->model_dir)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--checkpoint '%.60s' and --model '%.60s': give one of them",
                      args->checkpoint, args->model_dir);
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- help

// The default value of option o in *base, as --help shows it ("" for none).
static void default_str(const option *o, const void *base, char *buf, size_t size) {
  const char *field = (const char *)base + o->offset;
  buf[0] = 0;
  switch (o->kind) {
  case K_INT: {
    int v;
    memcpy(&v, field, sizeof v);
    snprintf(buf, size, "%d", v);
    break;
  }
  case K_INT64: {
    int64_t v;
    memcpy(&v, field, sizeof v);
    snprintf(buf, size, "%lld", (long long)v);
    break;
  }
  case K_U64: {
    uint64_t v;
    memcpy(&v, field, sizeof v);
    snprintf(buf, size, "%llu", (unsigned long long)v);
    break;
  }
  case K_DOUBLE: {
    double v;
    memcpy(&v, field, sizeof v);
    snprintf(buf, size, "%g", v);
    break;
  }
  case K_STRING: {
    const char *v;
    memcpy(&v, field, sizeof v);
    if (v) snprintf(buf, size, "%s", v);
    break;
  }
  case K_CHOICE: {
    int v;
    memcpy(&v, field, sizeof v);
    for (const choice *c = o->choices; c->name; c++)
      if (c->value == v) snprintf(buf, size, "%s", c->name);
    break;
  }
  case K_FLAG: break;
  }
}

static void usage(FILE *out, const option *opts, size_t nopts, const void *defaults) {
  for (size_t k = 0; k < nopts; k++) {
    const option *o = &opts[k];
    if (o->group) fprintf(out, "\n%s:\n", o->group);
    char left[64], def[128];
    snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    default_str(o, defaults, def, sizeof def);
    fprintf(out, "  %-28s %s", left, o->help);
    if (def[0] && !o->hide_default) fprintf(out, " (default %s)", def);
    fputc('\n', out);
  }
}

void gk_train_usage(FILE *out, const gk_train_args *defaults) {
  fputs("usage: gradkern train [options]\n"
        "\n"
        "Trains a language model from scratch on the CPU. With no options: a small\n"
        "Mamba on the selective copying task, generated on the fly from the seed\n"
        "(8 data tokens of 8 values scattered among noise in 56 positions, to be\n"
        "reproduced in order after 8 markers; accuracy counts those 8 answers).\n"
        "Induction heads is evaluated on sequences 4 times longer than --seq-len.\n"
        "Numbers are checked: a value out of range or not a number is an error,\n"
        "and so is an option given twice. Checkpoints carry a CRC-32 per tensor,\n"
        "checked on --resume, and record the run's options and --data file: a\n"
        "resumed run that differs stops and says how, unless --allow-changes.\n",
        out);
  usage(out, train_opts, N_TRAIN_OPTS, defaults ? defaults : &gk_train_defaults);
  fputs("\n  --help, -h                   show this message\n", out);
}

void gk_sample_usage(FILE *out, const gk_sample_args *defaults) {
  fputs("usage: gradkern sample --checkpoint FILE [options]\n"
        "       gradkern sample --model DIR [--tokenizer PATH] [options]\n"
        "\n"
        "Generates text from a model trained with --task text (on bytes, or on the\n"
        "BPE tokens of the tokenizer the checkpoint names), or from a Hugging Face\n"
        "Mamba or LLaMA model directory.\n"
        "\n",
        out);
  usage(out, sample_opts, N_SAMPLE_OPTS, defaults ? defaults : &gk_sample_defaults);
  fputs("  --help, -h                   show this message\n", out);
}
