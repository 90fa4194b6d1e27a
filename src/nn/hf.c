// Hugging Face Mamba checkpoints (names, layouts and fields in hf.h).
#include "hf.h"

#include "fileio.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// gradkern's per-layer parameter -> the mixer's or block's tensor name.
static const struct {
  const char *ours, *theirs;
} layer_names[] = {
    {"norm", "norm.weight"},           {"in_proj", "mixer.in_proj.weight"}, {"conv_w", "mixer.conv1d.weight"},
    {"conv_b", "mixer.conv1d.bias"},   {"x_proj", "mixer.x_proj.weight"},   {"dt_proj", "mixer.dt_proj.weight"},
    {"dt_bias", "mixer.dt_proj.bias"}, {"A_log", "mixer.A_log"},            {"D", "mixer.D"},
    {"out_proj", "mixer.out_proj.weight"},
};
enum { N_LAYER_NAMES = sizeof layer_names / sizeof *layer_names };

// The Hugging Face name of parameter p, into buf; NULL when it has none.
static const char *hf_name(const gk_param *p, char *buf, size_t n) {
  if (!strcmp(p->name, "embedding")) return "backbone.embeddings.weight";
  if (!strcmp(p->name, "norm_f")) return "backbone.norm_f.weight";
  int layer, used = 0;
  if (sscanf(p->name, "layers.%d.%n", &layer, &used) != 1 || !used) return NULL;
  for (int k = 0; k < N_LAYER_NAMES; k++)
    if (!strcmp(p->name + used, layer_names[k].ours)) {
      snprintf(buf, n, "backbone.layers.%d.%s", layer, layer_names[k].theirs);
      return buf;
    }
  return NULL;
}

// config.json: the fields gradkern reads.
typedef struct hf_config {
  int is_mamba;
  int64_t vocab, hidden, layers, state, expand, conv, dt_rank, inner;
  double eps;
  int use_bias, conv_bias, tie;
  char act[32];
} hf_config;

