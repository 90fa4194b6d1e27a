// A language model fed a prompt in one pass and then one token at a time
// (see generate.h), the same for every architecture: the embedding, the
// final norm and the LM head on the last token's row, the context (a window
// or everything fed), and the architecture's table (arch.h) for the blocks:
// its state of one sequence and its step through them. Every product, norm
// and the rest is a plan of the public API.
#include "generate.h"

#include "arch.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gk_gen {
  const gk_model *m;
  const gk_arch_table *arch;
  int max_len;             // windowed: the window (the rows of the blocks' caches)
  int pos;                 // windowed: tokens in the window (at positions 0 .. pos-1)
  int fed;                 // tokens fed in all
  gk_bufs mem;
  gk_workspace ws;         // grown to the largest plan's need
  gk_plan *fnorm, *head;   // final norm and LM head, on the last token's row
  float *hn, *rstd, *logits;  // (1, D), (1), (1, V)
  gk_gen_pass step;        // n = 1
  int32_t *window;         // windowed: the tokens in the window, max_len
  void *blocks;            // the architecture's state of the sequence
};

// ---------------------------------------------------------------- passes

static void pass_free(const gk_gen *g, gk_gen_pass *ps) {
  g->arch->pass_free(ps);
  gk_plan *plans[] = {ps->emb, ps->norm, ps->add};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) gk_plan_destroy(plans[i]);
  gk_bufs_free(&ps->mem);
  memset(ps, 0, sizeof *ps);
}

// Plans and buffers for passes of n tokens: the embedding, what every block
// uses (gk_gen_pass), then the architecture's.
static gk_status pass_create(gk_gen *g, int n, gk_gen_pass *ps) {
  const gk_model_config *c = &g->m->cfg;
  int64_t D = c->d_model;
  memset(ps, 0, sizeof *ps);
  ps->n = n;
  ps->D = D;
  ps->ws = &g->ws;
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, (int64_t[]){1, n});
  d.index_dtype = GK_I32;
  d.embedding.num_embeddings = c->vocab;
  d.embedding.dim = D;
  gk_status s = gk_plan_create(&d, &ps->emb);
  d = gk_desc_rmsnorm(GK_FORWARD, n, D, c->norm_eps);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &ps->norm);
  d = gk_desc_add(n, D);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &ps->add);
  void *index = NULL;
  if (s == GK_SUCCESS) s = gk_bufs_alloc(&ps->mem, sizeof(int32_t) * (size_t)n, &index);
  ps->index = index;
  if (s == GK_SUCCESS) s = gk_bufs_floats(&ps->mem, n * D, &ps->h);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&ps->mem, n * D, &ps->hn);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&ps->mem, n, &ps->rstd);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&ps->mem, n * D, &ps->o);
  if (s == GK_SUCCESS) s = g->arch->pass_create(g->m, ps);
  if (s != GK_SUCCESS) pass_free(g, ps);
  return s;
}

// ---------------------------------------------------------------- creation

gk_status gk_gen_create(const gk_model *m, int max_len, gk_gen **out) {
  if (!out) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_create: out is NULL");
  *out = NULL;
  if (!m || !m->w) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_create: the model has no weights");
  if (max_len < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "generate: max_len = %d must be >= 1", max_len);
  const gk_arch_table *arch = gk_arch_table_of(m->cfg.arch);
  if (!arch)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "generate: arch = %d is neither mamba nor llama", (int)m->cfg.arch);
  gk_gen *g = calloc(1, sizeof *g);
  if (!g) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "generate: no memory for the state");
  g->m = m;
  g->arch = arch;
  g->max_len = arch->windowed ? max_len : 1;
  const gk_model_config *c = &m->cfg;
  int64_t D = c->d_model, V = c->vocab;
  gk_op_desc d = gk_desc_rmsnorm(GK_FORWARD, 1, D, c->norm_eps);
  gk_status s = gk_plan_create(&d, &g->fnorm);
  d = gk_desc_linear(GK_FORWARD, 1, D, V);
  if (s == GK_SUCCESS) s = gk_plan_create(&d, &g->head);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&g->mem, D, &g->hn);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&g->mem, 1, &g->rstd);
  if (s == GK_SUCCESS) s = gk_bufs_floats(&g->mem, V, &g->logits);
  if (s == GK_SUCCESS) s = pass_create(g, 1, &g->step);
  if (s == GK_SUCCESS && arch->windowed) {
    void *window;
    s = gk_bufs_alloc(&g->mem, sizeof(int32_t) * (size_t)g->max_len, &window);
    g->window = window;
  }
  if (s == GK_SUCCESS) s = arch->gen_create(m, g->max_len, &g->mem, &g->blocks);
  if (s != GK_SUCCESS) {
    gk_gen_free(g);
    return s;
  }
  *out = g;
  return GK_SUCCESS;
}

