// Byte-level BPE (the scheme and the files in bpe.h).
#include "bpe.h"

#include "json.h"
#include "safetensors.h"
#include "unicode_tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ---------------------------------------------------------------- tables

// Character classes of the pre-tokenizing pattern.
enum { CL_OTHER, CL_LETTER, CL_NUMBER, CL_SPACE };

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp < r[mid][0]) hi = mid;
    else if (cp > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

#define NRANGES(t) (sizeof(t) / sizeof(t[0]))

static int is_js_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

static int class_of(uint32_t cp) {
  if (is_js_space(cp)) return CL_SPACE;
  if (in_ranges(gk_unicode_letters, NRANGES(gk_unicode_letters), cp)) return CL_LETTER;
  if (in_ranges(gk_unicode_numbers, NRANGES(gk_unicode_numbers), cp)) return CL_NUMBER;
  return CL_OTHER;
}

static unsigned char ascii_class[128];

static int ccc_of(uint32_t cp) {
  size_t lo = 0, hi = NRANGES(gk_unicode_ccc);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp < gk_unicode_ccc[mid][0]) hi = mid;
    else if (cp > gk_unicode_ccc[mid][1]) lo = mid + 1;
    else return (int)gk_unicode_ccc[mid][2];
  }
  return 0;
}

// GPT-2's byte-to-unicode map: byte b stands for code point byte_cp[b].
static uint32_t byte_cp[256];

static void init_tables(void) {
  static int done;
  if (done) return;
  uint32_t next = 0x100;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_cp[b] = printable ? (uint32_t)b : next++;
  }
  for (int c = 0; c < 128; c++) ascii_class[c] = (unsigned char)class_of((uint32_t)c);
  done = 1;
}

// The code point at s[0, n): its length in *len, or 0 when s does not start
// with a valid UTF-8 sequence; -1 when it starts with a valid prefix cut
// short by the end of s (more bytes may complete it).
static int utf8_at(const unsigned char *s, size_t n, uint32_t *cp, size_t *len) {
  unsigned c = s[0];
  if (c < 0x80) {
    *cp = c, *len = 1;
    return 1;
  }
  size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (!k) return 0;
  for (size_t j = 1; j < k; j++) {
    if (j >= n) return -1;
    unsigned d = s[j];
    unsigned lo = 0x80, hi = 0xBF;
    if (j == 1 && c == 0xE0) lo = 0xA0;
    if (j == 1 && c == 0xED) hi = 0x9F;
    if (j == 1 && c == 0xF0) lo = 0x90;
    if (j == 1 && c == 0xF4) hi = 0x8F;
    if (d < lo || d > hi) return 0;
  }
  uint32_t v = c & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
  for (size_t j = 1; j < k; j++) v = v << 6 | (s[j] & 0x3F);
  *cp = v, *len = k;
  return 1;
}

// ---------------------------------------------------------------- the tokenizer

typedef struct merge_slot {
  uint64_t pair;  // left id << 32 | right id; UINT64_MAX when empty
  int32_t rank, result;
} merge_slot;

typedef struct added_token {
  unsigned char *bytes;
  size_t len;
  int32_t id;
} added_token;

typedef struct cache_slot {
  uint64_t hash;
  uint32_t key_off, key_len;  // key_len 0: empty
  uint32_t ids_off, ids_len;
} cache_slot;

// Token ids are below this (the tables are indexed by id).
#define GK_BPE_MAX_ID (1 << 24)

#define CACHE_SLOTS (1u << 17)
#define CACHE_MAX_WORD 256
#define CACHE_MAX_BYTES (48u << 20)

struct gk_bpe {
  int32_t vocab_size;
  unsigned char *tok_bytes;   // every token's bytes, one after another
  uint32_t *tok_off;          // token id's bytes: tok_bytes[tok_off[id], tok_off[id] + tok_len[id])
  int32_t *tok_len;           // -1: no token has this id
  int32_t byte_id[256];       // the token of each single byte, -1 if none
  merge_slot *merges;         // open addressing, merge_cap slots (a power of 2)
  size_t merge_cap, nmerges;
  added_token *added;         // sorted by length, longest first
  size_t nadded, added_max_len;
  unsigned char added_first[256];  // 1: some added token starts with this byte
  size_t text_base;           // offset of the text being encoded in its stream, for messages
  int nfc;                    // the normalizer is NFC
  char describe[160];
  // The word cache.
  cache_slot *cache;
  size_t cache_used;
  gk_nn_buf cache_keys;
  gk_bpe_ids cache_ids;
  // Scratch of the merge loop.
  int32_t *sym, *prev, *next;
  uint64_t *heap;
  size_t scratch_cap;
};

void gk_bpe_ids_free(gk_bpe_ids *ids) {
  free(ids->data);
  ids->data = NULL;
  ids->len = ids->cap = 0;
}

static int ids_reserve(gk_bpe_ids *ids, size_t more) {
  if (ids->cap - ids->len >= more) return 1;
  size_t cap = ids->cap ? ids->cap : 1024;
  while (cap - ids->len < more) cap *= 2;
  int32_t *d = realloc(ids->data, cap * sizeof *d);
  if (!d) return 0;
  ids->data = d;
  ids->cap = cap;
  return 1;
}

void gk_bpe_free(gk_bpe *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nadded; i++) free(t->added[i].bytes);
  free(t->added);
  free(t->tok_bytes);
  free(t->tok_off);
  free(t->tok_len);
  free(t->merges);
  free(t->cache);
  gk_nn_buf_free(&t->cache_keys);
  gk_bpe_ids_free(&t->cache_ids);
  free(t->sym);
  free(t->prev);
  free(t->next);
  free(t->heap);
  free(t);
}

int32_t gk_bpe_vocab_size(const gk_bpe *t) { return t ? t->vocab_size : 0; }
const char *gk_bpe_describe(const gk_bpe *t) { return t ? t->describe : ""; }

static int cmp_merge_rank(const void *x, const void *y) {
  const merge_slot *a = x, *b = y;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

uint32_t gk_bpe_fingerprint(const gk_bpe *t) {
  if (!t) return 0;
  uint32_t crc = gk_st_crc32(0, &t->vocab_size, sizeof t->vocab_size);
  crc = gk_st_crc32(crc, t->tok_len, (size_t)t->vocab_size * sizeof *t->tok_len);
  for (int32_t id = 0; id < t->vocab_size; id++)
    if (t->tok_len[id] > 0) crc = gk_st_crc32(crc, t->tok_bytes + t->tok_off[id], (size_t)t->tok_len[id]);
  merge_slot *m = malloc((t->nmerges ? t->nmerges : 1) * sizeof *m);
  size_t n = 0;
  for (size_t i = 0; m && i < t->merge_cap; i++)
    if (t->merges[i].pair != UINT64_MAX) m[n++] = t->merges[i];
  if (m && n > 1) qsort(m, n, sizeof *m, cmp_merge_rank);
  for (size_t i = 0; m && i < n; i++) {
    int32_t v[3] = {(int32_t)(m[i].pair >> 32), (int32_t)(uint32_t)m[i].pair, m[i].result};
    crc = gk_st_crc32(crc, v, sizeof v);
  }
  free(m);
  for (size_t i = 0; i < t->nadded; i++) {
    crc = gk_st_crc32(crc, &t->added[i].id, sizeof t->added[i].id);
    crc = gk_st_crc32(crc, t->added[i].bytes, t->added[i].len);
  }
  return gk_st_crc32(crc, &t->nfc, sizeof t->nfc);
}

const unsigned char *gk_bpe_token_bytes(const gk_bpe *t, int32_t id, size_t *len) {
  if (!t || id < 0 || id >= t->vocab_size || t->tok_len[id] < 0) return NULL;
  *len = (size_t)t->tok_len[id];
  return t->tok_bytes + t->tok_off[id];
}

static uint64_t hash_bytes(const void *data, size_t n) {
  const unsigned char *s = data;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ x >> 33;
}

static const merge_slot *find_merge(const gk_bpe *t, int32_t a, int32_t b) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (size_t i = mix64(key) & (t->merge_cap - 1);; i = (i + 1) & (t->merge_cap - 1)) {
    if (t->merges[i].pair == key) return &t->merges[i];
    if (t->merges[i].pair == UINT64_MAX) return NULL;
  }
}

