// Generation (src/nn/generate.h): Mamba's recurrent step and LLaMA's
// key/value cache give, after each token of a sequence, the logits the full
// forward pass gives at that position; a prompt fed in one pass gives the
// logits (and, from one seed, the generated tokens) of feeding it one token
// at a time; LLaMA's window restarts from its last half when full; the
// sampler's greedy, top-k and seeded draws; errors instead of crashes on bad
// calls. Tied and untied LM heads.
#include "harness.h"
#include "model_weights.h"

#include "nn/generate.h"
#include "nn/layers.h"

// Step through a random sequence of T tokens and compare the logits after
// each with row t of the full forward pass: |step - full| <= 1e-4 max|full row|.
static void check_against_forward(const char *name, const gk_model_config *c, int T) {
  gk_model m;
  gk_run *run = NULL;
  gk_gen *g = NULL;
  gk_status s = gk_model_init(&m, c, 11);
  check(s == GK_SUCCESS, "%s: gk_model_init: %s", name, gk_last_error());
  if (s != GK_SUCCESS) return;
  randomize(&m);
  int32_t *tokens = malloc(sizeof *tokens * (size_t)T);
  for (int t = 0; t < T; t++) tokens[t] = (int32_t)(rng_next() % (uint64_t)c->vocab);
  s = gk_run_create(&m, 1, T, false, &run);
  if (s == GK_SUCCESS) s = gk_run_forward(run, tokens);
  check(s == GK_SUCCESS, "%s: full forward: %s", name, gk_last_error());
  if (s == GK_SUCCESS) s = gk_gen_create(&m, T, &g);
  check(s == GK_SUCCESS, "%s: gk_gen_create: %s", name, gk_last_error());
  double worst = 0, largest = 0;
  int worst_t = -1;
  for (int t = 0; s == GK_SUCCESS && t < T; t++) {
    const float *step;
    s = gk_gen_step(g, tokens[t], &step);
    check(s == GK_SUCCESS, "%s: step %d: %s", name, t, gk_last_error());
    if (s != GK_SUCCESS) break;
    const float *full = gk_run_logits(run) + (int64_t)t * c->vocab;
    double row_max = 0, err = 0;
    for (int v = 0; v < c->vocab; v++) {
      row_max = fmax(row_max, fabs(full[v]));
      err = fmax(err, fabs((double)step[v] - full[v]));
    }
    largest = fmax(largest, row_max);
    if (err / row_max > worst) {
      worst = err / row_max;
      worst_t = t;
    }
  }
  if (s == GK_SUCCESS) {
    check(gk_gen_length(g) == T, "%s: length %d after %d steps", name, gk_gen_length(g), T);
    check(worst <= 1e-4, "%s: step logits differ from the full forward by %.3g (relative) at position %d", name,
          worst, worst_t);
    check(largest > 1, "%s: the logits are too small (max %.3g) to test anything", name, largest);
    printf("%s: %d positions, largest relative difference %.3g\n", name, T, worst);
  }
  gk_gen_free(g);
  gk_run_free(run);
  gk_model_free(&m);
  free(tokens);
}

// The largest |a - b| over vocab logits, relative to max |b|.
static double rel_diff(const float *a, const float *b, int vocab) {
  double err = 0, big = 0;
  for (int v = 0; v < vocab; v++) {
    err = fmax(err, fabs((double)a[v] - b[v]));
    big = fmax(big, fabs((double)b[v]));
  }
  return big > 0 ? err / big : err;
}

// The last row of the full forward pass over tokens[0 .. T), into out (vocab).
static bool forward_last(gk_model *m, const int32_t *tokens, int T, float *out) {
  gk_run *run = NULL;
  gk_status s = gk_run_create(m, 1, T, false, &run);
  if (s == GK_SUCCESS) s = gk_run_forward(run, tokens);
  check(s == GK_SUCCESS, "full forward over %d tokens: %s", T, gk_last_error());
  if (s == GK_SUCCESS) memcpy(out, gk_run_logits(run) + (int64_t)(T - 1) * m->cfg.vocab, sizeof *out * (size_t)m->cfg.vocab);
  gk_run_free(run);
  return s == GK_SUCCESS;
}

