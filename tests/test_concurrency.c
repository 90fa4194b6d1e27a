// Several threads calling the library at once. Every op family (forward and
// backward, f32) and the optimizers run from CALLERS threads together, each
// run on a plan shared by all callers or on a plan of its own, while the
// main thread keeps changing the thread count; every output must match, bit
// for bit, the same run made alone with one thread. Before that, one calling
// thread runs each plan with the thread count changed between runs (2, 3,
// 1, 4). Built also under ThreadSanitizer (test_concurrency_tsan), where any
// data race in the library fails the test, and with OpenMP
// (test_concurrency_openmp, GK_TEST_OPENMP): the same checks with the
// parallel sections on libgomp's team (gk_set_openmp_runtime), after the
// runtime's own checks (bad libraries refused by name, sections on the team).
//
// The contract tested (include/gradkern.h, "threads"): plans are immutable
// after creation, so any number of threads may run one plan at once on
// their own tensors and workspaces; gk_set_num_threads may be called at any
// time and changes only how many threads later parallel sections use.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include "plan_harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

enum { CALLERS = 3, ROUNDS = 2, RESTARTS = 1000 };

// ---------------------------------------------------------------- argument roles (f32 only)

static bool is_output(const gk_op_desc *d, int k) {
  if (d->direction == GK_FORWARD)
    return k == GK_ARG_Y || k == GK_ARG_LOSS || k == GK_ARG_LSE || k == GK_ARG_RSTD || k == GK_ARG_MEAN ||
           k == GK_ARG_FINAL_STATE || k == GK_ARG_CHUNK_STATES;
  switch (k) {
  case GK_ARG_DX: case GK_ARG_DGATE: case GK_ARG_DWEIGHT: case GK_ARG_DBIAS: case GK_ARG_DA: case GK_ARG_DB:
  case GK_ARG_DLOGITS: case GK_ARG_DQ: case GK_ARG_DK: case GK_ARG_DV: case GK_ARG_DINITIAL_STATE:
  case GK_ARG_DU: case GK_ARG_DDELTA: case GK_ARG_DC: case GK_ARG_DD: case GK_ARG_DZ: case GK_ARG_DDELTA_BIAS:
    return true;
  default: return false;
  }
}

static gk_dtype dtype_of(const gk_op_desc *d, int k) {
  return k == GK_ARG_TARGET || k == GK_ARG_INDEX ? d->index_dtype : GK_F32;
}

// Valid class and token indices, decaying scan states (A < 0, dt > 0),
// everything else of order 1.
static void fill_input(const gk_op_desc *d, const gk_tensor *t, int k) {
  int64_t n = gk_tensor_numel(t);
  if (k == GK_ARG_TARGET)
    for (int64_t i = 0; i < n; i++) tset(t, i, (double)(rng_next() % (uint64_t)d->shape[d->rank - 1]));
  else if (k == GK_ARG_INDEX)
    for (int64_t i = 0; i < n; i++) tset(t, i, (double)(rng_next() % (uint64_t)d->embedding.num_embeddings));
  else if (k == GK_ARG_A && d->op == GK_OP_SELECTIVE_SCAN) tfill(t, -1.5, -0.2);
  else if (k == GK_ARG_DELTA) tfill(t, 0.05, 0.6);
  else tfill(t, -1, 1);
}

static const char *describe(const gk_op_desc *d, layout lay, char *buf, size_t n) {
  (void)lay;
  snprintf(buf, n, "%s %s", gk_op_name(d->op), d->direction == GK_FORWARD ? "fwd" : "bwd");
  return buf;
}

static const plan_roles roles = {.is_output = is_output, .dtype_of = dtype_of, .fill = fill_input,
                                 .describe = describe};

// ---------------------------------------------------------------- cases