// ---------------------------------------------------------------- encoding

// The BPE merges of one word: its bytes s[0, n) -> ids appended to out.
static gk_status merge_word(gk_bpe *t, const unsigned char *s, size_t n, size_t text_pos, gk_bpe_ids *out) {
  if (n > t->scratch_cap) {
    size_t cap = n < 256 ? 256 : n;
    int32_t *sym = realloc(t->sym, cap * sizeof *sym);
    if (sym) t->sym = sym;
    int32_t *prev = realloc(t->prev, cap * sizeof *prev);
    if (prev) t->prev = prev;
    int32_t *next = realloc(t->next, cap * sizeof *next);
    if (next) t->next = next;
    uint64_t *heap = realloc(t->heap, 2 * cap * sizeof *heap);
    if (heap) t->heap = heap;
    if (!sym || !prev || !next || !heap) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for a word of %zu bytes", n);
    t->scratch_cap = cap;
  }
  if (n > INT32_MAX) return gk_nn_fail(GK_ERR_INVALID_VALUE, "tokenizer: a word of %zu bytes is too long", n);
  int32_t *sym = t->sym, *prev = t->prev, *next = t->next;
  for (size_t i = 0; i < n; i++) {
    sym[i] = t->byte_id[s[i]];
    if (sym[i] < 0)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "tokenizer: byte 0x%02x (byte %zu of the text%s) has no token in the vocabulary",
                        s[i], t->text_base + text_pos + i, t->nfc ? " in NFC" : "");
    prev[i] = (int32_t)i - 1;
    next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  // A min-heap of candidate merges (rank << 32 | position of the left symbol):
  // the lowest rank first, and the leftmost among equal ranks.
  uint64_t *heap = t->heap;
  size_t nheap = 0;
#define HEAP_PUSH(v)                                                   \
  do {                                                                 \
    size_t c_ = nheap++;                                               \
    heap[c_] = (v);                                                    \
    while (c_ && heap[(c_ - 1) / 2] > heap[c_]) {                      \
      uint64_t tmp_ = heap[c_];                                        \
      heap[c_] = heap[(c_ - 1) / 2], heap[(c_ - 1) / 2] = tmp_;        \
      c_ = (c_ - 1) / 2;                                               \
    }                                                                  \
  } while (0)
  for (size_t i = 0; i + 1 < n; i++) {
    const merge_slot *m = find_merge(t, sym[i], sym[i + 1]);
    if (m) HEAP_PUSH((uint64_t)m->rank << 32 | i);
  }
  while (nheap) {
    uint64_t top = heap[0];
    heap[0] = heap[--nheap];
    for (size_t c = 0;;) {  // sift down
      size_t l = 2 * c + 1, r = l + 1, m = c;
      if (l < nheap && heap[l] < heap[m]) m = l;
      if (r < nheap && heap[r] < heap[m]) m = r;
      if (m == c) break;
      uint64_t tmp = heap[c];
      heap[c] = heap[m], heap[m] = tmp;
      c = m;
    }
    int32_t i = (int32_t)(uint32_t)top, rank = (int32_t)(top >> 32);
    if (sym[i] < 0 || next[i] < 0) continue;  // merged away since
    const merge_slot *m = find_merge(t, sym[i], sym[next[i]]);
    if (!m || m->rank != rank) continue;  // the pair has changed since
    int32_t j = next[i];
    sym[i] = m->result;
    sym[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0 && (m = find_merge(t, sym[prev[i]], sym[i]))) HEAP_PUSH((uint64_t)m->rank << 32 | (uint32_t)prev[i]);
    if (next[i] >= 0 && (m = find_merge(t, sym[i], sym[next[i]]))) HEAP_PUSH((uint64_t)m->rank << 32 | (uint32_t)i);
  }
#undef HEAP_PUSH
  size_t count = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) count++;
  if (!ids_reserve(out, count)) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the token ids");
  for (int32_t i = 0; i >= 0; i = next[i]) out->data[out->len++] = sym[i];
  return GK_SUCCESS;
}

// One word -> ids, through the cache.
static gk_status encode_word(gk_bpe *t, const unsigned char *s, size_t n, size_t text_pos, gk_bpe_ids *out) {
  if (n == 1) {
    if (t->byte_id[s[0]] < 0) return merge_word(t, s, n, text_pos, out);  // reports the missing byte
    if (!ids_reserve(out, 1)) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the token ids");
    out->data[out->len++] = t->byte_id[s[0]];
    return GK_SUCCESS;
  }
  if (n > CACHE_MAX_WORD) return merge_word(t, s, n, text_pos, out);
  if (!t->cache && !(t->cache = calloc(CACHE_SLOTS, sizeof *t->cache)))
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the word cache");
  uint64_t h = hash_bytes(s, n);
  size_t i = h & (CACHE_SLOTS - 1);
  for (; t->cache[i].key_len; i = (i + 1) & (CACHE_SLOTS - 1)) {
    const cache_slot *c = &t->cache[i];
    if (c->hash == h && c->key_len == n && !memcmp(t->cache_keys.data + c->key_off, s, n)) {
      if (!ids_reserve(out, c->ids_len)) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the token ids");
      memcpy(out->data + out->len, t->cache_ids.data + c->ids_off, c->ids_len * sizeof(int32_t));
      out->len += c->ids_len;
      return GK_SUCCESS;
    }
  }
  size_t before = out->len;
  gk_status st = merge_word(t, s, n, text_pos, out);
  if (st) return st;
  // Remember it; a full cache starts again empty.
  size_t nids = out->len - before;
  if (t->cache_used >= CACHE_SLOTS / 2 || t->cache_keys.len + n > CACHE_MAX_BYTES) {
    memset(t->cache, 0, CACHE_SLOTS * sizeof *t->cache);
    t->cache_used = 0;
    t->cache_keys.len = 0;
    t->cache_ids.len = 0;
    i = h & (CACHE_SLOTS - 1);
  }
  if (t->cache_keys.failed || !ids_reserve(&t->cache_ids, nids)) return GK_SUCCESS;  // no caching, still correct
  cache_slot *c = &t->cache[i];
  c->hash = h;
  c->key_off = (uint32_t)t->cache_keys.len;
  c->key_len = (uint32_t)n;
  gk_nn_buf_append(&t->cache_keys, s, n);
  if (t->cache_keys.failed) {
    c->key_len = 0;
    return GK_SUCCESS;
  }
  c->ids_off = (uint32_t)t->cache_ids.len;
  c->ids_len = (uint32_t)nids;
  memcpy(t->cache_ids.data + t->cache_ids.len, out->data + before, nids * sizeof(int32_t));
  t->cache_ids.len += nids;
  t->cache_used++;
  return GK_SUCCESS;
}

#define NEED_MORE ((size_t)-1)

// The class of the character at s[i] (of n bytes), its length in *len;
// -1 at the end of a final text, -2 when more text is needed to tell.
static int class_at(const unsigned char *s, size_t n, size_t i, int final, size_t *len) {
  if (i >= n) return final ? -1 : -2;
  if (s[i] < 0x80) {
    *len = 1;
    return ascii_class[s[i]];
  }
  uint32_t cp;
  int r = utf8_at(s + i, n - i, &cp, len);
  if (r < 0 && !final) return -2;
  if (r <= 0) {  // not valid UTF-8: one byte of the third class
    *len = 1;
    return CL_OTHER;
  }
  return class_of(cp);
}

