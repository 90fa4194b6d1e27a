// Description of the selective scan: option checks and tensors.
//   u, delta, z, y (B, D, L); A (D, N); B, C (D, N) | (B, N, L) | (B, G, N, L);
//   D, delta_bias (D); initial/final state (B, D, N) and chunk_states
//   (B, D, nchunks, N) in the state dtype. Dtypes: u, delta, z, y and their
//   gradients desc.dtype; A, D, delta_bias and their gradients
//   desc.param_dtype; B, dB desc.scan.b_dtype; C, dC desc.scan.c_dtype (each
//   desc.dtype, or f32 with f16/bf16 desc.dtype, as mamba-ssm takes them).
#include "scan.h"

static gk_status check_flag(const char *name, int v) {
  if (v != 0 && v != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "selective_scan: desc.scan.%s = %d is neither 0 nor 1", name, v);
  return GK_SUCCESS;
}

static int bc_shape(const gk_scan_dims *s, gk_scan_layout layout, int64_t G, int64_t *shape) {
  switch (layout) {
  case GK_SCAN_SHARED: shape[0] = s->D; shape[1] = s->N; return 2;
  case GK_SCAN_BATCH: shape[0] = s->B; shape[1] = s->N; shape[2] = s->L; return 3;
  case GK_SCAN_GROUPED: break;
  }
  shape[0] = s->B; shape[1] = G; shape[2] = s->N; shape[3] = s->L;
  return 4;
}

