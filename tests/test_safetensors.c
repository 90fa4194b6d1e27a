// safetensors: round trips of every dtype and of metadata; the file layout;
// truncation at every cut point, corrupted header bytes and hand-written bad
// headers give errors (never crashes) naming what is wrong; the writer's
// argument checks; atomic writes leave the old file byte-identical when a
// step fails; per-tensor checksums find a flipped bit; FIFOs, devices and
// /proc files are refused; outputs are checked before a run; stale
// temporary files of dead writers are removed.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "nn/fileio.h"
#include "nn/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static char *path_in(const char *name) {
  static char buf[4][256];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static unsigned char *read_all(const char *path, size_t *n) {
  unsigned char *b = NULL;
  if (gk_nn_read_file(path, "test file", &b, n) != GK_SUCCESS) return NULL;
  return b;
}

// Number of directory entries other than . and .. (temporary files left behind show up here).
static int count_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

static bool msg_has(const char *needle) {
  if (strstr(gk_last_error(), needle)) return true;
  fprintf(stderr, "  message: %s\n  expected it to contain: %s\n", gk_last_error(), needle);
  return false;
}

// ---------------------------------------------------------------- round trip

enum { NT = 11 };
static float f32a[6], f32s[1];
static double f64a[4];
static uint16_t f16a[6], bf16a[5];
static int32_t i32a[4];
static int64_t i64a[3];
static uint8_t u8a[7];
static float big8[2 * 1 * 2 * 1 * 1 * 2 * 1 * 3];

static void make_tensors(gk_st_tensor *t) {
  for (int i = 0; i < 6; i++) f32a[i] = (float)i * 0.25f - 1;
  f32s[0] = 3.5f;
  for (int i = 0; i < 4; i++) f64a[i] = 1.0 / (i + 3);
  for (int i = 0; i < 6; i++) f16a[i] = gk_f32_to_f16((float)i / 3 - 0.5f);
  for (int i = 0; i < 5; i++) bf16a[i] = gk_f32_to_bf16((float)i * 1.1f - 2);
  for (int i = 0; i < 4; i++) i32a[i] = (i - 2) * 100000;
  for (int i = 0; i < 3; i++) i64a[i] = (int64_t)1 << (33 + i);
  for (int i = 0; i < 7; i++) u8a[i] = (uint8_t)(250 + i);
  for (int i = 0; i < 24; i++) big8[i] = (float)i;
  // Mixed sizes on purpose: the writer must reorder them by element size.
  t[0] = (gk_st_tensor){"u8", GK_ST_U8, 1, {7}, u8a, 0};
  t[1] = (gk_st_tensor){"f32", GK_ST_F32, 2, {2, 3}, f32a, 0};
  t[2] = (gk_st_tensor){"f16", GK_ST_F16, 3, {3, 1, 2}, f16a, 0};
  t[3] = (gk_st_tensor){"f64", GK_ST_F64, 1, {4}, f64a, 0};
  t[4] = (gk_st_tensor){"bf16", GK_ST_BF16, 1, {5}, bf16a, 0};
  t[5] = (gk_st_tensor){"i32", GK_ST_I32, 2, {2, 2}, i32a, 0};
  t[6] = (gk_st_tensor){"i64", GK_ST_I64, 1, {3}, i64a, 0};
  t[7] = (gk_st_tensor){"scalar", GK_ST_F32, 0, {0}, f32s, 0};
  t[8] = (gk_st_tensor){"empty", GK_ST_F32, 2, {0, 3}, NULL, 0};
  t[9] = (gk_st_tensor){"rank8", GK_ST_F32, 8, {2, 1, 2, 1, 1, 2, 1, 3}, big8, 0};
  t[10] = (gk_st_tensor){"layers.0.name \"quoted\" \\ é ✓", GK_ST_U8, 1, {1}, u8a, 0};
}

