// Training on a WebGPU device (built for WebAssembly by make wasm; run in
// Node on Dawn by tests/wasm/webgpu_ops.mjs, which hands it the device):
// the default Mamba (width 64, state 16, 2 layers) and a small LLaMA (4
// heads, 2 key/value heads) train 50 steps on WebGPU and on the CPU backend
// of the same module, from the same weights on the same batches
// (device_train.h: the first gradients, every loss, the falling loss, the
// last weights, what a device run refuses); then AdamW and clipping on
// WebGPU tensors against the same calls on host copies, and their bad input
// (device_optim.h), with one tensor past 65535 workgroups of 64 (and past
// one of the optimizers' 4M-element pieces). Fails, with the reason,
// without a WebGPU device.
#define _POSIX_C_SOURCE 200809L  // clock_gettime (device_train.h)
#include "device_optim.h"
#include "device_train.h"

// Batch 4 x 64 keeps the run under a minute on llvmpipe. Bounds as for
// Vulkan (test_train_vulkan.c): every loss within 1e-3 of the CPU's, the
// first gradients within 1e-4, the weights within the case's bound (LLaMA's
// drift apart where AdamW's eps meets its small q/k gradients).
int main(void) {
  const device_train dt = {GK_BACKEND_WEBGPU, 8, 64, 50, 1e-3, 1e-4, false};
  const model_case cases[] = {{"mamba", GK_ARCH_MAMBA, 1, 1e-3}, {"llama", GK_ARCH_LLAMA, 1, 5e-2}};
  if (!device_train_tests(&dt, cases, (int)(sizeof cases / sizeof cases[0]))) return 1;
  device_optim_tests(GK_BACKEND_WEBGPU, 65535 * 64 + 1000);
  return finish("test_train_webgpu");
}
