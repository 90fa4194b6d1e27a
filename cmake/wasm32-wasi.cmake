# CMake toolchain for WebAssembly: clang 16's wasm32-wasi target with Debian's
# wasi-libc (apt-get install clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32;
# `make wasm` passes this file). The whole project configures with it;
# CMakeLists.txt then builds only the library, the training code and the
# modules in wasm/. Clang 16, not Debian's default clang 14: clang 14 kept the
# cross-entropy forward's lanes in memory (3.5x slower in one thread, 512 x
# 32000) and emits the pre-standard relaxed-SIMD opcodes, which hosts reject.
#
# GK_WASM_SIMD (ON by default): compile everything with -msimd128, the CPU
# backend's "simd128" level; OFF gives the plain build for hosts without SIMD.
# GK_WASM_THREADS (OFF by default): ON gives the build with threads.
# GK_WASM_RELAXED (OFF by default): ON adds -mrelaxed-simd, the CPU backend's
# "simd128-relaxed" level.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(GK_WASM ON)

set(CMAKE_C_COMPILER clang-16)
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_AR llvm-ar CACHE FILEPATH "")
set(CMAKE_RANLIB llvm-ranlib CACHE FILEPATH "")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
# Debian's wasi-libc lives in the multiarch directories of /usr.
set(CMAKE_FIND_ROOT_PATH /usr/lib/wasm32-wasi /usr/include/wasm32-wasi)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

# -DGK_WASM_SIMD=OFF: the plain build, for hosts without WebAssembly SIMD.
if(NOT DEFINED GK_WASM_SIMD OR GK_WASM_SIMD)
  set(CMAKE_C_FLAGS_INIT -msimd128)
endif()
# -DGK_WASM_RELAXED=ON: the relaxed-SIMD build (gradkern-relaxed.wasm).
if(GK_WASM_RELAXED)
  string(APPEND CMAKE_C_FLAGS_INIT " -mrelaxed-simd")
endif()
# -DGK_WASM_THREADS=ON: the build with shared memory and a thread pool
# (gradkern-threads.wasm): atomics and bulk memory in every object, and
# thread-local storage per instance (the local-exec model), and
# wasi-libc's errno as that library defines it (wasm/compat/threads/errno.h).
if(GK_WASM_THREADS)
  string(APPEND CMAKE_C_FLAGS_INIT " -matomics -mbulk-memory -mmutable-globals -ftls-model=local-exec"
         " -isystem ${CMAKE_CURRENT_LIST_DIR}/../wasm/compat/threads")
endif()
