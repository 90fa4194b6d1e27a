// Progress of a training run and its closing summary.
//
// On a terminal: one line redrawn in place (carriage return, at most 10 times
// a second and always at the last step):
//     step  120/2000 [==>                 ]   6%  loss 2.3456  45.6k tok/s  ETA 1m23s
// Otherwise (a file, a pipe, CI): a plain line every `every` steps and at the
// last step:
//     step 100/2000  loss 2.3456  lr 3.00e-03  45.6k tok/s  elapsed 12s  ETA 3m40s
// Quiet: nothing but notes and the summary. A run may add figures of its
// own after the loss (gk_progress_set_extra), e.g. "scale 65536 skipped 2"
// for f16 training's loss scaling.
// tokens/s = tokens_per_step x (steps done since init) / (seconds since init);
// ETA = (total - step) x (seconds since init) / (steps done since init).
#ifndef GK_NN_PROGRESS_H
#define GK_NN_PROGRESS_H

#include "nn.h"

#include <stdint.h>
#include <stdio.h>

typedef enum gk_progress_mode {
  GK_PROGRESS_AUTO = 0,   // BAR when `out` is a terminal, else LINES
  GK_PROGRESS_BAR = 1,
  GK_PROGRESS_LINES = 2,
  GK_PROGRESS_QUIET = 3,
} gk_progress_mode;

typedef struct gk_progress {
  FILE *out;
  gk_progress_mode mode;    // resolved: never AUTO
  int64_t total;            // steps of the whole run
  int64_t start_step;       // steps already done when this run began (resume)
  int64_t tokens_per_step;
  int64_t every;            // LINES: a line every `every` steps
  double t0;                // gk_now() at init
  double last_draw;         // BAR: time of the last redraw (-1: none yet)
  int bar_shown;            // BAR: the bar is on the current line
  int64_t step;             // the last update
  double loss, lr, now;
  char extra[64];           // gk_progress_set_extra's text ("": none)
} gk_progress;

// Seconds on a monotonic clock.
double gk_now(void);
// "0.4s", "12s", "1m23s", "2h03m" into buf.
const char *gk_format_duration(double seconds, char *buf, size_t size);

// Start showing progress on `out` for steps start_step + 1 .. total.
gk_status gk_progress_init(gk_progress *p, FILE *out, gk_progress_mode mode, int64_t total, int64_t start_step,
                           int64_t tokens_per_step, int64_t every);
// Step `step` (1-based: the number of steps done) finished with this training
// loss and learning rate (lr NAN: not shown).
void gk_progress_update(gk_progress *p, int64_t step, double loss, double lr);
// The same at time `now` (seconds, as gk_now()).
void gk_progress_update_at(gk_progress *p, int64_t step, double loss, double lr, double now);
// Figures shown after the loss from the next update on (printf-style;
// truncated to 63 characters).
void gk_progress_set_extra(gk_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A line of its own (an evaluation, a saved checkpoint): on a terminal the
// bar is cleared, the line printed and the bar drawn again below it.
void gk_progress_note(gk_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// What the summary states; NAN (or NULL) leaves a figure out.
typedef struct gk_run_summary {
  double train_loss;        // the last training loss
  double eval_loss;         // held-out loss (nats per token)
  double eval_accuracy;     // held-out token accuracy in [0, 1] (synthetic tasks)
  double bits_per_byte;     // held-out bits per byte (text)
  const char *checkpoint;   // the last checkpoint written
} gk_run_summary;

// The closing lines (also when quiet), e.g.
//     done: 2000 steps in 2m03s, 45.6k tokens/s
//     final train loss 0.0123, eval loss 0.0100, eval accuracy 97.3%
//     checkpoint: run.safetensors
void gk_progress_summary(gk_progress *p, const gk_run_summary *s);
// The summary's figures and checkpoint lines alone (no "done:" line), e.g.
// for a run that was already finished; with every figure NAN: "final
// figures: none recorded".
void gk_progress_figures(FILE *out, const gk_run_summary *s);
// The same at time `now`.
void gk_progress_summary_at(gk_progress *p, const gk_run_summary *s, double now);

#endif
