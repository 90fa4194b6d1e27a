// A persistent thread pool. gk_parallel_for hands out task indices through
// an atomic counter; the calling thread works too. Kernels split work by
// problem size only, so results never depend on which thread ran a task.
//
// One job at a time owns the pool (pool_owner); a caller that finds it busy
// runs its tasks on its own thread. A job is published under pool.lock by
// bumping `generation`; each worker looks at every generation after the one
// it was created in at most once. Under the lock, a worker that wakes while
// the job is open joins it (copies it, counts itself in `active`, reports
// back when its tasks are done); one that wakes after the caller closed it
// (every task was taken) skips it without touching it. The caller closes
// the job when its own run_tasks returns and then waits only for the
// workers that joined, so no task runs after gk_parallel_for returns, and a
// worker that a busy core (another program's spinning threads) keeps from
// running does not hold the caller up.
//
// gk_set_openmp_runtime puts the sections on an OpenMP runtime's team
// instead (below): same tasks, same counter, so the same results.
//
// A target without threads (GK_NO_THREADS: WebAssembly under WASI) has no
// pool: every task runs on the calling thread, in order, and
// gk_get_num_threads() is 1 whatever gk_set_num_threads was given.
//
// WebAssembly with shared memory (GK_WASM_THREADS: gradkern-threads.wasm)
// has a pool whose threads the host starts (Web Workers, Node's
// worker_threads: wasm/thread.mjs), each an instance of the module on the
// same memory that calls gk_wasm_thread_main; see that section below.
#include "internal.h"

#if defined(GK_NO_THREADS) || defined(GK_WASM_THREADS)
gk_status gk_set_openmp_runtime(const char *library) {
  return gk_fail(GK_ERR_UNSUPPORTED, "gk_set_openmp_runtime: library = '%s': this build has no OpenMP runtime",
                 library ? library : "(null)");
}

const char *gk_get_openmp_runtime(void) { return NULL; }
#endif

#ifndef GK_NO_THREADS
#include <stdatomic.h>
#include <stdlib.h>

// The thread count before any gk_set_num_threads: each pool's below.
static int default_threads(void);

// $GK_NUM_THREADS if it is a count in 1..1024, else 0.
static int threads_from_env(void) {
  const char *env = getenv("GK_NUM_THREADS");
  if (env && *env) {
    char *end;
    long n = strtol(env, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 1024) return (int)n;
  }
  return 0;
}

static atomic_int requested_threads;  // gk_set_num_threads, else default_threads(); 0: not yet read

gk_status gk_set_num_threads(int n) {
  if (n < 1 || n > 1024)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_set_num_threads: n = %d is outside 1..1024", n);
  atomic_store(&requested_threads, n);
  gk_clear_error();
  return GK_SUCCESS;
}

static int requested(void) {
  int n = atomic_load(&requested_threads);
  if (n == 0) {
    int expected = 0;
    atomic_compare_exchange_strong(&requested_threads, &expected, default_threads());
    n = atomic_load(&requested_threads);
  }
  return n;
}
#endif

#ifdef GK_NO_THREADS
gk_status gk_set_num_threads(int n) {
  if (n < 1 || n > 1024)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_set_num_threads: n = %d is outside 1..1024", n);
  gk_clear_error();
  return GK_SUCCESS;
}

int gk_get_num_threads(void) { return 1; }

void gk_parallel_for(int64_t ntasks, gk_task_fn fn, void *ctx) {
  for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
}
#elif defined(GK_WASM_THREADS)
// The pool in shared WebAssembly memory. Threads enter gk_wasm_thread_main
// (never to return) and count themselves in `threads_ready`; a section uses
// at most gk_get_num_threads() - 1 of them beside the caller. There is no
// lock: `state` is the job's generation times two, plus one while the job
// is open. The caller writes the job, opens the next generation and wakes
// the threads (memory.atomic.notify); after its own share of the tasks it
// closes the job and waits (memory.atomic.wait32) until `active`, the
// threads that joined, is back to zero. A thread that sees a new open
// generation counts itself in `active` and then reads `state` again: only
// if the job is still the same and still open does it join, so every thread
// that joins is counted before the caller's close, and a late thread backs
// out. The job's tasks come from one counter, as natively, so results do
// not depend on which thread ran which task. Threads never allocate: the
// kernels' tasks do not call malloc (wasi-libc's is not thread-safe).
typedef struct gk_job {
  gk_task_fn fn;
  void *ctx;
  int64_t ntasks;
  int helpers;                     // threads that may join beside the caller
} gk_job;

static gk_job job;                 // written by the caller before it opens the job
static atomic_uint state;          // generation * 2 + 1 while the job is open
static atomic_int active;          // threads in the current job
static atomic_int_fast64_t next;   // the job's next task index
static atomic_int threads_ready;   // threads in gk_wasm_thread_main
static atomic_flag pool_owner = ATOMIC_FLAG_INIT; // one job at a time
static _Thread_local bool inside_task;

