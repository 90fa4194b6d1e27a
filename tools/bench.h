// gradkern bench (tools/bench.c): op and training-step timings against the
// machine's limits measured in the same run.
#ifndef GK_TOOLS_BENCH_H
#define GK_TOOLS_BENCH_H

#include <stddef.h>

// argv holds the options after "bench"; returns the exit status.
int gk_cmd_bench(int argc, char **argv);

// GB/s (read + write) of vkCmdCopyBuffer between two buffers of `bytes` on
// the Vulkan backend's device, the best of a few runs; 0 when it cannot run,
// with the reason in why (tools/bench_vulkan.c, built with the backend).
double gk_bench_copy_gb_s(size_t bytes, char *why, size_t why_size);

#endif
