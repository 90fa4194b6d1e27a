// The random number generator and the training data: known values of the
// generator, determinism for a seed, the structure of every selective
// copying and induction-heads sequence, the text split and windows, and the
// errors for bad files and sizes; batches made in parts (as the ranks of a
// data-parallel run make them) equal to the whole.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "nn/data.h"
#include "nn/rng.h"

#include <unistd.h>

static bool msg_has(const char *needle) {
  if (strstr(gk_last_error(), needle)) return true;
  fprintf(stderr, "  message: %s\n  expected it to contain: %s\n", gk_last_error(), needle);
  return false;
}

static void test_rng(void) {
  // Pinned values: xoshiro256** after splitmix64 seeding (computed
  // independently), so the data of a seed never changes across machines.
  gk_rng r;
  gk_rng_seed(&r, 0);
  check(gk_rng_next(&r) == 0x99ec5f36cb75f2b4ull && gk_rng_next(&r) == 0xbf6e1f784956452aull &&
            gk_rng_next(&r) == 0x1a5f849d4933e6e0ull,
        "seed 0: known xoshiro256** outputs");
  gk_rng_seed(&r, 1);
  check(gk_rng_next(&r) == 0xb3f2af6d0fc710c5ull && gk_rng_next(&r) == 0x853b559647364ceaull &&
            gk_rng_next(&r) == 0x92f89756082a4514ull,
        "seed 1: known xoshiro256** outputs");

  gk_rng a, b;
  gk_rng_seed_stream(&a, 7, 0, 5);
  gk_rng_seed_stream(&b, 7, 0, 5);
  bool same = true;
  for (int i = 0; i < 100; i++) same &= gk_rng_next(&a) == gk_rng_next(&b);
  check(same, "the same stream twice gives the same numbers");
  gk_rng_seed_stream(&a, 7, 0, 5);
  gk_rng_seed_stream(&b, 7, 0, 6);
  check(gk_rng_next(&a) != gk_rng_next(&b), "neighbouring indices differ");
  gk_rng_seed_stream(&a, 7, 0, 5);
  gk_rng_seed_stream(&b, 7, 1, 5);
  check(gk_rng_next(&a) != gk_rng_next(&b), "streams differ");
  gk_rng_seed_stream(&a, 7, 0, 5);
  gk_rng_seed_stream(&b, 8, 0, 5);
  check(gk_rng_next(&a) != gk_rng_next(&b), "seeds differ");

  // gk_rng_below: in range and about uniform (each count within 5% of n/10).
  gk_rng_seed(&r, 42);
  int counts[10] = {0}, n = 200000;
  bool in_range = true;
  for (int i = 0; i < n; i++) {
    uint64_t v = gk_rng_below(&r, 10);
    in_range &= v < 10;
    if (v < 10) counts[v]++;
  }
  check(in_range, "below(10) < 10");
  for (int k = 0; k < 10; k++) check(fabs(counts[k] - n / 10.0) < 0.05 * n / 10, "below(10): %d times %d", k, counts[k]);
  check(gk_rng_below(&r, 1) == 0 && gk_rng_below(&r, 0) == 0, "below(1) and below(0) are 0");
  uint64_t big = (1ull << 63) + 12345;
  bool big_ok = true;
  for (int i = 0; i < 1000; i++) big_ok &= gk_rng_below(&r, big) < big;
  check(big_ok, "below(2^63 + 12345) in range");

  double sum = 0, sum2 = 0, umin = 1, umax = 0;
  for (int i = 0; i < n; i++) {
    double u = gk_rng_uniform(&r);
    umin = fmin(umin, u), umax = fmax(umax, u);
    double z = gk_rng_normal(&r);
    sum += z, sum2 += z * z;
  }
  check(umin >= 0 && umax < 1, "uniform in [0, 1): [%g, %g]", umin, umax);
  check(fabs(sum / n) < 0.01 && fabs(sum2 / n - 1) < 0.02, "normal: mean %g, variance %g", sum / n, sum2 / n);
}

