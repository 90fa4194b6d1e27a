// gradkern bench: times every op's forward and backward at training-sized
// shapes (bench_ops lists them), with the machine's limits measured in the same run: a STREAM-like
// triad for memory-bound ops, OpenBLAS's sgemm (loaded at run time, with
// OPENBLAS_CORETYPE=SkylakeX) for matrix products. Benchmarks measure; no
// test asserts a time.
#include "bench.h"

#include "gradkern.h"
#include "nn/model.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *bench_usage =
    "usage: gradkern bench [--json] [--op NAME] [--repeat N] [--quick]\n"
    "  --json       one JSON array of rows instead of the table\n"
    "  --op NAME    only rows whose op is NAME (rmsnorm, linear, adamw, train_mamba, ...)\n"
    "  --repeat N   timed runs per row after one warm-up, 1..1000 (default 10; 3 with --quick);\n"
    "               rows slower than a few seconds run fewer\n"
    "  --quick      fewer repeats and a smaller time budget per row\n";

// "s" after a count other than 1: "%d thread%s".
static const char *plural(long long n) { return n == 1 ? "" : "s"; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct options {
  int json, quick, repeat;
  const char *only;
} options;

typedef struct limits {
  double triad_gb_s;     // 0 until measured
  double sgemm_fwd, sgemm_bwd; // GFLOP/s at the linear's shapes; -1: no BLAS, 0: not measured
  char blas[160];
} limits;

typedef struct bench {
  options opt;
  limits lim;
  int first_row;
  int failures;
  // The naming pass (before anything is measured): every benchmark only
  // adds its name to `names` ("rmsnorm, linear, ...") and notes whether
  // --op matches it.
  int naming, matched;
  char names[512];
} bench;

// ---------------------------------------------------------------- limits

enum { TRIAD_N = 64 * 1024 * 1024 / 4, TRIAD_THREADS = 2, TRIAD_REPS = 5 };

typedef struct triad_job {
  float *a, *b, *c;
  size_t lo, hi;
  int init;
} triad_job;

static void *triad_worker(void *arg) {
  triad_job *j = arg;
  if (j->init)
    for (size_t i = j->lo; i < j->hi; i++) {
      j->a[i] = 0.0f;
      j->b[i] = 1.0f;
      j->c[i] = 2.0f;
    }
  else
    for (size_t i = j->lo; i < j->hi; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
  return NULL;
}

// a = b + s c over 3 x 64 MiB f32 arrays with 2 threads; the best of a few.
static double measure_triad(void) {
  float *a = aligned_alloc(64, TRIAD_N * 4), *b = aligned_alloc(64, TRIAD_N * 4), *c = aligned_alloc(64, TRIAD_N * 4);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return 0;
  }
  double best = 1e30;
  for (int rep = -1; rep < TRIAD_REPS; rep++) {
    pthread_t th[TRIAD_THREADS];
    triad_job jobs[TRIAD_THREADS];
    double t0 = now();
    for (int t = 0; t < TRIAD_THREADS; t++) {
      jobs[t] = (triad_job){a, b, c, (size_t)TRIAD_N * t / TRIAD_THREADS, (size_t)TRIAD_N * (t + 1) / TRIAD_THREADS,
                            rep < 0};
      pthread_create(&th[t], NULL, triad_worker, &jobs[t]);
    }
    for (int t = 0; t < TRIAD_THREADS; t++) pthread_join(th[t], NULL);
    double dt = now() - t0;
    if (rep >= 0 && dt < best) best = dt;
  }
  volatile float sink = a[TRIAD_N / 3];
  (void)sink;
  free(a), free(b), free(c);
  return 3.0 * TRIAD_N * 4 / best * 1e-9;
}

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

static double time_sgemm(sgemm_fn f, int ta, int tb, int m, int n, int k, const float *a, const float *b, float *c,
                         int reps) {
  double best = 1e30;
  for (int r = -1; r < reps; r++) {
    double t0 = now();
    f(CBLAS_ROW_MAJOR, ta, tb, m, n, k, 1.0f, a, ta == CBLAS_TRANS ? m : k, b, tb == CBLAS_TRANS ? k : n, 0.0f, c, n);
    double dt = now() - t0;
    if (r >= 0 && dt < best) best = dt;
  }
  return best;
}

// OpenBLAS's sgemm at the linear's shapes (M = 4096, K = 2048, N = 5632):
// forward y = x W^T, backward dx = dy W and dW = dy^T x.
static void measure_sgemm(limits *l, int quick) {
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
  sgemm_fn f = h ? (sgemm_fn)(size_t)dlsym(h, "cblas_sgemm") : NULL;
  if (!f) {
    l->sgemm_fwd = l->sgemm_bwd = -1;
    snprintf(l->blas, sizeof l->blas, "no BLAS found (dlopen libopenblas.so.0: %s)", h ? "no cblas_sgemm" : dlerror());
    return;
  }
  void (*set_threads)(int) = (void (*)(int))(size_t)dlsym(h, "openblas_set_num_threads");
  char *(*core)(void) = (char *(*)(void))(size_t)dlsym(h, "openblas_get_corename");
  if (set_threads) set_threads(gk_get_num_threads());
  snprintf(l->blas, sizeof l->blas, "OpenBLAS sgemm, core %s, %d thread%s (OPENBLAS_CORETYPE=%s)",
           core ? core() : "?", gk_get_num_threads(), plural(gk_get_num_threads()), getenv("OPENBLAS_CORETYPE"));
  const int M = 4096, K = 2048, N = 5632, reps = quick ? 1 : 3;
  float *x = aligned_alloc(64, (size_t)M * K * 4), *w = aligned_alloc(64, (size_t)N * K * 4),
        *y = aligned_alloc(64, (size_t)M * N * 4);
  if (!x || !w || !y) {
    l->sgemm_fwd = l->sgemm_bwd = -1;
    snprintf(l->blas, sizeof l->blas, "no memory for the sgemm limit");
  } else {
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)(i % 17) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)M * N; i++) y[i] = (float)(i % 11) * 0.01f;
    double flops = 2.0 * M * K * N;
    double tf = time_sgemm(f, CBLAS_NO_TRANS, CBLAS_TRANS, M, N, K, x, w, y, reps);
    // dx (M, K) = dy (M, N) W (N, K); dW (N, K) = dy^T (N, M) x (M, K)
    double tdx = time_sgemm(f, CBLAS_NO_TRANS, CBLAS_NO_TRANS, M, K, N, y, w, x, reps);
    double tdw = time_sgemm(f, CBLAS_TRANS, CBLAS_NO_TRANS, N, K, M, y, x, w, reps);
    l->sgemm_fwd = flops / tf * 1e-9;
    l->sgemm_bwd = 2 * flops / (tdx + tdw) * 1e-9;
  }
  free(x), free(y), free(w);
}

