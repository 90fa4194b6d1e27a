// Progress bar, progress lines and the run summary (see progress.h).
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BAR_WIDTH = 20 };

double gk_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *gk_format_duration(double s, char *buf, size_t size) {
  if (!(s >= 0) || s > 1e9) snprintf(buf, size, "?");
  else if (s < 10) snprintf(buf, size, "%.1fs", s);
  else if (s < 60) snprintf(buf, size, "%.0fs", floor(s));
  else if (s < 3600) snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
  return buf;
}

// "950", "45.6k", "1.23M" into buf.
static const char *format_rate(double r, char *buf, size_t size) {
  if (!(r >= 0) || !isfinite(r)) snprintf(buf, size, "-");
  else if (r < 1e3) snprintf(buf, size, "%.0f", r);
  else if (r < 1e6) snprintf(buf, size, "%.1fk", r / 1e3);
  else snprintf(buf, size, "%.2fM", r / 1e6);
  return buf;
}

gk_status gk_progress_init(gk_progress *p, FILE *out, gk_progress_mode mode, int64_t total, int64_t start_step,
                           int64_t tokens_per_step, int64_t every) {
  if (!p || !out) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_progress_init: %s is NULL", p ? "out" : "p");
  if (mode < GK_PROGRESS_AUTO || mode > GK_PROGRESS_QUIET)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_progress_init: mode %d is not a progress mode", (int)mode);
  if (total < 1 || start_step < 0 || start_step > total)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_progress_init: steps %lld .. %lld are not a range of a run",
                   (long long)start_step, (long long)total);
  if (tokens_per_step < 0 || every < 1)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "gk_progress_init: tokens per step %lld must be >= 0 and every %lld >= 1",
                   (long long)tokens_per_step, (long long)every);
  memset(p, 0, sizeof *p);
  p->out = out;
  if (mode == GK_PROGRESS_AUTO) mode = isatty(fileno(out)) ? GK_PROGRESS_BAR : GK_PROGRESS_LINES;
  p->mode = mode;
  p->total = total;
  p->start_step = start_step;
  p->tokens_per_step = tokens_per_step;
  p->every = every;
  p->t0 = gk_now();
  p->last_draw = -1;
  p->step = start_step;
  p->loss = p->lr = NAN;
  p->now = p->t0;
  return GK_SUCCESS;
}

// tokens/s and the ETA text at the last update.
static void rates(const gk_progress *p, char *tps, size_t ntps, char *eta, size_t neta) {
  double elapsed = p->now - p->t0;
  int64_t done = p->step - p->start_step;
  double rate = elapsed > 0 && done > 0 ? (double)done * (double)p->tokens_per_step / elapsed : NAN;
  format_rate(rate, tps, ntps);
  if (done > 0 && elapsed > 0) gk_format_duration((double)(p->total - p->step) * elapsed / (double)done, eta, neta);
  else snprintf(eta, neta, "?");
}

static void draw_bar(gk_progress *p) {
  char tps[32], eta[32];
  rates(p, tps, sizeof tps, eta, sizeof eta);
  double frac = (double)p->step / (double)p->total;
  int filled = (int)(frac * BAR_WIDTH);
  char bar[BAR_WIDTH + 1];
  for (int k = 0; k < BAR_WIDTH; k++) bar[k] = k < filled ? '=' : k == filled ? '>' : ' ';
  bar[BAR_WIDTH] = 0;
  int digits = snprintf(NULL, 0, "%lld", (long long)p->total);
  fprintf(p->out, "\rstep %*lld/%lld [%s] %3d%%  loss %.4f%s%s  %s tok/s  ETA %s\033[K", digits, (long long)p->step,
          (long long)p->total, bar, (int)(frac * 100), p->loss, *p->extra ? "  " : "", p->extra, tps, eta);
  fflush(p->out);
  p->bar_shown = 1;
  p->last_draw = p->now;
}

