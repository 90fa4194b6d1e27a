// gradkern bench: times every op's forward and backward at training-sized
// shapes (bench_ops lists them), with the machine's limits measured in the same run: a STREAM-like
// triad for memory-bound ops, OpenBLAS's sgemm (loaded at run time, with
// OPENBLAS_CORETYPE=SkylakeX on a CPU with AVX-512) for matrix products. With --device vulkan the
// same ops run on the Vulkan device, their tensors in its buffers, at
// smaller shapes (device_shapes; --cpu-shapes keeps the CPU's, for a real
// GPU), each run waited for, against the device's
// copy bandwidth (tools/bench_vulkan.c); AdamW and the training steps too,
// the steps also on the CPU. Benchmarks measure; no test asserts a time.
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
    "usage: gradkern bench [--device cpu|vulkan] [--cpu-shapes] [--json] [--op NAME] [--repeat N] [--quick]\n"
    "       gradkern bench --list\n"
    "  --device D   cpu (default): host tensors at training shapes, against a triad and OpenBLAS;\n"
    "               vulkan: tensors in the Vulkan device's buffers ($GK_VULKAN_DEVICE picks one)\n"
    "               at shapes a CPU driver gets through, each run waited for, against the\n"
    "               device's copy bandwidth; rows with bytes and FLOPs per call; the training\n"
    "               steps also on the CPU\n"
    "  --cpu-shapes with --device vulkan: the CPU's training shapes (a GPU finishes the smaller\n"
    "               ones in about what a submit and wait cost); a tensor past the device's\n"
    "               binding range fails its row\n"
    "  --json       one JSON array of rows instead of the table\n"
    "  --op NAME    only rows whose op is NAME (rmsnorm, linear, adamw, train_mamba, ...)\n"
    "  --repeat N   timed runs per row after one warm-up, 1..1000 (default 10; 3 with --quick);\n"
    "               rows slower than a few seconds run fewer\n"
    "  --quick      fewer repeats and a smaller time budget per row\n"
    "  --list       the benchmarks' names (what --op takes), one per line, in the order they run\n";

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
  int json, quick, repeat, cpu_shapes;
  const char *only;
  gk_backend device;          // GK_BACKEND_CPU (host tensors, plans on auto) or a device backend
  const char *device_name;    // as --device gave it
  gk_device_type device_type; // where the device backend's tensors live
} options;

typedef struct limits {
  double triad_gb_s;     // 0 until measured
  double sgemm_fwd, sgemm_bwd; // GFLOP/s at the linear's shapes; -1: no BLAS, 0: not measured
  char blas[160];
  double copy_gb_s;      // the device's copy; 0 until measured
  char copy[160];        // how it was measured, or why not
} limits;

// The shapes the ops are timed at.
typedef struct shapes {
  int64_t rows[2][2];        // norms, activations, softmax: a LLaMA-sized hidden state (2048) and a wide MLP (8192)
  int64_t m, k, n;           // linear x (m, k) -> n; matmul (m, k) @ (k, n)
  int64_t attn[3], attn_t[2]; // attention: B, H, Dh; the lengths T
  int64_t logits[2];         // cross-entropy: rows, vocabulary
  int64_t tokens[2], vocab, dim; // embedding
  int64_t rope[4];           // B, T, H, Dh
  int64_t bdl[3];            // conv1d, selective scan: B, D, L
  int64_t adamw;             // AdamW's parameters
} shapes;

static const shapes cpu_shapes = {{{4096, 2048}, {4096, 8192}}, 4096, 2048, 5632, {4, 16, 64}, {1024, 4096},
                                  {2048, 32000}, {8, 1024}, 32000, 2048, {4, 1024, 16, 64}, {4, 1536, 1024},
                                  50 * 1000 * 1000};
// On a device: what a CPU driver (lavapipe: about 0.1-0.5 GB/s and
// GFLOP/s) gets through in a few minutes, the row widths kept; every
// tensor within one binding (128 MiB on lavapipe).
static const shapes device_shapes = {{{512, 2048}, {512, 8192}}, 256, 512, 1408, {1, 8, 64}, {256, 1024},
                                     {256, 32000}, {2, 256}, 8192, 512, {1, 1024, 16, 64}, {1, 768, 1024},
                                     4 * 1000 * 1000};

typedef struct bench {
  options opt;
  limits lim;
  const shapes *sh;
  int first_row;
  int failures;
  // The naming pass (before anything is measured): every benchmark only
  // adds its name to `names` ("rmsnorm, linear, ...") and notes whether
  // --op matches it.
  int naming, matched;
  char names[512];
} bench;

