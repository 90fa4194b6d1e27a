// The parts of a language model that do not depend on its blocks: the
// architectures' tables, the parameter table's layout, the run, the token
// embedding, the final RMSNorm, the LM head (the embedding, or its own weight
// when untied), and the loss. The blocks are the architecture's (arch.h),
// called through its table.
//
//   h0 = embedding(tokens)            (B, T, D)
//   h  = blocks(h0)                    (the architecture's table: mamba.c, llama.c)
//   hf, rstd = rmsnorm(h) * nf         (B, T, D)
//   logits = hf W^T                    (B T, V), W = gk_model_head: the
//                                      embedding E (tied) or lm_head (untied)
//   loss = mean cross-entropy over targets != GK_IGNORE_INDEX
// Backward overwrites every gradient: the head writes dW; the embedding's
// backward adds its part to dE when tied (accumulate = 1), writes dE when
// untied.
#include "arch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const gk_arch_table *gk_arch_table_of(gk_arch arch) {
  switch (arch) {
  case GK_ARCH_MAMBA: return &gk_mamba_arch;
  case GK_ARCH_LLAMA: return &gk_llama_arch;
  }
  return NULL;
}

static const gk_arch_table *arch_of(const gk_model *m) { return gk_arch_table_of(m->cfg.arch); }

gk_status gk_model_config_finish(gk_model_config *c) {
  const gk_arch_table *a = gk_arch_table_of(c->arch);
  if (!a) return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: arch = %d is neither mamba nor llama", (int)c->arch);
  if (c->vocab < 2 || c->d_model < 1 || c->n_layers < 1)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: vocab = %d, d_model = %d, n_layers = %d (need >= 2, >= 1, >= 1)",
                      c->vocab, c->d_model, c->n_layers);
  if (c->norm_eps <= 0) c->norm_eps = 1e-5;
  return a->finish(c);
}

gk_status gk_model_init(gk_model *m, const gk_model_config *c, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->cfg = *c;
  gk_status s = gk_model_config_finish(&m->cfg);
  if (s != GK_SUCCESS) return s;
  // At GK_PARAM_EMBEDDING and GK_PARAM_NORM_F; the blocks' from GK_PARAM_BLOCKS.
  s = gk_model_add_param(m, "embedding", 2, m->cfg.vocab, m->cfg.d_model, true);
  if (s == GK_SUCCESS) s = gk_model_add_param(m, "norm_f", 1, m->cfg.d_model, 1, false);
  if (s == GK_SUCCESS) s = arch_of(m)->declare(m);
  if (s == GK_SUCCESS && m->cfg.untied_head)
    s = gk_model_add_param(m, "lm_head", 2, m->cfg.vocab, m->cfg.d_model, true);
  if (s != GK_SUCCESS) {
    gk_model_free(m);
    return s;
  }
  // Decayed parameters first, each 16-float aligned.
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < m->nparams; i++) {
      gk_param *p = &m->params[i];
      if (p->decay != (pass == 0)) continue;
      p->offset = m->n_total;
      m->n_total += (p->numel + 15) / 16 * 16;
      if (pass == 0) m->n_decay = m->n_total;
    }
  m->w = aligned_alloc(64, (size_t)m->n_total * sizeof(float));
  m->g = aligned_alloc(64, (size_t)m->n_total * sizeof(float));
  if (!m->w || !m->g) {
    gk_model_free(m);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "model: no memory for %lld parameters", (long long)m->n_total);
  }
  memset(m->w, 0, (size_t)m->n_total * sizeof(float));
  memset(m->g, 0, (size_t)m->n_total * sizeof(float));
  arch_of(m)->init(m, seed);
  const gk_param *head = gk_model_head(m), *emb = &m->params[GK_PARAM_EMBEDDING];
  if (head != emb) memcpy(m->w + head->offset, m->w + emb->offset, (size_t)emb->numel * sizeof(float));
  return GK_SUCCESS;
}

const gk_param *gk_model_head(const gk_model *m) {
  return &m->params[m->cfg.untied_head ? m->nparams - 1 : GK_PARAM_EMBEDDING];
}

