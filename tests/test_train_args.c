// The `gradkern train` and `gradkern sample` command lines: defaults, every
// option accepted in both spellings, and bad input rejected with a message
// naming the option and the value.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include <math.h>
#include "train_args.h"

// Parse a NULL-terminated list of arguments, starting from the defaults.
static gk_status parse_train(gk_train_args *a, int *help, const char *const *argv) {
  *a = gk_train_defaults;
  int argc = 0;
  while (argv[argc]) argc++;
  return gk_train_args_parse(argc, (char *const *)argv, a, help);
}

static gk_status parse_sample(gk_sample_args *a, int *help, const char *const *argv) {
  *a = gk_sample_defaults;
  int argc = 0;
  while (argv[argc]) argc++;
  return gk_sample_args_parse(argc, (char *const *)argv, a, help);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_good(void) {
  gk_train_args a;
  int help = 7;
  a = gk_train_defaults;
  a.given = 12345;
  check(gk_train_args_parse(0, NULL, &a, &help) == GK_SUCCESS && help == 0, "no arguments");
  const gk_train_args *d = &gk_train_defaults;
  check(a.model == d->model && a.task == d->task && a.data == d->data && a.layers == d->layers &&
            a.width == d->width && a.state == d->state && a.heads == d->heads && a.kv_heads == d->kv_heads &&
            a.steps == d->steps && a.batch == d->batch && a.seq_len == d->seq_len && a.lr == d->lr &&
            a.min_lr == d->min_lr && a.warmup == d->warmup && a.weight_decay == d->weight_decay && a.clip == d->clip &&
            a.threads == d->threads && a.seed == d->seed && a.dtype == d->dtype && a.selection == d->selection &&
            a.eval_every == d->eval_every && a.eval_batches == d->eval_batches && a.checkpoint == d->checkpoint &&
            a.checkpoint_every == d->checkpoint_every && a.resume == d->resume && a.plot == d->plot &&
            a.quiet == d->quiet && a.given == 0,
        "no arguments: the defaults");
  check(a.model == GK_MODEL_MAMBA && a.task == GK_TASK_COPY && a.dtype == GK_F32 && a.selection == 1 && !a.quiet &&
            a.lr > 0 && a.min_lr <= a.lr && a.warmup <= a.steps && !a.data && !a.checkpoint,
        "defaults: a Mamba on selective copying, consistent");

  gk_status st = parse_train(&a, &help,
                             ARGS("--model", "llama", "--task", "text", "--data", "input.txt", "--layers", "4",
                                  "--width", "128", "--heads", "8", "--kv-heads", "2", "--steps", "5000", "--batch",
                                  "32", "--seq-len", "512", "--lr", "6e-4", "--min-lr", "6e-5", "--warmup", "200",
                                  "--weight-decay", "0.05", "--clip", "0.5", "--threads", "2", "--seed",
                                  "18446744073709551615", "--dtype", "bf16", "--eval-every", "250",
                                  "--eval-batches", "4", "--checkpoint", "ck.safetensors", "--checkpoint-every",
                                  "1000", "--resume", "old.safetensors", "--plot", "loss.SVG", "--quiet"));
  check(st == GK_SUCCESS, "every train option: %s", gk_last_error());
  check(a.model == GK_MODEL_LLAMA && a.task == GK_TASK_TEXT && !strcmp(a.data, "input.txt") && a.layers == 4 &&
            a.width == 128 && a.heads == 8 && a.kv_heads == 2 && a.steps == 5000 && a.batch == 32 &&
            a.seq_len == 512 && a.lr == 6e-4 && a.min_lr == 6e-5 && a.warmup == 200 && a.weight_decay == 0.05 &&
            a.clip == 0.5 && a.threads == 2 && a.seed == UINT64_MAX && a.dtype == GK_BF16 && a.eval_every == 250 &&
            a.eval_batches == 4 && !strcmp(a.checkpoint, "ck.safetensors") && a.checkpoint_every == 1000 &&
            !strcmp(a.resume, "old.safetensors") && !strcmp(a.plot, "loss.SVG") && a.quiet == 1,
        "every train option stored");
  check(gk_train_args_given(&a, "--lr") && gk_train_args_given(&a, "--quiet") && !gk_train_args_given(&a, "--state") &&
            !gk_train_args_given(&a, "--bogus") && !gk_train_args_given(&a, NULL),
        "given: set options only");

  st = parse_train(&a, &help,
                   ARGS("--state=32", "--no-selection", "--width=96", "--clip=0", "--min-lr=0", "--warmup=0",
                        "--eval-every=0", "--threads=0", "--seed=0", "--lr=+1.", "--task=induction"));
  check(st == GK_SUCCESS && a.state == 32 && a.lr == 1.0 && a.selection == 0 && a.width == 96 && a.clip == 0 &&
            a.min_lr == 0 && a.warmup == 0 && a.eval_every == 0 && a.seed == 0 && a.task == GK_TASK_INDUCTION,
        "--opt=value, zero where allowed: %s", gk_last_error());
  st = parse_train(&a, &help, ARGS("--lr=.5"));
  check(st == GK_SUCCESS && a.lr == 0.5, "--lr=.5: %s", gk_last_error());
  st = parse_train(&a, &help, ARGS("--lr", "2E-3"));
  check(st == GK_SUCCESS && a.lr == 2e-3, "--lr 2E-3: %s", gk_last_error());

  check(parse_train(&a, &help, ARGS("--lr", "abc", "--help")) == GK_SUCCESS && help == 1, "--help wins");
  check(parse_train(&a, &help, ARGS("-h")) == GK_SUCCESS && help == 1, "-h");

  gk_sample_args s;
  st = parse_sample(&s, &help, ARGS("--checkpoint", "m.safetensors"));
  check(st == GK_SUCCESS && help == 0 && !strcmp(s.checkpoint, "m.safetensors") && s.tokens == gk_sample_defaults.tokens &&
            !strcmp(s.prompt, "\n"),
        "sample: defaults: %s", gk_last_error());
  st = parse_sample(&s, &help,
                    ARGS("--checkpoint", "m.st", "--prompt", "Once upon", "--tokens", "50", "--temperature", "0",
                         "--top-k", "0", "--seed", "7", "--threads", "1"));
  check(st == GK_SUCCESS && !strcmp(s.prompt, "Once upon") && s.tokens == 50 && s.temperature == 0 &&
            s.top_k == 0 && s.seed == 7 && s.threads == 1 && gk_sample_args_given(&s, "--top-k") &&
            !gk_sample_args_given(&s, "--lr"),
        "sample: every option: %s", gk_last_error());
}

// The caller's own starting values: kept where not given, shown by --help.
// The options of selective copying's sizes and of --eval-lengths.
static void test_eval_options(void) {
  gk_train_args a;
  int help;
  gk_status st = parse_train(&a, &help,
                             ARGS("--task", "induction", "--eval-lengths", "64,128,1048576", "--eval-sequences", "16",
                                  "--eval-tokens", "4096", "--eval-chunk", "512", "--eval-memory", "100",
                                  "--eval-out", "acc.json"));
  check(st == GK_SUCCESS, "every --eval-lengths option: %s", gk_last_error());
  int64_t lengths[GK_MAX_EVAL_LENGTHS];
  int n = 0;
  check(st == GK_SUCCESS && gk_train_eval_lengths(a.eval_lengths, lengths, &n) == GK_SUCCESS && n == 3 &&
            lengths[0] == 64 && lengths[1] == 128 && lengths[2] == 1048576 && a.eval_sequences == 16 &&
            a.eval_tokens == 4096 && a.eval_chunk == 512 && a.eval_memory == 100 && !strcmp(a.eval_out, "acc.json"),
        "the --eval-lengths options are read");
  st = parse_train(&a, &help, ARGS("--copy-data", "16", "--copy-values", "14", "--seq-len", "128"));
  check(st == GK_SUCCESS && a.copy_data == 16 && a.copy_values == 14, "--copy-data, --copy-values: %s",
        gk_last_error());
  char list[8 * (GK_MAX_EVAL_LENGTHS + 1)] = "";
  for (int i = 0; i <= GK_MAX_EVAL_LENGTHS; i++) strcat(list, i ? ",64" : "64");
  check(gk_train_eval_lengths(list, lengths, &n) == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "more than 64"),
        "65 lengths refused: %s", gk_last_error());
}