// The length of the word at s[0] (n >= 1 bytes follow) by the pattern, or
// NEED_MORE when the text after s[n) could change it.
static size_t match_word(const unsigned char *s, size_t n, int final) {
  size_t len = 1, k;
  int c;
  if (s[0] == '\'') {  // 's 't 're 've 'm 'll 'd
    if (n < 3 && !final) return NEED_MORE;
    if (n >= 2 && (s[1] == 's' || s[1] == 't' || s[1] == 'm' || s[1] == 'd')) return 2;
    if (n >= 3 && ((s[1] == 'r' && s[2] == 'e') || (s[1] == 'v' && s[2] == 'e') || (s[1] == 'l' && s[2] == 'l')))
      return 3;
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one class after an optional space.
  size_t start = s[0] == ' ' ? 1 : 0;
  c = class_at(s, n, start, final, &len);
  if (c == -2) return NEED_MORE;
  if (c >= 0 && c != CL_SPACE) {
    int cls = c;
    for (k = start + len;; k += len) {
      c = class_at(s, n, k, final, &len);
      if (c == -2) return NEED_MORE;
      if (c != cls) return k;
    }
  }
  // `\s+(?!\S)` then `\s+`: a run of white space, less its last character
  // when something other than white space follows and the run is longer
  // than one character. (s[0] is white space here: every other character
  // starts one of the runs above.)
  size_t last = 0;
  for (k = 0;;) {
    c = class_at(s, n, k, final, &len);
    if (c == -2) return NEED_MORE;
    if (c != CL_SPACE) break;
    last = k;
    k += len;
  }
  if (c >= 0 && last > 0) return last;  // followed by a non-space
  return k;
}

// The first added token in s[from, n): *at its offset, *which its index, or
// *at = n when there is none; *partial = 1 when the text ends with what may
// become one (then *at is where it starts).
static void find_added(const gk_bpe *t, const unsigned char *s, size_t from, size_t n, int final, size_t *at,
                       size_t *which, int *partial) {
  *partial = 0;
  for (size_t p = from; p < n; p++) {
    if (!t->added_first[s[p]]) continue;
    for (size_t a = 0; a < t->nadded; a++) {  // longest first
      const added_token *tok = &t->added[a];
      if (tok->bytes[0] != s[p]) continue;
      if (n - p >= tok->len) {
        if (!memcmp(s + p, tok->bytes, tok->len)) {
          *at = p, *which = a;
          return;
        }
      } else if (!final && !memcmp(s + p, tok->bytes, n - p)) {
        *at = p, *partial = 1;
        return;
      }
    }
  }
  *at = n;
}

// Unicode's NFC quick check over s[0, n): 1 when the text is certainly in
// NFC (every code point's quick check Yes, the non-zero combining classes
// never decreasing), else 0.
static int surely_nfc(const unsigned char *s, size_t n) {
  int last_ccc = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      last_ccc = 0;
      i++;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (utf8_at(s + i, n - i, &cp, &len) <= 0) {  // a byte that is not UTF-8: NFC leaves it alone
      last_ccc = 0;
      i++;
      continue;
    }
    int ccc = ccc_of(cp);
    if ((ccc && last_ccc > ccc) || in_ranges(gk_unicode_nfc_qc, NRANGES(gk_unicode_nfc_qc), cp)) return 0;
    last_ccc = ccc;
    i += len;
  }
  return 1;
}

// ---------------------------------------------------------------- NFC
//
// Unicode's normalization form C (UAX #15), for text the quick check is in
// doubt about: each code point's full canonical decomposition (the decomp
// table; Hangul syllables by formula), combining marks put in canonical
// order (a stable sort by combining class within each run of marks), then
// canonical composition (the compose table; Hangul by formula). The text is
// normalized segment by segment: a segment starts at a stable code point
// (combining class 0, quick check Yes: nothing before it can compose with it
// or reorder around it), so the NFC of the text is the NFC of its segments
// put end to end. Bytes that are not UTF-8 pass through unchanged and end a
// segment (Hugging Face's tokenizers take only valid UTF-8).

enum {
  HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,  // T: one before the first
  HANGUL_LCOUNT = 19, HANGUL_VCOUNT = 21, HANGUL_TCOUNT = 28, HANGUL_SCOUNT = 19 * 21 * 28
};

typedef struct cp_buf {  // a growable array of code points
  uint32_t *data;
  size_t len, cap;
  int failed;
} cp_buf;

static void cp_push(cp_buf *b, uint32_t cp) {
  if (b->len == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    uint32_t *d = realloc(b->data, cap * sizeof *d);
    if (!d) {
      b->failed = 1;
      return;
    }
    b->data = d, b->cap = cap;
  }
  b->data[b->len++] = cp;
}

// Append the full canonical decomposition of cp.
static void decompose(uint32_t cp, cp_buf *out) {
  if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SCOUNT) {
    uint32_t i = cp - HANGUL_S;
    cp_push(out, HANGUL_L + i / (HANGUL_VCOUNT * HANGUL_TCOUNT));
    cp_push(out, HANGUL_V + i % (HANGUL_VCOUNT * HANGUL_TCOUNT) / HANGUL_TCOUNT);
    if (i % HANGUL_TCOUNT) cp_push(out, HANGUL_T + i % HANGUL_TCOUNT);
    return;
  }
  size_t lo = 0, hi = NRANGES(gk_unicode_decomp);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp < gk_unicode_decomp[mid][0]) hi = mid;
    else if (cp > gk_unicode_decomp[mid][0]) lo = mid + 1;
    else {
      decompose(gk_unicode_decomp[mid][1], out);
      if (gk_unicode_decomp[mid][2]) decompose(gk_unicode_decomp[mid][2], out);
      return;
    }
  }
  cp_push(out, cp);
}

// The primary composite of the pair (a, b), or 0 when they do not compose.
static uint32_t composite_of(uint32_t a, uint32_t b) {
  if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LCOUNT && b >= HANGUL_V && b < HANGUL_V + HANGUL_VCOUNT)
    return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
  if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 && b > HANGUL_T &&
      b < HANGUL_T + HANGUL_TCOUNT)
    return a + (b - HANGUL_T);
  size_t lo = 0, hi = NRANGES(gk_unicode_compose);
  uint64_t key = (uint64_t)a << 32 | b;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t k = (uint64_t)gk_unicode_compose[mid][0] << 32 | gk_unicode_compose[mid][1];
    if (key < k) hi = mid;
    else if (key > k) lo = mid + 1;
    else return gk_unicode_compose[mid][2];
  }
  return 0;
}

// The code point at s[0, n) (*len its bytes) if it is a stable one; a byte
// that is not UTF-8 counts as stable. 0 for a code point that is not
// stable, -1 for a sequence cut short by the end of s.
static int stable_at(const unsigned char *s, size_t n, size_t *len) {
  uint32_t cp;
  int r = utf8_at(s, n, &cp, len);
  if (r < 0) return -1;
  if (r == 0) {
    *len = 1;
    return 1;
  }
  return ccc_of(cp) == 0 && !in_ranges(gk_unicode_nfc_qc, NRANGES(gk_unicode_nfc_qc), cp);
}

