// Threaded CPU kernels for the elementwise and gated activations.
// Work is cut into tasks of TASK_ELEMS elements (by problem size only, so
// any thread count gives the same bits). When every tensor is contiguous in
// the compute dtype (f32; f64 for f64) a task computes its range in one
// loop, in place. Otherwise each task walks its range in
// chunks of CHUNK elements, loaded as f32 (f64 for f64) straight from the
// tensor when it is contiguous in that dtype, else converted into a stack
// buffer, computed by a plain loop, and stored back (rounded to nearest even);
// an input whose every stride is 0 (the dy autograd hands over for
// y.sum()) is converted once a task, one chunk of its value serving every
// chunk.
// When every tensor is contiguous bf16 (or every one f16), the loop itself
// widens each 16-bit element to f32 in a register and narrows the result
// (round to nearest even) as it stores it: no buffer, the same bits.
// Where every output is bf16 or f16, the activation is the h32 form of
// act_math.h (cheaper, under 1e-4 relative error: below what 16 bits keep).
// The next chunk of each contiguous input is prefetched while a chunk
// computes, so the memory streams during the arithmetic.
// ReLU's forward with an output of RELU_STREAM_BYTES or more (in those two
// contiguous cases) is computed chunk by chunk into a stack buffer and
// written by non-temporal stores (stream_store.h): no line of the output is
// read before it is written. Measured on AMD Zen 4 (32 MB L3), 2 threads,
// each call timed against a plain one in the same process, four sittings:
// 4096x2048 f32 0.77-0.95 of the plain time, 4096x8192 f32 0.73-0.97, bf16
// 4096x8192 0.89-0.90; not taken where it did not pay: a 16 MiB output
// (bf16 4096x2048: 1.16-1.27, input and output then fit the L3), the
// backwards (two inputs, one output: 0.93-1.03) and the other activations'
// forwards (GELU, SiLU, sigmoid: 1.11-1.29, their arithmetic no longer
// overlapping the stores).
#include "../core/act_math.h"
#include "../core/convert.h"
#include "../core/internal.h"
#include "stream_store.h"

enum { CHUNK = 512, TASK_ELEMS = 32768, MAX_IN = 3, MAX_OUT = 2 };
#define RELU_STREAM_BYTES ((size_t)32 << 20)

typedef enum ew_kind { EW_ACT_FWD, EW_ACT_BWD, EW_ACT_BWD_Y, EW_GATED_FWD, EW_GATED_BWD } ew_kind;

typedef struct ew_job {
  ew_kind kind;
  gk_act_params p;
  int nin, nout;
  const gk_tensor *in[MAX_IN];
  const gk_tensor *out[MAX_OUT];
  int64_t n;
  const char *in_bytes[MAX_IN];  // contiguous inputs' memory (prefetched a chunk ahead), else NULL
  int64_t in_es[MAX_IN];         // their element sizes
  gk_dtype half16;               // GK_BF16 or GK_F16 when every tensor is contiguous in it, else GK_F32
  bool direct;                   // every tensor contiguous in the compute dtype (f32, or f64 for f64)
  bool in_one_value[MAX_IN];     // inputs whose every stride is 0 (autograd's dy of y.sum()): loaded once a task
  bool out16;                    // every output bf16 or f16: the h32 math
  bool stream;                   // relu forward, direct or half16, output of RELU_STREAM_BYTES or more
} ew_job;

