// Reference kernels for the causal depthwise conv1d: channel by channel, f64
// math. x viewed as (B, D, L); weight (D, W); states (B, D, W-1).
//   forward:  xpad = [initial_state | x] (zeros without a state), length L+W-1
//             pre_t = bias + sum_k w[k] xpad[t+k];  y_t = silu ? silu(pre_t) : pre_t
//             final_state[j] = xpad[L+j]
//   backward: g_t = dy_t * (silu ? silu'(pre_t) : 1)
//             dxpad[p] = sum_k w[k] g[p-k] (0 <= p-k < L) + (p >= L ? dfinal_state[p-L] : 0)
//             dx[t] = dxpad[t+W-1];  dinitial_state[j] = dxpad[j]       (overwritten)
//             dweight[k] (=/+=) sum_{b,t} g_t xpad[t+k];  dbias (=/+=) sum_{b,t} g_t
#include "../core/act_math.h"
#include "../ops/conv1d.h"

typedef struct conv_row {
  gk_tensor x, init;   // x (L), init (W-1) of one (b, d); init.data NULL without a state
  int64_t L, W;
} conv_row;

static double xpad(const conv_row *r, int64_t p) {
  if (p >= r->W - 1) return gk_get(&r->x, p - (r->W - 1));
  return r->init.data ? gk_get(&r->init, p) : 0.0;
}

static conv_row row_of(const gk_plan *plan, const gk_kernel_args a, int64_t b, int64_t d) {
  gk_conv_dims s = gk_conv_dims_of(&plan->desc);
  gk_tensor x = gk_conv_view(a[GK_ARG_X], &plan->desc);
  conv_row r = {gk_tensor_row(&x, 1, b * s.D + d), {0}, s.L, s.W};
  if (a[GK_ARG_INITIAL_STATE]) r.init = gk_tensor_row(a[GK_ARG_INITIAL_STATE], 1, b * s.D + d);
  return r;
}

static double pre_act(const conv_row *r, const gk_tensor *w, double bias, int64_t t) {
  double acc = bias;
  for (int64_t k = 0; k < r->W; k++) acc += gk_get(w, k) * xpad(r, t + k);
  return acc;
}

static gk_status ref_conv1d_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  (void)ws;
  const gk_op_desc *desc = &plan->desc;
  gk_conv_dims s = gk_conv_dims_of(desc);
  gk_tensor y = gk_conv_view(a[GK_ARG_Y], desc);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t d = 0; d < s.D; d++) {
      conv_row r = row_of(plan, a, b, d);
      gk_tensor w = gk_tensor_row(a[GK_ARG_WEIGHT], 1, d), yr = gk_tensor_row(&y, 1, b * s.D + d);
      double bias = a[GK_ARG_BIAS] ? gk_get(a[GK_ARG_BIAS], d) : 0.0;
      for (int64_t t = 0; t < s.L; t++) {
        double v = pre_act(&r, &w, bias, t);
        gk_set(&yr, t, desc->conv.silu ? gk_silu_f64(v) : v);
      }
      if (a[GK_ARG_FINAL_STATE]) {
        gk_tensor fs = gk_tensor_row(a[GK_ARG_FINAL_STATE], 1, b * s.D + d);
        for (int64_t j = 0; j < s.W - 1; j++) gk_set(&fs, j, xpad(&r, s.L + j));
      }
    }
  return GK_SUCCESS;
}

static gk_status ref_conv1d_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  const gk_op_desc *desc = &plan->desc;
  gk_conv_dims s = gk_conv_dims_of(desc);
  gk_tensor dy = gk_conv_view(a[GK_ARG_DY], desc), dx = gk_conv_view(a[GK_ARG_DX], desc);
  const gk_tensor *dw = a[GK_ARG_DWEIGHT], *db = a[GK_ARG_DBIAS];
  double *g = ws, *dw_acc = g + s.L;  // g (L), then dweight sums (W)
  for (int64_t d = 0; d < s.D; d++) {
    gk_tensor w = gk_tensor_row(a[GK_ARG_WEIGHT], 1, d);
    double bias = a[GK_ARG_BIAS] ? gk_get(a[GK_ARG_BIAS], d) : 0.0, db_acc = 0;
    for (int64_t k = 0; k < s.W; k++) dw_acc[k] = 0;
    for (int64_t b = 0; b < s.B; b++) {
      conv_row r = row_of(plan, a, b, d);
      gk_tensor dyr = gk_tensor_row(&dy, 1, b * s.D + d), dxr = gk_tensor_row(&dx, 1, b * s.D + d);
      gk_tensor dfs = {0}, dis = {0};
      if (a[GK_ARG_DFINAL_STATE]) dfs = gk_tensor_row(a[GK_ARG_DFINAL_STATE], 1, b * s.D + d);
      if (a[GK_ARG_DINITIAL_STATE]) dis = gk_tensor_row(a[GK_ARG_DINITIAL_STATE], 1, b * s.D + d);
      for (int64_t t = 0; t < s.L; t++) {
        g[t] = gk_get(&dyr, t);
        if (desc->conv.silu) g[t] *= gk_dsilu_f64(pre_act(&r, &w, bias, t));
        db_acc += g[t];
        for (int64_t k = 0; k < s.W; k++) dw_acc[k] += g[t] * xpad(&r, t + k);
      }
      for (int64_t p = 0; p < s.L + s.W - 1; p++) {
        double v = p >= s.L && dfs.data ? gk_get(&dfs, p - s.L) : 0.0;
        for (int64_t k = 0; k < s.W; k++)
          if (p - k >= 0 && p - k < s.L) v += gk_get(&w, k) * g[p - k];
        if (p >= s.W - 1) gk_set(&dxr, p - (s.W - 1), v);
        else if (dis.data) gk_set(&dis, p, v);
      }
    }
    for (int64_t k = 0; k < s.W; k++) gk_set(dw, d * s.W + k, dw_acc[k] + (desc->accumulate ? gk_get(dw, d * s.W + k) : 0));
    if (db) gk_set(db, d, db_acc + (desc->accumulate ? gk_get(db, d) : 0));
  }
  return GK_SUCCESS;
}

static size_t ref_conv1d_bwd_workspace(const gk_plan *plan) {
  gk_conv_dims s = gk_conv_dims_of(&plan->desc);
  return (size_t)(s.L + s.W) * sizeof(double);
}

const gk_kernel gk_ref_conv1d_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar",
                                     .run = ref_conv1d_fwd};
const gk_kernel gk_ref_conv1d_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_conv1d_bwd_workspace,
                                     .run = ref_conv1d_bwd};