// ---------------------------------------------------------------- rows

typedef enum metric { M_BYTES, M_FLOPS, M_TOKENS } metric;

typedef struct row {
  const char *op, *direction, *dtype;
  char shape[96];
  double ms;       // median
  metric kind;
  double amount;   // bytes, flops or tokens per run
  const char *limit_name; // NULL: none
  double limit_value;
  const char *error; // not NULL: the row did not run
} row;

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 32) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void emit(bench *bn, const row *r) {
  double rate = r->error ? 0 : r->amount / (r->ms * 1e-3) * (r->kind == M_TOKENS ? 1 : 1e-9);
  double frac = r->limit_name && r->limit_value > 0 && !r->error ? rate / r->limit_value : -1;
  if (r->error) bn->failures++;
  int first = bn->first_row;
  bn->first_row = 0;
  if (bn->opt.json) {
    printf("%s  {\"op\": ", first ? "" : ",\n");
    json_string(r->op);
    printf(", \"direction\": \"%s\", \"dtype\": \"%s\", \"shape\": ", r->direction, r->dtype);
    json_string(r->shape);
    if (r->error) {
      printf(", \"error\": ");
      json_string(r->error);
      printf("}");
    } else {
      printf(", \"gradkern_ms\": %.4f, \"gb_s\": ", r->ms);
      if (r->kind == M_BYTES) printf("%.2f, \"bytes\": %.0f", rate, r->amount);
      else printf("null");
      printf(", \"gflop_s\": ");
      if (r->kind == M_FLOPS) printf("%.2f, \"flops\": %.0f", rate, r->amount);
      else printf("null");
      if (r->kind == M_TOKENS) printf(", \"tokens_s\": %.1f", rate);
      printf(", \"limit_name\": ");
      if (r->limit_name) json_string(r->limit_name);
      else printf("null");
      printf(", \"limit_value\": ");
      if (frac >= 0) printf("%.2f, \"fraction_of_limit\": %.4f}", r->limit_value, frac);
      else printf("null, \"fraction_of_limit\": null}");
    }
    fflush(stdout);
  } else {
    if (r->error) {
      printf("%-20s %-8s %-5s %-32s failed: %s\n", r->op, r->direction, r->dtype, r->shape, r->error);
      return;
    }
    char rate_s[32], frac_s[16];
    snprintf(rate_s, sizeof rate_s, "%.1f %s", rate,
             r->kind == M_BYTES ? "GB/s" : r->kind == M_FLOPS ? "GFLOP/s" : "tokens/s");
    if (frac >= 0) snprintf(frac_s, sizeof frac_s, "%.0f%%", 100 * frac);
    else snprintf(frac_s, sizeof frac_s, "-");
    printf("%-20s %-8s %-5s %-32s %10.3f %18s %6s  %s\n", r->op, r->direction, r->dtype, r->shape, r->ms, rate_s,
           frac_s, r->limit_name ? r->limit_name : "");
    fflush(stdout);
  }
}

