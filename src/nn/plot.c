// SVG line plots (see plot.h).
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
enum { NPALETTE = sizeof palette / sizeof *palette, MAX_TICKS = 64 };

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcasecmp(s + n - k, suffix);
}

gk_status gk_plot_check_path(const char *path) {
  if (!path) return gk_nn_fail(GK_ERR_NULL_POINTER, "plot: the file name is NULL");
  if (has_suffix(path, ".svg") && strlen(path) > 4) return GK_SUCCESS;
  if (has_suffix(path, ".png"))
    return gk_nn_fail(GK_ERR_UNSUPPORTED, "plot file '%s': PNG is not supported; name the file *.svg", path);
  return gk_nn_fail(GK_ERR_INVALID_VALUE, "plot file '%s': the name must end in .svg", path);
}

// Text as XML character data: markup characters escaped, control characters
// and bytes that are not UTF-8 replaced by '?'.
static void put_xml_text(gk_nn_buf *b, const char *text) {
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  size_t n = strlen((const char *)s);
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k = gk_nn_utf8_seq(s + i, n - i);
    if (c == '&') gk_nn_buf_puts(b, "&amp;");
    else if (c == '<') gk_nn_buf_puts(b, "&lt;");
    else if (c == '>') gk_nn_buf_puts(b, "&gt;");
    else if (c == '"') gk_nn_buf_puts(b, "&quot;");
    else if (c == '\'') gk_nn_buf_puts(b, "&apos;");
    else if ((c < 0x20 && c != '\t') || c == 0x7f || !k) gk_nn_buf_puts(b, "?");
    else gk_nn_buf_append(b, s + i, k);
    i += k ? k : 1;
  }
}

// One axis: the drawn range [lo, hi] (in log10 units on a log axis) and its ticks.
typedef struct axis {
  double lo, hi;
  int log;
  int nticks;
  double ticks[MAX_TICKS];   // positions, in the axis' units
  double step;               // linear: tick spacing (for label precision)
} axis;

// The axis value of a data value (log10 on a log axis); NAN when not drawable
// (not finite, or so large that the axis range would overflow).
static double axis_value(const axis *a, double v) {
  if (!isfinite(v) || fabs(v) > 1e300) return NAN;
  if (a->log) return v > 0 ? log10(v) : NAN;
  return v;
}

// Ticks every 1, 2 or 5 x 10^k, about 6 of them, and the range widened to
// whole ticks. [mn, mx] is the data range (finite, mn <= mx).
static void linear_axis(axis *a, double mn, double mx) {
  if (mn == mx) {
    double pad = mn == 0 ? 1 : fabs(mn) * 0.1;
    mn -= pad, mx += pad;
  }
  double raw = (mx - mn) / 6;
  a->lo = mn, a->hi = mx, a->nticks = 0, a->step = 0;
  if (!isfinite(raw) || raw <= 0) {  // a range near the limits of double: ends only
    a->ticks[a->nticks++] = mn;
    a->ticks[a->nticks++] = mx;
    return;
  }
  double mag = pow(10, floor(log10(raw))), f = raw / mag;
  double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  double lo = floor(mn / step) * step, hi = ceil(mx / step) * step;
  if (!isfinite(lo) || !isfinite(hi)) lo = mn, hi = mx;
  a->lo = lo, a->hi = hi, a->step = step;
  for (int k = 0; a->nticks < MAX_TICKS; k++) {
    double t = lo + k * step;
    if (t > hi + step * 1e-9) break;
    a->ticks[a->nticks++] = fabs(t) < step * 1e-9 ? 0 : t;
  }
}

// Decades 10^k covering [mn, mx] (log10 values), with 2 and 5 between them
// when the range spans at most two decades; at most ~10 labelled decades.
static void log_axis(axis *a, double mn, double mx) {
  double lo = floor(mn), hi = ceil(mx);
  if (hi <= lo) hi = lo + 1;
  a->lo = lo, a->hi = hi, a->nticks = 0, a->step = 0;
  double every = ceil((hi - lo) / 10);
  for (double k = lo; k <= hi && a->nticks < MAX_TICKS; k += every) {
    a->ticks[a->nticks++] = k;
    if (hi - lo <= 2 && k < hi) {
      a->ticks[a->nticks++] = k + log10(2.0);
      a->ticks[a->nticks++] = k + log10(5.0);
    }
  }
}

