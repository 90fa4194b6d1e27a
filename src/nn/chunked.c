// Sequences in pieces with the recurrent state carried (see chunked.h).
#include "chunked.h"

#include "layers.h"

#include <stdlib.h>
#include <string.h>

struct gk_chunked {
  gk_model *m;
  int batch, chunk;
  gk_run *full;      // pieces of `chunk` tokens
  gk_run *last;      // a last, shorter piece (NULL until needed), of last_n tokens
  int last_n;
  int32_t *tokens;   // (batch, chunk): the piece's inputs
};

gk_status gk_chunked_create(gk_model *m, int batch, int chunk, gk_chunked **out) {
  if (!out) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_chunked_create: out is NULL");
  *out = NULL;
  if (!m || !m->w) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_chunked_create: the model has no weights");
  if (batch < 1 || chunk < 1)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "chunked evaluation: batch %d and chunk %d must be >= 1", batch, chunk);
  gk_chunked *c = calloc(1, sizeof *c);
  if (!c) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "chunked evaluation: no memory");
  c->m = m;
  c->batch = batch;
  c->chunk = chunk;
  c->tokens = malloc(sizeof(int32_t) * (size_t)batch * (size_t)chunk);
  gk_status s = c->tokens ? gk_run_create_piece(m, batch, chunk, &c->full)
                          : gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "chunked evaluation: no memory for %d x %d tokens",
                                       batch, chunk);
  if (s != GK_SUCCESS) {
    gk_chunked_free(c);
    return s;
  }
  *out = c;
  return GK_SUCCESS;
}

void gk_chunked_free(gk_chunked *c) {
  if (!c) return;
  gk_run_free(c->full);
  gk_run_free(c->last);
  free(c->tokens);
  free(c);
}

size_t gk_chunked_bytes(const gk_chunked *c) {
  return gk_run_bytes(c->full) + (c->last ? gk_run_bytes(c->last) : 0) +
         sizeof(int32_t) * (size_t)c->batch * (size_t)c->chunk;
}

// The run for a piece of n tokens: the full one, or the last-piece run
// (made again when its length changes) with the state handed over.
static gk_status run_for(gk_chunked *c, int n, bool first, gk_run **out) {
  if (n == c->chunk) {
    *out = c->full;
    return GK_SUCCESS;
  }
  if (c->last && c->last_n != n) {
    gk_run_free(c->last);
    c->last = NULL;
  }
  gk_status s = c->last ? GK_SUCCESS : gk_run_create_piece(c->m, c->batch, n, &c->last);
  if (s != GK_SUCCESS) return s;
  c->last_n = n;
  if (first) gk_run_reset_state(c->last);
  else if ((s = gk_run_copy_state(c->last, c->full)) != GK_SUCCESS) return s;
  *out = c->last;
  return GK_SUCCESS;
}

gk_status gk_chunked_run(gk_chunked *c, const int32_t *inputs, int64_t T, gk_chunk_fn fn, void *ctx) {
  if (!c || !inputs || !fn) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_chunked_run: an argument is NULL");
  if (T < 1) return gk_nn_fail(GK_ERR_INVALID_VALUE, "chunked evaluation: length %lld must be >= 1", (long long)T);
  gk_run_reset_state(c->full);
  gk_status s = GK_SUCCESS;
  for (int64_t first = 0; first < T && s == GK_SUCCESS; first += c->chunk) {
    int n = T - first < c->chunk ? (int)(T - first) : c->chunk;
    gk_run *r;
    if ((s = run_for(c, n, first == 0, &r)) != GK_SUCCESS) break;
    for (int b = 0; b < c->batch; b++)
      memcpy(c->tokens + (size_t)b * (size_t)n, inputs + (size_t)b * (size_t)T + (size_t)first,
             sizeof(int32_t) * (size_t)n);
    if ((s = gk_run_forward(r, c->tokens)) == GK_SUCCESS) s = fn(ctx, first, n, gk_run_logits(r));
  }
  return s;
}