// The next piece of s[0, n) to normalize, *len its length: a run already in
// NFC that ends before a stable code point or at n (1: copied as it is),
// else the one segment at s[0] (0: NFC may change it).
static int next_piece(const unsigned char *s, size_t n, size_t *len) {
  size_t last_start = 0, i, k;
  int last_ccc = 0;
  for (i = 0; i < n; i += k) {
    uint32_t cp;
    int r = s[i] < 0x80 ? (cp = s[i], k = 1, 1) : utf8_at(s + i, n - i, &cp, &k);
    if (r <= 0) {  // a byte that is not UTF-8, or a cut sequence: as it is, and nothing composes across it
      k = 1, last_ccc = 0, last_start = i + 1;
      continue;
    }
    int ccc = cp < 0x300 ? 0 : ccc_of(cp);
    int yes = cp < 0x300 || !in_ranges(gk_unicode_nfc_qc, NRANGES(gk_unicode_nfc_qc), cp);
    if (!yes || (ccc && last_ccc > ccc)) break;
    if (!ccc) last_start = i;
    last_ccc = ccc;
  }
  if (i == n || last_start > 0) {
    *len = i == n ? n : last_start;
    return 1;
  }
  for (i = 0; i < n; i += k) {  // up to the next stable code point
    int r = stable_at(s + i, n - i, &k);
    if (r < 0) k = n - i;  // a cut sequence at the end: its bytes pass through
    if (i > 0 && r != 0) break;
  }
  *len = i;
  return 0;
}

static void put_utf8(gk_nn_buf *out, uint32_t cp) {
  unsigned char b[4];
  size_t k = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  if (k == 1) b[0] = (unsigned char)cp;
  else {
    for (size_t j = k - 1; j > 0; j--, cp >>= 6) b[j] = (unsigned char)(0x80 | (cp & 0x3F));
    b[0] = (unsigned char)((0xF0u << (4 - k)) | cp);
  }
  gk_nn_buf_append(out, b, k);
}

// Append the NFC of the segment s[0, n) (`cps` is scratch).
static void nfc_segment(const unsigned char *s, size_t n, cp_buf *cps, gk_nn_buf *out) {
  uint32_t cp;
  size_t len;
  cps->len = 0;
  for (size_t i = 0; i < n; i += len) {
    utf8_at(s + i, n - i, &cp, &len);
    decompose(cp, cps);
  }
  if (cps->failed) return;
  uint32_t *c = cps->data;
  for (size_t i = 1; i < cps->len; i++)  // canonical order: insertion sort of marks by class
    for (size_t j = i; j > 0 && ccc_of(c[j]) && ccc_of(c[j - 1]) > ccc_of(c[j]); j--) {
      uint32_t x = c[j];
      c[j] = c[j - 1], c[j - 1] = x;
    }
  // Composition: each code point joins the last starter when nothing between
  // them blocks it (a code point of class 0, or of a class at least its own).
  size_t kept = 0, starter = SIZE_MAX;
  int last_ccc = 0;
  for (size_t i = 0; i < cps->len; i++) {
    int cc = ccc_of(c[i]);
    uint32_t p;
    if (starter != SIZE_MAX && (kept == starter + 1 || (last_ccc != 0 && last_ccc < cc)) &&
        (p = composite_of(c[starter], c[i])) != 0) {
      c[starter] = p;
      continue;
    }
    if (cc == 0) starter = kept;
    last_ccc = cc;
    c[kept++] = c[i];
  }
  for (size_t i = 0; i < kept; i++) put_utf8(out, c[i]);
}

// Append the NFC of s[0, n).
static void nfc(const unsigned char *s, size_t n, cp_buf *cps, gk_nn_buf *out) {
  for (size_t i = 0, k; i < n; i += k) {
    if (next_piece(s + i, n - i, &k)) gk_nn_buf_append(out, s + i, k);
    else nfc_segment(s + i, k, cps, out);
  }
}

// The offset in s[0, n) of offset `at` of its NFC: the same text up to
// there, so that s from that offset on normalizes to the rest. SIZE_MAX
// when `at` falls inside a segment that NFC changed, and then *inside is
// where that segment's NFC starts.
static size_t raw_offset(const unsigned char *s, size_t n, size_t at, cp_buf *cps, size_t *inside) {
  gk_nn_buf one = {0};
  size_t norm = 0, raw = 0, k, found = SIZE_MAX;
  for (; raw < n && found == SIZE_MAX; raw += k) {
    if (next_piece(s + raw, n - raw, &k)) {  // as it is: every offset in it is the same text
      if (at <= norm + k) found = raw + (at - norm);
      norm += k;
      continue;
    }
    one.len = 0;
    nfc_segment(s + raw, k, cps, &one);
    if (at == norm) found = raw;
    else if (at < norm + one.len) break;
    norm += one.len;
  }
  if (found == SIZE_MAX && at == norm) found = raw;
  free(one.data);
  *inside = norm;
  return found;
}

static gk_status encode_text(gk_bpe *t, const unsigned char *s, size_t n, int final, size_t *consumed,
                             gk_bpe_ids *out);

// The offset of the last stable code point in s[0, n) (0 when none): what
// follows it may still change under NFC with the text after s[n).
static size_t last_stable(const unsigned char *s, size_t n) {
  size_t end = 0, len;
  for (size_t i = 0; i < n; i += len) {
    int r = stable_at(s + i, n - i, &len);
    if (r < 0) break;
    if (r) end = i;
  }
  return end;
}

// Encoding s[0, end) once normalized. Unless final, the encoding must stop
// where a segment starts, to give *consumed in the caller's text.
static gk_status encode_nfc(gk_bpe *t, const unsigned char *s, size_t end, int final, size_t *consumed,
                            gk_bpe_ids *out) {
  gk_nn_buf norm = {0};
  cp_buf cps = {0};
  nfc(s, end, &cps, &norm);
  gk_status st = GK_SUCCESS;
  if (norm.failed || cps.failed) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory normalizing the text");
  size_t first_id = out->len, limit = norm.len;
  while (st == GK_SUCCESS) {
    size_t used, inside;
    st = encode_text(t, (const unsigned char *)norm.data, limit, final && limit == norm.len, &used, out);
    if (st) break;
    size_t raw = raw_offset(s, end, used, &cps, &inside);
    if (raw != SIZE_MAX) {
      *consumed = raw;
      break;
    }
    out->len = first_id;  // stopped inside a segment: encode less
    limit = inside;
  }
  free(norm.data);
  free(cps.data);
  return st;
}

gk_status gk_bpe_encode(gk_bpe *t, const void *text, size_t n, int final, size_t *consumed, gk_bpe_ids *out) {
  if (!t || !consumed || !out || (!text && n))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_encode: %s is NULL",
                      !t ? "tokenizer" : !consumed ? "consumed" : !out ? "out" : "text");
  *consumed = 0;
  if (t->nfc) {
    if (!final) n = last_stable(text, n);
    if (!surely_nfc(text, n)) return encode_nfc(t, text, n, final, consumed, out);
  }
  return encode_text(t, text, n, final, consumed, out);
}

// Encoding text as it is (in NFC when the tokenizer asks for it).
static gk_status encode_text(gk_bpe *t, const unsigned char *s, size_t n, int final, size_t *consumed,
                             gk_bpe_ids *out) {
  size_t pos = 0;
  *consumed = 0;
  size_t added_at = 0, added_which = 0;
  int added_partial = 0, added_known = 0;
  while (pos < n) {
    // The piece up to the next added token.
    size_t limit = n;
    int piece_final = final;
    if (t->nadded) {
      if (!added_known || added_at < pos) {
        find_added(t, s, pos, n, final, &added_at, &added_which, &added_partial);
        added_known = 1;
      }
      if (added_at == pos && !added_partial) {
        if (!ids_reserve(out, 1)) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the token ids");
        out->data[out->len++] = t->added[added_which].id;
        pos += t->added[added_which].len;
        *consumed = pos;
        added_known = 0;
        continue;
      }
      if (added_at == pos) break;  // an added token may start here: wait for more text
      limit = added_at;
      piece_final = added_at < n && !added_partial ? 1 : final && !added_partial;
    }
    size_t len = match_word(s + pos, limit - pos, piece_final);
    if (len == NEED_MORE) break;
    gk_status st = encode_word(t, s + pos, len, pos, out);
    if (st) return st;
    pos += len;
    *consumed = pos;
  }
  return GK_SUCCESS;
}