gk_status gk_describe_scan(gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  if (d->rank != 3)
    return gk_fail(GK_ERR_BAD_RANK, "selective_scan: desc.rank = %d, u must be (B, D, L): rank 3", d->rank);
  if (d->scan.d_state < 1 || d->scan.d_state > (int64_t)1 << 24)
    return gk_fail(GK_ERR_INVALID_VALUE, "selective_scan: desc.scan.d_state = %lld is outside 1..2^24",
                   (long long)d->scan.d_state);
  if (d->scan.chunk_size < 1 || d->scan.chunk_size > 128)
    return gk_fail(GK_ERR_INVALID_VALUE, "selective_scan: desc.scan.chunk_size = %lld is outside 1..128",
                   (long long)d->scan.chunk_size);
  const char *lnames[2] = {"b_layout", "c_layout"};
  gk_scan_layout layouts[2] = {d->scan.b_layout, d->scan.c_layout};
  for (int i = 0; i < 2; i++) {
    if ((unsigned)layouts[i] > GK_SCAN_GROUPED)
      return gk_fail(GK_ERR_INVALID_VALUE,
                     "selective_scan: desc.scan.%s = %d is not GK_SCAN_SHARED (0), GK_SCAN_BATCH (1) or "
                     "GK_SCAN_GROUPED (2)", lnames[i], (int)layouts[i]);
    if (layouts[i] == GK_SCAN_GROUPED &&
        (d->scan.groups < 1 || d->scan.groups > d->shape[1] || d->shape[1] % d->scan.groups != 0))
      return gk_fail(GK_ERR_INVALID_VALUE,
                     "selective_scan: desc.scan.groups = %lld must divide D = desc.shape[1] = %lld (%s is grouped)",
                     (long long)d->scan.groups, (long long)d->shape[1], lnames[i]);
  }
  if (d->scan.b_layout != GK_SCAN_SHARED && d->scan.c_layout != GK_SCAN_SHARED &&
      d->scan.b_layout != d->scan.c_layout && d->scan.groups != 1)
    return gk_fail(GK_ERR_UNSUPPORTED,
                   "selective_scan: desc.scan.b_layout = %d and c_layout = %d with desc.scan.groups = %lld: "
                   "per-batch B and C must have the same groups (as in mamba-ssm)",
                   (int)d->scan.b_layout, (int)d->scan.c_layout, (long long)d->scan.groups);
  const char *names[] = {"has_D", "has_z", "has_delta_bias", "delta_softplus", "has_initial_state",
                         "has_final_state"};
  const int values[] = {d->scan.has_D, d->scan.has_z, d->scan.has_delta_bias, d->scan.delta_softplus,
                        d->scan.has_initial_state, d->scan.has_final_state};
  for (int i = 0; i < 6; i++) {
    gk_status s = check_flag(names[i], values[i]);
    if (s != GK_SUCCESS) return s;
  }
  if (d->accumulate != 0 && d->accumulate != 1)
    return gk_fail(GK_ERR_INVALID_VALUE, "selective_scan: desc.accumulate = %d is neither 0 nor 1", d->accumulate);
  gk_status status = gk_check_mixed_dtype(d, "scan.b_dtype", d->scan.b_dtype);
  if (status == GK_SUCCESS) status = gk_check_mixed_dtype(d, "scan.c_dtype", d->scan.c_dtype);
  if (status != GK_SUCCESS) return status;
  gk_scan_dims s = gk_scan_dims_of(d);
  // Element counts of the chunk states (B D N nchunks) and of B/C (B G N L).
  int64_t G = s.Gb > s.Gc ? s.Gb : s.Gc, n1 = s.B, n2 = s.B;
  int64_t f1[3] = {s.D, s.N, s.nchunks > 0 ? s.nchunks : 1}, f2[3] = {s.L, s.N, G > 0 ? G : 1};
  for (int i = 0; i < 3; i++)
    if (__builtin_mul_overflow(n1, f1[i], &n1) || __builtin_mul_overflow(n2, f2[i], &n2) ||
        n1 > (INT64_MAX >> 4) || n2 > (INT64_MAX >> 4))
      return gk_fail(GK_ERR_BAD_SHAPE, "selective_scan: desc.shape with desc.scan.d_state = %lld: the element "
                     "count of the states or of B/C overflows", (long long)s.N);
  gk_dtype dt = d->dtype, st = gk_scan_state_dtype(dt), pt = (gk_dtype)d->param_dtype,
           bt = (gk_dtype)d->scan.b_dtype, ct = (gk_dtype)d->scan.c_dtype;
  int64_t a_shape[2] = {s.D, s.N}, state[3] = {s.B, s.D, s.N}, chunks[4] = {s.B, s.D, s.nchunks, s.N};
  int64_t b_shape[4], c_shape[4];
  int b_rank = bc_shape(&s, d->scan.b_layout, d->scan.groups, b_shape);
  int c_rank = bc_shape(&s, d->scan.c_layout, d->scan.groups, c_shape);
  bool fwd = d->direction == GK_FORWARD;
  gk_spec_set(plan, GK_ARG_U, false, dt, 3, d->shape);
  gk_spec_set(plan, GK_ARG_DELTA, false, dt, 3, d->shape);
  gk_spec_set(plan, GK_ARG_A, false, pt, 2, a_shape);
  gk_spec_set(plan, GK_ARG_B, false, bt, b_rank, b_shape);
  gk_spec_set(plan, GK_ARG_C, false, ct, c_rank, c_shape);
  if (d->scan.has_D) gk_spec_set(plan, GK_ARG_D, false, pt, 1, &s.D);
  if (d->scan.has_z) gk_spec_set(plan, GK_ARG_Z, false, dt, 3, d->shape);
  if (d->scan.has_delta_bias) gk_spec_set(plan, GK_ARG_DELTA_BIAS, false, pt, 1, &s.D);
  if (d->scan.has_initial_state) gk_spec_set(plan, GK_ARG_INITIAL_STATE, false, st, 3, state);
  // Saved chunk states: output of forward, input of backward.
  gk_spec_set(plan, GK_ARG_CHUNK_STATES, fwd, st, 4, chunks);
  if (fwd) {
    gk_spec_set(plan, GK_ARG_Y, true, dt, 3, d->shape);
    if (d->scan.has_final_state) gk_spec_set(plan, GK_ARG_FINAL_STATE, true, st, 3, state);
    return GK_SUCCESS;
  }
  gk_spec_set(plan, GK_ARG_DY, false, dt, 3, d->shape);
  if (d->scan.has_final_state) gk_spec_set(plan, GK_ARG_DFINAL_STATE, false, st, 3, state);
  gk_spec_set(plan, GK_ARG_DU, true, dt, 3, d->shape);
  gk_spec_set(plan, GK_ARG_DDELTA, true, dt, 3, d->shape);
  gk_spec_set(plan, GK_ARG_DA, true, pt, 2, a_shape);
  gk_spec_set(plan, GK_ARG_DB, true, bt, b_rank, b_shape);
  gk_spec_set(plan, GK_ARG_DC, true, ct, c_rank, c_shape);
  if (d->scan.has_D) gk_spec_set(plan, GK_ARG_DD, true, pt, 1, &s.D);
  if (d->scan.has_z) gk_spec_set(plan, GK_ARG_DZ, true, dt, 3, d->shape);
  if (d->scan.has_delta_bias) gk_spec_set(plan, GK_ARG_DDELTA_BIAS, true, pt, 1, &s.D);
  if (d->scan.has_initial_state) gk_spec_set(plan, GK_ARG_DINITIAL_STATE, true, st, 3, state);
  return GK_SUCCESS;
}
