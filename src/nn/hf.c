// Hugging Face checkpoints of Mamba and LLaMA models (names, layouts and
// fields in hf.h).
#include "hf.h"

#include "fileio.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A gradkern parameter is one Hugging Face tensor or, for LLaMA's fused
// projections, several stacked by rows: wqkv = q_proj | k_proj | v_proj,
// w_up_gate = up_proj | gate_proj.
typedef struct piece {
  char name[96];
  int64_t rows;
} piece;

static const struct {
  const char *ours, *theirs;
} mamba_names[] = {
    {"norm", "norm.weight"},           {"in_proj", "mixer.in_proj.weight"}, {"conv_w", "mixer.conv1d.weight"},
    {"conv_b", "mixer.conv1d.bias"},   {"x_proj", "mixer.x_proj.weight"},   {"dt_proj", "mixer.dt_proj.weight"},
    {"dt_bias", "mixer.dt_proj.bias"}, {"A_log", "mixer.A_log"},            {"D", "mixer.D"},
    {"out_proj", "mixer.out_proj.weight"},
}, llama_names[] = {
    {"attn_norm", "input_layernorm.weight"}, {"wo", "self_attn.o_proj.weight"},
    {"mlp_norm", "post_attention_layernorm.weight"}, {"w_down", "mlp.down_proj.weight"},
};

// The pieces of parameter p (their count; 0 when it has no Hugging Face name).
static int pieces_of(const gk_model *m, const gk_param *p, piece *out) {
  const gk_model_config *c = &m->cfg;
  int mamba = c->arch == GK_ARCH_MAMBA;
  if (!strcmp(p->name, "embedding")) {
    snprintf(out[0].name, sizeof out[0].name, mamba ? "backbone.embeddings.weight" : "model.embed_tokens.weight");
    out[0].rows = p->shape[0];
    return 1;
  }
  if (!strcmp(p->name, "lm_head")) {
    snprintf(out[0].name, sizeof out[0].name, "lm_head.weight");
    out[0].rows = p->shape[0];
    return 1;
  }
  if (!strcmp(p->name, "norm_f")) {
    snprintf(out[0].name, sizeof out[0].name, mamba ? "backbone.norm_f.weight" : "model.norm.weight");
    out[0].rows = p->shape[0];
    return 1;
  }
  int layer, used = 0;
  if (sscanf(p->name, "layers.%d.%n", &layer, &used) != 1 || !used) return 0;
  const char *slot = p->name + used;
  char prefix[48];
  snprintf(prefix, sizeof prefix, mamba ? "backbone.layers.%d." : "model.layers.%d.", layer);
  if (!mamba) {
    int64_t Dh = c->d_model / c->heads;
    if (!strcmp(slot, "wqkv")) {
      snprintf(out[0].name, sizeof out[0].name, "%sself_attn.q_proj.weight", prefix);
      snprintf(out[1].name, sizeof out[1].name, "%sself_attn.k_proj.weight", prefix);
      snprintf(out[2].name, sizeof out[2].name, "%sself_attn.v_proj.weight", prefix);
      out[0].rows = c->heads * Dh, out[1].rows = out[2].rows = c->kv_heads * Dh;
      return 3;
    }
    if (!strcmp(slot, "w_up_gate")) {
      snprintf(out[0].name, sizeof out[0].name, "%smlp.up_proj.weight", prefix);
      snprintf(out[1].name, sizeof out[1].name, "%smlp.gate_proj.weight", prefix);
      out[0].rows = out[1].rows = c->d_ff;
      return 2;
    }
  }
  size_t n = mamba ? sizeof mamba_names / sizeof *mamba_names : sizeof llama_names / sizeof *llama_names;
  for (size_t k = 0; k < n; k++) {
    const char *ours = mamba ? mamba_names[k].ours : llama_names[k].ours;
    if (!strcmp(slot, ours)) {
      snprintf(out[0].name, sizeof out[0].name, "%s%s", prefix, mamba ? mamba_names[k].theirs : llama_names[k].theirs);
      out[0].rows = p->shape[0];
      return 1;
    }
  }
  return 0;
}

