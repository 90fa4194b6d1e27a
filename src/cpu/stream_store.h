// Non-temporal stores for large outputs. Plain stores read every line before
// writing it; gk_put_bytes writes whole lines without reading them (zeroing
// 262 MB here: 2x the speed of plain stores or memset). Worth it only for
// outputs that will not stay in cache: measured, it helps zeroing the
// embedding's dweight (262 MB), softmax's dx on long f32 rows and ReLU's
// forward, and not conv1d, rope, the embedding's row copies (67 MB; memcpy
// writes whole lines itself) or the other activations, which do not use it.
// Always inlined, so each ISA copy of a task gets it.
#ifndef GK_CPU_STREAM_STORE_H
#define GK_CPU_STREAM_STORE_H

#include "../core/internal.h"

#include <stdint.h>
#include <string.h>
#if GK_X86
#include <immintrin.h>
#endif

#define GK_STREAM_BYTES ((size_t)16 << 20)

// Whether an output of `bytes` bytes goes by non-temporal stores.
static inline bool gk_stream_output(size_t bytes) { return bytes >= GK_STREAM_BYTES; }

GK_INLINE void gk_put_plain(char *dst, const char *src, size_t bytes) {
  if (src) memcpy(dst, src, bytes);
  else memset(dst, 0, bytes);
}

#if GK_X86
// dst[0 .. bytes) = src (zeros when src is NULL) by 64-byte non-temporal
// stores: dst 64-byte aligned, bytes a multiple of 64. Compiled for
// AVX-512 whatever the caller's level: gk_put_bytes calls it only when
// gk_isa_level() is AVX-512 or above.
GK_TARGET_AVX512 static inline void gk_stream_lines_avx512(char *dst, const char *src, size_t bytes) {
  if (src)
    for (size_t i = 0; i < bytes; i += 64) _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
  else
    for (size_t i = 0; i < bytes; i += 64) _mm512_stream_si512((void *)(dst + i), _mm512_setzero_si512());
}
#endif

// dst[0 .. bytes) = src, or zeros when src is NULL. With `stream` (x86-64),
// the 64-byte aligned lines of dst go by non-temporal stores (64-byte ones
// where the CPU has AVX-512, else SSE2's 16-byte ones); a task that streams
// ends with gk_stream_fence().
GK_INLINE void gk_put_bytes(void *dst_, const void *src_, size_t bytes, bool stream) {
  char *dst = dst_;
  const char *src = src_;
#if GK_X86
  if (stream) {
    size_t head = (size_t)(-(uintptr_t)dst & 63);
    head = head < bytes ? head : bytes;
    size_t end = head + ((bytes - head) & ~(size_t)63);
    gk_put_plain(dst, src, head);
    if (gk_isa_level() >= GK_ISA_AVX512)
      gk_stream_lines_avx512(dst + head, src ? src + head : NULL, end - head);
    else if (src)
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
