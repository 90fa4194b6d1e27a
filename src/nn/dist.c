// Data-parallel training across processes (see dist.h): MPI when built
// with it (GK_WITH_MPI), one rank otherwise. With one rank every collective
// is a copy or nothing, and no MPI function is called.
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef GK_WITH_MPI
#include <mpi.h>
#include <signal.h>
#endif

struct gk_dist {
  int rank, size;
#ifdef GK_WITH_MPI
  bool initialised;  // MPI_Init was called here
  // world: the blocking collectives; scatter_comm, gather_comm: the two
  // phases of the gradient buckets (non-blocking collectives must start in
  // the same order on every rank, per communicator).
  MPI_Comm world, scatter_comm, gather_comm;
#endif
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The environment variables by which launchers tell a process the job's size.
static const char *const size_variables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};

int gk_dist_launched(void) {
  for (size_t k = 0; k < sizeof size_variables / sizeof *size_variables; k++) {
    const char *v = getenv(size_variables[k]);
    if (v && *v) {
      long n = strtol(v, NULL, 10);
      return n >= 1 && n <= INT_MAX ? (int)n : 1;
    }
  }
  return 1;
}

int gk_dist_local_size(void) {
  static const char *const local_variables[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
  for (size_t k = 0; k < sizeof local_variables / sizeof *local_variables; k++) {
    const char *v = getenv(local_variables[k]);
    if (v && *v) {
      long n = strtol(v, NULL, 10);
      return n >= 1 && n <= INT_MAX ? (int)n : 1;
    }
  }
  return 1;
}

static bool launched_by_mpi(void) {
  for (size_t k = 0; k < sizeof size_variables / sizeof *size_variables; k++)
    if (getenv(size_variables[k])) return true;
  return false;
}

bool gk_dist_built_with_mpi(void) {
#ifdef GK_WITH_MPI
  return true;
#else
  return false;
#endif
}

#ifdef GK_WITH_MPI
// An MPI call that failed: its message for gk_last_error().
static gk_status mpi_fail(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", code);
  return gk_nn_fail(GK_ERR_INTERNAL, "%s failed: %s", what, text);
}
#define MPI_CHECK(call)                                   \
  do {                                                    \
    int rc_ = (call);                                     \
    if (rc_ != MPI_SUCCESS) return mpi_fail(#call, rc_);  \
  } while (0)
#endif

gk_status gk_dist_init(gk_dist **out) {
  gk_dist *d = calloc(1, sizeof *d);
  if (!d) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory");
  d->size = 1;
  *out = d;
  if (!launched_by_mpi()) return GK_SUCCESS;
#ifdef GK_WITH_MPI
  MPI_CHECK(MPI_Init(NULL, NULL));
  d->initialised = true;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->world));
  MPI_CHECK(MPI_Comm_set_errhandler(d->world, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_dup(d->world, &d->scatter_comm));
  MPI_CHECK(MPI_Comm_dup(d->world, &d->gather_comm));
  MPI_CHECK(MPI_Comm_rank(d->world, &d->rank));
  MPI_CHECK(MPI_Comm_size(d->world, &d->size));
  if (d->rank > 0 && !freopen("/dev/null", "w", stdout))
    return gk_nn_fail(GK_ERR_INTERNAL, "rank %d: cannot send stdout to /dev/null", d->rank);
#endif
  return GK_SUCCESS;
}

void gk_dist_free(gk_dist *d) {
  if (!d) return;
#ifdef GK_WITH_MPI
  if (d->size > 1) alarm(0);  // the watchdog
  if (d->initialised) {
    MPI_Comm_free(&d->scatter_comm);
    MPI_Comm_free(&d->gather_comm);
    MPI_Comm_free(&d->world);
    MPI_Finalize();
  }
#endif
  free(d);
}

int gk_dist_rank(const gk_dist *d) { return d->rank; }
int gk_dist_size(const gk_dist *d) { return d->size; }

void gk_dist_abort(gk_dist *d, int code) {
  fflush(stdout);
  fflush(stderr);
#ifdef GK_WITH_MPI
  if (d->size > 1) MPI_Abort(d->world, code);
#endif
  exit(code);
}

void gk_dist_shard(const gk_dist *d, int rank, int64_t n, int64_t *lo, int64_t *hi) {
  // n r / size without overflow for any n below 2^62 and size below 2^31.
  int64_t q = n / d->size, r = n % d->size;
  *lo = q * rank + r * rank / d->size;
  *hi = q * (rank + 1) + r * (rank + 1) / d->size;
}

// One rank has no other to wait for: the watchdog exists with MPI only.
#ifdef GK_WITH_MPI
// The watchdog's message, written by the signal handler (which may only
// call async-signal-safe functions: write, _exit).
static char watchdog_message[256];
static size_t watchdog_len;

static void watchdog_fired(int sig) {
  (void)sig;
  ssize_t w = write(STDERR_FILENO, watchdog_message, watchdog_len);
  (void)w;
  _exit(1);
}
#endif

void gk_dist_watchdog(gk_dist *d, int seconds, const char *what) {
  if (d->size == 1) return;  // always so without MPI (and in WebAssembly, which has no signals)
#ifdef GK_WITH_MPI
  alarm(0);
  if (seconds <= 0) return;
  int n = snprintf(watchdog_message, sizeof watchdog_message,
                   "gradkern train: rank %d: %s took more than --rank-timeout %d s: another rank died or hangs; "
                   "stopping\n", d->rank, what, seconds);
  watchdog_len = n < 0 ? 0 : (size_t)n < sizeof watchdog_message ? (size_t)n : sizeof watchdog_message - 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = watchdog_fired;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  alarm((unsigned)seconds);
#else
  (void)seconds;
  (void)what;
#endif
}

void gk_dist_test_hang(const gk_dist *d) {
#ifdef GK_WITH_MPI
  while (d->size > 1) pause();
#else
  (void)d;
#endif
}

gk_status gk_dist_sum(gk_dist *d, double *v, int n) {
  if (d->size == 1 || n == 0) return GK_SUCCESS;
#ifdef GK_WITH_MPI
  double *all = malloc(sizeof(double) * (size_t)n * (size_t)d->size);
  if (!all) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory for a sum");
  int rc = MPI_Allgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, d->world);
  if (rc != MPI_SUCCESS) {
    free(all);
    return mpi_fail("MPI_Allgather", rc);
  }
  for (int i = 0; i < n; i++) {
    double s = all[i];
    for (int r = 1; r < d->size; r++) s += all[(size_t)r * (size_t)n + (size_t)i];
    v[i] = s;
  }
  free(all);
#endif
  return GK_SUCCESS;
}