// The shape a piece has in the file: conv1d's weight is (E, 1, W); 1-d
// parameters are (n). Returns the rank.
static int file_shape(const gk_param *p, const piece *pc, int64_t *shape) {
  if (strlen(p->name) >= 6 && !strcmp(p->name + strlen(p->name) - 6, "conv_w")) {
    shape[0] = pc->rows, shape[1] = 1, shape[2] = p->shape[1];
    return 3;
  }
  shape[0] = pc->rows;
  shape[1] = p->rank == 2 ? p->shape[1] : 0;
  return p->rank;
}

// config.json: the fields gradkern reads (-1 / NAN when absent).
typedef struct hf_config {
  int mamba, llama;
  int64_t vocab, hidden, layers, state, expand, conv, dt_rank, inner, heads, kv_heads, head_dim;
  double ln_eps, rms_eps, theta;
  int use_bias, conv_bias, attn_bias, mlp_bias, tie, rope_scaling;
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
  *c = (hf_config){0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, NAN, NAN, NAN, 0, 1, 0, 0, -1, 0, "silu"};
  static const char *const ints[] = {"vocab_size", "hidden_size", "num_hidden_layers", "state_size", "expand",
                                     "conv_kernel", "time_step_rank", "intermediate_size", "num_attention_heads",
                                     "num_key_value_heads", "head_dim"};
  int64_t *int_dst[] = {&c->vocab, &c->hidden, &c->layers, &c->state, &c->expand, &c->conv,
                        &c->dt_rank, &c->inner, &c->heads, &c->kv_heads, &c->head_dim};
  static const char *const bools[] = {"use_bias", "use_conv_bias", "attention_bias", "mlp_bias",
                                      "tie_word_embeddings"};
  int *bool_dst[] = {&c->use_bias, &c->conv_bias, &c->attn_bias, &c->mlp_bias, &c->tie};
  int more;
  st = gk_json_open(&p, '{', &more, "at the start");
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(&p, &key, "as a key"))) break;
    char ctx[96];
    snprintf(ctx, sizeof ctx, "as the value of \"%.60s\"", key);
    if (!(st = gk_json_expect(&p, ':', ctx))) {
      size_t k = 0, nb = 0;
      while (k < sizeof ints / sizeof *ints && strcmp(key, ints[k])) k++;
      while (nb < sizeof bools / sizeof *bools && strcmp(key, bools[nb])) nb++;
      if (k < sizeof ints / sizeof *ints && gk_json_peek(&p) != 'n') st = gk_json_int(&p, int_dst[k], ctx);
      else if (nb < sizeof bools / sizeof *bools) st = gk_json_bool(&p, bool_dst[nb], 0, ctx);
      else if (!strcmp(key, "layer_norm_epsilon")) st = gk_json_double(&p, &c->ln_eps, ctx);
      else if (!strcmp(key, "rms_norm_eps")) st = gk_json_double(&p, &c->rms_eps, ctx);
      else if (!strcmp(key, "rope_theta")) st = gk_json_double(&p, &c->theta, ctx);
      else if (!strcmp(key, "rope_scaling")) {
        c->rope_scaling = gk_json_peek(&p) != 'n';
        st = gk_json_skip(&p, ctx);
      } else if (!strcmp(key, "hidden_act")) {
        char *v;
        if (!(st = gk_json_string(&p, &v, ctx))) snprintf(c->act, sizeof c->act, "%s", v);
        free(v);
      } else if (!strcmp(key, "model_type")) {
        char *v;
        if (!(st = gk_json_string(&p, &v, ctx))) c->mamba |= !strcmp(v, "mamba"), c->llama |= !strcmp(v, "llama");
        free(v);
      } else if (!strcmp(key, "architectures")) {
        int amore;
        st = gk_json_open(&p, '[', &amore, ctx);
        while (st == GK_SUCCESS && amore) {
          char *v;
          if ((st = gk_json_string(&p, &v, ctx))) break;
          c->mamba |= !strcmp(v, "MambaForCausalLM");
          c->llama |= !strcmp(v, "LlamaForCausalLM");
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
  if (c->mamba == c->llama)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"architectures\"/\"model_type\" name %s; gradkern reads "
                      "MambaForCausalLM and LlamaForCausalLM", what, c->mamba ? "both Mamba and LLaMA" : "neither");
  if (c->kv_heads == -1) c->kv_heads = c->heads;
  if (c->llama && isnan(c->theta)) c->theta = 10000;
  if (c->tie == -1) c->tie = c->mamba;  // Hugging Face's defaults
  struct {
    const char *name;
    int64_t v, lo, hi;
    int needed;
  } range[] = {{"vocab_size", c->vocab, 1, 1 << 24, 1},
               {"hidden_size", c->hidden, 1, 65536, 1},
               {"num_hidden_layers", c->layers, 1, 1024, 1},
               {"state_size", c->state, 1, 4096, c->mamba},
               {"expand", c->expand, 1, 16, c->mamba},
               {"conv_kernel", c->conv, 1, 64, c->mamba},
               {"time_step_rank", c->dt_rank, 1, 65536, c->mamba},
               {"num_attention_heads", c->heads, 1, 4096, c->llama},
               {"num_key_value_heads", c->kv_heads, 1, 4096, c->llama},
               {"intermediate_size", c->inner, 1, 1 << 20, c->llama}};
  for (size_t k = 0; k < sizeof range / sizeof *range; k++)
    if (range[k].needed && (range[k].v < range[k].lo || range[k].v > range[k].hi))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"%s\" is %s%lld, not in [%lld, %lld]", what, range[k].name,
                        range[k].v == -1 ? "missing or " : "", (long long)range[k].v, (long long)range[k].lo,
                        (long long)range[k].hi);
  double eps = c->mamba ? c->ln_eps : c->rms_eps;
  if (!(eps > 0 && eps < 1))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"%s\" %g is missing or not in (0, 1)", what,
                      c->mamba ? "layer_norm_epsilon" : "rms_norm_eps", eps);
  if (strcmp(c->act, "silu"))
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"hidden_act\" '%s' is not supported (only silu)", what, c->act);
  if (c->mamba) {
    if (c->inner != -1 && c->inner != c->expand * c->hidden)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"intermediate_size\" %lld is not expand x hidden_size = %lld",
                        what, (long long)c->inner, (long long)(c->expand * c->hidden));
    if (c->use_bias) return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"use_bias\": true (projection biases) is not supported", what);
    if (!c->conv_bias) return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"use_conv_bias\": false is not supported", what);
  } else {
    if (c->hidden % c->heads || (c->hidden / c->heads) % 2 || c->heads % c->kv_heads)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"num_attention_heads\" %lld and \"num_key_value_heads\" %lld do "
                        "not split \"hidden_size\" %lld into even heads", what, (long long)c->heads,
                        (long long)c->kv_heads, (long long)c->hidden);
    if (c->head_dim != -1 && c->head_dim != c->hidden / c->heads)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"head_dim\" %lld is not hidden_size / num_attention_heads = %lld",
                        what, (long long)c->head_dim, (long long)(c->hidden / c->heads));
    if (c->rope_scaling) return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"rope_scaling\" is not supported (only null)", what);
    if (!(c->theta > 0 && c->theta < 1e300))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: \"rope_theta\" %g is not a positive number", what, c->theta);
    if (c->attn_bias || c->mlp_bias)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "%s: \"%s\": true is not supported", what,
                        c->attn_bias ? "attention_bias" : "mlp_bias");
  }
  return GK_SUCCESS;
}

