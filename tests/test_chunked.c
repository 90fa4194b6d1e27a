// Chunked evaluation (src/nn/chunked.h): a batch of Mamba sequences run in
// pieces, the conv and scan states carried from piece to piece, gives the
// logits of the whole sequences in one run bit for bit, for every chunk
// size from 1 to past the length (sizes that divide the length and sizes
// that leave a shorter last piece), with and without selection; the memory
// held does not grow with the length; LLaMA and bad arguments are refused
// with messages.
#include "harness.h"
#include "model_weights.h"

#include "nn/chunked.h"
#include "nn/layers.h"

// The pieces' logits, put back at their rows of the whole (batch, T, V).
typedef struct gather {
  float *logits;
  int batch, V;
  int64_t T, next;  // the position the next piece must start at
  bool in_order;
} gather;

static gk_status collect(void *ctx, int64_t first, int n, const float *logits) {
  gather *g = ctx;
  g->in_order &= first == g->next;
  g->next = first + n;
  for (int b = 0; b < g->batch; b++)
    memcpy(g->logits + ((size_t)b * (size_t)g->T + (size_t)first) * (size_t)g->V,
           logits + (size_t)b * (size_t)n * (size_t)g->V, sizeof(float) * (size_t)n * (size_t)g->V);
  return GK_SUCCESS;
}

// Every chunk size 1 .. T + 2 against the whole-sequence run: the number of
// chunk sizes whose logits differ in any bit (0 expected where exact), and
// the largest difference relative to the largest logit. Under the
// sanitizers (GK_TEST_SANITIZED), 60 times slower, the sizes around the
// boundaries only: 1 .. 3, each side of 32 and 64 (the scan's chunk), and
// T - 1 .. T + 2.
static bool chunk_size_checked(int chunk, int T) {
#ifdef GK_TEST_SANITIZED
  return chunk <= 3 || abs(chunk - 32) <= 1 || abs(chunk - 64) <= 1 || chunk >= T - 1;
#else
  (void)chunk, (void)T;
  return true;
#endif
}

static void check_lengths(const char *name, gk_model *m, int batch, int T, bool exact) {
  int V = m->cfg.vocab;
  size_t n = (size_t)batch * (size_t)T;
  int32_t *tokens = malloc(sizeof *tokens * n);
  float *got = malloc(sizeof *got * n * (size_t)V);
  for (size_t i = 0; i < n; i++) tokens[i] = (int32_t)(rng_next() % (uint64_t)V);
  gk_run *whole = NULL;
  gk_status s = gk_run_create(m, batch, T, false, &whole);
  if (s == GK_SUCCESS) s = gk_run_forward(whole, tokens);
  check(s == GK_SUCCESS, "%s B=%d T=%d: whole forward: %s", name, batch, T, gk_last_error());
  const float *want = s == GK_SUCCESS ? gk_run_logits(whole) : NULL;
  double largest = 0;
  for (size_t i = 0; want && i < n * (size_t)V; i++) largest = fmax(largest, fabs(want[i]));
  int differ = 0, first_differ = 0;
  double worst = 0;
  for (int chunk = 1; want && chunk <= T + 2; chunk++) {
    if (!chunk_size_checked(chunk, T)) continue;
    gk_chunked *c = NULL;
    s = gk_chunked_create(m, batch, chunk, &c);
    gather g = {got, batch, V, T, 0, true};
    memset(got, 0xff, sizeof *got * n * (size_t)V);  // NaNs: a row never written shows
    if (s == GK_SUCCESS) s = gk_chunked_run(c, tokens, T, collect, &g);
    check(s == GK_SUCCESS, "%s B=%d T=%d chunk %d: %s", name, batch, T, chunk, gk_last_error());
    check(g.in_order && g.next == T, "%s B=%d T=%d chunk %d: the pieces cover 0..T in order", name, batch, T, chunk);
    gk_chunked_free(c);
    if (s != GK_SUCCESS) break;
    if (memcmp(got, want, sizeof *got * n * (size_t)V)) {
      if (!differ) first_differ = chunk;
      differ++;
    }
    for (size_t i = 0; i < n * (size_t)V; i++) worst = fmax(worst, fabs((double)got[i] - want[i]) / largest);
  }
  if (exact)
    check(differ == 0, "%s B=%d T=%d: chunked = whole bit for bit for every chunk size checked in 1..%d (%d differ, the first "
          "%d; largest difference %.3g of the largest logit)", name, batch, T, T + 2, differ, first_differ, worst);
  check(worst <= 1e-5, "%s B=%d T=%d: chunked within 1e-5 of whole (%.3g)", name, batch, T, worst);
  gk_run_free(whole);
  free(tokens);
  free(got);
}

