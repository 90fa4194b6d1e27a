// Threaded CPU kernels for add and mul with broadcasting (math as in
// src/ref/binary.c), f32 math (f64 for f64).
// Forward: the operands as broadcast views of y's shape (stride 0 along
// broadcast dims), tasks of TASK_ELEMS elements of y. When a, b and y are
// contiguous in the compute dtype (f32, or f64 for f64), nothing broadcast,
// a task computes its range in one loop, in place; when they are all
// contiguous bf16 (or all f16) the loop widens each element to f32 in a
// register and narrows the result (round to nearest even) as it stores it;
// otherwise the task walks its range in chunks of CHUNK elements, converted
// through stack buffers where a tensor is not contiguous f32 (the same bits).
// Backward, when nothing is broadcast (a, b and y hold the same elements):
// one pass over tasks of TASK_ELEMS elements writes both gradients,
//   add: da = dy, db = dy alpha;  mul: da = dy b alpha, db = dy a alpha,
// in place or in chunks as the forward.
// Otherwise, for each operand x: y's dims split into x's own dims ("kept")
// and the dims x was broadcast along ("reduced", R index combinations);
// tasks of CHUNK elements of dx each add, for r = 0 .. R-1 in order, the
// chunk of dy (times the other operand, for mul) at reduced index r, then
// scale and store: every dx element is one sum in a fixed order.
// Hot loops are compiled per ISA level (isa.h).
#include "../core/convert.h"
#include "../ops/transformer.h"

#include <string.h>

enum { CHUNK = 512, TASK_ELEMS = 32768 };

typedef struct bin_job {
  const gk_op_desc *d;
  gk_tensor a, b, y;            // forward: broadcast views of a, b; y
  int64_t n;
  // backward with nothing broadcast: dy and both gradients
  const gk_tensor *dy, *da, *db;
  // backward, one operand at a time:
  gk_tensor dy_kept, dy_red;    // dy over x's dims; dy over the reduced dims (for offsets)
  gk_tensor o_kept, o_red;      // the other operand, broadcast, split the same way (mul)
  const gk_tensor *dx;
  int64_t e, r;                 // elements of dx, reduced combinations
  double coef;
  bool mul;
  // forward and backward with nothing broadcast: how the elements are reached
  bool direct;                  // every tensor contiguous in the compute dtype
  gk_dtype half16;              // GK_BF16 or GK_F16 when every tensor is contiguous in it, else GK_F32
} bin_job;

// The loops, on elements of type E widened to T by LD and narrowed by ST
// (identities for f32 and f64), named by SFX.
#define GK_DEFINE_BINARY_LOOPS(T, SFX, E, LD, ST)                                           \
  GK_INLINE void fwd_loop_##SFX(const E *x, const E *z, E *o, int64_t m, T alpha, bool add) { \
    if (add)                                                                                  \
      for (int64_t i = 0; i < m; i++) o[i] = ST(LD(x[i]) + alpha * LD(z[i]));                 \
    else                                                                                      \
      for (int64_t i = 0; i < m; i++) o[i] = ST(alpha * LD(x[i]) * LD(z[i]));                 \
  }                                                                                           \
  /* both gradients, nothing broadcast (a, b unused for add) */                              \
  GK_INLINE void bwd_same_loop_##SFX(const E *restrict g, const E *restrict a, const E *restrict b, \
                                     E *restrict da, E *restrict db, int64_t m, T alpha, bool mul) { \
    if (mul)                                                                                  \
      for (int64_t i = 0; i < m; i++) {                                                       \
        da[i] = ST(LD(g[i]) * LD(b[i]) * alpha);                                              \
        db[i] = ST(LD(g[i]) * LD(a[i]) * alpha);                                              \
      }                                                                                       \
    else                                                                                      \
      for (int64_t i = 0; i < m; i++) {                                                       \
        da[i] = ST(LD(g[i]));                                                                 \
        db[i] = ST(LD(g[i]) * alpha);                                                         \
      }                                                                                       \
  }
