// safetensors reading and writing (format and rules in safetensors.h), with
// the header read by the JSON pull parser (json.h) in exactly its grammar.
#include "safetensors.h"

#include "fileio.h"
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The largest header accepted, as in the reference implementation.
#define GK_ST_MAX_HEADER 100000000ull

static const char *const dtype_names[GK_ST_DTYPE_COUNT_] = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8"};
static const size_t dtype_sizes[GK_ST_DTYPE_COUNT_] = {4, 8, 2, 2, 4, 8, 1};

const char *gk_st_dtype_name(gk_st_dtype dtype) {
  return (unsigned)dtype < GK_ST_DTYPE_COUNT_ ? dtype_names[dtype] : "?";
}

size_t gk_st_dtype_size(gk_st_dtype dtype) { return (unsigned)dtype < GK_ST_DTYPE_COUNT_ ? dtype_sizes[dtype] : 0; }

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static int utf8_valid(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  size_t n = strlen(str);
  for (size_t i = 0; i < n;) {
    size_t k = gk_nn_utf8_seq(s + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

// qsort, which must not be handed a NULL array even when it is empty.
static void sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1) qsort(base, n, size, cmp);
}

// "[2, 3]" into buf.
static const char *shape_str(char *buf, size_t size, int rank, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

// Bytes of a tensor of this dtype and shape, or 0 with *overflow set when
// the count does not fit in 64 bits.
static uint64_t tensor_bytes(gk_st_dtype dtype, int rank, const int64_t *shape, int *overflow) {
  uint64_t bytes = gk_st_dtype_size(dtype);
  *overflow = 0;
  for (int d = 0; d < rank; d++) {
    uint64_t dim = (uint64_t)shape[d];
    if (dim && bytes > UINT64_MAX / dim) {
      *overflow = 1;
      return 0;
    }
    bytes *= dim;
  }
  return bytes;
}

// ---------------------------------------------------------------- reading

typedef struct entry {
  gk_st_tensor t;
  uint64_t begin, end;   // data_offsets
} entry;

struct gk_st_file {
  unsigned char *bytes;  // the whole file
  size_t size;
  char *what;            // the file's name, for messages
  entry *entries;        // sorted by data offsets
  size_t nentries;
  const entry **by_name; // sorted by name
  gk_st_meta *meta;      // sorted by key
  size_t nmeta;
};

void gk_st_close(gk_st_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->nentries; i++) free((char *)f->entries[i].t.name);
  for (size_t i = 0; i < f->nmeta; i++) {
    free((char *)f->meta[i].key);
    free((char *)f->meta[i].value);
  }
  free(f->entries);
  free(f->by_name);
  free(f->meta);
  free(f->what);
  free(f->bytes);
  free(f);
}

// An error about the file: "safetensors file 'WHAT': <message>".
static gk_status bad(const gk_st_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gk_status bad(const gk_st_file *f, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return gk_nn_fail(GK_NN_ERR_FILE, "safetensors file '%.120s': %s", f->what, msg);
}

// The header parser's state: the JSON text (the header) and the file.
typedef struct jp {
  gk_json j;
  gk_st_file *f;
} jp;

// One tensor's entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
static gk_status parse_entry(jp *p, entry *e) {
  char ctx[160], fctx[200];
  snprintf(ctx, sizeof ctx, "in the entry of tensor '%.80s'", e->t.name);
  gk_status st = gk_json_expect(&p->j, '{', ctx);
  if (st) return st;
  int have[3] = {0, 0, 0};  // dtype, shape, data_offsets
  static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
  gk_json_peek(&p->j);
  int more = !(p->j.i < p->j.n && p->j.s[p->j.i] == '}');
  if (!more) p->j.i++;
  while (more) {
    char *key;
    if ((st = gk_json_string(&p->j, &key, ctx))) return st;
    int field = -1;
    for (int k = 0; k < 3; k++)
      if (!strcmp(key, fields[k])) field = k;
    if (field < 0) {
      st = bad(p->f, "tensor '%.80s': unknown field '%.40s' (expected dtype, shape and data_offsets)", e->t.name,
               key);
      free(key);
      return st;
    }
    free(key);
    if (have[field])
      return bad(p->f, "tensor '%.80s': field '%s' appears twice", e->t.name, fields[field]);
    have[field] = 1;
    snprintf(fctx, sizeof fctx, "in field '%s' of tensor '%.80s'", fields[field], e->t.name);
    if ((st = gk_json_expect(&p->j, ':', fctx))) return st;
    if (field == 0) {
      char *name;
      if ((st = gk_json_string(&p->j, &name, fctx))) return st;
      int dt = -1;
      for (int k = 0; k < GK_ST_DTYPE_COUNT_; k++)
        if (!strcmp(name, dtype_names[k])) dt = k;
      if (dt < 0) {
        st = bad(p->f, "tensor '%.80s': field 'dtype': unknown or unsupported dtype '%.20s' (expected F32, F64, "
                       "F16, BF16, I32, I64 or U8)",
                 e->t.name, name);
        free(name);
        return st;
      }
      free(name);
      e->t.dtype = (gk_st_dtype)dt;
    } else if (field == 1) {
      if ((st = gk_json_expect(&p->j, '[', fctx))) return st;
      gk_json_peek(&p->j);
      int more_dims = !(p->j.i < p->j.n && p->j.s[p->j.i] == ']');
      if (!more_dims) p->j.i++;
      while (more_dims) {
        uint64_t dim;
        if ((st = gk_json_uint(&p->j, &dim, fctx))) return st;
        if (e->t.rank == GK_MAX_RANK)
          return bad(p->f, "tensor '%.80s': field 'shape' has more than %d dimensions", e->t.name, GK_MAX_RANK);
        if (dim > (uint64_t)INT64_MAX)
          return bad(p->f, "tensor '%.80s': field 'shape': dimension %d is %llu, too large", e->t.name, e->t.rank,
                     (unsigned long long)dim);
        e->t.shape[e->t.rank++] = (int64_t)dim;
        if ((st = gk_json_next_or_close(&p->j, ']', &more_dims, fctx))) return st;
      }
    } else {
      if ((st = gk_json_expect(&p->j, '[', fctx)) || (st = gk_json_uint(&p->j, &e->begin, fctx)) || (st = gk_json_expect(&p->j, ',', fctx)) ||
          (st = gk_json_uint(&p->j, &e->end, fctx)) || (st = gk_json_expect(&p->j, ']', fctx)))
        return st;
    }
    if ((st = gk_json_next_or_close(&p->j, '}', &more, ctx))) return st;
  }
  for (int k = 0; k < 3; k++)
    if (!have[k]) return bad(p->f, "tensor '%.80s': field '%s' is missing", e->t.name, fields[k]);
  return GK_SUCCESS;
}

// "__metadata__": {"key": "value", ...}, appended to f->meta.
static gk_status parse_metadata(jp *p, size_t *cap) {
  gk_st_file *f = p->f;
  gk_status st = gk_json_expect(&p->j, '{', "as the value of __metadata__");
  if (st) return st;
  gk_json_peek(&p->j);
  int more = !(p->j.i < p->j.n && p->j.s[p->j.i] == '}');
  if (!more) p->j.i++;
  while (more) {
    if (f->nmeta == *cap) {
      size_t ncap = *cap ? 2 * *cap : 8;
      gk_st_meta *m = realloc(f->meta, ncap * sizeof *m);
      if (!m) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "safetensors: out of memory reading metadata");
      f->meta = m;
      *cap = ncap;
    }
    char *key, *value, ctx[160];
    if ((st = gk_json_string(&p->j, &key, "as a key of __metadata__"))) return st;
    snprintf(ctx, sizeof ctx, "as the value of metadata '%.80s' (values must be strings)", key);
    if ((st = gk_json_expect(&p->j, ':', "after a key of __metadata__")) || (st = gk_json_string(&p->j, &value, ctx))) {
      free(key);
      return st;
    }
    f->meta[f->nmeta].key = key;
    f->meta[f->nmeta].value = value;
    f->nmeta++;
    if ((st = gk_json_next_or_close(&p->j, '}', &more, "in __metadata__"))) return st;
  }
  return GK_SUCCESS;
}

// The whole header object.
static gk_status parse_header(jp *p) {
  gk_st_file *f = p->f;
  char fb[64];
  if (p->j.n == 0) return bad(f, "the header is empty (header length 0)");
  if (p->j.s[0] != '{') return bad(f, "the header does not start with '{' (found %s)", gk_json_found(&p->j, fb, sizeof fb));
  p->j.i = 1;
  size_t cap = 0, meta_cap = 0;
  int seen_meta = 0;
  gk_status st;
  gk_json_peek(&p->j);
  int more = !(p->j.i < p->j.n && p->j.s[p->j.i] == '}');
  if (!more) p->j.i++;
  while (more) {
    char *name;
    if ((st = gk_json_string(&p->j, &name, "as a tensor name"))) return st;
    char ctx[160];
    snprintf(ctx, sizeof ctx, "after the name '%.80s'", name);
    if ((st = gk_json_expect(&p->j, ':', ctx))) {
      free(name);
      return st;
    }
    if (!strcmp(name, "__metadata__")) {
      free(name);
      if (seen_meta) return bad(f, "__metadata__ appears twice");
      seen_meta = 1;
      if ((st = parse_metadata(p, &meta_cap))) return st;
    } else {
      if (f->nentries == cap) {
        size_t ncap = cap ? 2 * cap : 16;
        entry *e = realloc(f->entries, ncap * sizeof *e);
        if (!e) {
          free(name);
          return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "safetensors: out of memory reading the header");
        }
        f->entries = e;
        cap = ncap;
      }
      entry *e = &f->entries[f->nentries++];
      memset(e, 0, sizeof *e);
      e->t.name = name;
      if ((st = parse_entry(p, e))) return st;
    }
    if ((st = gk_json_next_or_close(&p->j, '}', &more, "in the header object"))) return st;
  }
  gk_json_peek(&p->j);
  if (p->j.i < p->j.n)
    return bad(f, "header byte %zu: %s after the end of the JSON object (only spaces may pad the header)", p->j.i,
               gk_json_found(&p->j, fb, sizeof fb));
  return GK_SUCCESS;
}

