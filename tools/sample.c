// `gradkern sample`: continue a prompt with a text model saved by
// `gradkern train --task text` (bytes, or BPE tokens of the tokenizer the
// checkpoint names: the prompt is encoded and each token written as its
// bytes). The checkpoint's "config" metadata gives the
// architecture and the trained sequence length; the weights are read by
// parameter name. The prompt goes through the model in one pass, then each
// sampled byte is written to stdout and fed back one at a time (Mamba's
// recurrent step, LLaMA's key/value cache over a window of the trained
// length: src/nn/generate.h).
#include "train.h"

#include "nn/bpe.h"
#include "nn/generate.h"
#include "nn/hf.h"
#include "nn/progress.h"
#include "nn/safetensors.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The largest --tokens: the option table of tools/train_args.c refuses more,
// --help states it, and tests/python/test_sample_cli.py checks both.
#define MAX_TOKENS 16777216

// The value of `key` in the config string ("key=value key=value ..."),
// copied into buf; NULL when the key is absent or its value does not fit.
static const char *config_value(const char *config, const char *key, char *buf, size_t n) {
  size_t klen = strlen(key);
  for (const char *p = config; *p;) {
    while (*p == ' ') p++;
    const char *end = p + strcspn(p, " ");
    if ((size_t)(end - p) > klen && !strncmp(p, key, klen) && p[klen] == '=') {
      size_t vlen = (size_t)(end - p) - klen - 1;
      if (vlen >= n) return NULL;
      memcpy(buf, p + klen + 1, vlen);
      buf[vlen] = 0;
      return buf;
    }
    p = end;
  }
  return NULL;
}

static gk_status config_int(const char *path, const char *config, const char *key, int lo, int hi, int *out) {
  char buf[32];
  if (!config_value(config, key, buf, sizeof buf))
    return gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s': the config metadata has no %s", path, key);
  char *end;
  errno = 0;
  long v = strtol(buf, &end, 10);
  if (!buf[0] || *end || errno || v < lo || v > hi)
    return gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s': config %s=%s is not a whole number in %d..%d", path, key, buf,
                   lo, hi);
  *out = (int)v;
  return GK_SUCCESS;
}

// A positive number below `hi` from the config metadata (the value as
// written with %g or %.17g).
static gk_status config_double(const char *path, const char *config, const char *key, double hi, double *out) {
  char buf[40];
  if (!config_value(config, key, buf, sizeof buf))
    return gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s': the config metadata has no %s", path, key);
  char *end;
  double v = strtod(buf, &end);
  if (!buf[0] || *end || !(v > 0 && v < hi))
    return gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s': config %s=%s is not a number in (0, %g)", path, key, buf, hi);
  *out = v;
  return GK_SUCCESS;
}

