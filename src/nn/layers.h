// What the two models share: the run (plans, arena, workspace), tensor views
// of f32 memory, and running a plan on a list of arguments.
#ifndef GK_NN_LAYERS_H
#define GK_NN_LAYERS_H

#include "model.h"

enum { GK_RUN_MAX_PLANS = 64 };

struct gk_run {
  gk_model *m;
  int B, T;                  // batch, sequence length
  bool train;
  gk_plan *plans[GK_RUN_MAX_PLANS];
  int nplans;
  size_t ws_bytes;           // the largest workspace of any plan
  void *ws;
  // The arena: every activation buffer, carved in two passes (measure, then
  // place) by gk_run_carve.
  float *arena;
  int64_t arena_floats;
  bool placing;
  float *logits;             // (B T, V): the LM head's output; dlogits after a train step
  int32_t *index;            // (B, T) copies of the last inputs and targets
  int32_t *target;
  void *head;                // model.c's state: embedding, final norm, head, loss
  void *arch;                // the blocks' state (mamba.c, llama.c): plans, buffers
};

// Reserve n floats of the arena for *p (64-byte aligned). In the measuring
// pass *p is set to NULL and only the size is counted.
void gk_run_carve(gk_run *r, float **p, int64_t n);

// Create the plan for d and remember it (freed with the run); grows the
// shared workspace to the plan's need.
gk_status gk_run_plan(gk_run *r, const gk_op_desc *d, gk_plan **out);

// Run a plan with the run's workspace.
gk_status gk_run_exec(gk_run *r, const gk_plan *p, const gk_arg *args, int nargs);

// Views of f32 memory: contiguous of rank 1..4, or with explicit strides.
gk_tensor gk_t1(float *p, int64_t a);
gk_tensor gk_t2(float *p, int64_t a, int64_t b);
gk_tensor gk_t3(float *p, int64_t a, int64_t b, int64_t c);
gk_tensor gk_t4(float *p, int64_t a, int64_t b, int64_t c, int64_t d);
gk_tensor gk_strided(float *p, int rank, const int64_t *shape, const int64_t *strides);
// A parameter's weights or gradient as a tensor.
gk_tensor gk_pw(const gk_model *m, const gk_param *p);
gk_tensor gk_pg(const gk_model *m, const gk_param *p);

// Shorthand for an argument list entry.
#define GK_A(kind, tensor) ((gk_arg){(kind), (tensor)})

// Op descriptions used by both models (f32, default options otherwise).
gk_op_desc gk_desc_linear(gk_direction dir, int64_t rows, int64_t in, int64_t out);
gk_op_desc gk_desc_rmsnorm(gk_direction dir, int64_t rows, int64_t d, double eps);
gk_op_desc gk_desc_add(int64_t rows, int64_t d);

// The model's hooks, implemented by mamba.c and llama.c.
gk_status gk_mamba_declare(gk_model *m);                      // the parameters
void gk_mamba_init_weights(gk_model *m, uint64_t seed);
// layout: called twice (measuring, then placing the arena); creates the
// plans in the first pass. forward: the blocks, from h0 (B, T, D: the
// embeddings) to *h_out, the final residual stream. backward: dh holds the
// gradient of the final residual and receives that of h0; the blocks'
// parameter gradients are overwritten.
gk_status gk_mamba_layout(gk_run *r);
gk_status gk_mamba_forward(gk_run *r, const float *h0, float **h_out);
gk_status gk_mamba_backward(gk_run *r, float *dh);
void gk_mamba_free(gk_run *r);

gk_status gk_llama_declare(gk_model *m);
void gk_llama_init_weights(gk_model *m, uint64_t seed);
gk_status gk_llama_layout(gk_run *r);
gk_status gk_llama_forward(gk_run *r, const float *h0, float **h_out);
gk_status gk_llama_backward(gk_run *r, float *dh);
void gk_llama_free(gk_run *r);

// Declare a parameter (during *_declare).
gk_status gk_model_add_param(gk_model *m, const char *name, int rank, int64_t d0, int64_t d1, bool decay);

#endif