gk_status gk_dist_max(gk_dist *d, int *v) {
  if (d->size == 1) return GK_SUCCESS;
#ifdef GK_WITH_MPI
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, d->world));
#endif
  return GK_SUCCESS;
}

gk_status gk_dist_broadcast(gk_dist *d, void *buf, size_t bytes) {
  if (d->size == 1) return GK_SUCCESS;
#ifdef GK_WITH_MPI
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < (size_t)INT_MAX ? bytes - done : (size_t)INT_MAX;
    MPI_CHECK(MPI_Bcast((char *)buf + done, (int)n, MPI_BYTE, 0, d->world));
    done += n;
  }
#else
  (void)buf;
  (void)bytes;
#endif
  return GK_SUCCESS;
}

#ifdef GK_WITH_MPI
// The shards of an array of n elements as MPI's counts and displacements.
static gk_status shard_counts(const gk_dist *d, int64_t n, int *counts, int *displs) {
  for (int r = 0; r < d->size; r++) {
    int64_t lo, hi;
    gk_dist_shard(d, r, n, &lo, &hi);
    if (hi > INT_MAX)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "distributed: %lld parameters on %d ranks: a shard ends past MPI's "
                        "int counts (2^31 - 1 elements)", (long long)n, d->size);
    counts[r] = (int)(hi - lo);
    displs[r] = (int)lo;
  }
  return GK_SUCCESS;
}

enum { ALLGATHER, GATHER, SCATTER };
static gk_status shard_collective(gk_dist *d, int kind, const float *mine, float *all, int64_t n) {
  int *counts = malloc(2 * sizeof(int) * (size_t)d->size);
  if (!counts) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory");
  int *displs = counts + d->size;
  gk_status s = shard_counts(d, n, counts, displs);
  int rc = MPI_SUCCESS;
  if (s == GK_SUCCESS) {
    int me = d->rank;
    if (kind == ALLGATHER)
      rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_FLOAT, d->world);
    else if (kind == GATHER)
      rc = MPI_Gatherv(mine, counts[me], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, d->world);
    else
      rc = MPI_Scatterv(all, counts, displs, MPI_FLOAT, (float *)mine, counts[me], MPI_FLOAT, 0, d->world);
  }
  free(counts);
  if (s == GK_SUCCESS && rc != MPI_SUCCESS)
    s = mpi_fail(kind == ALLGATHER ? "MPI_Allgatherv" : kind == GATHER ? "MPI_Gatherv" : "MPI_Scatterv", rc);
  return s;
}
#endif

