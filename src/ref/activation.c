// Reference kernels for the elementwise and gated activations: one element
// at a time, f64 math, the oracle every faster kernel is tested against.
#include "../core/act_math.h"
#include "../core/internal.h"

// x -> y = act(x)
static gk_status ref_activation_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_act_params p = gk_act_of(&plan->desc);
  int64_t n = gk_tensor_numel(a[GK_ARG_X]);
  for (int64_t i = 0; i < n; i++) gk_set(a[GK_ARG_Y], i, gk_act_fwd_f64(&p, gk_get(a[GK_ARG_X], i)));
  return GK_SUCCESS;
}

// dy, x -> dx = dy * act'(x); with act.from_output (relu, sigmoid)
// dy, y -> dx = dy * act'(x) written in y: sigmoid y (1 - y), relu y > 0
static gk_status ref_activation_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_act_params p = gk_act_of(&plan->desc);
  bool from_y = plan->desc.act.from_output;
  const gk_tensor *v = a[gk_activation_saved(&plan->desc)];
  int64_t n = gk_tensor_numel(v);
  for (int64_t i = 0; i < n; i++) {
    double g = from_y ? gk_act_grad_y_f64(&p, gk_get(v, i)) : gk_act_grad_f64(&p, gk_get(v, i));
    gk_set(a[GK_ARG_DX], i, gk_get(a[GK_ARG_DY], i) * g);
  }
  return GK_SUCCESS;
}

const gk_kernel gk_ref_activation_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                         .run = ref_activation_fwd};
const gk_kernel gk_ref_activation_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                         .run = ref_activation_bwd};

// a, b -> y = a * act(b)
static gk_status ref_gated_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_act_params p = gk_act_of(&plan->desc);
  gk_tensor va, vb;
  gk_gated_views(plan, a, &va, &vb, NULL, NULL);
  int64_t n = gk_tensor_numel(&va);
  for (int64_t i = 0; i < n; i++) gk_set(a[GK_ARG_Y], i, gk_get(&va, i) * gk_act_fwd_f64(&p, gk_get(&vb, i)));
  return GK_SUCCESS;
}

// dy, a, b -> da = dy * act(b), db = dy * a * act'(b)
static gk_status ref_gated_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  gk_act_params p = gk_act_of(&plan->desc);
  gk_tensor va, vb, vda, vdb;
  gk_gated_views(plan, a, &va, &vb, &vda, &vdb);
  int64_t n = gk_tensor_numel(&va);
  for (int64_t i = 0; i < n; i++) {
    double dy = gk_get(a[GK_ARG_DY], i), x = gk_get(&va, i), g = gk_get(&vb, i);
    gk_set(&vda, i, dy * gk_act_fwd_f64(&p, g));
    gk_set(&vdb, i, dy * x * gk_act_grad_f64(&p, g));
  }
  return GK_SUCCESS;
}

const gk_kernel gk_ref_gated_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .run = ref_gated_fwd};
const gk_kernel gk_ref_gated_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .run = ref_gated_bwd};
