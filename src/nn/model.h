// Language models built on the public plan API: a Mamba LM and a LLaMA LM.
//
// A model is its parameters: one flat f32 array of weights and one of
// gradients, cut into named tensors (gk_param). The decayed parameters (the
// matrices and the embedding) come first, so AdamW is two calls: one over
// [0, n_decay) with weight decay, one over the rest without.
//
// A run (gk_run) is what one (batch, seq_len) needs: the plans of every op,
// one arena for the activations that forward keeps for backward, sized up
// front, and one workspace shared by all plans (ops run one at a time).
#ifndef GK_NN_MODEL_H
#define GK_NN_MODEL_H

#include "nn.h"

#include <stdbool.h>

typedef enum gk_arch {
  GK_ARCH_MAMBA = 0,
  GK_ARCH_LLAMA = 1,
} gk_arch;

typedef struct gk_model_config {
  gk_arch arch;
  int vocab;        // V
  int d_model;      // D
  int n_layers;
  // Mamba: d_inner = expand * D, conv width, d_state N, dt_rank = ceil(D / 16);
  // selection = 0 makes delta, B and C parameters instead of projections of
  // the input (the paper's time-invariant ablation).
  int expand, d_conv, d_state, dt_rank, selection;
  // LLaMA: heads, key/value heads (dividing heads), SwiGLU hidden size,
  // RoPE base.
  int heads, kv_heads, d_ff;
  double rope_theta;
  double norm_eps;
  // 0: the LM head is the embedding (tied). 1: a separate head weight
  // "lm_head" (V, D), last in the parameter table, initialised as a copy of
  // the embedding and trained on its own.
  int untied_head;
} gk_model_config;

typedef struct gk_param {
  char name[48];
  int rank;
  int64_t shape[2];
  int64_t offset, numel;    // in the flat arrays
  bool decay;
} gk_param;

typedef struct gk_model {
  gk_model_config cfg;
  gk_param *params;
  int nparams;
  int64_t n_decay, n_total; // elements: [0, n_decay) are decayed
  float *w, *g;             // weights, gradients: n_total each
} gk_model;

// Fill the derived fields of *c (dt_rank, d_ff, ...) and check the sizes.
gk_status gk_model_config_finish(gk_model_config *c);
// Allocate and initialise the weights from `seed` (Mamba: as the paper's
// reference code; LLaMA: normal(0, 0.02), residual projections scaled by
// 1/sqrt(2 n_layers)).
gk_status gk_model_init(gk_model *m, const gk_model_config *c, uint64_t seed);
void gk_model_free(gk_model *m);
// The weight of the LM head: lm_head when untied, else the embedding.
const gk_param *gk_model_head(const gk_model *m);

typedef struct gk_run gk_run;

// Plans and memory for batches of `batch` sequences of `seq_len` tokens;
// `train`: also the backward pass.
gk_status gk_run_create(gk_model *m, int batch, int seq_len, bool train, gk_run **out);
void gk_run_free(gk_run *r);
// A forward-only run over pieces of `piece` tokens of longer sequences: each
// gk_run_forward goes on from the state the last one left (Mamba: every
// layer's conv state (batch, E, W-1) and scan state (batch, E, N), passed
// to the ops as their initial states and taken back as their final
// states), so sequences of any length run in the memory of one piece.
// Architectures that need the whole sequence at once (LLaMA's attention)
// are refused. A new run starts from the zero state.
gk_status gk_run_create_piece(gk_model *m, int batch, int piece, gk_run **out);
// Back to the zero state: the next forward starts new sequences.
void gk_run_reset_state(gk_run *r);
// The carried state of src into dst, piece runs of the same model and batch
// (of any piece length): dst goes on where src stopped.
gk_status gk_run_copy_state(gk_run *dst, const gk_run *src);
// The bytes gk_run_create's run would hold (its plans are made and
// destroyed; nothing is allocated): to tell beforehand whether it fits.
gk_status gk_run_measure(gk_model *m, int batch, int seq_len, bool train, size_t *bytes);
// Bytes the run holds (activations, workspace, logits).
size_t gk_run_bytes(const gk_run *r);

// Forward over inputs (batch, seq_len) and the mean cross-entropy over the
// targets that are not GK_IGNORE_INDEX (NaN when all are). With a train run,
// then the backward pass: m->g is overwritten with the gradient of the loss.
gk_status gk_run_step(gk_run *r, const int32_t *inputs, const int32_t *targets, double *loss);
// Forward only; the logits (batch * seq_len, V) stay readable through
// gk_run_logits until the next call.
gk_status gk_run_forward(gk_run *r, const int32_t *inputs);
const float *gk_run_logits(const gk_run *r);

// During a train step's backward pass, fn(ctx, first, n) is called as soon
// as the gradients of parameters [first, first + n) of m->params are final:
// the head's first (lm_head when untied, then norm_f), then each block's from
// the last to the first, the embedding's last (a tied head shares it). Data-parallel
// training starts reducing them there, while backward goes on. NULL: none.
typedef void (*gk_grads_ready_fn)(void *ctx, int first, int n);
void gk_run_on_grads_ready(gk_run *r, gk_grads_ready_fn fn, void *ctx);

#endif
