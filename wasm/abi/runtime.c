// What a WebAssembly kernel module has in place of an operating system, so
// that it imports nothing: its allocator and the three WASI calls that
// wasi-libc's stdio links in.
//
// Allocator. Every call allocates the same way (a plan, the library's
// workspace, RMSNorm's rstd) and frees all of it before returning, so
// allocation is a bump pointer that gk_abi_wasm_release() rewinds (and
// zeroes) at the end of each call: first in a 1 MiB arena in the module's data, then in blocks
// grown at the end of memory (memory.grow) when a workspace needs more. The
// grown blocks stay the module's (reused by later calls) and are listed for
// the checks, which refuse a region that overlaps one.
//
// WASI. The library reports nothing on stderr here (it has no environment
// to read and no threads); the stdio calls that remain linked are answered
// here: writes are dropped, and closing or seeking a file fails with EBADF.
#include "gradkern_abi.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { ARENA_BYTES = 1 << 20, ALIGN = 64, HEADER = 64, PAGE = 65536, MAX_BLOCKS = 16 };

typedef struct block {
  uintptr_t start, size, used;
} block;

static _Alignas(ALIGN) unsigned char arena[ARENA_BYTES];
static block blocks[1 + MAX_BLOCKS];  // blocks[0] is the arena
static int nblocks;
static gk_abi_range owned[MAX_BLOCKS];

static void init_blocks(void) {
  if (nblocks) return;
  blocks[0] = (block){(uintptr_t)arena, ARENA_BYTES, 0};
  nblocks = 1;
}

// A fresh block of at least `bytes` at the end of memory, or 0.
static block *grow_block(uintptr_t bytes) {
  if (nblocks == 1 + MAX_BLOCKS) return NULL;
  uintptr_t pages = (bytes + PAGE - 1) / PAGE;
  if (pages < 16) pages = 16;
  if (pages > 65536) return NULL;
  intptr_t old = (intptr_t)__builtin_wasm_memory_grow(0, pages);
  if (old < 0) return NULL;
  block *b = &blocks[nblocks];
  *b = (block){(uintptr_t)old * PAGE, pages * PAGE, 0};
  owned[nblocks - 1] = (gk_abi_range){(uint64_t)b->start, (uint64_t)b->start + b->size};
  nblocks++;
  return b;
}

// Each allocation: a 64-byte header holding its size, then the memory.
static void *bump(size_t bytes) {
  init_blocks();
  uintptr_t need = (uintptr_t)HEADER + ((bytes + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
  if (bytes > UINT32_MAX - 2 * PAGE) return NULL;
  block *b = NULL;
  for (int i = 0; i < nblocks && !b; i++)
    if (blocks[i].size - blocks[i].used >= need) b = &blocks[i];
  if (!b) b = grow_block(need);
  if (!b) return NULL;
  unsigned char *p = (unsigned char *)(b->start + b->used);
  b->used += need;
  memcpy(p, &bytes, sizeof bytes);
  return p + HEADER;
}

void *malloc(size_t bytes) { return bump(bytes); }
void free(void *p) { (void)p; }  // rewound at the end of the call
void *calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = bump(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}
void *realloc(void *old, size_t bytes) {
  void *p = bump(bytes);
  if (p && old) {
    size_t was;
    memcpy(&was, (unsigned char *)old - HEADER, sizeof was);
    memcpy(p, old, was < bytes ? was : bytes);
  }
  return p;
}
void *aligned_alloc(size_t alignment, size_t bytes) { return alignment <= ALIGN ? bump(bytes) : NULL; }
int posix_memalign(void **out, size_t alignment, size_t bytes) {
  void *p = aligned_alloc(alignment, bytes);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

// Rewind, zeroing what the call used: the module's memory is as it was
// before the call (a rejected call leaves no trace in it either).
void gk_abi_wasm_release(void) {
  for (int i = 0; i < nblocks; i++) {
    memset((void *)blocks[i].start, 0, blocks[i].used);
    blocks[i].used = 0;
  }
}

void gk_abi_wasm_memory(gk_abi_memory *mem) {
  extern unsigned char __heap_base;
  init_blocks();
  uint64_t module_end = ((uint64_t)(uintptr_t)&__heap_base + PAGE - 1) / PAGE * PAGE;
  *mem = (gk_abi_memory){.base = 0,
                         .bytes = (uint64_t)__builtin_wasm_memory_size(0) * PAGE,
                         .host_start = module_end,
                         .owned = owned,
                         .n_owned = nblocks - 1};
}

// The WASI calls wasi-libc's stdio refers to, defined here so that they are
// not imported (the signatures of wasi-libc's wasi/api.h).
int32_t __imported_wasi_snapshot_preview1_fd_write(int32_t fd, int32_t iovs, int32_t iovs_len, int32_t nwritten);
int32_t __imported_wasi_snapshot_preview1_fd_close(int32_t fd);
int32_t __imported_wasi_snapshot_preview1_fd_seek(int32_t fd, int64_t offset, int32_t whence, int32_t newoffset);

int32_t __imported_wasi_snapshot_preview1_fd_write(int32_t fd, int32_t iovs, int32_t iovs_len, int32_t nwritten) {
  (void)fd;
  uint32_t total = 0;
  for (int32_t i = 0; i < iovs_len; i++) {
    uint32_t len;
    memcpy(&len, (const unsigned char *)(uintptr_t)iovs + 8 * (uint32_t)i + 4, sizeof len);
    total += len;
  }
  memcpy((unsigned char *)(uintptr_t)nwritten, &total, sizeof total);
  return 0;
}

int32_t __imported_wasi_snapshot_preview1_fd_close(int32_t fd) {
  (void)fd;
  return 8;  // __WASI_ERRNO_BADF
}

int32_t __imported_wasi_snapshot_preview1_fd_seek(int32_t fd, int64_t offset, int32_t whence, int32_t newoffset) {
  (void)fd, (void)offset, (void)whence, (void)newoffset;
  return 8;
}
