// Reference kernels for add and mul with broadcasting: element by element of
// y through broadcast views, f64 math.
//   forward:  add y = a + alpha b;  mul y = alpha a b
//   backward: da, db (=) summed over broadcast dims in order of y's elements:
//             add da = sum dy, db = alpha sum dy;  mul da = alpha sum dy b, db = alpha sum dy a
#include "../ops/transformer.h"

static gk_status ref_binary_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *d = &plan->desc;
  const gk_tensor *y = a[GK_ARG_Y];
  gk_tensor va = gk_broadcast_view(a[GK_ARG_A], y->rank, y->shape);
  gk_tensor vb = gk_broadcast_view(a[GK_ARG_B], y->rank, y->shape);
  int64_t n = gk_tensor_numel(y);
  double alpha = d->binary.alpha;
  for (int64_t i = 0; i < n; i++) {
    double x = gk_get(&va, i), z = gk_get(&vb, i);
    gk_set(y, i, d->op == GK_OP_ADD ? x + alpha * z : alpha * x * z);
  }
  return GK_SUCCESS;
}

static gk_status ref_binary_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *d = &plan->desc;
  const gk_tensor *dy = a[GK_ARG_DY], *da = a[GK_ARG_DA], *db = a[GK_ARG_DB];
  bool mul = d->op == GK_OP_MUL;
  int64_t n = gk_tensor_numel(dy), na = gk_tensor_numel(da), nb = gk_tensor_numel(db);
  if (na + nb == 0) return GK_SUCCESS;
  // f64 accumulators shaped like a and b, seen through broadcast views
  double *acc = ws;
  for (int64_t i = 0; i < na + nb; i++) acc[i] = 0;
  gk_tensor ta, tb;
  gk_tensor_init(&ta, acc, GK_F64, da->rank, da->shape);
  gk_tensor_init(&tb, acc + na, GK_F64, db->rank, db->shape);
  gk_tensor accb[2] = {gk_broadcast_view(&ta, dy->rank, dy->shape), gk_broadcast_view(&tb, dy->rank, dy->shape)};
  gk_tensor va = *dy, vb = *dy;
  if (mul) {
    va = gk_broadcast_view(a[GK_ARG_A], dy->rank, dy->shape);
    vb = gk_broadcast_view(a[GK_ARG_B], dy->rank, dy->shape);
  }
  for (int64_t i = 0; i < n; i++) {
    double g = gk_get(dy, i);
    gk_set(&accb[0], i, gk_get(&accb[0], i) + (mul ? g * gk_get(&vb, i) : g));
    gk_set(&accb[1], i, gk_get(&accb[1], i) + (mul ? g * gk_get(&va, i) : g));
  }
  double alpha = d->binary.alpha;
  for (int64_t i = 0; i < na; i++) gk_set(da, i, mul ? alpha * acc[i] : acc[i]);
  for (int64_t i = 0; i < nb; i++) gk_set(db, i, alpha * acc[na + i]);
  return GK_SUCCESS;
}

static size_t ref_binary_bwd_workspace(const gk_plan *plan) {
  int64_t n = 1;
  for (int i = 0; i < plan->args[GK_ARG_DA].rank; i++) n *= plan->args[GK_ARG_DA].shape[i];
  int64_t m = 1;
  for (int i = 0; i < plan->args[GK_ARG_DB].rank; i++) m *= plan->args[GK_ARG_DB].shape[i];
  return (size_t)(n + m) * sizeof(double);
}

const gk_kernel gk_ref_binary_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_binary_fwd};
const gk_kernel gk_ref_binary_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_binary_bwd_workspace,
                                     .run = ref_binary_bwd};
