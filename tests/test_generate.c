// Generation one token at a time (src/nn/generate.h): Mamba's recurrent step
// and LLaMA's key/value cache give, after each token of a sequence, the
// logits the full forward pass gives at that position; the sampler's greedy,
// top-k and seeded draws; errors instead of crashes on bad calls.
#include "harness.h"

#include "nn/generate.h"
#include "nn/layers.h"

// Weights of typical size, so every part of the model shows in the logits:
// matrices uniform with unit-variance outputs, the embedding of unit
// variance, norms, biases and D scaled by 1 +- 0.2; A_log kept (stable decay).
static void randomize(gk_model *m) {
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    float *w = m->w + p->offset;
    if (strstr(p->name, "A_log")) continue;
    bool matrix = p->rank == 2 && !strstr(p->name, "conv_w");
    double bound = !strcmp(p->name, "embedding") ? sqrt(3.0) : matrix ? sqrt(3.0 / (double)p->shape[1]) : 0;
    for (int64_t j = 0; j < p->numel; j++)
      w[j] = bound ? (float)rng_uniform(-bound, bound) : w[j] * (float)rng_uniform(0.8, 1.2);
  }
}

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
  check(gk_gen_step(g, 3, &logits) == GK_ERR_INVALID_VALUE, "a third token overflows a cache of 2");
  check(strstr(gk_last_error(), "max_len = 2") != NULL, "the message gives max_len: %s", gk_last_error());
  check(gk_gen_step(g, 3, NULL) == GK_ERR_NULL_POINTER, "NULL logits are refused");
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
  test_bad_calls();
  test_sampler();
  return finish("test_generate");
}
