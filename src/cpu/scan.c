// Threaded CPU kernels for the selective scan (math as in src/ref/scan.c),
// f32 math and state (f64 for f64).
//
// Lanes. The kernels run W = 16 channels at once, one per lane (plain loops
// over W lanes, vectorised in each instruction-set copy: one AVX-512
// register of f32, two AVX2 ones): a channel block is up to W consecutive
// channels of one batch, and the scan goes state by
// state (n) and step by step over a block, so every step is a few
// elementwise vector operations with no sums across lanes:
//   a_t = e^(dt_t A[., n]);  h = a_t h + (dt_t u_t) B_t[n];  y'_t += C_t[n] h
// (per-batch B and C are the same for the block's lanes: one broadcast value
// per step). u, delta, z, dy and the outputs are moved between their (B, D,
// L) rows and [step][lane] tiles once per chunk (16 x 16 transposes; a copy
// per step when the channels lie one apart, as in (B, L, D) memory).
// Per-batch dB/dC, sums over the channels, are the one sum across lanes:
// added up per chunk and state (add_lane_sums). Lanes past the block's last
// channel run on zeros (A = 0, dt = 0: a = 1, h stays 0) and are never stored.
// The exponential is 2^(dt_t A log2 e) by a polynomial (see exp2_f32); f64
// uses libm's exp lane by lane. The task functions are compiled per
// instruction set (GK_ISA_VARIANTS), and the step loops they call per
// instruction set and case (scan_body.h), with FMA contraction on (src/cpu is
// built with -ffp-contract=fast): each level gives its own bits, the same
// for every thread count.
//
// Work grid. Tasks are (b-part, channel part, range): a b-part is PER_B
// consecutive batches, a channel part PER_D consecutive channels of one
// group (of B/C; one group when B and C are shared; PER_D a multiple of W
// when above W), a range CPR consecutive chunks of chunk_size steps. The grid
// is chosen from the sizes alone (never from the thread count), so every
// thread count gives the same bits:
//   - enough (batch, channel) parts for ~TARGET tasks, else the sequence is
//     cut into S > 1 ranges and scanned in two levels:
//       forward:  level 1 runs each range but the last from a zero state:
//                 its end state E_r and the product P_r of its decays
//                 exp(dt A); level 2 walks the ranges in order per (b, d, n):
//                 start_0 = h0, start_{r+1} = P_r start_r + E_r; level 3
//                 reruns each range from its start, writing y, the chunk
//                 states and the final state.
//       backward: level 1 runs each range but the first backwards from a zero
//                 state gradient (R_r, and the product P_r); level 2 walks
//                 them backwards: carry_{S-1} = dfinal_state or 0,
//                 carry_{r-1} = P_r carry_r + R_r; level 3 reruns each range
//                 backwards from its carry.
//   - within a task (level 3): block by block, chunk by chunk (backward:
//     last first; the block's next chunk of rows is prefetched), state by
//     state; backward recomputes a chunk's states of one n from its saved
//     chunk state, then walks them back. Level 1 goes chunk by chunk, block
//     by block.
// States and carries live in the workspace as [N][W] lanes per (batch,
// range, part, block). Deterministic sums: dA, dD, ddelta_bias and shared
// dB/dC get one partial per (b-part, range) slot, per-batch dB/dC one partial
// per channel part (the lanes of a block summed in a fixed pairwise order,
// blocks in order); both are then added slot by slot (part by part) in order.
#include "../core/act_math.h"
#include "../core/convert.h"
#include "../ops/scan.h"

#include <math.h>
#include <string.h>

// scan_body.h is included once per type REAL (float, double) with
// suffix SFX (f32, f64): FN(name) is name_SFX.
#define GK_CAT2(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define FN(name) GK_CAT(name, SFX)
#define BODY(name) GK_CAT(FN(name), body)  // the body of a task compiled per instruction set
// GK_ISA_VARIANTS pastes its name: FN() is expanded first.
#define ISA_VARIANTS(name, params, args) GK_ISA_VARIANTS(name, params, args)

