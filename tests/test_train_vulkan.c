// Training on the Vulkan device through the model API (device_train.h): the
// default Mamba (width 64, state 16, 2 layers), its time-invariant ablation
// and a small LLaMA (4 heads, 2 key/value heads) train 50 steps of batch
// 8 x 64 on the device and on the CPU from the same weights on the same
// batches: the first gradients, every loss, the falling loss and the last
// weights compared; then what a device run refuses. Fails, with the reason,
// without a Vulkan device. `test_train_vulkan quick` (its run under
// AddressSanitizer) trains 3 steps.
#define _POSIX_C_SOURCE 200809L  // clock_gettime (device_train.h)
#include "device_train.h"

// Bounds (measured on lavapipe: the printed lines): every loss within
// 1e-3 of the CPU's (1.2e-7 for Mamba, 7.8e-6 for LLaMA seen), the first
// gradients within 1e-4 (2e-7 to 4e-7 seen), the last weights within the
// case's weight_rel (relative L2 over all of them: 2.4e-7 for Mamba). LLaMA's
// query and key projections start with gradients near AdamW's eps (1e-8),
// where the update g / (|g| + eps) turns rounding into direction: their
// weights drift apart by a few percent (1.2e-2 over all weights seen) while
// the losses agree to 1e-5; with eps 1e-5 the weights agree to 8e-6.
int main(int argc, char **argv) {
  bool quick = argc > 1 && !strcmp(argv[1], "quick");
  const device_train dt = {GK_BACKEND_VULKAN, 8, 64, quick ? 3 : 50, 1e-3, 1e-4, quick};
  const model_case cases[] = {{"mamba", GK_ARCH_MAMBA, 1, 1e-3}, {"mamba --no-selection", GK_ARCH_MAMBA, 0, 1e-3},
                              {"llama", GK_ARCH_LLAMA, 1, 5e-2}};
  if (!device_train_tests(&dt, cases, (int)(sizeof cases / sizeof cases[0]))) return 1;
  return finish("test_train_vulkan");
}
