// `gradkern tokenize --tokenizer PATH [--decode] [--stats]`: standard input
// to standard output, through a byte-level BPE tokenizer (src/nn/bpe.h).
#include "tokenize.h"

#include "nn/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *usage =
    "usage: gradkern tokenize --tokenizer PATH [--decode] [--stats]\n"
    "\n"
    "Reads text on standard input and prints its token ids on one line,\n"
    "separated by spaces. The input is read in pieces, so a file of any size\n"
    "streams through; any bytes are accepted (bytes that are not UTF-8 are\n"
    "encoded as bytes, and decode back unchanged).\n"
    "\n"
    "  --tokenizer PATH  a Hugging Face tokenizer.json of BPE type with a\n"
    "                    ByteLevel pre-tokenizer (GPT-NeoX's, the Mamba\n"
    "                    checkpoints'), or a directory holding GPT-2's\n"
    "                    encoder.json and vocab.bpe\n"
    "  --decode          the reverse: token ids (separated by white space) on\n"
    "                    standard input, their text on standard output\n"
    "  --stats           on standard error: bytes, tokens, seconds and MB/s\n"
    "                    (the tokenizer's loading not counted)\n"
    "  --help, -h        show this message\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct encode_out {
  size_t ntokens;
  char buf[1 << 16];
  size_t len;
} encode_out;

static gk_status print_ids(void *ctx, const int32_t *ids, size_t n) {
  encode_out *o = ctx;
  for (size_t i = 0; i < n; i++) {
    if (o->len > sizeof o->buf - 16) {
      if (fwrite(o->buf, 1, o->len, stdout) != o->len)
        return gk_nn_fail(GK_NN_ERR_FILE, "cannot write the token ids to standard output");
      o->len = 0;
    }
    char digits[12];
    int k = 0;
    uint32_t v = (uint32_t)ids[i];
    do digits[k++] = (char)('0' + v % 10);
    while (v /= 10);
    if (o->ntokens + i) o->buf[o->len++] = ' ';
    while (k) o->buf[o->len++] = digits[--k];
  }
  o->ntokens += n;
  return GK_SUCCESS;
}

static int encode(gk_bpe *t, int stats) {
  static encode_out out;
  double t0 = now();
  uint64_t bytes = 0;
  gk_status st = gk_bpe_encode_stream(t, stdin, "standard input", print_ids, &out, &bytes);
  if (st == GK_SUCCESS) {
    out.buf[out.len++] = '\n';
    if (fwrite(out.buf, 1, out.len, stdout) != out.len || fflush(stdout))
      st = gk_nn_fail(GK_NN_ERR_FILE, "cannot write the token ids to standard output");
  }
  if (st) {
    fprintf(stderr, "gradkern tokenize: %s\n", gk_last_error());
    return 1;
  }
  double secs = now() - t0;
  if (stats)
    fprintf(stderr, "encoded %llu bytes into %zu tokens in %.3f s: %.2f MB/s, %.2f bytes per token\n",
            (unsigned long long)bytes, out.ntokens, secs, (double)bytes / 1e6 / secs,
            out.ntokens ? (double)bytes / (double)out.ntokens : 0.0);
  return 0;
}

static int decode(gk_bpe *t, int stats) {
  double t0 = now();
  int32_t ids[4096];
  size_t nids = 0, nword = 0, total_bytes = 0, total_ids = 0;
  char word[24];
  size_t wlen = 0;
  int c, fail = 0;
  gk_nn_buf text = {0};
  for (;;) {
    c = getchar();
    int space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
    if (c != EOF && !space) {
      if (wlen < sizeof word - 1) word[wlen] = (char)c;
      wlen++;
      continue;
    }
    if (wlen) {
      nword++;
      word[wlen < sizeof word ? wlen : sizeof word - 1] = 0;
      char *end;
      long v = strtol(word, &end, 10);
      if (wlen >= sizeof word || *end || word[0] == '-' || word[0] == '+' || v > INT32_MAX) {
        fprintf(stderr, "gradkern tokenize --decode: input word %zu '%s%s' is not a token id (a non-negative integer)\n",
                nword, word, wlen >= sizeof word ? "..." : "");
        fail = 1;
        break;
      }
      size_t len;
      if (!gk_bpe_token_bytes(t, (int32_t)v, &len)) {
        fprintf(stderr, "gradkern tokenize --decode: input word %zu: %ld is not a token id of this tokenizer (ids 0..%ld)\n",
                nword, v, (long)gk_bpe_vocab_size(t) - 1);
        fail = 1;
        break;
      }
      ids[nids++] = (int32_t)v;
      wlen = 0;
    }
    if (nids == sizeof ids / sizeof *ids || (c == EOF && nids)) {
      text.len = 0;
      if (gk_bpe_decode(t, ids, nids, &text)) {
        fprintf(stderr, "gradkern tokenize --decode: %s\n", gk_last_error());
        fail = 1;
        break;
      }
      if (text.len && fwrite(text.data, 1, text.len, stdout) != text.len) {
        fprintf(stderr, "gradkern tokenize --decode: cannot write to standard output\n");
        fail = 1;
        break;
      }
      total_bytes += text.len;
      total_ids += nids;
      nids = 0;
    }
    if (c == EOF) break;
  }
  gk_nn_buf_free(&text);
  if (!fail && (ferror(stdin) || fflush(stdout))) {
    fprintf(stderr, "gradkern tokenize --decode: cannot %s\n", ferror(stdin) ? "read standard input" : "write standard output");
    fail = 1;
  }
  if (!fail && stats) {
    double secs = now() - t0;
    fprintf(stderr, "decoded %zu tokens into %zu bytes in %.3f s: %.2f MB/s\n", total_ids, total_bytes, secs,
            (double)total_bytes / 1e6 / secs);
  }
  return fail;
}

int gk_cmd_tokenize(int argc, char **argv) {
  const char *path = NULL;
  int do_decode = 0, stats = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--decode") || !strcmp(argv[i], "--stats")) {
      int *flag = argv[i][2] == 'd' ? &do_decode : &stats;
      if (*flag) {
        fprintf(stderr, "gradkern tokenize: %s is given twice\n", argv[i]);
        return 2;
      }
      *flag = 1;
    } else if (!strcmp(argv[i], "--tokenizer")) {
      if (path) {
        fprintf(stderr, "gradkern tokenize: --tokenizer is given twice\n");
        return 2;
      }
      if (i + 1 >= argc) {
        fprintf(stderr, "gradkern tokenize: --tokenizer needs a value (a tokenizer.json, or a directory with encoder.json and vocab.bpe)\n");
        return 2;
      }
      path = argv[++i];
    } else {
      fprintf(stderr, "gradkern tokenize: unknown option '%s' (see gradkern tokenize --help)\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "gradkern tokenize: --tokenizer PATH is required (see gradkern tokenize --help)\n");
    return 2;
  }
  gk_bpe *t;
  if (gk_bpe_load(path, &t)) {
    fprintf(stderr, "gradkern tokenize: %s\n", gk_last_error());
    return 1;
  }
  int rc = do_decode ? decode(t, stats) : encode(t, stats);
  gk_bpe_free(t);
  return rc;
}
