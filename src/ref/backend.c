// The reference backend: plain scalar kernels that compute every op in f64
// (rounded to nearest even on store), one thread, in the order the math is
// written. The oracle every other backend is tested against.
#include "../core/internal.h"

extern const gk_kernel gk_ref_activation_fwd, gk_ref_activation_bwd, gk_ref_gated_fwd, gk_ref_gated_bwd;
extern const gk_kernel gk_ref_norm_fwd, gk_ref_norm_bwd, gk_ref_linear_fwd, gk_ref_linear_bwd;
extern const gk_kernel gk_ref_matmul_fwd, gk_ref_matmul_bwd, gk_ref_softmax_fwd, gk_ref_softmax_bwd;
extern const gk_kernel gk_ref_cross_entropy_fwd, gk_ref_cross_entropy_bwd, gk_ref_embedding_fwd, gk_ref_embedding_bwd;
extern const gk_kernel gk_ref_rope_fwd, gk_ref_rope_bwd, gk_ref_attention_fwd, gk_ref_attention_bwd;
extern const gk_kernel gk_ref_binary_fwd, gk_ref_binary_bwd, gk_ref_conv1d_fwd, gk_ref_conv1d_bwd;
extern const gk_kernel gk_ref_scan_fwd, gk_ref_scan_bwd;

static void ref_precision(const gk_plan *plan, gk_plan_info *info) {
  info->math = plan->desc.dtype == GK_F64 ? "f64 math" : "f64 math, rounded to nearest even on store";
  info->accumulator = GK_F64;
  info->deterministic = 1;
}

const gk_backend_table gk_ref_backend = {
    .name = "ref",
    .id = GK_BACKEND_REF,
    .device = GK_DEVICE_CPU,
    .precision = ref_precision,
    .kernels = GK_KERNELS_PER_FAMILY(gk_ref),
};