// The model of the text checkpoint at `path`, weights loaded, and the
// sequence length it was trained on. A model of BPE tokens: *tokenizer is
// its tokenizer (the metadata's path, or `tokenizer_path` when given),
// checked to be the one it was trained with; NULL for a byte-level model.
static gk_status load_text_model(const char *path, const char *tokenizer_path, gk_model *m, int *seq_len,
                                 gk_bpe **tokenizer) {
  *tokenizer = NULL;
  gk_st_file *f;
  gk_status s = gk_st_load(path, &f);
  if (s != GK_SUCCESS) return s;
  size_t checked;  // 0 for files written before checkpoints had checksums
  if ((s = gk_st_verify_checksums(f, &checked)) != GK_SUCCESS) {
    gk_st_close(f);
    return s;
  }
  const char *format = gk_st_metadata(f, "format"), *config = gk_st_metadata(f, "config");
  char arch[16], task[32];
  gk_model_config c = {0};
  if (!format || strcmp(format, "gradkern-checkpoint-1") || !config) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s' is not a gradkern checkpoint (no format or config metadata)",
                path);
  } else if (!config_value(config, "task", task, sizeof task) || strcmp(task, "text")) {
    s = gk_nn_fail(GK_ERR_INVALID_VALUE,
                "--checkpoint '%s' is a model of task %s; sampling needs a byte-level text model "
                "(gradkern train --task text)",
                path, config_value(config, "task", task, sizeof task) ? task : "(none)");
  } else if (!config_value(config, "arch", arch, sizeof arch) || (strcmp(arch, "mamba") && strcmp(arch, "llama"))) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s': config arch is neither mamba nor llama", path);
  } else {
    c.arch = strcmp(arch, "mamba") ? GK_ARCH_LLAMA : GK_ARCH_MAMBA;
    char fingerprint[16];
    const char *recorded = gk_st_metadata(f, "tokenizer");
    if (!config_value(config, "tokenizer", fingerprint, sizeof fingerprint)) {
      s = config_int(path, config, "vocab", 256, 256, &c.vocab);
      if (s == GK_SUCCESS && tokenizer_path)
        s = gk_nn_fail(GK_ERR_INVALID_VALUE, "--tokenizer '%s': the checkpoint '%s' is a byte-level model", tokenizer_path,
                       path);
    } else if (!recorded && !tokenizer_path) {
      s = gk_nn_fail(GK_NN_ERR_FILE, "--checkpoint '%s' names no tokenizer: give it with --tokenizer PATH", path);
    } else {
      const char *tp = tokenizer_path ? tokenizer_path : recorded;
      s = config_int(path, config, "vocab", 1, 1 << 24, &c.vocab);
      if (s == GK_SUCCESS && (s = gk_bpe_load(tp, tokenizer)) != GK_SUCCESS)
        s = gk_nn_fail(s, "the model's tokenizer: %s%s", gk_last_error(),
                       tokenizer_path ? "" : " (if it moved, give it with --tokenizer PATH)");
      char mine[16];
      if (s == GK_SUCCESS) snprintf(mine, sizeof mine, "%08x", (unsigned)gk_bpe_fingerprint(*tokenizer));
      if (s == GK_SUCCESS && (strcmp(mine, fingerprint) || gk_bpe_vocab_size(*tokenizer) != c.vocab))
        s = gk_nn_fail(GK_ERR_INVALID_VALUE,
                       "tokenizer '%s' (fingerprint %s, %d tokens) is not the one the model was trained with "
                       "(fingerprint %s, %d tokens)",
                       tp, mine, gk_bpe_vocab_size(*tokenizer), fingerprint, c.vocab);
    }
    if (s == GK_SUCCESS) s = config_int(path, config, "seq_len", 1, 1 << 24, seq_len);
    if (s == GK_SUCCESS) s = config_int(path, config, "d_model", 1, 1 << 16, &c.d_model);
    if (s == GK_SUCCESS) s = config_int(path, config, "n_layers", 1, 1 << 12, &c.n_layers);
    if (c.arch == GK_ARCH_MAMBA) {
      if (s == GK_SUCCESS) s = config_int(path, config, "expand", 1, 16, &c.expand);
      if (s == GK_SUCCESS) s = config_int(path, config, "d_conv", 1, 64, &c.d_conv);
      if (s == GK_SUCCESS) s = config_int(path, config, "d_state", 1, 1 << 12, &c.d_state);
      if (s == GK_SUCCESS) s = config_int(path, config, "dt_rank", 1, 1 << 16, &c.dt_rank);
      if (s == GK_SUCCESS) s = config_int(path, config, "selection", 0, 1, &c.selection);
    } else {
      if (s == GK_SUCCESS) s = config_int(path, config, "heads", 1, 1 << 12, &c.heads);
      if (s == GK_SUCCESS) s = config_int(path, config, "kv_heads", 1, 1 << 12, &c.kv_heads);
      if (s == GK_SUCCESS) s = config_int(path, config, "d_ff", 1, 1 << 20, &c.d_ff);
      if (s == GK_SUCCESS) s = config_double(path, config, "rope_theta", 1e300, &c.rope_theta);
    }
    char value[40];
    // Recorded when not the default 1e-5 (a model from a Hugging Face directory).
    if (s == GK_SUCCESS && config_value(config, "norm_eps", value, sizeof value))
      s = config_double(path, config, "norm_eps", 1, &c.norm_eps);
    if (s == GK_SUCCESS && config_value(config, "untied_head", value, sizeof value))
      s = config_int(path, config, "untied_head", 1, 1, &c.untied_head);
    if (s == GK_SUCCESS) s = gk_model_init(m, &c, 0);
    for (int i = 0; s == GK_SUCCESS && i < m->nparams; i++) {
      const gk_param *p = &m->params[i];
      s = gk_st_read(f, p->name, GK_ST_F32, p->rank, p->shape, m->w + p->offset);
    }
  }
  gk_st_close(f);
  return s;
}