#define BIN_SAME(x) (x)
GK_DEFINE_BINARY_LOOPS(float, f32, float, BIN_SAME, BIN_SAME)
GK_DEFINE_BINARY_LOOPS(double, f64, double, BIN_SAME, BIN_SAME)
GK_DEFINE_BINARY_LOOPS(float, bf16, uint16_t, gk_bf16_to_f32_inline, gk_f32_to_bf16_inline)
GK_DEFINE_BINARY_LOOPS(float, f16, uint16_t, gk_f16_to_f32_inline, gk_f32_to_f16_inline)

#define GK_DEFINE_BINARY(T, S)                                                               \
  GK_INLINE void fwd_task_##S(const bin_job *j, int64_t task) {                               \
    T ab[CHUNK], bb[CHUNK], yb[CHUNK], alpha = (T)j->d->binary.alpha;                         \
    bool add = j->d->op == GK_OP_ADD;                                                         \
    int64_t start = task * TASK_ELEMS, end = gk_min64(j->n, start + TASK_ELEMS);              \
    if (j->direct) {                                                                          \
      fwd_loop_##S((const T *)j->a.data + start, (const T *)j->b.data + start, (T *)j->y.data + start, \
                   end - start, alpha, add);                                                  \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t s = start; s < end; s += CHUNK) {                                            \
      int64_t m = gk_min64(CHUNK, end - s);                                                   \
      const T *x = gk_chunk_in_##S(&j->a, s, m, ab), *z = gk_chunk_in_##S(&j->b, s, m, bb);   \
      T *o = gk_chunk_out_##S(&j->y, s, yb);                                                  \
      fwd_loop_##S(x, z, o, m, alpha, add);                                                   \
      gk_chunk_commit_##S(&j->y, s, m, o, yb);                                                \
    }                                                                                         \
  }                                                                                           \
  GK_INLINE void bwd_same_task_##S(const bin_job *j, int64_t task) {                          \
    T gb[CHUNK], ab[CHUNK], bb[CHUNK], dab[CHUNK], dbb[CHUNK], alpha = (T)j->d->binary.alpha; \
    int64_t start = task * TASK_ELEMS, end = gk_min64(j->n, start + TASK_ELEMS);              \
    if (j->direct) {                                                                          \
      const T *a = j->mul ? (const T *)j->a.data + start : NULL;                              \
      const T *b = j->mul ? (const T *)j->b.data + start : NULL;                              \
      bwd_same_loop_##S((const T *)j->dy->data + start, a, b, (T *)j->da->data + start,        \
                        (T *)j->db->data + start, end - start, alpha, j->mul);                \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t s = start; s < end; s += CHUNK) {                                            \
      int64_t m = gk_min64(CHUNK, end - s);                                                   \
      const T *g = gk_chunk_in_##S(j->dy, s, m, gb), *a = NULL, *b = NULL;                    \
      if (j->mul) {                                                                           \
        a = gk_chunk_in_##S(&j->a, s, m, ab);                                                 \
        b = gk_chunk_in_##S(&j->b, s, m, bb);                                                 \
      }                                                                                       \
      T *da = gk_chunk_out_##S(j->da, s, dab), *db = gk_chunk_out_##S(j->db, s, dbb);         \
      bwd_same_loop_##S(g, a, b, da, db, m, alpha, j->mul);                                   \
      gk_chunk_commit_##S(j->da, s, m, da, dab);                                              \
      gk_chunk_commit_##S(j->db, s, m, db, dbb);                                              \
    }                                                                                         \
  }                                                                                           \
  GK_INLINE void bwd_task_##S(const bin_job *j, int64_t task) {                               \
    T acc[CHUNK], gb[CHUNK], ob[CHUNK];                                                       \
    int64_t e0 = task * CHUNK, m = gk_min64(CHUNK, j->e - e0);                                \
    size_t es = gk_dtype_size(j->dy_kept.dtype);                                              \
    for (int64_t i = 0; i < m; i++) acc[i] = 0;                                               \
    for (int64_t r = 0; r < j->r; r++) {                                                      \
      gk_tensor g = j->dy_kept;                                                               \
      g.data = (char *)g.data + gk_tensor_offset(&j->dy_red, r) * (int64_t)es;                \
      const T *gp = gk_chunk_in_##S(&g, e0, m, gb);                                           \
      if (j->mul) {                                                                           \
        gk_tensor o = j->o_kept;                                                              \
        o.data = (char *)o.data + gk_tensor_offset(&j->o_red, r) * (int64_t)es;               \
        const T *op = gk_chunk_in_##S(&o, e0, m, ob);                                         \
        for (int64_t i = 0; i < m; i++) acc[i] += gp[i] * op[i];                              \
      } else                                                                                  \
        for (int64_t i = 0; i < m; i++) acc[i] += gp[i];                                      \
    }                                                                                         \
    T coef = (T)j->coef;                                                                      \
    for (int64_t i = 0; i < m; i++) acc[i] *= coef;                                           \
    gk_store_##S(j->dx, e0, m, acc);                                                          \
  }