// Whether to measure the benchmark `op`; in the naming pass, never (its name is noted).
static int wanted(bench *bn, const char *op) {
  int match = !bn->opt.only || !strcmp(bn->opt.only, op);
  if (!bn->naming) return match;
  bn->matched |= match;
  size_t len = strlen(bn->names), n = strlen(op);
  int listed = 0;
  for (const char *p = bn->names; (p = strstr(p, op)) != NULL; p += n)
    listed |= (p == bn->names || p[-1] == ' ') && (p[n] == ',' || !p[n]);
  if (!listed) snprintf(bn->names + len, sizeof bn->names - len, "%s%s", len ? ", " : "", op);
  return 0;
}

// Runs fn(ctx) once to warm up, then up to opt.repeat times (fewer when a
// run is slow); the median in ms, or -1 when a run fails.
typedef gk_status (*run_fn)(void *ctx);

static double median_ms(const bench *bn, run_fn fn, void *ctx) {
  double t0 = now();
  if (fn(ctx) != GK_SUCCESS) return -1;
  double warm = now() - t0, budget = bn->opt.quick ? 0.6 : 4.0;
  int reps = bn->opt.repeat;
  if (warm * reps > budget) reps = (int)(budget / warm);
  if (reps < 1) reps = 1;
  double *t = malloc(sizeof *t * (size_t)reps);
  if (!t) return -1;
  for (int i = 0; i < reps; i++) {
    double s = now();
    if (fn(ctx) != GK_SUCCESS) {
      free(t);
      return -1;
    }
    t[i] = now() - s;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  free(t);
  return 1e3 * med;
}

// ---------------------------------------------------------------- plan ops

typedef struct plan_run {
  gk_plan *plan;
  gk_arg args[24];
  int nargs;
  void *ws;
  size_t ws_bytes;
  double bytes;   // every tensor read or written once
} plan_run;

static gk_dtype arg_dtype(const gk_op_desc *d, gk_arg_kind k) {
  switch (k) {
  case GK_ARG_TARGET:
  case GK_ARG_INDEX: return d->index_dtype;
  case GK_ARG_RSTD:
  case GK_ARG_MEAN:
  case GK_ARG_LSE:
  case GK_ARG_LOSS:
  case GK_ARG_DLOSS: return GK_F32;
  case GK_ARG_CHUNK_STATES:
  case GK_ARG_INITIAL_STATE:
  case GK_ARG_FINAL_STATE:
  case GK_ARG_DINITIAL_STATE:
  case GK_ARG_DFINAL_STATE: return d->op == GK_OP_SELECTIVE_SCAN ? GK_F32 : d->dtype;
  default: return d->dtype;
  }
}

static void fill(void *p, gk_dtype dt, int64_t n, gk_arg_kind k, int64_t index_range) {
  for (int64_t i = 0; i < n; i++) {
    float v = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    if (k == GK_ARG_A) v = -0.5f - fabsf(v);               // scan: decaying state
    if (k == GK_ARG_RSTD) v = 1.0f + 0.1f * v;
    if (k == GK_ARG_LSE) v = 8.0f;
    switch (dt) {
    case GK_F32: ((float *)p)[i] = v; break;
    case GK_F64: ((double *)p)[i] = v; break;
    case GK_F16: ((uint16_t *)p)[i] = gk_f32_to_f16(v); break;
    case GK_BF16: ((uint16_t *)p)[i] = gk_f32_to_bf16(v); break;
    case GK_I32: ((int32_t *)p)[i] = (int32_t)((i * 7919) % index_range); break;
    case GK_I64: ((int64_t *)p)[i] = (i * 7919) % index_range; break;
    }
  }
}

static void plan_run_free(plan_run *r) {
  for (int i = 0; i < r->nargs; i++) free(r->args[i].tensor.data);
  free(r->ws);
  gk_plan_destroy(r->plan);
  memset(r, 0, sizeof *r);
}

static gk_status plan_run_setup(plan_run *r, const gk_op_desc *d) {
  memset(r, 0, sizeof *r);
  gk_status s = gk_plan_create(d, &r->plan);
  if (s != GK_SUCCESS) return s;
  int64_t range = d->op == GK_OP_CROSS_ENTROPY ? d->shape[d->rank - 1] : d->embedding.num_embeddings;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(r->plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    gk_arg *a = &r->args[r->nargs];
    a->kind = (gk_arg_kind)k;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    gk_dtype dt = arg_dtype(d, a->kind);
    size_t bytes = (size_t)n * gk_dtype_size(dt);
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!p) {
      plan_run_free(r);
      return GK_ERR_OUT_OF_MEMORY;
    }
    fill(p, dt, n, a->kind, range > 0 ? range : 1);
    gk_tensor_init(&a->tensor, p, dt, rank, shape);
    r->nargs++;
    // The embedding's forward reads only the rows it gathers.
    if (d->op == GK_OP_EMBEDDING && d->direction == GK_FORWARD && a->kind == GK_ARG_WEIGHT) {
      int64_t rows = 1;
      for (int i = 0; i < d->rank; i++) rows *= d->shape[i];
      if (rows < shape[0]) bytes = (size_t)rows * (size_t)shape[1] * gk_dtype_size(dt);
    }
    r->bytes += (double)bytes;
  }
  gk_plan_workspace_size(r->plan, &r->ws_bytes);
  if (r->ws_bytes) {
    r->ws = aligned_alloc(64, (r->ws_bytes + 63) / 64 * 64);
    if (!r->ws) {
      plan_run_free(r);
      return GK_ERR_OUT_OF_MEMORY;
    }
  }
  return GK_SUCCESS;
}