// Encoding a stream: read pieces into a buffer, encode all but the tail that
// more text could change, keep the tail, read on.
gk_status gk_bpe_encode_stream(gk_bpe *t, FILE *in, const char *what, gk_bpe_emit_fn emit, void *ctx,
                               uint64_t *nbytes) {
  if (!t || !in || !what || !emit)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_encode_stream: %s is NULL",
                      !t ? "tokenizer" : !in ? "in" : !what ? "what" : "emit");
  size_t cap = 1 << 20, len = 0;
  unsigned char *buf = malloc(cap);
  gk_bpe_ids ids = {0};
  gk_status st = GK_SUCCESS;
  if (!buf) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the input buffer");
  t->text_base = 0;
  for (int eof = 0; !eof;) {
    if (len == cap) {  // one word longer than the buffer: grow it
      unsigned char *b = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!b) {
        st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for a word of over %zu bytes in %s", cap, what);
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, in);
    len += got;
    if (got == 0) {
      if (ferror(in)) {
        st = gk_nn_fail(GK_NN_ERR_FILE, "tokenizer: cannot read %s: %s", what, strerror(errno));
        break;
      }
      eof = 1;
    }
    size_t used;
    ids.len = 0;
    if ((st = gk_bpe_encode(t, buf, len, eof, &used, &ids))) break;
    if (ids.len && (st = emit(ctx, ids.data, ids.len))) break;
    memmove(buf, buf + used, len - used);
    len -= used;
    t->text_base += used;
  }
  if (nbytes) *nbytes = t->text_base + len;
  t->text_base = 0;
  free(buf);
  gk_bpe_ids_free(&ids);
  return st;
}

// ---------------------------------------------------------------- decoding

gk_status gk_bpe_decode(const gk_bpe *t, const int32_t *ids, size_t n, gk_nn_buf *out) {
  if (!t || !out || (!ids && n))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_decode: %s is NULL", !t ? "tokenizer" : !out ? "out" : "ids");
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= t->vocab_size || t->tok_len[ids[i]] < 0)
      return gk_nn_fail(GK_ERR_INVALID_VALUE, "tokenizer: token id %ld (number %zu of the ids) is not in the vocabulary%s",
                        (long)ids[i], i, ids[i] >= 0 && ids[i] < t->vocab_size ? " (no token has this id)" : "");
  for (size_t i = 0; i < n; i++)
    gk_nn_buf_append(out, t->tok_bytes + t->tok_off[ids[i]], (size_t)t->tok_len[ids[i]]);
  if (out->failed) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory decoding %zu ids", n);
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- loading

// The vocabulary and merges as read from the files (strings in the
// byte-to-unicode alphabet), before they are turned into a tokenizer.
typedef struct builder {
  char what[200];            // names the files in messages
  gk_nn_buf strs;            // every string read, one after another
  struct vocab_entry {
    uint32_t off, len;
    int64_t id;
  } *vocab;
  size_t nvocab, vocab_cap;
  uint32_t *map;             // open addressing: vocab string -> index + 1 (0: empty)
  size_t map_cap;
  struct merge_entry {
    uint32_t a_off, a_len, b_off, b_len;
  } *merges;
  size_t nmerges, merges_cap;
  added_token *added;
  size_t nadded, added_cap;
  int nfc;
} builder;

static void builder_free(builder *b) {
  gk_nn_buf_free(&b->strs);
  free(b->vocab);
  free(b->map);
  free(b->merges);
  for (size_t i = 0; i < b->nadded; i++) free(b->added[i].bytes);
  free(b->added);
}

static gk_status oom(const builder *b) { return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s: out of memory", b->what); }

// The string at offset `off` of b->strs ("" while nothing is stored: the
// buffer is NULL until its first byte).
static const char *str_at(const builder *b, uint32_t off) { return b->strs.data ? b->strs.data + off : ""; }

static int grow(void **arr, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 1;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*arr, ncap * size);
  if (!p) return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

// The vocabulary index of string s[0, n), or -1.
static long vocab_find(const builder *b, const void *s, size_t n) {
  if (!b->map_cap) return -1;
  for (size_t i = hash_bytes(s, n) & (b->map_cap - 1);; i = (i + 1) & (b->map_cap - 1)) {
    uint32_t e = b->map[i];
    if (!e) return -1;
    const struct vocab_entry *v = &b->vocab[e - 1];
    if (v->len == n && !memcmp(str_at(b, v->off), s, n)) return (long)e - 1;
  }
}

// Add the string just appended to b->strs at `off` as token `id`.
static gk_status vocab_add(builder *b, uint32_t off, int64_t id) {
  uint32_t len = (uint32_t)(b->strs.len - off);
  const char *s = str_at(b, off);
  if (id < 0 || id >= GK_BPE_MAX_ID)
    return gk_nn_fail(GK_NN_ERR_FILE, "%s: token '%.60s' has id %lld, outside [0, 2^24)", b->what, s, (long long)id);
  if (vocab_find(b, s, len) >= 0) return gk_nn_fail(GK_NN_ERR_FILE, "%s: token '%.60s' appears twice in the vocabulary", b->what, s);
  if (!grow((void **)&b->vocab, &b->vocab_cap, b->nvocab + 1, sizeof *b->vocab)) return oom(b);
  if (2 * (b->nvocab + 1) > b->map_cap) {  // keep the map at most half full
    size_t cap = b->map_cap ? 2 * b->map_cap : 1024;
    uint32_t *map = calloc(cap, sizeof *map);
    if (!map) return oom(b);
    for (size_t e = 0; e < b->nvocab; e++) {
      size_t i = hash_bytes(str_at(b, b->vocab[e].off), b->vocab[e].len) & (cap - 1);
      while (map[i]) i = (i + 1) & (cap - 1);
      map[i] = (uint32_t)e + 1;
    }
    free(b->map);
    b->map = map;
    b->map_cap = cap;
  }
  b->vocab[b->nvocab] = (struct vocab_entry){off, len, id};
  size_t i = hash_bytes(s, len) & (b->map_cap - 1);
  while (b->map[i]) i = (i + 1) & (b->map_cap - 1);
  b->map[i] = (uint32_t)++b->nvocab;
  return GK_SUCCESS;
}

static gk_status merge_add(builder *b, uint32_t a_off, uint32_t a_len, uint32_t b_off, uint32_t b_len) {
  if (!grow((void **)&b->merges, &b->merges_cap, b->nmerges + 1, sizeof *b->merges)) return oom(b);
  b->merges[b->nmerges++] = (struct merge_entry){a_off, a_len, b_off, b_len};
  return GK_SUCCESS;
}

// A token's bytes: its string mapped back through the byte-to-unicode map;
// a string with a character outside the map stands for its own UTF-8 bytes.
static void token_bytes(const unsigned char *s, size_t n, gk_nn_buf *out) {
  static int32_t cp_byte[0x144];
  static int ready;
  if (!ready) {
    for (size_t c = 0; c < 0x144; c++) cp_byte[c] = -1;
    for (int v = 0; v < 256; v++) cp_byte[byte_cp[v]] = v;
    ready = 1;
  }
  size_t start = out->len;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t len;
    if (utf8_at(s + i, n - i, &cp, &len) <= 0 || cp >= 0x144 || cp_byte[cp] < 0) {
      out->len = start;  // not all in the map: the raw bytes
      gk_nn_buf_append(out, s, n);
      return;
    }
    unsigned char v = (unsigned char)cp_byte[cp];
    gk_nn_buf_append(out, &v, 1);
    i += len;
  }
}

static int cmp_added_len(const void *x, const void *y) {
  const added_token *a = x, *b = y;
  return a->len != b->len ? (a->len < b->len ? 1 : -1) : (a->id > b->id) - (a->id < b->id);
}