// A prompt of P random tokens fed in one pass (gk_gen_prompt) and one token
// at a time (gk_gen_step): the logits after it agree with each other and
// with the full forward pass, and 24 tokens drawn from one seed (fed back)
// are the same. Then, for prompts fed after steps: 3 steps and a prompt of
// P - 3 give the logits of P steps.
static void check_prompt(const char *name, const gk_model_config *c, int P) {
  enum { DRAWS = 24 };
  gk_model m;
  gk_gen *one = NULL, *all = NULL, *mixed = NULL;
  if (gk_model_init(&m, c, 5) != GK_SUCCESS) {
    check(false, "%s: gk_model_init: %s", name, gk_last_error());
    return;
  }
  randomize(&m);
  int V = c->vocab, max_len = P + DRAWS;
  int32_t *tokens = malloc(sizeof *tokens * (size_t)P);
  float *full = malloc(sizeof *full * (size_t)V);
  for (int t = 0; t < P; t++) tokens[t] = (int32_t)(rng_next() % (uint64_t)V);
  gk_status s = gk_gen_create(&m, max_len, &one);
  if (s == GK_SUCCESS) s = gk_gen_create(&m, max_len, &all);
  if (s == GK_SUCCESS) s = gk_gen_create(&m, max_len, &mixed);
  check(s == GK_SUCCESS, "%s: gk_gen_create: %s", name, gk_last_error());
  const float *lo = NULL, *la = NULL, *lm = NULL;
  for (int t = 0; s == GK_SUCCESS && t < P; t++) s = gk_gen_step(one, tokens[t], &lo);
  if (s == GK_SUCCESS) s = gk_gen_prompt(all, tokens, P, &la);
  for (int t = 0; s == GK_SUCCESS && t < 3; t++) s = gk_gen_step(mixed, tokens[t], &lm);
  if (s == GK_SUCCESS) s = gk_gen_prompt(mixed, tokens + 3, P - 3, &lm);
  check(s == GK_SUCCESS, "%s: feeding the prompt: %s", name, gk_last_error());
  if (s == GK_SUCCESS && forward_last(&m, tokens, P, full)) {
    double d_one = rel_diff(lo, full, V), d_all = rel_diff(la, full, V), d_pair = rel_diff(la, lo, V),
           d_mixed = rel_diff(lm, lo, V);
    check(d_one <= 1e-4 && d_all <= 1e-4, "%s: logits after %d tokens differ from the full forward by %.3g (steps), "
          "%.3g (one pass)", name, P, d_one, d_all);
    check(d_pair <= 1e-5, "%s: one pass and steps differ by %.3g", name, d_pair);
    check(d_mixed <= 1e-5, "%s: 3 steps and a prompt differ from steps by %.3g", name, d_mixed);
    check(gk_gen_length(all) == P && gk_gen_length(mixed) == P && gk_gen_context(all) == P,
          "%s: lengths %d, %d, context %d after %d tokens", name, gk_gen_length(all), gk_gen_length(mixed),
          gk_gen_context(all), P);
    printf("%s: prompt of %d, one pass vs steps %.3g, vs full forward %.3g; steps vs full forward %.3g\n", name, P,
           d_pair, d_all, d_one);
  }
  // The same draws from both, at temperature 1 over all tokens.
  gk_rng ra, ro;
  gk_rng_seed(&ra, 17);
  gk_rng_seed(&ro, 17);
  int same = 0;
  double worst = 0;
  for (int i = 0; s == GK_SUCCESS && i < DRAWS; i++) {
    int32_t ta = -1, to = -2;
    s = gk_sample_token(la, V, 1.0, 0, &ra, &ta);
    if (s == GK_SUCCESS) s = gk_sample_token(lo, V, 1.0, 0, &ro, &to);
    same += ta == to;
    if (s == GK_SUCCESS) s = gk_gen_step(all, ta, &la);
    if (s == GK_SUCCESS) s = gk_gen_step(one, to, &lo);
    if (s == GK_SUCCESS) worst = fmax(worst, rel_diff(la, lo, V));
  }
  check(s == GK_SUCCESS, "%s: generating: %s", name, gk_last_error());
  check(same == DRAWS, "%s: %d of %d tokens drawn after the one-pass prompt match those after steps", name, same,
        DRAWS);
  check(worst <= 1e-5, "%s: while generating, the logits differ by %.3g", name, worst);
  gk_gen_free(one);
  gk_gen_free(all);
  gk_gen_free(mixed);
  gk_model_free(&m);
  free(tokens);
  free(full);
}

