// The JSON pull parser (grammar and rules in json.h).
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gk_status gk_json_fail_at(const gk_json *p, size_t pos, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return gk_nn_fail(GK_NN_ERR_FILE, "%s: %s byte %zu: %s", p->what, p->unit, pos, msg);
}

static void skip_ws(gk_json *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
    p->i++;
}

int gk_json_peek(gk_json *p) {
  skip_ws(p);
  return p->i < p->n ? p->s[p->i] : -1;
}

const char *gk_json_found(const gk_json *p, char *buf, size_t size) {
  if (p->i >= p->n) {
    snprintf(buf, size, "the end of the %s", p->unit);
    return buf;
  }
  unsigned c = p->s[p->i];
  if (c >= 0x20 && c < 0x7f) snprintf(buf, size, "'%c'", (char)c);
  else snprintf(buf, size, "byte 0x%02x", c);
  return buf;
}

gk_status gk_json_expect(gk_json *p, char c, const char *ctx) {
  skip_ws(p);
  if (p->i < p->n && p->s[p->i] == (unsigned char)c) {
    p->i++;
    return GK_SUCCESS;
  }
  char fb[64];
  return gk_json_fail_at(p, p->i, "expected '%c' %s, found %s", c, ctx, gk_json_found(p, fb, sizeof fb));
}

gk_status gk_json_open(gk_json *p, char open, int *more, const char *ctx) {
  gk_status st = gk_json_expect(p, open, ctx);
  if (st) return st;
  *more = gk_json_peek(p) != (open == '{' ? '}' : ']');
  if (!*more) p->i++;
  return GK_SUCCESS;
}

gk_status gk_json_next_or_close(gk_json *p, char close, int *more, const char *ctx) {
  skip_ws(p);
  if (p->i < p->n && (p->s[p->i] == ',' || p->s[p->i] == (unsigned char)close)) {
    *more = p->s[p->i] == ',';
    p->i++;
    return GK_SUCCESS;
  }
  char fb[64];
  return gk_json_fail_at(p, p->i, "expected ',' or '%c' %s, found %s", close, ctx, gk_json_found(p, fb, sizeof fb));
}

static int hex4(const unsigned char *s, uint32_t *v) {
  *v = 0;
  for (int k = 0; k < 4; k++) {
    unsigned c = s[k], d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return 0;
    *v = *v << 4 | d;
  }
  return 1;
}

void gk_json_put_utf8(gk_nn_buf *b, uint32_t cp) {
  unsigned char u[4];
  size_t n;
  if (cp < 0x80) u[0] = (unsigned char)cp, n = 1;
  else if (cp < 0x800) u[0] = (unsigned char)(0xC0 | cp >> 6), u[1] = (unsigned char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000)
    u[0] = (unsigned char)(0xE0 | cp >> 12), u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
    u[2] = (unsigned char)(0x80 | (cp & 0x3F)), n = 3;
  else
    u[0] = (unsigned char)(0xF0 | cp >> 18), u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F)),
    u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), u[3] = (unsigned char)(0x80 | (cp & 0x3F)), n = 4;
  gk_nn_buf_append(b, u, n);
}