// A tick label: on a log axis the value 10^t; otherwise with as many decimals
// as the tick spacing needs.
static void tick_label(const axis *a, double t, char *buf, size_t size) {
  if (a->log) {
    snprintf(buf, size, "%g", pow(10, t));
    return;
  }
  double m = fmax(fabs(a->lo), fabs(a->hi));
  if (t == 0) snprintf(buf, size, "0");
  else if (a->step <= 0 || m >= 1e6 || m < 1e-4) snprintf(buf, size, "%.3g", t);
  else {
    int decimals = a->step >= 1 ? 0 : (int)ceil(-log10(a->step) - 1e-9);
    snprintf(buf, size, "%.*f", decimals, t);
  }
}

gk_status gk_plot_svg(const gk_plot *plot, const gk_plot_series *series, size_t nseries, gk_nn_buf *out) {
  if (!plot || !out || (nseries && !series))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_plot_svg: %s is NULL", !plot ? "plot" : !out ? "out" : "series");
  int W = plot->width ? plot->width : 800, H = plot->height ? plot->height : 480;
  if (W < 200 || W > 8000 || H < 200 || H > 8000)
    return gk_nn_fail(GK_ERR_INVALID_VALUE, "plot: size %d x %d must be in [200, 8000] pixels each way", W, H);
  for (size_t s = 0; s < nseries; s++)
    if (series[s].n && (!series[s].x || !series[s].y))
      return gk_nn_fail(GK_ERR_NULL_POINTER, "plot: series %zu ('%s') has %zu points but x or y is NULL", s,
                     series[s].label ? series[s].label : "", series[s].n);

  // Data ranges over the drawable points.
  axis ax = {0}, ay = {0};
  ay.log = plot->log_y != 0;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (size_t s = 0; s < nseries; s++)
    for (size_t i = 0; i < series[s].n; i++) {
      double x = axis_value(&ax, series[s].x[i]), y = axis_value(&ay, series[s].y[i]);
      if (isnan(x) || isnan(y)) continue;
      xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
    }
  if (xmin > xmax) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  linear_axis(&ax, xmin, xmax);
  if (ay.log) log_axis(&ay, ymin, ymax);
  else linear_axis(&ay, ymin, ymax);

  // The plot area, in pixels.
  const double L = 72, R = W - 24.0, T = plot->title ? 44 : 24, B = H - 52.0;
#define PX(v) (L + ((v) - ax.lo) / (ax.hi - ax.lo) * (R - L))
#define PY(v) (B - ((v) - ay.lo) / (ay.hi - ay.lo) * (B - T))
  gk_nn_buf_printf(out,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                   W, H, W, H, W, H);
  if (plot->title) {
    gk_nn_buf_printf(out, "<text class=\"title\" x=\"%.1f\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">",
                     (L + R) / 2);
    put_xml_text(out, plot->title);
    gk_nn_buf_puts(out, "</text>\n");
  }

  // Grid, ticks and tick labels.
  char label[64];
  gk_nn_buf_puts(out, "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n");
  for (int k = 0; k < ax.nticks; k++)
    gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", PX(ax.ticks[k]), T,
                     PX(ax.ticks[k]), B);
  for (int k = 0; k < ay.nticks; k++)
    gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, PY(ay.ticks[k]), R,
                     PY(ay.ticks[k]));
  gk_nn_buf_puts(out, "</g>\n<g class=\"axes\" stroke=\"black\" stroke-width=\"1\">\n");
  gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, B, R, B);
  gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L, T, L, B);
  for (int k = 0; k < ax.nticks; k++)
    gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", PX(ax.ticks[k]), B,
                     PX(ax.ticks[k]), B + 5);
  for (int k = 0; k < ay.nticks; k++)
    gk_nn_buf_printf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", L - 5, PY(ay.ticks[k]), L,
                     PY(ay.ticks[k]));
  gk_nn_buf_puts(out, "</g>\n<g class=\"xticks\" text-anchor=\"middle\">\n");
  for (int k = 0; k < ax.nticks; k++) {
    tick_label(&ax, ax.ticks[k], label, sizeof label);
    gk_nn_buf_printf(out, "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n", PX(ax.ticks[k]), B + 18, label);
  }
  gk_nn_buf_puts(out, "</g>\n<g class=\"yticks\" text-anchor=\"end\">\n");
  for (int k = 0; k < ay.nticks; k++) {
    tick_label(&ay, ay.ticks[k], label, sizeof label);
    gk_nn_buf_printf(out, "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n", L - 8, PY(ay.ticks[k]) + 4, label);
  }
  gk_nn_buf_puts(out, "</g>\n");
  if (plot->xlabel) {
    gk_nn_buf_printf(out, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (L + R) / 2,
                     H - 12.0);
    put_xml_text(out, plot->xlabel);
    gk_nn_buf_puts(out, "</text>\n");
  }
  if (plot->ylabel) {
    gk_nn_buf_printf(out,
                     "<text class=\"ylabel\" x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 16 %.1f)\">",
                     (T + B) / 2, (T + B) / 2);
    put_xml_text(out, plot->ylabel);
    gk_nn_buf_puts(out, "</text>\n");
  }

  // The curves, clipped to the plot area with room for a dot on its edge; a
  // line breaks at undrawable points.
  gk_nn_buf_printf(out,
                   "<clipPath id=\"area\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/></clipPath>\n",
                   L - 4, T - 4, R - L + 8, B - T + 8);
  for (size_t s = 0; s < nseries; s++) {
    const char *color = palette[s % NPALETTE];
    gk_nn_buf_printf(out, "<g class=\"series\" clip-path=\"url(#area)\" stroke=\"%s\" fill=\"%s\">\n", color, color);
    int open = 0;
    for (size_t i = 0; i < series[s].n; i++) {
      double x = axis_value(&ax, series[s].x[i]), y = axis_value(&ay, series[s].y[i]);
      if (isnan(x) || isnan(y)) {
        if (open) gk_nn_buf_puts(out, "\"/>\n");
        open = 0;
        continue;
      }
      if (!open) gk_nn_buf_puts(out, "<polyline fill=\"none\" stroke-width=\"1.5\" points=\"");
      gk_nn_buf_printf(out, open ? " %.2f,%.2f" : "%.2f,%.2f", PX(x), PY(y));
      open = 1;
    }
    if (open) gk_nn_buf_puts(out, "\"/>\n");
    if (series[s].markers)
      for (size_t i = 0; i < series[s].n; i++) {
        double x = axis_value(&ax, series[s].x[i]), y = axis_value(&ay, series[s].y[i]);
        if (!isnan(x) && !isnan(y))
          gk_nn_buf_printf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" stroke=\"none\"/>\n", PX(x), PY(y));
      }
    gk_nn_buf_puts(out, "</g>\n");
  }

  // The legend, in the top right corner of the plot area.
  if (nseries) {
    size_t longest = 0;
    for (size_t s = 0; s < nseries; s++) {
      size_t n = series[s].label ? strlen(series[s].label) : 0;
      longest = n > longest ? n : longest;
    }
    double lw = 44 + 7.0 * (double)(longest < 60 ? longest : 60), lh = 8 + 18.0 * (double)nseries;
    double lx = R - lw - 8, ly = T + 8;
    gk_nn_buf_printf(out,
                     "<g class=\"legend\">\n<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                     "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999999\"/>\n",
                     lx, ly, lw, lh);
    for (size_t s = 0; s < nseries; s++) {
      const char *color = palette[s % NPALETTE];
      double cy = ly + 13 + 18.0 * (double)s;
      gk_nn_buf_printf(out,
                       "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                       lx + 8, cy, lx + 32, cy, color);
      if (series[s].markers)
        gk_nn_buf_printf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", lx + 20, cy, color);
      gk_nn_buf_printf(out, "<text x=\"%.2f\" y=\"%.2f\">", lx + 38, cy + 4);
      put_xml_text(out, series[s].label);
      gk_nn_buf_puts(out, "</text>\n");
    }
    gk_nn_buf_puts(out, "</g>\n");
  }
  gk_nn_buf_puts(out, "</svg>\n");
#undef PX
#undef PY
  if (out->failed) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "plot: out of memory building the SVG");
  return GK_SUCCESS;
}

gk_status gk_plot_write(const char *path, const gk_plot *plot, const gk_plot_series *series, size_t nseries) {
  gk_status st = gk_plot_check_path(path);
  if (st) return st;
  gk_nn_buf svg = {0};
  st = gk_plot_svg(plot, series, nseries, &svg);
  if (st == GK_SUCCESS) {
    gk_nn_chunk chunk = {svg.data, svg.len};
    st = gk_nn_write_atomic(path, "plot file", &chunk, 1);
  }
  gk_nn_buf_free(&svg);
  return st;
}
