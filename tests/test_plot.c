// SVG plots: well-formed XML (a small tag checker here; Python's XML parser
// in tests/python), the curves and legend present, coordinates inside the
// picture, escaping, logarithmic ticks, degenerate data (constant, empty,
// NaN, huge) and the file-name rules.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "nn/plot.h"

#include <unistd.h>

static bool msg_has(const char *needle) {
  if (strstr(gk_last_error(), needle)) return true;
  fprintf(stderr, "  message: %s\n  expected it to contain: %s\n", gk_last_error(), needle);
  return false;
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

// Whether the document is well-formed in the way these SVGs can go wrong:
// tags nest and close, attribute values are quoted, and '&' only starts one
// of the five entities.
static bool well_formed(const char *s) {
  const char *stack[64];
  size_t lens[64];
  int depth = 0, roots = 0;
  while (*s) {
    if (*s == '&') {
      static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
      bool ok = false;
      for (int k = 0; k < 5; k++) ok |= !strncmp(s, ents[k], strlen(ents[k]));
      if (!ok) return false;
      s++;
      continue;
    }
    if (*s == '>') return false;  // a '>' outside a tag
    if (*s != '<') {
      s++;
      continue;
    }
    if (!strncmp(s, "<?", 2)) {
      const char *e = strstr(s, "?>");
      if (!e) return false;
      s = e + 2;
      continue;
    }
    bool closing = s[1] == '/';
    const char *name = s + 1 + closing;
    size_t n = strcspn(name, " />\n");
    if (!n) return false;
    const char *p = name + n;
    while (*p && *p != '>') {  // attributes: name="value"
      if (*p == '"') {
        const char *q = strchr(p + 1, '"');
        if (!q || memchr(p + 1, '<', (size_t)(q - p - 1))) return false;
        p = q + 1;
      } else {
        p++;
      }
    }
    if (!*p) return false;
    bool self = p[-1] == '/';
    if (closing) {
      if (!depth || lens[depth - 1] != n || strncmp(stack[depth - 1], name, n)) return false;
      depth--;
    } else if (!self) {
      if (depth == 64) return false;
      if (!depth) roots++;
      stack[depth] = name, lens[depth] = n, depth++;
    }
    s = p + 1;
  }
  return depth == 0 && roots == 1;
}

// Every number in points="..." and cx/cy inside the picture.
static bool coords_inside(const char *s, double W, double H) {
  for (const char *p = s; (p = strstr(p, "points=\"")); ) {
    p += 8;
    while (*p && *p != '"') {
      double x, y;
      int used;
      if (sscanf(p, "%lf,%lf%n", &x, &y, &used) != 2) return false;
      if (!(x >= 0 && x <= W && y >= 0 && y <= H)) return false;
      p += used;
      while (*p == ' ') p++;
    }
  }
  return !strstr(s, "nan") && !strstr(s, "inf");
}

static void test_svg(void) {
  enum { N = 1000, NE = 10 };
  static double sx[N], sy[N], ex[NE], ey[NE];
  for (int i = 0; i < N; i++) sx[i] = i + 1, sy[i] = 3 * exp(-i / 200.0) + 0.1;
  for (int i = 0; i < NE; i++) ex[i] = (i + 1) * 100, ey[i] = 3 * exp(-(i + 1) / 2.0) + 0.2;
  gk_plot_series series[2] = {{"train loss", sx, sy, N, 0}, {"eval loss", ex, ey, NE, 1}};
  gk_plot plot = {"loss & <accuracy> \"of\" 'mamba'", "step", "loss (nats)", 0, 0, 0};
  gk_nn_buf b = {0};
  check(gk_plot_svg(&plot, series, 2, &b) == GK_SUCCESS, "svg: %s", gk_last_error());
  const char *s = b.data;
  check(!strncmp(s, "<?xml", 5) && strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"480\""),
        "svg: XML declaration and root element");
  check(well_formed(s), "svg: well-formed");
  check(coords_inside(s, 800, 480), "svg: every point inside the picture, no nan/inf");
  check(count(s, "<polyline") == 2, "svg: one line per series");
  check(count(s, "<circle") == NE + 1, "svg: a dot per evaluation and one in the legend");
  check(strstr(s, "loss &amp; &lt;accuracy&gt; &quot;of&quot; &apos;mamba&apos;") != NULL, "svg: title escaped");
  check(strstr(s, ">train loss</text>") && strstr(s, ">eval loss</text>"), "svg: legend labels");
  check(strstr(s, "class=\"xlabel\"") && strstr(s, ">step</text>") && strstr(s, ">loss (nats)</text>"),
        "svg: axis labels");
  check(strstr(s, ">1000</text>") && strstr(s, ">0</text>") && strstr(s, ">3.5</text>"),
        "svg: tick labels 0 .. 1000 on x, 0 .. 3.5 on y");
  gk_nn_buf_free(&b);

  // Logarithmic y: decades.
  plot.log_y = 1;
  for (int i = 0; i < N; i++) sy[i] = 3 * exp(-i / 100.0) + 0.01;
  check(gk_plot_svg(&plot, series, 2, &b) == GK_SUCCESS, "log svg: %s", gk_last_error());
  check(well_formed(b.data) && coords_inside(b.data, 800, 480), "log svg: well-formed, inside");
  check(strstr(b.data, ">0.01</text>") && strstr(b.data, ">0.1</text>") && strstr(b.data, ">1</text>") &&
            strstr(b.data, ">10</text>"),
        "log svg: ticks 0.01, 0.1, 1, 10");
  gk_nn_buf_free(&b);
  // Over at most two decades: 2 and 5 between.
  double lx[2] = {0, 1}, ly[2] = {1.5, 30};
  gk_plot_series ls = {"l", lx, ly, 2, 0};
  check(gk_plot_svg(&plot, &ls, 1, &b) == GK_SUCCESS && strstr(b.data, ">2</text>") && strstr(b.data, ">50</text>"),
        "log svg: 2 and 5 ticks over two decades");
  gk_nn_buf_free(&b);
  plot.log_y = 0;

  // NaN, inf and non-positive (on a log axis) points break the line.
  double gx[6] = {0, 1, 2, 3, 4, 5}, gy[6] = {1, 2, NAN, 3, INFINITY, 4};
  gk_plot_series gs = {"gappy", gx, gy, 6, 1};
  check(gk_plot_svg(&plot, &gs, 1, &b) == GK_SUCCESS && count(b.data, "<polyline") == 3 &&
            count(b.data, "<circle") == 4 + 1 && coords_inside(b.data, 800, 480),
        "svg: NaN and inf break the line into 3 pieces");
  gk_nn_buf_free(&b);
  plot.log_y = 1;
  double ny[6] = {1, -2, 3, 0, 5, 6};
  gs.y = ny;
  check(gk_plot_svg(&plot, &gs, 1, &b) == GK_SUCCESS && count(b.data, "<polyline") == 3, "log svg: y <= 0 skipped");
  gk_nn_buf_free(&b);
  plot.log_y = 0;

  // Degenerate data: constant, a single point, no points, no series, huge values.
  double cx[3] = {5, 5, 5}, cy[3] = {2, 2, 2}, hy[3] = {1e308, -1e308, 1};
  gk_plot_series cs = {"constant", cx, cy, 3, 1}, empty = {"none", NULL, NULL, 0, 0}, hs = {"huge", gx, hy, 3, 0};
  const gk_plot_series *cases[] = {&cs, &empty, &hs};
  for (int k = 0; k < 3; k++) {
    check(gk_plot_svg(&plot, cases[k], 1, &b) == GK_SUCCESS && well_formed(b.data) &&
              coords_inside(b.data, 800, 480),
          "svg: degenerate case %d", k);
    gk_nn_buf_free(&b);
  }
  gk_plot bare = {NULL, NULL, NULL, 0, 300, 200};
  check(gk_plot_svg(&bare, NULL, 0, &b) == GK_SUCCESS && well_formed(b.data) && !strstr(b.data, "legend") &&
            strstr(b.data, "width=\"300\" height=\"200\""),
        "svg: no series, no title, 300 x 200");
  gk_nn_buf_free(&b);

  // Labels that are not text: control characters and invalid UTF-8 become '?'.
  gk_plot_series weird = {"a\x01\xff" "b \xc3\xa9", sx, sy, 3, 0};
  check(gk_plot_svg(&plot, &weird, 1, &b) == GK_SUCCESS && strstr(b.data, ">a??b \xc3\xa9</text>"),
        "svg: bad label bytes replaced, UTF-8 kept");
  gk_nn_buf_free(&b);

  // Bad arguments.
  gk_plot small = {NULL, NULL, NULL, 0, 100, 480};
  check(gk_plot_svg(&small, series, 2, &b) == GK_ERR_INVALID_VALUE && msg_has("size 100 x 480"), "width 100");
  gk_plot_series nox = {"x", NULL, sy, 3, 0};
  check(gk_plot_svg(&plot, &nox, 1, &b) == GK_ERR_NULL_POINTER && msg_has("series 0 ('x') has 3 points"), "NULL x");
  check(gk_plot_svg(NULL, series, 2, &b) == GK_ERR_NULL_POINTER, "NULL plot");
  gk_nn_buf_free(&b);
}

