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
//
// Mixed precision: a run made with gk_run_create_dtype(..., GK_BF16 or
// GK_F16, ...) computes in that dtype while the model's weights and
// gradients stay f32 (the master weights): each forward rounds the weights
// into a 16-bit copy; activations and their gradients are 16-bit; the ops
// sum in f32; norm weights and the scan's A, D, dt_bias (and shared B, C)
// are read in f32 and their gradients summed in f32; the loss is f32; the
// 16-bit weight gradients are widened into m->g. The optimizer then steps
// the f32 masters as in an f32 run. For f16, whose range is narrow,
// gk_run_set_loss_scale and gk_loss_scaler (below) scale the loss's gradient
// so that small gradients do not flush to zero.
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
  // On a device (gk_model_to_device): a second copy of the weights and
  // gradients in one buffer of `backend`'s device, dw and dg being their
  // device addresses (tensors of that device, not host memory). Device runs
  // read and write them; the host copy is the device's as of the last
  // gk_model_download (or gk_model_upload). GK_BACKEND_AUTO, NULL: none.
  gk_backend backend;
  gk_buffer *dev;
  float *dw, *dg;
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

// Training on a device. gk_model_to_device gives the model its device copy
// on `backend` (a device backend such as GK_BACKEND_VULKAN), the weights
// uploaded and the gradients zeroed; gk_model_upload copies the host weights
// to it again (after loading a checkpoint into m->w), gk_model_download the
// device's weights and gradients into m->w and m->g (before saving or
// evaluating on the host; it waits for the device's work). A model on a
// device still has host runs, which read the host copy.
gk_status gk_model_to_device(gk_model *m, gk_backend backend);
gk_status gk_model_upload(gk_model *m);
gk_status gk_model_download(gk_model *m);
// Views of all the weights and all the gradients, (n_total) f32: on the
// model's device when it has one, else in host memory (for the optimizer
// and clipping, which run where their tensors are).
gk_tensor gk_model_weights(const gk_model *m);
gk_tensor gk_model_grads(const gk_model *m);

typedef struct gk_run gk_run;

// Plans and memory for batches of `batch` sequences of `seq_len` tokens;
// `train`: also the backward pass.
gk_status gk_run_create(gk_model *m, int batch, int seq_len, bool train, gk_run **out);
// The same on the model's device (gk_model_to_device), in f32: its plans run
// on the model's backend, its activations, workspace, tokens and loss live
// in that device's buffers, and it reads and writes the device copy of the
// weights and gradients (dw, dg); gk_run_step and gk_run_forward copy the
// tokens up and the loss down, nothing else. Its logits stay on the device
// (gk_run_logits gives NULL). What a device cannot run fails here, naming
// the op and the reason.
gk_status gk_run_create_device(gk_model *m, int batch, int seq_len, bool train, gk_run **out);
// The same computing in `dtype`: GK_F32 (as gk_run_create), GK_BF16 or
// GK_F16 (mixed precision, above).
gk_status gk_run_create_dtype(gk_model *m, int batch, int seq_len, bool train, gk_dtype dtype, gk_run **out);
gk_dtype gk_run_dtype(const gk_run *r);
// From the next train step on, the gradients written to m->g are those of
// scale x the loss (the loss reported stays unscaled). scale > 0, finite;
// 1 when the run is made.
gk_status gk_run_set_loss_scale(gk_run *r, double scale);
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
// gk_run_logits until the next call, in f32 (a 16-bit forward-only run
// widens them; a 16-bit train run and a device run give NULL).
gk_status gk_run_forward(gk_run *r, const int32_t *inputs);
const float *gk_run_logits(const gk_run *r);

// During a train step's backward pass, fn(ctx, first, n) is called as soon
// as the gradients of parameters [first, first + n) of m->params are final:
// the head's first (lm_head when untied, then norm_f), then each block's from
// the last to the first, the embedding's last (a tied head shares it). Data-parallel
// training starts reducing them there, while backward goes on. NULL: none.
typedef void (*gk_grads_ready_fn)(void *ctx, int first, int n);
void gk_run_on_grads_ready(gk_run *r, gk_grads_ready_fn fn, void *ctx);

// Dynamic loss scaling, for f16 training: the loss's gradient is
// multiplied by `scale` (gk_run_set_loss_scale); after backward,
// gk_loss_scaler_unscale divides the gradients by it and says whether they
// are all finite. Not finite: the step must be skipped, and
// gk_loss_scaler_update halves the scale; finite: after growth_interval
// finite steps in a row the scale doubles.
typedef struct gk_loss_scaler {
  double scale;
  int64_t growth_interval;  // N: finite steps in a row before the scale doubles
  int64_t good_steps;       // finite steps since the scale last changed
  int64_t skipped;          // steps skipped so far
} gk_loss_scaler;

// Start at `scale` (2^16 as torch's GradScaler), doubling after
// growth_interval finite steps (2000 as torch's).
void gk_loss_scaler_init(gk_loss_scaler *s, double scale, int64_t growth_interval);
// g[0..n) /= scale; true when every element is finite.
bool gk_loss_scaler_unscale(const gk_loss_scaler *s, float *g, int64_t n);
// After a step whose gradients were (not) finite: count it, and halve or
// grow the scale.
void gk_loss_scaler_update(gk_loss_scaler *s, bool finite);

#endif