gk_status gk_dist_allgather(gk_dist *d, float *all, int64_t n) {
  if (d->size == 1) return GK_SUCCESS;
#ifdef GK_WITH_MPI
  return shard_collective(d, ALLGATHER, NULL, all, n);
#else
  (void)all;
  (void)n;
  return GK_SUCCESS;
#endif
}

gk_status gk_dist_gather(gk_dist *d, const float *mine, float *all, int64_t n) {
  if (d->size == 1) {
    if (all != mine) memmove(all, mine, sizeof(float) * (size_t)n);
    return GK_SUCCESS;
  }
#ifdef GK_WITH_MPI
  return shard_collective(d, GATHER, mine, all, n);
#else
  return GK_SUCCESS;
#endif
}

gk_status gk_dist_scatter(gk_dist *d, const float *all, float *mine, int64_t n) {
  if (d->size == 1) {
    if (all != mine) memmove(mine, all, sizeof(float) * (size_t)n);
    return GK_SUCCESS;
  }
#ifdef GK_WITH_MPI
  return shard_collective(d, SCATTER, mine, (float *)all, n);
#else
  return GK_SUCCESS;
#endif
}

// ---------------------------------------------------------------- gradient buckets

// One bucket: the parameters one grads-ready call named, packed in order of
// their offset, so that the part of the bucket in each rank's shard is one
// run of the pack.
typedef struct bucket {
  int first, n;         // parameters [first, first + n) of m->params
  int *order;           // their indices, by offset
  int64_t len;          // elements packed
  float *pack;          // len: this rank's scaled gradients, then the sums
  float *recv;          // size * counts[rank]: every rank's part of my shard
  int *counts, *displs; // per rank: its part of the pack (MPI's int counts)
  int *rcounts, *rdispls;
  int phase;            // 0: not started this step; 1: all-to-all; 2: all-gather; 3: done
#ifdef GK_WITH_MPI
  MPI_Request req;
#endif
} bucket;

struct gk_grad_sync {
  gk_dist *d;
  gk_model *m;
  bool sharded, active;
  double weight;
  bucket *b;
  int nb, started;      // buckets known; started this step
  bool layout_fixed;    // after the first step: the bucket sequence is known
  int reported;         // parameters reported this step
  gk_status error;      // the first failure of this step's hooks
  gk_grad_sync_stats stats;
};

gk_status gk_grad_sync_create(gk_dist *d, gk_model *m, bool sharded, gk_grad_sync **out) {
  gk_grad_sync *s = calloc(1, sizeof *s);
  if (!s) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory for the gradient buckets");
  s->d = d;
  s->m = m;
  s->sharded = sharded;
  s->b = calloc((size_t)m->nparams, sizeof *s->b);  // at most one bucket per parameter
  if (!s->b) {
    free(s);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory for the gradient buckets");
  }
  *out = s;
  return GK_SUCCESS;
}

void gk_grad_sync_free(gk_grad_sync *s) {
  if (!s) return;
  for (int k = 0; k < s->nb; k++) {
    free(s->b[k].order);
    free(s->b[k].pack);
    free(s->b[k].recv);
    free(s->b[k].counts);
  }
  free(s->b);
  free(s);
}

gk_grad_sync_stats gk_grad_sync_get_stats(const gk_grad_sync *s) { return s->stats; }

void gk_grad_sync_begin(gk_grad_sync *s, double weight) {
  s->active = s->d->size > 1;
  s->weight = weight;
  s->started = 0;
  s->reported = 0;
  s->error = GK_SUCCESS;
}

static const gk_param *bucket_param(const gk_grad_sync *s, const bucket *b, int i) {
  return &s->m->params[b->order[i]];
}

