// errno for the WebAssembly build with threads (gradkern-threads.wasm).
// wasi-libc's header declares errno thread-local, but Debian's wasi-libc is
// built without threads, where errno is one plain global: objects compiled
// with atomics would then refer to a thread-local errno that the library
// does not define. Declared here as the library defines it; only the
// module's main thread runs code that sets or reads errno (the pool's
// threads run kernel tasks, which do not). cmake/wasm32-wasi.cmake puts
// this directory first on the system include path of that build only.
#ifndef GK_WASM_THREADS_ERRNO_H
#define GK_WASM_THREADS_ERRNO_H
#define __wasilibc___errno_h  // wasi-libc's <__errno.h>, replaced by the two lines below
extern int errno;
#define errno errno
#include_next <errno.h>
#endif