static void test_round_trip(void) {
  gk_st_tensor t[NT];
  make_tensors(t);
  gk_st_meta meta[] = {{"config", "{\"layers\": 2}"}, {"step", "120"}, {"empty", ""},
                       {"tricky \"key\"\n\t\\", "value with \x01 control, é, ✓ and 😀"}};
  const char *p = path_in("rt.safetensors");
  gk_status st = gk_st_save(p, t, NT, meta, 4);
  check(st == GK_SUCCESS, "save: %s", gk_last_error());

  // The layout: 8-byte length, a header padded to a multiple of 8 with spaces.
  size_t n;
  unsigned char *raw = read_all(p, &n);
  check(raw && n >= 8, "read back the file");
  if (!raw) return;
  uint64_t hl = 0;
  for (int k = 7; k >= 0; k--) hl = hl << 8 | raw[k];
  check(hl % 8 == 0 && hl + 8 <= n, "header length %llu is a multiple of 8 within the file", (unsigned long long)hl);
  check(raw[8] == '{', "header starts with '{'");
  size_t e = 8 + hl;
  while (e > 8 && raw[e - 1] == ' ') e--;
  check(raw[e - 1] == '}', "header is the object then spaces");
  free(raw);

  gk_st_file *f;
  st = gk_st_load(p, &f);
  check(st == GK_SUCCESS, "load: %s", gk_last_error());
  if (st) return;
  check(gk_st_num_tensors(f) == NT, "%zu tensors", gk_st_num_tensors(f));
  size_t prev_size = 8;
  for (size_t i = 0; i < gk_st_num_tensors(f); i++) {
    const gk_st_tensor *r = gk_st_tensor_at(f, i);
    size_t es = gk_st_dtype_size(r->dtype);
    check(es <= prev_size, "tensor %zu '%s': data ordered by element size (%zu after %zu)", i, r->name, es, prev_size);
    prev_size = es;
    check(((uintptr_t)r->data % es) == 0, "tensor '%s' data aligned to %zu", r->name, es);
  }
  for (int i = 0; i < NT; i++) {
    const gk_st_tensor *r = gk_st_lookup(f, t[i].name);
    check(r != NULL, "lookup '%s'", t[i].name);
    if (!r) continue;
    check(r->dtype == t[i].dtype && r->rank == t[i].rank, "'%s' dtype %s rank %d", t[i].name,
          gk_st_dtype_name(r->dtype), r->rank);
    size_t bytes = gk_st_dtype_size(t[i].dtype);
    for (int d = 0; d < t[i].rank; d++) {
      check(r->shape[d] == t[i].shape[d], "'%s' shape[%d]", t[i].name, d);
      bytes *= (size_t)t[i].shape[d];
    }
    check(r->nbytes == bytes, "'%s' nbytes %zu, expected %zu", t[i].name, r->nbytes, bytes);
    check(bytes == 0 || !memcmp(r->data, t[i].data, bytes), "'%s' bytes identical", t[i].name);
    // gk_st_read with the right dtype and shape copies the same bytes.
    unsigned char copy[128];
    memset(copy, 0xEE, sizeof copy);
    st = gk_st_read(f, t[i].name, t[i].dtype, t[i].rank, t[i].shape, copy);
    check(st == GK_SUCCESS && (bytes == 0 || !memcmp(copy, t[i].data, bytes)) && copy[bytes] == 0xEE,
          "gk_st_read '%s': %s", t[i].name, gk_last_error());
  }
  check(gk_st_lookup(f, "nope") == NULL, "lookup of a missing name is NULL");
  check(gk_st_tensor_at(f, NT) == NULL, "tensor_at past the end is NULL");

  // Metadata round trip.
  check(gk_st_num_metadata(f) == 4, "4 metadata entries");
  for (int i = 0; i < 4; i++) {
    const char *v = gk_st_metadata(f, meta[i].key);
    check(v && !strcmp(v, meta[i].value), "metadata '%s' = '%s'", meta[i].key, v ? v : "(null)");
  }
  for (size_t i = 1; i < gk_st_num_metadata(f); i++)
    check(strcmp(gk_st_metadata_at(f, i - 1)->key, gk_st_metadata_at(f, i)->key) < 0, "metadata sorted by key");
  check(gk_st_metadata(f, "missing") == NULL, "missing metadata is NULL");
  const char *v = "x";
  st = gk_st_get_metadata(f, "missing", &v);
  check(st != GK_SUCCESS && v == NULL && msg_has("'missing'"), "gk_st_get_metadata names the missing key");
  st = gk_st_get_metadata(f, "step", &v);
  check(st == GK_SUCCESS && !strcmp(v, "120"), "gk_st_get_metadata finds 'step'");

  // gk_st_read refuses another dtype or shape, and a missing name.
  float dst[8];
  int64_t s32[2] = {3, 2}, s23[2] = {2, 3};
  st = gk_st_read(f, "f32", GK_ST_F32, 2, s32, dst);
  check(st != GK_SUCCESS && msg_has("tensor 'f32' is F32 [2, 3], expected F32 [3, 2]"), "read: wrong shape");
  st = gk_st_read(f, "f32", GK_ST_F64, 2, s23, dst);
  check(st != GK_SUCCESS && msg_has("expected F64 [2, 3]"), "read: wrong dtype");
  st = gk_st_read(f, "f32", GK_ST_F32, 1, s23, dst);
  check(st != GK_SUCCESS && msg_has("expected F32 [2]"), "read: wrong rank");
  st = gk_st_read(f, "w", GK_ST_F32, 2, s23, dst);
  check(st != GK_SUCCESS && msg_has("no tensor named 'w'"), "read: missing tensor");
  st = gk_st_read(f, "f32", (gk_st_dtype)7, 2, s23, dst);
  check(st != GK_SUCCESS && msg_has("dtype 7"), "read: bad dtype argument");
  st = gk_st_read(f, "f32", GK_ST_F32, 9, s23, dst);
  check(st != GK_SUCCESS && msg_has("rank 9"), "read: bad rank argument");
  st = gk_st_read(f, "f32", GK_ST_F32, 2, s23, NULL);
  check(st == GK_ERR_NULL_POINTER, "read: NULL dst");
  gk_st_close(f);

  // An empty file list and no metadata: "{}" padded.
  p = path_in("empty.safetensors");
  check(gk_st_save(p, NULL, 0, NULL, 0) == GK_SUCCESS, "save nothing: %s", gk_last_error());
  st = gk_st_load(p, &f);
  check(st == GK_SUCCESS && gk_st_num_tensors(f) == 0 && gk_st_num_metadata(f) == 0, "load nothing: %s",
        gk_last_error());
  gk_st_close(f);
  unlink(p);

  // A larger tensor: 1M floats.
  size_t big = 1 << 20;
  float *x = malloc(big * sizeof *x), *y = malloc(big * sizeof *y);
  for (size_t i = 0; i < big; i++) x[i] = (float)rng_uniform(-1, 1);
  gk_st_tensor tb = {"big", GK_ST_F32, 2, {1024, 1024}, x, 0};
  p = path_in("big.safetensors");
  st = gk_st_save(p, &tb, 1, NULL, 0);
  check(st == GK_SUCCESS, "save 4 MB: %s", gk_last_error());
  st = gk_st_load(p, &f);
  check(st == GK_SUCCESS && gk_st_read(f, "big", GK_ST_F32, 2, tb.shape, y) == GK_SUCCESS &&
            !memcmp(x, y, big * sizeof *x),
        "4 MB round trip: %s", gk_last_error());
  gk_st_close(f);
  unlink(p);
  free(x);
  free(y);
}