// The bucket for parameters [first, first + n): its layout over the ranks'
// shards, made at its first use.
static gk_status bucket_init(gk_grad_sync *s, bucket *b, int first, int n) {
  const gk_dist *d = s->d;
  int size = d->size;
  b->first = first;
  b->n = n;
  b->order = malloc(sizeof(int) * (size_t)n);
  b->counts = malloc(4 * sizeof(int) * (size_t)size);
  if (!b->order || !b->counts) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory for a bucket");
  b->displs = b->counts + size;
  b->rcounts = b->displs + size;
  b->rdispls = b->rcounts + size;
  for (int i = 0; i < n; i++) {  // insertion sort by offset (a handful of parameters)
    int j = i, p = first + i;
    for (; j > 0 && s->m->params[b->order[j - 1]].offset > s->m->params[p].offset; j--) b->order[j] = b->order[j - 1];
    b->order[j] = p;
  }
  int64_t len = 0;
  for (int r = 0; r < size; r++) {
    int64_t lo, hi, c = 0;
    gk_dist_shard(d, r, s->m->n_total, &lo, &hi);
    for (int i = 0; i < n; i++) {
      const gk_param *p = bucket_param(s, b, i);
      int64_t a = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
      if (e > a) c += e - a;
    }
    if (len + c > INT_MAX)
      return gk_nn_fail(GK_ERR_UNSUPPORTED, "distributed: parameters %d to %d hold more than 2^31 - 1 elements (MPI's "
                        "int counts)", first, first + n - 1);
    b->counts[r] = (int)c;
    b->displs[r] = (int)len;
    len += c;
  }
  b->len = len;
  int mine = b->counts[d->rank];
  for (int r = 0; r < size; r++) {
    b->rcounts[r] = mine;
    b->rdispls[r] = r * mine;
  }
  b->pack = malloc(sizeof(float) * (size_t)(len > 0 ? len : 1));
  b->recv = malloc(sizeof(float) * (size_t)size * (size_t)(mine > 0 ? mine : 1));
  if (!b->pack || !b->recv) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "distributed: no memory for a bucket");
  return GK_SUCCESS;
}

// Copy pack positions [from, to) of bucket b to the gradients (to_grads) or
// the gradients there, scaled by `scale`, into the pack.
static void pack_copy(gk_grad_sync *s, bucket *b, int64_t from, int64_t to, bool to_grads, float scale) {
  int64_t pos = 0;
  for (int i = 0; i < b->n && pos < to; i++) {
    const gk_param *p = bucket_param(s, b, i);
    int64_t a = from > pos ? from : pos, e = to < pos + p->numel ? to : pos + p->numel;
    float *g = s->m->g + p->offset - pos;  // g[k] is the gradient at pack position k
    for (int64_t k = a; k < e; k++) {
      if (to_grads) g[k] = b->pack[k];
      else b->pack[k] = scale == 0 ? 0.0f : g[k] * scale;
    }
    pos += p->numel;
  }
}

#ifdef GK_WITH_MPI
// Phase 1 done: my part of the pack = the sum of every rank's, in rank order.
static void sum_my_part(gk_grad_sync *s, bucket *b) {
  int mine = b->counts[s->d->rank], size = s->d->size;
  float *out = b->pack + b->displs[s->d->rank];
  for (int i = 0; i < mine; i++) {
    float x = b->recv[i];
    for (int r = 1; r < size; r++) x += b->recv[(size_t)r * (size_t)mine + (size_t)i];
    out[i] = x;
  }
}

// Move bucket b on once its phase's request is complete (wait: block for
// it). *moved: whether it did. Phase 2 starts in bucket order (the caller
// goes through the buckets in order).
static gk_status bucket_advance(gk_grad_sync *s, bucket *b, bool wait, bool *moved) {
  int done = 1;
  *moved = false;
  if (b->phase != 1 && b->phase != 2) return GK_SUCCESS;
  if (wait) MPI_CHECK(MPI_Wait(&b->req, MPI_STATUS_IGNORE));
  else MPI_CHECK(MPI_Test(&b->req, &done, MPI_STATUS_IGNORE));
  if (!done) return GK_SUCCESS;
  *moved = true;
  if (b->phase == 2) {
    b->phase = 3;
    return GK_SUCCESS;
  }
  sum_my_part(s, b);
  if (s->sharded) {
    b->phase = 3;
    return GK_SUCCESS;
  }
  MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->pack, b->counts, b->displs, MPI_FLOAT,
                            s->d->gather_comm, &b->req));
  s->stats.bytes_sent += 4.0 * (s->d->size - 1) * b->counts[s->d->rank];
  b->phase = 2;
  return GK_SUCCESS;
}

