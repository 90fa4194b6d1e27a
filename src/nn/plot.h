// Line plots of training curves as SVG: axes with "nice" ticks (steps of 1,
// 2 or 5 times a power of ten; decades on a logarithmic axis), tick labels,
// axis labels, a title, a light grid and a legend. Written atomically, so a
// plot redrawn during training is never seen half-written.
//
// Only SVG is written: a file name ending in ".svg" (any case) is accepted,
// ".png" is refused with a message saying so, anything else too.
#ifndef GK_NN_PLOT_H
#define GK_NN_PLOT_H

#include "fileio.h"
#include "nn.h"

#include <stddef.h>

// One curve: points (x[i], y[i]). Points with a non-finite coordinate, one
// beyond +-1e300, or y <= 0 on a logarithmic axis are skipped and break the
// line there.
typedef struct gk_plot_series {
  const char *label;     // legend text (UTF-8; NULL: "")
  const double *x, *y;   // n values each
  size_t n;
  int markers;           // 1: also a dot at each point (e.g. evaluations)
} gk_plot_series;

typedef struct gk_plot {
  const char *title;     // NULL: none
  const char *xlabel;    // NULL: none
  const char *ylabel;    // NULL: none
  int log_y;             // 1: logarithmic y axis
  int width, height;     // pixels; 0: 800 x 480; each in [200, 8000]
} gk_plot;

// Whether `path` names a file gk_plot_write can write (checks the name only).
gk_status gk_plot_check_path(const char *path);
// Append the SVG document to *out.
gk_status gk_plot_svg(const gk_plot *plot, const gk_plot_series *series, size_t nseries, gk_nn_buf *out);
// Write the plot to `path` (see gk_plot_check_path), atomically.
gk_status gk_plot_write(const char *path, const gk_plot *plot, const gk_plot_series *series, size_t nseries);

#endif