static void test_custom_defaults(void) {
  gk_train_args mine = gk_train_defaults;
  mine.lr = 0.0125;
  mine.model = GK_MODEL_LLAMA;
  mine.width = 96;
  gk_train_args a = mine;
  int help;
  check(gk_train_args_parse(2, (char *const *)ARGS("--steps", "700"), &a, &help) == GK_SUCCESS && a.lr == 0.0125 &&
            a.model == GK_MODEL_LLAMA && a.width == 96 && a.steps == 700 && !gk_train_args_given(&a, "--lr") &&
            gk_train_args_given(&a, "--steps"),
        "custom starting values kept: %s", gk_last_error());
  FILE *f = tmpfile();
  gk_train_usage(f, &mine);
  long n = ftell(f);
  char *s = calloc((size_t)n + 1, 1);
  rewind(f);
  s[fread(s, 1, (size_t)n, f)] = 0;
  fclose(f);
  check(strstr(s, "(default 0.0125)") && strstr(s, "(default llama)") && strstr(s, "(default 96)"),
        "usage shows the caller's defaults");
  free(s);
}

// Defaults that follow another option: --warmup keeps its share of --steps,
// --min-lr its share of --lr, unless given; only given values are errors.
static void test_dependent_defaults(void) {
  gk_train_args a;
  int help;
  const gk_train_args *d = &gk_train_defaults;
  check(parse_train(&a, &help, ARGS("--steps", "60")) == GK_SUCCESS && a.steps == 60 &&
            a.warmup == (d->warmup * 60 + d->steps / 2) / d->steps && !gk_train_args_given(&a, "--warmup"),
        "--steps 60: the warmup scales with it (%lld): %s", (long long)a.warmup, gk_last_error());
  check(parse_train(&a, &help, ARGS("--steps", "1")) == GK_SUCCESS && a.warmup <= 1, "--steps 1: %s", gk_last_error());
  check(parse_train(&a, &help, ARGS("--steps", "60", "--warmup", "7")) == GK_SUCCESS && a.warmup == 7,
        "--warmup given: kept: %s", gk_last_error());
  check(parse_train(&a, &help, ARGS("--warmup", "7")) == GK_SUCCESS && a.warmup == 7 && a.steps == d->steps,
        "--warmup alone: %s", gk_last_error());
  check(parse_train(&a, &help, ARGS("--lr", "1e-4")) == GK_SUCCESS && a.lr == 1e-4 &&
            fabs(a.min_lr - d->min_lr * 1e-4 / d->lr) < 1e-15 && a.min_lr <= a.lr,
        "--lr 1e-4: --min-lr scales with it (%g): %s", a.min_lr, gk_last_error());
  check(parse_train(&a, &help, ARGS("--lr", "1e-4", "--min-lr", "0")) == GK_SUCCESS && a.min_lr == 0,
        "--min-lr given: kept: %s", gk_last_error());
  check(parse_train(&a, &help, ARGS("--min-lr", "1e-3")) == GK_SUCCESS && a.lr == d->lr && a.min_lr == 1e-3,
        "--min-lr alone: %s", gk_last_error());
  // The starting values of `gradkern train` (1500 steps, warmup 100).
  gk_train_args mine = gk_train_defaults;
  mine.steps = 1500;
  mine.warmup = 100;
  a = mine;
  check(gk_train_args_parse(2, (char *const *)ARGS("--steps", "60"), &a, &help) == GK_SUCCESS && a.warmup == 4,
        "custom start: --steps 60 gives warmup 4 (%lld): %s", (long long)a.warmup, gk_last_error());
  a = mine;
  check(gk_train_args_parse(0, NULL, &a, &help) == GK_SUCCESS && a.warmup == 100 && a.steps == 1500,
        "custom start, no options: unchanged");
}

