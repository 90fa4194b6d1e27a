// Reference kernels for embedding, f64 sums.
//   forward:  y[p, :] = W[index[p], :]
//   backward: dW[v, :] (=/+=) sum over p with index[p] = v of dy[p, :], in order of p;
//             the padding row gets nothing (0 with =, unchanged with +=)
#include "../ops/transformer.h"

static gk_status ref_embedding_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  int64_t D = d->embedding.dim, n = gk_tensor_numel(a[GK_ARG_INDEX]);
  for (int64_t p = 0; p < n; p++) {
    int64_t v = gk_get_index(a[GK_ARG_INDEX], p);
    for (int64_t c = 0; c < D; c++) gk_set(a[GK_ARG_Y], p * D + c, gk_get(a[GK_ARG_WEIGHT], v * D + c));
  }
  return GK_SUCCESS;
}

static gk_status ref_embedding_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  int64_t V = d->embedding.num_embeddings, D = d->embedding.dim, n = gk_tensor_numel(a[GK_ARG_INDEX]);
  double *acc = ws;
  for (int64_t i = 0; i < V * D; i++) acc[i] = 0;
  for (int64_t p = 0; p < n; p++) {
    int64_t v = gk_get_index(a[GK_ARG_INDEX], p);
    if (v == d->embedding.padding_idx) continue;
    for (int64_t c = 0; c < D; c++) acc[v * D + c] += gk_get(a[GK_ARG_DY], p * D + c);
  }
  const gk_tensor *dw = a[GK_ARG_DWEIGHT];
  for (int64_t i = 0; i < V * D; i++) gk_set(dw, i, acc[i] + (d->accumulate ? gk_get(dw, i) : 0.0));
  return GK_SUCCESS;
}

static size_t ref_embedding_bwd_workspace(const gk_plan *plan) {
  return (size_t)(plan->desc.embedding.num_embeddings * plan->desc.embedding.dim) * sizeof(double);
}

const gk_kernel gk_ref_embedding_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                        .run = ref_embedding_fwd};
const gk_kernel gk_ref_embedding_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_embedding_bwd_workspace,
                                        .run = ref_embedding_bwd};
