// The BPE tokenizer on small hand-made tokenizers: a Hugging Face
// tokenizer.json (merges in both the "a b" and the ["a", "b"] form, added
// tokens) and GPT-2's two files, encodings worked out by hand, streaming in
// pieces equal to encoding at once, decoding, and the errors for bad files
// and bad ids. (The agreement with GPT-2's own encoder on real text is
// tests/tokenizer/run_gpt2_test.sh.)
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "nn/bpe.h"

#include <unistd.h>

static bool msg_has(const char *needle) {
  if (strstr(gk_last_error(), needle)) return true;
  fprintf(stderr, "  message: %s\n  expected it to contain: %s\n", gk_last_error(), needle);
  return false;
}

// GPT-2's byte-to-unicode map, written out again here: printable Latin-1
// bytes stand for themselves, the others in order for U+0100, U+0101, ...
static unsigned byte_char(unsigned b) {
  unsigned next = 0x100;
  for (unsigned v = 0; v < 256; v++) {
    int printable = (v >= 0x21 && v <= 0x7E) || (v >= 0xA1 && v <= 0xAC) || (v >= 0xAE && v <= 0xFF);
    if (v == b) return printable ? v : next;
    if (!printable) next++;
  }
  return 0;
}

// A tokenizer.json whose vocabulary is the 256 byte tokens (id = byte value,
// all but the bytes in `missing`) plus
//   256 "ll"   257 "he"   258 "hell"   259 "hello"   260 "Ġw"
// with merges, in rank order: "l l", ["h", "e"], "he ll", ["hell", "o"], "Ġ w";
// added tokens 261 "<|end|>" and 262 "<|e"; `normalizer` and `extra_model`
// (a field of "model", may be "") and `extra_added` (a field of the first
// added token) spliced in.
static char *tiny_json(const char *normalizer, const char *extra_model, const char *extra_added, const char *missing) {
  static char buf[16384];
  size_t n = 0;
  n += (size_t)snprintf(buf + n, sizeof buf - n,
                        "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
                        " \"added_tokens\": [{\"id\": 261, \"content\": \"<|end|>\", \"single_word\": false, "
                        "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true%s},\n"
                        "   {\"id\": 262, \"content\": \"<|e\", \"special\": false}],\n"
                        " \"normalizer\": %s,\n"
                        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                        "\"trim_offsets\": true, \"use_regex\": true},\n"
                        " \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                        "\"trim_offsets\": true, \"use_regex\": true},\n"
                        " \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true},\n"
                        " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
                        "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
                        "\"byte_fallback\": false%s,\n  \"vocab\": {",
                        extra_added, normalizer, extra_model);
  int first = 1;
  for (unsigned b = 0; b < 256; b++) {
    if (missing && strchr(missing, (int)b) && b) continue;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"\\u%04X\": %u", first ? "" : ", ", byte_char(b), b);
    first = 0;
  }
  n += (size_t)snprintf(buf + n, sizeof buf - n,
                        ", \"ll\": 256, \"he\": 257, \"hell\": 258, \"hello\": 259, \"\\u0120w\": 260},\n"
                        "  \"merges\": [\"l l\", [\"h\", \"e\"], \"he ll\", [\"hell\", \"o\"], \"\\u0120 w\"]}}\n");
  return buf;
}

static gk_bpe *tiny(void) {
  const char *json = tiny_json("null", "", "", NULL);
  gk_bpe *t = NULL;
  gk_status st = gk_bpe_parse_hf(json, strlen(json), "tiny.json", &t);
  check(st == GK_SUCCESS, "the tiny tokenizer.json loads: %s", st ? gk_last_error() : "");
  return t;
}

static bool encodes_to(gk_bpe *t, const char *text, const int32_t *want, size_t nwant) {
  gk_bpe_ids ids = {0};
  size_t used;
  bool ok = gk_bpe_encode(t, text, strlen(text), 1, &used, &ids) == GK_SUCCESS && used == strlen(text) &&
            ids.len == nwant && (!nwant || !memcmp(ids.data, want, nwant * sizeof *want));
  if (!ok) {
    fprintf(stderr, "  '%s' ->", text);
    for (size_t i = 0; i < ids.len; i++) fprintf(stderr, " %d", ids.data[i]);
    fprintf(stderr, " (expected");
    for (size_t i = 0; i < nwant; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, ")\n");
  }
  gk_bpe_ids_free(&ids);
  return ok;
}

