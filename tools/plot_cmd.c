// `gradkern plot`: line plots of tables of numbers as SVG (src/nn/plot.h),
// for scripts that gather results from several runs (make paper: accuracy
// against test length, one line per model).
//
// Each series is LABEL=FILE, FILE holding one point per line: two numbers,
// x and y, separated by blanks; lines starting with '#' and empty lines are
// skipped. A y of "nan" leaves a gap (a length a model was not run at).
#include "plot_cmd.h"

#include "nn/fileio.h"
#include "nn/plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SERIES = 16 };

static const char *usage =
    "usage: gradkern plot --out FILE.svg [--title T] [--xlabel X] [--ylabel Y] LABEL=FILE ...\n"
    "\n"
    "Draws one line per LABEL=FILE (at most 16), FILE holding a point per line:\n"
    "x and y separated by blanks ('#' lines and empty lines skipped; y 'nan' leaves\n"
    "a gap), with a dot at each point, into an SVG file.\n";

typedef struct points {
  double *x, *y;
  size_t n;
} points;

// FILE's points; every line must be two numbers.
static int read_points(const char *path, points *p) {
  unsigned char *text;
  size_t size;
  if (gk_nn_read_file(path, "series file", &text, &size) != GK_SUCCESS) {
    fprintf(stderr, "gradkern plot: %s\n", gk_last_error());
    return 0;
  }
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
  p->x = malloc(sizeof(double) * lines);
  p->y = malloc(sizeof(double) * lines);
  char *s = (char *)text;
  int ok = p->x && p->y;
  for (size_t line = 1; ok && s && *s; line++) {
    char *end = strchr(s, '\n');
    if (end) *end = 0;
    char *x_end, *y_end;
    if (*s && *s != '#') {
      p->x[p->n] = strtod(s, &x_end);
      p->y[p->n] = strtod(x_end, &y_end);
      while (*y_end == ' ' || *y_end == '\t' || *y_end == '\r') y_end++;
      if (x_end == s || y_end == x_end || *y_end) {
        fprintf(stderr, "gradkern plot: %s line %zu: '%.60s' is not two numbers (x y)\n", path, line, s);
        ok = 0;
      }
      p->n++;
    }
    s = end ? end + 1 : NULL;
  }
  free(text);
  return ok;
}

int gk_cmd_plot(int argc, char **argv) {
  const char *out = NULL, *title = NULL, *xlabel = NULL, *ylabel = NULL;
  const char *labels[MAX_SERIES], *files[MAX_SERIES];
  int n = 0;
  for (int i = 0; i < argc; i++) {
    const char **opt = !strcmp(argv[i], "--out") ? &out : !strcmp(argv[i], "--title") ? &title
                       : !strcmp(argv[i], "--xlabel") ? &xlabel : !strcmp(argv[i], "--ylabel") ? &ylabel : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (opt && i + 1 < argc) {
      *opt = argv[++i];
    } else if (opt || !strncmp(argv[i], "--", 2)) {
      fprintf(stderr, "gradkern plot: %s '%s'\n%s", opt ? "no value after" : "unknown option", argv[i], usage);
      return 2;
    } else if (!strchr(argv[i], '=') || n == MAX_SERIES) {
      fprintf(stderr, "gradkern plot: '%s': %s\n", argv[i],
              n == MAX_SERIES ? "more than 16 series" : "a series is LABEL=FILE");
      return 2;
    } else {
      labels[n] = argv[i];
      files[n++] = strchr(argv[i], '=') + 1;
    }
  }
  if (!out || !n) {
    fprintf(stderr, "gradkern plot: %s\n%s", !out ? "--out FILE.svg is needed" : "no series given", usage);
    return 2;
  }
  points pts[MAX_SERIES];
  gk_plot_series series[MAX_SERIES];
  char names[MAX_SERIES][128];
  memset(pts, 0, sizeof pts);
  int ok = 1;
  for (int k = 0; k < n && ok; k++) {
    snprintf(names[k], sizeof names[k], "%.*s", (int)(files[k] - 1 - labels[k]), labels[k]);
    ok = read_points(files[k], &pts[k]);
    series[k] = (gk_plot_series){names[k], pts[k].x, pts[k].y, pts[k].n, 1};
  }
  gk_plot plot = {title, xlabel, ylabel, 0, 800, 480};
  if (ok && gk_plot_write(out, &plot, series, (size_t)n) != GK_SUCCESS) {
    fprintf(stderr, "gradkern plot: %s\n", gk_last_error());
    ok = 0;
  }
  for (int k = 0; k < n; k++) {
    free(pts[k].x);
    free(pts[k].y);
  }
  return ok ? 0 : 1;
}