// Turn what was read into a tokenizer.
static gk_status build(builder *b, const char *kind, gk_bpe **out) {
  gk_bpe *t = calloc(1, sizeof *t);
  if (!t) return oom(b);
  gk_status st = GK_SUCCESS;
  int64_t max_id = -1;
  for (size_t i = 0; i < b->nvocab; i++) max_id = b->vocab[i].id > max_id ? b->vocab[i].id : max_id;
  for (size_t i = 0; i < b->nadded; i++) max_id = b->added[i].id > max_id ? b->added[i].id : max_id;
  if (max_id < 0) {
    free(t);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s: the vocabulary is empty", b->what);
  }
  t->vocab_size = (int32_t)max_id + 1;
  t->tok_off = calloc((size_t)t->vocab_size, sizeof *t->tok_off);
  t->tok_len = malloc((size_t)t->vocab_size * sizeof *t->tok_len);
  if (!t->tok_off || !t->tok_len) {
    gk_bpe_free(t);
    return oom(b);
  }
  for (int32_t id = 0; id < t->vocab_size; id++) t->tok_len[id] = -1;
  // Token bytes: added tokens' content as it is, the others through the map.
  gk_nn_buf bytes = {0};
  gk_nn_buf_append(&bytes, "", 0);
  for (size_t i = 0; i < b->nadded; i++) {
    int32_t id = b->added[i].id;
    if (t->tok_len[id] >= 0) {
      st = gk_nn_fail(GK_NN_ERR_FILE, "%s: added tokens '%.40s' and another have the same id %ld", b->what,
                      (const char *)b->added[i].bytes, (long)id);
      break;
    }
    t->tok_off[id] = (uint32_t)bytes.len;
    gk_nn_buf_append(&bytes, b->added[i].bytes, b->added[i].len);
    t->tok_len[id] = (int32_t)b->added[i].len;
  }
  for (size_t i = 0; st == GK_SUCCESS && i < b->nvocab; i++) {
    int32_t id = (int32_t)b->vocab[i].id;
    int is_added = 0;
    for (size_t a = 0; a < b->nadded; a++) is_added |= b->added[a].id == id;
    if (is_added) continue;
    if (t->tok_len[id] >= 0) {
      st = gk_nn_fail(GK_NN_ERR_FILE, "%s: tokens '%.40s' and another have the same id %ld", b->what,
                      str_at(b, b->vocab[i].off), (long)id);
      break;
    }
    size_t at = bytes.len;
    t->tok_off[id] = (uint32_t)at;
    token_bytes((const unsigned char *)str_at(b, b->vocab[i].off), b->vocab[i].len, &bytes);
    t->tok_len[id] = (int32_t)(bytes.len - at);
  }
  if (st == GK_SUCCESS && (bytes.failed || bytes.len > UINT32_MAX)) st = oom(b);
  t->tok_bytes = (unsigned char *)bytes.data;
  // The byte tokens.
  for (int v = 0; st == GK_SUCCESS && v < 256; v++) {
    gk_nn_buf one = {0};
    gk_json_put_utf8(&one, byte_cp[v]);
    long e = one.failed ? -1 : vocab_find(b, one.data, one.len);
    t->byte_id[v] = e >= 0 ? (int32_t)b->vocab[e].id : -1;
    gk_nn_buf_free(&one);
  }
  // The merges: rank = position in the list (a pair listed twice keeps its later rank).
  t->merge_cap = 16;
  while (t->merge_cap < 2 * b->nmerges + 16) t->merge_cap *= 2;
  if (st == GK_SUCCESS && !(t->merges = malloc(t->merge_cap * sizeof *t->merges))) st = oom(b);
  for (size_t i = 0; st == GK_SUCCESS && i < t->merge_cap; i++) t->merges[i].pair = UINT64_MAX;
  gk_nn_buf joined = {0};
  for (size_t r = 0; st == GK_SUCCESS && r < b->nmerges; r++) {
    const struct merge_entry *m = &b->merges[r];
    const char *sa = str_at(b, m->a_off), *sb = str_at(b, m->b_off);
    long ea = vocab_find(b, sa, m->a_len), eb = vocab_find(b, sb, m->b_len);
    joined.len = 0;
    gk_nn_buf_append(&joined, sa, m->a_len);
    gk_nn_buf_append(&joined, sb, m->b_len);
    long er = joined.failed ? -1 : vocab_find(b, joined.data, joined.len);
    if (joined.failed) st = oom(b);
    else if (ea < 0 || eb < 0 || er < 0)
      st = gk_nn_fail(GK_NN_ERR_FILE, "%s: merge %zu ('%.*s' '%.*s'): '%.*s' is not in the vocabulary", b->what, r,
                      (int)(m->a_len < 40 ? m->a_len : 40), sa, (int)(m->b_len < 40 ? m->b_len : 40), sb,
                      ea < 0 ? (int)(m->a_len < 60 ? m->a_len : 60) : eb < 0 ? (int)(m->b_len < 60 ? m->b_len : 60) : (int)(joined.len < 80 ? joined.len : 80),
                      ea < 0 ? sa : eb < 0 ? sb : joined.data);
    else {
      uint64_t key = (uint64_t)(uint32_t)b->vocab[ea].id << 32 | (uint32_t)b->vocab[eb].id;
      size_t i = mix64(key) & (t->merge_cap - 1);
      while (t->merges[i].pair != UINT64_MAX && t->merges[i].pair != key) i = (i + 1) & (t->merge_cap - 1);
      if (t->merges[i].pair == UINT64_MAX) t->nmerges++;
      t->merges[i] = (merge_slot){key, (int32_t)r, (int32_t)b->vocab[er].id};
    }
  }
  gk_nn_buf_free(&joined);
  if (st) {
    gk_bpe_free(t);
    return st;
  }
  // Added tokens, longest first; the builder hands them over.
  if (b->nadded > 1) qsort(b->added, b->nadded, sizeof *b->added, cmp_added_len);
  t->added = b->added;
  t->nadded = b->nadded;
  b->added = NULL;
  b->nadded = 0;
  for (size_t i = 0; i < t->nadded; i++) {
    t->added_first[t->added[i].bytes[0]] = 1;
    if (t->added[i].len > t->added_max_len) t->added_max_len = t->added[i].len;
  }
  t->nfc = b->nfc;
  snprintf(t->describe, sizeof t->describe, "%s, %ld tokens, %zu merges%s", kind, (long)t->vocab_size, b->nmerges,
           t->nfc ? ", NFC" : "");
  if (t->nadded)
    snprintf(t->describe + strlen(t->describe), sizeof t->describe - strlen(t->describe), ", %zu added token%s",
             t->nadded, gk_plural((long long)t->nadded));
  *out = t;
  return GK_SUCCESS;
}

// encoder.json: {"token": id, ...}
static gk_status parse_encoder_json(builder *b, const unsigned char *s, size_t n, const char *path) {
  char what[200];
  snprintf(what, sizeof what, "GPT-2 encoder file '%.150s'", path);
  gk_json p = {s, n, 0, what, "file"};
  int more;
  gk_status st = gk_json_open(&p, '{', &more, "at the start of the vocabulary object");
  while (st == GK_SUCCESS && more) {
    uint32_t off = (uint32_t)b->strs.len;
    size_t len;
    uint64_t id;
    if ((st = gk_json_string_append(&p, &b->strs, &len, "as a token of the vocabulary"))) break;
    if ((st = gk_json_expect(&p, ':', "after a token of the vocabulary")) ||
        (st = gk_json_uint(&p, &id, "as a token id")))
      break;
    if (b->strs.failed) return oom(b);
    if ((st = vocab_add(b, off, id > INT64_MAX ? INT64_MAX : (int64_t)id))) break;
    st = gk_json_next_or_close(&p, '}', &more, "in the vocabulary object");
  }
  return st ? st : gk_json_end(&p);
}

