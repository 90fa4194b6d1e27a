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

// Mixed precision. A run computes in its dtype: GK_F32, or GK_BF16 / GK_F16
// with f32 master weights (m->w, m->g stay f32). In a 16-bit run
// - gk_run_plan sets every description's dtype to the run's, and
//   param_dtype (and the scan's shared B/C dtype) to f32: norm weights and
//   the scan's A, D, delta_bias and shared B, C are read from the f32
//   masters and their gradients summed in f32 into m->g;
// - each forward first rounds every master weight into w16, the 16-bit
//   copy the other ops (linear, conv1d, embedding) read; their weight
//   gradients go to g16 and are widened into m->g when a parameter's
//   gradient is final (gk_run_grads_ready), before anyone is told;
// - activations and their gradients are 16-bit (gk_run_carve); saved
//   statistics (rstd, lse, the scan's chunk states) and the loss are f32
//   (gk_run_carve_f32);
// - gk_run_exec gives each f32 view the dtype of the memory it points at:
//   the 16-bit activations, the f32 statistics, or a parameter (the f32
//   master where the op takes it in f32, else its 16-bit copy).
// The architectures write views of f32 pointers as in an f32 run; only an
// offset inside an activation buffer goes through gk_run_at.
// A device run (gk_run_create_device) holds its arena, workspace and
// tokens in buffers of the model's device: r->arena, r->ws, r->index and
// r->target are device addresses there, which only plans of that backend
// and gk_run_upload touch; gk_run_exec hands the ops views of the device
// copy of the weights and gradients in place of the host's.
struct gk_run {
  gk_model *m;
  int B, T;                  // batch, sequence length
  bool train;
  gk_backend backend;        // GK_BACKEND_AUTO: a host run; else the model's device backend
  gk_device_type device;     // where a device run's tensors live
  gk_buffer *dev_arena, *dev_ws, *dev_tokens;  // a device run's buffers (index, then target)
  gk_dtype dtype;            // what it computes in (above)
  size_t esize;              // bytes of one element of dtype
  gk_plan *plans[GK_RUN_MAX_PLANS];
  int nplans;
  size_t ws_bytes;           // the largest workspace of any plan
  void *ws;
  // The arena: the activations (dtype), then the saved statistics (f32),
  // carved in two passes (measure, then place) by gk_run_carve and
  // gk_run_carve_f32.
  char *arena;
  size_t act_bytes, f32_bytes;  // carved so far (in the placing pass: offsets)
  size_t act_total;          // the activations' bytes (measured in the first pass)
  bool placing;
  uint16_t *w16, *g16;       // 16-bit runs: the weights' copy; train runs: the 16-bit gradients (n_total each)
  bool *grad16;              // 16-bit train runs, per parameter: its gradient is in g16, not yet widened
  double loss_scale;         // the cross-entropy's gradient is multiplied by it (1: none)
  float *logits;             // (B T, V): the LM head's output; dlogits after a train step
  float *logits32;           // 16-bit forward-only runs: the logits widened to f32 (gk_run_logits)
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

// Parameters [first, first + n) are final: widen those whose gradient is in
// g16 into m->g, then tell the run's grads_ready.
void gk_run_grads_ready(gk_run *r, int first, int n);

// Reserve n elements of the run's dtype (activations, their gradients) or
// n floats (saved statistics) of the arena for *p, 64-byte aligned. In the
// measuring pass *p is set to NULL and only the size is counted.
void gk_run_carve(gk_run *r, float **p, int64_t n);
void gk_run_carve_f32(gk_run *r, float **p, int64_t n);
// Element k of the activation buffer p (k elements of the run's dtype on).
float *gk_run_at(const gk_run *r, float *p, int64_t k);

// Create the plan for d (in the run's dtype, above) and remember it (freed
// with the run); grows the shared workspace to the plan's need.
gk_status gk_run_plan(gk_run *r, const gk_op_desc *d, gk_plan **out);

// Run a plan with the run's workspace, each view given the dtype of its
// memory (above); in a device run, each view on the device, a view of the
// host weights or gradients moved to the device copy.
gk_status gk_run_exec(gk_run *r, const gk_plan *p, const gk_arg *args, int nargs);

// Copy host bytes to, or from, p (an address in the run's arena or tokens):
// memcpy in a host run, an upload or download in a device run.
gk_status gk_run_upload(const gk_run *r, void *p, const void *src, size_t bytes);
gk_status gk_run_download(const gk_run *r, const void *p, void *dst, size_t bytes);

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