#define ENCODES(t, text, ...)                                                                            \
  do {                                                                                                   \
    static const int32_t want_[] = {__VA_ARGS__};                                                        \
    check(encodes_to(t, text, want_, sizeof want_ / sizeof *want_), "'%s' encodes as worked out", text); \
  } while (0)

static void test_hand_worked(void) {
  gk_bpe *t = tiny();
  if (!t) return;
  check(gk_bpe_vocab_size(t) == 263, "vocabulary size 263 (ids 0..262), got %d", gk_bpe_vocab_size(t));
  // hello: pairs he(1) ll(0) -> "ll" first, then he(1), he+ll(2), hell+o(3).
  ENCODES(t, "hello", 259);
  // " world": "Ġ w" merges; o r l d stay bytes.
  ENCODES(t, " world", 260, 'o', 'r', 'l', 'd');
  ENCODES(t, "hello world<|end|>hello", 259, 260, 'o', 'r', 'l', 'd', 261, 259);
  // Equal ranks: the leftmost pair first ("l l" in "lll" -> "ll" "l").
  ENCODES(t, "lll", 256, 'l');
  ENCODES(t, "llll", 256, 256);
  // The longest added token at a position; a shorter one where only it matches.
  ENCODES(t, "<|end|><|en", 261, 262, 'n');
  ENCODES(t, "a<|end|>  b", 'a', 261, ' ', ' ', 'b');
  // " hello": no merge with the space.
  ENCODES(t, " hello", ' ', 259);
  // Whitespace runs: "a", "  " (less the last space before "b"), " b"; at the end the whole run.
  ENCODES(t, "a   b  ", 'a', ' ', ' ', ' ', 'b', ' ', ' ');
  // Contractions and digits.
  ENCODES(t, "he's 12", 257, '\'', 's', ' ', '1', '2');

  // Decoding: byte tokens, merged tokens and added tokens (their content).
  const int32_t ids[] = {259, 261, 260, 'o', 0x20, 262, 0xC3, 0xA9};
  gk_nn_buf out = {0};
  check(gk_bpe_decode(t, ids, 8, &out) == GK_SUCCESS && out.len == 21 && !memcmp(out.data, "hello<|end|> wo <|e\xc3\xa9", 21),
        "decode: bytes, merged tokens and added tokens' content");
  size_t len;
  const unsigned char *tb = gk_bpe_token_bytes(t, 260, &len);
  check(tb && len == 2 && !memcmp(tb, " w", 2), "token 260 is the bytes ' w'");
  check(!gk_bpe_token_bytes(t, 263, &len) && !gk_bpe_token_bytes(t, -1, &len), "no token 263 or -1");
  const int32_t bad[] = {1, 2, 263};
  size_t before = out.len;
  check(gk_bpe_decode(t, bad, 3, &out) != GK_SUCCESS && msg_has("token id 263") && msg_has("number 2") &&
            out.len == before,
        "decoding an id outside the vocabulary fails, naming it, and appends nothing");
  const int32_t neg[] = {-5};
  check(gk_bpe_decode(t, neg, 1, &out) != GK_SUCCESS && msg_has("token id -5"), "a negative id fails, naming it");
  gk_nn_buf_free(&out);
  gk_bpe_free(t);
}

static gk_status collect_ids(void *ctx, const int32_t *ids, size_t n) {
  gk_bpe_ids *out = ctx;
  for (size_t i = 0; i < n; i++) {
    if (out->len == out->cap) {
      size_t cap = out->cap ? 2 * out->cap : 1024;
      int32_t *d = realloc(out->data, cap * sizeof *d);
      if (!d) return GK_ERR_OUT_OF_MEMORY;
      out->data = d;
      out->cap = cap;
    }
    out->data[out->len++] = ids[i];
  }
  return GK_SUCCESS;
}