static int default_threads(void) {
  int n = threads_from_env();
  return n ? n : 1024;  // all the host started
}

int gk_get_num_threads(void) {
  int n = requested(), have = atomic_load(&threads_ready) + 1;
  return n < have ? n : have;
}

static void run_tasks(const gk_job *j) {
  inside_task = true;
  for (;;) {
    int64_t t = atomic_fetch_add(&next, 1);
    if (t >= j->ntasks) break;
    j->fn(j->ctx, t);
  }
  inside_task = false;
}

static void wait_while_equal(void *address, int value) {
  __builtin_wasm_memory_atomic_wait32((int *)address, value, -1);
}

void gk_wasm_thread_main(void) {
  atomic_fetch_add(&threads_ready, 1);
  unsigned seen = atomic_load(&state) >> 1;
  for (;;) {
    unsigned s = atomic_load(&state);
    if (s >> 1 == seen) {
      wait_while_equal(&state, (int)s);
      continue;
    }
    seen = s >> 1;
    if (!(s & 1)) continue;  // closed: every task was taken
    int place = atomic_fetch_add(&active, 1);
    if (atomic_load(&state) == s && place < job.helpers) run_tasks(&job);
    if (atomic_fetch_sub(&active, 1) == 1) __builtin_wasm_memory_atomic_notify((int *)&active, 1);
  }
}

void gk_parallel_for(int64_t ntasks, gk_task_fn fn, void *ctx) {
  int threads = gk_get_num_threads();
  if (ntasks <= 1 || threads == 1 || inside_task || atomic_flag_test_and_set(&pool_owner)) {
    for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
    return;
  }
  int helpers = (int)(ntasks - 1 < threads - 1 ? ntasks - 1 : threads - 1);
  job = (gk_job){fn, ctx, ntasks, helpers};
  atomic_store(&next, 0);
  unsigned closed = atomic_load(&state);
  atomic_store(&state, closed + 3);  // the next generation, open
  __builtin_wasm_memory_atomic_notify((int *)&state, (unsigned)helpers);
  run_tasks(&job);
  atomic_store(&state, closed + 2);  // that generation, closed
  for (int a; (a = atomic_load(&active)) != 0;) wait_while_equal(&active, a);
  atomic_flag_clear(&pool_owner);
}
#else

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct gk_job {
  gk_task_fn fn;
  void *ctx;
  int64_t ntasks;
} gk_job;

typedef struct gk_pool {
  pthread_mutex_t lock;          // guards everything below but `next`
  pthread_cond_t work_ready, work_done;
  pthread_t *workers;
  int nworkers;                  // threads besides the caller
  uint64_t generation;           // bumped per job
  bool stopping;
  gk_job job;                    // the current job, read by workers under the lock
  atomic_int_fast64_t next;      // the next task index of the current job
  int active;                    // workers that joined the current job and have not reported
  bool closed;                   // the caller has finished the current job's tasks: no more joins
} gk_pool;

static gk_pool pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                       .work_ready = PTHREAD_COND_INITIALIZER,
                       .work_done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t pool_owner = PTHREAD_MUTEX_INITIALIZER; // one job at a time
static _Thread_local bool inside_task;

static int default_threads(void) {
  int n = threads_from_env();
  if (n) return n;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus >= 1 ? (int)(cpus > 1024 ? 1024 : cpus) : 1;
}

int gk_get_num_threads(void) { return requested(); }

static void run_tasks(gk_job job) {
  inside_task = true;
  for (;;) {
    int64_t t = atomic_fetch_add(&pool.next, 1);
    if (t >= job.ntasks) break;
    job.fn(job.ctx, t);
  }
  inside_task = false;
}

// A worker's argument is the generation current when it was created (read
// under pool_owner, with no job in flight): it waits for the next one.
static void *worker_main(void *arg) {
  uint64_t seen = (uint64_t)(uintptr_t)arg;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (!pool.stopping && pool.generation == seen) pthread_cond_wait(&pool.work_ready, &pool.lock);
    if (pool.stopping) break;
    seen = pool.generation;
    if (pool.closed) continue;  // every task was taken: nothing to join
    pool.active++;
    gk_job job = pool.job;
    pthread_mutex_unlock(&pool.lock);
    run_tasks(job);
    pthread_mutex_lock(&pool.lock);
    if (--pool.active == 0) pthread_cond_signal(&pool.work_done);
  }
  pthread_mutex_unlock(&pool.lock);
  return NULL;
}

static void stop_workers(void) {
  pthread_mutex_lock(&pool.lock);
  pool.stopping = true;
  pthread_cond_broadcast(&pool.work_ready);
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.workers[i], NULL);
  free(pool.workers);
  pool.workers = NULL;
  pool.nworkers = 0;
  pthread_mutex_lock(&pool.lock);
  pool.stopping = false;
  pthread_mutex_unlock(&pool.lock);
}