static void test_files(void) {
  check(gk_plot_check_path("loss.svg") == GK_SUCCESS && gk_plot_check_path("run/LOSS.SVG") == GK_SUCCESS,
        "check_path: .svg accepted");
  check(gk_plot_check_path("loss.png") == GK_ERR_UNSUPPORTED && msg_has("'loss.png': PNG is not supported"),
        "check_path: .png refused, saying so");
  check(gk_plot_check_path("loss.txt") != GK_SUCCESS && msg_has("must end in .svg"), "check_path: .txt");
  check(gk_plot_check_path(".svg") != GK_SUCCESS && gk_plot_check_path("") != GK_SUCCESS, "check_path: no name");
  check(gk_plot_check_path(NULL) == GK_ERR_NULL_POINTER, "check_path: NULL");

  char dir[] = "/tmp/gk_test_plot_XXXXXX";
  if (!mkdtemp(dir)) return;
  char path[128], png[128];
  snprintf(path, sizeof path, "%s/loss.svg", dir);
  snprintf(png, sizeof png, "%s/loss.png", dir);
  double x[3] = {1, 2, 3}, y[3] = {3, 2, 1};
  gk_plot_series s = {"loss", x, y, 3, 0};
  gk_plot plot = {"t", "step", "loss", 0, 0, 0};
  check(gk_plot_write(path, &plot, &s, 1) == GK_SUCCESS, "write %s: %s", path, gk_last_error());
  gk_nn_buf b = {0};
  gk_plot_svg(&plot, &s, 1, &b);
  FILE *f = fopen(path, "rb");
  char *got = calloc(b.len + 16, 1);
  size_t n = f ? fread(got, 1, b.len + 8, f) : 0;
  if (f) fclose(f);
  check(n == b.len && !memcmp(got, b.data, n), "the file holds the SVG");
  free(got);
  gk_nn_buf_free(&b);
  check(gk_plot_write(png, &plot, &s, 1) == GK_ERR_UNSUPPORTED && access(png, F_OK) != 0, "no .png written");
  unlink(path);
  rmdir(dir);
}

int main(void) {
  test_svg();
  test_files();
  return finish("test_plot");
}
