// Device memory (gk_buffer). A host backend's buffer is aligned host memory
// whose address is its own; a device backend's buffer is the backend's
// handle plus a range of addresses reserved here, which tensors point into
// (data = base + offset) and gk_buffer_resolve maps back to (handle, offset).
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gk_buffer {
  const gk_backend_table *backend;
  void *handle;      // the backend's handle (a host buffer: its memory)
  uintptr_t base;    // the address of byte 0
  size_t bytes;
  gk_buffer *next;   // the live device buffers, for gk_buffer_resolve
};

// Device buffers take address ranges upwards from the middle of the address
// space, each rounded to 64 bytes and followed by a 64-byte gap, so no two
// share an address; host pointers of device tensors are never formed.
// (wasm32: the upper 2 GiB, which the modules' memory, capped at 2 GiB by
// wasm/CMakeLists.txt, never reaches.)
static uintptr_t next_base = UINTPTR_MAX / 2 + 1;
static gk_buffer *live;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

gk_status gk_buffer_alloc(gk_backend backend, size_t bytes, gk_buffer **out) {
  if (!out) return gk_fail(GK_ERR_NULL_POINTER, "gk_buffer_alloc: argument 'buffer' is NULL");
  *out = NULL;
  const gk_backend_table *b = backend == GK_BACKEND_AUTO ? NULL : gk_backend_find(backend);
  if (!b)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_buffer_alloc: backend = %s (%d) is not a registered backend",
                   gk_backend_name(backend), (int)backend);
  const char *why = gk_backend_unavailable_reason(b);
  if (why) return gk_fail(GK_ERR_UNSUPPORTED, "gk_buffer_alloc: backend '%s' is unavailable: %s", b->name, why);
  if (bytes == 0 || bytes > SIZE_MAX / 2)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_buffer_alloc: bytes = %zu is outside 1..%zu", bytes, (size_t)(SIZE_MAX / 2));
  gk_buffer *buf = calloc(1, sizeof *buf);
  if (!buf) return gk_fail(GK_ERR_OUT_OF_MEMORY, "gk_buffer_alloc: could not allocate %zu bytes", sizeof *buf);
  buf->backend = b;
  buf->bytes = bytes;
  if (!b->buffer_alloc) {
    buf->handle = aligned_alloc(64, round64(bytes));
    if (!buf->handle) {
      free(buf);
      return gk_fail(GK_ERR_OUT_OF_MEMORY, "gk_buffer_alloc: could not allocate %zu bytes on '%s'", bytes, b->name);
    }
    buf->base = (uintptr_t)buf->handle;
    *out = buf;
    gk_clear_error();
    return GK_SUCCESS;
  }
  gk_status s = b->buffer_alloc(bytes, &buf->handle);
  if (s != GK_SUCCESS) {
    free(buf);
    return s;
  }
  pthread_mutex_lock(&live_lock);
  if (UINTPTR_MAX - next_base < round64(bytes) + 64) {
    pthread_mutex_unlock(&live_lock);
    b->buffer_free(buf->handle);
    free(buf);
    return gk_fail(GK_ERR_OUT_OF_MEMORY, "gk_buffer_alloc: the addresses for '%s' buffers are used up", b->name);
  }
  buf->base = next_base;
  next_base += round64(bytes) + 64;
  buf->next = live;
  live = buf;
  pthread_mutex_unlock(&live_lock);
  *out = buf;
  gk_clear_error();
  return GK_SUCCESS;
}

void gk_buffer_free(gk_buffer *buf) {
  if (!buf) return;
  if (!buf->backend->buffer_alloc) {
    free(buf->handle);
    free(buf);
    return;
  }
  pthread_mutex_lock(&live_lock);
  for (gk_buffer **p = &live; *p; p = &(*p)->next)
    if (*p == buf) {
      *p = buf->next;
      break;
    }
  pthread_mutex_unlock(&live_lock);
  buf->backend->buffer_free(buf->handle);
  free(buf);
}

void *gk_buffer_address(const gk_buffer *buf) { return buf ? (void *)buf->base : NULL; }
size_t gk_buffer_size(const gk_buffer *buf) { return buf ? buf->bytes : 0; }

// The range [offset, offset + bytes) lies in the buffer.
static gk_status check_range(const char *fn, const gk_buffer *buf, size_t offset, const void *host, size_t bytes) {
  if (!buf) return gk_fail(GK_ERR_NULL_POINTER, "%s: argument 'buffer' is NULL", fn);
  if (!host && bytes) return gk_fail(GK_ERR_NULL_POINTER, "%s: the host pointer is NULL with bytes = %zu", fn, bytes);
  if (offset > buf->bytes || bytes > buf->bytes - offset)
    return gk_fail(GK_ERR_INVALID_VALUE, "%s: offset = %zu plus bytes = %zu is past the buffer's %zu bytes", fn, offset,
                   bytes, buf->bytes);
  return GK_SUCCESS;
}

gk_status gk_buffer_upload(gk_buffer *buf, size_t offset, const void *src, size_t bytes) {
  gk_status s = check_range("gk_buffer_upload", buf, offset, src, bytes);
  if (s != GK_SUCCESS) return s;
  if (buf->backend->buffer_upload) {
    s = buf->backend->buffer_upload(buf->handle, offset, src, bytes);
    if (s != GK_SUCCESS) return s;
  } else if (bytes) {
    memcpy((char *)buf->handle + offset, src, bytes);
  }
  gk_clear_error();
  return GK_SUCCESS;
}

gk_status gk_buffer_download(const gk_buffer *buf, size_t offset, void *dst, size_t bytes) {
  gk_status s = check_range("gk_buffer_download", buf, offset, dst, bytes);
  if (s != GK_SUCCESS) return s;
  if (buf->backend->buffer_download) {
    s = buf->backend->buffer_download(buf->handle, offset, dst, bytes);
    if (s != GK_SUCCESS) return s;
  } else if (bytes) {
    memcpy(dst, (const char *)buf->handle + offset, bytes);
  }
  gk_clear_error();
  return GK_SUCCESS;
}

gk_status gk_backend_synchronize(gk_backend backend) {
  const gk_backend_table *b = backend == GK_BACKEND_AUTO ? NULL : gk_backend_find(backend);
  if (!b)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_backend_synchronize: backend = %s (%d) is not a registered backend",
                   gk_backend_name(backend), (int)backend);
  gk_status s = b->synchronize ? b->synchronize() : GK_SUCCESS;
  if (s == GK_SUCCESS) gk_clear_error();
  return s;
}

bool gk_buffer_find(const gk_backend_table *backend, uintptr_t lo, uintptr_t hi, void **handle, size_t *offset) {
  pthread_mutex_lock(&live_lock);
  const gk_buffer *found = NULL;
  for (const gk_buffer *b = live; b && !found; b = b->next)
    if (b->backend == backend && lo >= b->base && hi <= b->base + b->bytes) found = b;
  pthread_mutex_unlock(&live_lock);
  if (found) {
    *handle = found->handle;
    *offset = (size_t)(lo - found->base);
  }
  return found != NULL;
}

bool gk_buffer_resolve(const gk_backend_table *backend, const gk_tensor *t, void **handle, size_t *offset) {
  uintptr_t lo, hi;
  gk_tensor_byte_range(t, &lo, &hi);
  if (lo == hi) lo = hi = (uintptr_t)t->data;  // no elements: only the address must be in a buffer
  if (!gk_buffer_find(backend, lo, hi, handle, offset)) return false;
  *offset += (size_t)((uintptr_t)t->data - lo);  // element 0 (the lowest address unless a stride is negative)
  return true;
}