// W: lanes (channels) per block; TMAX: the largest chunk_size.
enum { W = 16, TMAX = 128, TARGET = 64, ROWS_PER_TASK = 64, TILE = 1024 };
static const int64_t MEMCAP = (int64_t)1 << 24;  // elements of partials / level buffers

typedef struct scan_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  gk_scan_dims s;
  gk_tensor Bv, Cv, dBv, dCv;   // (B, G, N, L) views, or (D, N) when shared
  int64_t Gt, Dg;               // channel groups of the grid, channels per group
  int64_t Pb, per_b, Pd, per_d, Pc, S, cpr;
  int64_t MB;                   // blocks per channel part: ceil(per_d / W)
  int64_t K;                    // partial values per channel: dA (N), shared dB (N), shared dC (N), dD, ddelta_bias
  int64_t off_dB, off_dC, off_dD, off_ddb;
  void *run;                    // [B][S][Pc][MB][N][W]: state / carry per range
  void *prod;                   // the same shape: products of decays (S > 1)
  void *params;                 // [Pb S][D][K]
  void *varB, *varC;            // [Pc][B][N][L]: per-batch dB / dC partials
} scan_job;

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }
static int64_t min3(int64_t a, int64_t b, int64_t c) { return gk_min64(a, gk_min64(b, c)); }

// The grid and the workspace layout for a description (sizes only).
static scan_job job_of(const gk_plan *plan) {
  scan_job j;
  memset(&j, 0, sizeof j);
  j.plan = plan;
  gk_scan_dims s = j.s = gk_scan_dims_of(&plan->desc);
  bool var = s.var_b || s.var_c;
  j.Gt = s.var_b ? s.Gb : s.var_c ? s.Gc : 1;  // describe() makes them equal when both vary
  j.Dg = max1(s.D / j.Gt);
  j.off_dB = s.N;
  j.off_dC = j.off_dB + (s.var_b ? 0 : s.N);
  j.off_dD = j.off_dC + (s.var_c ? 0 : s.N);
  j.off_ddb = j.off_dD + 1;
  j.K = j.off_ddb + 1;
  int64_t var_elems = max1((s.var_b + s.var_c) * s.B * s.N * s.L);
  int64_t slots_max = max1(MEMCAP / max1(s.D * j.K));
  if (var) {  // per-batch dB/dC partials cost a copy per channel part: batches first
    j.Pb = min3(max1(s.B), TARGET, slots_max);
    j.Pd = min3(j.Dg, max1(gk_ceil_div(gk_ceil_div(TARGET, j.Pb), j.Gt)), max1(MEMCAP / var_elems));
  } else {    // channel parts are free: as many as whole blocks allow, then batches
    j.Pd = min3(j.Dg, max1(TARGET / j.Gt), gk_ceil_div(j.Dg, W));
    j.Pb = min3(max1(s.B), max1(gk_ceil_div(TARGET, j.Gt * j.Pd)), slots_max);
  }
  j.Pd = gk_min64(j.Pd, gk_ceil_div(j.Dg, W));  // whole blocks where there are enough channels
  j.per_d = gk_ceil_div(j.Dg, j.Pd);
  if (j.per_d > W) j.per_d = gk_ceil_div(j.per_d, W) * W;
  j.Pd = gk_ceil_div(j.Dg, j.per_d);
  j.MB = gk_ceil_div(j.per_d, W);
  j.per_b = gk_ceil_div(max1(s.B), j.Pb);
  j.Pb = gk_ceil_div(max1(s.B), j.per_b);
  j.Pc = j.Gt * j.Pd;
  j.S = min3(max1(s.nchunks), max1(gk_ceil_div(TARGET, j.Pb * j.Pc)), max1(slots_max / j.Pb));
  j.S = gk_min64(j.S, max1(MEMCAP / max1(s.B * j.Pc * j.MB * W * s.N)));
  j.cpr = gk_ceil_div(s.nchunks, j.S);
  j.S = j.cpr ? gk_ceil_div(s.nchunks, j.cpr) : 1;
  return j;
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }
static void *at(char *base, size_t off) { return base ? base + off : NULL; }

