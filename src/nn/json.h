// A pull parser for JSON text in memory (RFC 8259), shared by the
// safetensors header reader and the tokenizer file readers: the caller walks
// the grammar it expects (an object's keys, an array's elements) and the
// parser consumes one token at a time, failing with a message that names the
// text, the byte offset and what was expected where.
//
// Strings are decoded to UTF-8 (escapes included, surrogate pairs joined);
// invalid UTF-8, unpaired surrogates and \u0000 are refused. Numbers are read
// as integers only where the caller asks for one (gk_json_uint,
// gk_json_int); gk_json_skip skips any value, numbers with fractions and
// exponents included, nested at most GK_JSON_MAX_DEPTH deep.
#ifndef GK_NN_JSON_H
#define GK_NN_JSON_H

#include "fileio.h"
#include "nn.h"

#include <stddef.h>
#include <stdint.h>

#define GK_JSON_MAX_DEPTH 128

typedef struct gk_json {
  const unsigned char *s;  // the text
  size_t n, i;             // its length and the parse position
  const char *what;        // names the text in messages: "safetensors file 'x.safetensors'"
  const char *unit;        // what the text is called inside it: "header" (messages say "header byte 12")
} gk_json;

// An error "WHAT: UNIT byte POS: <message>" at position `pos`.
gk_status gk_json_fail_at(const gk_json *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// What is at the parse position, for messages: "'x'", "byte 0x07", "the end of
// the header" (buf: at least 32 bytes).
const char *gk_json_found(const gk_json *p, char *buf, size_t size);

// Skip whitespace; then the next byte, or -1 at the end of the text.
int gk_json_peek(gk_json *p);
// Skip whitespace, then consume `c` or fail naming what was expected (ctx:
// "in field 'shape' of tensor 'w'").
gk_status gk_json_expect(gk_json *p, char c, const char *ctx);
// Consume `open` ('{' or '['); *more is 0 when the object or array is empty
// (its closing bracket consumed as well), 1 when an element follows.
gk_status gk_json_open(gk_json *p, char open, int *more, const char *ctx);
// After an element of an object or array: ',' (*more = 1) or `close` (*more = 0).
gk_status gk_json_next_or_close(gk_json *p, char close, int *more, const char *ctx);
// A string, decoded into a new NUL-terminated string *out (free() it).
gk_status gk_json_string(gk_json *p, char **out, const char *ctx);
// A string, decoded and appended to `b` (no NUL added); *len its length.
gk_status gk_json_string_append(gk_json *p, gk_nn_buf *b, size_t *len, const char *ctx);
// A non-negative integer below 2^64 (no fraction, no exponent).
gk_status gk_json_uint(gk_json *p, uint64_t *out, const char *ctx);
// An integer in [-2^63, 2^63).
gk_status gk_json_int(gk_json *p, int64_t *out, const char *ctx);
// Any JSON number, as the nearest double.
gk_status gk_json_double(gk_json *p, double *out, const char *ctx);
// true or false into *out (0 or 1); with null_ok, null as well (*out = -1).
gk_status gk_json_bool(gk_json *p, int *out, int null_ok, const char *ctx);
// Any value, checked for well-formedness and skipped.
gk_status gk_json_skip(gk_json *p, const char *ctx);
// Only whitespace may remain.
gk_status gk_json_end(gk_json *p);

// Append the UTF-8 encoding of code point cp (< 0x110000, no surrogate) to b.
void gk_json_put_utf8(gk_nn_buf *b, uint32_t cp);

#endif
