// Instruction-set levels of the CPU kernels.
//
// Every hot loop of the CPU backend is compiled three times: for AVX-512
// (F, BW, DQ, VL, with FMA and F16C), for AVX2 + FMA + F16C, and for the
// baseline of the target (SSE2 on x86-64; the plain C path, named "scalar").
// A fourth level, "avx512bf16", is AVX-512 plus the bf16 dot-product
// instruction (AVX512-BF16, vdpbf16ps): it runs the AVX-512 copies of the
// loops, and the bf16 x bf16 matrix products through that instruction
// (cpu/gemm.c). The level is picked once, from cpuid, the first time a
// kernel runs; GK_ISA=avx512bf16|avx512|avx2|scalar in the environment forces
// one (a level above what the CPU has is lowered to the best it has, with a
// warning on stderr, as is an unknown name). Off x86-64 there is one level: under WebAssembly
// "simd128" when the module is compiled with -msimd128 (the same loops,
// vectorized to 128-bit wasm SIMD), "simd128-relaxed" when it is also
// compiled with -mrelaxed-simd (the same, with the f32 and f64 matrix-product
// microkernels on relaxed multiply-adds, cpu/gemm.c), and "scalar" for the
// plain build (a wasm module cannot switch levels at run time: a host without
// SIMD cannot even load one that has it); elsewhere "scalar".
//
// The pattern, in a kernel file:
//   GK_INLINE void fwd_task_body(void *ctx, int64_t task) { ... }
//   GK_ISA_VARIANTS(fwd_task, (void *ctx, int64_t task), (ctx, task))
// defines fwd_task_avx512 / _avx2 / _scalar, each a copy of the body compiled
// for its level, and `static void fwd_task(void *ctx, int64_t task)` that
// calls the one gk_isa_level() picked. Everything the body calls in its inner
// loops must be GK_INLINE too (static inline functions compiled into each
// copy); a call to an ordinary function runs that function's own code.
#ifndef GK_ISA_H
#define GK_ISA_H

// x86-64's levels are ordered: a higher one runs everything a lower one does.
typedef enum gk_isa {
  GK_ISA_SCALAR = 0,
  GK_ISA_AVX2 = 1,
  GK_ISA_AVX512 = 2,
  GK_ISA_AVX512BF16 = 3,
  GK_ISA_SIMD128 = 4,
  GK_ISA_SIMD128_RELAXED = 5
} gk_isa;

// The level in use (cpuid, lowered by GK_ISA), fixed after the first call.
gk_isa gk_isa_level(void);
// "avx512bf16", "avx512", "avx2", "simd128", "simd128-relaxed" or "scalar".
const char *gk_isa_name(gk_isa level);
// Whether the CPU has AMX-BF16 tiles and Linux grants their state to this
// process (asked once per call with arch_prctl): "not present", or a phrase
// starting "present". The kernels do not use AMX.
const char *gk_isa_amx_state(void);

#define GK_INLINE static inline __attribute__((always_inline))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GK_X86 1
#define GK_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2")))
#define GK_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2")))
#define GK_TARGET_AVX512BF16 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c,bmi,bmi2")))
#define GK_ISA_VARIANTS(name, params, args)                                                 \
  GK_TARGET_AVX512 static void name##_avx512 params { name##_body args; }                   \
  GK_TARGET_AVX2 static void name##_avx2 params { name##_body args; }                       \
  static void name##_scalar params { name##_body args; }                                    \
  static void name params {                                                                 \
    switch (gk_isa_level()) {                                                               \
    case GK_ISA_AVX512BF16:                                                                 \
    case GK_ISA_AVX512: name##_avx512 args; break;                                          \
    case GK_ISA_AVX2: name##_avx2 args; break;                                              \
    default: name##_scalar args; break;                                                     \
    }                                                                                       \
  }
#else
#define GK_X86 0
#define GK_TARGET_AVX512
#define GK_TARGET_AVX2
#define GK_TARGET_AVX512BF16
#define GK_ISA_VARIANTS(name, params, args) \
  static void name params { name##_body args; }
#endif

#endif