// Shapes big enough to be split into several tasks, small enough for
// ThreadSanitizer.
static int make_cases(gk_op_desc *out) {
  int n = 0;
  static const int64_t rows[2] = {48, 384}, glu_rows[2] = {48, 768}, heads[4] = {1, 2, 96, 16},
                       seq[3] = {2, 48, 64}, mat[3] = {2, 64, 96}, tokens[2] = {4, 48};
  static const gk_op act_ops[] = {GK_OP_RELU, GK_OP_GELU, GK_OP_SILU, GK_OP_SIGMOID, GK_OP_SOFTPLUS};
  for (size_t i = 0; i < sizeof act_ops / sizeof *act_ops; i++)
    gk_op_desc_init(&out[n++], act_ops[i], GK_FORWARD, GK_F32, 2, rows);
  static const gk_op glu_ops[] = {GK_OP_GLU, GK_OP_REGLU, GK_OP_SWIGLU, GK_OP_GEGLU};
  for (size_t i = 0; i < sizeof glu_ops / sizeof *glu_ops; i++)
    gk_op_desc_init(&out[n++], glu_ops[i], GK_FORWARD, GK_F32, 2, glu_rows);
  gk_op_desc_init(&out[n], GK_OP_SWIGLU, GK_FORWARD, GK_F32, 2, rows);
  out[n++].gated.form = GK_GATED_TWO_TENSOR;
  gk_op_desc_init(&out[n++], GK_OP_RMSNORM, GK_FORWARD, GK_F32, 2, rows);
  gk_op_desc_init(&out[n++], GK_OP_LAYERNORM, GK_FORWARD, GK_F32, 2, rows);
  gk_op_desc_init(&out[n], GK_OP_LINEAR, GK_FORWARD, GK_F32, 2, rows);
  out[n++].linear.out_features = 160;
  gk_op_desc_init(&out[n], GK_OP_MATMUL, GK_FORWARD, GK_F32, 3, mat);
  out[n++].matmul.n = 80;
  gk_op_desc_init(&out[n++], GK_OP_SOFTMAX, GK_FORWARD, GK_F32, 2, rows);
  gk_op_desc_init(&out[n++], GK_OP_LOG_SOFTMAX, GK_FORWARD, GK_F32, 2, rows);
  gk_op_desc_init(&out[n++], GK_OP_CROSS_ENTROPY, GK_FORWARD, GK_F32, 2, rows);
  gk_op_desc_init(&out[n], GK_OP_EMBEDDING, GK_FORWARD, GK_F32, 2, tokens);
  out[n].embedding.num_embeddings = 50;
  out[n++].embedding.dim = 64;
  gk_op_desc_init(&out[n++], GK_OP_ROPE, GK_FORWARD, GK_F32, 4, heads);
  gk_op_desc_init(&out[n], GK_OP_ATTENTION, GK_FORWARD, GK_F32, 4, heads);
  out[n].attn.kv_heads = 1;
  out[n++].attn.causal = 1;
  for (gk_op op = GK_OP_ADD; op <= GK_OP_MUL; op++) {
    gk_op_desc_init(&out[n], op, GK_FORWARD, GK_F32, 2, rows);
    out[n].binary.b_rank = 1;
    out[n++].binary.b_shape[0] = rows[1];
  }
  gk_op_desc_init(&out[n], GK_OP_CONV1D, GK_FORWARD, GK_F32, 3, seq);
  out[n].conv.width = 4;
  out[n].conv.has_bias = out[n].conv.silu = 1;
  out[n++].conv.has_final_state = 1;
  gk_op_desc_init(&out[n], GK_OP_SELECTIVE_SCAN, GK_FORWARD, GK_F32, 3, seq);
  out[n].scan.d_state = 8;
  out[n].scan.b_layout = out[n].scan.c_layout = GK_SCAN_BATCH;
  out[n].scan.has_D = out[n].scan.has_z = out[n].scan.delta_softplus = 1;
  out[n++].scan.chunk_size = 16;
  return n;
}

// One description in one direction: its tensors, its shared plan, and the
// outputs of a run alone with one thread.
typedef struct job {
  gk_op_desc d;
  argset in;         // inputs and (as canaries) outputs
  argset want;       // outputs of the lone one-thread run
  gk_plan *shared;
  size_t ws_bytes;
} job;

