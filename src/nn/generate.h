// Generation from a language model, on the plan API: a prompt in one pass,
// then one token at a time. generate.c does what every architecture shares
// (embedding, final norm, head, context); each architecture's table
// (arch.h) carries its state and its step through the blocks, in mamba.c
// and llama.c beside its training pass.
//
// Mamba runs its recurrence: each layer keeps the conv state (1, E, W-1)
// (the last W-1 inputs of the depthwise conv) and the scan state (1, E, N),
// and tokens go through the block's ops with L = the tokens fed at once,
// the states passed in as the ops' initial states and taken back as their
// final states. A prompt goes through the chunked scan in pieces of up to
// GK_GEN_PIECE tokens; a step is a piece of one token. Mamba has no context
// limit: its state summarizes every token fed.
//
// LLaMA keeps a key and a value cache per layer, (kv_heads, max_len, Dh)
// each, max_len being the context window. A prompt fills the caches in one
// pass through the attention op (causal, over the window's tokens); a step
// appends the new token's key (after RoPE at its position) and value, and
// its queries attend to every cached key through matmul (q k^T), a scale,
// softmax and matmul (p v), the query heads grouped by the key/value head
// they share. When a token arrives with the window full, the window
// restarts from its last max_len / 2 tokens (run again in one pass, at
// positions 0 ..), so every prediction sees between max_len / 2 + 1 and
// max_len tokens, at positions a model trained on max_len-token sequences
// knows.
//
// Either way the logits after a token equal the last row of the full
// forward pass over the tokens in context (up to rounding): all of them for
// Mamba, the window's for LLaMA.
#ifndef GK_NN_GENERATE_H
#define GK_NN_GENERATE_H

#include "model.h"
#include "rng.h"

// Mamba's prompt goes through the model this many tokens at a time.
enum { GK_GEN_PIECE = 2048 };

typedef struct gk_gen gk_gen;

// The state of one sequence generated from *m, whose weights must stay in
// place while the state lives. max_len >= 1: LLaMA's context window (the
// rows of its caches; the length the model was trained on); Mamba ignores it.
gk_status gk_gen_create(const gk_model *m, int max_len, gk_gen **out);
void gk_gen_free(gk_gen *g);
// Tokens fed so far (prompt and steps).
int gk_gen_length(const gk_gen *g);
// Tokens the next prediction depends on: all those fed (Mamba), or those in
// the window (LLaMA, at most max_len).
int gk_gen_context(const gk_gen *g);
// Feed n >= 1 tokens at the next positions in one pass (LLaMA: the window
// is rebuilt from its tokens and these, the last max_len of them);
// *logits (vocab floats) predict the token after the last, valid until
// the next call. Every token is checked before anything is fed.
gk_status gk_gen_prompt(gk_gen *g, const int32_t *tokens, int n, const float **logits);
// Feed the token at the next position; *logits as for gk_gen_prompt.
// A refused argument leaves the state as it was; after any other error
// (out of memory) the state is lost: free it.
gk_status gk_gen_step(gk_gen *g, int32_t token, const float **logits);

// The next token from `logits`: the most likely one (the lowest index among
// equals) for temperature 0; otherwise a draw from softmax(logits / T)
// restricted to the top_k most likely (top_k 0, or >= vocab: all), using rng.
gk_status gk_sample_token(const float *logits, int vocab, double temperature, int top_k, gk_rng *rng,
                          int32_t *token);

#endif