void gk_model_free(gk_model *m) {
  free(m->params);
  free(m->w);
  free(m->g);
  gk_buffer_free(m->dev);
  memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------- on a device

// Where the tensors of `backend` live; an error naming it when it is not a
// device backend that can run here.
static gk_status device_of(gk_backend backend, gk_device_type *device) {
  for (int i = 0; i < gk_backend_count(); i++) {
    gk_backend_info info;
    if (gk_backend_get(i, &info) != GK_SUCCESS || info.id != backend) continue;
    if (info.device == GK_DEVICE_CPU)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: backend %s runs on the host, not a device", info.name);
    if (!info.available)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "model: backend %s cannot run here: %s", info.name, info.reason);
    *device = info.device;
    return GK_SUCCESS;
  }
  return gk_nn_fail(GK_ERR_UNSUPPORTED, "model: backend %s (%d) is not built into this gradkern",
                    gk_backend_name(backend), (int)backend);
}

gk_status gk_model_to_device(gk_model *m, gk_backend backend) {
  gk_device_type device;
  gk_status s = device_of(backend, &device);
  if (s != GK_SUCCESS) return s;
  if (m->dev)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: already on backend %s", gk_backend_name(m->backend));
  size_t bytes = sizeof(float) * (size_t)m->n_total;
  if ((s = gk_buffer_alloc(backend, 2 * bytes, &m->dev)) != GK_SUCCESS) return s;
  m->backend = backend;
  m->dw = gk_buffer_address(m->dev);
  m->dg = m->dw + m->n_total;
  memset(m->g, 0, bytes);
  s = gk_buffer_upload(m->dev, bytes, m->g, bytes);
  if (s == GK_SUCCESS) s = gk_model_upload(m);
  if (s != GK_SUCCESS) {
    gk_buffer_free(m->dev);
    m->dev = NULL;
    m->dw = m->dg = NULL;
    m->backend = GK_BACKEND_AUTO;
  }
  return s;
}

gk_status gk_model_upload(gk_model *m) {
  if (!m->dev) return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: not on a device (gk_model_to_device)");
  return gk_buffer_upload(m->dev, 0, m->w, sizeof(float) * (size_t)m->n_total);
}

gk_status gk_model_download(gk_model *m) {
  if (!m->dev) return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: not on a device (gk_model_to_device)");
  size_t bytes = sizeof(float) * (size_t)m->n_total;
  gk_status s = gk_buffer_download(m->dev, 0, m->w, bytes);
  return s == GK_SUCCESS ? gk_buffer_download(m->dev, bytes, m->g, bytes) : s;
}

static gk_tensor all_of(const gk_model *m, float *host, float *device) {
  gk_tensor t = gk_t1(m->dev ? device : host, m->n_total);
  if (m->dev) device_of(m->backend, &t.device);
  return t;
}

gk_tensor gk_model_weights(const gk_model *m) { return all_of(m, m->w, m->dw); }
gk_tensor gk_model_grads(const gk_model *m) { return all_of(m, m->g, m->dg); }

// ---------------------------------------------------------------- the run

// The plans and buffers of the embedding, final norm, head and loss.
typedef struct head_state {
  gk_plan *emb_f, *emb_b, *norm_f, *norm_b, *head_f, *head_b, *ce;
  float *h0, *hf, *rstd, *dh, *dhf;
  float *loss;    // (): the cross-entropy's output
  float *h_last;  // the blocks' output of the last forward (in their arena)
} head_state;

static head_state *head_of(gk_run *r) { return (head_state *)r->head; }

// Carve (and in the first pass plan) what head_state holds.
static gk_status head_layout(gk_run *r, head_state *h) {
  const gk_model_config *c = &r->m->cfg;
  int64_t rows = (int64_t)r->B * r->T, D = c->d_model, V = c->vocab;
  gk_run_carve(r, &h->h0, rows * D);
  gk_run_carve(r, &h->hf, rows * D);
  gk_run_carve_f32(r, &h->rstd, rows);
  gk_run_carve_f32(r, &h->loss, 1);
  gk_run_carve(r, &r->logits, rows * V);
  if (r->dtype != GK_F32 && !r->train) gk_run_carve_f32(r, &r->logits32, rows * V);
  if (r->train) {
    gk_run_carve(r, &h->dh, rows * D);
    gk_run_carve(r, &h->dhf, rows * D);
  }
  if (r->placing) return GK_SUCCESS;
  gk_status s;
  gk_op_desc d;
  for (int dir = GK_FORWARD; dir <= (r->train ? GK_BACKWARD : GK_FORWARD); dir++) {
    gk_op_desc_init(&d, GK_OP_EMBEDDING, (gk_direction)dir, GK_F32, 2, (int64_t[]){r->B, r->T});
    d.index_dtype = GK_I32;
    d.embedding.num_embeddings = V;
    d.embedding.dim = D;
    d.accumulate = !c->untied_head;  // backward adds to a tied head's dE
    if ((s = gk_run_plan(r, &d, dir ? &h->emb_b : &h->emb_f)) != GK_SUCCESS) return s;
    d = gk_desc_rmsnorm((gk_direction)dir, rows, D, c->norm_eps);
    if ((s = gk_run_plan(r, &d, dir ? &h->norm_b : &h->norm_f)) != GK_SUCCESS) return s;
    d = gk_desc_linear((gk_direction)dir, rows, D, V);
    if ((s = gk_run_plan(r, &d, dir ? &h->head_b : &h->head_f)) != GK_SUCCESS) return s;
  }
  gk_op_desc_init(&d, GK_OP_CROSS_ENTROPY, GK_FORWARD, GK_F32, 2, (int64_t[]){rows, V});
  d.index_dtype = GK_I32;
  d.ce.fused_grad = r->train;
  d.ce.grad_scale = r->loss_scale;
  return gk_run_plan(r, &d, &h->ce);
}

