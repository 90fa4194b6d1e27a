// The CPU backend: threaded kernels whose hot loops are compiled per
// instruction-set level (src/core/isa.h). f32 computes in f32, f64 in f64,
// f16/bf16 load into f32 and round to nearest even on store; every kernel is
// bit-identical for any thread count.
#include "../core/internal.h"

extern const gk_kernel gk_cpu_activation_fwd, gk_cpu_activation_bwd, gk_cpu_gated_fwd, gk_cpu_gated_bwd;
extern const gk_kernel gk_cpu_norm_fwd, gk_cpu_norm_bwd, gk_cpu_linear_fwd, gk_cpu_linear_bwd;
extern const gk_kernel gk_cpu_matmul_fwd, gk_cpu_matmul_bwd, gk_cpu_softmax_fwd, gk_cpu_softmax_bwd;
extern const gk_kernel gk_cpu_cross_entropy_fwd, gk_cpu_cross_entropy_bwd, gk_cpu_embedding_fwd, gk_cpu_embedding_bwd;
extern const gk_kernel gk_cpu_rope_fwd, gk_cpu_rope_bwd, gk_cpu_attention_fwd, gk_cpu_attention_bwd;
extern const gk_kernel gk_cpu_binary_fwd, gk_cpu_binary_bwd, gk_cpu_conv1d_fwd, gk_cpu_conv1d_bwd;
extern const gk_kernel gk_cpu_scan_fwd, gk_cpu_scan_bwd;

static void cpu_precision(const gk_plan *plan, gk_plan_info *info) {
  gk_dtype dt = plan->desc.dtype;
  info->math = dt == GK_F64 ? "f64 math" : dt == GK_F32 ? "f32 math" : "f32 math, rounded to nearest even on store";
  info->accumulator = dt == GK_F64 ? GK_F64 : GK_F32;
  info->deterministic = 1;
}

const gk_backend_table gk_cpu_backend = {
    .name = "cpu",
    .id = GK_BACKEND_CPU,
    .device = GK_DEVICE_CPU,
    .precision = cpu_precision,
    .kernels = GK_KERNELS_PER_FAMILY(gk_cpu),
};
