// Progress output with a fake clock: plain lines every N steps when not on a
// terminal, the redrawn bar (throttled) when forced, notes between them, a
// run's own figures after the loss, quiet mode, the summary, and durations.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "nn/progress.h"

// Everything written to f so far (the caller frees it).
static char *contents(FILE *f) {
  long n = ftell(f);
  char *s = calloc((size_t)n + 1, 1);
  rewind(f);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = 0;
  return s;
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static bool has(const char *s, const char *needle) {
  if (strstr(s, needle)) return true;
  fprintf(stderr, "  output:\n%s\n  expected it to contain: %s\n", s, needle);
  return false;
}

static void test_durations(void) {
  char b[32];
  check(!strcmp(gk_format_duration(0.42, b, sizeof b), "0.4s"), "0.42 s: %s", b);
  check(!strcmp(gk_format_duration(12.7, b, sizeof b), "12s"), "12.7 s: %s", b);
  check(!strcmp(gk_format_duration(83, b, sizeof b), "1m23s"), "83 s: %s", b);
  check(!strcmp(gk_format_duration(7380, b, sizeof b), "2h03m"), "7380 s: %s", b);
  check(!strcmp(gk_format_duration(NAN, b, sizeof b), "?") && !strcmp(gk_format_duration(-1, b, sizeof b), "?"),
        "NaN and negative: ?");
  check(gk_now() > 0, "the clock runs");
}

static void test_lines(void) {
  FILE *f = tmpfile();
  gk_progress p;
  check(gk_progress_init(&p, f, GK_PROGRESS_AUTO, 10, 0, 1000, 5) == GK_SUCCESS, "init");
  check(p.mode == GK_PROGRESS_LINES, "a file is not a terminal: plain lines");
  for (int s = 1; s <= 10; s++) gk_progress_update_at(&p, s, 3.0 - 0.1 * s, 1e-3, p.t0 + 0.5 * s);
  gk_progress_note(&p, "eval loss %.4f, eval accuracy %.1f%%", 0.5, 97.25);
  gk_run_summary sum = {0.12345, 0.2, 0.973, NAN, "run.safetensors"};
  gk_progress_summary_at(&p, &sum, p.t0 + 5);
  char *s = contents(f);
  check(count(s, "\n") == 6, "2 progress lines, a note and 3 summary lines");
  check(has(s, "step 5/10  loss 2.5000  lr 1.00e-03  2.0k tok/s  elapsed 2.5s  ETA 2.5s\n"), "line at step 5");
  check(has(s, "step 10/10  loss 2.0000  lr 1.00e-03  2.0k tok/s  elapsed 5.0s  ETA 0.0s\n"), "line at step 10");
  check(has(s, "eval loss 0.5000, eval accuracy 97.2%\n"), "the note");
  check(has(s, "done: 10 steps in 5.0s, 2.0k tokens/s\n"), "summary: steps, time, tokens/s");
  check(has(s, "final train loss 0.1235, eval loss 0.2000, eval accuracy 97.3%\n"), "summary: losses, accuracy");
  check(has(s, "checkpoint: run.safetensors\n"), "summary: checkpoint");
  check(!strchr(s, '\r') && !strchr(s, '\033'), "no terminal control characters in a file");
  free(s);
  fclose(f);

  // Resumed at step 5: rates count the steps of this run only; no lr shown.
  f = tmpfile();
  gk_progress_init(&p, f, GK_PROGRESS_LINES, 10, 5, 100, 1);
  gk_progress_update_at(&p, 6, 1.0, NAN, p.t0 + 1);
  gk_run_summary text = {1.5, 1.2, NAN, 1.731, NULL};
  gk_progress_summary_at(&p, &text, p.t0 + 1);
  s = contents(f);
  check(has(s, "step 6/10  loss 1.0000  100 tok/s  elapsed 1.0s  ETA 4.0s\n"), "resumed line, no lr");
  check(has(s, "done: 1 step in 1.0s, 100 tokens/s\nfinal train loss 1.5000, eval loss 1.2000, eval bits per byte "
               "1.731\n"),
        "text summary: 1 step (not \"1 steps\"), bits per byte, no accuracy, no checkpoint");
  free(s);
  fclose(f);

  // A run's own figures after the loss (f16 training's loss scale).
  f = tmpfile();
  gk_progress_init(&p, f, GK_PROGRESS_LINES, 10, 0, 100, 1);
  gk_progress_set_extra(&p, "scale %g skipped %d", 65536.0, 2);
  gk_progress_update_at(&p, 1, 1.0, 1e-3, p.t0 + 1);
  s = contents(f);
  check(has(s, "step 1/10  loss 1.0000  lr 1.00e-03  scale 65536 skipped 2  100 tok/s"), "extra figures after the lr");
  free(s);
  fclose(f);

  // The figures alone (a finished run's, from its checkpoint): what is known.
  f = tmpfile();
  gk_run_summary some = {NAN, 0.5, 0.25, NAN, "ck.safetensors"};
  gk_progress_figures(f, &some);
  gk_run_summary none = {NAN, NAN, NAN, NAN, NULL};
  gk_progress_figures(f, &none);
  s = contents(f);
  check(!strcmp(s, "final eval loss 0.5000, eval accuracy 25.0%\ncheckpoint: ck.safetensors\nfinal figures: none "
                   "recorded\n"),
        "figures: only the known ones, no \"nan\": got \"%s\"", s);
  free(s);
  fclose(f);
}

static void test_bar(void) {
  FILE *f = tmpfile();
  gk_progress p;
  gk_progress_init(&p, f, GK_PROGRESS_BAR, 100, 0, 64, 10);
  // 100 steps 0.01 s apart: redrawn at most every 0.1 s, and at the end.
  for (int s = 1; s <= 100; s++) {
    gk_progress_update_at(&p, s, 1.0, 1e-3, p.t0 + 0.01 * s);
    if (s == 50) gk_progress_note(&p, "eval at step %d", s);
  }
  char *s = contents(f);
  int draws = count(s, "\rstep ");
  check(draws >= 10 && draws <= 14, "bar redrawn about 10 times (+ after the note), got %d", draws);
  check(has(s, "\rstep 100/100 [====================] 100%  loss 1.0000  6.4k tok/s  ETA 0.0s\033[K\n"),
        "the final bar, then a newline");
  check(has(s, "\r\033[Keval at step 50\n\rstep  50/100 [==========>         ]  50%"),
        "the note clears the bar, then the bar is drawn again");
  free(s);
  fclose(f);

  f = tmpfile();
  gk_progress_init(&p, f, GK_PROGRESS_BAR, 10, 0, 1, 1);
  gk_progress_update_at(&p, 3, 2.0, 1e-3, p.t0 + 1);
  gk_run_summary sum = {2.0, NAN, NAN, NAN, NULL};
  gk_progress_summary_at(&p, &sum, p.t0 + 1);
  s = contents(f);
  check(has(s, "\033[K\r\033[Kdone: 3 steps"), "the summary clears an unfinished bar first");
  check(has(s, "final train loss 2.0000\n"), "summary with only the training loss");
  free(s);
  fclose(f);
}

static void test_quiet_and_errors(void) {
  FILE *f = tmpfile();
  gk_progress p;
  gk_progress_init(&p, f, GK_PROGRESS_QUIET, 10, 0, 1, 1);
  for (int s = 1; s <= 10; s++) gk_progress_update_at(&p, s, 1, 1, p.t0 + s);
  char *s = contents(f);
  check(s[0] == 0, "quiet: no progress output");
  free(s);
  gk_run_summary sum = {0.5, NAN, 0.5, NAN, NULL};
  gk_progress_summary_at(&p, &sum, p.t0 + 10);
  s = contents(f);
  check(has(s, "done: 10 steps") && has(s, "eval accuracy 50.0%"), "quiet: the summary still appears");
  free(s);
  fclose(f);

  check(gk_progress_init(&p, stdout, GK_PROGRESS_LINES, 0, 0, 1, 1) == GK_ERR_INVALID_VALUE, "total 0");
  check(gk_progress_init(&p, stdout, GK_PROGRESS_LINES, 10, 11, 1, 1) == GK_ERR_INVALID_VALUE, "start > total");
  check(gk_progress_init(&p, stdout, GK_PROGRESS_LINES, 10, 0, 1, 0) == GK_ERR_INVALID_VALUE, "every 0");
  check(gk_progress_init(&p, stdout, GK_PROGRESS_LINES, 10, 0, -1, 1) == GK_ERR_INVALID_VALUE, "tokens < 0");
  check(gk_progress_init(&p, stdout, (gk_progress_mode)9, 10, 0, 1, 1) == GK_ERR_INVALID_VALUE, "mode 9");
  check(gk_progress_init(&p, NULL, GK_PROGRESS_LINES, 10, 0, 1, 1) == GK_ERR_NULL_POINTER, "NULL out");
  gk_progress_update(NULL, 1, 1, 1);
  gk_progress_note(NULL, "x");
  gk_progress_summary(NULL, &sum);
  check(true, "NULL progress is ignored");
}

int main(void) {
  test_durations();
  test_lines();
  test_bar();
  test_quiet_and_errors();
  return finish("test_progress");
}