gk_status gk_run_set_loss_scale(gk_run *r, double scale) {
  if (!(scale > 0) || !isfinite(scale))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: loss scale = %g must be finite and > 0", scale);
  head_state *h = head_of(r);
  if (scale == r->loss_scale) return GK_SUCCESS;
  gk_op_desc d;
  gk_plan *ce;
  gk_plan_get_desc(h->ce, &d);
  d.ce.grad_scale = scale;
  gk_status s = gk_plan_create(&d, &ce);
  if (s != GK_SUCCESS) return s;
  for (int i = 0; i < r->nplans; i++)
    if (r->plans[i] == h->ce) r->plans[i] = ce;
  gk_plan_destroy(h->ce);
  h->ce = ce;
  r->loss_scale = scale;
  return GK_SUCCESS;
}

// A run computing in `dtype`; `carry`: a piece run (its recurrent state kept
// from call to call). With `measure`, only its plans are made: *measure = the
// bytes it would hold, and nothing is allocated or returned.
// Host memory, or a buffer of a device run's backend (*buf), of `bytes` bytes.
static void *run_alloc(gk_run *r, size_t bytes, gk_buffer **buf) {
  bytes = (bytes + 63) / 64 * 64;
  if (r->backend == GK_BACKEND_AUTO) return aligned_alloc(64, bytes);
  return gk_buffer_alloc(r->backend, bytes, buf) == GK_SUCCESS ? gk_buffer_address(*buf) : NULL;
}

static gk_status run_create(gk_model *m, int batch, int seq_len, bool train, gk_dtype dtype, bool carry,
                            gk_backend backend, size_t *measure, gk_run **out) {
  *out = NULL;
  if (batch < 1 || seq_len < 1)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: batch = %d and seq_len = %d must be >= 1", batch, seq_len);
  if (dtype != GK_F32 && dtype != GK_BF16 && dtype != GK_F16)
    return gk_nn_fail(GK_ERR_BAD_DTYPE, "model: dtype = %s (%d): a run computes in f32, bf16 or f16",
                      gk_dtype_name(dtype), (int)dtype);
  gk_device_type device = GK_DEVICE_CPU;
  if (backend != GK_BACKEND_AUTO) {
    if (!m->dev || m->backend != backend)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: a device run needs the model on that device first "
                        "(gk_model_to_device)");
    if (dtype != GK_F32 || carry)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "model: a device run computes in f32 over whole sequences");
    gk_status s = device_of(backend, &device);
    if (s != GK_SUCCESS) return s;
  }
  gk_run *r = calloc(1, sizeof *r);
  head_state *h = calloc(1, sizeof *h);
  if (!r || !h) {
    free(r);
    free(h);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "model: no memory for a run");
  }
  r->m = m;
  r->B = batch;
  r->T = seq_len;
  r->train = train;
  r->dtype = dtype;
  r->esize = gk_dtype_size(dtype);
  r->loss_scale = 1;
  r->carry = carry;
  r->backend = backend;
  r->device = device;
  r->head = h;
  gk_status s = GK_SUCCESS;
  for (int pass = 0; pass < 2 && s == GK_SUCCESS; pass++) {
    r->placing = pass == 1;
    r->act_bytes = r->f32_bytes = 0;
    s = head_layout(r, h);
    if (s == GK_SUCCESS) s = arch_of(m)->layout(r);
    if (s == GK_SUCCESS && measure) {
      *measure = gk_run_bytes(r);
      gk_run_free(r);
      return GK_SUCCESS;
    }
    if (s == GK_SUCCESS && pass == 0) {
      r->act_total = r->act_bytes;
      r->arena = run_alloc(r, r->act_bytes + r->f32_bytes + 64, &r->dev_arena);
      if (dtype != GK_F32) {  // the weights' 16-bit copy; a train run's 16-bit gradients
        size_t copy = ((size_t)m->n_total * 2 + 63) / 64 * 64;
        r->w16 = aligned_alloc(64, copy);
        r->g16 = train ? aligned_alloc(64, copy) : NULL;
        r->grad16 = train ? calloc((size_t)m->nparams, sizeof *r->grad16) : NULL;
        if (!r->w16 || (train && (!r->g16 || !r->grad16)))
          s = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "model: no memory for the 16-bit copies of %lld parameters",
                         (long long)m->n_total);
      }
      r->ws = run_alloc(r, r->ws_bytes + 64, &r->dev_ws);
      size_t tokens = (sizeof(int32_t) * (size_t)batch * (size_t)seq_len + 63) / 64 * 64;
      r->index = run_alloc(r, 2 * tokens, &r->dev_tokens);
      r->target = r->index ? (int32_t *)(void *)((char *)r->index + tokens) : NULL;
      if (s == GK_SUCCESS && (!r->arena || !r->ws || !r->index))
        s = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "model: no %s memory for %zu bytes of activations",
                       backend == GK_BACKEND_AUTO ? "host" : gk_backend_name(backend), r->act_bytes + r->f32_bytes);
    }
  }
  if (s != GK_SUCCESS) {
    gk_run_free(r);
    return s;
  }
  *out = r;
  return GK_SUCCESS;
}

