// Times the causal conv1d forward and backward (CPU kernel) on a Mamba
// block's shape: B=4, D=1536, L=1024, width 4, with bias and SiLU, every
// tensor of one dtype, in either channel layout. Not a test: it prints the
// best of a few runs, wall time and CPU time (the latter steadier on a
// shared machine).
//   conv1d_timing [threads [f32|bf16|f16 [bdl|bld]]]   (default 2 f32 bdl)
//   bdl: x is (B, D, L); bld: x is (B, L, D) (channel_last)
#define _POSIX_C_SOURCE 199309L  // clock_gettime
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gk_dtype dtype = GK_F32;

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *dtype_name = argc > 2 ? argv[2] : "f32", *layout = argc > 3 ? argv[3] : "bdl";
  if (strcmp(dtype_name, "f32") && strcmp(dtype_name, "bf16") && strcmp(dtype_name, "f16")) {
    fprintf(stderr, "conv1d_timing: dtype %s: expected f32, bf16 or f16\n", dtype_name);
    return 2;
  }
  if (strcmp(layout, "bdl") && strcmp(layout, "bld")) {
    fprintf(stderr, "conv1d_timing: layout %s: expected bdl or bld\n", layout);
    return 2;
  }
  dtype = dtype_name[0] == 'b' ? GK_BF16 : dtype_name[1] == '1' ? GK_F16 : GK_F32;
  const int64_t B = 4, D = 1536, L = 1024, W = 4;
  int channel_last = layout[1] == 'l';
  if (gk_set_num_threads(threads) != GK_SUCCESS) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 2;
  }
  int64_t sx[3] = {B, channel_last ? L : D, channel_last ? D : L}, sw[2] = {D, W};
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, dtype, 3, sx);
  d.conv.width = W;
  d.conv.channel_last = channel_last;
  d.conv.silu = 1;
  gk_op_desc db = d;
  db.direction = GK_BACKWARD;
  gk_plan *fwd, *bwd;
  if (gk_plan_create(&d, &fwd) != GK_SUCCESS || gk_plan_create(&db, &bwd) != GK_SUCCESS) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 1;
  }
  int64_t n = B * D * L;
  void *x = filled(dtype, n, -1, 1), *w = filled(dtype, D * W, -0.5f, 0.5f), *bias = filled(dtype, D, -0.2f, 0.2f);
  void *y = filled(dtype, n, 0, 0), *dy = filled(dtype, n, -1, 1), *dx = filled(dtype, n, 0, 0);
  void *dw = filled(dtype, D * W, 0, 0), *dbias = filled(dtype, D, 0, 0);
  gk_tensor t[12];
  gk_arg fa[4], ba[7];
  int nf = 0, nb = 0, k = 0;
#define ARG(list, cnt, kind, ptr, rank, shape) \
  (gk_tensor_init(&t[k], ptr, dtype, rank, shape), list[cnt++] = (gk_arg){kind, t[k++]})
  ARG(fa, nf, GK_ARG_X, x, 3, sx); ARG(fa, nf, GK_ARG_WEIGHT, w, 2, sw); ARG(fa, nf, GK_ARG_BIAS, bias, 1, &D);
  for (int i = 0; i < nf; i++) ba[nb++] = fa[i];
  ARG(fa, nf, GK_ARG_Y, y, 3, sx);
  ARG(ba, nb, GK_ARG_DY, dy, 3, sx); ARG(ba, nb, GK_ARG_DX, dx, 3, sx);
  ARG(ba, nb, GK_ARG_DWEIGHT, dw, 2, sw); ARG(ba, nb, GK_ARG_DBIAS, dbias, 1, &D);
  size_t wf, wb;
  gk_plan_workspace_size(fwd, &wf);
  gk_plan_workspace_size(bwd, &wb);
  size_t wmax = wf > wb ? wf : wb;
  void *ws = aligned_alloc(64, (wmax + 63) / 64 * 64 + 64);
  double best[4];
  if (!best_of(7, fwd, fa, nf, bwd, ba, nb, ws, wmax, best)) return 1;
  printf("conv1d %s %s B=%lld D=%lld L=%lld W=%lld bias silu, %d threads: forward %.2f ms, backward %.2f ms "
         "(best of 7); CPU time forward %.2f ms, backward %.2f ms\n",
         dtype_name, layout, (long long)B, (long long)D, (long long)L, (long long)W, threads, 1e3 * best[0],
         1e3 * best[1], 1e3 * best[2], 1e3 * best[3]);
  gk_plan_destroy(fwd);
  gk_plan_destroy(bwd);
  return 0;
}