static int cmp_entry_name(const void *a, const void *b) {
  return strcmp((*(const entry *const *)a)->t.name, (*(const entry *const *)b)->t.name);
}
static int cmp_meta_key(const void *a, const void *b) {
  return strcmp(((const gk_st_meta *)a)->key, ((const gk_st_meta *)b)->key);
}
static int cmp_entry_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->t.name, y->t.name);
}

// Names and keys unique; each tensor's offsets and size; the tensors tile the
// data section exactly. Fills by_name, data pointers and nbytes.
static gk_status validate(gk_st_file *f, size_t data_start) {
  uint64_t data_len = f->size - data_start;
  char sb[128];
  f->by_name = malloc((f->nentries ? f->nentries : 1) * sizeof *f->by_name);
  if (!f->by_name) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
  for (size_t i = 0; i < f->nentries; i++) f->by_name[i] = &f->entries[i];
  sort(f->by_name, f->nentries, sizeof *f->by_name, cmp_entry_name);
  for (size_t i = 1; i < f->nentries; i++)
    if (!strcmp(f->by_name[i]->t.name, f->by_name[i - 1]->t.name))
      return bad(f, "tensor name '%.80s' appears twice", f->by_name[i]->t.name);
  sort(f->meta, f->nmeta, sizeof *f->meta, cmp_meta_key);
  for (size_t i = 1; i < f->nmeta; i++)
    if (!strcmp(f->meta[i].key, f->meta[i - 1].key)) return bad(f, "metadata key '%.80s' appears twice", f->meta[i].key);

  for (size_t i = 0; i < f->nentries; i++) {
    entry *e = &f->entries[i];
    int overflow;
    uint64_t need = tensor_bytes(e->t.dtype, e->t.rank, e->t.shape, &overflow);
    shape_str(sb, sizeof sb, e->t.rank, e->t.shape);
    if (overflow)
      return bad(f, "tensor '%.80s': shape %s of %s has more bytes than 2^64", e->t.name, sb,
                 dtype_names[e->t.dtype]);
    if (e->begin > e->end)
      return bad(f, "tensor '%.80s': data_offsets [%llu, %llu] begin after they end", e->t.name,
                 (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != need)
      return bad(f, "tensor '%.80s': data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu", e->t.name,
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)(e->end - e->begin), dtype_names[e->t.dtype], sb, (unsigned long long)need);
    if (e->end > data_len)
      return bad(f, "tensor '%.80s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes): "
                    "the file is truncated or the offsets are wrong",
                 e->t.name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_len);
    e->t.nbytes = (size_t)need;
    e->t.data = f->bytes + data_start + e->begin;
  }

  sort(f->entries, f->nentries, sizeof *f->entries, cmp_entry_offsets);
  // Sorting moved the entries: rebuild the name index.
  for (size_t i = 0; i < f->nentries; i++) f->by_name[i] = &f->entries[i];
  sort(f->by_name, f->nentries, sizeof *f->by_name, cmp_entry_name);
  uint64_t pos = 0;
  for (size_t i = 0; i < f->nentries; i++) {
    const entry *e = &f->entries[i];
    if (e->begin > pos)
      return bad(f, "bytes [%llu, %llu) of the data section belong to no tensor (the next is '%.80s')",
                 (unsigned long long)pos, (unsigned long long)e->begin, e->t.name);
    if (e->begin < pos) {
      const entry *prev = &f->entries[i - 1];
      return bad(f, "tensor '%.80s': data_offsets [%llu, %llu] overlap those of tensor '%.80s' [%llu, %llu]",
                 e->t.name, (unsigned long long)e->begin, (unsigned long long)e->end, prev->t.name,
                 (unsigned long long)prev->begin, (unsigned long long)prev->end);
    }
    pos = e->end;
  }
  if (pos != data_len)
    return bad(f, "the data section has %llu bytes but the tensors end at byte %llu (%llu bytes belong to no tensor)",
               (unsigned long long)data_len, (unsigned long long)pos, (unsigned long long)(data_len - pos));
  return GK_SUCCESS;
}

