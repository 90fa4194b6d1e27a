// Threaded CPU kernels for the causal depthwise conv1d (math as in
// src/ref/conv1d.c), f32 math (f64 for f64), the hot loops compiled per ISA
// level (conv1d_body.h). Loops run along the unit-stride dimension:
//   (B, D, L): units of one channel and TILE steps ("runs": i walks t);
//   (B, L, D): units of NT steps and DB channels ("lanes": i walks d),
//             walked a column of LANES channels at a time down the steps;
//             contiguous bf16 is widened and rounded in registers there.
// Other 16-bit tensors are widened into f32 row buffers and rounded back.
// A prologue copies the weights transposed, wt (W, D), and the bias (zeros
// without one) into the workspace as REAL.
//   forward:  tasks of consecutive units; y = act(bias + sum_k w[k] xpad[t+k])
//             straight into y, taps in register blocks of KB.
//   backward: one pass. Task = (group of (b, tile) items, block of
//             channels: a few runs, or one lane block), in memory order;
//             per tile, g = dy act'(pre) over a window of the tile
//             plus its W-1 successors (pre recomputed from x), then dx (and,
//             on a first tile, dinitial_state) = sum_k w[k] g[t+W-1-k] and
//             the dweight/dbias sums of the tile, added into the group's
//             partials in item order. Widths above KG go window by window
//             (KG taps each) so every buffer is bounded. A last pass adds the
//             partials group by group in order, so every thread count gives
//             the same bits.
// Runs prefetch the next unit's rows (those that follow in memory) while
// they apply SiLU / SiLU': rows of one 4 KiB page each (f32, L = 1024)
// would otherwise restart the hardware prefetcher at every row.
#include "../core/act_math.h"
#include "../core/convert.h"
#include "../ops/conv1d.h"

#include <string.h>

// conv1d_body.h is included once per accumulator type REAL (float,
// double) with suffix SFX (f32, f64): FN(name) is name_SFX.
#define GK_CAT2(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define FN(name) GK_CAT(name, SFX)
// A vector of LANES (conv1d_body.h) loaded from p, aligned or not.
#define LANES_AT(v, p) memcpy(&(v), (p), sizeof(v))

enum {
  TILE = 1024,              // runs: steps per unit
  NT = 16, DB = 128,        // lanes: steps x channels per unit
  KB = 4,                   // taps per register block
  PF = 16,                  // runs: steps per prefetch of the next unit's rows
  KG = 16,                  // backward: taps per g window
  GW = TILE + KG,           // runs: longest g window
  LANES = 16,               // partial sums of a dot product
  TASK_ELEMS = 4096,        // elements per task: forward units, backward runs blocks
  GROUPS = 64,              // backward: at most, of about TILE (runs) or LANES_GROUP_STEPS steps
  LANES_GROUP_STEPS = 16 * NT,
  REDUCE_ROWS = 64,
};

// x, y, dy or dx as rows: of L steps (runs), of D channels (lanes).
typedef struct conv_rows {
  const gk_tensor *t;
  void *flat;                    // t's data when contiguous in the accumulator type, else NULL
  const uint16_t *half;          // t's data when contiguous bf16 or f16, else NULL
  const char *mem;               // t's data when contiguous (any dtype; for prefetches), else NULL
  int64_t es, numel;             // bytes per element, elements
} conv_rows;

typedef struct conv_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  gk_conv_dims s;
  bool cl, silu;
  bool lanes16;                  // channel-last bf16, x and y / x, dy and dx contiguous
  conv_rows x, y, dy, dx;
  int64_t row_len;               // L (runs) or D (lanes)
  int64_t ntiles;                // tiles per sequence: ceil(L / (TILE or NT)), 1 when L = 0
  int64_t block, nblocks;        // channels per block: DB (lanes), a few (runs, backward)
  int64_t units, units_per_task; // forward
  int64_t groups, per_group;     // backward: groups of the B * ntiles (b, tile) items
  void *wt, *bias, *wtmp;        // workspace: wt (W, D), bias (D), weight as loaded (D, W)
  void *partials;                // backward: [groups][W + 1][D] dweight | dbias sums
} conv_job;

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }
static size_t acc_size(const conv_job *j) { return j->plan->desc.dtype == GK_F64 ? sizeof(double) : sizeof(float); }
static size_t wt_bytes(const conv_job *j) { return align64((size_t)(j->s.W * j->s.D) * acc_size(j)); }
static size_t bias_bytes(const conv_job *j) { return align64((size_t)j->s.D * acc_size(j)); }

