// Non-temporal stores for large outputs. Plain stores read every line before
// writing it; gk_put_bytes writes whole lines without reading them (zeroing
// 262 MB here: 2x the speed of plain stores or memset). Worth it only for
// outputs that will not stay in cache: measured, it helps zeroing the
// embedding's dweight (262 MB) and not conv1d, rope or the embedding's row
// copies (67 MB; memcpy writes whole lines itself), which do not use it.
// Always inlined, so each ISA copy of a task gets it.
#ifndef GK_CPU_STREAM_STORE_H
#define GK_CPU_STREAM_STORE_H

#include "../core/internal.h"

#include <stdint.h>
#include <string.h>
#if GK_X86
#include <emmintrin.h>
#endif

#define GK_STREAM_BYTES ((size_t)16 << 20)

// Whether an output of `bytes` bytes goes by non-temporal stores.
static inline bool gk_stream_output(size_t bytes) { return bytes >= GK_STREAM_BYTES; }

GK_INLINE void gk_put_plain(char *dst, const char *src, size_t bytes) {
  if (src) memcpy(dst, src, bytes);
  else memset(dst, 0, bytes);
}

// dst[0 .. bytes) = src, or zeros when src is NULL. With `stream` (x86-64),
// the 16-byte aligned middle goes by SSE2 non-temporal stores; a task that
// streams ends with gk_stream_fence().
GK_INLINE void gk_put_bytes(void *dst_, const void *src_, size_t bytes, bool stream) {
  char *dst = dst_;
  const char *src = src_;
#if GK_X86
  if (stream) {
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    head = head < bytes ? head : bytes;
    size_t end = head + ((bytes - head) & ~(size_t)15);
    gk_put_plain(dst, src, head);
    if (src)
      for (size_t i = head; i < end; i += 16)
        _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    else
      for (size_t i = head; i < end; i += 16) _mm_stream_si128((__m128i *)(dst + i), _mm_setzero_si128());
    gk_put_plain(dst + end, src ? src + end : NULL, bytes - end);
    return;
  }
#endif
  gk_put_plain(dst, src, bytes);
}

// Orders a task's non-temporal stores before whatever follows it.
GK_INLINE void gk_stream_fence(bool stream) {
#if GK_X86
  if (stream) _mm_sfence();
#else
  (void)stream;
#endif
}

#endif