void gk_gen_free(gk_gen *g) {
  if (!g) return;
  gk_plan_destroy(g->fnorm);
  gk_plan_destroy(g->head);
  pass_free(g, &g->step);
  g->arch->gen_free(g->blocks);
  gk_bufs_free(&g->mem);
  free(g->ws.p);
  free(g);
}

int gk_gen_length(const gk_gen *g) { return g ? g->fed : 0; }

int gk_gen_context(const gk_gen *g) {
  if (!g) return 0;
  return g->arch->windowed ? g->pos : g->fed;
}

// ---------------------------------------------------------------- feeding

// tokens[0 .. ps->n) through the model at positions pos ..: embedding, the
// architecture's blocks, then the final norm and the head on the last
// token's row into g->logits.
static gk_status run_pass(gk_gen *g, const gk_gen_pass *ps, const int32_t *tokens) {
  const gk_model *m = g->m;
  int64_t n = ps->n, D = m->cfg.d_model, V = m->cfg.vocab;
  memcpy(ps->index, tokens, sizeof *tokens * (size_t)n);
  gk_tensor idx;
  memset(&idx, 0, sizeof idx);
  idx.data = ps->index;
  idx.dtype = GK_I32;
  idx.rank = 2;
  idx.shape[0] = 1;
  idx.shape[1] = n;
  idx.strides[0] = n;
  idx.strides[1] = 1;
  gk_tensor emb = gk_pw(m, &m->params[GK_PARAM_EMBEDDING]);
  gk_status s = gk_ws_exec(&g->ws, ps->emb,
                           (gk_arg[]){GK_A(GK_ARG_WEIGHT, emb), GK_A(GK_ARG_INDEX, idx),
                                      GK_A(GK_ARG_Y, gk_t3(ps->h, 1, n, D))}, 3);
  if (s == GK_SUCCESS) s = g->arch->step(m, g->blocks, ps, g->pos);
  if (s == GK_SUCCESS)
    s = gk_ws_exec(&g->ws, g->fnorm,
                   (gk_arg[]){GK_A(GK_ARG_X, gk_t2(ps->h + (n - 1) * D, 1, D)),
                              GK_A(GK_ARG_WEIGHT, gk_pw(m, &m->params[GK_PARAM_NORM_F])),
                              GK_A(GK_ARG_Y, gk_t2(g->hn, 1, D)), GK_A(GK_ARG_RSTD, gk_t1(g->rstd, 1))}, 4);
  if (s == GK_SUCCESS)
    s = gk_ws_linear(&g->ws, g->head, gk_t2(g->hn, 1, D), gk_pw(m, gk_model_head(m)), g->logits, 1, V);
  return s;
}

// tokens through the model in one pass of n (a step when n = 1).
static gk_status feed(gk_gen *g, const int32_t *tokens, int n) {
  if (n == 1) return run_pass(g, &g->step, tokens);
  gk_gen_pass ps;
  gk_status s = pass_create(g, n, &ps);
  if (s != GK_SUCCESS) return s;
  s = run_pass(g, &ps, tokens);
  pass_free(g, &ps);
  return s;
}

// Windowed: make the window the last `keep` of its pos tokens followed by
// tokens[0 .. n) (n <= max_len - keep), and run it through the model from
// position 0 in one pass.
static gk_status refill(gk_gen *g, int keep, const int32_t *tokens, int n) {
  memmove(g->window, g->window + g->pos - keep, sizeof *g->window * (size_t)keep);
  memcpy(g->window + keep, tokens, sizeof *tokens * (size_t)n);
  g->pos = 0;
  gk_status s = feed(g, g->window, keep + n);
  if (s == GK_SUCCESS) g->pos = keep + n;
  return s;
}

static gk_status check_tokens(const gk_gen *g, const int32_t *tokens, int n, const char *fn) {
  int64_t V = g->m->cfg.vocab;
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: token %d (at %d) is outside the vocabulary 0..%lld", fn, (int)tokens[i],
                     i, (long long)V - 1);
  if (n > INT_MAX - g->fed)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: feeding %d after %d would pass %d tokens", fn, n, g->fed, INT_MAX);
  return GK_SUCCESS;
}