// t as rows; flat when it is contiguous f32 or f64 (its plan's accumulator
// type), half when it is contiguous bf16 or f16 (which the f32 loops widen
// and narrow by row, without a view per row).
static conv_rows rows_of(const gk_tensor *t) {
  conv_rows r = {t, NULL, NULL, NULL, 0, 0};
  if (!t || !gk_tensor_is_contiguous(t)) return r;
  r.mem = t->data;
  r.es = (int64_t)gk_elem_size(t->dtype);
  r.numel = gk_tensor_numel(t);
  if (t->dtype == GK_F32 || t->dtype == GK_F64) r.flat = t->data;
  if (t->dtype == GK_BF16 || t->dtype == GK_F16) r.half = t->data;
  return r;
}

// The line over channels of a (B, D, W-1) state at (b, :, p).
static gk_tensor state_line(const gk_tensor *st, int64_t b, int64_t p) {
  gk_tensor v = *st;
  v.rank = 1;
  v.shape[0] = st->shape[1];
  v.strides[0] = st->strides[1];
  v.data = (char *)st->data + (b * st->strides[0] + p * st->strides[2]) * (int64_t)gk_elem_size(st->dtype);
  return v;
}

static conv_job job_of(const gk_plan *plan, const gk_tensor *const *a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  conv_job j;
  memset(&j, 0, sizeof j);
  j.plan = plan;
  j.a = a;
  j.s = gk_conv_dims_of(d);
  j.cl = d->conv.channel_last;
  j.silu = d->conv.silu;
  int64_t B = j.s.B, D = j.s.D, L = j.s.L, tl = j.cl ? NT : TILE, steps = gk_min64(tl, L > 0 ? L : 1);
  j.row_len = j.cl ? D : L;
  j.ntiles = L > 0 ? gk_ceil_div(L, tl) : 1;
  int64_t by_work = B * L / (j.cl ? LANES_GROUP_STEPS : TILE);
  // At least one group of at least one item, even with B = 0 (no items:
  // the group's partial sums stay 0), so that no division is by zero.
  int64_t items = B * j.ntiles > 0 ? B * j.ntiles : 1;
  j.groups = gk_min64(gk_min64(items, GROUPS), by_work > 1 ? by_work : 1);
  j.per_group = gk_ceil_div(items, j.groups);
  // forward: units of one block and tile; backward: tasks of one group and block
  int64_t unit = gk_min64(j.cl ? DB : 1, D) * steps;
  j.units_per_task = unit > 0 && unit < TASK_ELEMS ? TASK_ELEMS / unit : 1;
  j.block = j.cl ? DB : gk_min64(d->direction == GK_BACKWARD ? gk_ceil_div(TASK_ELEMS, j.per_group * steps) : 1, D);
  j.nblocks = D > 0 ? gk_ceil_div(D, j.block) : 0;
  j.units = B * j.nblocks * j.ntiles;
  if (a) {
    j.x = rows_of(a[GK_ARG_X]);
    j.y = rows_of(a[GK_ARG_Y]);
    j.dy = rows_of(a[GK_ARG_DY]);
    j.dx = rows_of(a[GK_ARG_DX]);
    bool outs = d->direction == GK_FORWARD ? j.y.half != NULL : j.dy.half && j.dx.half;
    j.lanes16 = j.cl && d->dtype == GK_BF16 && j.x.half && outs;
  }
  if (ws) {
    char *p = ws;
    j.wt = p;
    j.bias = p + wt_bytes(&j);
    j.wtmp = (char *)j.bias + bias_bytes(&j);
    j.partials = (char *)j.wtmp + wt_bytes(&j);
  }
  return j;
}

static size_t workspace_of(const gk_plan *plan, bool bwd) {
  conv_job j = job_of(plan, NULL, NULL);
  size_t parts = bwd ? (size_t)(j.groups * (j.s.W + 1) * j.s.D) * acc_size(&j) : 0;
  return 2 * wt_bytes(&j) + bias_bytes(&j) + parts;
}