static gk_status run_plan(const gk_plan *plan, const argset *s, size_t ws_bytes) {
  gk_arg args[GK_ARG_COUNT_];
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k]) args[n++] = (gk_arg){(gk_arg_kind)k, s->b[k].t};
  void *w = ws_alloc(ws_bytes);
  gk_status st = gk_plan_run(plan, args, n, w, ws_bytes);
  free(w);
  return st;
}

// True when every output of `got` has the bits of `want`.
static bool outputs_equal(const job *j, const argset *got) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (j->in.have[k] && is_output(&j->d, k) && !tbits_equal(&got->b[k].t, &j->want.b[k].t)) return false;
  return true;
}

static void job_init(job *j, const gk_op_desc *d, const argset *from) {
  j->d = *d;
  j->d.backend = GK_BACKEND_CPU;
  check(plan_build(&roles, &j->d, CONTIGUOUS, from, &j->in), "%s %s: %s", gk_op_name(d->op),
        d->direction == GK_FORWARD ? "fwd" : "bwd", gk_last_error());
  check(gk_plan_create(&j->d, &j->shared) == GK_SUCCESS, "plan: %s", gk_last_error());
  gk_plan_workspace_size(j->shared, &j->ws_bytes);
  gk_set_num_threads(1);
  clone_outputs(&roles, &j->d, &j->in, CONTIGUOUS, &j->want);
  check(run_plan(j->shared, &j->want, j->ws_bytes) == GK_SUCCESS, "%s: %s", gk_op_name(d->op), gk_last_error());
}

// ---------------------------------------------------------------- one calling thread

// The thread count changed between runs of one plan from one thread.
static void test_count_changes(job *jobs, int njobs) {
  static const int counts[] = {2, 3, 1, 4, 2};
  for (int i = 0; i < njobs; i++)
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      gk_set_num_threads(counts[c]);
      argset got;
      clone_outputs(&roles, &jobs[i].d, &jobs[i].in, CONTIGUOUS, &got);
      gk_status st = run_plan(jobs[i].shared, &got, jobs[i].ws_bytes);
      check(st == GK_SUCCESS && outputs_equal(&jobs[i], &got), "%s %s with %d threads after a change: %s",
            gk_op_name(jobs[i].d.op), jobs[i].d.direction == GK_FORWARD ? "fwd" : "bwd", counts[c],
            st == GK_SUCCESS ? "outputs differ from one thread" : gk_last_error());
      free_outputs(&roles, &jobs[i].d, &got);
    }
}

// Many short runs, the thread count changed before each, so that the pool's
// workers are stopped and started again and again (a new worker must join
// the next job only, and exactly once).
static void test_worker_restarts(job *j) {
  int bad = 0;
  for (int i = 0; i < RESTARTS; i++) {
    gk_set_num_threads(2 + i % 3);
    argset got;
    clone_outputs(&roles, &j->d, &j->in, CONTIGUOUS, &got);
    if (run_plan(j->shared, &got, j->ws_bytes) != GK_SUCCESS || !outputs_equal(j, &got)) bad++;
    free_outputs(&roles, &j->d, &got);
  }
  check(bad == 0, "%s: %d of %d runs with restarted workers differ from one thread", gk_op_name(j->d.op), bad, RESTARTS);
}

// ---------------------------------------------------------------- several calling threads

typedef struct caller {
  int id;
  job *jobs;
  int njobs;
  int runs, failures;  // written by this caller only, read after join
  char first_failure[256];
} caller;

static atomic_int callers_left;

