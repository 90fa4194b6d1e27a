// What the architectures (mamba.c, llama.c) and the generic model code
// (model.c, generate.c) share, below all of them (layers.c): the parameter
// table's building, the training run (plans, arena, workspace), tensor views
// of f32 memory, the op descriptions both models use, and generation's
// passes (plans and buffers for n tokens, a workspace grown on demand).
#ifndef GK_NN_LAYERS_H
#define GK_NN_LAYERS_H

#include "model.h"

// The parameters every model has, first in its table; the blocks' follow
// from GK_PARAM_BLOCKS, in the order their architecture declares them.
enum { GK_PARAM_EMBEDDING = 0, GK_PARAM_NORM_F = 1, GK_PARAM_BLOCKS = 2 };

// Declare a parameter (during the architecture's declare).
gk_status gk_model_add_param(gk_model *m, const char *name, int rank, int64_t d0, int64_t d1, bool decay);

// ---------------------------------------------------------------- the training run

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
  void *arch;                // the blocks' state (the architecture's): plans, buffers
  gk_grads_ready_fn grads_ready;  // gk_run_on_grads_ready's (NULL: none)
  void *grads_ready_ctx;
  // A piece run (gk_run_create_piece): the blocks' recurrent state of the
  // batch's sequences, carried from one forward to the next; the
  // architecture carves it (state_floats floats, contiguous) in its layout.
  bool carry;
  float *state;
  int64_t state_floats;
};

// Tell the run's grads_ready that parameters [first, first + n) are final.
void gk_run_grads_ready(gk_run *r, int first, int n);

// Reserve n floats of the arena for *p (64-byte aligned). In the measuring
// pass *p is set to NULL and only the size is counted.
void gk_run_carve(gk_run *r, float **p, int64_t n);

// Create the plan for d and remember it (freed with the run); grows the
// shared workspace to the plan's need.
gk_status gk_run_plan(gk_run *r, const gk_op_desc *d, gk_plan **out);

// Run a plan with the run's workspace.
gk_status gk_run_exec(gk_run *r, const gk_plan *p, const gk_arg *args, int nargs);

// ---------------------------------------------------------------- views and descriptions

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

// ---------------------------------------------------------------- generation

// Memory freed together: every buffer of a generation state or of a pass.
typedef struct gk_bufs {
  void **p;
  int n;
} gk_bufs;

// `bytes` zeroed bytes (64-byte aligned) in *out, or n zeroed floats, owned by b.
gk_status gk_bufs_alloc(gk_bufs *b, size_t bytes, void **out);
gk_status gk_bufs_floats(gk_bufs *b, int64_t n, float **out);
void gk_bufs_free(gk_bufs *b);

// A workspace grown to the largest need of the plans run with it.
typedef struct gk_workspace {
  void *p;
  size_t bytes;
} gk_workspace;

// Run p with ws, grown first when p needs more.
gk_status gk_ws_exec(gk_workspace *ws, const gk_plan *p, const gk_arg *args, int nargs);
// y (rows, out) = x w^T with the linear plan p.
gk_status gk_ws_linear(gk_workspace *ws, const gk_plan *p, gk_tensor x, gk_tensor w, float *y, int64_t rows,
                       int64_t out);

// A generation pass: n tokens (a step's one, a prompt's) through the model
// at once, rows being tokens. generate.c makes the embedding, the residual
// stream and what every block uses; the architecture adds its own plans and
// buffers (its pass_create) in `arch`, buffers in `mem`.
typedef struct gk_gen_pass {
  int n;
  int64_t D;               // d_model
  gk_bufs mem;
  gk_workspace *ws;        // the generation state's
  int32_t *index;          // (1, n) the tokens
  gk_plan *emb, *norm, *add;
  float *h, *hn, *rstd, *o;  // (n, D) the residual stream, (n, D) normed, (n), (n, D) a block's output
  void *arch;
} gk_gen_pass;

// hn = rmsnorm(x) w, x (n, D), with the pass's norm plan (rstd into ps->rstd).
gk_status gk_pass_rmsnorm(const gk_gen_pass *ps, float *x, gk_tensor w, float *hn);
// h += o, (n, D).
gk_status gk_pass_residual(const gk_gen_pass *ps);

#endif