// ---------------------------------------------------------------- bad files

// A file made of a header text and `ndata` data bytes (header padded to 8).
static unsigned char *make_file(const char *header, size_t ndata, size_t *n) {
  size_t h = strlen(header), hp = (h + 7) / 8 * 8;
  *n = 8 + hp + ndata;
  unsigned char *b = malloc(*n);
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)hp >> (8 * k));
  memcpy(b + 8, header, h);
  memset(b + 8 + h, ' ', hp - h);
  for (size_t i = 0; i < ndata; i++) b[8 + hp + i] = (unsigned char)i;
  return b;
}

static void expect_bad(const char *header, size_t ndata, const char *needle) {
  size_t n;
  unsigned char *b = make_file(header, ndata, &n);
  gk_st_file *f = (gk_st_file *)1;
  gk_status st = gk_st_parse(b, n, "bad.st", &f);
  check(st != GK_SUCCESS && f == NULL && msg_has(needle) && msg_has("'bad.st'"), "bad header %s", header);
  free(b);
}

static void expect_good(const char *header, size_t ndata, const char *name, const char *decoded) {
  size_t n;
  unsigned char *b = make_file(header, ndata, &n);
  gk_st_file *f;
  gk_status st = gk_st_parse(b, n, "good.st", &f);
  check(st == GK_SUCCESS, "good header %s: %s", header, gk_last_error());
  if (st == GK_SUCCESS && name) {
    const gk_st_tensor *t = gk_st_lookup(f, decoded);
    check(t != NULL, "good header %s: tensor '%s' found", header, decoded);
  }
  gk_st_close(f);
  free(b);
}

static void test_bad_headers(void) {
  const char *a8 = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  char h[512];
  expect_good("{}", 0, NULL, NULL);
  snprintf(h, sizeof h, "{%s}", a8);
  expect_good(h, 8, "a", "a");
  expect_good("{ \"\\u00e9\\ud83d\\ude00\\n\" :\n\t{ \"shape\" : [ 2 ] , \"dtype\" : \"U8\" ,\r\n"
              " \"data_offsets\" : [ 0 , 2 ] } , \"__metadata__\" : { } }",
              2, "escaped", "\xc3\xa9\xf0\x9f\x98\x80\n");
  expect_good("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
              "\"y\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}",
              8, "zero-size first", "z");

  expect_bad("[]", 0, "does not start with '{'");
  expect_bad(" {}", 0, "does not start with '{'");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "begin after they end");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
             "tensor 'a': data_offsets [0, 4] hold 4 bytes but F32 [2] needs 8");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8, "run past the end");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             12, "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12, "bytes [4, 8) of the data section belong to no tensor (the next is 'b')");
  snprintf(h, sizeof h, "{%s}", a8);
  expect_bad(h, 9, "1 bytes belong to no tensor");
  snprintf(h, sizeof h, "{%s,%s}", a8, a8);
  expect_bad(h, 8, "tensor name 'a' appears twice");
  expect_bad("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "metadata key 'k' appears twice");
  expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
             "tensor 'a': field 'dtype' appears twice");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor 'a': field 'shape' is missing");
  expect_bad("{\"a\":{}}", 0, "tensor 'a': field 'dtype' is missing");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
             "tensor 'a': unknown field 'x'");
  expect_bad("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
             "tensor 'a': field 'dtype': unknown or unsupported dtype 'F8_E4M3'");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "negative number");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "must be an integer");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, "must be an integer");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8,
             "number too large");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551615],\"data_offsets\":[0,8]}}", 8,
             "dimension 0 is 18446744073709551615, too large");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
             "more bytes than 2^64");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
             "more than 8 dimensions");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8, "expected ']'");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "expected ','");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", 8, "expected a non-negative");
  expect_bad("{\"a\":{\"dtype\":F32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "expected a string");
  expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "as the value of metadata 'k' (values must be strings)");
  expect_bad("{\"__metadata__\":[]}", 0, "expected '{' as the value of __metadata__");
  expect_bad("{} x", 0, "'x' after the end of the JSON object");
  expect_bad("{}}", 0, "'}' after the end of the JSON object");
  expect_bad("{\"a", 0, "ends inside the string");
  expect_bad("{\"a\\q\":{}}", 0, "invalid escape '\\q'");
  expect_bad("{\"a\\u12\":{}}", 0, "4 hex digits");
  expect_bad("{\"a\\ud800\":{}}", 0, "unpaired UTF-16 surrogate \\uD800");
  expect_bad("{\"a\\udc00\":{}}", 0, "unpaired UTF-16 surrogate \\uDC00");
  expect_bad("{\"a\\u0000\":{}}", 0, "\\u0000 is not supported");
  expect_bad("{\"a\xff\":{}}", 0, "invalid UTF-8");
  expect_bad("{\"a\xc0\xaf\":{}}", 0, "invalid UTF-8");          // overlong '/'
  expect_bad("{\"a\xed\xa0\x80\":{}}", 0, "invalid UTF-8");      // encoded surrogate
  expect_bad("{\"a\x01\":{}}", 0, "control character 0x01");
  expect_bad("{\"a\":{},}", 0, "field 'dtype' is missing");
  snprintf(h, sizeof h, "{%s,}", a8);
  expect_bad(h, 8, "expected a string as a tensor name");
  expect_bad("{\"a\" {}}", 0, "expected ':' after the name 'a'");
  expect_bad("{", 0, "expected a string as a tensor name, found the end of the header");

  // The length prefix.
  unsigned char small[5] = {1, 0, 0, 0, 0};
  gk_st_file *f;
  check(gk_st_parse(small, 5, "short.st", &f) != GK_SUCCESS && msg_has("fewer than the 8"), "5-byte file");
  check(gk_st_parse(small, 0, "none.st", &f) != GK_SUCCESS && msg_has("0 bytes"), "0-byte file");
  unsigned char len_only[16] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  check(gk_st_parse(len_only, 16, "long.st", &f) != GK_SUCCESS &&
            msg_has("header length 200 runs past the end of the file (8 bytes after the length)"),
        "header length past the end");
  unsigned char zero_len[8] = {0};
  check(gk_st_parse(zero_len, 8, "zero.st", &f) != GK_SUCCESS && msg_has("header is empty"), "header length 0");
  unsigned char huge_len[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  check(gk_st_parse(huge_len, 16, "huge.st", &f) != GK_SUCCESS && msg_has("runs past the end"),
        "header length 2^64-1");
  check(gk_st_parse(NULL, 4, "x", &f) == GK_ERR_NULL_POINTER, "NULL bytes");
}