static gk_status read_config(const char *path, hf_config *c) {
  unsigned char *bytes;
  size_t n;
  gk_status st = gk_nn_read_file(path, "config.json", &bytes, &n);
  if (st) return st;
  char what[300];
  snprintf(what, sizeof what, "config file '%.250s'", path);
  gk_json p = {bytes, n, 0, what, "file"};
  *c = (hf_config){0, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 1, "silu"};
  int more;
  st = gk_json_open(&p, '{', &more, "at the start");
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(&p, &key, "as a key"))) break;
    char ctx[96];
    snprintf(ctx, sizeof ctx, "as the value of \"%.60s\"", key);
    if (!(st = gk_json_expect(&p, ':', ctx))) {
      static const char *const ints[] = {"vocab_size", "hidden_size", "num_hidden_layers", "state_size",
                                         "expand", "conv_kernel", "time_step_rank", "intermediate_size"};
      int64_t *dst[] = {&c->vocab, &c->hidden, &c->layers, &c->state, &c->expand, &c->conv, &c->dt_rank, &c->inner};
      int k = 0;
      while (k < 8 && strcmp(key, ints[k])) k++;
      if (k < 8) st = gk_json_int(&p, dst[k], ctx);
      else if (!strcmp(key, "layer_norm_epsilon")) st = gk_json_double(&p, &c->eps, ctx);
      else if (!strcmp(key, "use_bias")) st = gk_json_bool(&p, &c->use_bias, 0, ctx);
      else if (!strcmp(key, "use_conv_bias")) st = gk_json_bool(&p, &c->conv_bias, 0, ctx);
      else if (!strcmp(key, "tie_word_embeddings")) st = gk_json_bool(&p, &c->tie, 0, ctx);
      else if (!strcmp(key, "hidden_act")) {
        char *v;
        if (!(st = gk_json_string(&p, &v, ctx))) snprintf(c->act, sizeof c->act, "%s", v);
        free(v);
      } else if (!strcmp(key, "model_type")) {
        char *v;
        if (!(st = gk_json_string(&p, &v, ctx))) c->is_mamba |= !strcmp(v, "mamba");
        free(v);
      } else if (!strcmp(key, "architectures")) {
        int amore;
        st = gk_json_open(&p, '[', &amore, ctx);
        while (st == GK_SUCCESS && amore) {
          char *v;
          if ((st = gk_json_string(&p, &v, ctx))) break;
          c->is_mamba |= !strcmp(v, "MambaForCausalLM");
          free(v);
          st = gk_json_next_or_close(&p, ']', &amore, ctx);
        }
      } else
        st = gk_json_skip(&p, ctx);
    }
    free(key);
    if (!st) st = gk_json_next_or_close(&p, '}', &more, "in the top-level object");
  }
  if (!st) st = gk_json_end(&p);
  free(bytes);
  if (st) return st;
  if (!c->is_mamba)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"architectures\"/\"model_type\" name no MambaForCausalLM; gradkern reads "
                      "only Mamba models from Hugging Face directories", what);
  struct {
    const char *name;
    int64_t v, lo, hi;
  } range[] = {{"vocab_size", c->vocab, 1, 1 << 24},   {"hidden_size", c->hidden, 1, 65536},
               {"num_hidden_layers", c->layers, 1, 1024}, {"state_size", c->state, 1, 4096},
               {"expand", c->expand, 1, 16},         {"conv_kernel", c->conv, 1, 64},
               {"time_step_rank", c->dt_rank, 1, 65536}};
  for (size_t k = 0; k < sizeof range / sizeof *range; k++)
    if (range[k].v < range[k].lo || range[k].v > range[k].hi)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"%s\" is %s%lld, not in [%lld, %lld]", what, range[k].name,
                        range[k].v == -1 ? "missing or " : "", (long long)range[k].v, (long long)range[k].lo,
                        (long long)range[k].hi);
  if (c->inner != -1 && c->inner != c->expand * c->hidden)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"intermediate_size\" %lld is not expand x hidden_size = %lld", what,
                      (long long)c->inner, (long long)(c->expand * c->hidden));
  if (!(c->eps > 0 && c->eps < 1))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"layer_norm_epsilon\" %g is missing or not in (0, 1)", what, c->eps);
  if (c->use_bias) return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"use_bias\": true (projection biases) is not supported", what);
  if (!c->conv_bias) return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"use_conv_bias\": false is not supported", what);
  if (!c->tie)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"tie_word_embeddings\": false is not supported (gradkern's head is the "
                      "embedding)", what);
  if (strcmp(c->act, "silu"))
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"hidden_act\" '%s' is not supported (only silu)", what, c->act);
  return GK_SUCCESS;
}

// Tensor t's elements as f32 into dst (n of them).
static void to_f32(const gk_st_tensor *t, float *dst, int64_t n) {
  const unsigned char *s = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == GK_ST_F32) memcpy(&dst[i], s + 4 * i, 4);
    else {
      uint16_t h;
      memcpy(&h, s + 2 * i, 2);
      dst[i] = t->dtype == GK_ST_F16 ? gk_f16_to_f32(h) : gk_bf16_to_f32(h);
    }
  }
}

