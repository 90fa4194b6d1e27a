// The part of POSIX threads that the library uses outside its thread pool
// (mutexes and once-initialisation), for a WebAssembly target without
// threads: Debian's wasi-libc has no <pthread.h>. With one thread a mutex
// never waits and a once-function runs on the first call. Only the wasm
// build puts this directory on the include path; src/core/threads.c has its
// own single-threaded pool there (GK_NO_THREADS).
#ifndef GK_WASM_COMPAT_PTHREAD_H
#define GK_WASM_COMPAT_PTHREAD_H

typedef struct { int locked; } pthread_mutex_t;
typedef int pthread_once_t;
#define PTHREAD_MUTEX_INITIALIZER {0}
#define PTHREAD_ONCE_INIT 0

static inline int pthread_mutex_lock(pthread_mutex_t *m) { m->locked = 1; return 0; }
static inline int pthread_mutex_unlock(pthread_mutex_t *m) { m->locked = 0; return 0; }
static inline int pthread_once(pthread_once_t *once, void (*fn)(void)) {
  if (!*once) {
    *once = 1;
    fn();
  }
  return 0;
}

#endif