static gk_status plan_run_once(void *ctx) {
  plan_run *r = ctx;
  return gk_plan_run(r->plan, r->args, r->nargs, r->ws, r->ws_bytes);
}

static void shape_text(char *out, size_t n, const gk_op_desc *d, const char *extra) {
  size_t len = 0;
  for (int i = 0; i < d->rank && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%lld", i ? "x" : "", (long long)d->shape[i]);
  if (extra && len < n) snprintf(out + len, n - len, "%s", extra);
}

// The kinds of limit an op is measured against.
typedef enum bound { B_MEMORY, B_GEMM, B_NONE } bound;

// One row per direction and dtype (f32, bf16) the op supports. flops[dir]:
// the useful floating-point operations of a run, for B_GEMM.
static void bench_desc(bench *bn, const char *name, gk_op_desc *d, bound b, const double flops[2], const char *extra,
                       int fused_inplace) {
  if (!wanted(bn, name)) return;
  static const gk_dtype dts[] = {GK_F32, GK_BF16};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++) {
      if (fused_inplace && dir == GK_BACKWARD) continue;
      d->dtype = dts[t];
      d->direction = (gk_direction)dir;
      gk_plan *probe;
      if (gk_plan_create(d, &probe) != GK_SUCCESS) continue; // this op has no such dtype
      gk_plan_destroy(probe);
      row r = {name, dir ? "backward" : "forward", gk_dtype_name(dts[t]), "", 0, M_BYTES, 0, NULL, 0, NULL};
      shape_text(r.shape, sizeof r.shape, d, extra);
      plan_run pr;
      char err[200];
      if (plan_run_setup(&pr, d) != GK_SUCCESS) {
        snprintf(err, sizeof err, "%s", gk_last_error());
        r.error = err;
        emit(bn, &r);
        continue;
      }
      if (fused_inplace) // DLOGITS is the very same view as LOGITS (read once, written once)
        for (int i = 0; i < pr.nargs; i++)
          for (int j = 0; j < pr.nargs; j++)
            if (pr.args[i].kind == GK_ARG_DLOGITS && pr.args[j].kind == GK_ARG_LOGITS) {
              free(pr.args[i].tensor.data);
              pr.args[i].tensor.data = pr.args[j].tensor.data;
            }
      r.ms = median_ms(bn, plan_run_once, &pr);
      if (r.ms < 0) {
        snprintf(err, sizeof err, "%s", gk_last_error());
        r.error = err;
      }
      if (b == B_GEMM) {
        r.kind = M_FLOPS;
        r.amount = flops[dir];
        r.limit_value = dir ? bn->lim.sgemm_bwd : bn->lim.sgemm_fwd;
        r.limit_name = r.limit_value > 0 ? (dir ? "openblas_sgemm_bwd_gflop_s" : "openblas_sgemm_fwd_gflop_s") : NULL;
      } else {
        r.kind = M_BYTES;
        r.amount = pr.bytes;
        if (b == B_MEMORY) {
          r.limit_name = "triad_gb_s";
          r.limit_value = bn->lim.triad_gb_s;
        }
      }
      if (fused_inplace) // LOGITS and DLOGITS share memory: free it once
        for (int i = 0; i < pr.nargs; i++)
          if (pr.args[i].kind == GK_ARG_DLOGITS) pr.args[i].tensor.data = NULL;
      plan_run_free(&pr);
      emit(bn, &r);
    }
}