// LLaMA's window of max_len 8: a prompt of 5, then steps; when a token comes
// with 8 in the window, the window restarts from its last 4 and the token.
// After every token the logits are the full forward's over the window's
// tokens (the last gk_gen_context of those fed). A prompt longer than the
// window keeps its last 8; a prompt after steps joins the window's tokens.
static void test_window(void) {
  gk_model_config l = {0};
  l.arch = GK_ARCH_LLAMA;
  l.vocab = 256;
  l.d_model = 32;
  l.n_layers = 2;
  l.heads = 4;
  l.kv_heads = 2;
  enum { W = 8, T = 30 };
  gk_model m;
  gk_gen *g = NULL;
  if (gk_model_init(&m, &l, 3) != GK_SUCCESS) {
    check(false, "window: gk_model_init: %s", gk_last_error());
    return;
  }
  randomize(&m);
  int32_t tokens[T];
  float want[256];
  for (int t = 0; t < T; t++) tokens[t] = (int32_t)(rng_next() % 256);
  gk_status s = gk_gen_create(&m, W, &g);
  const float *logits = NULL;
  if (s == GK_SUCCESS) s = gk_gen_prompt(g, tokens, 5, &logits);
  check(s == GK_SUCCESS, "window: prompt: %s", gk_last_error());
  int ctx = 5, restarts = 0;
  double worst = 0;
  for (int t = 5; s == GK_SUCCESS; t++) {
    check(gk_gen_context(g) == ctx && gk_gen_length(g) == t, "window: context %d (want %d), length %d (want %d)",
          gk_gen_context(g), ctx, gk_gen_length(g), t);
    if (forward_last(&m, tokens + t - ctx, ctx, want)) worst = fmax(worst, rel_diff(logits, want, 256));
    if (t == T) break;
    s = gk_gen_step(g, tokens[t], &logits);
    check(s == GK_SUCCESS, "window: step %d: %s", t, gk_last_error());
    restarts += ctx == W;
    ctx = ctx == W ? W / 2 + 1 : ctx + 1;
  }
  check(restarts >= 5, "window: %d restarts in %d tokens", restarts, T);
  check(worst <= 1e-4, "window: logits differ from the full forward over the window by %.3g", worst);
  // A prompt of 13 after those 30: the window is its last 8.
  if (s == GK_SUCCESS) s = gk_gen_prompt(g, tokens + 2, 13, &logits);
  check(s == GK_SUCCESS && gk_gen_context(g) == W && gk_gen_length(g) == T + 13,
        "window: a prompt of 13 leaves %d in the window (want %d): %s", gk_gen_context(g), W, gk_last_error());
  if (s == GK_SUCCESS && forward_last(&m, tokens + 15 - W, W, want))
    check(rel_diff(logits, want, 256) <= 1e-4, "window: after a long prompt, off by %.3g", rel_diff(logits, want, 256));
  gk_gen_free(g);
  // 3 steps, then a prompt of 2: the window holds all 5, as one prompt of 5.
  s = gk_gen_create(&m, W, &g);
  for (int t = 0; s == GK_SUCCESS && t < 3; t++) s = gk_gen_step(g, tokens[t], &logits);
  if (s == GK_SUCCESS) s = gk_gen_prompt(g, tokens + 3, 2, &logits);
  check(s == GK_SUCCESS && gk_gen_context(g) == 5, "window: 3 steps and a prompt of 2 leave %d (want 5): %s",
        gk_gen_context(g), gk_last_error());
  if (s == GK_SUCCESS && forward_last(&m, tokens, 5, want))
    check(rel_diff(logits, want, 256) <= 1e-4, "window: after steps and a prompt, off by %.3g",
          rel_diff(logits, want, 256));
  printf("window: %d tokens through a window of %d, %d restarts, largest relative difference %.3g\n", T, W, restarts,
         worst);
  gk_gen_free(g);
  gk_model_free(&m);
}

