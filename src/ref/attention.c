// Reference kernels for attention: row by row over the full score row, in
// f64, on copies of the tensors in the workspace.
//   forward:  s_ij = scale q_i . k_j (j <= i if causal); lse_i = log sum_j exp(s_ij);
//             o_i = sum_j exp(s_ij - lse_i) v_j
//   backward: p_ij = exp(s_ij - lse_i) from the saved lse; D_i = dO_i . o_i (saved o);
//             ds_ij = p_ij (dO_i . v_j - D_i); dq_i = scale sum_j ds_ij k_j      (=)
//             dk_j = scale sum_i ds_ij q_i; dv_j = sum_i p_ij dO_i, over every
//             query head of the kv head                                        (=)
#include "../ops/transformer.h"

#include <math.h>

typedef struct ref_attn {
  int64_t B, H, Hkv, T, Dh, nq, nkv;  // nq, nkv: elements of q and of k
  bool causal;
  double scale;
} ref_attn;

static ref_attn dims_of(const gk_plan *plan) {
  const gk_op_desc *d = &plan->desc;
  ref_attn r = {d->shape[0], d->shape[1], d->attn.kv_heads, d->shape[2], d->shape[3], 0, 0, d->attn.causal != 0,
                d->attn.scale};
  r.nq = r.B * r.H * r.T * r.Dh;
  r.nkv = r.B * r.Hkv * r.T * r.Dh;
  return r;
}

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t c = 0; c < n; c++) s += a[c] * b[c];
  return s;
}

static gk_status ref_attention_fwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  ref_attn r = dims_of(plan);
  if (r.nq == 0) return GK_SUCCESS;
  double *q = ws, *k = q + r.nq, *v = k + r.nkv, *o = v + r.nkv, *lse = o + r.nq, *s = lse + r.B * r.H * r.T;
  gk_load_f64(a[GK_ARG_Q], 0, r.nq, q);
  gk_load_f64(a[GK_ARG_K], 0, r.nkv, k);
  gk_load_f64(a[GK_ARG_V], 0, r.nkv, v);
  for (int64_t bh = 0; bh < r.B * r.H; bh++) {
    int64_t kvh = bh / r.H * r.Hkv + bh % r.H / (r.H / r.Hkv);
    const double *kh = k + kvh * r.T * r.Dh, *vh = v + kvh * r.T * r.Dh;
    for (int64_t i = 0; i < r.T; i++) {
      int64_t n = r.causal ? i + 1 : r.T, row = bh * r.T + i;
      double m = -INFINITY, l = 0, *oi = o + row * r.Dh;
      for (int64_t j = 0; j < n; j++) {
        s[j] = r.scale * dot(q + row * r.Dh, kh + j * r.Dh, r.Dh);
        m = s[j] > m ? s[j] : m;
      }
      for (int64_t j = 0; j < n; j++) l += exp(s[j] - m);
      lse[row] = m + log(l);
      for (int64_t c = 0; c < r.Dh; c++) oi[c] = 0;
      for (int64_t j = 0; j < n; j++) {
        double p = exp(s[j] - lse[row]);
        for (int64_t c = 0; c < r.Dh; c++) oi[c] += p * vh[j * r.Dh + c];
      }
    }
  }
  gk_store_f64(a[GK_ARG_Y], 0, r.nq, o);
  gk_store_f64(a[GK_ARG_LSE], 0, r.B * r.H * r.T, lse);
  return GK_SUCCESS;
}

static gk_status ref_attention_bwd(const gk_plan *plan, const gk_kernel_args a, void *ws) {
  ref_attn r = dims_of(plan);
  if (r.nq == 0) return GK_SUCCESS;
  double *q = ws, *k = q + r.nq, *v = k + r.nkv, *o = v + r.nkv, *g = o + r.nq, *lse = g + r.nq;
  double *dq = lse + r.B * r.H * r.T, *dk = dq + r.nq, *dv = dk + r.nkv;
  gk_load_f64(a[GK_ARG_Q], 0, r.nq, q);
  gk_load_f64(a[GK_ARG_K], 0, r.nkv, k);
  gk_load_f64(a[GK_ARG_V], 0, r.nkv, v);
  gk_load_f64(a[GK_ARG_Y], 0, r.nq, o);
  gk_load_f64(a[GK_ARG_DY], 0, r.nq, g);
  gk_load_f64(a[GK_ARG_LSE], 0, r.B * r.H * r.T, lse);
  for (int64_t i = 0; i < r.nq; i++) dq[i] = 0;
  for (int64_t i = 0; i < 2 * r.nkv; i++) dk[i] = 0;
  for (int64_t bh = 0; bh < r.B * r.H; bh++) {
    int64_t kvh = bh / r.H * r.Hkv + bh % r.H / (r.H / r.Hkv), kv0 = kvh * r.T * r.Dh;
    for (int64_t i = 0; i < r.T; i++) {
      int64_t n = r.causal ? i + 1 : r.T, row = bh * r.T + i;
      const double *qi = q + row * r.Dh, *gi = g + row * r.Dh;
      double D = dot(gi, o + row * r.Dh, r.Dh), *dqi = dq + row * r.Dh;
      for (int64_t j = 0; j < n; j++) {
        const double *kj = k + kv0 + j * r.Dh, *vj = v + kv0 + j * r.Dh;
        double p = exp(r.scale * dot(qi, kj, r.Dh) - lse[row]), ds = p * (dot(gi, vj, r.Dh) - D);
        for (int64_t c = 0; c < r.Dh; c++) {
          dqi[c] += r.scale * ds * kj[c];
          dk[kv0 + j * r.Dh + c] += r.scale * ds * qi[c];
          dv[kv0 + j * r.Dh + c] += p * gi[c];
        }
      }
    }
  }
  gk_store_f64(a[GK_ARG_DQ], 0, r.nq, dq);
  gk_store_f64(a[GK_ARG_DK], 0, r.nkv, dk);
  gk_store_f64(a[GK_ARG_DV], 0, r.nkv, dv);
  return GK_SUCCESS;
}

static size_t ref_fwd_workspace(const gk_plan *plan) {
  ref_attn r = dims_of(plan);
  return (size_t)(2 * r.nq + 2 * r.nkv + r.B * r.H * r.T + r.T) * sizeof(double);
}

static size_t ref_bwd_workspace(const gk_plan *plan) {
  ref_attn r = dims_of(plan);
  return (size_t)(4 * r.nq + 4 * r.nkv + r.B * r.H * r.T) * sizeof(double);
}

const gk_kernel gk_ref_attention_fwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_fwd_workspace,
                                        .run = ref_attention_fwd};
const gk_kernel gk_ref_attention_bwd = {.name = "ref", .backend = GK_BACKEND_REF, .isa = "scalar", .workspace = ref_bwd_workspace,
                                        .run = ref_attention_bwd};