// Workspace: run, prod (S > 1), then for backward the param and per-batch
// partials. With base NULL, only the size.
static size_t layout(scan_job *j, char *base) {
  const gk_scan_dims *s = &j->s;
  size_t es = j->plan->desc.dtype == GK_F64 ? sizeof(double) : sizeof(float), off = 0;
  size_t states = (size_t)(s->B * j->S * j->Pc * j->MB * s->N * W) * es;
  j->run = at(base, off);
  off += align64(states);
  j->prod = at(base, off);
  if (j->S > 1) off += align64(states);
  if (j->plan->desc.direction == GK_BACKWARD) {
    j->params = at(base, off);
    off += align64((size_t)(j->Pb * j->S * s->D * j->K) * es);
    size_t var = (size_t)(j->Pc * s->B * s->N * s->L) * es;
    j->varB = at(base, off);
    if (s->var_b) off += align64(var);
    j->varC = at(base, off);
    if (s->var_c) off += align64(var);
  }
  return off;
}

static size_t cpu_scan_workspace(const gk_plan *plan) {
  scan_job j = job_of(plan);
  return layout(&j, NULL);
}

// Channels [*d0, *d1) of part p.
static void part_channels(const scan_job *j, int64_t p, int64_t *d0, int64_t *d1) {
  int64_t g = p / j->Pd, q = p % j->Pd;
  *d0 = g * j->Dg + q * j->per_d;
  *d1 = gk_min64(gk_min64(g * j->Dg + j->Dg, *d0 + j->per_d), j->s.D);
}

// Task -> batches [b0, b1), channels [d0, d1) (blocks of W from d0), chunks
// [c0, c1), channel part p, range r, slot.
typedef struct task_range {
  int64_t b0, b1, d0, d1, c0, c1, p, r, slot;
} task_range;

static task_range range_of(const scan_job *j, int64_t task) {
  task_range t;
  t.r = task % j->S;
  t.p = task / j->S % j->Pc;
  int64_t pb = task / j->S / j->Pc;
  t.b0 = pb * j->per_b;
  t.b1 = gk_min64(j->s.B, t.b0 + j->per_b);
  t.c0 = t.r * j->cpr;
  t.c1 = gk_min64(j->s.nchunks, t.c0 + j->cpr);
  t.slot = pb * j->S + t.r;
  part_channels(j, t.p, &t.d0, &t.d1);
  return t;
}

static int64_t grid_tasks(const scan_job *j) { return j->Pb * j->Pc * j->S; }

// Element offsets of t at index (i0, i1) and (i0, i1, i2) of its leading dims.
static inline int64_t at2(const gk_tensor *t, int64_t i0, int64_t i1) {
  return i0 * t->strides[0] + i1 * t->strides[1];
}

static inline int64_t at3(const gk_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
  return at2(t, i0, i1) + i2 * t->strides[2];
}
// 2^y in f32 for |y| <= 126, with no call and no branch (loops over it
// vectorise): the low bits of y + (1.5 2^23 + 127) hold k + 127 for k =
// round(y), the exponent field of 2^k; f = y - k in [-1/2, 1/2], 2^f by a
// degree-6 polynomial (fitted for relative error: under 1e-8 before f32
// rounding, under 1 ulp in all). NaN stays NaN. The scan's decays e^(dt A)
// are 2^(dt (A log2 e)); blocks whose |dt A log2 e| may pass 126 use
// exp2_wide_f32.
GK_INLINE float exp2_f32(float y) {
  float kf = y + 12583039.0f;
  uint32_t e = gk_f32_bits(kf) << 23;
  kf -= 12583039.0f;
  float f = y - kf;
  float p = f * 1.5394334332e-4f + 1.3388522202e-3f;
  p = p * f + 9.6182115376e-3f;
  p = p * f + 5.5503584445e-2f;
  p = p * f + 2.4022650719e-1f;
  p = p * f + 6.9314718246e-1f;
  p = p * f + 1.0f;
  return p * gk_bits_f32(e);
}