static int32_t *in, *tg, *in2, *tg2;

// Batch `index` of 6 rows made in parts (1 + 2 + 3 rows, and 2 + 2 + 2)
// is the whole batch, row for row.
static bool parts_match(const gk_task *t, gk_split split, int64_t index, int T) {
  enum { B = 6 };
  static const int cuts[2][4] = {{0, 1, 3, 6}, {0, 2, 4, 6}};
  bool ok = gk_task_batch(t, split, 11, index, B, T, in, tg) == GK_SUCCESS;
  for (int c = 0; c < 2; c++)
    for (int k = 0; k < 3; k++) {
      int first = cuts[c][k], rows = cuts[c][k + 1] - first;
      ok &= gk_task_rows(t, split, 11, index, B, first, rows, T, in2, tg2) == GK_SUCCESS;
      ok &= !memcmp(in + first * T, in2, sizeof *in * rows * T) && !memcmp(tg + first * T, tg2, sizeof *tg * rows * T);
    }
  return ok;
}

static void test_copy(void) {
  gk_task t;
  check(gk_task_init_copy(&t, 0, 8) != GK_SUCCESS && msg_has("n_data is 0"), "copy: n_data 0");
  check(gk_task_init_copy(&t, 4, 0) != GK_SUCCESS && msg_has("n_values is 0"), "copy: n_values 0");
  check(gk_task_init_copy(&t, GK_COPY_DEFAULT_DATA, GK_COPY_DEFAULT_VALUES) == GK_SUCCESS, "copy: init");
  check(t.vocab_size == 16 && t.noise_token == 0 && t.marker_token == 15, "copy: vocabulary of 16, marker 15");
  const int B = 8, T = 64, K = t.n_data, R = T - K;

  gk_status st = gk_task_batch(&t, GK_SPLIT_TRAIN, 1, 0, B, 2 * K - 1, in, tg);
  check(st != GK_SUCCESS && msg_has("sequence length 31 is too short for 16 data tokens"), "copy: T < 2K");
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 1, 0, B, 2 * K, in, tg) == GK_SUCCESS, "copy: T = 2K works");
  bool full = true;
  for (int b = 0; b < B; b++)
    for (int i = 0; i < K; i++) full &= in[b * 2 * K + i] != 0 && tg[b * 2 * K + K + i] == in[b * 2 * K + i];
  check(full, "copy: T = 2K: every region position holds data, copied in order");

  // Structure of many sequences.
  int position_seen[64] = {0}, value_seen[16] = {0};
  bool ok = true;
  for (int64_t idx = 0; idx < 50; idx++) {
    check(gk_task_batch(&t, GK_SPLIT_TRAIN, 3, idx, B, T, in, tg) == GK_SUCCESS, "copy: batch %lld", (long long)idx);
    for (int b = 0; b < B; b++) {
      const int32_t *x = in + b * T, *y = tg + b * T;
      int data[64], nd = 0;
      for (int i = 0; i < R; i++) {
        ok &= y[i] == GK_IGNORE_INDEX;
        if (x[i] != t.noise_token) {
          ok &= x[i] >= 1 && x[i] <= t.n_values;
          data[nd < 63 ? nd : 63] = x[i];
          nd++;
          position_seen[i]++;
          value_seen[x[i] & 15]++;
        }
      }
      ok &= nd == K;
      for (int j = 0; j < K && nd == K; j++) ok &= x[R + j] == t.marker_token && y[R + j] == data[j];
    }
  }
  check(ok, "copy: K data tokens in the region, K markers, targets = the data tokens in order, the rest ignored");
  bool all_pos = true, all_val = true;
  for (int i = 0; i < R; i++) all_pos &= position_seen[i] > 0;
  for (int v = 1; v <= t.n_values; v++) all_val &= value_seen[v] > 0;
  check(all_pos && all_val, "copy: every region position and every data value occurs");

  // Determinism: the same (seed, split, index) gives the same batch; others differ.
  gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 7, B, T, in, tg);
  gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 7, B, T, in2, tg2);
  check(!memcmp(in, in2, sizeof *in * B * T) && !memcmp(tg, tg2, sizeof *tg * B * T), "copy: deterministic");
  gk_task_batch(&t, GK_SPLIT_EVAL, 3, 7, B, T, in2, tg2);
  check(memcmp(in, in2, sizeof *in * B * T) != 0, "copy: the eval split differs from training");
  gk_task_batch(&t, GK_SPLIT_TRAIN, 4, 7, B, T, in2, tg2);
  check(memcmp(in, in2, sizeof *in * B * T) != 0, "copy: another seed differs");
  gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 8, B, T, in2, tg2);
  check(memcmp(in, in2, sizeof *in * B * T) != 0, "copy: another step differs");
  // A batch's first rows do not depend on the batch size.
  gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 7, 2, T, in2, tg2);
  check(!memcmp(in, in2, sizeof *in * 2 * T), "copy: rows independent of the batch size");

  check(parts_match(&t, GK_SPLIT_TRAIN, 5, T) && parts_match(&t, GK_SPLIT_EVAL, 0, T),
        "copy: a batch made in parts is the whole batch");
  check(gk_task_rows(&t, GK_SPLIT_TRAIN, 3, 0, 6, 4, 3, T, in, tg) != GK_SUCCESS && msg_has("rows [4, 4 + 3)") &&
            msg_has("batch of 6"),
        "rows past the batch");
  check(gk_task_rows(&t, GK_SPLIT_TRAIN, 3, 0, 6, -1, 1, T, in, tg) != GK_SUCCESS && msg_has("rows [-1"),
        "a negative first row");
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 0, 0, T, in, tg) != GK_SUCCESS && msg_has("batch 0"), "batch 0");
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 3, -1, B, T, in, tg) != GK_SUCCESS && msg_has("index -1"), "index -1");
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 0, B, 0, in, tg) != GK_SUCCESS && msg_has("sequence length 0"), "T 0");
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 3, 0, B, T, NULL, tg) == GK_ERR_NULL_POINTER && msg_has("inputs"),
        "NULL inputs");
  check(gk_task_batch(&t, (gk_split)5, 3, 0, B, T, in, tg) != GK_SUCCESS && msg_has("split 5"), "bad split");
  gk_task zero;
  memset(&zero, 0, sizeof zero);
  check(gk_task_batch(&zero, GK_SPLIT_TRAIN, 3, 0, B, T, in, tg) != GK_SUCCESS && msg_has("not initialised"),
        "uninitialised task");
  zero.kind = (gk_task_kind)9;
  check(gk_task_batch(&zero, GK_SPLIT_TRAIN, 3, 0, B, T, in, tg) != GK_SUCCESS, "task kind 9");
  check(gk_task_eval_windows(&t, T) == -1, "copy: unlimited eval batches");
  gk_task_free(&t);
}

