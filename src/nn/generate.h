// Generation from a language model one token at a time, on the plan API.
//
// Mamba runs its recurrent step: each layer keeps the conv state (1, E, W-1)
// (the last W-1 inputs of the depthwise conv) and the scan state (1, E, N),
// and each token goes through the block's ops with L = 1, the states passed
// in as the ops' initial states and taken back as their final states.
// LLaMA keeps a key and a value cache per layer, (kv_heads, max_len, Dh)
// each: the new token's key (after RoPE at its position) and value are
// appended, and its queries attend to every cached key through matmul
// (q k^T), a scale, softmax and matmul (p v), the query heads grouped by the
// key/value head they share.
//
// Either way the logits after token t equal row t of the full forward pass
// over the sequence (up to rounding).
#ifndef GK_NN_GENERATE_H
#define GK_NN_GENERATE_H

#include "model.h"
#include "rng.h"

typedef struct gk_gen gk_gen;

// The state of one sequence of at most max_len tokens (Mamba needs no
// bound, LLaMA sizes its caches by it) generated from *m, whose weights must
// stay in place while the state lives.
gk_status gk_gen_create(const gk_model *m, int max_len, gk_gen **out);
void gk_gen_free(gk_gen *g);
// Tokens fed so far.
int gk_gen_length(const gk_gen *g);
// Feed the token at the next position; *logits (vocab floats) are the
// model's prediction of the token after it, valid until the next call.
gk_status gk_gen_step(gk_gen *g, int32_t token, const float **logits);

// The next token from `logits`: the most likely one (the lowest index among
// equals) for temperature 0; otherwise a draw from softmax(logits / T)
// restricted to the top_k most likely (top_k 0, or >= vocab: all), using rng.
gk_status gk_sample_token(const float *logits, int vocab, double temperature, int top_k, gk_rng *rng,
                          int32_t *token);

#endif
