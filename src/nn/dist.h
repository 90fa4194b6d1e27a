// Data-parallel training across processes: the ranks of an MPI job (mpirun
// -np N gradkern train ...), or one rank.
//
// The library itself knows nothing of MPI: this is the training program's.
// Built with MPI (GK_WITH_MPI, when CMake finds it), a process started by
// mpirun (or another launcher that sets the usual MPI environment) joins
// the job; a process started alone stays one rank and never initialises
// MPI. Built without MPI, every process is one rank; gk_dist_launched()
// lets the caller refuse a run that was started as several.
//
// Every collective below is called by every rank, in the same order.
// Results are identical on all ranks and do not depend on timing: sums are
// formed in rank order by this code, never by MPI's reduction algorithms.
//
// Shards: the flat parameter array of n elements is cut into size
// contiguous shards, rank r holding [n r / size, n (r + 1) / size): uneven
// when size does not divide n.
//
// Gradient reduction (gk_grad_sync): as backward finishes a group of
// parameters (gk_run_on_grads_ready), their gradients, scaled by this
// rank's weight in the global mean, are packed in order of their offset
// into a bucket and the bucket's reduction starts (non-blocking): an
// all-to-all sends every rank the part of the bucket in its shard, which it
// sums in rank order; then (unless sharded) an all-gather gives every rank
// the whole sum. Bytes sent per rank and step: 2 (size - 1) / size of the
// gradients, as a ring all-reduce; with the optimizer sharded, half of it
// (each rank needs its shard only), the parameters' all-gather the other
// half.
#ifndef GK_NN_DIST_H
#define GK_NN_DIST_H

#include "model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gk_dist gk_dist;

// Join the MPI job this process was started in, or be the one rank. Every
// rank but 0 then writes nothing on stdout (it goes to /dev/null).
gk_status gk_dist_init(gk_dist **out);
// Leave it (MPI_Finalize when it was initialised); NULL is a no-op.
void gk_dist_free(gk_dist *d);
int gk_dist_rank(const gk_dist *d);
int gk_dist_size(const gk_dist *d);
// Whether this program was built with MPI.
bool gk_dist_built_with_mpi(void);
// The number of processes the launcher says it started (its environment:
// OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...), 1 when none says so.
int gk_dist_launched(void);
// The number of this job's processes on this machine, as the launcher says
// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS), 1 when none says so.
int gk_dist_local_size(void);
// Stop every rank at once with exit code `code` (after a message on this
// rank): for a failure the others cannot know of.
void gk_dist_abort(gk_dist *d, int code);

// With more than one rank: unless disarmed (seconds 0) or armed again
// within `seconds`, this process ends (exit code 1) with a message naming
// its rank and `what` ("step 12"): a rank that died or hangs leaves the
// others waiting in a collective, and mpirun then stops the rest.
void gk_dist_watchdog(gk_dist *d, int seconds, const char *what);
// Test-only (GK_TEST_FAULT=hang@R): this rank stops answering, as a hung
// rank does, until a signal (the watchdog's) ends it. One rank: returns.
void gk_dist_test_hang(const gk_dist *d);

// Collectives (every rank, same order).
// v[0..n) = the sum over ranks, added in rank order.
gk_status gk_dist_sum(gk_dist *d, double *v, int n);
// The largest *v over ranks (e.g. agreeing that one rank failed).
gk_status gk_dist_max(gk_dist *d, int *v);
// bytes of buf from rank 0 to every rank.
gk_status gk_dist_broadcast(gk_dist *d, void *buf, size_t bytes);
// The shard [*lo, *hi) of `rank` in an array of n elements.
void gk_dist_shard(const gk_dist *d, int rank, int64_t n, int64_t *lo, int64_t *hi);
// all (n elements) on every rank from each rank's shard all[lo, hi).
gk_status gk_dist_allgather(gk_dist *d, float *all, int64_t n);
// Rank 0's all (n elements) from each rank's shard `mine` (hi - lo
// elements); all is ignored on the other ranks.
gk_status gk_dist_gather(gk_dist *d, const float *mine, float *all, int64_t n);
// Each rank's shard `mine` from rank 0's all (n elements).
gk_status gk_dist_scatter(gk_dist *d, const float *all, float *mine, int64_t n);

// Gradient reduction in buckets during backward (see the top).
typedef struct gk_grad_sync gk_grad_sync;

// For model m; sharded: each rank receives the sum of its shard of m->g
// only (the rest of m->g is left as backward wrote it).
gk_status gk_grad_sync_create(gk_dist *d, gk_model *m, bool sharded, gk_grad_sync **out);
void gk_grad_sync_free(gk_grad_sync *s);
// Before a step: this rank's gradients count `weight` in the sum (its
// share of the counted targets; NaN-free: 0 for a rank with none). Then
// connect gk_grad_sync_ready to the run (gk_run_on_grads_ready).
void gk_grad_sync_begin(gk_grad_sync *s, double weight);
// The run's grads-ready hook (ctx: the gk_grad_sync).
void gk_grad_sync_ready(void *ctx, int first, int n);
// After backward: wait for every bucket and write the sums into m->g.
gk_status gk_grad_sync_end(gk_grad_sync *s);

// What a step's reduction cost, summed since gk_grad_sync_create.
typedef struct gk_grad_sync_stats {
  int64_t steps, buckets;        // buckets per step: buckets / steps
  double wait_seconds;           // in gk_grad_sync_end: communication not hidden by backward
  double busy_seconds;           // packing, summing, unpacking, starting and testing during backward
  double bytes_sent;             // by this rank (gradients only)
} gk_grad_sync_stats;
gk_grad_sync_stats gk_grad_sync_get_stats(const gk_grad_sync *s);

#endif