// n elements of t from element `from` on, as f32 into dst.
static void to_f32(const gk_st_tensor *t, int64_t from, float *dst, int64_t n) {
  const unsigned char *s = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == GK_ST_F32) memcpy(&dst[i], s + 4 * (from + i), 4);
    else {
      uint16_t h;
      memcpy(&h, s + 2 * (from + i), 2);
      dst[i] = t->dtype == GK_ST_F16 ? gk_f16_to_f32(h) : gk_bf16_to_f32(h);
    }
  }
}

static int is_float(gk_st_dtype d) { return d == GK_ST_F32 || d == GK_ST_F16 || d == GK_ST_BF16; }

// The tensors of a checkpoint: model.safetensors alone, or the shards that
// model.safetensors.index.json maps each tensor name to. Once loaded, every
// tensor is in exactly one file.
typedef struct hf_files {
  gk_st_file **file;
  char **path;        // each file's path, for messages
  size_t n;
  const char *where;  // the checkpoint, for messages: model.safetensors or the index
} hf_files;

static void hf_files_free(hf_files *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    gk_st_close(fs->file[i]);
    free(fs->path[i]);
  }
  free(fs->file);
  free(fs->path);
  *fs = (hf_files){0};
}

// Load dir/name as one more file of fs.
static gk_status hf_files_add(hf_files *fs, const char *dir, const char *name) {
  gk_st_file **file = realloc(fs->file, (fs->n + 1) * sizeof *file);
  if (file) fs->file = file;
  char **path = realloc(fs->path, (fs->n + 1) * sizeof *path);
  if (path) fs->path = path;
  size_t len = strlen(dir) + strlen(name) + 2;
  char *one = malloc(len);
  if (!file || !path || !one) {
    free(one);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
  }
  snprintf(one, len, "%s/%s", dir, name);
  gk_status st = gk_st_load(one, &fs->file[fs->n]);
  if (st) {
    free(one);
    return st;
  }
  fs->path[fs->n++] = one;
  return GK_SUCCESS;
}