// Every proper prefix of a valid file fails with a message, never a crash.
static void test_truncation(void) {
  gk_st_tensor t[NT];
  make_tensors(t);
  gk_st_meta meta[] = {{"k", "v"}};
  const char *p = path_in("trunc.safetensors");
  check(gk_st_save(p, t, NT, meta, 1) == GK_SUCCESS, "save for truncation: %s", gk_last_error());
  size_t n;
  unsigned char *raw = read_all(p, &n);
  if (!raw) return;
  int ok_all = 1, named = 1;
  for (size_t cut = 0; cut < n; cut++) {
    gk_st_file *f;
    gk_status st = gk_st_parse(raw, cut, "cut.st", &f);
    if (st == GK_SUCCESS) {
      ok_all = 0;
      fprintf(stderr, "  cut at %zu of %zu parsed\n", cut, n);
      gk_st_close(f);
    } else if (!strstr(gk_last_error(), "'cut.st'")) {
      named = 0;
    }
  }
  check(ok_all, "all %zu cut points fail", n);
  check(named, "all cut-point messages name the file");
  // A cut inside the data says the file is truncated.
  gk_st_file *f;
  check(gk_st_parse(raw, n - 1, "cut.st", &f) != GK_SUCCESS && msg_has("truncated"), "cut in the data: truncated");
  // The truncated file on disk, through gk_st_load.
  FILE *fp = fopen(p, "wb");
  fwrite(raw, 1, n / 2, fp);
  fclose(fp);
  check(gk_st_load(p, &f) != GK_SUCCESS && f == NULL && msg_has(p), "load of a truncated file names it");
  unlink(p);
  free(raw);
}

// Every header byte replaced by several values: errors or valid files, never
// a crash or a read outside the buffer (the ASan build checks that).
static void test_corruption(void) {
  gk_st_tensor t[NT];
  make_tensors(t);
  gk_st_meta meta[] = {{"k", "v\"\\"}};
  const char *p = path_in("corrupt.safetensors");
  check(gk_st_save(p, t, NT, meta, 1) == GK_SUCCESS, "save for corruption: %s", gk_last_error());
  size_t n;
  unsigned char *raw = read_all(p, &n);
  if (!raw) return;
  unlink(p);
  uint64_t hl = 0;
  for (int k = 7; k >= 0; k--) hl = hl << 8 | raw[k];
  static const unsigned char values[] = {0x00, 0xff, '"', '{', '}', '[', ']', ',', ':', '0', '9', '-', '\\', ' ',
                                         'x', 0x80};
  int tried = 0, rejected = 0, consistent = 1;
  unsigned char *b = malloc(n);
  for (size_t pos = 0; pos < 8 + hl; pos++)
    for (size_t v = 0; v < sizeof values; v++) {
      if (raw[pos] == values[v]) continue;
      memcpy(b, raw, n);
      b[pos] = values[v];
      gk_st_file *f;
      tried++;
      if (gk_st_parse(b, n, "corrupt.st", &f) != GK_SUCCESS) {
        rejected++;
        if (!gk_last_error()[0]) consistent = 0;
        continue;
      }
      // Accepted: then it must be self-consistent.
      size_t total = 0;
      for (size_t i = 0; i < gk_st_num_tensors(f); i++) total += gk_st_tensor_at(f, i)->nbytes;
      if (total > n) consistent = 0;
      gk_st_close(f);
    }
  free(b);
  free(raw);
  check(consistent, "corrupted files: every rejection has a message, every acceptance is consistent");
  check(rejected > tried / 2, "corrupted files: %d of %d rejected", rejected, tried);
}

