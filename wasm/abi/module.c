// One WebAssembly kernel module: the five exports of the kernel ABI for the
// op GK_ABI_OP in the dtype GK_ABI_DTYPE, named GK_ABI_NAME ("swiglu_f32"),
// given by the build (wasm/abi/CMakeLists.txt).
#include "gradkern_abi.h"

void gk_abi_wasm_memory(gk_abi_memory *mem);
void gk_abi_wasm_release(void);

static const char module_name[] = GK_ABI_NAME;

#ifdef GK_WITH_WEBGPU
// A kernel module imports nothing, so the library's WebGPU backend (which
// imports its device from the host) is replaced by this entry of the
// registry: listed, unavailable, no kernels.
static const char *no_webgpu(void) { return "not in a kernel ABI module"; }
const gk_backend_table gk_webgpu_backend = {.name = "webgpu", .id = GK_BACKEND_WEBGPU, .device = GK_DEVICE_WEBGPU,
                                            .unavailable = no_webgpu};
#endif

__attribute__((export_name("kernel_init"))) int32_t kernel_init(uint32_t params_ptr, uint32_t params_len) {
  gk_abi_memory mem;
  gk_abi_wasm_memory(&mem);
  gk_abi_code code = gk_abi_check_params(&mem, GK_ABI_OP, GK_ABI_DTYPE, params_ptr, params_len);
  gk_abi_wasm_release();
  return code;
}

static int32_t run(gk_direction dir, uint32_t desc_ptr) {
  gk_abi_memory mem;
  gk_abi_wasm_memory(&mem);
  gk_abi_code code = gk_abi_run(&mem, GK_ABI_OP, GK_ABI_DTYPE, dir, desc_ptr);
  gk_abi_wasm_release();
  return code;
}

__attribute__((export_name("kernel_forward"))) int32_t kernel_forward(uint32_t desc_ptr) {
  return run(GK_FORWARD, desc_ptr);
}

__attribute__((export_name("kernel_backward"))) int32_t kernel_backward(uint32_t desc_ptr) {
  return run(GK_BACKWARD, desc_ptr);
}

__attribute__((export_name("kernel_info"))) int32_t kernel_info(uint32_t info_ptr) {
  gk_abi_memory mem;
  gk_abi_wasm_memory(&mem);
  return gk_abi_info_write(&mem, GK_ABI_OP, info_ptr, (uint32_t)(uintptr_t)module_name, sizeof module_name - 1);
}

__attribute__((export_name("kernel_cleanup"))) int32_t kernel_cleanup(void) {
  gk_abi_wasm_release();
  return GK_ABI_OK;
}
