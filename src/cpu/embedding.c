// Threaded CPU kernels for embedding (math as in src/ref/embedding.c). The
// indices are checked first (nothing is written if one is bad).
// Forward: tasks of runs of positions copy weight rows (f32, f64 for f64).
// Backward: a counting sort of the positions by index (workspace: V + 1
// offsets and N positions, positions of each index in increasing order), then
// tasks of runs of vocabulary rows: each row sums its positions' dy rows in
// order of position, in chunks of CHUNK columns, and stores once, so every
// thread count gives the same bits.
#include "../ops/transformer.h"

enum { CHUNK = 512, TASK_ELEMS = 32768 };

typedef struct emb_job {
  const gk_plan *plan;
  const gk_tensor *const *a;
  int64_t n, V, D, per_task;
  const int64_t *off, *pos;   // backward: rows of index v are pos[off[v-1] .. off[v])
} emb_job;

#define GK_DEFINE_EMB(T, S)                                                                  \
  static void emb_fwd_task_##S(const emb_job *j, int64_t task) {                              \
    T buf[CHUNK], obuf[CHUNK];                                                                \
    int64_t end = gk_min64(j->n, (task + 1) * j->per_task);                                   \
    for (int64_t p = task * j->per_task; p < end; p++) {                                      \
      gk_tensor w = gk_tensor_row(j->a[GK_ARG_WEIGHT], 1, gk_get_index(j->a[GK_ARG_INDEX], p)); \
      gk_tensor y = gk_tensor_row(j->a[GK_ARG_Y], 1, p);                                      \
      for (int64_t c = 0; c < j->D; c += CHUNK) {                                             \
        int64_t len = gk_min64(CHUNK, j->D - c);                                              \
        const T *src = gk_chunk_in_##S(&w, c, len, buf);                                      \
        T *o = gk_chunk_out_##S(&y, c, obuf);                                                 \
        for (int64_t i = 0; i < len; i++) o[i] = src[i];                                      \
        gk_chunk_commit_##S(&y, c, len, o, obuf);                                             \
      }                                                                                       \
    }                                                                                         \
  }                                                                                           \
  static void emb_bwd_task_##S(const emb_job *j, int64_t task) {                              \
    const gk_op_desc *d = &j->plan->desc;                                                     \
    T buf[CHUNK], acc[CHUNK], old[CHUNK];                                                     \
    int64_t end = gk_min64(j->V, (task + 1) * j->per_task);                                   \
    for (int64_t v = task * j->per_task; v < end; v++) {                                      \
      int64_t first = v ? j->off[v - 1] : 0, last = j->off[v];                                \
      bool none = last == first || v == d->embedding.padding_idx;                             \
      if (none && d->accumulate) continue;                                                    \
      gk_tensor dw = gk_tensor_row(j->a[GK_ARG_DWEIGHT], 1, v);                               \
      for (int64_t c = 0; c < j->D; c += CHUNK) {                                             \
        int64_t len = gk_min64(CHUNK, j->D - c);                                              \
        for (int64_t i = 0; i < len; i++) acc[i] = 0;                                         \
        for (int64_t q = first; q < last && !none; q++) {                                     \
          gk_tensor dy = gk_tensor_row(j->a[GK_ARG_DY], 1, j->pos[q]);                        \
          const T *g = gk_chunk_in_##S(&dy, c, len, buf);                                     \
          for (int64_t i = 0; i < len; i++) acc[i] += g[i];                                   \
        }                                                                                     \
        if (d->accumulate) {                                                                  \
          gk_load_##S(&dw, c, len, old);                                                      \
          for (int64_t i = 0; i < len; i++) acc[i] += old[i];                                 \
        }                                                                                     \
        gk_store_##S(&dw, c, len, acc);                                                       \
      }                                                                                       \
    }                                                                                         \
  }

GK_DEFINE_EMB(float, f32)
GK_DEFINE_EMB(double, f64)

static void fwd_task(void *ctx, int64_t t) {
  const emb_job *j = ctx;
  if (j->plan->desc.dtype == GK_F64) emb_fwd_task_f64(j, t);
  else emb_fwd_task_f32(j, t);
}

static void bwd_task(void *ctx, int64_t t) {
  const emb_job *j = ctx;
  if (j->plan->desc.dtype == GK_F64) emb_bwd_task_f64(j, t);
  else emb_bwd_task_f32(j, t);
}

static emb_job job_of(const gk_plan *plan, const gk_kernel_args a) {
  const gk_op_desc *d = &plan->desc;
  emb_job j = {plan, a, gk_tensor_numel(a[GK_ARG_INDEX]), d->embedding.num_embeddings, d->embedding.dim, 0, NULL,
               NULL};
  j.per_task = gk_ceil_div(TASK_ELEMS, j.D > 0 ? j.D : 1);
  return j;
}

static gk_status cpu_embedding_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  emb_job j = job_of(plan, a);
  int64_t used;
  gk_status st = gk_check_indices("embedding", "index", a[GK_ARG_INDEX], j.V, false, 0, &used);
  if (st != GK_SUCCESS) return st;
  gk_parallel_for(gk_ceil_div(j.n, j.per_task), fwd_task, &j);
  return GK_SUCCESS;
}

static gk_status cpu_embedding_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  emb_job j = job_of(plan, a);
  int64_t used;
  gk_status st = gk_check_indices("embedding", "index", a[GK_ARG_INDEX], j.V, false, 0, &used);
  if (st != GK_SUCCESS) return st;
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

const gk_kernel gk_cpu_embedding_fwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, NULL, cpu_embedding_fwd};
const gk_kernel gk_cpu_embedding_bwd = {"cpu_threads", GK_BACKEND_CPU, NULL, NULL, cpu_embedding_bwd_workspace,
                                        cpu_embedding_bwd};