// 2^y for any y: clamped to [-127, 128] first, so 0 below -126.5 (values
// under 2^-126 flushed) and inf from 127.5 (a little early: 2^y overflows
// at 128). NaN stays NaN.
GK_INLINE float exp2_wide_f32(float y) {
  y = y < -127.0f ? -127.0f : y;
  return exp2_f32(y > 128.0f ? 128.0f : y);
}

#define REAL float
#define REAL_DT GK_F32
#define SFX f32
#define EXP_SCALE 1.44269504088896341f  // exponents are taken in base 2
#define EXP2 exp2_f32
#define EXP2_WIDE exp2_wide_f32
#define EXP_SAFE 126.0f  // |dt A EXP_SCALE| up to which EXP2 holds
#define SOFTPLUS(x) gk_softplus_f32(x, 1, 20)
#define DSOFTPLUS(x) gk_dsoftplus_f32(x, 1, 20)
#define SILU gk_silu_f32
#define DSILU gk_dsilu_f32
#include "scan_body.h"
#define REAL double
#define REAL_DT GK_F64
#define SFX f64
#define EXP_SCALE 1.0
#define EXP2 exp
#define EXP2_WIDE exp
#define EXP_SAFE INFINITY
#define SOFTPLUS(x) gk_softplus_f64(x, 1, 20)
#define DSOFTPLUS(x) gk_dsoftplus_f64(x, 1, 20)
#define SILU gk_silu_f64
#define DSILU gk_dsilu_f64
#include "scan_body.h"

static bool is_f64(const scan_job *j) { return j->plan->desc.dtype == GK_F64; }

#define DISPATCH(name)                                   \
  static void name(void *ctx, int64_t t) {               \
    if (is_f64(ctx)) GK_CAT(name, f64)(ctx, t);          \
    else GK_CAT(name, f32)(ctx, t);                      \
  }
DISPATCH(fwd_level1)
DISPATCH(fwd_level2)
DISPATCH(fwd_task)
DISPATCH(bwd_level1)
DISPATCH(bwd_level2)
DISPATCH(bwd_task)
DISPATCH(reduce_params)
DISPATCH(reduce_var)

static gk_status cpu_scan_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  scan_job j = job_of(plan);
  j.a = a;
  layout(&j, ws);
  j.Bv = gk_scan_bc_view(a[GK_ARG_B], plan->desc.scan.b_layout);
  j.Cv = gk_scan_bc_view(a[GK_ARG_C], plan->desc.scan.c_layout);
  if (j.S > 1) {
    gk_parallel_for(grid_tasks(&j), fwd_level1, &j);
    gk_parallel_for(j.s.B * j.Pc, fwd_level2, &j);
  }
  gk_parallel_for(grid_tasks(&j), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_scan_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  scan_job j = job_of(plan);
  j.a = a;
  layout(&j, ws);
  j.Bv = gk_scan_bc_view(a[GK_ARG_B], plan->desc.scan.b_layout);
  j.Cv = gk_scan_bc_view(a[GK_ARG_C], plan->desc.scan.c_layout);
  j.dBv = gk_scan_bc_view(a[GK_ARG_DB], plan->desc.scan.b_layout);
  j.dCv = gk_scan_bc_view(a[GK_ARG_DC], plan->desc.scan.c_layout);
  if (j.S > 1) {
    gk_parallel_for(grid_tasks(&j), bwd_level1, &j);
    gk_parallel_for(j.s.B * j.Pc, bwd_level2, &j);
  }
  gk_parallel_for(grid_tasks(&j), bwd_task, &j);
  gk_parallel_for(gk_ceil_div(j.s.D, ROWS_PER_TASK), reduce_params, &j);
  int64_t var_rows = (j.s.var_b + j.s.var_c) * j.s.B * j.Gt * j.s.N;
  gk_parallel_for(gk_ceil_div(var_rows, ROWS_PER_TASK), reduce_var, &j);
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_scan_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_scan_workspace,
                                   .run = cpu_scan_fwd};
const gk_kernel gk_cpu_scan_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_scan_workspace,
                                   .run = cpu_scan_bwd};