// A Hugging Face model directory (src/nn/hf.h) and its tokenizer:
// `tokenizer_path`, else DIR/tokenizer.json. *seq_len: LLaMA's window (2048
// tokens); Mamba has none.
static gk_status load_hf_model(const char *dir, const char *tokenizer_path, gk_model *m, int *seq_len,
                               gk_bpe **tokenizer) {
  *tokenizer = NULL;
  *seq_len = 2048;
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  if (!tokenizer_path && access(path, R_OK))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "--model '%s' has no tokenizer.json: give the model's tokenizer with "
                      "--tokenizer PATH", dir);
  gk_status s = gk_hf_load(dir, m, NULL);
  if (s == GK_SUCCESS) s = gk_bpe_load(tokenizer_path ? tokenizer_path : path, tokenizer);
  if (s == GK_SUCCESS && gk_bpe_vocab_size(*tokenizer) > m->cfg.vocab)
    s = gk_nn_fail(GK_ERR_INVALID_VALUE, "the tokenizer has %d tokens, the model only %d", gk_bpe_vocab_size(*tokenizer),
                   m->cfg.vocab);
  return s;
}

// "s" after a count other than 1: "%zu byte%s".
static const char *plural(size_t n) { return n == 1 ? "" : "s"; }

static int fail(const char *what) {
  fprintf(stderr, "gradkern sample: %s: %s\n", what, gk_last_error());
  return 1;
}

// A progress line on stderr, redrawn in place at most 10 times a second
// (and at the end), when stderr is a terminal and stdout is not: on a
// terminal the text itself shows the progress, and in a log it is noise.
typedef struct progress {
  int on;
  double t0, last;
} progress;

static void progress_draw(progress *p, int done, int total) {
  double now = gk_now();
  if (!p->on || (now - p->last < 0.1 && done < total)) return;
  p->last = now;
  char eta[32] = "-";
  if (done > 0) gk_format_duration((double)(total - done) * (now - p->t0) / done, eta, sizeof eta);
  fprintf(stderr, "\rgradkern sample: %d/%d bytes  %.0f bytes/s  ETA %s\033[K", done, total,
          now > p->t0 ? done / (now - p->t0) : 0.0, eta);
  fflush(stderr);
}