static void test_induction(void) {
  gk_task t;
  check(gk_task_init_induction(&t, 1) != GK_SUCCESS && msg_has("n_values is 1"), "induction: n_values 1");
  check(gk_task_init_induction(&t, GK_INDUCTION_DEFAULT_VALUES) == GK_SUCCESS, "induction: init");
  check(t.vocab_size == 16 && t.trigger_token == 15, "induction: vocabulary of 16, trigger 15");
  const int B = 8;
  check(gk_task_batch(&t, GK_SPLIT_TRAIN, 1, 0, B, 2, in, tg) != GK_SUCCESS && msg_has("at least 3"),
        "induction: T 2");
  // Trained at 64, evaluated at 3 (the shortest) and at 1024 (longer).
  const int lens[3] = {64, 3, 1024};
  for (int li = 0; li < 3; li++) {
    int T = lens[li];
    bool ok = true;
    int first_seen[1024] = {0};
    for (int64_t idx = 0; idx < 40; idx++) {
      gk_split split = li == 0 ? GK_SPLIT_TRAIN : GK_SPLIT_EVAL;
      check(gk_task_batch(&t, split, 9, idx, B, T, in, tg) == GK_SUCCESS, "induction T %d: batch", T);
      for (int b = 0; b < B; b++) {
        const int32_t *x = in + b * T, *y = tg + b * T;
        int triggers = 0, p = -1;
        for (int i = 0; i < T; i++) {
          ok &= x[i] >= 0 && x[i] <= t.trigger_token;
          if (x[i] == t.trigger_token) {
            triggers++;
            if (i < T - 1 && p < 0) p = i;
          }
          if (i < T - 1) ok &= y[i] == GK_IGNORE_INDEX;
        }
        ok &= triggers == 2 && p >= 0 && p <= T - 3 && x[T - 1] == t.trigger_token && y[T - 1] == x[p + 1];
        if (p >= 0) first_seen[p]++;
      }
    }
    check(ok, "induction T %d: trigger twice, the target is the token after the first", T);
    if (T <= 64) {
      bool all = true;
      for (int i = 0; i <= T - 3; i++) all &= first_seen[i] > 0;
      check(all, "induction T %d: the first trigger occurs at every position", T);
    }
  }
  gk_task_batch(&t, GK_SPLIT_TRAIN, 9, 3, B, 64, in, tg);
  gk_task_batch(&t, GK_SPLIT_TRAIN, 9, 3, B, 64, in2, tg2);
  check(!memcmp(in, in2, sizeof *in * B * 64) && !memcmp(tg, tg2, sizeof *tg * B * 64), "induction: deterministic");
  check(parts_match(&t, GK_SPLIT_TRAIN, 2, 64) && parts_match(&t, GK_SPLIT_EVAL, 1, 256),
        "induction: a batch made in parts is the whole batch");
  gk_task_free(&t);
}