gk_status gk_hf_load(const char *dir, gk_model *m, gk_st_dtype *dtype) {
  if (!dir || !m) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_hf_load: %s is NULL", dir ? "m" : "dir");
  memset(m, 0, sizeof *m);
  size_t n = strlen(dir) + 32;
  char *cfg_path = malloc(n), *st_path = malloc(n);
  if (!cfg_path || !st_path) {
    free(cfg_path);
    free(st_path);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
  }
  snprintf(cfg_path, n, "%s/config.json", dir);
  snprintf(st_path, n, "%s/model.safetensors", dir);
  hf_config hc;
  gk_st_file *f = NULL;
  gk_status st = read_config(cfg_path, &hc);
  if (!st) st = gk_st_load(st_path, &f);
  if (!st) {
    gk_model_config c = {0};
    c.arch = GK_ARCH_MAMBA;
    c.vocab = (int)hc.vocab;
    c.d_model = (int)hc.hidden;
    c.n_layers = (int)hc.layers;
    c.d_state = (int)hc.state;
    c.expand = (int)hc.expand;
    c.d_conv = (int)hc.conv;
    c.dt_rank = (int)hc.dt_rank;
    c.selection = 1;
    c.norm_eps = hc.eps;
    st = gk_model_init(m, &c, 0);
  }
  // Every tensor of the file must be one gradkern reads (lm_head: checked below).
  size_t used = 0;
  gk_st_dtype first = GK_ST_F32;
  for (int i = 0; !st && i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    char buf[96];
    const char *name = hf_name(p, buf, sizeof buf);
    const gk_st_tensor *t = name ? gk_st_lookup(f, name) : NULL;
    if (!t && !strcmp(p->name, "embedding")) t = gk_st_lookup(f, name = "backbone.embedding.weight");
    if (!t) {
      st = gk_nn_fail(GK_NN_ERR_FILE, "'%s': there is no tensor '%s' (gradkern's %s)", st_path, name ? name : "?",
                      p->name);
      break;
    }
    used++;
    // The expected shape: conv1d's weight is (E, 1, W); 1-d parameters are (n).
    int64_t want[3] = {p->shape[0], p->rank == 2 ? p->shape[1] : 0, 0};
    int rank = p->rank;
    if (!strcmp(p->name + strlen(p->name) - 6, "conv_w")) want[1] = 1, want[2] = p->shape[1], rank = 3;
    int ok = t->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == want[d];
    if (!ok) {
      st = gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor '%s' has rank %d shape [%lld, %lld, %lld], expected rank %d [%lld, %lld, %lld]",
                      st_path, name, t->rank, (long long)t->shape[0], (long long)(t->rank > 1 ? t->shape[1] : 0),
                      (long long)(t->rank > 2 ? t->shape[2] : 0), rank, (long long)want[0], (long long)want[1],
                      (long long)want[2]);
      break;
    }
    if (t->dtype != GK_ST_F32 && t->dtype != GK_ST_F16 && t->dtype != GK_ST_BF16) {
      st = gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor '%s' is %s; gradkern reads F32, F16 and BF16", st_path, name,
                      gk_st_dtype_name(t->dtype));
      break;
    }
    if (i == 0) first = t->dtype;
    to_f32(t, m->w + p->offset, p->numel);
  }
  if (!st) {
    const gk_st_tensor *head = gk_st_lookup(f, "lm_head.weight");
    if (head) {
      used++;
      const gk_param *e = &m->params[0];
      float *tmp = malloc((size_t)e->numel * sizeof *tmp);
      if (!tmp) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
      else if (head->rank != 2 || head->shape[0] != e->shape[0] || head->shape[1] != e->shape[1] ||
               (head->dtype != GK_ST_F32 && head->dtype != GK_ST_F16 && head->dtype != GK_ST_BF16))
        st = gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor 'lm_head.weight' is not %s [%lld, %lld] like the embedding",
                        st_path, gk_st_dtype_name(first), (long long)e->shape[0], (long long)e->shape[1]);
      else {
        to_f32(head, tmp, e->numel);
        if (memcmp(tmp, m->w + e->offset, (size_t)e->numel * sizeof *tmp))
          st = gk_nn_fail(GK_ERR_UNSUPPORTED, "'%s': 'lm_head.weight' differs from the embedding: an untied head is "
                          "not supported", st_path);
      }
      free(tmp);
    }
  }
  if (!st && used != gk_st_num_tensors(f)) {
    for (size_t i = 0; i < gk_st_num_tensors(f); i++) {
      const char *name = gk_st_tensor_at(f, i)->name;
      int known = !strcmp(name, "lm_head.weight");
      for (int k = 0; !known && k < m->nparams; k++) {
        char buf[96];
        const char *ours = hf_name(&m->params[k], buf, sizeof buf);
        known = (ours && !strcmp(ours, name)) || (!strcmp(name, "backbone.embedding.weight") && k == 0);
      }
      if (!known) {
        st = gk_nn_fail(GK_ERR_UNSUPPORTED, "'%s': tensor '%s' is not part of a Mamba model gradkern knows", st_path,
                        name);
        break;
      }
    }
  }
  if (!st && dtype) *dtype = first;
  if (st) gk_model_free(m);
  gk_st_close(f);
  free(cfg_path);
  free(st_path);
  return st;
}