// Parse and validate `bytes` (ownership taken, freed on failure).
static gk_status parse_owned(unsigned char *bytes, size_t size, const char *what, gk_st_file **out) {
  *out = NULL;
  gk_st_file *f = calloc(1, sizeof *f);
  char *w = strdup(what);
  if (!f || !w) {
    free(f);
    free(w);
    free(bytes);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "safetensors: out of memory");
  }
  f->bytes = bytes;
  f->size = size;
  f->what = w;
  gk_status st = GK_SUCCESS;
  if (!host_is_little_endian()) {
    st = gk_nn_fail(GK_ERR_UNSUPPORTED, "safetensors: only little-endian hosts are supported");
  } else if (size < 8) {
    st = bad(f, "the file has %zu bytes, fewer than the 8 of the header length (truncated?)", size);
  } else {
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | bytes[k];
    if (n > GK_ST_MAX_HEADER && n <= size - 8)
      st = bad(f, "the header length %llu is over the limit of %llu bytes", (unsigned long long)n, GK_ST_MAX_HEADER);
    else if (n > size - 8)
      st = bad(f, "the header length %llu runs past the end of the file (%zu bytes after the length): truncated or "
                  "not a safetensors file",
               (unsigned long long)n, size - 8);
    else {
      char json_what[160];
      snprintf(json_what, sizeof json_what, "safetensors file '%.120s'", f->what);
      jp p = {{bytes + 8, (size_t)n, 0, json_what, "header"}, f};
      st = parse_header(&p);
      if (st == GK_SUCCESS) st = validate(f, 8 + (size_t)n);
    }
  }
  if (st != GK_SUCCESS) {
    gk_st_close(f);
    return st;
  }
  *out = f;
  return GK_SUCCESS;
}

