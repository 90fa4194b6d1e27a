// Shared by the training program's internal library (src/nn), which uses
// only the public API: errors are reported like the rest of gradkern, through
// gk_set_error(), so gk_last_error() gives the message of whichever call
// failed.
#ifndef GK_NN_H
#define GK_NN_H

#include "gradkern.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

// The public status codes have no name for file problems yet; src/nn returns
// this one when a file cannot be opened, read or written, or its content is
// not what it must be. The message says which file and what was wrong.
#define GK_NN_ERR_FILE GK_ERR_INVALID_VALUE

// Record a message (printf's format) for gk_last_error() and return `status`.
static inline __attribute__((format(printf, 2, 3))) gk_status gk_nn_fail(gk_status status, const char *fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return gk_set_error(status, message);
}

// The plural ending of a count in a message: "1 step", "2 steps", "0 steps".
static inline const char *gk_plural(long long n) { return n == 1 ? "" : "s"; }

#endif