// Values read back from elsewhere (a checkpoint) through the option's own parser.
static void test_set(void) {
  gk_train_args a = gk_train_defaults;
  check(gk_train_args_set(&a, "--lr", "0.0125") == GK_SUCCESS && a.lr == 0.0125 && a.given == 0, "set --lr");
  check(gk_train_args_set(&a, "--seed", "18446744073709551615") == GK_SUCCESS && a.seed == UINT64_MAX, "set --seed");
  check(gk_train_args_set(&a, "--seed", "x") != GK_SUCCESS && strstr(gk_last_error(), "--seed: 'x' is not an integer"),
        "set --seed x: %s", gk_last_error());
  check(gk_train_args_set(&a, "--steps", "12345678901234567890123") != GK_SUCCESS &&
            strstr(gk_last_error(), "must be at most"),
        "set --steps, 23 digits: %s", gk_last_error());
  check(gk_train_args_set(&a, "--quiet", "1") != GK_SUCCESS && gk_train_args_set(&a, "--bogus", "1") != GK_SUCCESS &&
            gk_train_args_set(NULL, "--lr", "1") == GK_ERR_NULL_POINTER,
        "set: flags, unknown options and NULL refused");
}

static void test_bad(void) {
  struct {
    const char *const *argv;
    const char *needle;
  } cases[] = {
      {ARGS("--lr", "abc"), "--lr: 'abc' is not a number"},
      {ARGS("--lr", "nan"), "--lr: 'nan' is not a finite number"},
      {ARGS("--lr", "-inf"), "--lr: '-inf' is not a finite number"},
      {ARGS("--lr", "-1"), "--lr: '-1' must be > 0"},
      {ARGS("--lr", "0"), "--lr: '0' must be > 0"},
      {ARGS("--lr", "1e999"), "--lr: '1e999' is out of range"},
      {ARGS("--lr", "1e-999"), "--lr: '1e-999' is out of range"},
      {ARGS("--lr", "11"), "--lr: '11' must be <= 10"},
      {ARGS("--lr", " 1"), "--lr: ' 1' is not a number"},
      {ARGS("--lr", "0x10"), "--lr: '0x10' is not a number"},
      {ARGS("--lr", "1e"), "--lr: '1e' is not a number"},
      {ARGS("--lr", ""), "--lr: '' is not a number"},
      {ARGS("--lr"), "--lr needs a value (X)"},
      {ARGS("--layers", "0"), "--layers: '0' must be at least 1"},
      {ARGS("--width", "-5"), "--width: '-5' must be at least 1"},
      {ARGS("--width", "65537"), "--width: '65537' must be at most 65536"},
      {ARGS("--steps", "1.5"), "--steps: '1.5' is not an integer"},
      {ARGS("--steps", "1e3"), "--steps: '1e3' is not an integer"},
      {ARGS("--batch", "99999999999999999999"), "--batch: '99999999999999999999' must be at most 1048576"},
      {ARGS("--batch", "-99999999999999999999"), "--batch: '-99999999999999999999' must be at least 1"},
      {ARGS("--seq-len", "+5"), "--seq-len: '+5' is not an integer"},
      {ARGS("--state", "0"), "--state: '0' must be at least 1"},
      {ARGS("--threads", "-1"), "--threads: '-1' must be at least 0"},
      {ARGS("--eval-batches", "0"), "--eval-batches: '0' must be at least 1"},
      {ARGS("--clip", "-0.5"), "--clip: '-0.5' must be >= 0"},
      {ARGS("--weight-decay", "x1"), "--weight-decay: 'x1' is not a number"},
      {ARGS("--seed", "-1"), "--seed: '-1' must be a non-negative integer"},
      {ARGS("--seed", "18446744073709551616"), "--seed: '18446744073709551616' is out of range"},
      {ARGS("--seed", "1.0"), "--seed: '1.0' is not an integer"},
      {ARGS("--model", "gpt"), "--model: 'gpt' is not one of mamba, llama"},
      {ARGS("--dtype", "f64"), "--dtype: 'f64' is not one of f32, bf16, f16"},
      {ARGS("--task", "induction", "--eval-lengths", "64,,128"), "--eval-lengths '64,,128': item 2 is empty"},
      {ARGS("--task", "induction", "--eval-lengths", "64,1e3"), "--eval-lengths: '1e3' is not a length"},
      {ARGS("--task", "induction", "--eval-lengths", "2"), "--eval-lengths: 2 must be in [3, 16777216]"},
      {ARGS("--task", "induction", "--eval-lengths", "99999999"), "--eval-lengths: 99999999 must be in [3"},
      {ARGS("--task", "induction", "--eval-lengths", "-64"), "--eval-lengths: '-64' is not a length"},
      {ARGS("--task", "text", "--data", "x", "--eval-lengths", "64"), "--eval-lengths applies to the synthetic"},
      {ARGS("--eval-chunk", "64"), "--eval-chunk applies to --eval-lengths only"},
      {ARGS("--eval-out", "a.json"), "--eval-out applies to --eval-lengths only"},
      {ARGS("--eval-lengths", "64", "--eval-chunk", "0"), "--eval-chunk: '0' must be at least 1"},
      {ARGS("--task", "induction", "--copy-data", "4"), "--copy-data and --copy-values apply to --task copy only"},
      {ARGS("--copy-values", "0"), "--copy-values: '0' must be at least 1"},
      {ARGS("--task", "Copy"), "--task: 'Copy' is not one of copy, induction, text"},
      {ARGS("--task", "text"), "--task text needs --data FILE"},
      {ARGS("--data", "x.txt"), "--data 'x.txt' is only used by --task text (the task is copy)"},
      {ARGS("--task", "text", "--data", ""), "--data: the value must not be empty"},
      {ARGS("--lr", "0.01", "--min-lr", "0.1"), "--min-lr 0.1 is larger than --lr 0.01"},
      {ARGS("--steps", "1000", "--warmup", "2000"), "--warmup 2000 is more than --steps 1000"},
      {ARGS("--checkpoint-every", "10"), "--checkpoint-every 10 needs --checkpoint FILE"},
      {ARGS("--stop-after", "10"), "--stop-after 10 needs --checkpoint FILE"},
      {ARGS("--resume", "run.st"), "--resume 'run.st' needs --checkpoint FILE"},
      {ARGS("--checkpoint", "c.st", "--allow-changes"), "--allow-changes applies to --resume only"},
      {ARGS("--lr", "0.01", "--lr=0.02"), "--lr is given twice (again as '0.02')"},
      {ARGS("--steps", "5", "--steps", "5"), "--steps is given twice (again as '5')"},
      {ARGS("--quiet", "--steps", "5", "--quiet"), "--quiet is given twice"},
      {ARGS("--steps", "60", "--warmup", "100"), "--warmup 100 is more than --steps 60"},
      {ARGS("--lr", "1e-4", "--min-lr", "2e-4"), "--min-lr 0.0002 is larger than --lr 0.0001"},
      {ARGS("--heads", "4"), "--heads applies to --model llama only (the model is mamba)"},
      {ARGS("--kv-heads", "4"), "--kv-heads applies to --model llama only"},
      {ARGS("--model", "llama", "--state", "8"), "--state applies to --model mamba only (the model is llama)"},
      {ARGS("--model", "llama", "--no-selection"), "--no-selection applies to --model mamba only"},
      {ARGS("--model", "llama", "--width", "64", "--heads", "3"), "--width 64 is not a multiple of --heads 3"},
      {ARGS("--model", "llama", "--heads", "4", "--kv-heads", "3"), "--heads 4 is not a multiple of --kv-heads 3"},
      {ARGS("--model", "llama", "--width", "12", "--heads", "4", "--kv-heads", "4"),
       "--width / --heads = 12 / 4 = 3 must be even"},
      {ARGS("--plot", "loss.png"), "--plot: plot file 'loss.png': PNG is not supported; name the file *.svg"},
      {ARGS("--plot", "loss.txt"), "--plot: plot file 'loss.txt': the name must end in .svg"},
      {ARGS("--frobnicate", "3"), "unknown option '--frobnicate'"},
      {ARGS("--lrx=3"), "unknown option '--lrx'"},
      {ARGS("extra"), "unexpected argument 'extra'"},
      {ARGS("-"), "unexpected argument '-'"},
      {ARGS("--"), "unexpected argument '--'"},
      {ARGS("-lr", "3"), "unexpected argument '-lr'"},
      {ARGS("--quiet=1"), "--quiet takes no value (got '1')"},
      {ARGS("--no-selection=yes"), "--no-selection takes no value"},
  };
  size_t n = sizeof cases / sizeof *cases;
  for (size_t i = 0; i < n; i++) {
    gk_train_args a;
    int help = 7;
    gk_status st = parse_train(&a, &help, cases[i].argv);
    // One hint is the command's to give: the message itself has none.
    bool ok = st != GK_SUCCESS && help == 0 && strstr(gk_last_error(), cases[i].needle) &&
              !strstr(gk_last_error(), "--help");
    check(ok, "bad train input %zu: wanted \"%s\", got \"%s\"", i, cases[i].needle, gk_last_error());
  }
  check(n >= 12, "at least 12 bad inputs (%zu)", n);

  struct {
    const char *const *argv;
    const char *needle;
  } scases[] = {
      {ARGS("--prompt", "x"), "--checkpoint FILE is required"},
      {ARGS("--checkpoint", "m", "--temperature", "-1"), "--temperature: '-1' must be >= 0"},
      {ARGS("--checkpoint", "m", "--temperature", "nan"), "--temperature: 'nan' is not a finite number"},
      {ARGS("--checkpoint", "m", "--top-k", "-1"), "--top-k: '-1' must be at least 0"},
      {ARGS("--checkpoint", "m", "--tokens", "0"), "--tokens: '0' must be at least 1"},
      {ARGS("--checkpoint", "m", "--prompt", ""), "--prompt: the value must not be empty"},
      {ARGS("--checkpoint", "m", "--lr", "1"), "unknown option '--lr'"},
      {ARGS("--checkpoint"), "--checkpoint needs a value (FILE)"},
  };
  for (size_t i = 0; i < sizeof scases / sizeof *scases; i++) {
    gk_sample_args s;
    int help;
    gk_status st = parse_sample(&s, &help, scases[i].argv);
    check(st != GK_SUCCESS && strstr(gk_last_error(), scases[i].needle), "bad sample input %zu: wanted \"%s\", got \"%s\"",
          i, scases[i].needle, gk_last_error());
  }

  gk_train_args a;
  int help;
  const char *argv_null[2] = {"--lr", NULL};
  check(gk_train_args_parse(2, (char *const *)argv_null, &a, &help) == GK_ERR_NULL_POINTER, "NULL in argv");
  check(gk_train_args_parse(1, NULL, &a, &help) == GK_ERR_NULL_POINTER, "NULL argv");
  check(gk_train_args_parse(0, NULL, NULL, &help) == GK_ERR_NULL_POINTER, "NULL args");
  check(gk_train_args_parse(0, NULL, &a, NULL) == GK_ERR_NULL_POINTER, "NULL help");
}