// The compute loops, for T = float (S = f32) and T = double (S = f64), on
// elements of type E read through LD and written through ST (identities for
// f32 and f64; the 16-bit conversions of convert.h for bf16 and f16).
//   act fwd:   in x          -> out y = act(x)
//   act bwd:   in dy, x      -> out dx = dy act'(x)
//   act bwd_y: in dy, y      -> out dx = dy act'(x) from y = act(x) (act.from_output:
//                               sigmoid y (1 - y), relu y > 0)
//   gated fwd: in a, b       -> out y = a act(b)
//   gated bwd: in dy, a, b   -> out da = dy act(b), db = dy a act'(b)
// One loop per (kind, activation), so no branch on the activation is left
// inside a loop. In each loop `v` is the activation's argument.
#define EW_ACT_CASES(S, LOOP, LD, ST)                                                      \
  switch (p->act) {                                                                        \
  case GK_ACT_RELU: LOOP(gk_relu_##S(v), gk_drelu_##S(v), LD, ST); break;                  \
  case GK_ACT_GELU: LOOP(gk_gelu_##S(v), gk_dgelu_##S(v), LD, ST); break;                  \
  case GK_ACT_GELU_TANH: LOOP(gk_gelu_tanh_##S(v), gk_dgelu_tanh_##S(v), LD, ST); break;   \
  case GK_ACT_SILU: LOOP(gk_silu_##S(v), gk_dsilu_##S(v), LD, ST); break;                  \
  case GK_ACT_SIGMOID: LOOP(gk_sigmoid_##S(v), gk_dsigmoid_##S(v), LD, ST); break;         \
  case GK_ACT_SOFTPLUS: LOOP(gk_softplus_##S(v, beta, thr), gk_dsoftplus_##S(v, beta, thr), LD, ST); break; \
  }
// The activations with a derivative from their output (`v` is y there).
#define EW_ACT_Y_CASES(S, LOOP, LD, ST)                                                    \
  if (p->act == GK_ACT_SIGMOID) {                                                          \
    LOOP(v, gk_dsigmoid_y_##S(v), LD, ST);                                                 \
  } else {                                                                                 \
    LOOP(v, gk_drelu_##S(v), LD, ST);                                                      \
  }
// The loops load their inputs into locals, relu's gradient factor before
// dy: with dy read inside `dy * (y > 0 ? 1 : 0)`, gcc if-converts the
// product into two masked loads of dy, which ran relu's backward 35% slower
// on AMD Zen 4 (2.7 against 2.0 ms, 4096x2048 f32, one thread).
#define EW_LOOP_ACT_FWD(F, G, LD, ST) for (int64_t i = 0; i < n; i++) { elem v = LD(in[0][i]); out[0][i] = ST(F); }
#define EW_LOOP_ACT_BWD(F, G, LD, ST) \
  for (int64_t i = 0; i < n; i++) { elem v = LD(in[1][i]), g = G, dy = LD(in[0][i]); out[0][i] = ST(dy * g); }
#define EW_LOOP_GATED_FWD(F, G, LD, ST) \
  for (int64_t i = 0; i < n; i++) { elem a = LD(in[0][i]), v = LD(in[1][i]); out[0][i] = ST(a * F); }
#define EW_LOOP_GATED_BWD(F, G, LD, ST)                                                    \
  for (int64_t i = 0; i < n; i++) {                                                        \
    elem v = LD(in[2][i]), dy = LD(in[0][i]), a = LD(in[1][i]);                            \
    elem da = dy * F, db = dy * a * G;                                                     \
    out[0][i] = ST(da);                                                                    \
    out[1][i] = ST(db);                                                                    \
  }
#define EW_SAME(x) (x)
#define GK_DEFINE_EW_COMPUTE(NAME, T, S, E, LD, ST)                                        \
  GK_INLINE void NAME(const ew_job *j, const E *const *in, E *const *out, int64_t n) {     \
    typedef T elem;                                                                        \
    const gk_act_params *p = &j->p;                                                        \
    T beta = (T)p->beta, thr = (T)p->threshold;                                            \
    (void)beta;                                                                            \
    (void)thr;                                                                             \
    switch (j->kind) {                                                                     \
    case EW_ACT_FWD: EW_ACT_CASES(S, EW_LOOP_ACT_FWD, LD, ST) break;                       \
    case EW_ACT_BWD: EW_ACT_CASES(S, EW_LOOP_ACT_BWD, LD, ST) break;                       \
    case EW_ACT_BWD_Y: EW_ACT_Y_CASES(S, EW_LOOP_ACT_BWD, LD, ST) break;                   \
    case EW_GATED_FWD: EW_ACT_CASES(S, EW_LOOP_GATED_FWD, LD, ST) break;                   \
    case EW_GATED_BWD: EW_ACT_CASES(S, EW_LOOP_GATED_BWD, LD, ST) break;                   \
    }                                                                                      \
  }
GK_DEFINE_EW_COMPUTE(ew_compute_f32, float, f32, float, EW_SAME, EW_SAME)
GK_DEFINE_EW_COMPUTE(ew_compute_f64, double, f64, double, EW_SAME, EW_SAME)
// Results stored in 16 bits take the h32 math (act_math.h: cheaper, under
// 1e-4 relative), whether converted in registers or through the f32 buffers.
GK_DEFINE_EW_COMPUTE(ew_compute_h32, float, h32, float, EW_SAME, EW_SAME)
GK_DEFINE_EW_COMPUTE(ew_compute_bf16, float, h32, uint16_t, gk_bf16_to_f32_inline, gk_f32_to_bf16_inline)
GK_DEFINE_EW_COMPUTE(ew_compute_f16, float, h32, uint16_t, gk_f16_to_f32_inline, gk_f32_to_f16_inline)
GK_INLINE void ew_compute_f32_or_h32(const ew_job *j, const float *const *in, float *const *out, int64_t n) {
  if (j->out16) ew_compute_h32(j, in, out, n);
  else ew_compute_f32(j, in, out, n);
}

// The next chunk of each contiguous input on its way while this one computes.
GK_INLINE void ew_prefetch(const ew_job *j, int64_t s, int64_t next) {
  for (int k = 0; k < j->nin; k++)
    for (int64_t b = 0; j->in_bytes[k] && b < next * j->in_es[k]; b += 64)
      __builtin_prefetch(j->in_bytes[k] + s * j->in_es[k] + b);
}

#define GK_DEFINE_EW_TASK(T, S, COMPUTE)                                                   \
  GK_INLINE void ew_task_##S(const ew_job *j, int64_t task) {                                 \
    T inbuf[MAX_IN][CHUNK], outbuf[MAX_OUT][CHUNK] __attribute__((aligned(64)));           \
    const T *in[MAX_IN];                                                                   \
    T *out[MAX_OUT];                                                                       \
    int64_t start = task * TASK_ELEMS, end = gk_min64(j->n, start + TASK_ELEMS);           \
    for (int k = 0; k < j->nin; k++) /* one value: a chunk of it, for every chunk */       \
      if (j->in_one_value[k]) in[k] = gk_chunk_in_##S(j->in[k], start, gk_min64(CHUNK, end - start), inbuf[k]); \
    if (j->direct && !j->stream) { /* the task's whole range in one loop, no chunks */     \
      for (int k = 0; k < j->nin; k++) in[k] = (const T *)j->in[k]->data + start;          \
      for (int k = 0; k < j->nout; k++) out[k] = (T *)j->out[k]->data + start;             \
      COMPUTE(j, in, out, end - start);                                                    \
      return;                                                                              \
    }                                                                                      \
    if (j->direct) { /* streamed: each chunk computed into outbuf, then stored past the caches */ \
      for (int64_t s = start; s < end; s += CHUNK) {                                       \
        int64_t m = gk_min64(CHUNK, end - s);                                              \
        for (int k = 0; k < j->nin; k++) in[k] = (const T *)j->in[k]->data + s;           \
        for (int k = 0; k < j->nout; k++) out[k] = outbuf[k];                              \
        COMPUTE(j, in, out, m);                                                            \
        for (int k = 0; k < j->nout; k++)                                                  \
          gk_put_bytes((T *)j->out[k]->data + s, outbuf[k], (size_t)m * sizeof(T), true);  \
      }                                                                                    \
      gk_stream_fence(true);                                                               \
      return;                                                                              \
    }                                                                                      \
    for (int64_t s = start; s < end; s += CHUNK) {                                         \
      int64_t m = gk_min64(CHUNK, end - s);                                                \
      ew_prefetch(j, s + m, gk_min64(CHUNK, end - s - m));                                 \
      for (int k = 0; k < j->nin; k++)                                                     \
        if (!j->in_one_value[k]) in[k] = gk_chunk_in_##S(j->in[k], s, m, inbuf[k]);        \
      for (int k = 0; k < j->nout; k++) out[k] = gk_chunk_out_##S(j->out[k], s, outbuf[k]); \
      COMPUTE(j, in, out, m);                                                              \
      for (int k = 0; k < j->nout; k++) gk_chunk_commit_##S(j->out[k], s, m, out[k], outbuf[k]); \
    }                                                                                      \
  }
GK_DEFINE_EW_TASK(float, f32, ew_compute_f32_or_h32)
GK_DEFINE_EW_TASK(double, f64, ew_compute_f64)

// Every tensor contiguous bf16 (f16): converted in registers, chunk by chunk.
GK_INLINE void ew_task_16(const ew_job *j, int64_t task) {
  const uint16_t *in[MAX_IN];
  uint16_t *out[MAX_OUT], outbuf[MAX_OUT][CHUNK] __attribute__((aligned(64)));
  int64_t end = gk_min64(j->n, (task + 1) * TASK_ELEMS);
  for (int64_t s = task * TASK_ELEMS; s < end; s += CHUNK) {
    int64_t m = gk_min64(CHUNK, end - s);
    ew_prefetch(j, s + m, gk_min64(CHUNK, end - s - m));
    for (int k = 0; k < j->nin; k++) in[k] = (const uint16_t *)j->in[k]->data + s;
    for (int k = 0; k < j->nout; k++) out[k] = j->stream ? outbuf[k] : (uint16_t *)j->out[k]->data + s;
    if (j->half16 == GK_BF16) ew_compute_bf16(j, in, out, m);
    else ew_compute_f16(j, in, out, m);
    for (int k = 0; j->stream && k < j->nout; k++)
      gk_put_bytes((uint16_t *)j->out[k]->data + s, outbuf[k], (size_t)m * sizeof(uint16_t), true);
  }
  gk_stream_fence(j->stream);
}

GK_INLINE void ew_task_body(void *ctx, int64_t task) {
  const ew_job *j = ctx;
  if (j->half16 != GK_F32) ew_task_16(j, task);
  else if (j->in[0]->dtype == GK_F64) ew_task_f64(j, task);
  else ew_task_f32(j, task);
}
GK_ISA_VARIANTS(ew_task, (void *ctx, int64_t task), (ctx, task))

static gk_status ew_run(ew_job *j) {
  gk_dtype dt = j->in[0]->dtype;
  bool all16 = dt == GK_BF16 || dt == GK_F16;
  for (int k = 0; k < j->nin; k++) {
    j->in_bytes[k] = gk_tensor_is_contiguous(j->in[k]) ? (const char *)j->in[k]->data : NULL;
    j->in_one_value[k] = !j->in_bytes[k];
    for (int d = 0; d < j->in[k]->rank; d++) j->in_one_value[k] = j->in_one_value[k] && j->in[k]->strides[d] == 0;
    j->in_es[k] = (int64_t)gk_elem_size(j->in[k]->dtype);
    all16 = all16 && j->in_bytes[k] && j->in[k]->dtype == dt;
  }
  for (int k = 0; k < j->nout; k++) all16 = all16 && gk_tensor_is_contiguous(j->out[k]) && j->out[k]->dtype == dt;
  j->half16 = all16 ? dt : GK_F32;
  j->out16 = true;
  for (int k = 0; k < j->nout; k++) j->out16 = j->out16 && (j->out[k]->dtype == GK_BF16 || j->out[k]->dtype == GK_F16);
  j->direct = dt == GK_F32 || dt == GK_F64;
  for (int k = 0; k < j->nin; k++) j->direct = j->direct && j->in_bytes[k] && j->in[k]->dtype == dt;
  for (int k = 0; k < j->nout; k++) j->direct = j->direct && gk_tensor_is_contiguous(j->out[k]) && j->out[k]->dtype == dt;
  j->stream = j->kind == EW_ACT_FWD && j->p.act == GK_ACT_RELU && (j->direct || j->half16 != GK_F32) &&
              (size_t)j->n * gk_elem_size(dt) >= RELU_STREAM_BYTES;
  gk_parallel_for(gk_ceil_div(j->n, TASK_ELEMS), ew_task, j);
  return GK_SUCCESS;
}

static gk_status cpu_activation_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  ew_job j = {EW_ACT_FWD, gk_act_of(&plan->desc), 1, 1, {a[GK_ARG_X]}, {a[GK_ARG_Y]},
              gk_tensor_numel(a[GK_ARG_X]), {0}, {0}, GK_F32, false, {0}, false, false};
  return ew_run(&j);
}

// (dy, x) -> dx, or (dy, y) -> dx with act.from_output.
static gk_status cpu_activation_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_tensor *v = a[gk_activation_saved(&plan->desc)];
  ew_job j = {plan->desc.act.from_output ? EW_ACT_BWD_Y : EW_ACT_BWD, gk_act_of(&plan->desc), 2, 1, {a[GK_ARG_DY], v},
              {a[GK_ARG_DX]}, gk_tensor_numel(v), {0}, {0}, GK_F32, false, {0}, false, false};
  return ew_run(&j);
}

static gk_status cpu_gated_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_tensor va, vb;
  gk_gated_views(plan, a, &va, &vb, NULL, NULL);
  ew_job j = {EW_GATED_FWD, gk_act_of(&plan->desc), 2, 1, {&va, &vb}, {a[GK_ARG_Y]}, gk_tensor_numel(&va), {0}, {0},
              GK_F32, false, {0}, false, false};
  return ew_run(&j);
}

static gk_status cpu_gated_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_tensor va, vb, vda, vdb;
  gk_gated_views(plan, a, &va, &vb, &vda, &vdb);
  ew_job j = {EW_GATED_BWD, gk_act_of(&plan->desc), 3, 2, {a[GK_ARG_DY], &va, &vb}, {&vda, &vdb},
              gk_tensor_numel(&va), {0}, {0}, GK_F32, false, {0}, false, false};
  return ew_run(&j);
}

const gk_kernel gk_cpu_activation_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_activation_fwd};
const gk_kernel gk_cpu_activation_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_activation_bwd};
const gk_kernel gk_cpu_gated_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_gated_fwd};
const gk_kernel gk_cpu_gated_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_gated_bwd};