// ---------------------------------------------------------------- limits

enum { TRIAD_N = 64 * 1024 * 1024 / 4, TRIAD_THREADS = 2, TRIAD_REPS = 5, COPY_REPS = 5 };

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
// On a CPU with AVX-512 OpenBLAS is told SkylakeX whatever the environment
// says (Debian's misdetects these CPUs; a preset lower core type, with
// OPENBLAS_L2_SIZE, would run its AVX2 kernels and understate the limit);
// elsewhere the environment's choice stands.
static void measure_sgemm(limits *l, int quick) {
  if (__builtin_cpu_supports("avx512f")) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    unsetenv("OPENBLAS_L2_SIZE");
  }
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
           core ? core() : "?", gk_get_num_threads(), plural(gk_get_num_threads()),
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
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

// The device's copy bandwidth (--device vulkan): vkCmdCopyBuffer between two
// 64 MiB buffers, read + write counted, both buffers written first (the
// copies move data the device wrote, as the ops do); as many copies per
// submit as last about 50 ms (a GPU copies 64 MiB in about what a submit and
// wait cost, which would otherwise halve the figure); the best of a few.
static void measure_copy(limits *l) {
  const char *why = "not built with the Vulkan backend";
#ifdef GK_WITH_VULKAN
  const size_t bytes = (size_t)64 << 20;
  gk_bench_copier *c;
  why = gk_bench_copier_open(bytes, &c);
  double t0 = now();
  if (!why && !gk_bench_copier_run(c, 1, 1)) why = "the copy failed";
  double best = 1e30;
  int copies = (int)fmin(256, 0.05 / (now() - t0) + 1);
  for (int rep = 0; rep < COPY_REPS && !why; rep++) {
    t0 = now();
    if (!gk_bench_copier_run(c, copies, 0)) why = "the copy failed";
    best = fmin(best, (now() - t0) / copies);
  }
  gk_bench_copier_close(c);
  if (!why) l->copy_gb_s = 2.0 * (double)bytes / best * 1e-9;
#endif
  if (l->copy_gb_s > 0)
    snprintf(l->copy, sizeof l->copy, "copy (vkCmdCopyBuffer between two 64 MiB buffers, read + write) %.1f GB/s",
             l->copy_gb_s);
  else snprintf(l->copy, sizeof l->copy, "copy not measured (%s): GB/s only", why);
}

// ---------------------------------------------------------------- rows

typedef enum metric { M_BYTES, M_FLOPS, M_TOKENS } metric;

typedef struct row {
  const char *op, *direction, *dtype;
  const char *device;     // where it ran, with --device; NULL on the CPU bench (no device column)
  char shape[96];
  double ms;              // median
  metric kind;            // the amount the rate is of
  double bytes, flops, tokens; // per run; < 0: not counted
  const char *limit_name; // NULL: none
  double limit_value;
  const char *error; // not NULL: the row did not run
} row;

// A row of `op` run on `device`, nothing counted yet.
static row row_start(const bench *bn, gk_backend device, const char *op, const char *direction, const char *dtype,
                     metric kind) {
  return (row){.op = op, .direction = direction, .dtype = dtype,
               .device = bn->opt.device == GK_BACKEND_CPU ? NULL : gk_backend_name(device), .kind = kind,
               .bytes = -1, .flops = -1, .tokens = -1};
}

static double amount_of(const row *r, metric m) {
  return m == M_BYTES ? r->bytes : m == M_FLOPS ? r->flops : r->tokens;
}

// Whether the row gives its amount of `m` (the CPU bench: the rate's only).
static int shows(const row *r, metric m) {
  return amount_of(r, m) >= 0 && (r->kind == m || r->device);
}

// Per second: tokens, or G of bytes or FLOPs.
static double rate_of(const row *r, metric m) {
  return amount_of(r, m) / (r->ms * 1e-3) * (m == M_TOKENS ? 1 : 1e-9);
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 32) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

// `, "gb_s": rate, "bytes": amount` (or of FLOPs); the rate null where the
// row does not show it, and then the amount too with --device.
static void json_amount(const row *r, metric m, const char *rate_name, const char *amount_name) {
  printf(", \"%s\": ", rate_name);
  if (shows(r, m)) printf("%.2f, \"%s\": %.0f", rate_of(r, m), amount_name, amount_of(r, m));
  else if (r->device) printf("null, \"%s\": null", amount_name);
  else printf("null");
}