int gk_cmd_sample(int argc, char **argv) {
  gk_sample_args a = gk_sample_defaults;
  int help = 0;
  if (gk_sample_args_parse(argc, argv, &a, &help) != GK_SUCCESS) {
    // One hint: the parser's message may carry it already.
    const char *msg = gk_last_error();
    fprintf(stderr, "gradkern sample: %s%s\n", msg, strstr(msg, "--help") ? "" : " (see gradkern sample --help)");
    return 2;
  }
  if (help) {
    gk_sample_usage(stdout, NULL);
    // After the options: what the options' lines leave out.
    printf("\n"
           "The prompt goes through the model in one pass; then each token (a byte, or\n"
           "a BPE token, written as its bytes) is sampled, written to stdout and fed\n"
           "back. --tokens is at most %d.\n"
           "--temperature is 0 (always the most likely token) or a number from 1e-300\n"
           "to 100; small ones approach 0.\n"
           "\n"
           "Past the trained context: a LLaMA model sees at most the sequence length N\n"
           "it was trained on (gradkern train --seq-len). A longer prompt keeps its last\n"
           "N bytes (a note on stderr says so); when the window is full it restarts\n"
           "from its last N/2 bytes, read again in one pass, so every byte is predicted\n"
           "from between N/2 + 1 and N bytes at positions the model was trained on.\n"
           "A Mamba model has no limit: its state carries the whole text (how well it\n"
           "does past N is up to the model).\n"
           "\n"
           "When stderr is a terminal and stdout is not, a progress line is drawn on\n"
           "stderr; stdout gets the generated text only.\n",
           MAX_TOKENS);
    return 0;
  }
  if (a.threads > 0 && gk_set_num_threads(a.threads) != GK_SUCCESS) return fail("--threads");
  size_t prompt_len = strlen(a.prompt);
  if (prompt_len > (size_t)(INT_MAX - a.tokens)) {
    fprintf(stderr, "gradkern sample: --prompt of %zu byte%s and --tokens %d make too long a sequence\n", prompt_len,
            plural(prompt_len), a.tokens);
    return 2;
  }
  gk_model m;
  memset(&m, 0, sizeof m);
  int seq_len = 0;
  gk_bpe *tok = NULL;
  gk_status loaded = a.model_dir ? load_hf_model(a.model_dir, a.tokenizer, &m, &seq_len, &tok)
                                 : load_text_model(a.checkpoint, a.tokenizer, &m, &seq_len, &tok);
  if (loaded != GK_SUCCESS) {
    gk_model_free(&m);
    gk_bpe_free(tok);
    return fail("loading the model");
  }
  // A model of BPE tokens reads the prompt's tokens.
  gk_bpe_ids prompt_ids = {0};
  if (tok) {
    size_t used;
    if (gk_bpe_encode(tok, a.prompt, prompt_len, 1, &used, &prompt_ids) != GK_SUCCESS || !prompt_ids.len) {
      if (!prompt_ids.len) gk_nn_fail(GK_ERR_INVALID_VALUE, "the prompt encodes to no tokens");
      gk_model_free(&m);
      gk_bpe_free(tok);
      gk_bpe_ids_free(&prompt_ids);
      return fail("--prompt");
    }
    prompt_len = prompt_ids.len;
  }
  if (m.cfg.arch == GK_ARCH_LLAMA && prompt_len > (size_t)seq_len)
    fprintf(stderr, "gradkern sample: note: the prompt of %zu %s is longer than the %d the model was trained on; "
            "it reads the last %d\n", prompt_len, tok ? "tokens" : "bytes", seq_len, seq_len);
  gk_gen *g = NULL;
  int rc = 0;
  int32_t *prompt = malloc(sizeof *prompt * prompt_len);
  if (!prompt) {
    fprintf(stderr, "gradkern sample: no memory for a prompt of %zu byte%s\n", prompt_len, plural(prompt_len));
    rc = 1;
  }
  for (size_t i = 0; rc == 0 && i < prompt_len; i++) prompt[i] = tok ? prompt_ids.data[i] : (unsigned char)a.prompt[i];
  if (rc == 0 && gk_gen_create(&m, seq_len, &g) != GK_SUCCESS) rc = fail("setup");
  progress pr = {isatty(fileno(stderr)) && !isatty(fileno(stdout)), gk_now(), -1};
  if (rc == 0 && pr.on)
    fprintf(stderr, "gradkern sample: reading the prompt (%zu byte%s)\033[K", prompt_len, plural(prompt_len));
  gk_rng rng;
  gk_rng_seed(&rng, a.seed);
  const float *logits = NULL;
  if (rc == 0 && gk_gen_prompt(g, prompt, (int)prompt_len, &logits) != GK_SUCCESS) rc = fail("reading the prompt");
  pr.t0 = gk_now();
  for (int i = 0; rc == 0 && i < a.tokens; i++) {
    int32_t next;
    if (gk_sample_token(logits, m.cfg.vocab, a.temperature, a.top_k, &rng, &next) != GK_SUCCESS) {
      rc = fail("sampling");
      break;
    }
    size_t nbytes;
    const unsigned char *bytes = tok ? gk_bpe_token_bytes(tok, next, &nbytes) : NULL;
    if (!tok) putchar(next);
    else if (bytes) fwrite(bytes, 1, nbytes, stdout);
    if (i + 1 < a.tokens && gk_gen_step(g, next, &logits) != GK_SUCCESS) rc = fail("generating");
    progress_draw(&pr, i + 1, a.tokens);
  }
  if (pr.on) fputs("\r\033[K", stderr);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "gradkern sample: writing to stdout: %s\n", strerror(errno));
    rc = 1;
  }
  gk_gen_free(g);
  gk_model_free(&m);
  gk_bpe_free(tok);
  gk_bpe_ids_free(&prompt_ids);
  free(prompt);
  return rc;
}
