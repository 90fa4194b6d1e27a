// gradkern bench (tools/bench.c): op and training-step timings against the
// machine's limits measured in the same run.
#ifndef GK_TOOLS_BENCH_H
#define GK_TOOLS_BENCH_H

// argv holds the options after "bench"; returns the exit status.
int gk_cmd_bench(int argc, char **argv);

#endif