GK_DEFINE_BINARY(float, f32)
GK_DEFINE_BINARY(double, f64)

// Every tensor contiguous bf16 (f16): the task's range in one loop, converted in registers.
GK_INLINE void fwd_task_16(const bin_job *j, int64_t task) {
  float alpha = (float)j->d->binary.alpha;
  bool add = j->d->op == GK_OP_ADD;
  int64_t start = task * TASK_ELEMS, m = gk_min64(j->n, start + TASK_ELEMS) - start;
  const uint16_t *x = (const uint16_t *)j->a.data + start, *z = (const uint16_t *)j->b.data + start;
  uint16_t *o = (uint16_t *)j->y.data + start;
  if (j->half16 == GK_BF16) fwd_loop_bf16(x, z, o, m, alpha, add);
  else fwd_loop_f16(x, z, o, m, alpha, add);
}

GK_INLINE void bwd_same_task_16(const bin_job *j, int64_t task) {
  float alpha = (float)j->d->binary.alpha;
  int64_t start = task * TASK_ELEMS, m = gk_min64(j->n, start + TASK_ELEMS) - start;
  const uint16_t *g = (const uint16_t *)j->dy->data + start;
  const uint16_t *a = j->mul ? (const uint16_t *)j->a.data + start : NULL;
  const uint16_t *b = j->mul ? (const uint16_t *)j->b.data + start : NULL;
  uint16_t *da = (uint16_t *)j->da->data + start, *db = (uint16_t *)j->db->data + start;
  if (j->half16 == GK_BF16) bwd_same_loop_bf16(g, a, b, da, db, m, alpha, j->mul);
  else bwd_same_loop_f16(g, a, b, da, db, m, alpha, j->mul);
}

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->half16 != GK_F32) fwd_task_16(j, t);
  else if (j->d->dtype == GK_F64) fwd_task_f64(j, t);
  else fwd_task_f32(j, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_same_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->half16 != GK_F32) bwd_same_task_16(j, t);
  else if (j->d->dtype == GK_F64) bwd_same_task_f64(j, t);
  else bwd_same_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_same_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->d->dtype == GK_F64) bwd_task_f64(j, t);
  else bwd_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t t), (ctx, t))

// How a job with nothing broadcast reaches its n tensors (views of one
// shape): in place when all are contiguous in the compute dtype, or all
// contiguous bf16 (f16); else through chunks.
static void choose_access(bin_job *j, const gk_tensor *const *ts, int n) {
  gk_dtype dt = j->d->dtype;
  bool contiguous = true;
  for (int k = 0; k < n; k++) contiguous = contiguous && ts[k]->dtype == dt && gk_tensor_is_contiguous(ts[k]);
  j->direct = contiguous && (dt == GK_F32 || dt == GK_F64);
  j->half16 = contiguous && (dt == GK_BF16 || dt == GK_F16) ? dt : GK_F32;
}