// Encoding text[0, n) at once and again in random pieces of 1 to max_piece
// bytes (final = 0, keeping what each call leaves) gives the same ids;
// *whole (when not NULL) gets the ids of encoding it at once.
static bool pieces_equal_whole(gk_bpe *t, const char *text, size_t n, size_t max_piece, gk_bpe_ids *whole_out) {
  gk_bpe_ids whole = {0}, parts = {0};
  size_t used, pos = 0, have = 0;
  gk_status st = gk_bpe_encode(t, text, n, 1, &used, &whole);
  while (st == GK_SUCCESS) {
    size_t add = 1 + rng_next() % max_piece;
    int final = pos + have + add >= n;
    if (final) add = n - pos - have;
    have += add;
    st = gk_bpe_encode(t, text + pos, have, final, &used, &parts);
    pos += used;
    have -= used;
    if (final) break;
  }
  bool same = st == GK_SUCCESS && pos == n && whole.len == parts.len &&
              !memcmp(whole.data, parts.data, whole.len * sizeof(int32_t));
  if (!same) fprintf(stderr, "  pieces give %zu ids, at once %zu (%s)\n", parts.len, whole.len, st ? gk_last_error() : "");
  gk_bpe_ids_free(&parts);
  if (whole_out) *whole_out = whole;
  else gk_bpe_ids_free(&whole);
  return same;
}

// Random texts over pieces of every kind, added tokens and cut UTF-8
// included: encoding in random pieces (final = 0, keeping the rest) gives
// the ids of encoding at once, and decoding gives the bytes back.
static void test_streaming(void) {
  gk_bpe *t = tiny();
  if (!t) return;
  static const char *const pieces[] = {"hello", " world", "l", "ll", " ", "  ", "\n", "\t", "<|end|>", "<|e", "<|",
                                       "<", "'s", "'", "12", " 3", "!", "?!", "\xc3\xa9", "\xe6\x9d\xb1",
                                       "\xf0\x9f\x98\x80", "\xff", "\xe6\x9d", "\xc2\xa0", "\xe3\x80\x80", "x"};
  const size_t npieces = sizeof pieces / sizeof *pieces;
  int all_same = 1, all_round = 1;
  for (int trial = 0; trial < 300; trial++) {
    char text[2048];
    size_t n = 0;
    while (n < 1500) {
      const char *p = pieces[rng_next() % npieces];
      memcpy(text + n, p, strlen(p));
      n += strlen(p);
    }
    gk_bpe_ids whole = {0};
    int same = pieces_equal_whole(t, text, n, 17, &whole);
    gk_nn_buf back = {0};
    int round = same && gk_bpe_decode(t, whole.data, whole.len, &back) == GK_SUCCESS && back.len == n &&
                !memcmp(back.data, text, n);
    all_same &= same;
    all_round &= round;
    gk_nn_buf_free(&back);
    gk_bpe_ids_free(&whole);
  }
  check(all_same, "300 random texts: encoding in random pieces gives the ids of encoding at once");
  check(all_round, "300 random texts (invalid UTF-8 included): decode(encode(text)) == text");

  // The stream reader over a file larger than its 1 MiB buffer.
  char path[] = "/tmp/gk_test_bpe_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;
  gk_nn_buf text = {0};
  while (text.len < (3u << 20)) gk_nn_buf_puts(&text, pieces[rng_next() % npieces]);
  check(f && fwrite(text.data, 1, text.len, f) == text.len && fseek(f, 0, SEEK_SET) == 0, "write a 3 MiB file");
  gk_bpe_ids whole = {0}, streamed = {0};
  size_t used;
  uint64_t nbytes = 0;
  check(gk_bpe_encode(t, text.data, text.len, 1, &used, &whole) == GK_SUCCESS, "encode 3 MiB at once");
  if (f) {
    gk_status st = gk_bpe_encode_stream(t, f, "the test file", collect_ids, &streamed, &nbytes);
    check(st == GK_SUCCESS && nbytes == text.len && streamed.len == whole.len &&
              !memcmp(streamed.data, whole.data, whole.len * sizeof(int32_t)),
          "a 3 MiB file read in pieces: the ids of encoding it at once (%s)", st ? gk_last_error() : "");
    check(gk_bpe_encode_stream(t, f, "the test file", NULL, NULL, NULL) == GK_ERR_NULL_POINTER && msg_has("emit"),
          "encode_stream without emit fails, naming it");
  }
  gk_bpe_ids_free(&whole);
  gk_bpe_ids_free(&streamed);
  gk_nn_buf_free(&text);
  if (f) fclose(f);
  unlink(path);
  gk_bpe_free(t);
}