// Random headers: entries of random names, dtypes, shapes and offsets
// (usually consistent), fields in random order and sometimes missing, with
// random JSON fragments spliced in. Many are rejected, some accepted; an
// accepted file must be consistent, and nothing may crash (the ASan build
// checks reads outside the buffer).
static void test_fuzz(void) {
  static const char *const frags[] = {"{", "}", "[", "]", ":", ",", " ", "\"a\"", "0", "8", "-1", "1.5", "\"",
                                      "\\", "\"\\ud800\"", "18446744073709551615", "\"__metadata__\":{}"};
  static const char *const dtypes[] = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8", "F8", "f32"};
  static const size_t dsize[] = {4, 8, 2, 2, 4, 8, 1, 1, 4};
  static const char *const names[] = {"a", "b", "c", "d"};
  char h[1024];
  int accepted = 0, rejected = 0, consistent = 1;
  for (int it = 0; it < 20000; it++) {
    size_t len = 0, offset = 0;
    len += (size_t)snprintf(h + len, sizeof h - len, "{");
    int nt = (int)(rng_next() % 4);
    for (int k = 0; k < nt; k++) {
      size_t di = rng_next() % 9, numel = 1;
      char shape[64] = "";
      int rank = (int)(rng_next() % 3);
      for (int d = 0; d < rank; d++) {
        int dim = (int)(rng_next() % 4);
        numel *= (size_t)dim;
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? ",%d" : "%d", dim);
      }
      size_t begin = offset, end = offset + numel * dsize[di];
      if (rng_next() % 8 == 0) begin = rng_next() % 16, end = begin + rng_next() % 16;
      offset = end;
      char fields[3][96];
      snprintf(fields[0], sizeof fields[0], "\"dtype\":\"%s\"", dtypes[di]);
      snprintf(fields[1], sizeof fields[1], "\"shape\":[%s]", shape);
      snprintf(fields[2], sizeof fields[2], "\"data_offsets\":[%zu,%zu]", begin, end);
      int order = (int)(rng_next() % 6), first = 1;
      static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      len += (size_t)snprintf(h + len, sizeof h - len, "%s\"%s\":{", k ? "," : "", names[rng_next() % 4]);
      for (int fi = 0; fi < 3; fi++) {
        if (rng_next() % 20 == 0) continue;
        len += (size_t)snprintf(h + len, sizeof h - len, "%s%s", first ? "" : ",", fields[perms[order][fi]]);
        first = 0;
      }
      len += (size_t)snprintf(h + len, sizeof h - len, "}");
    }
    len += (size_t)snprintf(h + len, sizeof h - len, "}");
    if (rng_next() % 4 == 0) {  // splice a fragment in
      const char *f = frags[rng_next() % (sizeof frags / sizeof *frags)];
      size_t at = rng_next() % len, fl = strlen(f);
      if (len + fl < sizeof h) {
        memmove(h + at + fl, h + at, len - at + 1);
        memcpy(h + at, f, fl);
        len += fl;
      }
    }
    size_t ndata = rng_next() % 8 == 0 ? rng_next() % 64 : offset, n;
    unsigned char *b = make_file(h, ndata, &n);
    gk_st_file *f;
    if (gk_st_parse(b, n, "fuzz.st", &f) == GK_SUCCESS) {
      accepted++;
      size_t total = 0;
      for (size_t i = 0; i < gk_st_num_tensors(f); i++) total += gk_st_tensor_at(f, i)->nbytes;
      if (total != ndata) consistent = 0;
      gk_st_close(f);
    } else {
      rejected++;
      if (!strstr(gk_last_error(), "'fuzz.st'")) consistent = 0;
    }
    free(b);
  }
  check(accepted > 100 && rejected > 100, "fuzz: %d random headers accepted, %d rejected", accepted, rejected);
  check(consistent, "fuzz: accepted files hold exactly their data, rejections name the file");
}

// ---------------------------------------------------------------- writer checks