static void test_usage(void) {
  FILE *f = tmpfile();
  gk_train_usage(f, NULL);
  long n = ftell(f);
  char *s = calloc((size_t)n + 1, 1);
  rewind(f);
  s[fread(s, 1, (size_t)n, f)] = 0;
  fclose(f);
  static const char *const opts[] = {"--model mamba|llama", "--task copy|induction|text", "--data FILE", "--layers N",
                                     "--width D", "--state N", "--heads H", "--kv-heads H", "--steps N", "--batch B",
                                     "--seq-len T", "--lr X", "--min-lr X", "--warmup N", "--weight-decay X",
                                     "--clip X", "--threads N", "--seed S", "--dtype f32|bf16|f16", "--no-selection",
                                     "--eval-every K", "--eval-batches N", "--checkpoint FILE",
                                     "--checkpoint-every K", "--resume FILE", "--allow-changes", "--stop-after N",
                                     "--plot FILE.svg", "--quiet", "--copy-data K", "--copy-values V",
                                     "--eval-lengths L1,L2,...", "--eval-sequences N", "--eval-tokens N",
                                     "--eval-chunk N", "--eval-memory MIB", "--eval-out FILE.json", "--help"};
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) check(strstr(s, opts[i]) != NULL, "usage lists %s", opts[i]);
  char lr[64];
  snprintf(lr, sizeof lr, "(default %g)", gk_train_defaults.lr);
  check(strstr(s, lr) && strstr(s, "(default mamba)") && strstr(s, "(default copy)") && strstr(s, "(default f32)"),
        "usage shows the defaults");
  free(s);

  f = tmpfile();
  gk_sample_usage(f, NULL);
  n = ftell(f);
  s = calloc((size_t)n + 1, 1);
  rewind(f);
  s[fread(s, 1, (size_t)n, f)] = 0;
  fclose(f);
  static const char *const sopts[] = {"--checkpoint FILE", "--prompt TEXT", "--tokens N", "--temperature T",
                                      "--top-k K", "--seed S", "(default: a newline)"};
  for (size_t i = 0; i < sizeof sopts / sizeof *sopts; i++)
    check(strstr(s, sopts[i]) != NULL, "sample usage lists %s", sopts[i]);
  check(strchr(s, '\n') && !strstr(s, "(default \n"), "the newline default is not printed raw");
  free(s);
  check(!strcmp(gk_model_name(GK_MODEL_LLAMA), "llama") && !strcmp(gk_model_name((gk_model_kind)5), "?"),
        "model names");
}

int main(void) {
  test_good();
  test_eval_options();
  test_custom_defaults();
  test_dependent_defaults();
  test_set();
  test_bad();
  test_usage();
  return finish("test_train_args");
}