// Leave the bar's line: end it so that what follows starts on a fresh line.
static void clear_bar(gk_progress *p) {
  if (!p->bar_shown) return;
  fputs("\r\033[K", p->out);
  p->bar_shown = 0;
}

void gk_progress_update_at(gk_progress *p, int64_t step, double loss, double lr, double now) {
  if (!p || !p->out) return;
  p->step = step;
  p->loss = loss;
  p->lr = lr;
  p->now = now;
  if (p->mode == GK_PROGRESS_BAR) {
    if (p->last_draw < 0 || now - p->last_draw >= 0.1 || step >= p->total) draw_bar(p);
    if (step >= p->total) {
      fputc('\n', p->out);
      p->bar_shown = 0;
    }
  } else if (p->mode == GK_PROGRESS_LINES && (step % p->every == 0 || step >= p->total)) {
    char tps[32], eta[32], el[32];
    rates(p, tps, sizeof tps, eta, sizeof eta);
    fprintf(p->out, "step %lld/%lld  loss %.4f", (long long)step, (long long)p->total, loss);
    if (!isnan(lr)) fprintf(p->out, "  lr %.2e", lr);
    if (*p->extra) fprintf(p->out, "  %s", p->extra);
    fprintf(p->out, "  %s tok/s  elapsed %s  ETA %s\n", tps, gk_format_duration(now - p->t0, el, sizeof el), eta);
    fflush(p->out);
  }
}

void gk_progress_update(gk_progress *p, int64_t step, double loss, double lr) {
  gk_progress_update_at(p, step, loss, lr, gk_now());
}

void gk_progress_set_extra(gk_progress *p, const char *fmt, ...) {
  if (!p || !fmt) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->extra, sizeof p->extra, fmt, ap);
  va_end(ap);
}

void gk_progress_note(gk_progress *p, const char *fmt, ...) {
  if (!p || !p->out || !fmt) return;
  int redraw = p->bar_shown;
  clear_bar(p);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->out, fmt, ap);
  va_end(ap);
  fputc('\n', p->out);
  if (redraw) draw_bar(p);
  fflush(p->out);
}

void gk_progress_summary_at(gk_progress *p, const gk_run_summary *s, double now) {
  if (!p || !p->out || !s) return;
  clear_bar(p);
  p->now = now;
  char dur[32], tps[32], eta[32];
  rates(p, tps, sizeof tps, eta, sizeof eta);
  long long done = (long long)(p->step - p->start_step);
  fprintf(p->out, "done: %lld step%s in %s, %s tokens/s\n", done, gk_plural(done),
          gk_format_duration(now - p->t0, dur, sizeof dur), tps);
  gk_progress_figures(p->out, s);
  fflush(p->out);
}

void gk_progress_figures(FILE *out, const gk_run_summary *s) {
  if (!out || !s) return;
  int shown = 0;  // figures printed so far: the first follows "final ", the others ", "
  if (!isnan(s->train_loss)) fprintf(out, "%strain loss %.4f", shown++ ? ", " : "final ", s->train_loss);
  if (!isnan(s->eval_loss)) fprintf(out, "%seval loss %.4f", shown++ ? ", " : "final ", s->eval_loss);
  if (!isnan(s->eval_accuracy))
    fprintf(out, "%seval accuracy %.1f%%", shown++ ? ", " : "final ", 100 * s->eval_accuracy);
  if (!isnan(s->bits_per_byte))
    fprintf(out, "%seval bits per byte %.3f", shown++ ? ", " : "final ", s->bits_per_byte);
  if (!shown) fputs("final figures: none recorded", out);
  fputc('\n', out);
  if (s->checkpoint) fprintf(out, "checkpoint: %s\n", s->checkpoint);
}

void gk_progress_summary(gk_progress *p, const gk_run_summary *s) { gk_progress_summary_at(p, s, gk_now()); }