static void *caller_main(void *arg) {
  caller *c = arg;
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < c->njobs; i++) {
      job *j = &c->jobs[(i + c->id * 7) % c->njobs];  // callers start at different ops
      bool own = (r + c->id + i) & 1;
      gk_plan *plan = j->shared;
      gk_status st = own ? gk_plan_create(&j->d, &plan) : GK_SUCCESS;
      argset got;
      clone_outputs(&roles, &j->d, &j->in, CONTIGUOUS, &got);
      if (st == GK_SUCCESS) {
        // A private plan may be sized for another thread count: query it.
        size_t ws = j->ws_bytes;
        if (own) gk_plan_workspace_size(plan, &ws);
        st = run_plan(plan, &got, ws);
      }
      bool ok = st == GK_SUCCESS && outputs_equal(j, &got);
      if (!ok && c->failures++ == 0)
        snprintf(c->first_failure, sizeof c->first_failure, "%s %s (%s plan): %s", gk_op_name(j->d.op),
                 j->d.direction == GK_FORWARD ? "fwd" : "bwd", own ? "own" : "shared",
                 st == GK_SUCCESS ? "outputs differ from one thread alone" : gk_last_error());
      c->runs++;
      free_outputs(&roles, &j->d, &got);
      if (own && plan) gk_plan_destroy(plan);
    }
  atomic_fetch_sub(&callers_left, 1);
  return NULL;
}

static void test_callers(job *jobs, int njobs) {
  caller callers[CALLERS];
  pthread_t tids[CALLERS];
  atomic_store(&callers_left, CALLERS);
  gk_set_num_threads(2);
  for (int i = 0; i < CALLERS; i++) {
    callers[i] = (caller){.id = i, .jobs = jobs, .njobs = njobs};
    check(pthread_create(&tids[i], NULL, caller_main, &callers[i]) == 0, "pthread_create");
  }
  // The thread count changes while the callers run.
  int changes = 0;
  while (atomic_load(&callers_left) > 0) {
    gk_set_num_threads(1 + changes++ % 4);
    nanosleep(&(struct timespec){0, 2000000}, NULL);
  }
  for (int i = 0; i < CALLERS; i++) {
    pthread_join(tids[i], NULL);
    check(callers[i].runs == ROUNDS * njobs && callers[i].failures == 0, "caller %d: %d of %d runs failed; first: %s",
          i, callers[i].failures, callers[i].runs, callers[i].first_failure);
  }
  printf("%d callers x %d runs with %d thread-count changes meanwhile\n", CALLERS, ROUNDS * njobs, changes);
}

// ---------------------------------------------------------------- optimizers

// AdamW and gradient clipping on private tensors from several threads at
// once, against the same steps run alone with one thread.
enum { OPT_N = 20000, OPT_STEPS = 3 };

typedef struct opt_run {
  float p[OPT_N], g[OPT_N], m[OPT_N], v[OPT_N];
  double norm;
  gk_status st;
} opt_run;

static void opt_init(opt_run *o) {
  for (int i = 0; i < OPT_N; i++) {
    o->p[i] = (float)(i % 97) / 97.0f - 0.5f;
    o->g[i] = (float)(i % 89) / 89.0f - 0.3f;
    o->m[i] = o->v[i] = 0;
  }
}

static void *opt_main(void *arg) {
  opt_run *o = arg;
  int64_t shape[1] = {OPT_N};
  gk_tensor p, g, m, v;
  gk_tensor_init(&p, o->p, GK_F32, 1, shape);
  gk_tensor_init(&g, o->g, GK_F32, 1, shape);
  gk_tensor_init(&m, o->m, GK_F32, 1, shape);
  gk_tensor_init(&v, o->v, GK_F32, 1, shape);
  gk_adamw_config cfg;
  gk_adamw_config_init(&cfg);
  o->st = GK_SUCCESS;
  for (int s = 1; s <= OPT_STEPS && o->st == GK_SUCCESS; s++) {
    o->st = gk_clip_grad_norm(1, &g, 1.0, &o->norm);
    if (o->st == GK_SUCCESS) o->st = gk_adamw_step(&cfg, 1, &p, &g, &m, &v, NULL, s);
  }
  return NULL;
}