static size_t hf_files_count(const hf_files *fs) {
  size_t n = 0;
  for (size_t i = 0; i < fs->n; i++) n += gk_st_num_tensors(fs->file[i]);
  return n;
}

// The tensor `name` and the path of its file (NULL when no file holds it).
static const gk_st_tensor *hf_lookup(const hf_files *fs, const char *name, const char **path) {
  for (size_t i = 0; i < fs->n; i++) {
    const gk_st_tensor *t = gk_st_lookup(fs->file[i], name);
    if (t) {
      *path = fs->path[i];
      return t;
    }
  }
  return NULL;
}

// The index's weight_map, read as parallel arrays: tensor name -> shard file.
typedef struct weight_map {
  char **name, **shard;
  size_t n, cap;
} weight_map;

static void weight_map_free(weight_map *w) {
  for (size_t i = 0; i < w->n; i++) free(w->name[i]), free(w->shard[i]);
  free(w->name);
  free(w->shard);
}

// "weight_map": {"tensor name": "shard file", ...} (other keys skipped).
static gk_status read_weight_map(const char *index_path, weight_map *w) {
  unsigned char *bytes;
  size_t n;
  gk_status st = gk_nn_read_file(index_path, "checkpoint index", &bytes, &n);
  if (st) return st;
  char what[300];
  snprintf(what, sizeof what, "checkpoint index '%.250s'", index_path);
  gk_json p = {bytes, n, 0, what, "file"};
  int more, found = 0;
  st = gk_json_open(&p, '{', &more, "at the start");
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(&p, &key, "as a key"))) break;
    st = gk_json_expect(&p, ':', "after a key");
    if (!st && !strcmp(key, "weight_map")) {
      found = 1;
      int wmore;
      st = gk_json_open(&p, '{', &wmore, "as the value of \"weight_map\"");
      while (st == GK_SUCCESS && wmore) {
        char *name = NULL, *shard = NULL;
        st = gk_json_string(&p, &name, "as a tensor name in \"weight_map\"");
        if (!st) st = gk_json_expect(&p, ':', "after a tensor name in \"weight_map\"");
        if (!st) st = gk_json_string(&p, &shard, "as a shard file in \"weight_map\"");
        for (size_t i = 0; !st && i < w->n; i++)
          if (!strcmp(w->name[i], name))
            st = gk_nn_fail(GK_NN_ERR_FILE, "%s: tensor '%s' is listed twice in \"weight_map\"", what, name);
        if (!st && (strchr(shard, '/') || !strcmp(shard, ".") || !strcmp(shard, "..") || !*shard))
          st = gk_nn_fail(GK_NN_ERR_FILE, "%s: shard '%s' of tensor '%s' is not a file name in the directory", what,
                          shard, name);
        if (!st && w->n == w->cap) {
          size_t cap = w->cap ? 2 * w->cap : 64;
          char **a = realloc(w->name, cap * sizeof *a);
          if (a) w->name = a;
          char **b = realloc(w->shard, cap * sizeof *b);
          if (b) w->shard = b;
          if (a && b) w->cap = cap;
          else st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
        }
        if (st) {
          free(name);
          free(shard);
          break;
        }
        w->name[w->n] = name, w->shard[w->n++] = shard;
        st = gk_json_next_or_close(&p, '}', &wmore, "in \"weight_map\"");
      }
    } else if (!st)
      st = gk_json_skip(&p, "as a value");
    free(key);
    if (!st) st = gk_json_next_or_close(&p, '}', &more, "in the top-level object");
  }
  if (!st) st = gk_json_end(&p);
  free(bytes);
  if (!st && !w->n)
    st = gk_nn_fail(GK_NN_ERR_FILE, "%s: %s", what,
                    found ? "\"weight_map\" lists no tensors" : "has no \"weight_map\"");
  return st;
}