// Test the buckets in flight in order, moving on those that are done, and
// stopping at the first whose all-to-all is not (phase 2 keeps the order).
static gk_status progress(gk_grad_sync *s) {
  for (int k = 0; k < s->started; k++) {
    bucket *b = &s->b[k];
    bool moved = true;
    gk_status st = GK_SUCCESS;
    while (moved && (b->phase == 1 || b->phase == 2) && st == GK_SUCCESS) st = bucket_advance(s, b, false, &moved);
    if (st != GK_SUCCESS) return st;
    if (b->phase == 1) break;
  }
  return GK_SUCCESS;
}
#endif

static gk_status ready(gk_grad_sync *s, int first, int n) {
  if (first < 0 || n < 1 || first > s->m->nparams - n)
    return gk_nn_fail(GK_ERR_INTERNAL, "distributed: gradients of parameters [%d, %d + %d) reported; the model has %d",
                      first, first, n, s->m->nparams);
  bucket *b;
  if (s->started < s->nb) {
    b = &s->b[s->started];
    if (b->first != first || b->n != n)
      return gk_nn_fail(GK_ERR_INTERNAL, "distributed: backward reported parameters [%d, %d + %d) where the first "
                        "step reported [%d, %d + %d)", first, first, n, b->first, b->first, b->n);
  } else {
    if (s->layout_fixed || s->nb == s->m->nparams)
      return gk_nn_fail(GK_ERR_INTERNAL, "distributed: backward reported more parameter groups than the first step");
    b = &s->b[s->nb++];
    gk_status st = bucket_init(s, b, first, n);
    if (st != GK_SUCCESS) return st;
  }
  s->started++;
  s->reported += n;
  pack_copy(s, b, 0, b->len, false, (float)s->weight);
#ifdef GK_WITH_MPI
  MPI_CHECK(MPI_Ialltoallv(b->pack, b->counts, b->displs, MPI_FLOAT, b->recv, b->rcounts, b->rdispls, MPI_FLOAT,
                           s->d->scatter_comm, &b->req));
  s->stats.bytes_sent += 4.0 * (double)(b->len - b->counts[s->d->rank]);
  b->phase = 1;
  return progress(s);
#else
  return gk_nn_fail(GK_ERR_INTERNAL, "distributed: more than one rank in a build without MPI");
#endif
}

void gk_grad_sync_ready(void *ctx, int first, int n) {
  gk_grad_sync *s = ctx;
  if (!s->active || s->error != GK_SUCCESS) return;
  double t0 = now_seconds();
  s->error = ready(s, first, n);
  s->stats.busy_seconds += now_seconds() - t0;
}

gk_status gk_grad_sync_end(gk_grad_sync *s) {
  if (!s->active) return GK_SUCCESS;
  s->active = false;
  if (s->error != GK_SUCCESS) return s->error;
  if (s->reported != s->m->nparams || s->started != s->nb)
    return gk_nn_fail(GK_ERR_INTERNAL, "distributed: backward reported the gradients of %d of %d parameters",
                      s->reported, s->m->nparams);
  s->layout_fixed = true;
  double t0 = now_seconds();
#ifdef GK_WITH_MPI
  bool moved;
  for (int k = 0; k < s->nb; k++) {  // every all-to-all, starting the all-gathers in order
    if (s->b[k].phase == 1) {
      gk_status st = bucket_advance(s, &s->b[k], true, &moved);
      if (st != GK_SUCCESS) return st;
    }
  }
  for (int k = 0; k < s->nb; k++) {
    if (s->b[k].phase == 2) {
      gk_status st = bucket_advance(s, &s->b[k], true, &moved);
      if (st != GK_SUCCESS) return st;
    }
  }
#endif
  for (int k = 0; k < s->nb; k++) {
    bucket *b = &s->b[k];
    int64_t from = s->sharded ? b->displs[s->d->rank] : 0;
    int64_t to = s->sharded ? from + b->counts[s->d->rank] : b->len;
    pack_copy(s, b, from, to, true, 1);
    b->phase = 0;
  }
  s->stats.wait_seconds += now_seconds() - t0;
  s->stats.steps++;
  s->stats.buckets += s->nb;
  return GK_SUCCESS;
}