static void emit(bench *bn, const row *r) {
  double rate = r->error ? 0 : rate_of(r, r->kind);
  double frac = r->limit_name && r->limit_value > 0 && !r->error ? rate / r->limit_value : -1;
  if (r->error) bn->failures++;
  int first = bn->first_row;
  bn->first_row = 0;
  if (bn->opt.json) {
    printf("%s  {\"op\": ", first ? "" : ",\n");
    json_string(r->op);
    printf(", \"direction\": \"%s\", \"dtype\": \"%s\", ", r->direction, r->dtype);
    if (r->device) printf("\"device\": \"%s\", ", r->device);
    printf("\"shape\": ");
    json_string(r->shape);
    if (r->error) {
      printf(", \"error\": ");
      json_string(r->error);
      printf("}");
    } else {
      printf(", \"gradkern_ms\": %.4f", r->ms);
      json_amount(r, M_BYTES, "gb_s", "bytes");
      json_amount(r, M_FLOPS, "gflop_s", "flops");
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
    printf("%-20s %-8s %-5s ", r->op, r->direction, r->dtype);
    if (r->device) printf("%-6s ", r->device);
    if (r->error) {
      printf("%-32s failed: %s\n", r->shape, r->error);
      return;
    }
    char rate_s[32], frac_s[16];
    snprintf(rate_s, sizeof rate_s, "%.1f %s", rate,
             r->kind == M_BYTES ? "GB/s" : r->kind == M_FLOPS ? "GFLOP/s" : "tokens/s");
    if (frac >= 0) snprintf(frac_s, sizeof frac_s, "%.0f%%", 100 * frac);
    else snprintf(frac_s, sizeof frac_s, "-");
    printf("%-32s %10.3f %18s %6s  ", r->shape, r->ms, rate_s, frac_s);
    if (r->device) {
      char amounts[2][32];
      for (int i = 0; i < 2; i++) {
        double amount = amount_of(r, i ? M_FLOPS : M_BYTES);
        if (amount >= 0) snprintf(amounts[i], sizeof amounts[i], "%.2f", amount * 1e-6);
        else snprintf(amounts[i], sizeof amounts[i], "-");
      }
      printf("%10s %10s  ", amounts[0], amounts[1]);
    }
    printf("%s\n", r->limit_name ? r->limit_name : "");
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

// A run on a device is waited for, so that its time counts the device's work.
static gk_status synced(gk_status s, gk_backend device) {
  return s == GK_SUCCESS && device != GK_BACKEND_CPU ? gk_backend_synchronize(device) : s;
}

// ---------------------------------------------------------------- memory

// A tensor's memory: host memory, or on a device a buffer of it.
typedef struct mem {
  void *host;
  gk_buffer *buf;
} mem;

// Host memory for `bytes` (64-byte aligned, to be filled and placed), or NULL.
static void *mem_host(mem *m, size_t bytes) {
  memset(m, 0, sizeof *m);
  return m->host = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
}

// t, made on m's host memory and filled, placed on the bench's device: there
// its bytes are uploaded into a buffer, t points into it and the host memory
// is freed.
static gk_status mem_place(mem *m, const options *o, gk_tensor *t) {
  if (o->device == GK_BACKEND_CPU) return GK_SUCCESS;
  size_t bytes = (size_t)gk_tensor_numel(t) * gk_dtype_size(t->dtype);
  gk_status s = gk_buffer_alloc(o->device, bytes, &m->buf);
  if (s == GK_SUCCESS) s = gk_buffer_upload(m->buf, 0, m->host, bytes);
  free(m->host);
  m->host = NULL;
  t->data = gk_buffer_address(m->buf);
  t->device = o->device_type;
  return s;
}

static void mem_free(mem *m) {
  free(m->host);
  gk_buffer_free(m->buf);
  memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------- plan ops

typedef struct plan_run {
  gk_plan *plan;
  gk_arg args[24];
  mem memory[24];
  int nargs;
  void *ws;
  size_t ws_bytes;
  gk_backend device;
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
  for (int i = 0; i < r->nargs; i++) mem_free(&r->memory[i]);
  free(r->ws);
  gk_plan_destroy(r->plan);
  memset(r, 0, sizeof *r);
}

static gk_status plan_run_setup(plan_run *r, const gk_op_desc *d, const options *o) {
  memset(r, 0, sizeof *r);
  r->device = o->device;
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
    void *p = mem_host(&r->memory[r->nargs], bytes);
    r->nargs++;
    if (!p) {
      plan_run_free(r);
      return GK_ERR_OUT_OF_MEMORY;
    }
    fill(p, dt, n, a->kind, range > 0 ? range : 1);
    gk_tensor_init(&a->tensor, p, dt, rank, shape);
    if ((s = mem_place(&r->memory[r->nargs - 1], o, &a->tensor)) != GK_SUCCESS) {
      plan_run_free(r);
      return s;
    }
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
  return synced(gk_plan_run(r->plan, r->args, r->nargs, r->ws, r->ws_bytes), r->device);
}

static void shape_text(char *out, size_t n, const gk_op_desc *d, const char *extra) {
  size_t len = 0;
  for (int i = 0; i < d->rank && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%lld", i ? "x" : "", (long long)d->shape[i]);
  if (extra && len < n) snprintf(out + len, n - len, "%s", extra);
}

// The kinds of limit an op is measured against.
typedef enum bound { B_MEMORY, B_GEMM, B_NONE } bound;

// One row per direction and dtype (f32, bf16) the op supports, on the
// bench's device. flops[dir]: the floating-point operations of a run per
// element of the op's shape (the rate of B_GEMM, also given with --device).
// d->act.from_output (relu, sigmoid) is the backward's only: the forward row
// runs without it, and the backward row's shape says that it takes y.
static void bench_desc(bench *bn, const char *name, gk_op_desc *d, bound b, const double flops[2], const char *extra,
                       int fused_inplace) {
  if (!wanted(bn, name)) return;
  static const gk_dtype dts[] = {GK_F32, GK_BF16};
  const options *o = &bn->opt;
  const int from_output = d->act.from_output;
  if (o->device != GK_BACKEND_CPU) d->backend = o->device;
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++) {
      if (fused_inplace && dir == GK_BACKWARD) continue;
      d->dtype = dts[t];
      d->direction = (gk_direction)dir;
      d->act.from_output = dir == GK_BACKWARD ? from_output : 0;
      gk_plan *probe;
      if (gk_plan_create(d, &probe) != GK_SUCCESS) continue; // this op has no such dtype
      gk_plan_destroy(probe);
      row r = row_start(bn, o->device, name, dir ? "backward" : "forward", gk_dtype_name(dts[t]),
                        b == B_GEMM ? M_FLOPS : M_BYTES);
      shape_text(r.shape, sizeof r.shape, d, d->act.from_output ? " (dy, y) -> dx" : extra);
      r.flops = flops[dir];
      for (int i = 0; i < d->rank; i++) r.flops *= (double)d->shape[i];
      plan_run pr;
      char err[200];
      if (plan_run_setup(&pr, d, o) != GK_SUCCESS) {
        snprintf(err, sizeof err, "%s", gk_last_error());
        r.error = err;
        emit(bn, &r);
        continue;
      }
      if (fused_inplace) // DLOGITS is the very same view as LOGITS (read once, written once)
        for (int i = 0; i < pr.nargs; i++)
          for (int j = 0; j < pr.nargs; j++)
            if (pr.args[i].kind == GK_ARG_DLOGITS && pr.args[j].kind == GK_ARG_LOGITS) {
              mem_free(&pr.memory[i]);
              pr.args[i].tensor.data = pr.args[j].tensor.data;
            }
      r.ms = median_ms(bn, plan_run_once, &pr);
      if (r.ms < 0) {
        snprintf(err, sizeof err, "%s", gk_last_error());
        r.error = err;
      }
      r.bytes = pr.bytes;
      if (o->device != GK_BACKEND_CPU) {
        if (b == B_MEMORY) {
          r.limit_name = "copy_gb_s";
          r.limit_value = bn->lim.copy_gb_s;
        }
      } else if (b == B_GEMM) {
        r.limit_value = dir ? bn->lim.sgemm_bwd : bn->lim.sgemm_fwd;
        r.limit_name = r.limit_value > 0 ? (dir ? "openblas_sgemm_bwd_gflop_s" : "openblas_sgemm_fwd_gflop_s") : NULL;
      } else if (b == B_MEMORY) {
        r.limit_name = "triad_gb_s";
        r.limit_value = bn->lim.triad_gb_s;
      }
      plan_run_free(&pr);
      emit(bn, &r);
    }
}

// FLOPs per element of the op's shape (X; gated ops: X, one of the two
// halves), forward and backward: each add, multiply, divide, compare, exp,
// log and erf of the formulas in gradkern.h counted once. Estimates of the
// math, not counts of any kernel's instructions.
typedef struct op_flops {
  gk_op op;
  double flops[2];
} op_flops;

// Every op at the bench's shapes (cpu_shapes: norms, activations and softmax
// on 4096 x 2048 and 4096 x 8192, attention at T = 1024 and 4096, and the
// rest; device_shapes). relu's and sigmoid's backward take the forward's
// output y (act.from_output), as PyTorch's autograd and the Python binding
// run them: sigmoid's dx = dy y (1 - y) is 3 operations.
static void bench_ops(bench *bn) {
  static const op_flops act[] = {{GK_OP_RELU, {1, 1}},    {GK_OP_GELU, {5, 11}},    {GK_OP_SILU, {4, 8}},
                                 {GK_OP_SIGMOID, {3, 3}}, {GK_OP_SOFTPLUS, {5, 5}}};
  static const op_flops gated[] = {
      {GK_OP_GLU, {4, 8}}, {GK_OP_REGLU, {2, 4}}, {GK_OP_SWIGLU, {5, 11}}, {GK_OP_GEGLU, {6, 14}}};
  static const double rmsnorm[2] = {4, 9}, layernorm[2] = {8, 13}, softmax[2] = {5, 4}, add[2] = {1, 0},
                      mul[2] = {1, 2}, cross_entropy[2] = {4, 3}, fused[2] = {7, 0}, rope[2] = {3, 3};
  const shapes *sh = bn->sh;
  const int64_t *rows = sh->rows[0];
  char extra[64];
  gk_op_desc d;
  for (int s = 0; s < 2; s++) {
    const int64_t *shape = sh->rows[s];
    for (size_t i = 0; i < sizeof act / sizeof *act; i++) {
      gk_op_desc_init(&d, act[i].op, GK_FORWARD, GK_F32, 2, shape);
      d.act.from_output = act[i].op == GK_OP_RELU || act[i].op == GK_OP_SIGMOID;
      bench_desc(bn, gk_op_name(act[i].op), &d, B_MEMORY, act[i].flops, NULL, 0);
    }
    for (size_t i = 0; i < sizeof gated / sizeof *gated; i++) {
      gk_op_desc_init(&d, gated[i].op, GK_FORWARD, GK_F32, 2, shape);
      d.gated.form = GK_GATED_TWO_TENSOR;
      bench_desc(bn, gk_op_name(gated[i].op), &d, B_MEMORY, gated[i].flops, " (x, gate)", 0);
    }
    gk_op_desc_init(&d, GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "rmsnorm", &d, B_MEMORY, rmsnorm, NULL, 0);
    gk_op_desc_init(&d, GK_OP_LAYERNORM, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "layernorm", &d, B_MEMORY, layernorm, NULL, 0);
    gk_op_desc_init(&d, GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 2, shape);
    bench_desc(bn, "softmax", &d, B_MEMORY, softmax, NULL, 0);
  }
  gk_op_desc_init(&d, GK_OP_ADD, GK_FORWARD, GK_F32, 2, rows);
  bench_desc(bn, "add", &d, B_MEMORY, add, NULL, 0);
  gk_op_desc_init(&d, GK_OP_MUL, GK_FORWARD, GK_F32, 2, rows);
  bench_desc(bn, "mul", &d, B_MEMORY, mul, NULL, 0);

  // 2 n per element of x forward, twice that backward (dx and dW).
  const int64_t x[2] = {sh->m, sh->k};
  const double gemm[2] = {2.0 * (double)sh->n, 4.0 * (double)sh->n};
  gk_op_desc_init(&d, GK_OP_LINEAR, GK_FORWARD, GK_F32, 2, x);
  d.linear.out_features = sh->n;
  snprintf(extra, sizeof extra, " -> %lld", (long long)sh->n);
  bench_desc(bn, "linear", &d, B_GEMM, gemm, extra, 0);
  gk_op_desc_init(&d, GK_OP_MATMUL, GK_FORWARD, GK_F32, 2, x);
  d.matmul.n = sh->n;
  snprintf(extra, sizeof extra, " @ %lldx%lld", (long long)sh->k, (long long)sh->n);
  bench_desc(bn, "matmul", &d, B_GEMM, gemm, extra, 0);

  // Causal: half of the 2 B H T^2 Dh of each product, T per element of q;
  // forward has 2 products, backward 5 (the score recomputation, dv, dp,
  // dq, dk).
  for (int i = 0; i < 2; i++) {
    const int64_t T = sh->attn_t[i], q[4] = {sh->attn[0], sh->attn[1], T, sh->attn[2]};
    const double attn_flops[2] = {2.0 * (double)T, 5.0 * (double)T};
    gk_op_desc_init(&d, GK_OP_ATTENTION, GK_FORWARD, GK_F32, 4, q);
    bench_desc(bn, "attention", &d, B_GEMM, attn_flops, " causal", 0);
  }

  gk_op_desc_init(&d, GK_OP_CROSS_ENTROPY, GK_FORWARD, GK_F32, 2, sh->logits);
  d.index_dtype = GK_I32;
  bench_desc(bn, "cross_entropy", &d, B_MEMORY, cross_entropy, NULL, 0);
  d.ce.fused_grad = 1;
  bench_desc(bn, "cross_entropy_fused", &d, B_MEMORY, fused, " dlogits in place", 1);

  // Backward adds each token's dy row (dim) into dW.
  const double embedding[2] = {0, (double)sh->dim};
  gk_op_desc_init(&d, GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, sh->tokens);
  d.index_dtype = GK_I32;
  d.embedding.num_embeddings = sh->vocab;
  d.embedding.dim = sh->dim;
  snprintf(extra, sizeof extra, " V=%lld D=%lld", (long long)sh->vocab, (long long)sh->dim);
  bench_desc(bn, "embedding", &d, B_MEMORY, embedding, extra, 0);

  gk_op_desc_init(&d, GK_OP_ROPE, GK_FORWARD, GK_F32, 4, sh->rope);
  bench_desc(bn, "rope", &d, B_MEMORY, rope, NULL, 0);

  // Per (b, d, t), width W = 4: forward 2 W + 3 (taps, bias, SiLU);
  // backward 6 W + 9 (the pre-activation again, SiLU's derivative, dx, dW, db).
  const double conv[2] = {11, 33};
  gk_op_desc_init(&d, GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, sh->bdl);
  d.conv.silu = 1;
  bench_desc(bn, "conv1d", &d, B_MEMORY, conv, " W=4 silu", 0);

  // Per (b, d, t), N = 16 states: forward 7 N + 11 (exp(delta A), the state
  // update and C h per state; softplus, D x and the z gate); backward 24 N +
  // 22 (the states again, dh, dA, dB, dC, ddelta, dx per state).
  const double scan[2] = {7 * 16 + 11, 24 * 16 + 22};
  gk_op_desc_init(&d, GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3, sh->bdl);
  d.scan.has_D = d.scan.has_z = d.scan.has_delta_bias = d.scan.delta_softplus = 1;
  bench_desc(bn, "selective_scan", &d, B_NONE, scan, " N=16 D z softplus", 0);
}

// ---------------------------------------------------------------- AdamW

typedef struct adamw_ctx {
  gk_adamw_config cfg;
  gk_tensor p, g, m, v, master;
  int has_master;
  int64_t step;
  gk_backend device;
} adamw_ctx;

static gk_status adamw_once(void *ctx) {
  adamw_ctx *a = ctx;
  return synced(gk_adamw_step(&a->cfg, 1, &a->p, &a->g, &a->m, &a->v, a->has_master ? &a->master : NULL, ++a->step),
                a->device);
}

// AdamW over the bench's parameters, f32 and bf16 with f32 master weights
// (on a device f32 only: it takes no 16-bit parameters).
static void bench_adamw(bench *bn) {
  if (!wanted(bn, "adamw")) return;
  const options *o = &bn->opt;
  const int64_t n = bn->sh->adamw;
  static const gk_dtype dts[] = {GK_F32, GK_BF16};
  size_t ndts = o->device == GK_BACKEND_CPU ? 2 : 1;
  for (size_t t = 0; t < ndts; t++) {
    adamw_ctx a;
    memset(&a, 0, sizeof a);
    gk_adamw_config_init(&a.cfg);
    a.device = o->device;
    int with_master = dts[t] != GK_F32;
    size_t es = gk_dtype_size(dts[t]);
    mem mp, mg, mm, mv, mmaster = {NULL, NULL};
    void *p = mem_host(&mp, (size_t)n * es), *g = mem_host(&mg, (size_t)n * es);
    float *m = mem_host(&mm, (size_t)n * 4), *v = mem_host(&mv, (size_t)n * 4);
    float *master = with_master ? mem_host(&mmaster, (size_t)n * 4) : NULL;
    row r = row_start(bn, o->device, "adamw", "step", gk_dtype_name(dts[t]), M_BYTES);
    snprintf(r.shape, sizeof r.shape, "%lldM params%s", (long long)(n / 1000000), with_master ? ", f32 master" : "");
    r.limit_name = o->device == GK_BACKEND_CPU ? "triad_gb_s" : "copy_gb_s";
    r.limit_value = o->device == GK_BACKEND_CPU ? bn->lim.triad_gb_s : bn->lim.copy_gb_s;
    if (!p || !g || !m || !v || (with_master && !master)) {
      r.error = "no memory for the parameters";
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
      gk_status s = GK_SUCCESS;
      mem *placed[] = {&mp, &mg, &mm, &mv, &mmaster};
      gk_tensor *tensors[] = {&a.p, &a.g, &a.m, &a.v, &a.master};
      for (int i = 0; i < 4 + a.has_master && s == GK_SUCCESS; i++) s = mem_place(placed[i], o, tensors[i]);
      // read p, g, m, v (and master), write p, m, v (and master)
      r.bytes = (double)n * (double)(2 * es + es + 16 + (master ? 8 : 0));
      // m and v (7), the decay and the step (7) per parameter
      r.flops = 14.0 * (double)n;
      r.ms = s == GK_SUCCESS ? median_ms(bn, adamw_once, &a) : -1;
      if (r.ms < 0) r.error = gk_last_error();
    }
    emit(bn, &r);
    mem_free(&mp), mem_free(&mg), mem_free(&mm), mem_free(&mv), mem_free(&mmaster);
  }
}

// ---------------------------------------------------------------- training step

typedef struct train_ctx {
  gk_run *run;
  int32_t *inputs, *targets;
} train_ctx;

// gk_run_step brings the loss back to the host: a device run has finished.
static gk_status train_once(void *ctx) {
  train_ctx *t = ctx;
  double loss;
  return gk_run_step(t->run, t->inputs, t->targets, &loss);
}

// gk_run_step (forward and backward of the whole model) on the default model
// of `gradkern train` (width 64, 2 layers, state 16, the selective-copying
// task's vocabulary of 10, 16 sequences of 256) and a LLaMA of the same
// width and depth (4 heads, 2 key/value heads), on `device` (the model's
// device copy and a device run) or the CPU.
static void bench_train(bench *bn, gk_arch arch, gk_backend device) {
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
  row r = row_start(bn, device, name, "step", "f32", M_TOKENS);
  r.tokens = (double)batch * seq;
  gk_status s = gk_model_init(&m, &c, 1);
  if (s == GK_SUCCESS) {
    snprintf(r.shape, sizeof r.shape, "B=16 T=256 D=64 L=2 %.0fk params", (double)m.n_total / 1e3);
    if (device == GK_BACKEND_CPU) s = gk_run_create(&m, batch, seq, true, &t.run);
    else if ((s = gk_model_to_device(&m, device)) == GK_SUCCESS) s = gk_run_create_device(&m, batch, seq, true, &t.run);
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

// Every benchmark, in the order of the output (on a device the training
// steps also on the CPU, each after the device's).
static void bench_all(bench *bn) {
  bench_ops(bn);
  bench_adamw(bn);
  static const gk_arch archs[] = {GK_ARCH_MAMBA, GK_ARCH_LLAMA};
  for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
    bench_train(bn, archs[i], bn->opt.device);
    if (bn->opt.device != GK_BACKEND_CPU) bench_train(bn, archs[i], GK_BACKEND_CPU);
  }
}

// ---------------------------------------------------------------- command

// The lines before the rows: the limits measured (on stderr with --json,
// before the array opens), else the table's header.
static void print_header(const bench *bn) {
  const options *o = &bn->opt;
  const limits *l = &bn->lim;
  const char *dev = gk_backend_device_description(o->device);
  if (o->json) {
    if (o->device != GK_BACKEND_CPU) fprintf(stderr, "gradkern bench: %s: %s; %s\n", gk_backend_name(o->device), dev, l->copy);
    else fprintf(stderr, "gradkern bench: triad %.1f GB/s; matrix products: %s\n", l->triad_gb_s, l->blas);
    printf("[\n");
  } else if (o->device != GK_BACKEND_CPU) {
    printf("gradkern bench: %s: %s; median of up to %d run%s after a warm-up, each waited for "
           "(gk_backend_synchronize); the cpu rows with %d thread%s\n",
           gk_backend_name(o->device), dev, o->repeat, plural(o->repeat), gk_get_num_threads(),
           plural(gk_get_num_threads()));
    printf("limits: %s; matrix products and attention: GFLOP/s only\n", l->copy);
    printf("%-20s %-8s %-5s %-6s %-32s %10s %18s %6s  %10s %10s  %s\n", "op", "dir", "dtype", "device", "shape", "ms",
           "rate", "limit", "MB/call", "MFLOP/call", "limit measured");
  } else {
    printf("gradkern bench: %d thread%s, median of up to %d run%s after a warm-up\n", gk_get_num_threads(),
           plural(gk_get_num_threads()), o->repeat, plural(o->repeat));
    printf("limits: triad (a = b + s c, 3 x 64 MiB f32, 2 threads) %.1f GB/s; ", l->triad_gb_s);
    if (l->sgemm_fwd > 0)
      printf("%s: %.1f GFLOP/s at 4096x2048 @ 2048x5632, %.1f for its two backward products\n", l->blas, l->sgemm_fwd,
             l->sgemm_bwd);
    else printf("matrix products: %s; GFLOP/s only\n", l->blas);
    printf("%-20s %-8s %-5s %-32s %10s %18s %6s  %s\n", "op", "dir", "dtype", "shape", "ms", "rate", "limit",
           "limit measured");
  }
}

// Whether `device` can run here; else a message with the reason and false.
static int device_ready(options *o) {
  for (int i = 0; i < gk_backend_count(); i++) {
    gk_backend_info info;
    if (gk_backend_get(i, &info) != GK_SUCCESS || info.id != o->device) continue;
    if (!info.available) {
      fprintf(stderr, "gradkern bench: --device %s cannot run here: %s\n", o->device_name, info.reason);
      return 0;
    }
    o->device_type = info.device;
    return 1;
  }
  fprintf(stderr, "gradkern bench: --device %s: this gradkern was built without that backend\n", o->device_name);
  return 0;
}

int gk_cmd_bench(int argc, char **argv) {
  bench bn;
  memset(&bn, 0, sizeof bn);
  bn.first_row = 1;
  bn.opt.device = GK_BACKEND_CPU;
  int repeat = 0, list = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) bn.opt.json = 1;
    else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--quick")) bn.opt.quick = 1;
    else if (!strcmp(argv[i], "--cpu-shapes")) bn.opt.cpu_shapes = 1;
    else if (!strcmp(argv[i], "--op") || !strcmp(argv[i], "--repeat") || !strcmp(argv[i], "--device")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "gradkern bench: %s needs a value (see gradkern bench --help)\n", argv[i]);
        return 2;
      }
      if (argv[i][2] == 'o') bn.opt.only = argv[++i];
      else if (argv[i][2] == 'd') {
        bn.opt.device_name = argv[++i];
        if (!strcmp(argv[i], "vulkan")) bn.opt.device = GK_BACKEND_VULKAN;
        else if (strcmp(argv[i], "cpu")) {
          fprintf(stderr, "gradkern bench: --device '%s' must be cpu or vulkan\n", argv[i]);
          return 2;
        }
      } else {
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
  int on_device = bn.opt.device != GK_BACKEND_CPU;
  if (bn.opt.cpu_shapes && !on_device) {
    fprintf(stderr, "gradkern bench: --cpu-shapes is for --device vulkan (the CPU bench uses them already)\n");
    return 2;
  }
  bn.sh = on_device && !bn.opt.cpu_shapes ? &device_shapes : &cpu_shapes;
  // Check --op against the benchmarks' names before measuring anything.
  bn.naming = 1;
  bench_all(&bn);
  bn.naming = 0;
  if (list) {
    for (const char *p = bn.names; *p; p++)
      if (*p != ' ') putchar(*p == ',' ? '\n' : *p);
    putchar('\n');
    return 0;
  }
  if (!bn.matched) {
    fprintf(stderr, "gradkern bench: --op '%s' matches no benchmark; the names are: %s\n", bn.opt.only, bn.names);
    return 2;
  }
  if (on_device && !device_ready(&bn.opt)) return 1;
  if (on_device) {
    measure_copy(&bn.lim);
  } else {
    const char *gemm_ops[] = {"linear", "matmul", "attention"};
    int need_gemm = !bn.opt.only;
    for (size_t i = 0; i < 3; i++) need_gemm |= bn.opt.only && !strcmp(bn.opt.only, gemm_ops[i]);
    bn.lim.triad_gb_s = measure_triad();
    if (need_gemm) measure_sgemm(&bn.lim, bn.opt.quick);
    else snprintf(bn.lim.blas, sizeof bn.lim.blas, "not measured (no matrix product selected)");
  }
  print_header(&bn);
  bench_all(&bn);
  if (bn.opt.json) printf("\n]\n");
  return bn.failures ? 1 : 0;
}
