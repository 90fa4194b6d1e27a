// Forced into src/cpu/backend.c and src/ref/backend.c when they are compiled
// again for one kernel-ABI module (wasm/abi/CMakeLists.txt): their kernel
// tables then hold only the module's op family (GK_ABI_OP, GK_ABI_FAMILY),
// so the linker's --gc-sections drops every other op's kernels. The library
// plans an op whose table entry is empty as it would for any backend without
// it ("has no kernel for this op"); a module plans only its own op. The
// optimizers' modules (no GK_ABI_FAMILY) plan no op: their tables are empty.
#include "../../src/core/internal.h"

#undef GK_KERNELS_PER_FAMILY
#ifdef GK_ABI_FAMILY
#define GK_ABI_KERNELS_(prefix, family) GK_FAMILY_KERNELS_(prefix, family)  // expands GK_ABI_FAMILY first
#define GK_KERNELS_PER_FAMILY(prefix) {[GK_ABI_OP] = GK_ABI_KERNELS_(prefix, GK_ABI_FAMILY)}
#else
#define GK_KERNELS_PER_FAMILY(prefix) {{NULL}}
#endif