gk_status gk_hf_save(const char *dir, const gk_model *m, gk_st_dtype dtype) {
  if (!dir || !m) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_hf_save: %s is NULL", dir ? "m" : "dir");
  const gk_model_config *c = &m->cfg;
  if (c->arch != GK_ARCH_MAMBA || !c->selection)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "gk_hf_save: only Mamba models with selection can be written as MambaForCausalLM");
  if (dtype != GK_ST_F32 && dtype != GK_ST_F16 && dtype != GK_ST_BF16)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_hf_save: dtype %s is not F32, F16 or BF16", gk_st_dtype_name(dtype));
  size_t es = gk_st_dtype_size(dtype);
  gk_st_tensor *ts = calloc((size_t)m->nparams, sizeof *ts);
  char (*names)[96] = calloc((size_t)m->nparams, 96);
  unsigned char *data = malloc((size_t)m->n_total * es);
  gk_status st = GK_SUCCESS;
  if (!ts || !names || !data) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory");
  for (int i = 0; !st && i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    const char *name = hf_name(p, names[i], sizeof names[i]);
    if (name != names[i]) snprintf(names[i], sizeof names[i], "%s", name);
    unsigned char *dst = data + (size_t)p->offset * es;
    for (int64_t k = 0; k < p->numel; k++) {
      float v = m->w[p->offset + k];
      if (dtype == GK_ST_F32) memcpy(dst + 4 * k, &v, 4);
      else {
        uint16_t h = dtype == GK_ST_F16 ? gk_f32_to_f16(v) : gk_f32_to_bf16(v);
        memcpy(dst + 2 * k, &h, 2);
      }
    }
    ts[i] = (gk_st_tensor){names[i], dtype, p->rank, {p->shape[0], p->shape[1]}, dst, 0};
    if (!strcmp(p->name + strlen(p->name) - 6, "conv_w"))
      ts[i].rank = 3, ts[i].shape[1] = 1, ts[i].shape[2] = p->shape[1];
  }
  size_t n = strlen(dir) + 32;
  char *path = malloc(n);
  if (!st && !path) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory");
  gk_st_meta meta = {"format", "pt"};
  if (!st) {
    snprintf(path, n, "%s/model.safetensors", dir);
    st = gk_st_save(path, ts, (size_t)m->nparams, &meta, 1);
  }
  if (!st) {
    gk_nn_buf b = {0};
    gk_nn_buf_printf(&b,
                     "{\n  \"architectures\": [\"MambaForCausalLM\"],\n  \"model_type\": \"mamba\",\n"
                     "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                     "  \"state_size\": %d,\n  \"expand\": %d,\n  \"intermediate_size\": %d,\n"
                     "  \"conv_kernel\": %d,\n  \"time_step_rank\": %d,\n  \"layer_norm_epsilon\": %.17g,\n"
                     "  \"use_bias\": false,\n  \"use_conv_bias\": true,\n  \"hidden_act\": \"silu\",\n"
                     "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\"\n}\n",
                     c->vocab, c->d_model, c->n_layers, c->d_state, c->expand, c->expand * c->d_model, c->d_conv,
                     c->dt_rank, c->norm_eps,
                     dtype == GK_ST_F32 ? "float32" : dtype == GK_ST_F16 ? "float16" : "bfloat16");
    snprintf(path, n, "%s/config.json", dir);
    gk_nn_chunk chunk = {b.data, b.len};
    st = b.failed ? gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory")
                  : gk_nn_write_atomic(path, "config.json", &chunk, 1);
    gk_nn_buf_free(&b);
  }
  free(path);
  free(ts);
  free(names);
  free(data);
  return st;
}