// HALF_ROWS: the instance reads and writes contiguous 16-bit rows through
// conv_rows.half (f32 accumulators only).
#define REAL float
#define SFX f32
#define HALF_ROWS 1
#include "conv1d_body.h"
#undef REAL
#undef SFX
#undef HALF_ROWS
#define REAL double
#define SFX f64
#define HALF_ROWS 0
#include "conv1d_body.h"
#undef REAL
#undef SFX
#undef HALF_ROWS

static bool is_f64(const conv_job *j) { return j->plan->desc.dtype == GK_F64; }

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_fwd_task_f64(ctx, t);
  else conv_fwd_task_f32(ctx, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t task), (ctx, task))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  if (is_f64(ctx)) conv_bwd_task_f64(ctx, t);
  else conv_bwd_task_f32(ctx, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t task), (ctx, task))

// wt[k][d] = weight[d][k], bias (zeros without one), as REAL.
#define GK_DEFINE_PREP(T, S)                                                         \
  static void prep_##S(const conv_job *j) {                                          \
    int64_t D = j->s.D, W = j->s.W;                                                  \
    const T *w = gk_chunk_in_##S(j->a[GK_ARG_WEIGHT], 0, D * W, j->wtmp);            \
    T *wt = j->wt, *bias = j->bias;                                                  \
    for (int64_t d = 0; d < D; d++)                                                  \
      for (int64_t k = 0; k < W; k++) wt[k * D + d] = w[d * W + k];                  \
    if (j->a[GK_ARG_BIAS]) gk_load_##S(j->a[GK_ARG_BIAS], 0, D, bias);               \
    else                                                                             \
      for (int64_t d = 0; d < D; d++) bias[d] = 0;                                   \
  }
GK_DEFINE_PREP(float, f32)
GK_DEFINE_PREP(double, f64)

static void prep(const conv_job *j) {
  if (is_f64(j)) prep_f64(j);
  else prep_f32(j);
}

// Pass 3: task = REDUCE_ROWS channels: dweight, dbias = sum of the group
// partials in group order (+ the old values with accumulate).
#define GK_DEFINE_REDUCE(T, S)                                                       \
  static void reduce_task_##S(const conv_job *j, int64_t task) {                     \
    int64_t W = j->s.W, D = j->s.D, d1 = gk_min64(D, (task + 1) * REDUCE_ROWS);     \
    const gk_tensor *dw = j->a[GK_ARG_DWEIGHT], *db = j->a[GK_ARG_DBIAS];            \
    bool accumulate = j->plan->desc.accumulate;                                      \
    for (int64_t d = task * REDUCE_ROWS; d < d1; d++)                                \
      for (int64_t k = 0; k <= W; k++) {                                             \
        T sum = 0;                                                                   \
        for (int64_t grp = 0; grp < j->groups; grp++)                                \
          sum += ((const T *)j->partials)[(grp * (W + 1) + k) * D + d];              \
        if (k < W) gk_set(dw, d * W + k, sum + (accumulate ? (T)gk_get(dw, d * W + k) : 0)); \
        else if (db) gk_set(db, d, sum + (accumulate ? (T)gk_get(db, d) : 0));       \
      }                                                                              \
  }
GK_DEFINE_REDUCE(float, f32)
GK_DEFINE_REDUCE(double, f64)

static void reduce_task(void *ctx, int64_t t) {
  if (is_f64(ctx)) reduce_task_f64(ctx, t);
  else reduce_task_f32(ctx, t);
}

static gk_status cpu_conv1d_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  conv_job j = job_of(plan, a, ws);
  prep(&j);
  gk_parallel_for(gk_ceil_div(j.units, j.units_per_task), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_conv1d_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  conv_job j = job_of(plan, a, ws);
  prep(&j);
  gk_parallel_for(j.groups * j.nblocks, bwd_task, &j);
  gk_parallel_for(gk_ceil_div(j.s.D, REDUCE_ROWS), reduce_task, &j);
  return GK_SUCCESS;
}

static size_t cpu_conv1d_fwd_workspace(const gk_plan *plan) { return workspace_of(plan, false); }
static size_t cpu_conv1d_bwd_workspace(const gk_plan *plan) { return workspace_of(plan, true); }

const gk_kernel gk_cpu_conv1d_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_conv1d_fwd_workspace,
                                     .run = cpu_conv1d_fwd};
const gk_kernel gk_cpu_conv1d_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_conv1d_bwd_workspace,
                                     .run = cpu_conv1d_bwd};
