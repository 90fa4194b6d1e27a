// The CPU kernels report the instruction-set level they run, and GK_ISA
// forces it: make test runs the kernel-vs-reference tests once per level the
// machine has (tests/CMakeLists.txt), and this test, run under the same
// settings, shows that each run really used the level it asked for.
#include "core/isa.h"  // gk_isa_amx_state
#include "harness.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

// The best level this CPU runs, found independently of the library.
static const char *cpu_best(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  unsigned a, b, c, d;
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  bool bf16 = avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));  // AVX512-BF16
  return bf16 ? "avx512bf16" : avx512 ? "avx512" : avx2 ? "avx2" : "scalar";
#else
  return "scalar";
#endif
}

static int rank_of(const char *isa) {
  return !strcmp(isa, "avx512bf16") ? 3 : !strcmp(isa, "avx512") ? 2 : !strcmp(isa, "avx2") ? 1 : 0;
}

// Whether cpuid shows AMX-BF16 and AMX-TILE (leaf 7 subleaf 0, edx bits 22, 24).
static bool cpu_has_amx(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24));
#else
  return false;
#endif
}

static void check_plan(gk_op op, gk_direction dir, gk_backend backend, const char *want) {
  gk_op_desc d;
  int64_t shape[2] = {4, 8};
  check(gk_op_desc_init(&d, op, dir, GK_F32, 2, shape) == GK_SUCCESS, "op %d: desc: %s", (int)op, gk_last_error());
  if (op == GK_OP_LINEAR) d.linear.out_features = 3;
  d.backend = backend;
  gk_plan *plan = NULL;
  gk_status st = gk_plan_create(&d, &plan);
  check(st == GK_SUCCESS, "op %d: plan: %s", (int)op, gk_last_error());
  if (st != GK_SUCCESS) return;
  gk_plan_info info;
  check(gk_plan_get_info(plan, &info) == GK_SUCCESS, "op %d: info", (int)op);
  check(!strcmp(info.isa, want), "op %d backend %s: isa %s, want %s", (int)op, gk_backend_name(backend), info.isa,
        want);
  gk_plan_destroy(plan);
}

int main(void) {
  const char *best = cpu_best(), *env = getenv("GK_ISA"), *want = best;
  if (env && (!strcmp(env, "avx512bf16") || !strcmp(env, "avx512") || !strcmp(env, "avx2") || !strcmp(env, "scalar")) &&
      rank_of(env) < rank_of(best))
    want = env;
  printf("cpu best %s, GK_ISA=%s: kernels should run %s\n", best, env ? env : "(unset)", want);
  // AMX: reported, not used by the kernels.
  const char *amx = gk_isa_amx_state();
  printf("AMX: %s\n", amx);
  check(cpu_has_amx() == !strncmp(amx, "present", 7), "AMX state \"%s\" but cpuid says %s", amx,
        cpu_has_amx() ? "present" : "absent");
  gk_op ops[] = {GK_OP_SILU, GK_OP_RMSNORM, GK_OP_SOFTMAX, GK_OP_LINEAR};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    for (int dir = 0; dir < 2; dir++) {
      check_plan(ops[i], dir ? GK_BACKWARD : GK_FORWARD, GK_BACKEND_CPU, want);
      check_plan(ops[i], dir ? GK_BACKWARD : GK_FORWARD, GK_BACKEND_REF, "scalar");
    }
  return finish("test_isa");
}