// Every op at its benchmark shapes: norms, activations and softmax on
// 4096 x 2048 and 4096 x 8192, attention at T = 1024 and 4096, and the rest.
static void bench_ops(bench *bn) {
  static const gk_op act[] = {GK_OP_RELU, GK_OP_GELU, GK_OP_SILU, GK_OP_SIGMOID, GK_OP_SOFTPLUS};
  static const gk_op gated[] = {GK_OP_GLU, GK_OP_REGLU, GK_OP_SWIGLU, GK_OP_GEGLU};
  // Rows of a LLaMA-sized hidden state (2048) and of a wide MLP (8192).
  static const int64_t row_shapes[2][2] = {{4096, 2048}, {4096, 8192}};
  const int64_t *rows = row_shapes[0];
  gk_op_desc d;
  for (int s = 0; s < 2; s++) {
    const int64_t *shape = row_shapes[s];
    for (size_t i = 0; i < sizeof act / sizeof *act; i++) {
      gk_op_desc_init(&d, act[i], GK_FORWARD, GK_F32, 2, shape);
      bench_desc(bn, gk_op_name(act[i]), &d, B_MEMORY, NULL, NULL, 0);
    }
    for (size_t i = 0; i < sizeof gated / sizeof *gated; i++) {
      gk_op_desc_init(&d, gated[i], GK_FORWARD, GK_F32, 2, shape);
      d.gated.form = GK_GATED_TWO_TENSOR;
      bench_desc(bn, gk_op_name(gated[i]), &d, B_MEMORY, NULL, " (x, gate)", 0);
    }
    gk_op_desc_init(&d, GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "rmsnorm", &d, B_MEMORY, NULL, NULL, 0);
    gk_op_desc_init(&d, GK_OP_LAYERNORM, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "layernorm", &d, B_MEMORY, NULL, NULL, 0);
    gk_op_desc_init(&d, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "softmax", &d, B_MEMORY, NULL, NULL, 0);
  }
  gk_op_desc_init(&d, GK_OP_ADD, GK_FORWARD, GK_F32, 2, rows);
  bench_desc(bn, "add", &d, B_MEMORY, NULL, NULL, 0);
  gk_op_desc_init(&d, GK_OP_MUL, GK_FORWARD, GK_F32, 2, rows);
  bench_desc(bn, "mul", &d, B_MEMORY, NULL, NULL, 0);

  const double gemm = 2.0 * 4096 * 2048 * 5632, gemm_flops[2] = {gemm, 2 * gemm};
  gk_op_desc_init(&d, GK_OP_LINEAR, GK_FORWARD, GK_F32, 2, rows);
  d.linear.out_features = 5632;
  bench_desc(bn, "linear", &d, B_GEMM, gemm_flops, " -> 5632", 0);
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 2, rows);
  d.matmul.n = 5632;
  bench_desc(bn, "matmul", &d, B_GEMM, gemm_flops, " @ 2048x5632", 0);

  // Causal: half of the 2 B H T^2 Dh of each product; forward has 2
  // products, backward 5 (the score recomputation, dv, dp, dq, dk).
  for (int64_t T = 1024; T <= 4096; T *= 4) {
    const int64_t q[4] = {4, 16, T, 64};
    const double half = 2.0 * 4 * 16 * (double)T * (double)T * 64 / 2, attn_flops[2] = {2 * half, 5 * half};
    gk_op_desc_init(&d, GK_OP_ATTENTION, GK_FORWARD, GK_F32, 4, q);
    bench_desc(bn, "attention", &d, B_GEMM, attn_flops, " causal", 0);
  }

  const int64_t logits[2] = {2048, 32000};
  gk_op_desc_init(&d, GK_OP_CROSS_ENTROPY, GK_FORWARD, GK_F32, 2, logits);
  d.index_dtype = GK_I32;
  bench_desc(bn, "cross_entropy", &d, B_MEMORY, NULL, NULL, 0);
  d.ce.fused_grad = 1;
  bench_desc(bn, "cross_entropy_fused", &d, B_MEMORY, NULL, " dlogits in place", 1);

  const int64_t tokens[2] = {8, 1024};
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, tokens);
  d.index_dtype = GK_I32;
  d.embedding.num_embeddings = 32000;
  d.embedding.dim = 2048;
  bench_desc(bn, "embedding", &d, B_MEMORY, NULL, " V=32000 D=2048", 0);

  const int64_t bthd[4] = {4, 1024, 16, 64};
  gk_op_desc_init(&d, GK_OP_ROPE, GK_FORWARD, GK_F32, 4, bthd);
  bench_desc(bn, "rope", &d, B_MEMORY, NULL, NULL, 0);

  const int64_t bdl[3] = {4, 1536, 1024};
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, bdl);
  d.conv.silu = 1;
  bench_desc(bn, "conv1d", &d, B_MEMORY, NULL, " W=4 silu", 0);

  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3, bdl);
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  bench_desc(bn, "selective_scan", &d, B_NONE, NULL, " N=16 D z softplus", 0);
}