// vocab.bpe: "#version: ..." then one merge "a b" per line.
static gk_status parse_vocab_bpe(builder *b, const unsigned char *s, size_t n, const char *path) {
  size_t line = 0;
  for (size_t i = 0; i < n; line++) {
    size_t end = i;
    while (end < n && s[end] != '\n') end++;
    size_t stop = end > i && s[end - 1] == '\r' ? end - 1 : end;
    if (!(line == 0 && stop - i >= 9 && !memcmp(s + i, "#version:", 9)) && stop > i) {
      const unsigned char *sp = memchr(s + i, ' ', stop - i);
      if (!sp || sp == s + i || sp + 1 == s + stop || memchr(sp + 1, ' ', (size_t)(s + stop - sp - 1)))
        return gk_nn_fail(GK_NN_ERR_FILE, "GPT-2 merges file '%.150s': line %zu is not two tokens separated by one space: '%.60s'",
                          path, line + 1, (const char *)s + i);  // (the file has a NUL after it: see gk_nn_read_file)
      uint32_t a_off = (uint32_t)b->strs.len, a_len = (uint32_t)(sp - (s + i));
      gk_nn_buf_append(&b->strs, s + i, a_len);
      uint32_t b_off = (uint32_t)b->strs.len, b_len = (uint32_t)(s + stop - sp - 1);
      gk_nn_buf_append(&b->strs, sp + 1, b_len);
      if (b->strs.failed) return oom(b);
      gk_status st = merge_add(b, a_off, a_len, b_off, b_len);
      if (st) return st;
    }
    i = end + 1;
  }
  return GK_SUCCESS;
}

gk_status gk_bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe, gk_bpe **out) {
  if (!encoder_json || !vocab_bpe || !out)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_load_gpt2: %s is NULL",
                      !encoder_json ? "encoder_json" : !vocab_bpe ? "vocab_bpe" : "out");
  *out = NULL;
  init_tables();
  builder b = {0};
  snprintf(b.what, sizeof b.what, "GPT-2 tokenizer files '%.80s' and '%.80s'", encoder_json, vocab_bpe);
  unsigned char *enc = NULL, *merges = NULL;
  size_t enc_n, merges_n;
  gk_status st = gk_nn_read_file(encoder_json, "GPT-2 encoder file", &enc, &enc_n);
  if (!st) st = gk_nn_read_file(vocab_bpe, "GPT-2 merges file", &merges, &merges_n);
  if (!st) st = parse_encoder_json(&b, enc, enc_n, encoder_json);
  if (!st) st = parse_vocab_bpe(&b, merges, merges_n, vocab_bpe);
  if (!st) st = build(&b, "GPT-2 files", out);
  free(enc);
  free(merges);
  builder_free(&b);
  return st;
}

// ---- tokenizer.json

// A component such as "normalizer": {"type": "NFC"}: its type and the flags gradkern looks at.
typedef struct component {
  char type[32];       // "" for null
  int add_prefix_space, use_regex;  // -1 when absent
} component;

static gk_status parse_component(gk_json *p, const char *field, component *c) {
  char ctx[80];
  snprintf(ctx, sizeof ctx, "in \"%s\"", field);
  c->type[0] = 0;
  c->add_prefix_space = c->use_regex = -1;
  if (gk_json_peek(p) == 'n') {
    int v;
    gk_status st = gk_json_bool(p, &v, 1, ctx);
    if (!st && v != -1) st = gk_json_fail_at(p, p->i, "\"%s\" must be an object or null", field);
    return st;
  }
  int more;
  gk_status st = gk_json_open(p, '{', &more, ctx);
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(p, &key, ctx))) break;
    if (!(st = gk_json_expect(p, ':', ctx))) {
      if (!strcmp(key, "type")) {
        char *type;
        if (!(st = gk_json_string(p, &type, ctx))) {
          snprintf(c->type, sizeof c->type, "%s", type);
          free(type);
        }
      } else if (!strcmp(key, "add_prefix_space")) {
        st = gk_json_bool(p, &c->add_prefix_space, 0, ctx);
      } else if (!strcmp(key, "use_regex")) {
        st = gk_json_bool(p, &c->use_regex, 0, ctx);
      } else {
        st = gk_json_skip(p, ctx);
      }
    }
    free(key);
    if (!st) st = gk_json_next_or_close(p, '}', &more, ctx);
  }
  if (!st && !c->type[0]) st = gk_json_fail_at(p, p->i, "\"%s\" has no \"type\"", field);
  return st;
}

// "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": false, ...}, ...]
static gk_status parse_added(builder *b, gk_json *p) {
  int more;
  gk_status st = gk_json_open(p, '[', &more, "in \"added_tokens\"");
  while (st == GK_SUCCESS && more) {
    int fields;
    int64_t id = -1;
    char *content = NULL;
    const char *ctx = "in an entry of \"added_tokens\"";
    size_t at = p->i;
    if ((st = gk_json_open(p, '{', &fields, ctx))) break;
    while (st == GK_SUCCESS && fields) {
      char *key;
      if ((st = gk_json_string(p, &key, ctx))) break;
      if (!(st = gk_json_expect(p, ':', ctx))) {
        if (!strcmp(key, "id")) st = gk_json_int(p, &id, "as \"id\" of an added token");
        else if (!strcmp(key, "content")) {
          free(content);
          st = gk_json_string(p, &content, "as \"content\" of an added token");
        } else if (!strcmp(key, "lstrip") || !strcmp(key, "rstrip") || !strcmp(key, "single_word")) {
          int v;
          size_t vat = p->i;
          if (!(st = gk_json_bool(p, &v, 0, ctx)) && v)
            st = gk_json_fail_at(p, vat, "added token%s%.40s%s: \"%s\": true is not supported (only false)",
                                 content ? " '" : "", content ? content : "", content ? "'" : "", key);
        } else {
          st = gk_json_skip(p, ctx);
        }
      }
      free(key);
      if (!st) st = gk_json_next_or_close(p, '}', &fields, ctx);
    }
    if (!st && (id < 0 || id >= GK_BPE_MAX_ID || !content || !content[0]))
      st = gk_json_fail_at(p, at, "an added token needs \"id\" in [0, 2^24) and a non-empty \"content\"%s%.40s%s",
                           content ? " (content '" : "", content ? content : "", content ? "')" : "");
    if (!st && !grow((void **)&b->added, &b->added_cap, b->nadded + 1, sizeof *b->added)) st = oom(b);
    if (st) {
      free(content);
      break;
    }
    b->added[b->nadded++] = (added_token){(unsigned char *)content, strlen(content), (int32_t)id};
    st = gk_json_next_or_close(p, ']', &more, "in \"added_tokens\"");
  }
  return st;
}

