// gradkern bench (tools/bench.c): op and training-step timings against the
// machine's limits measured in the same run.
#ifndef GK_TOOLS_BENCH_H
#define GK_TOOLS_BENCH_H

#include <stddef.h>

// argv holds the options after "bench"; returns the exit status.
int gk_cmd_bench(int argc, char **argv);

// tools/bench_vulkan.c (built with the Vulkan backend): two buffers of
// `bytes` on the Vulkan backend's device, for its copy bandwidth. open gives
// NULL, or why not (and no copier).
typedef struct gk_bench_copier gk_bench_copier;
const char *gk_bench_copier_open(size_t bytes, gk_bench_copier **copier);
// Submits `copies` vkCmdCopyBuffer of the whole buffer, back and forth
// with a barrier after each (after writing both buffers when `fill`), and
// waits for them; 0 when that fails.
int gk_bench_copier_run(gk_bench_copier *copier, int copies, int fill);
void gk_bench_copier_close(gk_bench_copier *copier);

#endif