// ---------------------------------------------------------------- AdamW

typedef struct adamw_ctx {
  gk_adamw_config cfg;
  gk_tensor p, g, m, v, master;
  int has_master;
  int64_t step;
} adamw_ctx;

static gk_status adamw_once(void *ctx) {
  adamw_ctx *a = ctx;
  return gk_adamw_step(&a->cfg, 1, &a->p, &a->g, &a->m, &a->v, a->has_master ? &a->master : NULL, ++a->step);
}

static void bench_adamw(bench *bn) {
  if (!wanted(bn, "adamw")) return;
  const int64_t n = 50 * 1000 * 1000;
  static const gk_dtype dts[] = {GK_F32, GK_BF16};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
    adamw_ctx a;
    memset(&a, 0, sizeof a);
    gk_adamw_config_init(&a.cfg);
    size_t es = gk_dtype_size(dts[t]);
    void *p = aligned_alloc(64, (size_t)n * es), *g = aligned_alloc(64, (size_t)n * es);
    float *m = aligned_alloc(64, (size_t)n * 4), *v = aligned_alloc(64, (size_t)n * 4);
    float *master = dts[t] == GK_F32 ? NULL : aligned_alloc(64, (size_t)n * 4);
    row r = {"adamw", "step", gk_dtype_name(dts[t]), "50M params", 0, M_BYTES, 0, "triad_gb_s", bn->lim.triad_gb_s,
             NULL};
    if (dts[t] != GK_F32) snprintf(r.shape, sizeof r.shape, "50M params, f32 master");
    if (!p || !g || !m || !v || (dts[t] != GK_F32 && !master)) {
      r.error = "no memory for 50M parameters";
    } else {
      fill(p, dts[t], n, GK_ARG_WEIGHT, 1);
      fill(g, dts[t], n, GK_ARG_DWEIGHT, 1);
      memset(m, 0, (size_t)n * 4);
      memset(v, 0, (size_t)n * 4);
      gk_tensor_init(&a.p, p, dts[t], 1, &n);
      gk_tensor_init(&a.g, g, dts[t], 1, &n);
      gk_tensor_init(&a.m, m, GK_F32, 1, &n);
      gk_tensor_init(&a.v, v, GK_F32, 1, &n);
      if (master) {
        fill(master, GK_F32, n, GK_ARG_WEIGHT, 1);
        gk_tensor_init(&a.master, master, GK_F32, 1, &n);
        a.has_master = 1;
      }
      // read p, g, m, v (and master), write p, m, v (and master)
      r.amount = (double)n * (double)(2 * es + es + 16 + (master ? 8 : 0));
      r.ms = median_ms(bn, adamw_once, &a);
      if (r.ms < 0) r.error = gk_last_error();
    }
    emit(bn, &r);
    free(p), free(g), free(m), free(v), free(master);
  }
}