// The shards of the index at index_path, each loaded once, checked against
// the map: every listed tensor is in the shard named for it, and every
// shard's tensor is listed, for that shard.
static gk_status load_shards(const char *dir, const char *index_path, hf_files *fs) {
  weight_map w = {0};
  gk_status st = read_weight_map(index_path, &w);
  size_t *file_of = st ? NULL : malloc(w.n * sizeof *file_of);
  if (!st && !file_of) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
  for (size_t i = 0; !st && i < w.n; i++) {
    size_t k = 0;
    while (k < i && strcmp(w.shard[k], w.shard[i])) k++;
    if (k < i) file_of[i] = file_of[k];
    else if (!(st = hf_files_add(fs, dir, w.shard[i]))) file_of[i] = fs->n - 1;
  }
  for (size_t i = 0; !st && i < w.n; i++)
    if (!gk_st_lookup(fs->file[file_of[i]], w.name[i]))
      st = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint index '%s': tensor '%s' is mapped to shard '%s', which does not "
                      "hold it", index_path, w.name[i], w.shard[i]);
  if (!st && hf_files_count(fs) != w.n)
    for (size_t f = 0; !st && f < fs->n; f++)
      for (size_t j = 0; !st && j < gk_st_num_tensors(fs->file[f]); j++) {
        const char *name = gk_st_tensor_at(fs->file[f], j)->name;
        size_t i = 0;
        while (i < w.n && strcmp(w.name[i], name)) i++;
        if (i == w.n || file_of[i] != f)
          st = gk_nn_fail(GK_NN_ERR_FILE, "checkpoint index '%s': shard '%s' holds tensor '%s', which \"weight_map\" "
                          "%s%s", index_path, fs->path[f], name, i == w.n ? "does not list" : "maps to ",
                          i == w.n ? "" : w.shard[i]);
      }
  free(file_of);
  weight_map_free(&w);
  return st;
}

// Every parameter's pieces from the checkpoint's files into m->w.
static gk_status read_tensors(const hf_files *fs, gk_model *m, gk_st_dtype *first) {
  size_t used = 0;
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    piece pcs[3];
    int np = pieces_of(m, p, pcs);
    int64_t cols = p->rank == 2 ? p->shape[1] : 1, row = 0;
    for (int k = 0; k < np; k++) {
      const char *st_path = fs->where;
      const gk_st_tensor *t = hf_lookup(fs, pcs[k].name, &st_path);
      if (!t && !strcmp(pcs[k].name, "backbone.embeddings.weight"))
        t = hf_lookup(fs, "backbone.embedding.weight", &st_path);
      if (!t)
        return gk_nn_fail(GK_NN_ERR_FILE, "'%s': there is no tensor '%s' (gradkern's %s)", st_path, pcs[k].name,
                          p->name);
      int64_t want[3] = {0, 0, 0};
      int rank = file_shape(p, &pcs[k], want), ok = t->rank == rank;
      for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == want[d];
      if (!ok)
        return gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor '%s' has rank %d shape [%lld, %lld, %lld], expected rank %d "
                          "[%lld, %lld, %lld]", st_path, t->name, t->rank, (long long)t->shape[0],
                          (long long)(t->rank > 1 ? t->shape[1] : 0), (long long)(t->rank > 2 ? t->shape[2] : 0), rank,
                          (long long)want[0], (long long)(rank > 1 ? want[1] : 0), (long long)(rank > 2 ? want[2] : 0));
      if (!is_float(t->dtype))
        return gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor '%s' is %s; gradkern reads F32, F16 and BF16", st_path,
                          t->name, gk_st_dtype_name(t->dtype));
      if (!used) *first = t->dtype;
      used++;
      to_f32(t, 0, m->w + p->offset + row * cols, pcs[k].rows * cols);
      row += pcs[k].rows;
    }
  }
  // With a tied head, lm_head.weight, when there, must be the embedding.
  const char *st_path = fs->where;
  const gk_st_tensor *head = m->cfg.untied_head ? NULL : hf_lookup(fs, "lm_head.weight", &st_path);
  if (head) {
    used++;
    const gk_param *e = &m->params[0];
    if (head->rank != 2 || head->shape[0] != e->shape[0] || head->shape[1] != e->shape[1] || !is_float(head->dtype))
      return gk_nn_fail(GK_NN_ERR_FILE, "'%s': tensor 'lm_head.weight' is not [%lld, %lld] like the embedding", st_path,
                        (long long)e->shape[0], (long long)e->shape[1]);
    float *tmp = malloc((size_t)e->numel * sizeof *tmp);
    if (!tmp) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
    to_f32(head, 0, tmp, e->numel);
    int same = !memcmp(tmp, m->w + e->offset, (size_t)e->numel * sizeof *tmp);
    free(tmp);
    if (!same)
      return gk_nn_fail(GK_NN_ERR_FILE, "'%s': 'lm_head.weight' differs from the embedding, but "
                        "\"tie_word_embeddings\" is true", st_path);
  }
  if (used == hf_files_count(fs)) return GK_SUCCESS;
  // Name the tensor gradkern does not know.
  for (size_t fi = 0; fi < fs->n; fi++)
    for (size_t i = 0; i < gk_st_num_tensors(fs->file[fi]); i++) {
      const char *name = gk_st_tensor_at(fs->file[fi], i)->name;
      int known = !strcmp(name, "lm_head.weight") || !strcmp(name, "backbone.embedding.weight");
      for (int k = 0; !known && k < m->nparams; k++) {
        piece pcs[3];
        int np = pieces_of(m, &m->params[k], pcs);
        for (int j = 0; j < np; j++) known |= !strcmp(pcs[j].name, name);
      }
      if (!known)
        return gk_nn_fail(GK_ERR_UNSUPPORTED, "'%s': tensor '%s' is not part of a model gradkern knows", fs->path[fi],
                          name);
    }
  return gk_nn_fail(GK_NN_ERR_FILE, "'%s': holds both backbone.embedding.weight and backbone.embeddings.weight",
                    fs->where);
}