gk_status gk_gen_prompt(gk_gen *g, const int32_t *tokens, int n, const float **logits) {
  if (!g || !tokens || !logits) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_prompt: state, tokens or logits is NULL");
  *logits = NULL;
  if (n < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_gen_prompt: n = %d; a prompt has at least 1 token", n);
  gk_status s = check_tokens(g, tokens, n, "gk_gen_prompt");
  if (s != GK_SUCCESS) return s;
  if (g->arch->windowed) {
    // The window: the last max_len of its tokens and these.
    int take = n < g->max_len ? n : g->max_len, keep = g->pos < g->max_len - take ? g->pos : g->max_len - take;
    s = refill(g, keep, tokens + n - take, take);
  } else {
    for (int done = 0; done < n && s == GK_SUCCESS; done += GK_GEN_PIECE)
      s = feed(g, tokens + done, n - done < GK_GEN_PIECE ? n - done : GK_GEN_PIECE);
  }
  if (s != GK_SUCCESS) return s;
  g->fed += n;
  *logits = g->logits;
  return GK_SUCCESS;
}

gk_status gk_gen_step(gk_gen *g, int32_t token, const float **logits) {
  if (!g || !logits) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_gen_step: state or logits is NULL");
  *logits = NULL;
  gk_status s = check_tokens(g, &token, 1, "gk_gen_step");
  if (s != GK_SUCCESS) return s;
  if (g->arch->windowed) {
    if (g->pos == g->max_len) {
      // The window is full: restart it from its last max_len / 2 tokens and this one.
      s = refill(g, g->max_len / 2, &token, 1);
    } else {
      g->window[g->pos] = token;
      s = feed(g, &token, 1);
      if (s == GK_SUCCESS) g->pos++;
    }
  } else {
    s = feed(g, &token, 1);
  }
  if (s != GK_SUCCESS) return s;
  g->fed++;
  *logits = g->logits;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- sampling

typedef struct scored {
  float logit;
  int32_t token;
} scored;

// Larger logits first, then lower tokens: one fixed order.
static int by_logit(const void *pa, const void *pb) {
  const scored *a = pa, *b = pb;
  if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
  return (a->token > b->token) - (a->token < b->token);
}

gk_status gk_sample_token(const float *logits, int vocab, double temperature, int top_k, gk_rng *rng,
                          int32_t *token) {
  if (!logits || !rng || !token) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_sample_token: a pointer is NULL");
  if (vocab < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: vocab = %d must be >= 1", vocab);
  if (!(temperature >= 0) || !isfinite(temperature))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: temperature %g must be finite and >= 0", temperature);
  if (top_k < 0) return gk_nn_fail(GK_ERR_INVALID_VALUE, "sample: top_k = %d must be >= 0", top_k);
  for (int v = 0; v < vocab; v++)
    if (!isfinite(logits[v]))
      return gk_nn_fail(GK_ERR_NON_FINITE, "sample: the logit of token %d is %g, not finite", v, (double)logits[v]);
  if (temperature == 0 || top_k == 1) {
    int32_t best = 0;
    for (int v = 1; v < vocab; v++)
      if (logits[v] > logits[best]) best = v;
    *token = best;
    return GK_SUCCESS;
  }
  scored *s = malloc(sizeof *s * (size_t)vocab);
  if (!s) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "sample: no memory for %d logits", vocab);
  for (int v = 0; v < vocab; v++) s[v] = (scored){logits[v], v};
  qsort(s, (size_t)vocab, sizeof *s, by_logit);
  int k = top_k == 0 || top_k > vocab ? vocab : top_k;
  // Weights exp((x - max) / T) in f64: the largest is 1, so the sum is >= 1.
  double total = 0;
  for (int i = 0; i < k; i++) total += exp(((double)s[i].logit - s[0].logit) / temperature);
  double u = gk_rng_uniform(rng) * total, acc = 0;
  int32_t pick = s[k - 1].token;
  for (int i = 0; i < k; i++) {
    acc += exp(((double)s[i].logit - s[0].logit) / temperature);
    if (u < acc) {
      pick = s[i].token;
      break;
    }
  }
  free(s);
  *token = pick;
  return GK_SUCCESS;
}