gk_status gk_json_string_append(gk_json *p, gk_nn_buf *b, size_t *len, const char *ctx) {
  skip_ws(p);
  char fb[64];
  if (p->i >= p->n || p->s[p->i] != '"')
    return gk_json_fail_at(p, p->i, "expected a string %s, found %s", ctx, gk_json_found(p, fb, sizeof fb));
  size_t start = p->i++, len0 = b->len;
  for (;;) {
    if (p->i >= p->n)
      return gk_json_fail_at(p, p->i, "the %s ends inside the string that starts at byte %zu %s", p->unit, start, ctx);
    // A run of plain bytes at once (the common case).
    size_t run = p->i;
    while (run < p->n && p->s[run] >= 0x20 && p->s[run] < 0x80 && p->s[run] != '"' && p->s[run] != '\\') run++;
    if (run > p->i) {
      gk_nn_buf_append(b, p->s + p->i, run - p->i);
      p->i = run;
      continue;
    }
    unsigned c = p->s[p->i];
    if (c == '"') {
      p->i++;
      break;
    }
    if (c < 0x20) return gk_json_fail_at(p, p->i, "control character 0x%02x inside a string %s", c, ctx);
    if (c != '\\') {
      size_t k = gk_nn_utf8_seq(p->s + p->i, p->n - p->i);
      if (!k) return gk_json_fail_at(p, p->i, "invalid UTF-8 inside a string %s", ctx);
      gk_nn_buf_append(b, p->s + p->i, k);
      p->i += k;
      continue;
    }
    size_t at = p->i++;
    if (p->i >= p->n) return gk_json_fail_at(p, at, "the %s ends inside an escape %s", p->unit, ctx);
    char e = (char)p->s[p->i++];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (simple && e) {
      static const char decoded[] = "\"\\/\b\f\n\r\t";
      gk_nn_buf_append(b, &decoded[simple - "\"\\/bfnrt"], 1);
      continue;
    }
    uint32_t cp, lo;
    if (e != 'u') return gk_json_fail_at(p, at, "invalid escape '\\%c' %s", e >= 0x20 && e < 0x7f ? e : '?', ctx);
    if (p->n - p->i < 4 || !hex4(p->s + p->i, &cp))
      return gk_json_fail_at(p, at, "'\\u' must be followed by 4 hex digits %s", ctx);
    p->i += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' || !hex4(p->s + p->i + 2, &lo) ||
          lo < 0xDC00 || lo > 0xDFFF)
        return gk_json_fail_at(p, at, "unpaired UTF-16 surrogate \\u%04X %s", (unsigned)cp, ctx);
      p->i += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return gk_json_fail_at(p, at, "unpaired UTF-16 surrogate \\u%04X %s", (unsigned)cp, ctx);
    } else if (cp == 0) {
      return gk_json_fail_at(p, at, "the NUL character \\u0000 is not supported in a string %s", ctx);
    }
    gk_json_put_utf8(b, cp);
  }
  if (b->failed) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s: out of memory reading a string", p->what);
  *len = b->len - len0;
  return GK_SUCCESS;
}

gk_status gk_json_string(gk_json *p, char **out, const char *ctx) {
  *out = NULL;
  gk_nn_buf b = {0};
  gk_nn_buf_append(&b, "", 0);
  size_t len;
  gk_status st = gk_json_string_append(p, &b, &len, ctx);
  if (st == GK_SUCCESS && b.failed) st = gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s: out of memory reading a string", p->what);
  if (st != GK_SUCCESS) {
    gk_nn_buf_free(&b);
    return st;
  }
  *out = b.data;
  return GK_SUCCESS;
}

gk_status gk_json_uint(gk_json *p, uint64_t *out, const char *ctx) {
  skip_ws(p);
  char fb[64];
  size_t start = p->i;
  if (p->i < p->n && p->s[p->i] == '-')
    return gk_json_fail_at(p, start, "negative number %s (it must be a non-negative integer)", ctx);
  if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
    return gk_json_fail_at(p, start, "expected a non-negative integer %s, found %s", ctx, gk_json_found(p, fb, sizeof fb));
  if (p->s[p->i] == '0' && p->i + 1 < p->n && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
    return gk_json_fail_at(p, start, "number with a leading zero %s", ctx);
  uint64_t v = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = p->s[p->i++] - '0';
    if (v > (UINT64_MAX - d) / 10) return gk_json_fail_at(p, start, "number too large %s", ctx);
    v = v * 10 + d;
  }
  if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
    return gk_json_fail_at(p, start, "%s must be an integer, found a fraction or exponent", ctx);
  *out = v;
  return GK_SUCCESS;
}