static void test_models(void) {
  for (int selection = 1; selection >= 0; selection--) {
    const char *name = selection ? "mamba" : "mamba --no-selection";
    // The width of the paper's synthetic-task models (64: 128 scan channels)
    // and a narrower one (16: 32 channels).
    gk_model_config c = {.arch = GK_ARCH_MAMBA, .vocab = 7, .d_model = 64, .n_layers = 2, .d_state = 4,
                         .selection = selection};
    gk_model m, narrow;
    gk_status s = gk_model_init(&m, &c, 5);
    c.d_model = 16;
    if (s == GK_SUCCESS) s = gk_model_init(&narrow, &c, 6);
    check(s == GK_SUCCESS, "%s: gk_model_init: %s", name, gk_last_error());
    if (s != GK_SUCCESS) continue;
    randomize(&m);
    randomize(&narrow);
    // 8 sequences x 128 channels, with selection or without: the CPU
    // scan's grid has enough (batch, channel) parts to run every channel
    // step by step on both sides, so every length is exact (one token, one
    // 64-step scan chunk, three with a partial one).
    int lengths[] = {1, 64, 130};
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
      check_lengths(name, &m, 8, lengths[k], true);
    // One sequence: exact while the whole sequence is one 64-step scan
    // chunk; longer, the whole run's scan goes in ranges scanned in two
    // levels, as it does for 8 sequences of 32 channels (within 1e-5).
    check_lengths(name, &m, 1, 64, true);
    check_lengths(name, &m, 1, 130, false);
    check_lengths(name, &narrow, 8, 130, false);
    gk_model_free(&m);
    gk_model_free(&narrow);
  }
}

// The memory held is the pieces', the same for 64 and 4096 tokens.
static gk_status ignore(void *ctx, int64_t first, int n, const float *logits) {
  (void)ctx, (void)first, (void)n, (void)logits;
  return GK_SUCCESS;
}

static void test_memory(void) {
  gk_model_config c = {.arch = GK_ARCH_MAMBA, .vocab = 7, .d_model = 16, .n_layers = 2, .d_state = 4, .selection = 1};
  gk_model m;
  gk_chunked *ch = NULL;
  gk_status s = gk_model_init(&m, &c, 5);
  if (s == GK_SUCCESS) s = gk_chunked_create(&m, 2, 32, &ch);
  check(s == GK_SUCCESS, "memory: create: %s", gk_last_error());
  if (s != GK_SUCCESS) return;
  int32_t *tokens = calloc(2 * 4096, sizeof *tokens);
  s = gk_chunked_run(ch, tokens, 64, ignore, NULL);
  size_t short_bytes = gk_chunked_bytes(ch);
  if (s == GK_SUCCESS) s = gk_chunked_run(ch, tokens, 4096, ignore, NULL);
  check(s == GK_SUCCESS, "memory: runs: %s", gk_last_error());
  check(gk_chunked_bytes(ch) == short_bytes, "memory: 4096 tokens hold the bytes of 64 (%zu, %zu)",
        gk_chunked_bytes(ch), short_bytes);
  free(tokens);
  gk_chunked_free(ch);
  gk_model_free(&m);
}

static void test_refused(void) {
  gk_model_config c = {.arch = GK_ARCH_LLAMA, .vocab = 7, .d_model = 16, .n_layers = 1, .heads = 2, .kv_heads = 1};
  gk_model m;
  gk_chunked *ch = (gk_chunked *)&m;
  gk_status s = gk_model_init(&m, &c, 5);
  check(s == GK_SUCCESS, "llama: gk_model_init: %s", gk_last_error());
  if (s != GK_SUCCESS) return;
  s = gk_chunked_create(&m, 2, 16, &ch);
  check(s == GK_ERR_UNSUPPORTED && ch == NULL, "llama is refused (status %d)", (int)s);
  check(strstr(gk_last_error(), "llama") && strstr(gk_last_error(), "whole sequence"),
        "the message says why: %s", gk_last_error());
  gk_model_free(&m);
  c = (gk_model_config){.arch = GK_ARCH_MAMBA, .vocab = 7, .d_model = 16, .n_layers = 1, .d_state = 4,
                        .selection = 1};
  if (gk_model_init(&m, &c, 5) != GK_SUCCESS) return;
  check(gk_chunked_create(&m, 0, 16, &ch) == GK_ERR_INVALID_VALUE, "batch 0 refused");
  check(strstr(gk_last_error(), "batch 0") != NULL, "the message names the batch: %s", gk_last_error());
  check(gk_chunked_create(&m, 2, 0, &ch) == GK_ERR_INVALID_VALUE, "chunk 0 refused");
  check(gk_chunked_create(&m, 2, 16, NULL) == GK_ERR_NULL_POINTER, "NULL out refused");
  if (gk_chunked_create(&m, 2, 16, &ch) == GK_SUCCESS) {
    int32_t tokens[4] = {0};
    check(gk_chunked_run(ch, tokens, 0, ignore, NULL) == GK_ERR_INVALID_VALUE, "length 0 refused");
    check(gk_chunked_run(ch, NULL, 2, ignore, NULL) == GK_ERR_NULL_POINTER, "NULL inputs refused");
    gk_chunked_free(ch);
  }
  gk_model_free(&m);
}

int main(void) {
  test_models();
  test_memory();
  test_refused();
  return finish("test_chunked");
}