static void write_file(const char *path, const unsigned char *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  if (n) fwrite(bytes, 1, n, f);
  fclose(f);
}

static void test_text(void) {
  char dir[] = "/tmp/gk_test_data_XXXXXX";
  if (!mkdtemp(dir)) return;
  char path[128], empty[128], tiny[128], missing[128];
  snprintf(path, sizeof path, "%s/text.txt", dir);
  snprintf(empty, sizeof empty, "%s/empty.txt", dir);
  snprintf(tiny, sizeof tiny, "%s/tiny.txt", dir);
  snprintf(missing, sizeof missing, "%s/missing.txt", dir);
  unsigned char text[1000];
  for (int i = 0; i < 1000; i++) text[i] = (unsigned char)(rng_next() & 0xff);
  write_file(path, text, 1000);
  write_file(empty, text, 0);
  write_file(tiny, text, 33);

  gk_task t;
  check(gk_task_init_text(&t, missing, 16) != GK_SUCCESS && msg_has("data file") && msg_has("missing.txt") &&
            msg_has("cannot open"),
        "text: missing file");
  check(gk_task_init_text(&t, empty, 16) != GK_SUCCESS && msg_has("empty.txt' is empty"), "text: empty file");
  check(gk_task_init_text(&t, tiny, 16) != GK_SUCCESS &&
            msg_has("has 33 bytes, too short for sequence length 16: it needs at least 34"),
        "text: too short");
  check(gk_task_init_text(&t, dir, 16) != GK_SUCCESS && msg_has("is a directory"), "text: a directory");
  check(gk_task_init_text(&t, NULL, 16) != GK_SUCCESS && msg_has("no data file"), "text: no file");
  check(gk_task_init_text(&t, path, 0) != GK_SUCCESS && msg_has("sequence length 0"), "text: T 0");
  write_file(tiny, text, 34);
  check(gk_task_init_text(&t, tiny, 16) == GK_SUCCESS && t.train_len == 17, "text: 34 bytes is enough for T 16");
  gk_task_free(&t);

  const int T = 16, B = 4;
  check(gk_task_init_text(&t, path, T) == GK_SUCCESS, "text: init: %s", gk_last_error());
  check(t.vocab_size == 256 && t.text_len == 1000 && t.train_len == 900, "text: 900 bytes train, 100 held out");
  bool ok = true;
  for (int64_t idx = 0; idx < 50; idx++) {
    gk_task_batch(&t, GK_SPLIT_TRAIN, 5, idx, B, T, in, tg);
    for (int b = 0; b < B; b++) {
      const int32_t *x = in + b * T, *y = tg + b * T;
      // Find the window: x[0..T) then y[T-1] must be text[s .. s+T].
      int found = -1;
      for (int s = 0; s + T < 900 && found < 0; s++) {
        bool m = y[T - 1] == text[s + T];
        for (int i = 0; i < T && m; i++) m = x[i] == text[s + i] && y[i] == text[s + i + 1];
        if (m) found = s;
      }
      ok &= found >= 0;
    }
  }
  check(ok, "text: training rows are windows of the training part, targets shifted by one");
  int64_t W = gk_task_eval_windows(&t, T);
  check(W == 6, "text: (100 - 1) / 16 = 6 eval windows, got %lld", (long long)W);
  bool eval_ok = true;
  int counted = 0;
  for (int64_t idx = 0; idx < 3; idx++) {
    check(gk_task_batch(&t, GK_SPLIT_EVAL, 5, idx, B, T, in, tg) == GK_SUCCESS, "text: eval batch %lld",
          (long long)idx);
    for (int b = 0; b < B; b++) {
      int64_t w = idx * B + b;
      for (int i = 0; i < T; i++) {
        if (w < W) {
          eval_ok &= in[b * T + i] == text[900 + w * T + i] && tg[b * T + i] == text[900 + w * T + i + 1];
          counted++;
        } else {
          eval_ok &= in[b * T + i] == 0 && tg[b * T + i] == GK_IGNORE_INDEX;
        }
      }
    }
  }
  check(eval_ok && counted == 6 * T, "text: eval windows consecutive from the split, then ignored rows");
  gk_task_batch(&t, GK_SPLIT_EVAL, 99, 0, B, T, in2, tg2);
  gk_task_batch(&t, GK_SPLIT_EVAL, 5, 0, B, T, in, tg);
  check(!memcmp(in, in2, sizeof *in * B * T), "text: evaluation does not depend on the seed");
  check(gk_task_batch(&t, GK_SPLIT_EVAL, 5, INT64_MAX, B, T, in, tg) == GK_SUCCESS && tg[0] == GK_IGNORE_INDEX,
        "text: a huge eval index is past the end, not an overflow");
  check(gk_task_check_seq_len(&t, GK_SPLIT_EVAL, 100) != GK_SUCCESS &&
            msg_has("windows of 101 bytes, but the held-out part of the data has 100"),
        "text: eval T too long");
  check(gk_task_check_seq_len(&t, GK_SPLIT_TRAIN, 899) == GK_SUCCESS &&
            gk_task_check_seq_len(&t, GK_SPLIT_TRAIN, 900) != GK_SUCCESS,
        "text: the training part fits T = 899, not 900");
  check(gk_task_eval_windows(&t, 100) == 0, "text: no eval window of 100");
  check(parts_match(&t, GK_SPLIT_TRAIN, 3, T) && parts_match(&t, GK_SPLIT_EVAL, 0, T),
        "text: a batch made in parts is the whole batch (training windows, held-out windows)");
  gk_task_free(&t);
  gk_task_free(&t);  // twice is harmless

  unlink(path);
  unlink(empty);
  unlink(tiny);
  rmdir(dir);
  check(strcmp(gk_task_name(GK_TASK_TEXT), "text") == 0 && strcmp(gk_task_name((gk_task_kind)7), "?") == 0,
        "task names");
}

int main(void) {
  size_t n = 8 * 1024;
  in = malloc(n * sizeof *in), tg = malloc(n * sizeof *tg), in2 = malloc(n * sizeof *in2),
  tg2 = malloc(n * sizeof *tg2);
  test_rng();
  test_copy();
  test_induction();
  test_text();
  free(in), free(tg), free(in2), free(tg2);
  return finish("test_data");
}