gk_status gk_hf_load(const char *dir, gk_model *m, gk_st_dtype *dtype) {
  if (!dir || !m) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_hf_load: %s is NULL", dir ? "m" : "dir");
  memset(m, 0, sizeof *m);
  size_t n = strlen(dir) + 40;
  char *cfg_path = malloc(n), *st_path = malloc(n);
  if (!cfg_path || !st_path) {
    free(cfg_path);
    free(st_path);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_load: out of memory");
  }
  snprintf(cfg_path, n, "%s/config.json", dir);
  snprintf(st_path, n, "%s/model.safetensors", dir);
  hf_config hc;
  hf_files fs = {0};
  gk_st_dtype first = GK_ST_F32;
  gk_status st = read_config(cfg_path, &hc);
  if (!st) {
    // model.safetensors, or else the shards of model.safetensors.index.json.
    int single = !access(st_path, F_OK);
    if (!single) snprintf(st_path, n, "%s/model.safetensors.index.json", dir);
    fs.where = st_path;
    if (single) st = hf_files_add(&fs, dir, "model.safetensors");
    else if (access(st_path, F_OK))
      st = gk_nn_fail(GK_NN_ERR_FILE, "'%s' has neither model.safetensors nor model.safetensors.index.json", dir);
    else st = load_shards(dir, st_path, &fs);
  }
  if (!st) {
    gk_model_config c = {0};
    c.arch = hc.mamba ? GK_ARCH_MAMBA : GK_ARCH_LLAMA;
    c.untied_head = !hc.tie;
    c.vocab = (int)hc.vocab;
    c.d_model = (int)hc.hidden;
    c.n_layers = (int)hc.layers;
    if (hc.mamba) {
      c.d_state = (int)hc.state;
      c.expand = (int)hc.expand;
      c.d_conv = (int)hc.conv;
      c.dt_rank = (int)hc.dt_rank;
      c.selection = 1;
      c.norm_eps = hc.ln_eps;
    } else {
      c.heads = (int)hc.heads;
      c.kv_heads = (int)hc.kv_heads;
      c.d_ff = (int)hc.inner;
      c.rope_theta = hc.theta;
      c.norm_eps = hc.rms_eps;
    }
    st = gk_model_init(m, &c, 0);
    if (!st) st = read_tensors(&fs, m, &first);
  }
  if (!st && dtype) *dtype = first;
  if (st) gk_model_free(m);
  hf_files_free(&fs);
  free(cfg_path);
  free(st_path);
  return st;
}