// ---------------------------------------------------------------- training step

typedef struct train_ctx {
  gk_run *run;
  int32_t *inputs, *targets;
} train_ctx;

static gk_status train_once(void *ctx) {
  train_ctx *t = ctx;
  double loss;
  return gk_run_step(t->run, t->inputs, t->targets, &loss);
}

// gk_run_step (forward and backward of the whole model) on the default model
// of `gradkern train` (width 64, 2 layers, state 16, the selective-copying
// task's vocabulary of 10, 16 sequences of 256) and a LLaMA of the same
// width and depth (4 heads, 2 key/value heads).
static void bench_train(bench *bn, gk_arch arch) {
  const char *name = arch == GK_ARCH_MAMBA ? "train_mamba" : "train_llama";
  if (!wanted(bn, name)) return;
  const int batch = 16, seq = 256;
  gk_model_config c;
  memset(&c, 0, sizeof c);
  c.arch = arch;
  c.vocab = 10;
  c.d_model = 64;
  c.n_layers = 2;
  c.d_state = 16;
  c.selection = 1;
  c.heads = 4;
  c.kv_heads = 2;
  gk_model m;
  train_ctx t = {NULL, NULL, NULL};
  row r = {name, "step", "f32", "", 0, M_TOKENS, (double)batch * seq, NULL, 0, NULL};
  gk_status s = gk_model_init(&m, &c, 1);
  if (s == GK_SUCCESS) {
    snprintf(r.shape, sizeof r.shape, "B=16 T=256 D=64 L=2 %.0fk params", (double)m.n_total / 1e3);
    s = gk_run_create(&m, batch, seq, true, &t.run);
    t.inputs = malloc(sizeof(int32_t) * batch * seq);
    t.targets = malloc(sizeof(int32_t) * batch * seq);
    if (s == GK_SUCCESS && (!t.inputs || !t.targets)) s = GK_ERR_OUT_OF_MEMORY;
    if (s == GK_SUCCESS) {
      for (int i = 0; i < batch * seq; i++) {
        t.inputs[i] = (i * 7) % c.vocab;
        t.targets[i] = (i * 3 + 1) % c.vocab;
      }
      r.ms = median_ms(bn, train_once, &t);
      if (r.ms < 0) r.error = gk_last_error();
    } else {
      r.error = s == GK_ERR_OUT_OF_MEMORY ? "no memory for the batch" : gk_last_error();
    }
    gk_run_free(t.run);
    free(t.inputs), free(t.targets);
    gk_model_free(&m);
  } else {
    r.error = gk_last_error();
  }
  emit(bn, &r);
}

