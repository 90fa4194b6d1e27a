// The CPU kernels' instruction-set level (see isa.h).
#if defined(__linux__)
#define _GNU_SOURCE  // syscall(), for arch_prctl
#endif
#include "isa.h"

#include <pthread.h>
#if GK_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gk_isa level = GK_ISA_SCALAR;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static const char *const names[] = {"scalar", "avx2", "avx512", "avx512bf16", "simd128", "simd128-relaxed"};

const char *gk_isa_name(gk_isa l) { return l >= GK_ISA_SCALAR && l <= GK_ISA_SIMD128_RELAXED ? names[l] : "?"; }

// The best level this CPU runs.
static gk_isa cpu_level(void) {
#if GK_X86
  __builtin_cpu_init();
  unsigned a, b, c, d;  // F16C: cpuid leaf 1, ecx bit 29 (clang 14's __builtin_cpu_supports lacks it)
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  // AVX512-BF16: cpuid leaf 7 subleaf 1, eax bit 5 (the OS's AVX-512 state is
  // checked by __builtin_cpu_supports("avx512f") above).
  bool bf16 = avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
  return bf16 ? GK_ISA_AVX512BF16 : avx512 ? GK_ISA_AVX512 : avx2 ? GK_ISA_AVX2 : GK_ISA_SCALAR;
#elif defined(__wasm_relaxed_simd__)
  return GK_ISA_SIMD128_RELAXED;
#elif defined(__wasm_simd128__)
  return GK_ISA_SIMD128;
#else
  return GK_ISA_SCALAR;
#endif
}

static void pick_level(void) {
  gk_isa best = cpu_level();
  level = best;
  const char *want = getenv("GK_ISA");
  if (!want || !*want) return;
#if !GK_X86
  // One level per build: a WebAssembly module is compiled for one.
  if (strcmp(want, names[best]))
    fprintf(stderr, "gradkern: GK_ISA=%s: this build has only the %s level; using it\n", want, names[best]);
#else
  for (int l = GK_ISA_SCALAR; l <= GK_ISA_AVX512BF16; l++) {
    if (strcmp(want, names[l])) continue;
    if ((gk_isa)l > best)
      fprintf(stderr, "gradkern: GK_ISA=%s: this CPU runs %s at best; using %s\n", want, names[best], names[best]);
    else
      level = (gk_isa)l;
    return;
  }
  fprintf(stderr, "gradkern: GK_ISA=%s is not avx512bf16, avx512, avx2 or scalar; using %s\n", want, names[best]);
#endif
}

gk_isa gk_isa_level(void) {
  pthread_once(&level_once, pick_level);
  return level;
}

const char *gk_isa_amx_state(void) {
#if GK_X86 && defined(__linux__)
  unsigned a, b, c, d;
  // AMX-BF16 and AMX-TILE: cpuid leaf 7 subleaf 0, edx bits 22 and 24.
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return "not present";
  // Linux hands out the tile data state (XFEATURE_XTILEDATA, 18) on request:
  // arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023).
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return "present, but the kernel refused the tile state";
  return "present (tile state granted; no AMX kernel yet)";
#else
  return "not present";
#endif
}