gk_status gk_st_load(const char *path, gk_st_file **file) {
  if (!path || !file) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_load: %s is NULL", path ? "file" : "path");
  *file = NULL;
  unsigned char *bytes;
  size_t size;
  gk_status st = gk_nn_read_file(path, "safetensors file", &bytes, &size);
  if (st) return st;
  return parse_owned(bytes, size, path, file);
}

gk_status gk_st_parse(const void *bytes, size_t size, const char *what, gk_st_file **file) {
  if (!file || !what || (!bytes && size))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_parse: %s is NULL", !file ? "file" : !what ? "what" : "bytes");
  *file = NULL;
  unsigned char *copy = malloc(size ? size : 1);
  if (!copy) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_parse: cannot allocate %zu bytes", size);
  if (size) memcpy(copy, bytes, size);
  return parse_owned(copy, size, what, file);
}

size_t gk_st_num_tensors(const gk_st_file *f) { return f ? f->nentries : 0; }

const gk_st_tensor *gk_st_tensor_at(const gk_st_file *f, size_t i) {
  return f && i < f->nentries ? &f->entries[i].t : NULL;
}

const gk_st_tensor *gk_st_lookup(const gk_st_file *f, const char *name) {
  if (!f || !name) return NULL;
  size_t lo = 0, hi = f->nentries;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(f->by_name[mid]->t.name, name);
    if (!c) return &f->by_name[mid]->t;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

gk_status gk_st_read(const gk_st_file *f, const char *name, gk_st_dtype dtype, int rank, const int64_t *shape,
                     void *dst) {
  if (!f || !name) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_read: %s is NULL", f ? "name" : "file");
  if ((unsigned)dtype >= GK_ST_DTYPE_COUNT_)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_read: dtype %d is not a safetensors dtype", (int)dtype);
  if (rank < 0 || rank > GK_MAX_RANK)
    return gk_nn_fail(GK_ERR_BAD_RANK, "gk_st_read: rank %d is not in [0, %d]", rank, GK_MAX_RANK);
  if (rank && !shape) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_read: shape is NULL");
  const gk_st_tensor *t = gk_st_lookup(f, name);
  if (!t) return bad(f, "there is no tensor named '%.80s'", name);
  int same = t->dtype == dtype && t->rank == rank;
  for (int d = 0; same && d < rank; d++) same = t->shape[d] == shape[d];
  if (!same) {
    char got[128], want[128];
    shape_str(got, sizeof got, t->rank, t->shape);
    shape_str(want, sizeof want, rank, shape);
    return bad(f, "tensor '%.80s' is %s %s, expected %s %s", name, dtype_names[t->dtype], got, dtype_names[dtype],
               want);
  }
  if (t->nbytes && !dst) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_read: dst is NULL");
  if (t->nbytes) memcpy(dst, t->data, t->nbytes);
  return GK_SUCCESS;
}

size_t gk_st_num_metadata(const gk_st_file *f) { return f ? f->nmeta : 0; }

const gk_st_meta *gk_st_metadata_at(const gk_st_file *f, size_t i) { return f && i < f->nmeta ? &f->meta[i] : NULL; }

const char *gk_st_metadata(const gk_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  gk_st_meta k = {key, NULL};
  const gk_st_meta *m = f->nmeta ? bsearch(&k, f->meta, f->nmeta, sizeof *f->meta, cmp_meta_key) : NULL;
  return m ? m->value : NULL;
}

gk_status gk_st_get_metadata(const gk_st_file *f, const char *key, const char **value) {
  if (!f || !key || !value)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_get_metadata: %s is NULL", !f ? "file" : !key ? "key" : "value");
  *value = gk_st_metadata(f, key);
  if (!*value) return bad(f, "there is no metadata entry '%.80s'", key);
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- writing

// A JSON string literal of UTF-8 text s.
static void put_json_string(gk_nn_buf *b, const char *s) {
  gk_nn_buf_puts(b, "\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"') gk_nn_buf_puts(b, "\\\"");
    else if (*c == '\\') gk_nn_buf_puts(b, "\\\\");
    else if (*c == '\n') gk_nn_buf_puts(b, "\\n");
    else if (*c == '\t') gk_nn_buf_puts(b, "\\t");
    else if (*c == '\r') gk_nn_buf_puts(b, "\\r");
    else if (*c < 0x20) gk_nn_buf_printf(b, "\\u%04x", *c);
    else gk_nn_buf_append(b, c, 1);
  }
  gk_nn_buf_puts(b, "\"");
}

typedef struct order_item {
  const gk_st_tensor *t;
  size_t index;
  uint64_t nbytes;
} order_item;

static int cmp_order(const void *a, const void *b) {
  const order_item *x = a, *y = b;
  size_t sx = gk_st_dtype_size(x->t->dtype), sy = gk_st_dtype_size(y->t->dtype);
  if (sx != sy) return sx > sy ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}
static int cmp_order_name(const void *a, const void *b) {
  return strcmp(((const order_item *)a)->t->name, ((const order_item *)b)->t->name);
}
static int cmp_meta_ptr(const void *a, const void *b) {
  return strcmp((*(const gk_st_meta *const *)a)->key, (*(const gk_st_meta *const *)b)->key);
}

// Arguments of gk_st_save; fills items[i] (in the caller's order).
static gk_status check_save_args(const gk_st_tensor *tensors, size_t n, const gk_st_meta *meta, size_t nmeta,
                                 order_item *items, const gk_st_meta **mptr) {
  char sb[128];
  for (size_t i = 0; i < n; i++) {
    const gk_st_tensor *t = &tensors[i];
    if (!t->name) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: tensors[%zu].name is NULL", i);
    if (!*t->name) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: tensors[%zu].name is empty", i);
    if (!utf8_valid(t->name)) return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: tensors[%zu].name is not valid UTF-8", i);
    if (!strcmp(t->name, "__metadata__"))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: tensors[%zu].name '__metadata__' is reserved", i);
    if ((unsigned)t->dtype >= GK_ST_DTYPE_COUNT_)
      return gk_nn_fail(GK_ERR_BAD_DTYPE, "gk_st_save: tensor '%.80s': dtype %d is not a safetensors dtype", t->name,
                     (int)t->dtype);
    if (t->rank < 0 || t->rank > GK_MAX_RANK)
      return gk_nn_fail(GK_ERR_BAD_RANK, "gk_st_save: tensor '%.80s': rank %d is not in [0, %d]", t->name, t->rank,
                     GK_MAX_RANK);
    for (int d = 0; d < t->rank; d++)
      if (t->shape[d] < 0)
        return gk_nn_fail(GK_ERR_BAD_SHAPE, "gk_st_save: tensor '%.80s': shape %s has a negative dimension", t->name,
                       shape_str(sb, sizeof sb, t->rank, t->shape));
    int overflow;
    uint64_t bytes = tensor_bytes(t->dtype, t->rank, t->shape, &overflow);
    if (overflow || bytes > (uint64_t)SIZE_MAX / 2)
      return gk_nn_fail(GK_ERR_BAD_SHAPE, "gk_st_save: tensor '%.80s': shape %s is too large", t->name,
                     shape_str(sb, sizeof sb, t->rank, t->shape));
    if (bytes && !t->data) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: tensor '%.80s': data is NULL", t->name);
    items[i] = (order_item){t, i, bytes};
  }
  sort(items, n, sizeof *items, cmp_order_name);
  for (size_t i = 1; i < n; i++)
    if (!strcmp(items[i].t->name, items[i - 1].t->name))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: tensor name '%.80s' appears twice", items[i].t->name);
  for (size_t i = 0; i < nmeta; i++) {
    if (!meta[i].key || !meta[i].value)
      return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: meta[%zu].%s is NULL", i, meta[i].key ? "value" : "key");
    if (!utf8_valid(meta[i].key) || !utf8_valid(meta[i].value))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: metadata '%.80s': the %s is not valid UTF-8", meta[i].key,
                     utf8_valid(meta[i].key) ? "value" : "key");
    mptr[i] = &meta[i];
  }
  sort(mptr, nmeta, sizeof *mptr, cmp_meta_ptr);
  for (size_t i = 1; i < nmeta; i++)
    if (!strcmp(mptr[i]->key, mptr[i - 1]->key))
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_st_save: metadata key '%.80s' appears twice", mptr[i]->key);
  return GK_SUCCESS;
}

gk_status gk_st_save(const char *path, const gk_st_tensor *tensors, size_t n, const gk_st_meta *meta, size_t nmeta) {
  if (!path) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: path is NULL");
  if (n && !tensors) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: tensors is NULL");
  if (nmeta && !meta) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save: meta is NULL");
  if (!host_is_little_endian()) return gk_nn_fail(GK_ERR_UNSUPPORTED, "gk_st_save: only little-endian hosts are supported");
  order_item *items = malloc((n ? n : 1) * sizeof *items);
  const gk_st_meta **mptr = malloc((nmeta ? nmeta : 1) * sizeof *mptr);
  gk_nn_chunk *chunks = malloc((n + 2) * sizeof *chunks);
  gk_nn_buf h = {0};
  gk_status st = GK_SUCCESS;
  if (!items || !mptr || !chunks) {
    st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_save: out of memory for %zu tensors", n);
    goto done;
  }
  if ((st = check_save_args(tensors, n, meta, nmeta, items, mptr))) goto done;

  // Data order: element size descending, the caller's order within a size.
  sort(items, n, sizeof *items, cmp_order);
  gk_nn_buf_puts(&h, "{");
  if (nmeta) {
    gk_nn_buf_puts(&h, "\"__metadata__\":{");
    for (size_t i = 0; i < nmeta; i++) {
      if (i) gk_nn_buf_puts(&h, ",");
      put_json_string(&h, mptr[i]->key);
      gk_nn_buf_puts(&h, ":");
      put_json_string(&h, mptr[i]->value);
    }
    gk_nn_buf_puts(&h, "}");
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < n; i++) {
    const gk_st_tensor *t = items[i].t;
    if (i || nmeta) gk_nn_buf_puts(&h, ",");
    put_json_string(&h, t->name);
    gk_nn_buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", dtype_names[t->dtype]);
    for (int d = 0; d < t->rank; d++) gk_nn_buf_printf(&h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
    gk_nn_buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                     (unsigned long long)(offset + items[i].nbytes));
    offset += items[i].nbytes;
    chunks[2 + i] = (gk_nn_chunk){t->data, (size_t)items[i].nbytes};
  }
  gk_nn_buf_puts(&h, "}");
  while (h.len % 8) gk_nn_buf_puts(&h, " ");
  if (h.failed) {
    st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_save: out of memory building the header");
    goto done;
  }
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
  chunks[0] = (gk_nn_chunk){len8, 8};
  chunks[1] = (gk_nn_chunk){h.data, h.len};
  st = gk_nn_write_atomic(path, "safetensors file", chunks, n + 2);
done:
  gk_nn_buf_free(&h);
  free(items);
  free(mptr);
  free(chunks);
  return st;
}

// ---------------------------------------------------------------- checksums

#define CRC_PREFIX "crc32:"

uint32_t gk_st_crc32(uint32_t crc, const void *data, size_t n) {
  // The reflected CRC-32 of zlib and PNG (polynomial 0xEDB88320), a byte at a
  // time through a table (built per call: 2k operations, next to the data).
  uint32_t table[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// "crc32:<name>" into a new string (NULL: no memory).
static char *checksum_key(const char *name) {
  size_t n = strlen(CRC_PREFIX) + strlen(name) + 1;
  char *key = malloc(n);
  if (key) snprintf(key, n, "%s%s", CRC_PREFIX, name);
  return key;
}

gk_status gk_st_save_checksummed(const char *path, const gk_st_tensor *tensors, size_t n, const gk_st_meta *meta,
                                 size_t nmeta) {
  if (!path) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save_checksummed: path is NULL");
  if ((n && !tensors) || (nmeta && !meta))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_save_checksummed: %s is NULL", n && !tensors ? "tensors" : "meta");
  // A tensor the checksum cannot be taken of: gk_st_save refuses it, with
  // the message that names the problem, before it writes anything.
  for (size_t i = 0; i < n; i++) {
    const gk_st_tensor *t = &tensors[i];
    int overflow = 1;
    uint64_t bytes = 0;
    if ((unsigned)t->dtype < GK_ST_DTYPE_COUNT_ && t->rank >= 0 && t->rank <= GK_MAX_RANK)
      bytes = tensor_bytes(t->dtype, t->rank, t->shape, &overflow);
    if (!t->name || overflow || bytes > (uint64_t)SIZE_MAX / 2 || (bytes && !t->data))
      return gk_st_save(path, tensors, n, meta, nmeta);
  }
  gk_st_meta *all = calloc(nmeta + n + 1, sizeof *all);
  char *values = malloc(n * 9 + 1);  // 8 hex digits and a NUL per tensor
  gk_status st = GK_SUCCESS;
  if (!all || !values) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_save_checksummed: out of memory for %zu tensors", n);
  for (size_t i = 0; i < nmeta && st == GK_SUCCESS; i++) all[i] = meta[i];
  for (size_t i = 0; i < n && st == GK_SUCCESS; i++) {
    const gk_st_tensor *t = &tensors[i];
    int overflow;
    size_t bytes = (size_t)tensor_bytes(t->dtype, t->rank, t->shape, &overflow);
    snprintf(values + 9 * i, 9, "%08x", (unsigned)gk_st_crc32(0, t->data, bytes));
    all[nmeta + i] = (gk_st_meta){checksum_key(t->name), values + 9 * i};
    if (!all[nmeta + i].key) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_save_checksummed: out of memory");
  }
  if (st == GK_SUCCESS) st = gk_st_save(path, tensors, n, all, nmeta + n);
  for (size_t i = 0; all && i < n; i++) free((char *)all[nmeta + i].key);
  free(all);
  free(values);
  return st;
}

gk_status gk_st_verify_checksums(const gk_st_file *f, size_t *checked) {
  if (!f || !checked) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_st_verify_checksums: %s is NULL", f ? "checked" : "file");
  *checked = 0;
  size_t plen = strlen(CRC_PREFIX);
  for (size_t i = 0; i < f->nmeta; i++) {
    const char *key = f->meta[i].key, *value = f->meta[i].value;
    if (strncmp(key, CRC_PREFIX, plen)) continue;
    const gk_st_tensor *t = gk_st_lookup(f, key + plen);
    if (!t) return bad(f, "metadata '%.80s' is the checksum of a tensor the file does not have", key);
    uint32_t want = 0;
    int ok = strlen(value) == 8;
    for (int d = 0; ok && d < 8; d++) {
      char c = value[d];
      ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      want = want << 4 | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!ok) return bad(f, "metadata '%.80s': '%.40s' is not a checksum (8 lowercase hex digits)", key, value);
    uint32_t got = gk_st_crc32(0, t->data, t->nbytes);
    if (got != want)
      return bad(f, "tensor '%.80s': the data does not match its checksum (crc32 %08x, recorded %08x): the file is "
                    "damaged",
                 t->name, (unsigned)got, (unsigned)want);
    (*checked)++;
  }
  // Some tensors with a checksum and others without: an entry was lost.
  for (size_t i = 0; *checked && *checked != f->nentries && i < f->nentries; i++) {
    char *key = checksum_key(f->entries[i].t.name);
    if (!key) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "gk_st_verify_checksums: out of memory");
    int missing = !gk_st_metadata(f, key);
    free(key);
    if (missing)
      return bad(f, "tensor '%.80s' has no checksum, while %zu other tensor%s %s one", f->entries[i].t.name,
                 *checked, gk_plural((long long)*checked), *checked == 1 ? "has" : "have");
  }
  return GK_SUCCESS;
}