gk_status gk_json_int(gk_json *p, int64_t *out, const char *ctx) {
  int neg = gk_json_peek(p) == '-';
  size_t start = p->i;
  if (neg) p->i++;
  if (neg && (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9'))
    return gk_json_fail_at(p, start, "expected an integer %s, found a lone '-'", ctx);
  uint64_t v;
  gk_status st = gk_json_uint(p, &v, ctx);
  if (st) return st;
  if (v > (uint64_t)INT64_MAX + neg) return gk_json_fail_at(p, start, "number out of the 64-bit range %s", ctx);
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return GK_SUCCESS;
}

// Consume the literal `word` when it is at the position.
static int literal(gk_json *p, const char *word) {
  size_t k = strlen(word);
  if (p->n - p->i < k || memcmp(p->s + p->i, word, k)) return 0;
  p->i += k;
  return 1;
}

gk_status gk_json_bool(gk_json *p, int *out, int null_ok, const char *ctx) {
  skip_ws(p);
  if (literal(p, "true")) *out = 1;
  else if (literal(p, "false")) *out = 0;
  else if (null_ok && literal(p, "null")) *out = -1;
  else {
    char fb[64];
    return gk_json_fail_at(p, p->i, "expected true%s or false %s, found %s", null_ok ? ", null" : "", ctx,
                           gk_json_found(p, fb, sizeof fb));
  }
  return GK_SUCCESS;
}

static gk_status skip_number(gk_json *p, const char *ctx) {
  size_t start = p->i;
  if (p->s[p->i] == '-') p->i++;
  size_t digits = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  int ok = p->i > digits && !(p->s[digits] == '0' && p->i - digits > 1);
  if (ok && p->i < p->n && p->s[p->i] == '.') {
    size_t f = ++p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    ok = p->i > f;
  }
  if (ok && p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    size_t e = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    ok = p->i > e;
  }
  return ok ? GK_SUCCESS : gk_json_fail_at(p, start, "malformed number %s", ctx);
}

gk_status gk_json_double(gk_json *p, double *out, const char *ctx) {
  int c = gk_json_peek(p);
  char fb[64];
  if (c != '-' && !(c >= '0' && c <= '9'))
    return gk_json_fail_at(p, p->i, "expected a number %s, found %s", ctx, gk_json_found(p, fb, sizeof fb));
  size_t start = p->i;
  gk_status st = skip_number(p, ctx);
  if (st) return st;
  char num[64];
  if (p->i - start >= sizeof num) return gk_json_fail_at(p, start, "number too long %s", ctx);
  memcpy(num, p->s + start, p->i - start);
  num[p->i - start] = 0;
  *out = strtod(num, NULL);
  return GK_SUCCESS;
}

static gk_status skip_value(gk_json *p, const char *ctx, int depth) {
  int c = gk_json_peek(p), more;
  gk_status st;
  char fb[64];
  if (c == '"') {
    gk_nn_buf b = {0};
    size_t len;
    st = gk_json_string_append(p, &b, &len, ctx);
    gk_nn_buf_free(&b);
    return st;
  }
  if (c == '{' || c == '[') {
    if (depth >= GK_JSON_MAX_DEPTH)
      return gk_json_fail_at(p, p->i, "values nested more than %d deep %s", GK_JSON_MAX_DEPTH, ctx);
    char close = c == '{' ? '}' : ']';
    if ((st = gk_json_open(p, (char)c, &more, ctx))) return st;
    while (more) {
      if (c == '{') {
        if (gk_json_peek(p) != '"')
          return gk_json_fail_at(p, p->i, "expected a string as an object key %s, found %s", ctx,
                                 gk_json_found(p, fb, sizeof fb));
        if ((st = skip_value(p, ctx, depth + 1)) || (st = gk_json_expect(p, ':', ctx))) return st;
      }
      if ((st = skip_value(p, ctx, depth + 1)) || (st = gk_json_next_or_close(p, close, &more, ctx))) return st;
    }
    return GK_SUCCESS;
  }
  if (c == '-' || (c >= '0' && c <= '9')) return skip_number(p, ctx);
  if (literal(p, "true") || literal(p, "false") || literal(p, "null")) return GK_SUCCESS;
  return gk_json_fail_at(p, p->i, "expected a JSON value %s, found %s", ctx, gk_json_found(p, fb, sizeof fb));
}

gk_status gk_json_skip(gk_json *p, const char *ctx) { return skip_value(p, ctx, 0); }

gk_status gk_json_end(gk_json *p) {
  char fb[64];
  if (gk_json_peek(p) >= 0)
    return gk_json_fail_at(p, p->i, "%s after the end of the JSON value", gk_json_found(p, fb, sizeof fb));
  return GK_SUCCESS;
}
