// Threaded CPU kernels for embedding (math as in src/ref/embedding.c), the
// loops compiled per ISA level. The indices are checked first (nothing is
// written if one is bad).
// Forward: tasks of runs of positions copy weight rows: byte for byte by
// memcpy when weight and y are contiguous (they share the dtype), else
// through f32 (f64 for f64) chunks. (Non-temporal stores were slower here:
// 8192 rows of 2048 f32, 4.5 ms against 2.9 by memcpy.)
// Backward: a counting sort of the positions by index (workspace: V + 1
// offsets and N positions, positions of each index in increasing order), then
// tasks of runs of vocabulary rows. Rows that no position reaches (and the
// padding row) are zeroed, a run of them at once when dweight is contiguous
// (left alone with accumulate); the others sum their positions' dy rows in
// order of position in chunks of CHUNK columns (f32, f64 for f64) and store
// each chunk once, so every thread count gives the same bits.
// A dweight of 16 MiB or more is written by non-temporal stores
// (stream_store.h).
#include "../ops/transformer.h"

#include "stream_store.h"

#include <string.h>

enum { CHUNK = 512, TASK_ELEMS = 32768 };

typedef struct emb_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  int64_t n, V, D, per_task;
  bool rows_flat;             // forward: weight and y contiguous
  bool stream;                // backward: dweight goes by non-temporal stores
  void *dy_flat, *dw_flat;    // backward: the data when contiguous in the accumulator type, else NULL
  bool dw_contiguous;
  const int64_t *off, *pos;   // backward: rows of index v are pos[off[v-1] .. off[v])
} emb_job;

#define GK_DEFINE_EMB(T, S)                                                                   \
  GK_INLINE void emb_fwd_task_##S(const emb_job *j, int64_t task) {                            \
    const gk_tensor *w = j->a[GK_ARG_WEIGHT], *y = j->a[GK_ARG_Y];                             \
    size_t row_bytes = (size_t)j->D * gk_elem_size(w->dtype);                                  \
    T buf[CHUNK], obuf[CHUNK];                                                                 \
    int64_t end = gk_min64(j->n, (task + 1) * j->per_task);                                    \
    for (int64_t p = task * j->per_task; p < end; p++) {                                       \
      int64_t v = gk_get_index(j->a[GK_ARG_INDEX], p);                                         \
      if (j->rows_flat) {                                                                      \
        memcpy((char *)y->data + p * row_bytes, (const char *)w->data + v * row_bytes, row_bytes); \
        continue;                                                                              \
      }                                                                                        \
      gk_tensor wr = gk_tensor_row(w, 1, v), yr = gk_tensor_row(y, 1, p);                      \
      for (int64_t c = 0; c < j->D; c += CHUNK) {                                              \
        int64_t len = gk_min64(CHUNK, j->D - c);                                               \
        const T *src = gk_chunk_in_##S(&wr, c, len, buf);                                      \
        T *o = gk_chunk_out_##S(&yr, c, obuf);                                                 \
        for (int64_t i = 0; i < len; i++) o[i] = src[i];                                       \
        gk_chunk_commit_##S(&yr, c, len, o, obuf);                                             \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  /* dweight rows [v0, v1), none reached: zeros (with =) */                                    \
  GK_INLINE void emb_zero_rows_##S(const emb_job *j, int64_t v0, int64_t v1) {                 \
    const gk_tensor *dw = j->a[GK_ARG_DWEIGHT];                                                \
    if (v1 <= v0 || j->plan->desc.accumulate) return;                                          \
    if (j->dw_contiguous) {                                                                    \
      size_t row_bytes = (size_t)j->D * gk_elem_size(dw->dtype);                               \
      gk_put_bytes((char *)dw->data + v0 * row_bytes, NULL, (size_t)(v1 - v0) * row_bytes, j->stream); \
      return;                                                                                  \
    }                                                                                          \
    T zeros[CHUNK] = {0};                                                                      \
    for (int64_t v = v0; v < v1; v++) {                                                        \
      gk_tensor row = gk_tensor_row(dw, 1, v);                                                 \
      for (int64_t c = 0; c < j->D; c += CHUNK) gk_store_##S(&row, c, gk_min64(CHUNK, j->D - c), zeros); \
    }                                                                                          \
  }                                                                                            \
  /* dweight row v = sum of the dy rows of its positions (+ the old row) */                    \
  GK_INLINE void emb_sum_row_##S(const emb_job *j, int64_t v) {                                \
    const gk_tensor *dw = j->a[GK_ARG_DWEIGHT], *dy = j->a[GK_ARG_DY];                         \
    int64_t first = v ? j->off[v - 1] : 0, last = j->off[v];                                   \
    T buf[CHUNK], acc[CHUNK], old[CHUNK];                                                      \
    bool accumulate = j->plan->desc.accumulate;                                                \
    gk_tensor row = {0};                                                                       \
    if (accumulate || !j->dw_flat) row = gk_tensor_row(dw, 1, v);                              \
    for (int64_t c = 0; c < j->D; c += CHUNK) {                                                \
      int64_t len = gk_min64(CHUNK, j->D - c);                                                 \
      if (accumulate) gk_load_##S(&row, c, len, old);                                          \
      for (int64_t i = 0; i < len; i++) acc[i] = 0;                                            \
      for (int64_t q = first; q < last; q++) {                                                 \
        const T *g;                                                                            \
        if (j->dy_flat) g = (const T *)j->dy_flat + j->pos[q] * j->D + c;                      \
        else {                                                                                 \
          gk_tensor dyr = gk_tensor_row(dy, 1, j->pos[q]);                                     \
          g = gk_chunk_in_##S(&dyr, c, len, buf);                                              \
        }                                                                                      \
        for (int64_t i = 0; i < len; i++) acc[i] += g[i];                                      \
      }                                                                                        \
      if (accumulate)                                                                          \
        for (int64_t i = 0; i < len; i++) acc[i] += old[i];                                    \
      if (j->dw_flat)                                                                          \
        gk_put_bytes((T *)j->dw_flat + v * j->D + c, acc, (size_t)len * sizeof(T), j->stream); \
      else                                                                                     \
        gk_store_##S(&row, c, len, acc);                                                       \
    }                                                                                          \
  }                                                                                            \
  GK_INLINE void emb_bwd_task_##S(const emb_job *j, int64_t task) {                            \
    int64_t v0 = task * j->per_task, end = gk_min64(j->V, v0 + j->per_task), zero_from = v0;   \
    for (int64_t v = v0; v < end; v++) {                                                       \
      bool none = j->off[v] == (v ? j->off[v - 1] : 0) || v == j->plan->desc.embedding.padding_idx; \
      if (none) continue;                                                                      \
      emb_zero_rows_##S(j, zero_from, v);                                                      \
      emb_sum_row_##S(j, v);                                                                   \
      zero_from = v + 1;                                                                       \
    }                                                                                          \
    emb_zero_rows_##S(j, zero_from, end);                                                      \
    gk_stream_fence(j->stream);                                                                   \
  }