static gk_status cpu_binary_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  bin_job j;
  memset(&j, 0, sizeof j);
  j.d = &plan->desc;
  j.y = *a[GK_ARG_Y];
  j.a = gk_broadcast_view(a[GK_ARG_A], j.y.rank, j.y.shape);
  j.b = gk_broadcast_view(a[GK_ARG_B], j.y.rank, j.y.shape);
  j.n = gk_tensor_numel(&j.y);
  const gk_tensor *ts[3] = {&j.a, &j.b, &j.y};
  choose_access(&j, ts, 3);
  gk_parallel_for(gk_ceil_div(j.n, TASK_ELEMS), fwd_task, &j);
  return GK_SUCCESS;
}

// t (of dy's shape) split into the dims where x (aligned at the trailing
// end) has t's size, and the others: the dims x was broadcast along.
static void split_dims(const gk_tensor *t, const gk_tensor *x, gk_tensor *kept, gk_tensor *red) {
  *kept = *red = *t;
  kept->rank = red->rank = 0;
  int lead = t->rank - x->rank;
  for (int d = 0; d < t->rank; d++) {
    bool own = d >= lead && x->shape[d - lead] == t->shape[d];
    gk_tensor *v = own ? kept : red;
    v->shape[v->rank] = t->shape[d];
    v->strides[v->rank] = t->strides[d];
    v->rank++;
  }
}

static gk_status cpu_binary_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  const gk_tensor *dy = a[GK_ARG_DY];
  bool mul = d->op == GK_OP_MUL;
  int64_t n = gk_tensor_numel(dy);
  if (gk_tensor_numel(a[GK_ARG_DA]) == n && gk_tensor_numel(a[GK_ARG_DB]) == n) {
    // Shapes that broadcast and hold as many elements are equal but for
    // dims of size 1: the same row-major order, nothing to reduce.
    bin_job j;
    memset(&j, 0, sizeof j);
    j.d = d;
    j.mul = mul;
    j.n = n;
    j.dy = dy;
    j.da = a[GK_ARG_DA];
    j.db = a[GK_ARG_DB];
    const gk_tensor *ts[5] = {dy, j.da, j.db, &j.a, &j.b};
    if (mul) {
      j.a = *a[GK_ARG_A];
      j.b = *a[GK_ARG_B];
    }
    choose_access(&j, ts, mul ? 5 : 3);
    gk_parallel_for(gk_ceil_div(n, TASK_ELEMS), bwd_same_task, &j);
    return GK_SUCCESS;
  }
  for (int which = 0; which < 2; which++) {
    const gk_tensor *dx = a[which ? GK_ARG_DB : GK_ARG_DA];
    bin_job j;
    memset(&j, 0, sizeof j);
    j.d = d;
    j.dx = dx;
    j.mul = mul;
    j.coef = which || mul ? d->binary.alpha : 1.0;
    split_dims(dy, dx, &j.dy_kept, &j.dy_red);
    if (mul) {
      gk_tensor ob = gk_broadcast_view(a[which ? GK_ARG_A : GK_ARG_B], dy->rank, dy->shape);
      split_dims(&ob, dx, &j.o_kept, &j.o_red);
    }
    j.e = gk_tensor_numel(dx);
    j.r = gk_tensor_numel(&j.dy_red);
    gk_parallel_for(gk_ceil_div(j.e, CHUNK), bwd_task, &j);
  }
  return GK_SUCCESS;
}

const gk_kernel gk_cpu_binary_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_binary_fwd};
const gk_kernel gk_cpu_binary_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_binary_bwd};