gk_status gk_hf_save(const char *dir, const gk_model *m, gk_st_dtype dtype) {
  if (!dir || !m) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_hf_save: %s is NULL", dir ? "m" : "dir");
  const gk_model_config *c = &m->cfg;
  int mamba = c->arch == GK_ARCH_MAMBA;
  if (mamba && !c->selection)
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "gk_hf_save: a Mamba model without selection has no Hugging Face form");
  if (!is_float(dtype))
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_hf_save: dtype %s is not F32, F16 or BF16", gk_st_dtype_name(dtype));
  size_t es = gk_st_dtype_size(dtype), cap = 3 * (size_t)m->nparams;
  gk_st_tensor *ts = calloc(cap, sizeof *ts);
  piece *pcs = calloc(cap, sizeof *pcs);
  unsigned char *data = malloc((size_t)m->n_total * es);
  gk_status st = GK_SUCCESS;
  size_t nt = 0;
  if (!ts || !pcs || !data) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory");
  for (int i = 0; !st && i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    unsigned char *dst = data + (size_t)p->offset * es;
    for (int64_t k = 0; k < p->numel; k++) {
      float v = m->w[p->offset + k];
      if (dtype == GK_ST_F32) memcpy(dst + 4 * k, &v, 4);
      else {
        uint16_t h = dtype == GK_ST_F16 ? gk_f32_to_f16(v) : gk_f32_to_bf16(v);
        memcpy(dst + 2 * k, &h, 2);
      }
    }
    int np = pieces_of(m, p, pcs + nt);
    int64_t cols = p->rank == 2 ? p->shape[1] : 1, row = 0;
    for (int k = 0; k < np; k++, nt++) {
      int64_t shape[3] = {0, 0, 0};
      int rank = file_shape(p, &pcs[nt], shape);
      ts[nt] = (gk_st_tensor){pcs[nt].name, dtype, rank, {shape[0], shape[1], shape[2]}, dst + (size_t)(row * cols) * es, 0};
      row += pcs[nt].rows;
    }
  }
  size_t n = strlen(dir) + 32;
  char *path = malloc(n);
  if (!st && !path) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory");
  gk_st_meta meta = {"format", "pt"};
  if (!st) {
    snprintf(path, n, "%s/model.safetensors", dir);
    st = gk_st_save(path, ts, nt, &meta, 1);
  }
  if (!st) {
    const char *torch_dtype = dtype == GK_ST_F32 ? "float32" : dtype == GK_ST_F16 ? "float16" : "bfloat16";
    const char *tie = c->untied_head ? "false" : "true";
    gk_nn_buf b = {0};
    if (mamba)
      gk_nn_buf_printf(&b,
                       "{\n  \"architectures\": [\"MambaForCausalLM\"],\n  \"model_type\": \"mamba\",\n"
                       "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                       "  \"state_size\": %d,\n  \"expand\": %d,\n  \"intermediate_size\": %d,\n"
                       "  \"conv_kernel\": %d,\n  \"time_step_rank\": %d,\n  \"layer_norm_epsilon\": %.17g,\n"
                       "  \"use_bias\": false,\n  \"use_conv_bias\": true,\n  \"hidden_act\": \"silu\",\n"
                       "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                       c->vocab, c->d_model, c->n_layers, c->d_state, c->expand, c->expand * c->d_model, c->d_conv,
                       c->dt_rank, c->norm_eps, tie, torch_dtype);
    else
      gk_nn_buf_printf(&b,
                       "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                       "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                       "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"intermediate_size\": %d,\n"
                       "  \"rms_norm_eps\": %.17g,\n  \"rope_theta\": %.17g,\n  \"rope_scaling\": null,\n"
                       "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"hidden_act\": \"silu\",\n"
                       "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                       c->vocab, c->d_model, c->n_layers, c->heads, c->kv_heads, c->d_ff, c->norm_eps, c->rope_theta,
                       tie, torch_dtype);
    snprintf(path, n, "%s/config.json", dir);
    gk_nn_chunk chunk = {b.data, b.len};
    st = b.failed ? gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_hf_save: out of memory")
                  : gk_nn_write_atomic(path, "config.json", &chunk, 1);
    gk_nn_buf_free(&b);
  }
  free(path);
  free(ts);
  free(pcs);
  free(data);
  return st;
}