GK_DEFINE_EMB(float, f32)
GK_DEFINE_EMB(double, f64)

GK_INLINE void fwd_task_body(void *ctx, int64_t t) {
  const emb_job *j = ctx;
  if (j->plan->desc.dtype == GK_F64) emb_fwd_task_f64(j, t);
  else emb_fwd_task_f32(j, t);
}
GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t task), (ctx, task))

GK_INLINE void bwd_task_body(void *ctx, int64_t t) {
  const emb_job *j = ctx;
  if (j->plan->desc.dtype == GK_F64) emb_bwd_task_f64(j, t);
  else emb_bwd_task_f32(j, t);
}
GK_ISA_VARIANTS(bwd_task, (void *ctx, int64_t task), (ctx, task))

// The data of t when it is contiguous f32 or f64 (its plan's accumulator type), else NULL.
static void *flat_of(const gk_tensor *t) {
  return (t->dtype == GK_F32 || t->dtype == GK_F64) && gk_tensor_is_contiguous(t) ? t->data : NULL;
}

static emb_job job_of(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  emb_job j = {plan, a, gk_tensor_numel(a[GK_ARG_INDEX]), d->embedding.num_embeddings, d->embedding.dim, 0, false,
               false, NULL, NULL, false, NULL, NULL};
  j.per_task = gk_ceil_div(TASK_ELEMS, j.D > 0 ? j.D : 1);
  return j;
}

static gk_status cpu_embedding_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  emb_job j = job_of(plan, a);
  j.rows_flat = gk_tensor_is_contiguous(a[GK_ARG_WEIGHT]) && gk_tensor_is_contiguous(a[GK_ARG_Y]);
  gk_parallel_for(gk_ceil_div(j.n, j.per_task), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_embedding_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  emb_job j = job_of(plan, a);
  j.dy_flat = flat_of(a[GK_ARG_DY]);
  j.dw_flat = flat_of(a[GK_ARG_DWEIGHT]);
  j.dw_contiguous = gk_tensor_is_contiguous(a[GK_ARG_DWEIGHT]);
  j.stream = gk_stream_output((size_t)(j.V * j.D) * gk_elem_size(plan->desc.dtype));
  int64_t *off = ws, *pos = off + j.V + 1;
  for (int64_t v = 0; v <= j.V; v++) off[v] = 0;
  for (int64_t p = 0; p < j.n; p++) off[gk_get_index(a[GK_ARG_INDEX], p) + 1]++;
  for (int64_t v = 1; v <= j.V; v++) off[v] += off[v - 1];  // off[v]: first position slot of index v
  for (int64_t p = 0; p < j.n; p++) pos[off[gk_get_index(a[GK_ARG_INDEX], p)]++] = p;
  // now off[v] is the end of index v's slots (and the start of v + 1's)
  j.off = off;
  j.pos = pos;
  gk_parallel_for(gk_ceil_div(j.V, j.per_task), bwd_task, &j);
  return GK_SUCCESS;
}

static size_t cpu_embedding_bwd_workspace(const gk_plan *plan) {
  int64_t n = 1;
  for (int i = 0; i < plan->desc.rank; i++) n *= plan->desc.shape[i];
  return (size_t)(plan->desc.embedding.num_embeddings + 1 + n) * sizeof(int64_t);
}

const gk_kernel gk_cpu_embedding_fwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .run = cpu_embedding_fwd};
const gk_kernel gk_cpu_embedding_bwd = {.name = "cpu_threads", .backend = GK_BACKEND_CPU, .workspace = cpu_embedding_bwd_workspace,
                                        .run = cpu_embedding_bwd};