static void test_models(void) {
  gk_model_config c = {0};
  c.arch = GK_ARCH_MAMBA;
  c.vocab = 256;
  c.d_model = 16;
  c.n_layers = 2;
  c.d_state = 4;
  c.selection = 1;
  check_against_forward("mamba", &c, 70);  // past the scan's 64-step chunk
  c.selection = 0;
  check_against_forward("mamba without selection", &c, 20);
  c.selection = 1;
  c.d_conv = 1;
  check_against_forward("mamba with d_conv 1", &c, 10);
  check_prompt("mamba with d_conv 1", &c, 40);
  c.d_conv = 4;
  check_prompt("mamba", &c, 100);
  check_prompt("mamba, a prompt of 2 pieces", &c, GK_GEN_PIECE + 37);
  c.selection = 0;
  check_prompt("mamba without selection", &c, 70);
  c.selection = 1;
  c.untied_head = 1;  // the head its own weight (randomize draws it apart from the embedding)
  check_against_forward("mamba, untied head", &c, 12);
  check_prompt("mamba, untied head", &c, 20);

  gk_model_config l = {0};
  l.arch = GK_ARCH_LLAMA;
  l.vocab = 256;
  l.d_model = 32;
  l.n_layers = 2;
  l.heads = 4;
  l.kv_heads = 2;
  check_against_forward("llama (GQA)", &l, 40);
  l.kv_heads = 4;
  check_against_forward("llama", &l, 12);
  l.kv_heads = 1;
  check_against_forward("llama (one kv head)", &l, 12);
  check_prompt("llama (one kv head)", &l, 30);
  l.kv_heads = 2;
  check_prompt("llama (GQA)", &l, 200);
  l.untied_head = 1;
  check_against_forward("llama (GQA), untied head", &l, 12);
  check_prompt("llama (GQA), untied head", &l, 20);
}

static void test_bad_calls(void) {
  gk_model_config l = {0};
  l.arch = GK_ARCH_LLAMA;
  l.vocab = 256;
  l.d_model = 16;
  l.n_layers = 1;
  l.heads = 2;
  gk_model m;
  if (gk_model_init(&m, &l, 1) != GK_SUCCESS) {
    check(false, "llama init: %s", gk_last_error());
    return;
  }
  gk_gen *g = NULL;
  check(gk_gen_create(&m, 0, &g) == GK_ERR_INVALID_VALUE && !g, "max_len 0 is refused");
  check(strstr(gk_last_error(), "max_len") != NULL, "the message names max_len: %s", gk_last_error());
  check(gk_gen_create(NULL, 4, &g) == GK_ERR_NULL_POINTER, "a NULL model is refused");
  check(gk_gen_create(&m, 2, NULL) == GK_ERR_NULL_POINTER, "a NULL out is refused");
  if (gk_gen_create(&m, 2, &g) != GK_SUCCESS) {
    check(false, "gk_gen_create: %s", gk_last_error());
    gk_model_free(&m);
    return;
  }
  const float *logits = (const float *)&m;
  check(gk_gen_step(g, 256, &logits) == GK_ERR_INVALID_VALUE && !logits, "token 256 is refused");
  check(gk_gen_step(g, -1, &logits) == GK_ERR_INVALID_VALUE, "token -1 is refused");
  check(gk_gen_length(g) == 0, "refused tokens are not fed");
  check(gk_gen_step(g, 1, &logits) == GK_SUCCESS && logits, "token 1: %s", gk_last_error());
  check(gk_gen_step(g, 2, &logits) == GK_SUCCESS, "token 2: %s", gk_last_error());
  check(gk_gen_step(g, 3, &logits) == GK_SUCCESS && gk_gen_context(g) == 2,
        "a third token restarts a window of 2 from 1 token and itself: %s", gk_last_error());
  check(gk_gen_step(g, 3, NULL) == GK_ERR_NULL_POINTER, "NULL logits are refused");
  const int32_t bad[3] = {4, 300, 5};
  check(gk_gen_prompt(g, bad, 3, &logits) == GK_ERR_INVALID_VALUE && !logits, "a prompt with token 300 is refused");
  check(strstr(gk_last_error(), "300") != NULL, "the message names the token: %s", gk_last_error());
  check(gk_gen_length(g) == 3, "a refused prompt feeds nothing (length %d)", gk_gen_length(g));
  check(gk_gen_prompt(g, bad, 0, &logits) == GK_ERR_INVALID_VALUE, "a prompt of 0 tokens is refused");
  check(gk_gen_prompt(g, NULL, 1, &logits) == GK_ERR_NULL_POINTER, "a NULL prompt is refused");
  gk_gen_free(g);
  gk_gen_free(NULL);
  gk_model_free(&m);
}