// Called with pool_owner held and no job in flight: `wanted` workers
// running, or fewer if a thread could not be created (the caller's own
// thread still runs every task no worker takes).
static void ensure_workers(int wanted) {
  if (pool.nworkers == wanted) return;
  if (pool.nworkers) stop_workers();
  if (wanted == 0) return;
  pool.workers = malloc(sizeof(pthread_t) * (size_t)wanted);
  if (!pool.workers) return;
  pthread_mutex_lock(&pool.lock);
  void *start = (void *)(uintptr_t)pool.generation;
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < wanted; i++) {
    if (pthread_create(&pool.workers[i], NULL, worker_main, start) != 0) break;
    pool.nworkers++;
  }
}

static void shutdown_pool(void) {
  pthread_mutex_lock(&pool_owner);
  if (pool.nworkers) stop_workers();
  pthread_mutex_unlock(&pool_owner);
}

// ---------------------------------------------------------------- OpenMP
// gk_set_openmp_runtime: sections run as GOMP_parallel(body, job, threads),
// libgomp's entry point for `#pragma omp parallel num_threads(threads)`:
// the calling thread and the team's threads take tasks from the job's
// counter until none is left; GOMP_parallel returns after all of them.
typedef void (*gomp_parallel_fn)(void (*body)(void *), void *data, unsigned threads, unsigned flags);
static pthread_mutex_t openmp_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(gomp_parallel_fn) gomp_parallel;
static char openmp_library[256];  // guarded by openmp_lock; "" for the pool

typedef struct {
  gk_job job;
  atomic_int_fast64_t next;
} openmp_job;

static void openmp_body(void *arg) {
  openmp_job *j = arg;
  bool was_inside = inside_task;
  inside_task = true;
  for (;;) {
    int64_t t = atomic_fetch_add(&j->next, 1);
    if (t >= j->job.ntasks) break;
    j->job.fn(j->job.ctx, t);
  }
  inside_task = was_inside;
}

gk_status gk_set_openmp_runtime(const char *library) {
  gomp_parallel_fn entry = NULL;
  if (library) {
    if (strlen(library) >= sizeof openmp_library)
      return gk_fail(GK_ERR_INVALID_VALUE, "gk_set_openmp_runtime: library = '%.64s...' is longer than %zu bytes",
                     library, sizeof openmp_library - 1);
    void *handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
      return gk_fail(GK_ERR_INVALID_VALUE, "gk_set_openmp_runtime: library = '%s' is not loaded in this process",
                     library);
    entry = (gomp_parallel_fn)dlsym(handle, "GOMP_parallel");
    if (!entry) {
      dlclose(handle);
      return gk_fail(GK_ERR_INVALID_VALUE, "gk_set_openmp_runtime: library = '%s' has no GOMP_parallel", library);
    }
  }
  // The handle is kept: the library stays loaded, as sections in flight may
  // still be in it.
  pthread_mutex_lock(&openmp_lock);
  atomic_store(&gomp_parallel, entry);
  snprintf(openmp_library, sizeof openmp_library, "%s", library ? library : "");
  pthread_mutex_unlock(&openmp_lock);
  gk_clear_error();
  return GK_SUCCESS;
}

const char *gk_get_openmp_runtime(void) {
  pthread_mutex_lock(&openmp_lock);
  const char *r = openmp_library[0] ? openmp_library : NULL;
  pthread_mutex_unlock(&openmp_lock);
  return r;
}

// ---------------------------------------------------------------- sections

void gk_parallel_for(int64_t ntasks, gk_task_fn fn, void *ctx) {
  int threads = gk_get_num_threads();
  gomp_parallel_fn omp = atomic_load(&gomp_parallel);
  if (omp && ntasks > 1 && threads > 1 && !inside_task) {
    openmp_job j = {{fn, ctx, ntasks}, 0};
    omp(openmp_body, &j, (unsigned)(ntasks < threads ? ntasks : threads), 0);
    return;
  }
  // Serial when there is one task or thread, inside a task, or while another
  // caller's job holds the pool.
  if (ntasks <= 1 || threads == 1 || inside_task || pthread_mutex_trylock(&pool_owner) != 0) {
    for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
    return;
  }
  static bool exit_hook; // guarded by pool_owner
  if (!exit_hook) {
    atexit(shutdown_pool);
    exit_hook = true;
  }
  ensure_workers(threads - 1);
  gk_job job = {fn, ctx, ntasks};
  pthread_mutex_lock(&pool.lock);
  pool.job = job;
  atomic_store(&pool.next, 0);
  pool.active = 0;
  pool.closed = false;
  pool.generation++;
  pthread_cond_broadcast(&pool.work_ready);
  pthread_mutex_unlock(&pool.lock);
  run_tasks(job);
  pthread_mutex_lock(&pool.lock);
  pool.closed = true;
  while (pool.active > 0) pthread_cond_wait(&pool.work_done, &pool.lock);
  pthread_mutex_unlock(&pool.lock);
  pthread_mutex_unlock(&pool_owner);
}
#endif