gk_status gk_run_create(gk_model *m, int batch, int seq_len, bool train, gk_run **out) {
  return run_create(m, batch, seq_len, train, GK_F32, false, GK_BACKEND_AUTO, NULL, out);
}

gk_status gk_run_create_dtype(gk_model *m, int batch, int seq_len, bool train, gk_dtype dtype, gk_run **out) {
  return run_create(m, batch, seq_len, train, dtype, false, GK_BACKEND_AUTO, NULL, out);
}

gk_status gk_run_create_device(gk_model *m, int batch, int seq_len, bool train, gk_run **out) {
  return run_create(m, batch, seq_len, train, GK_F32, false, m->dev ? m->backend : GK_BACKEND_CPU, NULL, out);
}

gk_status gk_run_measure(gk_model *m, int batch, int seq_len, bool train, size_t *bytes) {
  gk_run *r;
  *bytes = 0;
  return run_create(m, batch, seq_len, train, GK_F32, false, GK_BACKEND_AUTO, bytes, &r);
}

gk_status gk_run_create_piece(gk_model *m, int batch, int piece, gk_run **out) {
  *out = NULL;
  if (arch_of(m)->windowed)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "model: %s has no recurrent state to carry between pieces (its attention "
                      "needs the whole sequence at once)", m->cfg.arch == GK_ARCH_LLAMA ? "llama" : "this model");
  gk_status s = run_create(m, batch, piece, false, GK_F32, true, GK_BACKEND_AUTO, NULL, out);
  if (s == GK_SUCCESS) gk_run_reset_state(*out);
  return s;
}

void gk_run_reset_state(gk_run *r) {
  if (r->state) memset(r->state, 0, sizeof(float) * (size_t)r->state_floats);
}

gk_status gk_run_copy_state(gk_run *dst, const gk_run *src) {
  if (!dst->carry || !src->carry || dst->m != src->m || dst->B != src->B || dst->state_floats != src->state_floats)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "model: the state of a run of batch %d cannot go on in a run of batch %d "
                      "(both must be piece runs of one model)", src->B, dst->B);
  memcpy(dst->state, src->state, sizeof(float) * (size_t)src->state_floats);
  return GK_SUCCESS;
}

void gk_run_free(gk_run *r) {
  if (!r) return;
  arch_of(r->m)->free_run(r);
  for (int i = 0; i < r->nplans; i++) gk_plan_destroy(r->plans[i]);
  if (r->backend == GK_BACKEND_AUTO) {
    free(r->arena);
    free(r->ws);
    free(r->index);
  } else {
    gk_backend_synchronize(r->backend);
    gk_buffer_free(r->dev_arena);
    gk_buffer_free(r->dev_ws);
    gk_buffer_free(r->dev_tokens);
  }
  free(r->w16);
  free(r->g16);
  free(r->grad16);
  free(r->head);
  free(r);
}