// A tokenizer.json that must be refused, with a message containing `needle`.
static void refused(const char *json, const char *needle, const char *what) {
  gk_bpe *t = (gk_bpe *)1;
  gk_status st = gk_bpe_parse_hf(json, strlen(json), "bad.json", &t);
  check(st != GK_SUCCESS && t == NULL && msg_has(needle) && msg_has("bad.json"), "%s: refused, naming it", what);
  gk_bpe_free(st ? NULL : t);
}

static void test_bad_files(void) {
  refused(tiny_json("{\"type\": \"Lowercase\"}", "", "", NULL), "Lowercase", "a Lowercase normalizer");
  refused(tiny_json("null", "", ", \"lstrip\": true", NULL), "lstrip", "an added token with lstrip");
  refused(tiny_json("null", ", \"dropout\": 0.1", "", NULL), "dropout", "BPE dropout");
  refused(tiny_json("null", ", \"byte_fallback\": true", "", NULL), "byte_fallback", "byte fallback");
  refused(tiny_json("null", ", \"ignore_merges\": true", "", NULL), "ignore_merges", "ignore_merges");
  refused(tiny_json("null", ", \"type\": \"WordPiece\"", "", NULL), "WordPiece", "a WordPiece model");
  refused(tiny_json("null", ", \"continuing_subword_prefix\": \"##\"", "", NULL), "continuing_subword_prefix",
          "a subword prefix");
  // The tiny JSON with one substitution.
  char buf[16384];
  const char *base = tiny_json("null", "", "", NULL);
  snprintf(buf, sizeof buf, "%s", base);
  gk_bpe *t = NULL;
  check(gk_bpe_parse_hf(buf, strlen(buf), "ok.json", &t) == GK_SUCCESS, "the template loads: %s", gk_last_error());
  gk_bpe_free(t);
  struct {
    const char *from, *to, *needle, *what;
  } subs[] = {
      {"\"Whitespace\"", "", "", ""},
      {"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n \"post",
       "{\"type\": \"Whitespace\"},\n \"post", "pre_tokenizer", "a Whitespace pre-tokenizer"},
      {"\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n \"post",
       "\"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true},\n \"post", "add_prefix_space",
       "add_prefix_space true"},
      {"\"he ll\"", "\"hel l\"", "'hel' is not in the vocabulary", "a merge of a token not in the vocabulary"},
      {"\"he ll\"", "\"hell\"", "merge 2 is not two tokens", "a merge without a space"},
      {"[\"hell\", \"o\"]", "[\"hell\"]", "expected ','", "a merge pair of one token"},
      {"\"hello\": 259", "\"hello\": -3", "outside [0, 2^24)", "a negative token id"},
      {"\"hello\": 259", "\"hello\": 1.5", "fraction", "a fractional token id"},
      {"\"hello\": 259", "\"hello\": 259, \"hell\": 7", "appears twice", "a token listed twice"},
      {"\"hello\": 259", "\"hello\": 1", "the same id", "two tokens with one id"},
      {"{\"id\": 261, \"content\": \"<|end|>\"", "{\"id\": 261, \"content\": \"\"", "non-empty \"content\"",
       "an added token without content"},
      {"\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"WordPiece\"", "decoder", "a WordPiece decoder"},
      {"\"type\": \"BPE\",", "", "\"model\" has no \"type\"", "a model without a type"},
      {"\"ll\": 256", "\"l\\ud800\": 256", "surrogate", "an unpaired surrogate escape"},
  };
  for (size_t k = 1; k < sizeof subs / sizeof *subs; k++) {
    const char *at = strstr(base, subs[k].from);
    if (!at) {
      check(false, "test bug: '%s' not in the template", subs[k].from);
      continue;
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, subs[k].to, at + strlen(subs[k].from));
    refused(buf, subs[k].needle, subs[k].what);
  }
  // Every truncation of the file (before its final newline) fails with a message (and, under ASan, reads nothing past the end).
  size_t n = strlen(base);
  int all = 1;
  for (size_t cut = 0; cut + 1 < n; cut++) {
    char *copy = malloc(cut ? cut : 1);
    memcpy(copy, base, cut);
    t = NULL;
    gk_status st = gk_bpe_parse_hf(copy, cut, "cut.json", &t);
    if (st == GK_SUCCESS || t || !strstr(gk_last_error(), "cut.json")) {
      if (all) fprintf(stderr, "  cut at %zu: status %d, message %s\n", cut, (int)st, gk_last_error());
      all = 0;
    }
    gk_bpe_free(t);
    free(copy);
  }
  check(all, "each of the %zu truncations of tokenizer.json is refused with a message", n - 1);
  check(gk_bpe_load("/nonexistent/tokenizer.json", &t) != GK_SUCCESS && msg_has("/nonexistent/tokenizer.json"),
        "a missing file: refused, naming it");

  // A byte without a token: encoding it fails, naming the byte and its offset.
  const char *json = tiny_json("null", "", "", "z");
  t = NULL;
  check(gk_bpe_parse_hf(json, strlen(json), "noz.json", &t) == GK_SUCCESS, "a vocabulary without 'z' loads");
  if (t) {
    gk_bpe_ids ids = {0};
    size_t used;
    check(gk_bpe_encode(t, "hello zz", 8, 1, &used, &ids) != GK_SUCCESS && msg_has("byte 0x7a") && msg_has("byte 6"),
          "encoding a byte without a token fails, naming it");
    gk_bpe_ids_free(&ids);
    gk_bpe_free(t);
  }
}