static void test_sampler(void) {
  const float logits[6] = {0.5f, 2.0f, 1.9f, -1.0f, 2.0f, 1.0f};
  gk_rng rng;
  gk_rng_seed(&rng, 3);
  int32_t tok = -1;
  check(gk_sample_token(logits, 6, 0, 0, &rng, &tok) == GK_SUCCESS && tok == 1, "greedy: %d (want 1)", tok);
  check(gk_sample_token(logits, 6, 5.0, 1, &rng, &tok) == GK_SUCCESS && tok == 1, "top-1: %d (want 1)", tok);
  // Top-3 at temperature 1: tokens 1, 4 (logit 2) and 2 (1.9) only, in
  // proportion 1 : 1 : exp(-0.1).
  int counts[6] = {0};
  enum { DRAWS = 20000 };
  for (int i = 0; i < DRAWS; i++) {
    gk_sample_token(logits, 6, 1.0, 3, &rng, &tok);
    counts[tok]++;
  }
  check(counts[0] + counts[3] + counts[5] == 0, "top-3 draws only the 3 most likely");
  double z = 2 + exp(-0.1);
  for (int v = 1; v <= 4; v++) {
    if (v == 3) continue;
    double want = (v == 2 ? exp(-0.1) : 1) / z;
    check(fabs((double)counts[v] / DRAWS - want) < 0.02, "token %d drawn %.3f of the time (want %.3f)", v,
          (double)counts[v] / DRAWS, want);
  }
  // The same seed gives the same draws; a high temperature reaches everything.
  int32_t a[50], b[50];
  gk_rng_seed(&rng, 9);
  for (int i = 0; i < 50; i++) gk_sample_token(logits, 6, 100.0, 0, &rng, &a[i]);
  gk_rng_seed(&rng, 9);
  for (int i = 0; i < 50; i++) gk_sample_token(logits, 6, 100.0, 0, &rng, &b[i]);
  check(!memcmp(a, b, sizeof a), "the same seed gives the same draws");
  int seen = 0;
  for (int v = 0; v < 6; v++)
    for (int i = 0; i < 50; i++)
      if (a[i] == v) {
        seen++;
        break;
      }
  check(seen == 6, "temperature 100 draws all 6 tokens in 50 draws (saw %d)", seen);
  // Bad input.
  check(gk_sample_token(logits, 6, -1, 0, &rng, &tok) == GK_ERR_INVALID_VALUE, "negative temperature refused");
  check(gk_sample_token(logits, 6, NAN, 0, &rng, &tok) == GK_ERR_INVALID_VALUE, "NaN temperature refused");
  check(gk_sample_token(logits, 6, 1, -2, &rng, &tok) == GK_ERR_INVALID_VALUE, "negative top_k refused");
  check(gk_sample_token(logits, 0, 1, 0, &rng, &tok) == GK_ERR_INVALID_VALUE, "vocab 0 refused");
  check(gk_sample_token(NULL, 6, 1, 0, &rng, &tok) == GK_ERR_NULL_POINTER, "NULL logits refused");
  const float bad[3] = {0, NAN, 1};
  check(gk_sample_token(bad, 3, 1, 0, &rng, &tok) == GK_ERR_NON_FINITE, "a NaN logit is refused");
  check(strstr(gk_last_error(), "token 1") != NULL, "the message names the token: %s", gk_last_error());
}

int main(void) {
  test_models();
  test_window();
  test_bad_calls();
  test_sampler();
  return finish("test_generate");
}