// "model": {"type": "BPE", "vocab": {...}, "merges": [...], ...}
static gk_status parse_model(builder *b, gk_json *p) {
  int more, have_type = 0;
  const char *ctx = "in \"model\"";
  gk_status st = gk_json_open(p, '{', &more, ctx);
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(p, &key, ctx))) break;
    size_t at = p->i;
    if (!(st = gk_json_expect(p, ':', ctx))) {
      if (!strcmp(key, "type")) {
        char *type;
        if (!(st = gk_json_string(p, &type, ctx))) {
          if (strcmp(type, "BPE"))
            st = gk_json_fail_at(p, at, "\"model\": \"type\" is '%.40s'; gradkern reads only BPE models", type);
          free(type);
          have_type = 1;
        }
      } else if (!strcmp(key, "vocab")) {
        int vmore;
        st = gk_json_open(p, '{', &vmore, "in \"vocab\"");
        while (st == GK_SUCCESS && vmore) {
          uint32_t off = (uint32_t)b->strs.len;
          size_t len;
          int64_t id;
          if ((st = gk_json_string_append(p, &b->strs, &len, "as a token of \"vocab\"")) ||
              (st = gk_json_expect(p, ':', "after a token of \"vocab\"")) || (st = gk_json_int(p, &id, "as a token id")))
            break;
          if (b->strs.failed) st = oom(b);
          else if (!(st = vocab_add(b, off, id))) st = gk_json_next_or_close(p, '}', &vmore, "in \"vocab\"");
        }
      } else if (!strcmp(key, "merges")) {
        int mmore;
        st = gk_json_open(p, '[', &mmore, "in \"merges\"");
        while (st == GK_SUCCESS && mmore) {
          size_t mat = p->i;
          uint32_t a_off = (uint32_t)b->strs.len, b_off;
          size_t a_len, b_len;
          if (gk_json_peek(p) == '[') {  // ["a", "b"]
            if ((st = gk_json_expect(p, '[', "in a merge")) ||
                (st = gk_json_string_append(p, &b->strs, &a_len, "as the first token of a merge")) ||
                (st = gk_json_expect(p, ',', "in a merge")))
              break;
            b_off = (uint32_t)b->strs.len;
            if ((st = gk_json_string_append(p, &b->strs, &b_len, "as the second token of a merge")) ||
                (st = gk_json_expect(p, ']', "after the two tokens of a merge")))
              break;
          } else {  // "a b"
            size_t len;
            if ((st = gk_json_string_append(p, &b->strs, &len, "as a merge (\"a b\" or [\"a\", \"b\"])"))) break;
            const char *s = str_at(b, a_off), *sp = b->strs.failed ? NULL : memchr(s, ' ', len);
            if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', len - (size_t)(sp - s) - 1)) {
              st = gk_json_fail_at(p, mat, "merge %zu is not two tokens separated by one space: '%.*s'", b->nmerges,
                                   (int)(len < 60 ? len : 60), s);
              break;
            }
            a_len = (size_t)(sp - s);
            b_off = (uint32_t)(a_off + a_len + 1);
            b_len = len - a_len - 1;
          }
          if (b->strs.failed) st = oom(b);
          else if (!(st = merge_add(b, a_off, (uint32_t)a_len, b_off, (uint32_t)b_len)))
            st = gk_json_next_or_close(p, ']', &mmore, "in \"merges\"");
        }
      } else if (!strcmp(key, "dropout") || !strcmp(key, "continuing_subword_prefix") ||
                 !strcmp(key, "end_of_word_suffix")) {
        // Only null (or, for the affixes, an empty string) means plain BPE.
        int c = gk_json_peek(p), v = 0;
        if (c == 'n') st = gk_json_bool(p, &v, 1, ctx);
        else if (c == '"' && strcmp(key, "dropout")) {
          char *s;
          if (!(st = gk_json_string(p, &s, ctx)) && s[0])
            st = gk_json_fail_at(p, at, "\"model\": \"%s\" is '%.40s'; gradkern supports only null", key, s);
          free(s);
        } else
          st = gk_json_fail_at(p, at, "\"model\": \"%s\" is not null; gradkern does not implement it", key);
      } else if (!strcmp(key, "byte_fallback") || !strcmp(key, "ignore_merges") || !strcmp(key, "fuse_unk")) {
        int v;
        if (!(st = gk_json_bool(p, &v, 0, ctx)) && v && strcmp(key, "fuse_unk"))
          st = gk_json_fail_at(p, at, "\"model\": \"%s\" is true; gradkern does not implement it", key);
      } else {
        st = gk_json_skip(p, ctx);  // unk_token and the like
      }
    }
    free(key);
    if (!st) st = gk_json_next_or_close(p, '}', &more, ctx);
  }
  if (!st && !have_type) st = gk_json_fail_at(p, p->i, "\"model\" has no \"type\"");
  return st;
}

gk_status gk_bpe_parse_hf(const void *json, size_t size, const char *what, gk_bpe **out) {
  if (!json || !what || !out)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_parse_hf: %s is NULL", !json ? "json" : !what ? "what" : "out");
  *out = NULL;
  init_tables();
  builder b = {0};
  snprintf(b.what, sizeof b.what, "tokenizer file '%.150s'", what);
  gk_json p = {json, size, 0, b.what, "file"};
  int more, have_model = 0;
  gk_status st = gk_json_open(&p, '{', &more, "at the start of the file");
  while (st == GK_SUCCESS && more) {
    char *key;
    if ((st = gk_json_string(&p, &key, "as a top-level key"))) break;
    size_t at;
    if (!(st = gk_json_expect(&p, ':', "after a top-level key"))) {
      at = (gk_json_peek(&p), p.i);
      component c;
      if (!strcmp(key, "model")) {
        st = parse_model(&b, &p);
        have_model = 1;
      } else if (!strcmp(key, "added_tokens")) {
        st = parse_added(&b, &p);
      } else if (!strcmp(key, "normalizer")) {
        if (!(st = parse_component(&p, key, &c))) {
          if (!strcmp(c.type, "NFC")) b.nfc = 1;
          else if (c.type[0])
            st = gk_json_fail_at(&p, at, "\"normalizer\": type '%s' is not supported (only null or NFC)", c.type);
        }
      } else if (!strcmp(key, "pre_tokenizer")) {
        if (!(st = parse_component(&p, key, &c))) {
          if (strcmp(c.type, "ByteLevel"))
            st = gk_json_fail_at(&p, at, "\"pre_tokenizer\": type '%s' is not supported (only ByteLevel)",
                                 c.type[0] ? c.type : "null");
          else if (c.add_prefix_space == 1)
            st = gk_json_fail_at(&p, at, "\"pre_tokenizer\": \"add_prefix_space\": true is not supported");
          else if (c.use_regex == 0)
            st = gk_json_fail_at(&p, at, "\"pre_tokenizer\": \"use_regex\": false is not supported");
        }
      } else if (!strcmp(key, "decoder") || !strcmp(key, "post_processor")) {
        if (!(st = parse_component(&p, key, &c)) && c.type[0] && strcmp(c.type, "ByteLevel"))
          st = gk_json_fail_at(&p, at, "\"%s\": type '%s' is not supported (only null or ByteLevel)", key, c.type);
      } else {
        st = gk_json_skip(&p, "as a top-level value");  // version, truncation, padding
      }
    }
    free(key);
    if (!st) st = gk_json_next_or_close(&p, '}', &more, "in the top-level object");
  }
  if (!st) st = gk_json_end(&p);
  if (!st && !have_model) st = gk_nn_fail(GK_NN_ERR_FILE, "%s: there is no \"model\"", b.what);
  if (!st) st = build(&b, "tokenizer.json", out);
  builder_free(&b);
  return st;
}

gk_status gk_bpe_load_hf(const char *tokenizer_json, gk_bpe **out) {
  if (!tokenizer_json || !out)
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_load_hf: %s is NULL", !tokenizer_json ? "tokenizer_json" : "out");
  *out = NULL;
  unsigned char *bytes;
  size_t n;
  gk_status st = gk_nn_read_file(tokenizer_json, "tokenizer file", &bytes, &n);
  if (st) return st;
  st = gk_bpe_parse_hf(bytes, n, tokenizer_json, out);
  free(bytes);
  return st;
}

gk_status gk_bpe_load(const char *path, gk_bpe **out) {
  if (!path || !out) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_bpe_load: %s is NULL", !path ? "path" : "out");
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) != 0)
    return gk_nn_fail(GK_NN_ERR_FILE, "tokenizer '%.200s': %s", path, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return gk_bpe_load_hf(path, out);
  size_t n = strlen(path) + 16;
  char *enc = malloc(n), *merges = malloc(n);
  gk_status st = GK_SUCCESS;
  if (!enc || !merges) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
  else {
    snprintf(enc, n, "%s/encoder.json", path);
    snprintf(merges, n, "%s/vocab.bpe", path);
    st = gk_bpe_load_gpt2(enc, merges, out);
  }
  free(enc);
  free(merges);
  return st;
}