// Both texts give the same ids.
static bool same_ids(gk_bpe *t, const char *a, const char *b) {
  gk_bpe_ids ia = {0}, ib = {0};
  size_t used;
  bool ok = gk_bpe_encode(t, a, strlen(a), 1, &used, &ia) == GK_SUCCESS &&
            gk_bpe_encode(t, b, strlen(b), 1, &used, &ib) == GK_SUCCESS && ia.len == ib.len &&
            !memcmp(ia.data, ib.data, ia.len * sizeof(int32_t));
  gk_bpe_ids_free(&ia);
  gk_bpe_ids_free(&ib);
  return ok;
}

// With an NFC normalizer the text is encoded in NFC: cases worked out by
// hand, then random texts of starters and combining marks encoded in random
// pieces against the whole. (Agreement with Python's unicodedata on every
// code point with a decomposition: tests/python/test_tokenizer_cli.py.)
static void test_nfc(void) {
  const char *json = tiny_json("{\"type\": \"NFC\"}", "", "", NULL);
  gk_bpe *t = NULL;
  check(gk_bpe_parse_hf(json, strlen(json), "nfc.json", &t) == GK_SUCCESS, "an NFC tokenizer loads");
  if (!t) return;
  static const char *const cases[][3] = {
      {"cafe\xcc\x81", "caf\xc3\xa9", "e + combining acute composes to U+00E9"},
      {"x\xe2\x84\xab", "x\xc3\x85", "the Angstrom sign becomes U+00C5"},
      {"a\xcc\x95\xcc\x80", "\xc3\xa0\xcc\x95", "marks reorder by class (232 after 230), then a + grave composes"},
      {"a\xcc\x80\xcc\x80", "\xc3\xa0\xcc\x80", "a second grave is blocked by the first (same class)"},
      {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81", "Hangul jamo L V T compose to U+AC01"},
      {"\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81", "Hangul LV + T composes to LVT"},
      {"\xe0\xa4\xa8\xe0\xa4\xbc", "\xe0\xa4\xa9", "Devanagari NA + nukta composes to NNNA"},
      {"e\xff\xcc\x81", "e\xff\xcc\x81", "a byte that is not UTF-8 passes through and blocks composition"},
      {"\xcd\x84", "\xcc\x88\xcc\x81", "U+0344 decomposes to two marks, which stay apart"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check(same_ids(t, cases[i][0], cases[i][1]), "NFC: %s", cases[i][2]);

  static const char *const pieces[] = {"a", "e", "x", " ", "\n", "\xcc\x81", "\xcc\x80", "\xcc\x95", "\xcc\xa3",
                                       "\xc3\xa9", "\xe2\x84\xab", "\xe1\x84\x80", "\xe1\x85\xa1",
                                       "\xe1\x86\xa8", "\xea\xb0\x80", "\xe0\xa4\xa8", "\xe0\xa4\xbc", "\xff",
                                       "\xcc", "<|end|>", "12", "'s"};
  const size_t npieces = sizeof pieces / sizeof *pieces;
  int all_same = 1;
  for (int trial = 0; trial < 300; trial++) {
    char text[512];
    size_t n = 0;
    while (n < 400) {
      const char *p = pieces[rng_next() % npieces];
      memcpy(text + n, p, strlen(p));
      n += strlen(p);
    }
    all_same &= pieces_equal_whole(t, text, n, 9, NULL);
  }
  check(all_same, "NFC: 300 random texts of starters and marks: encoding in random pieces gives the ids at once");
  gk_bpe_free(t);
}

// GPT-2's two files, written to a directory: the same tokenizer as the tiny
// tokenizer.json (less its added tokens), and errors naming the line.
static void test_gpt2_files(void) {
  char dir[] = "/tmp/gk_test_bpe_dir_XXXXXX";
  if (!mkdtemp(dir)) {
    check(false, "mkdtemp");
    return;
  }
  char enc[256], bpe[256];
  snprintf(enc, sizeof enc, "%s/encoder.json", dir);
  snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
  FILE *f = fopen(enc, "w");
  if (f) {
    fputs("{", f);
    for (unsigned b = 0; b < 256; b++) fprintf(f, "%s\"\\u%04X\": %u", b ? ", " : "", byte_char(b), b);
    fputs(", \"ll\": 256, \"he\": 257, \"hell\": 258, \"hello\": 259, \"\\u0120w\": 260, \"<|endoftext|>\": 261}", f);
    fclose(f);
  }
  f = fopen(bpe, "w");
  if (f) {
    fputs("#version: 0.2\nl l\nh e\nhe ll\nhell o\n\xc4\xa0 w\n", f);
    fclose(f);
  }
  gk_bpe *t = NULL;
  check(gk_bpe_load(dir, &t) == GK_SUCCESS, "GPT-2 files load from their directory: %s", gk_last_error());
  if (t) {
    check(gk_bpe_vocab_size(t) == 262, "262 tokens");
    ENCODES(t, "hello world", 259, 260, 'o', 'r', 'l', 'd');
    ENCODES(t, "<|endoftext|>", '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>');  // not special in GPT-2's files
    gk_bpe_free(t);
  }
  f = fopen(bpe, "w");
  if (f) {
    fputs("#version: 0.2\nl l\nhe\n", f);
    fclose(f);
  }
  t = NULL;
  check(gk_bpe_load(dir, &t) != GK_SUCCESS && !t && msg_has("line 3") && msg_has("vocab.bpe"),
        "a merges line of one token: refused, naming the line");
  f = fopen(enc, "w");
  if (f) {
    fputs("{\"a\": 0, \"b\" 1}", f);
    fclose(f);
  }
  check(gk_bpe_load(dir, &t) != GK_SUCCESS && msg_has("encoder.json") && msg_has("expected ':'"),
        "malformed encoder.json: refused, naming the file and the byte");
  unlink(enc);
  check(gk_bpe_load(dir, &t) != GK_SUCCESS && msg_has("encoder.json"), "a directory without encoder.json: refused");
  unlink(bpe);
  rmdir(dir);
}

int main(void) {
  test_hand_worked();
  test_streaming();
  test_bad_files();
  test_nfc();
  test_gpt2_files();
  return finish("test_bpe");
}
