// Threaded CPU kernels for add and mul with broadcasting (math as in
// src/ref/binary.c), f32 math (f64 for f64).
// Forward: the operands as broadcast views of y's shape (stride 0 along
// broadcast dims), tasks of TASK_ELEMS elements of y in chunks of CHUNK.
// Backward, when nothing is broadcast (a, b and y hold the same elements):
// one pass over tasks of TASK_ELEMS elements writes both gradients,
//   add: da = dy, db = dy alpha;  mul: da = dy b alpha, db = dy a alpha.
// Otherwise, for each operand x: y's dims split into x's own dims ("kept")
// and the dims x was broadcast along ("reduced", R index combinations);
// tasks of CHUNK elements of dx each add, for r = 0 .. R-1 in order, the
// chunk of dy (times the other operand, for mul) at reduced index r, then
// scale and store: every dx element is one sum in a fixed order.
// Hot loops are compiled per ISA level (isa.h).
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
} bin_job;

#define GK_DEFINE_BINARY(T, S)                                                               \
  GK_INLINE void fwd_task_##S(const bin_job *j, int64_t task) {                               \
    T ab[CHUNK], bb[CHUNK], yb[CHUNK], alpha = (T)j->d->binary.alpha;                         \
    bool add = j->d->op == GK_OP_ADD;                                                         \
    int64_t end = gk_min64(j->n, (task + 1) * TASK_ELEMS);                                    \
    for (int64_t s = task * TASK_ELEMS; s < end; s += CHUNK) {                                \
      int64_t m = gk_min64(CHUNK, end - s);                                                   \
      const T *x = gk_chunk_in_##S(&j->a, s, m, ab), *z = gk_chunk_in_##S(&j->b, s, m, bb);   \
      T *o = gk_chunk_out_##S(&j->y, s, yb);                                                  \
      if (add)                                                                                \
        for (int64_t i = 0; i < m; i++) o[i] = x[i] + alpha * z[i];                           \
      else                                                                                    \
        for (int64_t i = 0; i < m; i++) o[i] = alpha * x[i] * z[i];                           \
      gk_chunk_commit_##S(&j->y, s, m, o, yb);                                                \
    }                                                                                         \
  }                                                                                           \
  /* one chunk of both gradients, nothing broadcast (a, b unused for add) */                 \
  GK_INLINE void bwd_same_chunk_##S(const T *restrict g, const T *restrict a, const T *restrict b, \
                                    T *restrict da, T *restrict db, int64_t m, T alpha, bool mul) { \
    if (mul)                                                                                  \
      for (int64_t i = 0; i < m; i++) {                                                       \
        da[i] = g[i] * b[i] * alpha;                                                          \
        db[i] = g[i] * a[i] * alpha;                                                          \
      }                                                                                       \
    else                                                                                      \
      for (int64_t i = 0; i < m; i++) {                                                       \
        da[i] = g[i];                                                                         \
        db[i] = g[i] * alpha;                                                                 \
      }                                                                                       \
  }                                                                                           \
  GK_INLINE void bwd_same_task_##S(const bin_job *j, int64_t task) {                          \
    T gb[CHUNK], ab[CHUNK], bb[CHUNK], dab[CHUNK], dbb[CHUNK], alpha = (T)j->d->binary.alpha; \
    int64_t end = gk_min64(j->n, (task + 1) * TASK_ELEMS);                                    \
    for (int64_t s = task * TASK_ELEMS; s < end; s += CHUNK) {                                \
      int64_t m = gk_min64(CHUNK, end - s);                                                   \
      const T *g = gk_chunk_in_##S(j->dy, s, m, gb), *a = NULL, *b = NULL;                    \
      if (j->mul) {                                                                           \
        a = gk_chunk_in_##S(&j->a, s, m, ab);                                                 \
        b = gk_chunk_in_##S(&j->b, s, m, bb);                                                 \
      }                                                                                       \
      T *da = gk_chunk_out_##S(j->da, s, dab), *db = gk_chunk_out_##S(j->db, s, dbb);         \
      bwd_same_chunk_##S(g, a, b, da, db, m, alpha, j->mul);                                  \
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

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->d->dtype == GK_F64) fwd_task_f64(j, t);
  else fwd_task_f32(j, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_same_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->d->dtype == GK_F64) bwd_same_task_f64(j, t);
  else bwd_same_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_same_task, (void *ctx, int64_t t), (ctx, t))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  const bin_job *j = ctx;
  if (j->d->dtype == GK_F64) bwd_task_f64(j, t);
  else bwd_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t t), (ctx, t))

static gk_status cpu_binary_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  bin_job j;
  memset(&j, 0, sizeof j);
  j.d = &plan->desc;
  j.y = *a[GK_ARG_Y];
  j.a = gk_broadcast_view(a[GK_ARG_A], j.y.rank, j.y.shape);
  j.b = gk_broadcast_view(a[GK_ARG_B], j.y.rank, j.y.shape);
  j.n = gk_tensor_numel(&j.y);
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
    if (mul) {
      j.a = *a[GK_ARG_A];
      j.b = *a[GK_ARG_B];
    }
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