static void test_save_errors(void) {
  float x[2] = {1, 2};
  const char *p = path_in("never.safetensors");
  gk_st_tensor t[2] = {{"a", GK_ST_F32, 1, {2}, x, 0}, {"b", GK_ST_F32, 1, {2}, x, 0}};
  struct {
    const char *what, *needle;
    gk_st_tensor bad;
  } cases[] = {
      {"NULL name", "tensors[1].name is NULL", {NULL, GK_ST_F32, 1, {2}, x, 0}},
      {"empty name", "tensors[1].name is empty", {"", GK_ST_F32, 1, {2}, x, 0}},
      {"reserved name", "'__metadata__' is reserved", {"__metadata__", GK_ST_F32, 1, {2}, x, 0}},
      {"invalid UTF-8 name", "not valid UTF-8", {"b\xff", GK_ST_F32, 1, {2}, x, 0}},
      {"bad dtype", "tensor 'b': dtype 9", {"b", (gk_st_dtype)9, 1, {2}, x, 0}},
      {"negative dtype", "tensor 'b': dtype -1", {"b", (gk_st_dtype)-1, 1, {2}, x, 0}},
      {"rank 9", "tensor 'b': rank 9", {"b", GK_ST_F32, 9, {2}, x, 0}},
      {"negative rank", "tensor 'b': rank -1", {"b", GK_ST_F32, -1, {2}, x, 0}},
      {"negative dim", "tensor 'b': shape [2, -3] has a negative", {"b", GK_ST_F32, 2, {2, -3}, x, 0}},
      {"huge shape", "is too large", {"b", GK_ST_F32, 3, {1ll << 40, 1ll << 40, 1ll << 40}, x, 0}},
      {"NULL data", "tensor 'b': data is NULL", {"b", GK_ST_F32, 1, {2}, NULL, 0}},
      {"duplicate name", "tensor name 'a' appears twice", {"a", GK_ST_F32, 1, {2}, x, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    t[1] = cases[i].bad;
    gk_status st = gk_st_save(p, t, 2, NULL, 0);
    check(st != GK_SUCCESS && msg_has(cases[i].needle), "save: %s rejected", cases[i].what);
  }
  t[1] = (gk_st_tensor){"b", GK_ST_F32, 1, {2}, x, 0};
  gk_st_meta dup[2] = {{"k", "1"}, {"k", "2"}}, nul[1] = {{"k", NULL}}, bad8[1] = {{"k", "\xc3"}};
  check(gk_st_save(p, t, 2, dup, 2) != GK_SUCCESS && msg_has("metadata key 'k' appears twice"), "duplicate meta key");
  check(gk_st_save(p, t, 2, nul, 1) == GK_ERR_NULL_POINTER && msg_has("meta[0].value"), "NULL meta value");
  check(gk_st_save(p, t, 2, bad8, 1) != GK_SUCCESS && msg_has("value is not valid UTF-8"), "bad UTF-8 value");
  check(gk_st_save(NULL, t, 2, NULL, 0) == GK_ERR_NULL_POINTER, "NULL path");
  check(gk_st_save(p, NULL, 2, NULL, 0) == GK_ERR_NULL_POINTER, "NULL tensors");
  check(gk_st_save(p, t, 2, NULL, 1) == GK_ERR_NULL_POINTER, "NULL meta");
  check(gk_st_save("", t, 2, NULL, 0) != GK_SUCCESS && msg_has("empty"), "empty path");
  check(access(p, F_OK) != 0, "no file written by rejected saves");

  gk_st_file *f = (gk_st_file *)1;
  check(gk_st_load(path_in("missing.safetensors"), &f) != GK_SUCCESS && f == NULL && msg_has("cannot open") &&
            msg_has("missing.safetensors"),
        "load of a missing file");
  check(gk_st_load(dir, &f) != GK_SUCCESS && msg_has("is a directory"), "load of a directory");
  check(gk_st_load(NULL, &f) == GK_ERR_NULL_POINTER, "load NULL path");
  check(gk_st_num_tensors(NULL) == 0 && gk_st_lookup(NULL, "a") == NULL && gk_st_metadata(NULL, "k") == NULL,
        "queries on NULL");
  gk_st_close(NULL);
}

// ---------------------------------------------------------------- atomic writes

static void test_atomic(void) {
  float v1[4] = {1, 2, 3, 4}, v2[4] = {5, 6, 7, 8};
  gk_st_tensor t1 = {"w", GK_ST_F32, 1, {4}, v1, 0}, t2 = {"w", GK_ST_F32, 1, {4}, v2, 0};
  const char *p = path_in("ckpt.safetensors");
  check(gk_st_save(p, &t1, 1, NULL, 0) == GK_SUCCESS, "save v1: %s", gk_last_error());
  size_t n1;
  unsigned char *old = read_all(p, &n1);
  int before = count_entries();

  static const char *const names[] = {"", "open", "write", "fsync", "close", "rename"};
  for (int fault = GK_NN_FAULT_OPEN; fault < GK_NN_FAULT_COUNT_; fault++) {
    gk_nn_inject_fault((gk_nn_fault)fault);
    gk_status st = gk_st_save(p, &t2, 1, NULL, 0);
    check(st != GK_SUCCESS, "fault at %s: save fails", names[fault]);
    check(msg_has(fault == GK_NN_FAULT_OPEN ? "cannot create a temporary file" : "left as it was"),
          "fault at %s: message", names[fault]);
    size_t n;
    unsigned char *now = read_all(p, &n);
    check(now && n == n1 && !memcmp(now, old, n), "fault at %s: the old file is byte-identical", names[fault]);
    free(now);
    check(count_entries() == before, "fault at %s: no temporary file left (%d entries, %d before)", names[fault],
          count_entries(), before);
  }
  // The fault was used up: the next save works and replaces the file.
  check(gk_st_save(p, &t2, 1, NULL, 0) == GK_SUCCESS, "save v2 after the faults: %s", gk_last_error());
  gk_st_file *f;
  float got[4];
  check(gk_st_load(p, &f) == GK_SUCCESS && gk_st_read(f, "w", GK_ST_F32, 1, t2.shape, got) == GK_SUCCESS &&
            !memcmp(got, v2, sizeof v2),
        "v2 replaced v1");
  gk_st_close(f);
  check(count_entries() == before, "no temporary file after a good save");

  // Real failures: the target is a directory (rename fails), the directory
  // does not exist (the temporary file cannot be created).
  const char *d = path_in("adir");
  mkdir(d, 0755);
  check(gk_st_save(d, &t2, 1, NULL, 0) != GK_SUCCESS && msg_has("rename failed"), "save over a directory fails");
  check(count_entries() == before + 1, "no temporary file left by the failed rename");
  rmdir(d);
  check(gk_st_save(path_in("no/such/dir/x.st"), &t2, 1, NULL, 0) != GK_SUCCESS && msg_has("cannot create"),
        "save into a missing directory fails");
  check(gk_st_save(path_in("slash/"), &t2, 1, NULL, 0) != GK_SUCCESS && msg_has("names a directory"),
        "save to a name ending in /");
  // Without root, a directory without write permission refuses the
  // temporary file; the old file stays.
  if (geteuid() != 0) {
    chmod(dir, 0555);
    check(gk_st_save(p, &t1, 1, NULL, 0) != GK_SUCCESS, "save into a read-only directory fails");
    chmod(dir, 0755);
    check(gk_st_load(p, &f) == GK_SUCCESS && gk_st_read(f, "w", GK_ST_F32, 1, t2.shape, got) == GK_SUCCESS &&
              !memcmp(got, v2, sizeof v2),
          "read-only directory: the old file stays");
    gk_st_close(f);
  }
  unlink(p);
  free(old);
}

// ---------------------------------------------------------------- checksums

static void test_checksums(void) {
  check(gk_st_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 of \"123456789\" is the standard check value");
  check(gk_st_crc32(gk_st_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u && gk_st_crc32(0, NULL, 0) == 0,
        "crc32 continues from a CRC so far; of nothing it is 0");
  gk_st_tensor t[NT];
  make_tensors(t);
  gk_st_meta meta[1] = {{"format", "test"}};
  const char *p = path_in("sum.safetensors");
  check(gk_st_save_checksummed(p, t, NT, meta, 1) == GK_SUCCESS, "save with checksums: %s", gk_last_error());
  gk_st_file *f = NULL;
  size_t checked = 99;
  check(gk_st_load(p, &f) == GK_SUCCESS && gk_st_verify_checksums(f, &checked) == GK_SUCCESS && checked == NT,
        "every tensor checked (%zu): %s", checked, gk_last_error());
  char want[16];
  snprintf(want, sizeof want, "%08x", (unsigned)gk_st_crc32(0, f32a, sizeof f32a));
  check(f && gk_st_metadata(f, "crc32:f32") && !strcmp(gk_st_metadata(f, "crc32:f32"), want) &&
            !strcmp(gk_st_metadata(f, "format"), "test") && gk_st_num_metadata(f) == 1 + NT,
        "the entries: crc32:<name> = 8 hex digits, beside the caller's");
  gk_st_close(f);

  // A flipped bit in each tensor's data is found and named.
  size_t n;
  unsigned char *good = read_all(p, &n);
  check(good != NULL, "read back");
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = hlen << 8 | good[k];
  unsigned char *copy = malloc(n);
  for (size_t at = 8 + (size_t)hlen; good && at < n; at += 7) {
    memcpy(copy, good, n);
    copy[at] ^= 0x04;
    gk_st_file *g;
    check(gk_st_parse(copy, n, "flipped", &g) == GK_SUCCESS, "a flipped data bit still parses");
    gk_status st = gk_st_verify_checksums(g, &checked);
    check(st != GK_SUCCESS && msg_has("does not match its checksum") && msg_has("tensor '"),
          "a flipped bit at byte %zu is found", at);
    gk_st_close(g);
  }
  free(copy);
  free(good);

  // A file with no checksums: no error, 0 checked (the caller decides).
  check(gk_st_save(p, t, NT, meta, 1) == GK_SUCCESS && gk_st_load(p, &f) == GK_SUCCESS &&
            gk_st_verify_checksums(f, &checked) == GK_SUCCESS && checked == 0,
        "no checksums: 0 checked");
  gk_st_close(f);

  // Bad entries: malformed, of a missing tensor, one tensor without.
  struct {
    gk_st_meta meta[2];
    size_t nmeta;
    const char *needle;
  } bad[] = {
      {{{"crc32:u8", "1234567"}}, 1, "'1234567' is not a checksum"},
      {{{"crc32:u8", "ABCDEF01"}}, 1, "is not a checksum (8 lowercase hex digits)"},
      {{{"crc32:u8", "0000000g"}}, 1, "is not a checksum"},
      {{{"crc32:nothing", "00000000"}}, 1, "'crc32:nothing' is the checksum of a tensor the file does not have"},
      {{{"crc32:u8", "00000000"}}, 1, "does not match"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gk_st_tensor one[2] = {{"u8", GK_ST_U8, 1, {7}, u8a, 0}, {"f32", GK_ST_F32, 2, {2, 3}, f32a, 0}};
    check(gk_st_save(p, one, 1, bad[i].meta, bad[i].nmeta) == GK_SUCCESS && gk_st_load(p, &f) == GK_SUCCESS,
          "bad checksum %zu: saved", i);
    check(gk_st_verify_checksums(f, &checked) != GK_SUCCESS && msg_has(bad[i].needle), "bad checksum %zu", i);
    gk_st_close(f);
  }
  gk_st_tensor two[2] = {{"u8", GK_ST_U8, 1, {7}, u8a, 0}, {"f32", GK_ST_F32, 2, {2, 3}, f32a, 0}};
  char sum[16];
  snprintf(sum, sizeof sum, "%08x", (unsigned)gk_st_crc32(0, u8a, sizeof u8a));
  gk_st_meta partial[1] = {{"crc32:u8", sum}};
  check(gk_st_save(p, two, 2, partial, 1) == GK_SUCCESS && gk_st_load(p, &f) == GK_SUCCESS &&
            gk_st_verify_checksums(f, &checked) != GK_SUCCESS &&
            msg_has("tensor 'f32' has no checksum, while 1 other tensor has one"),
        "a tensor without a checksum among others with one");
  gk_st_close(f);

  // Bad arguments: gk_st_save's messages, nothing written.
  unlink(p);
  gk_st_tensor nodata = {"x", GK_ST_F32, 1, {4}, NULL, 0};
  check(gk_st_save_checksummed(p, &nodata, 1, NULL, 0) == GK_ERR_NULL_POINTER && msg_has("data is NULL") &&
            access(p, F_OK) != 0,
        "a tensor without data: refused, nothing written");
  check(gk_st_save_checksummed(NULL, t, 1, NULL, 0) == GK_ERR_NULL_POINTER &&
            gk_st_verify_checksums(NULL, &checked) == GK_ERR_NULL_POINTER,
        "NULL arguments");
}

// ---------------------------------------------------------------- file checks

static void test_file_checks(void) {
  unsigned char *b;
  size_t n;
  // Not regular files: refused at once (a FIFO must not block).
  const char *fifo = path_in("fifo");
  check(mkfifo(fifo, 0600) == 0, "mkfifo");
  check(gk_nn_read_file(fifo, "data file", &b, &n) != GK_SUCCESS && msg_has("is not a regular file (it is a FIFO)"),
        "a FIFO is refused without blocking");
  unlink(fifo);
  check(gk_nn_read_file("/dev/null", "data file", &b, &n) != GK_SUCCESS && msg_has("a character device"),
        "a device is refused");
  check(gk_nn_read_file("/proc/self/status", "data file", &b, &n) != GK_SUCCESS && msg_has("/proc"),
        "a /proc file is refused");
  check(gk_nn_read_file(dir, "data file", &b, &n) != GK_SUCCESS && msg_has("it is a directory"), "a directory");
  char empty[256];  // path_in's buffers are reused
  snprintf(empty, sizeof empty, "%s", path_in("empty"));
  FILE *e = fopen(empty, "w");
  if (e) fclose(e);
  check(gk_nn_read_file(empty, "data file", &b, &n) == GK_SUCCESS && n == 0, "an empty regular file reads as empty");
  free(b);

  // Writable outputs, checked before a run; nothing is left behind.
  int before = count_entries();
  check(gk_nn_check_writable(path_in("out.st"), "--checkpoint") == GK_SUCCESS, "a new file: %s", gk_last_error());
  check(gk_nn_check_writable(empty, "--checkpoint") == GK_SUCCESS, "an existing file: %s", gk_last_error());
  check(count_entries() == before, "the probe leaves nothing");
  check(gk_nn_check_writable(dir, "--checkpoint") != GK_SUCCESS && msg_has("--checkpoint '") &&
            msg_has("is a directory"),
        "a directory");
  check(gk_nn_check_writable(path_in("x/"), "--plot") != GK_SUCCESS && msg_has("is a directory"), "a name ending in /");
  check(gk_nn_check_writable(path_in("no/x.st"), "--checkpoint") != GK_SUCCESS && msg_has("does not exist"),
        "a missing directory");
  char in_file[300];
  snprintf(in_file, sizeof in_file, "%s/x.st", empty);
  check(gk_nn_check_writable(in_file, "--checkpoint") != GK_SUCCESS && msg_has("is not a directory"),
        "a file as the directory");
  check(gk_nn_check_writable("", "--checkpoint") != GK_SUCCESS && gk_nn_check_writable(NULL, "x") != GK_SUCCESS,
        "empty and NULL names");
  if (geteuid() != 0) {
    chmod(dir, 0555);
    check(gk_nn_check_writable(path_in("out.st"), "--checkpoint") != GK_SUCCESS && msg_has("cannot create a file"),
          "a read-only directory");
    chmod(dir, 0755);
  }

  // The same file under two names; two names that will be one file.
  char dotted[300];
  snprintf(dotted, sizeof dotted, "%s/./empty", dir);
  check(gk_nn_same_file(empty, dotted) && !gk_nn_same_file(empty, path_in("other")), "same file: existing");
  snprintf(dotted, sizeof dotted, "%s/./new", dir);
  check(gk_nn_same_file(path_in("new"), dotted) && !gk_nn_same_file(path_in("new"), path_in("new2")),
        "same file: neither exists yet");
  unlink(empty);

  // Stale temporary files: a dead writer's are removed, a live one's kept.
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  char stale[300], alive[300], other[300];
  snprintf(stale, sizeof stale, "%s/ck.st.tmp-%ld-0", dir, (long)child);
  snprintf(alive, sizeof alive, "%s/ck.st.tmp-%ld-0", dir, (long)getppid());
  snprintf(other, sizeof other, "%s/ck.st.tmp-%ld-0x", dir, (long)child);
  const char *names[3] = {stale, alive, other};
  for (int i = 0; i < 3; i++) {
    FILE *t = fopen(names[i], "w");
    if (t) fclose(t);
  }
  check(gk_nn_remove_stale_temps(path_in("ck.st")) == 1 && access(stale, F_OK) != 0 && access(alive, F_OK) == 0 &&
            access(other, F_OK) == 0,
        "only the dead writer's temporary file is removed");
  check(gk_nn_remove_stale_temps(path_in("other.st")) == 0, "another file's are not touched");
  unlink(alive);
  unlink(other);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/gk_test_st_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_round_trip();
  test_bad_headers();
  test_truncation();
  test_corruption();
  test_fuzz();
  test_save_errors();
  test_atomic();
  test_checksums();
  test_file_checks();
  unlink(path_in("rt.safetensors"));
  int left = count_entries();
  check(left == 0, "the test directory is empty at the end (%d entries)", left);
  rmdir(dir);
  return finish("test_safetensors");
}