size_t gk_run_bytes(const gk_run *r) {
  size_t copies = ((r->w16 ? 2 : 0) + (r->g16 ? 2 : 0)) * (size_t)r->m->n_total;
  return r->act_bytes + r->f32_bytes + copies + r->ws_bytes + 2 * sizeof(int32_t) * (size_t)r->B * (size_t)r->T;
}

gk_dtype gk_run_dtype(const gk_run *r) { return r->dtype; }

const float *gk_run_logits(const gk_run *r) {
  if (r->backend != GK_BACKEND_AUTO) return NULL;  // on the device
  if (r->dtype == GK_F32) return r->logits;
  return r->logits32;  // NULL for a 16-bit train run, whose logits are 16-bit
}

// A 16-bit run's copy of the weights, rounded from the f32 masters.
static void round_weights(gk_run *r) {
  const gk_model *m = r->m;
  if (r->dtype == GK_BF16)
    for (int64_t i = 0; i < m->n_total; i++) r->w16[i] = gk_f32_to_bf16(m->w[i]);
  else
    for (int64_t i = 0; i < m->n_total; i++) r->w16[i] = gk_f32_to_f16(m->w[i]);
}

// A 16-bit forward-only run's logits, widened for gk_run_logits.
static void widen_logits(gk_run *r) {
  int64_t n = (int64_t)r->B * r->T * r->m->cfg.vocab;
  const uint16_t *src = (const uint16_t *)(const void *)r->logits;
  if (r->dtype == GK_BF16)
    for (int64_t i = 0; i < n; i++) r->logits32[i] = gk_bf16_to_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) r->logits32[i] = gk_f16_to_f32(src[i]);
}

// Embedding, blocks, final norm, head: logits.
static gk_status forward(gk_run *r, const int32_t *inputs) {
  gk_model *m = r->m;
  head_state *h = head_of(r);
  int64_t rows = (int64_t)r->B * r->T, D = m->cfg.d_model, V = m->cfg.vocab;
  gk_status s = gk_run_upload(r, r->index, inputs, sizeof(int32_t) * (size_t)rows);
  if (s != GK_SUCCESS) return s;
  if (r->w16) round_weights(r);
  gk_tensor idx;
  gk_tensor_init(&idx, r->index, GK_I32, 2, (int64_t[]){r->B, r->T});
  gk_tensor emb = gk_pw(m, &m->params[GK_PARAM_EMBEDDING]), nf = gk_pw(m, &m->params[GK_PARAM_NORM_F]),
            head = gk_pw(m, gk_model_head(m));
  s = gk_run_exec(r, h->emb_f,
                            (gk_arg[]){GK_A(GK_ARG_WEIGHT, emb), GK_A(GK_ARG_INDEX, idx),
                                       GK_A(GK_ARG_Y, gk_t3(h->h0, r->B, r->T, D))}, 3);
  float *hl = NULL;
  if (s == GK_SUCCESS)
    s = arch_of(m)->forward(r, h->h0, &hl);
  h->h_last = hl;
  if (s == GK_SUCCESS)
    s = gk_run_exec(r, h->norm_f,
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2(hl, rows, D)), GK_A(GK_ARG_WEIGHT, nf),
                               GK_A(GK_ARG_Y, gk_t2(h->hf, rows, D)), GK_A(GK_ARG_RSTD, gk_t1(h->rstd, rows))}, 4);
  if (s == GK_SUCCESS)
    s = gk_run_exec(r, h->head_f,
                    (gk_arg[]){GK_A(GK_ARG_X, gk_t2(h->hf, rows, D)), GK_A(GK_ARG_WEIGHT, head),
                               GK_A(GK_ARG_Y, gk_t2(r->logits, rows, V))}, 3);
  if (s == GK_SUCCESS && r->logits32) widen_logits(r);
  return s;
}

gk_status gk_run_forward(gk_run *r, const int32_t *inputs) { return forward(r, inputs); }

static gk_status backward(gk_run *r);