// ---------------------------------------------------------------- command

int gk_cmd_bench(int argc, char **argv) {
  bench bn;
  memset(&bn, 0, sizeof bn);
  bn.first_row = 1;
  int repeat = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) bn.opt.json = 1;
    else if (!strcmp(argv[i], "--quick")) bn.opt.quick = 1;
    else if (!strcmp(argv[i], "--op") || !strcmp(argv[i], "--repeat")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "gradkern bench: %s needs a value (see gradkern bench --help)\n", argv[i]);
        return 2;
      }
      if (argv[i][2] == 'o') bn.opt.only = argv[++i];
      else {
        char *end;
        long v = strtol(argv[++i], &end, 10);
        if (*end || end == argv[i] || v < 1 || v > 1000) {
          fprintf(stderr, "gradkern bench: --repeat '%s' must be an integer in 1..1000\n", argv[i]);
          return 2;
        }
        repeat = (int)v;
      }
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(bench_usage, stdout);
      return 0;
    } else {
      fprintf(stderr, "gradkern bench: unknown option '%s' (see gradkern bench --help)\n", argv[i]);
      return 2;
    }
  }
  bn.opt.repeat = repeat ? repeat : bn.opt.quick ? 3 : 10;
  // Check --op against the benchmarks' names before measuring anything.
  bn.naming = 1;
  bench_ops(&bn);
  bench_adamw(&bn);
  bench_train(&bn, GK_ARCH_MAMBA);
  bench_train(&bn, GK_ARCH_LLAMA);
  bn.naming = 0;
  if (!bn.matched) {
    fprintf(stderr, "gradkern bench: --op '%s' matches no benchmark; the names are: %s\n", bn.opt.only, bn.names);
    return 2;
  }
  const char *gemm_ops[] = {"linear", "matmul", "attention"};
  int need_gemm = !bn.opt.only;
  for (size_t i = 0; i < 3; i++) need_gemm |= bn.opt.only && !strcmp(bn.opt.only, gemm_ops[i]);

  bn.lim.triad_gb_s = measure_triad();
  if (need_gemm) measure_sgemm(&bn.lim, bn.opt.quick);
  else snprintf(bn.lim.blas, sizeof bn.lim.blas, "not measured (no matrix product selected)");
  if (bn.opt.json) {
    fprintf(stderr, "gradkern bench: triad %.1f GB/s; matrix products: %s\n", bn.lim.triad_gb_s, bn.lim.blas);
    printf("[\n");
  } else {
    printf("gradkern bench: %d thread%s, median of up to %d run%s after a warm-up\n", gk_get_num_threads(),
           plural(gk_get_num_threads()), bn.opt.repeat, plural(bn.opt.repeat));
    printf("limits: triad (a = b + s c, 3 x 64 MiB f32, 2 threads) %.1f GB/s; ", bn.lim.triad_gb_s);
    if (bn.lim.sgemm_fwd > 0)
      printf("%s: %.1f GFLOP/s at 4096x2048 @ 2048x5632, %.1f for its two backward products\n", bn.lim.blas,
             bn.lim.sgemm_fwd, bn.lim.sgemm_bwd);
    else printf("matrix products: %s; GFLOP/s only\n", bn.lim.blas);
    printf("%-20s %-8s %-5s %-32s %10s %18s %6s  %s\n", "op", "dir", "dtype", "shape", "ms", "rate", "limit",
           "limit measured");
  }
  bench_ops(&bn);
  bench_adamw(&bn);
  bench_train(&bn, GK_ARCH_MAMBA);
  bench_train(&bn, GK_ARCH_LLAMA);
  if (bn.opt.json) printf("\n]\n");
  return bn.failures ? 1 : 0;
}