static void test_optimizers(void) {
  static opt_run alone, runs[CALLERS];
  gk_set_num_threads(1);
  opt_init(&alone);
  opt_main(&alone);
  check(alone.st == GK_SUCCESS, "optimizers alone: %s", gk_last_error());
  gk_set_num_threads(2);
  pthread_t tids[CALLERS];
  for (int i = 0; i < CALLERS; i++) {
    opt_init(&runs[i]);
    pthread_create(&tids[i], NULL, opt_main, &runs[i]);
  }
  gk_set_num_threads(3);
  for (int i = 0; i < CALLERS; i++) {
    pthread_join(tids[i], NULL);
    check(runs[i].st == GK_SUCCESS && memcmp(runs[i].p, alone.p, sizeof alone.p) == 0 &&
              memcmp(runs[i].v, alone.v, sizeof alone.v) == 0 && runs[i].norm == alone.norm,
          "optimizers in caller %d differ from one thread alone", i);
  }
}

#ifdef GK_TEST_OPENMP
#include "core/internal.h"

#include <omp.h>

static void note_team(void *ctx, int64_t t) { ((int *)ctx)[t] = omp_in_parallel() ? omp_get_num_threads() : 0; }

static void test_openmp_runtime(void) {
  check(gk_get_openmp_runtime() == NULL, "the pool by default");
  gk_status s = gk_set_openmp_runtime("libgradkern-not-there.so.9");
  check(s == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "'libgradkern-not-there.so.9' is not loaded"),
        "a library not loaded: status %d, '%s'", s, gk_last_error());
  s = gk_set_openmp_runtime("libm.so.6");
  check(s == GK_ERR_INVALID_VALUE && strstr(gk_last_error(), "'libm.so.6' has no GOMP_parallel"),
        "a library without GOMP_parallel: status %d, '%s'", s, gk_last_error());
  check(gk_get_openmp_runtime() == NULL, "a refused library leaves the pool");
  s = gk_set_openmp_runtime("libgomp.so.1");
  check(s == GK_SUCCESS && gk_get_openmp_runtime() && !strcmp(gk_get_openmp_runtime(), "libgomp.so.1"),
        "libgomp.so.1: status %d, '%s'", s, gk_last_error());
  gk_set_num_threads(2);
  int team[6] = {0};
  gk_parallel_for(6, note_team, team);
  for (int t = 0; t < 6; t++) check(team[t] == 2, "task %d ran in a team of %d, not on OpenMP's 2 threads", t, team[t]);
  // Back to the pool, then on the team again.
  check(gk_set_openmp_runtime(NULL) == GK_SUCCESS && gk_get_openmp_runtime() == NULL, "back to the pool");
  gk_parallel_for(6, note_team, team);
  for (int t = 0; t < 6; t++) check(team[t] == 0, "task %d ran on OpenMP after going back to the pool", t);
  check(gk_set_openmp_runtime("libgomp.so.1") == GK_SUCCESS, "libgomp.so.1 again");
}
#endif

int main(void) {
#ifdef GK_TEST_OPENMP
  test_openmp_runtime();
#endif
  gk_op_desc fwd[32];
  int nfwd = make_cases(fwd);
  job jobs[64];
  int njobs = 0;
  for (int i = 0; i < nfwd; i++) {
    job *f = &jobs[njobs++];
    job_init(f, &fwd[i], NULL);
    // Backward reads the forward's inputs and the outputs it saved.
    argset saved = f->in;
    for (int k = 0; k < GK_ARG_COUNT_; k++)
      if (f->want.have[k] && is_output(&f->d, k)) saved.b[k] = f->want.b[k];
    gk_op_desc b = fwd[i];
    b.direction = GK_BACKWARD;
    job_init(&jobs[njobs++], &b, &saved);
  }
  test_count_changes(jobs, njobs);
  test_worker_restarts(&jobs[0]);
  test_callers(jobs, njobs);
  test_optimizers();
  for (int i = 0; i < njobs; i++) {
    gk_plan_destroy(jobs[i].shared);
    free_outputs(&roles, &jobs[i].d, &jobs[i].want);
    argset_free(&jobs[i].in);
  }
#ifdef GK_TEST_OPENMP
  return finish("test_concurrency_openmp");
#else
  return finish("test_concurrency");
#endif
}