gk_status gk_run_step(gk_run *r, const int32_t *inputs, const int32_t *targets, double *loss) {
  head_state *h = head_of(r);
  int64_t rows = (int64_t)r->B * r->T, V = r->m->cfg.vocab;
  gk_status s = forward(r, inputs);
  if (s != GK_SUCCESS) return s;
  if ((s = gk_run_upload(r, r->target, targets, sizeof(int32_t) * (size_t)rows)) != GK_SUCCESS) return s;
  gk_tensor tgt;
  gk_tensor_init(&tgt, r->target, GK_I32, 1, (int64_t[]){rows});
  gk_tensor loss_t = gk_strided(h->loss, 0, NULL, NULL);
  gk_tensor logits = gk_t2(r->logits, rows, V);
  gk_arg ce_args[4] = {GK_A(GK_ARG_LOGITS, logits), GK_A(GK_ARG_TARGET, tgt), GK_A(GK_ARG_LOSS, loss_t),
                       GK_A(GK_ARG_DLOGITS, logits)};
  s = gk_run_exec(r, h->ce, ce_args, r->train ? 4 : 3);
  if (s == GK_SUCCESS && r->train) s = backward(r);
  // Read last: on a device, the one wait of the step.
  float loss32 = 0;
  if (s == GK_SUCCESS) s = gk_run_download(r, h->loss, &loss32, sizeof loss32);
  *loss = loss32;
  return s;
}

// The head (dW overwritten), the final norm, the blocks, the embedding (dE
// added when tied, written when untied), from dlogits (in the logits).
static gk_status backward(gk_run *r) {
  gk_model *m = r->m;
  head_state *h = head_of(r);
  int64_t rows = (int64_t)r->B * r->T, D = m->cfg.d_model, V = m->cfg.vocab;
  gk_tensor logits = gk_t2(r->logits, rows, V);
  const gk_param *ep = &m->params[GK_PARAM_EMBEDDING], *nfp = &m->params[GK_PARAM_NORM_F], *hp = gk_model_head(m);
  gk_tensor demb = gk_pg(m, ep);
  gk_status s = gk_run_exec(r, h->head_b,
                  (gk_arg[]){GK_A(GK_ARG_DY, logits), GK_A(GK_ARG_X, gk_t2(h->hf, rows, D)),
                             GK_A(GK_ARG_WEIGHT, gk_pw(m, hp)), GK_A(GK_ARG_DX, gk_t2(h->dhf, rows, D)),
                             GK_A(GK_ARG_DWEIGHT, gk_pg(m, hp))}, 5);
  if (s != GK_SUCCESS) return s;
  if (hp != ep) gk_run_grads_ready(r, (int)(hp - m->params), 1);
  s = gk_run_exec(r, h->norm_b,
                  (gk_arg[]){GK_A(GK_ARG_DY, gk_t2(h->dhf, rows, D)), GK_A(GK_ARG_X, gk_t2(h->h_last, rows, D)),
                             GK_A(GK_ARG_WEIGHT, gk_pw(m, nfp)), GK_A(GK_ARG_RSTD, gk_t1(h->rstd, rows)),
                             GK_A(GK_ARG_DX, gk_t2(h->dh, rows, D)), GK_A(GK_ARG_DWEIGHT, gk_pg(m, nfp))}, 6);
  if (s != GK_SUCCESS) return s;
  gk_run_grads_ready(r, GK_PARAM_NORM_F, 1);
  s = arch_of(m)->backward(r, h->dh);
  if (s != GK_SUCCESS) return s;
  gk_tensor idx;
  gk_tensor_init(&idx, r->index, GK_I32, 2, (int64_t[]){r->B, r->T});
  s = gk_run_exec(r, h->emb_b,
                  (gk_arg[]){GK_A(GK_ARG_DY, gk_t3(h->dh, r->B, r->T, D)), GK_A(GK_ARG_INDEX, idx),
                             GK_A(GK_ARG_DWEIGHT, demb)}, 3);
  if (s == GK_SUCCESS) gk_run_grads_ready(r, GK_PARAM_EMBEDDING, 1);
  return s;
}

// ---------------------------------------------------------------- loss scaling

void gk_loss_scaler_init(gk_loss_scaler *s, double scale, int64_t growth_interval) {
  memset(s, 0, sizeof *s);
  s->scale = scale;
  s->growth_interval = growth_interval;
}

bool gk_loss_scaler_unscale(const gk_loss_scaler *s, float *g, int64_t n) {
  float inv = (float)(1 / s->scale);
  bool finite = true;
  for (int64_t i = 0; i < n; i++) {
    g[i] *= inv;
    finite &= isfinite(g[i]) != 0;
  }
  return finite;
}

void gk_loss_scaler_update(gk_loss_scaler *s, bool finite) {
  if (!finite) {
    s->scale /= 2;
    s->good_steps = 0;
    s->skipped++;
    return;
  }
  if (++s->good_steps >= s->growth_interval) {
    s->scale *= 2;
    s->good_steps = 0;
  }
}
