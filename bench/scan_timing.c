// Times the selective scan forward and backward (CPU kernel) on a Mamba
// block's shape: B=4, D=1536, N=16, L=1024, f32, per-batch B and C, D, z,
// delta_bias and softplus, every tensor of one dtype. Not a test: it prints
// the best of a few runs, wall time and CPU time (the latter steadier on a
// shared machine).
//   scan_timing [threads [f32|bf16|f16]]      (default 2 f32)
#define _POSIX_C_SOURCE 199309L  // clock_gettime
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gk_dtype dtype = GK_F32;

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *dtype_name = argc > 2 ? argv[2] : "f32";
  if (strcmp(dtype_name, "f32") && strcmp(dtype_name, "bf16") && strcmp(dtype_name, "f16")) {
    fprintf(stderr, "scan_timing: dtype %s: expected f32, bf16 or f16\n", dtype_name);
    return 2;
  }
  dtype = dtype_name[0] == 'b' ? GK_BF16 : dtype_name[1] == '1' ? GK_F16 : GK_F32;
  const int64_t B = 4, D = 1536, N = 16, L = 1024;
  if (gk_set_num_threads(threads) != GK_SUCCESS) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 2;
  }
  gk_op_desc d;
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, dtype, 3, (int64_t[]){B, D, L});
  d.scan.d_state = N;
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  gk_op_desc db = d;
  db.direction = GK_BACKWARD;
  gk_plan *fwd, *bwd;
  if (gk_plan_create(&d, &fwd) != GK_SUCCESS || gk_plan_create(&db, &bwd) != GK_SUCCESS) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 1;
  }
  int64_t bdl = B * D * L, bnl = B * N * L, nchunks = (L + d.scan.chunk_size - 1) / d.scan.chunk_size;
  void *u = filled(dtype, bdl, -1, 1), *delta = filled(dtype, bdl, -3, 1), *z = filled(dtype, bdl, -2, 2), *A = filled(dtype, D * N, -2, -0.1f);
  void *Bm = filled(dtype, bnl, -1, 1), *Cm = filled(dtype, bnl, -1, 1), *Dv = filled(dtype, D, -1, 1), *bias = filled(dtype, D, 0, 0.3f);
  void *y = filled(dtype, bdl, 0, 0), *dy = filled(dtype, bdl, -1, 1), *cs = calloc((size_t)(B * D * nchunks * N), sizeof(float));  // f32 for every dtype
  void *du = filled(dtype, bdl, 0, 0), *ddelta = filled(dtype, bdl, 0, 0), *dz = filled(dtype, bdl, 0, 0), *dA = filled(dtype, D * N, 0, 0);
  void *dB = filled(dtype, bnl, 0, 0), *dC = filled(dtype, bnl, 0, 0), *dD = filled(dtype, D, 0, 0), *dbias = filled(dtype, D, 0, 0);
  gk_tensor t[24];
  int64_t s3[3] = {B, D, L}, sa[2] = {D, N}, sb[3] = {B, N, L}, sc[4] = {B, D, nchunks, N};
  gk_arg fa[10], ba[18];
  int nf = 0, nb = 0, k = 0;
#define ARG(list, n, kind, ptr, rank, shape) \
  (gk_tensor_init(&t[k], ptr, dtype, rank, shape), list[n++] = (gk_arg){kind, t[k++]})
  ARG(fa, nf, GK_ARG_U, u, 3, s3); ARG(fa, nf, GK_ARG_DELTA, delta, 3, s3); ARG(fa, nf, GK_ARG_A, A, 2, sa);
  ARG(fa, nf, GK_ARG_B, Bm, 3, sb); ARG(fa, nf, GK_ARG_C, Cm, 3, sb); ARG(fa, nf, GK_ARG_D, Dv, 1, &D);
  ARG(fa, nf, GK_ARG_Z, z, 3, s3); ARG(fa, nf, GK_ARG_DELTA_BIAS, bias, 1, &D);
  ARG(fa, nf, GK_ARG_CHUNK_STATES, cs, 4, sc);
  fa[nf - 1].tensor.dtype = GK_F32;
  for (int i = 0; i < nf; i++) ba[nb++] = fa[i];
  ARG(fa, nf, GK_ARG_Y, y, 3, s3);
  ARG(ba, nb, GK_ARG_DY, dy, 3, s3); ARG(ba, nb, GK_ARG_DU, du, 3, s3); ARG(ba, nb, GK_ARG_DDELTA, ddelta, 3, s3);
  ARG(ba, nb, GK_ARG_DA, dA, 2, sa); ARG(ba, nb, GK_ARG_DB, dB, 3, sb); ARG(ba, nb, GK_ARG_DC, dC, 3, sb);
  ARG(ba, nb, GK_ARG_DD, dD, 1, &D); ARG(ba, nb, GK_ARG_DZ, dz, 3, s3); ARG(ba, nb, GK_ARG_DDELTA_BIAS, dbias, 1, &D);
  size_t wf, wb;
  gk_plan_workspace_size(fwd, &wf);
  gk_plan_workspace_size(bwd, &wb);
  size_t wmax = wf > wb ? wf : wb;
  void *ws = aligned_alloc(64, (wmax + 63) / 64 * 64);
  double best[4];
  if (!best_of(5, fwd, fa, nf, bwd, ba, nb, ws, wmax, best)) return 1;
  printf("selective scan %s B=%lld D=%lld N=%lld L=%lld, %d threads: forward %.1f ms, backward %.1f ms, "
         "total %.1f ms (best of 5; workspace %.1f MB fwd, %.1f MB bwd); CPU time forward %.1f ms, backward %.1f ms\n",
         dtype_name, (long long)B, (long long)D, (long long)N, (long long)L, threads, 1e3 * best[0], 1e3 * best[1],
         1e3 * (best[0] + best[1]), wf / 1e6, wb / 1e6, 1e3 * best[2], 1e3 * best[3]);
  gk_plan_destroy(fwd);
  gk_plan_destroy(bwd);
  return 0;
}
