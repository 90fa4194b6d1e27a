// Status strings and the thread-local error message.
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char gk_message[512];

const char *gk_status_string(gk_status status) {
  switch (status) {
  case GK_SUCCESS: return "success";
  case GK_ERR_NULL_POINTER: return "null pointer";
  case GK_ERR_INVALID_VALUE: return "invalid value";
  case GK_ERR_BAD_RANK: return "bad rank";
  case GK_ERR_BAD_SHAPE: return "bad shape";
  case GK_ERR_BAD_DTYPE: return "bad dtype";
  case GK_ERR_BAD_STRIDES: return "bad strides";
  case GK_ERR_BAD_ALIGNMENT: return "bad alignment";
  case GK_ERR_ALIASING: return "output overlaps another tensor";
  case GK_ERR_MISSING_ARGUMENT: return "missing argument";
  case GK_ERR_UNEXPECTED_ARGUMENT: return "unexpected argument";
  case GK_ERR_WORKSPACE_TOO_SMALL: return "workspace too small";
  case GK_ERR_UNSUPPORTED: return "unsupported";
  case GK_ERR_BAD_DEVICE: return "bad device";
  case GK_ERR_OUT_OF_MEMORY: return "out of memory";
  case GK_ERR_INTERNAL: return "internal error";
  case GK_ERR_NON_FINITE: return "non-finite value";
  }
  return "unknown status";
}

const char *gk_last_error(void) { return gk_message; }

void gk_clear_error(void) { gk_message[0] = '\0'; }

gk_status gk_set_error(gk_status status, const char *message) {
  snprintf(gk_message, sizeof gk_message, "%s", message ? message : "");
  return status;
}

gk_status gk_fail(gk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(gk_message, sizeof gk_message, fmt, ap);
  va_end(ap);
  return status;
}

const char *gk_format_shape(char *buf, size_t size, int rank, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}
