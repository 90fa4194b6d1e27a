// An architecture: one table of the functions the generic model code
// (model.c: parameters, training; generate.c: generation) calls for the
// blocks between the embedding and the final norm. Each architecture's file
// (mamba.c, llama.c) holds its table, its training pass and its generation
// step side by side; the generic code finds the table by gk_arch
// (gk_arch_table_of, model.c). Nothing in an architecture calls back into
// the generic code: both stand on layers.h.
//
// The blocks' parameters are found by their index in the model's table
// (GK_PARAM_BLOCKS + layer * per-layer count + slot), fixed when declared.
#ifndef GK_NN_ARCH_H
#define GK_NN_ARCH_H

#include "layers.h"

typedef struct gk_arch_table {
  // Check the architecture's sizes in *c and fill its derived ones
  // (gk_model_config_finish has checked the common ones).
  gk_status (*finish)(gk_model_config *c);
  // Declare the blocks' parameters (after the embedding and norm_f).
  gk_status (*declare)(gk_model *m);
  // Initialise every weight, the embedding and norm_f included, from seed.
  void (*init)(gk_model *m, uint64_t seed);

  // Training. layout: called twice (measuring, then placing the arena);
  // creates the blocks' state r->arch and plans in the first pass. forward:
  // from h0 (B, T, D: the embeddings) to *h_out, the final residual stream.
  // backward: dh holds the gradient of the final residual and receives that
  // of h0; the blocks' parameter gradients are overwritten. free_run: frees
  // r->arch (the plans are the run's).
  gk_status (*layout)(gk_run *r);
  gk_status (*forward)(gk_run *r, const float *h0, float **h_out);
  gk_status (*backward)(gk_run *r, float *dh);
  void (*free_run)(gk_run *r);

  // Generation. windowed: the blocks see a window of at most max_len
  // tokens (a pass of n > 1 tokens only at position 0, to fill it); else
  // their state summarizes every token fed and max_len is ignored.
  // gen_create: the state of one sequence in *state, its buffers in mem
  // (freed by the caller after gen_free). pass_create: the architecture's
  // plans and buffers for passes of ps->n tokens into ps->arch and ps->mem;
  // pass_free frees what pass_create made outside ps->mem. step: ps->h
  // (n, D), the embeddings of n tokens at positions pos .. pos + n - 1,
  // through the blocks into the final residual stream, the state advanced.
  bool windowed;
  gk_status (*gen_create)(const gk_model *m, int max_len, gk_bufs *mem, void **state);
  void (*gen_free)(void *state);
  gk_status (*pass_create)(const gk_model *m, gk_gen_pass *ps);
  void (*pass_free)(gk_gen_pass *ps);
  gk_status (*step)(const gk_model *m, void *state, const gk_gen_pass *ps, int pos);
} gk_arch_table;

extern const gk_arch_table gk_mamba_arch;
extern const gk_arch_table gk_llama_arch;

// The table of arch, or NULL when there is none.
const gk_arch_table *gk_arch_table_of(gk_arch arch);

#endif
