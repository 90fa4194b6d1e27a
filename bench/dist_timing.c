// The gradient reduction of data-parallel training alone, without the
// compute it overlaps: the buckets of a model (the groups backward reports,
// in its order) reduced back to back, as `gradkern train` under mpirun does
// once per step. Run under mpirun:
//
//   mpirun -np 2 build/dist_timing [mamba|llama] [width] [layers] [steps]
//
// Prints, on rank 0, the parameters, the buckets, the bytes each rank sends
// per step and the milliseconds per step (median of the steps), with and
// without the sharded variant (--zero 1: the sums of the own shard only,
// then the parameters' all-gather).
#include "nn/dist.h"
#include "nn/layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  gk_dist *d;
  if (gk_dist_init(&d) != GK_SUCCESS) {
    fprintf(stderr, "dist_timing: %s\n", gk_last_error());
    return 1;
  }
  gk_model_config c = {0};
  c.arch = argc > 1 && !strcmp(argv[1], "llama") ? GK_ARCH_LLAMA : GK_ARCH_MAMBA;
  c.vocab = 256;
  c.d_model = argc > 2 ? atoi(argv[2]) : 256;
  c.n_layers = argc > 3 ? atoi(argv[3]) : 4;
  c.d_state = 16;
  c.selection = 1;
  c.heads = 4;
  c.kv_heads = 2;
  int steps = argc > 4 ? atoi(argv[4]) : 20;
  if (steps < 1 || steps > 100000) steps = 20;
  gk_model m;
  if (gk_model_init(&m, &c, 1) != GK_SUCCESS) {
    fprintf(stderr, "dist_timing: %s\n", gk_last_error());
    return 1;
  }
  double *ms = malloc(sizeof(double) * (size_t)steps);
  for (int sharded = 0; sharded < 2 && ms; sharded++) {
    gk_grad_sync *s;
    if (gk_grad_sync_create(d, &m, sharded, &s) != GK_SUCCESS) {
      fprintf(stderr, "dist_timing: %s\n", gk_last_error());
      return 1;
    }
    for (int k = -2; k < steps; k++) {  // two steps to warm up
      double t0 = now_ms();
      gk_grad_sync_begin(s, 1.0 / gk_dist_size(d));
      // The order of a training step's backward: the final norm, the
      // blocks from the last, the embedding.
      int per = (m.nparams - GK_PARAM_BLOCKS) / c.n_layers;
      gk_grad_sync_ready(s, GK_PARAM_NORM_F, 1);
      for (int l = c.n_layers - 1; l >= 0; l--) gk_grad_sync_ready(s, GK_PARAM_BLOCKS + l * per, per);
      gk_grad_sync_ready(s, GK_PARAM_EMBEDDING, 1);
      gk_status st = gk_grad_sync_end(s);
      if (st == GK_SUCCESS && sharded) st = gk_dist_allgather(d, m.w, m.n_total);
      if (st != GK_SUCCESS) {
        fprintf(stderr, "dist_timing: %s\n", gk_last_error());
        return 1;
      }
      if (k >= 0) ms[k] = now_ms() - t0;
    }
    gk_grad_sync_stats st = gk_grad_sync_get_stats(s);
    qsort(ms, (size_t)steps, sizeof *ms, by_value);
    if (gk_dist_rank(d) == 0)
      printf("%s width %d, %d layers: %lld parameters (%.2f MiB), %d ranks%s: %lld buckets, %.2f MiB sent per step "
             "by rank 0%s; %.2f ms per step (median of %d)\n",
             c.arch == GK_ARCH_LLAMA ? "llama" : "mamba", c.d_model, c.n_layers, (long long)m.n_total,
             4.0 * (double)m.n_total / (1 << 20), gk_dist_size(d), sharded ? ", sharded" : "",
             (long long)(st.buckets / st.steps), st.bytes_sent / (double)st.steps / (1 << 20),
             sharded ? " (gradients) plus the parameters' all-gather" : "", ms[steps / 2], steps);
    gk_grad_sync_free(s);
  }
  free(ms);
  gk_model_free(&m);
  gk_dist_free(d);
  return 0;
}
