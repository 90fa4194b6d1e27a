// Helpers shared by the C tests that run plans against each other (test_ops,
// test_mamba, test_transformer): the tensors of one plan run (an argset)
// built from the plan's argument shapes, running a description on a
// backend (on a device backend through its buffers), comparing every
// registered backend with the reference one, bit-identity across thread
// counts.
//
// What differs between the test files (which arguments are outputs, their
// dtypes, how inputs are filled, which stay contiguous, the tolerances) each
// file gives in a plan_roles.
#ifndef GK_TEST_PLAN_HARNESS_H
#define GK_TEST_PLAN_HARNESS_H

#include "harness.h"
#include "toy_backend.h"

// ---------------------------------------------------------------- argument sets

// Tensors of one plan run, indexed by gk_arg_kind.
typedef struct argset {
  tbuf b[GK_ARG_COUNT_];
  bool have[GK_ARG_COUNT_];
  bool input_only[GK_ARG_COUNT_];  // the run only reads it (plan_build's inputs); false: may be written
} argset;

static inline void argset_free(argset *s) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k]) tbuf_free(&s->b[k]);
  memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------- backends

// The device of backend `be` (GK_DEVICE_CPU when it is not registered).
static inline gk_device_type backend_device(gk_backend be) {
  gk_backend_info bi;
  for (int i = 0; i < gk_backend_count(); i++)
    if (gk_backend_get(i, &bi) == GK_SUCCESS && bi.id == be) return bi.device;
  return GK_DEVICE_CPU;
}

// Whether GK_TEST_BACKEND names `name`.
static inline bool test_backend_is(const char *name) {
  const char *want = getenv("GK_TEST_BACKEND");
  return want && !strcmp(want, name);
}

// The backends compared with ref: every registered, available backend but
// ref (the cpu backend, and any a test registers); their number. The
// vulkan backend (built in when Vulkan is found) only when GK_TEST_BACKEND=vulkan:
// its runs on a CPU Vulkan driver are slow, so its test runs apart.
static inline int tested_backends(gk_backend *out, int max) {
  int n = 0;
  gk_backend_info bi;
  for (int i = 0; i < gk_backend_count() && n < max; i++)
    if (gk_backend_get(i, &bi) == GK_SUCCESS && bi.available && bi.id != GK_BACKEND_REF &&
        (bi.id != GK_BACKEND_VULKAN || test_backend_is("vulkan")))
      out[n++] = bi.id;
  return n;
}

// Whether backend `be` takes description d. A device backend may decline
// f64 (the vulkan backend computes in f32): such a decline is counted in
// declined_runs and the case is left out for that backend; any other decline
// fails (with the backend's reasons).
static int declined_runs;
static inline bool backend_takes(const gk_op_desc *d, gk_backend be) {
  if (be == GK_BACKEND_REF || be == GK_BACKEND_CPU) return true;
  gk_op_desc dd = *d;
  dd.backend = be;
  gk_plan *plan;
  gk_status st = gk_plan_create(&dd, &plan);
  if (st == GK_SUCCESS) gk_plan_destroy(plan);
  if (st != GK_ERR_UNSUPPORTED) return true;  // the run reports any other failure
  check(d->dtype == GK_F64, "%s %s %s: backend %s declines: %s", gk_op_name(d->op),
        d->direction == GK_FORWARD ? "fwd" : "bwd", gk_dtype_name(d->dtype), gk_backend_name(be), gk_last_error());
  declined_runs++;
  return false;
}

// Every backend the tests run: ref (i = 0), then the tested ones.
static inline int backends_under_test(void) {
  gk_backend bes[16];
  return 1 + tested_backends(bes, 16);
}
static inline gk_backend backend_under_test(int i) {
  gk_backend bes[16];
  tested_backends(bes, 16);
  return i == 0 ? GK_BACKEND_REF : bes[i - 1];
}

// Backends a test run adds by registering: GK_TEST_BACKEND=toy registers
// the toy device backend (toy_backend.h), which then gets every comparison
// with ref that the cpu backend gets.
// GK_TEST_BACKEND=vulkan compares the vulkan backend too, and fails at once
// when it is not built or has no device (with the reason).
static inline void register_test_backends(void) {
  if (test_backend_is("toy") && toy_backend_register() != GK_SUCCESS) {
    fprintf(stderr, "GK_TEST_BACKEND=toy: %s\n", gk_last_error());
    exit(1);
  }
  if (test_backend_is("vulkan")) {
    gk_backend_info bi = {0};
    int i = 0;
    while (i < gk_backend_count() && (gk_backend_get(i, &bi) != GK_SUCCESS || bi.id != GK_BACKEND_VULKAN)) i++;
    if (i == gk_backend_count()) {
      fprintf(stderr, "GK_TEST_BACKEND=vulkan: the library was built without the vulkan backend\n");
      exit(1);
    }
    if (!bi.available) {
      fprintf(stderr, "GK_TEST_BACKEND=vulkan: the vulkan backend has no device: %s\n", bi.reason);
      exit(1);
    }
  }
}

// ---------------------------------------------------------------- a second read

// The last run on a device backend (run_desc) keeps its buffers, workspace
// and plan until the next run_desc (or device_run_release), which frees
// them first, in the order the run would have: so that when a check of its
// outputs fails, device_reread can read an output's storage from the device
// again. A second read after a full wait that passes, where the first did
// not, means the device held the right bytes and the first read returned
// others (stale ones); a second read identical to the first means the
// device's buffer holds the wrong bytes (a kernel, a dispatch's parameters,
// an upload). device_runs counts the device runs, to name the failing one.
static struct {
  gk_buffer *bufs[GK_ARG_COUNT_];       // the storages the run uploaded (owners only)
  const unsigned char *alloc[GK_ARG_COUNT_];  // their host storage, which the run's download wrote
  gk_buffer *wbuf;
  gk_plan *plan;
  gk_backend be;
} last_device_run;
static int device_runs;

static inline void device_run_release(void) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (last_device_run.bufs[k]) gk_buffer_free(last_device_run.bufs[k]);
  if (last_device_run.wbuf) gk_buffer_free(last_device_run.wbuf);
  if (last_device_run.plan) gk_plan_destroy(last_device_run.plan);
  memset(&last_device_run, 0, sizeof last_device_run);
}

// Output k of `got`: when got is the argset of the last device run, its
// storage read again from the device after gk_backend_synchronize, as a copy
// of got's tbuf in *again (tbuf_free it), with the number of bytes that
// differ from the first read in *differing; false (nothing read) otherwise.
// A third read follows at once: reread_changing, the bytes where it differs
// from the second (nonzero: the buffer's bytes change with nothing running
// that writes it, or reads disagree).
static size_t reread_changing;
static inline bool device_reread(const argset *got, int k, tbuf *again, size_t *differing) {
  const tbuf *b = &got->b[k];
  int owner = -1;
  for (int j = 0; j < GK_ARG_COUNT_ && owner < 0; j++)
    if (last_device_run.bufs[j] && last_device_run.alloc[j] == b->alloc) owner = j;
  if (owner < 0) return false;
  size_t total = b->bytes + 2 * GUARD;
  *again = *b;
  again->alloc = malloc(total);
  again->t.data = again->alloc + ((unsigned char *)b->t.data - b->alloc);
  if (gk_backend_synchronize(last_device_run.be) != GK_SUCCESS ||
      gk_buffer_download(last_device_run.bufs[owner], 0, again->alloc, total) != GK_SUCCESS) {
    tbuf_free(again);
    return false;
  }
  *differing = 0;
  for (size_t i = 0; i < total; i++) *differing += again->alloc[i] != b->alloc[i];
  unsigned char *third = malloc(total);
  reread_changing = 0;
  if (gk_buffer_download(last_device_run.bufs[owner], 0, third, total) == GK_SUCCESS)
    for (size_t i = 0; i < total; i++) reread_changing += third[i] != again->alloc[i];
  free(third);
  return true;
}

// The words a failure message ends with after a second read (passes: the
// failed check, made on the second read, passes).
static inline void reread_note(char *buf, size_t n, size_t differing, bool passes) {
  char third[80] = "";
  if (reread_changing) snprintf(third, sizeof third, "; a third read differs from it in %zu bytes", reread_changing);
  if (!differing)
    snprintf(buf, n, " (device run %d; read again after a wait: the same bytes%s)", device_runs, third);
  else
    snprintf(buf, n, " (device run %d; read again after a wait: %zu bytes differ from the first read, and the check %s%s)",
             device_runs, differing, passes ? "passes: the first read was stale" : "fails too", third);
}

// Create a plan for d on backend `be` and run it on the tensors of s. On a
// device backend each tensor's storage (guards included) is copied into a
// buffer of the backend (tensors sharing storage share the buffer), the
// plan runs there, and the storage is copied back, so outputs and canaries
// read as after a host run; the buffers are kept until the next run
// (last_device_run). A storage that only inputs use (input_only) is read
// back into scratch and checked unchanged instead: the kernel must not
// write it, and a wrong read of it then fails this run alone rather than
// the later checks that reuse the inputs.
static inline gk_status run_desc(const gk_op_desc *d, gk_backend be, const argset *s) {
  device_run_release();
  gk_op_desc dd = *d;
  dd.backend = be;
  gk_plan *plan;
  gk_status st = gk_plan_create(&dd, &plan);
  if (st != GK_SUCCESS) return st;
  gk_device_type dev = backend_device(be);
  gk_arg args[GK_ARG_COUNT_];
  gk_buffer *bufs[GK_ARG_COUNT_] = {0};
  bool owner[GK_ARG_COUNT_] = {0};  // the first argument of each storage
  int n = 0;
  for (int k = 0; k < GK_ARG_COUNT_ && st == GK_SUCCESS; k++) {
    if (!s->have[k]) continue;
    const tbuf *b = &s->b[k];
    args[n] = (gk_arg){(gk_arg_kind)k, b->t};
    if (dev != GK_DEVICE_CPU) {
      for (int j = 0; j < k && !bufs[k]; j++)
        if (bufs[j] && s->b[j].alloc == b->alloc) bufs[k] = bufs[j];
      if (!bufs[k]) {
        owner[k] = true;
        st = gk_buffer_alloc(be, b->bytes + 2 * GUARD, &bufs[k]);
        if (st == GK_SUCCESS) st = gk_buffer_upload(bufs[k], 0, b->alloc, b->bytes + 2 * GUARD);
      }
      args[n].tensor.data = (char *)gk_buffer_address(bufs[k]) + ((char *)b->t.data - (char *)b->alloc);
      args[n].tensor.device = dev;
    }
    n++;
  }
  size_t ws = 0;
  gk_plan_workspace_size(plan, &ws);
  gk_buffer *wbuf = NULL;
  void *w = NULL;
  if (st == GK_SUCCESS && ws && dev != GK_DEVICE_CPU) {
    st = gk_buffer_alloc(be, ws, &wbuf);
    w = gk_buffer_address(wbuf);
  } else if (ws) {
    w = ws_alloc(ws);
  }
  if (st == GK_SUCCESS) st = gk_plan_run(plan, args, n, w, ws);
  if (dev != GK_DEVICE_CPU) device_runs++;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!owner[k]) continue;
    size_t total = s->b[k].bytes + 2 * GUARD;
    bool read_only = true;
    for (int j = k; j < GK_ARG_COUNT_; j++)
      if (s->have[j] && s->b[j].alloc == s->b[k].alloc) read_only &= s->input_only[j];
    unsigned char *scratch = read_only ? malloc(total) : NULL, *dst = scratch ? scratch : s->b[k].alloc;
    gk_status down = gk_buffer_download(bufs[k], 0, dst, total);
    if (st == GK_SUCCESS) st = down;
    if (scratch && down == GK_SUCCESS) {
      size_t changed = 0;
      for (size_t i = 0; i < total; i++) changed += dst[i] != s->b[k].alloc[i];
      check(!changed, "%s %s on %s (device run %d): input %s reads back changed in %zu of %zu bytes",
            gk_op_name(d->op), d->direction == GK_FORWARD ? "forward" : "backward", gk_backend_name(be),
            device_runs, gk_arg_name((gk_arg_kind)k), changed, total);
    }
    free(scratch);
  }
  if (dev == GK_DEVICE_CPU) {
    free(w);
    gk_plan_destroy(plan);
    return st;
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (owner[k]) {
      last_device_run.bufs[k] = bufs[k];
      last_device_run.alloc[k] = s->b[k].alloc;
    }
  last_device_run.wbuf = wbuf;
  last_device_run.plan = plan;
  last_device_run.be = be;
  return st;
}

// The roles of a plan's arguments, as one test file sees them.
typedef struct plan_roles {
  bool (*is_output)(const gk_op_desc *d, int k);          // written by the run
  gk_dtype (*dtype_of)(const gk_op_desc *d, int k);       // the argument's dtype
  bool (*contiguous)(int k);                              // kept contiguous in every layout; NULL: none
  void (*fill)(const gk_op_desc *d, const gk_tensor *t, int k);  // random values of input k
  tol (*tol_for)(const gk_op_desc *d, int k, gk_dtype out_dtype);  // cpu against ref; NULL: tol_of(out_dtype)
  const char *(*describe)(const gk_op_desc *d, layout lay, char *buf, size_t n);  // for messages
} plan_roles;

static inline layout plan_layout(const plan_roles *r, int k, layout lay) {
  return r->contiguous && r->contiguous(k) ? CONTIGUOUS : lay;
}

// Allocate the tensors of the plan for d: inputs in layout `lay` (copied
// from `from` where it has them, else random), outputs left as canaries.
// False (and s empty) when the plan cannot be created.
static inline bool plan_build(const plan_roles *r, const gk_op_desc *d, layout lay, const argset *from, argset *s) {
  memset(s, 0, sizeof *s);
  gk_plan *plan;
  if (gk_plan_create(d, &plan) != GK_SUCCESS) return false;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    s->b[k] = tbuf_make(r->dtype_of(d, k), rank, shape, plan_layout(r, k, lay));
    s->have[k] = true;
    if (r->is_output(d, k)) continue;
    s->input_only[k] = true;
    if (from && from->have[k]) tcopy_values(&s->b[k].t, &from->b[k].t);
    else r->fill(d, &s->b[k].t, k);
  }
  gk_plan_destroy(plan);
  return true;
}

// A copy of s whose outputs are fresh canary buffers (inputs shared).
static inline void clone_outputs(const plan_roles *r, const gk_op_desc *d, const argset *s, layout lay,
                                 argset *out) {
  *out = *s;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k] && r->is_output(d, k))
      out->b[k] = tbuf_make(s->b[k].t.dtype, s->b[k].t.rank, s->b[k].t.shape, plan_layout(r, k, lay));
}

static inline void free_outputs(const plan_roles *r, const gk_op_desc *d, argset *s) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (s->have[k] && r->is_output(d, k)) tbuf_free(&s->b[k]);
}

// ---------------------------------------------------------------- every backend vs ref

// Each output of the cpu run (cpu) against the reference run's (ref_out):
// within the tolerance, and no byte written outside its elements. `record`,
// when given, sees each pair too.
static inline void compare_outputs(const plan_roles *r, const gk_op_desc *d, const argset *s, const argset *cpu,
                                   const argset *ref_out, const char *name,
                                   void (*record)(const gk_op_desc *d, const gk_tensor *got, const gk_tensor *want)) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!s->have[k] || !r->is_output(d, k)) continue;
    gk_dtype dt = cpu->b[k].t.dtype;
    tol tl = r->tol_for ? r->tol_for(d, k, dt) : tol_of(dt);
    double e = tcompare(&cpu->b[k].t, &ref_out->b[k].t, tl, true);
    bool intact = tbuf_canaries_intact(&cpu->b[k]) && tbuf_canaries_intact(&ref_out->b[k]);
    char note[400] = "";
    tbuf again;
    size_t differing;
    if ((e > 1.0 || !intact) && device_reread(cpu, k, &again, &differing)) {
      bool passes = tcompare(&again.t, &ref_out->b[k].t, tl, false) <= 1.0 && tbuf_canaries_intact(&again) &&
                    tbuf_canaries_intact(&ref_out->b[k]);
      reread_note(note, sizeof note, differing, passes);
      tbuf_free(&again);
    }
    check(e <= 1.0, "%s: output %s differs from ref by %.3g tolerances%s", name, gk_arg_name((gk_arg_kind)k), e, note);
    if (record) record(d, &cpu->b[k].t, &ref_out->b[k].t);
    check(intact, "%s: bytes outside output %s were written%s", name, gk_arg_name((gk_arg_kind)k), note);
  }
}

// Run d on ref and on every tested backend with the same inputs; compare
// outputs and canaries (`record`, when given, sees each pair). Leaves the
// reference outputs in *ref_out (free with free_outputs).
static inline void compare_backends_recording(const plan_roles *r, const gk_op_desc *d, layout lay, const argset *s,
                                              argset *ref_out,
                                              void (*record)(const gk_op_desc *d, const gk_tensor *got,
                                                             const gk_tensor *want)) {
  char name[320], named[400];
  r->describe(d, lay, name, sizeof name);
  clone_outputs(r, d, s, lay, ref_out);
  gk_status a = run_desc(d, GK_BACKEND_REF, ref_out);
  check(a == GK_SUCCESS, "%s: ref: %s", name, gk_last_error());
  gk_backend bes[16];
  int nb = tested_backends(bes, 16);
  for (int i = 0; i < nb; i++) {
    if (!backend_takes(d, bes[i])) continue;
    argset got;
    clone_outputs(r, d, s, lay, &got);
    gk_status b = run_desc(d, bes[i], &got);
    snprintf(named, sizeof named, "%s on %s", name, gk_backend_name(bes[i]));
    check(b == GK_SUCCESS, "%s: %s", named, gk_last_error());
    compare_outputs(r, d, s, &got, ref_out, named, record);
    free_outputs(r, d, &got);
  }
}

static inline void compare_backends(const plan_roles *r, const gk_op_desc *d, layout lay, const argset *s,
                                    argset *ref_out) {
  compare_backends_recording(r, d, lay, s, ref_out, NULL);
}

// d's backward with dy broadcast from one value (every stride 0: the dy
// autograd hands the backward of y.sum()) against the reference.
static inline void compare_one_value_dy(const plan_roles *r, const gk_op_desc *d) {
  argset s, ref_out;
  plan_build(r, d, CONTIGUOUS, NULL, &s);
  gk_tensor *dy = &s.b[GK_ARG_DY].t;
  for (int k = 0; k < dy->rank; k++) dy->strides[k] = 0;
  compare_backends(r, d, CONTIGUOUS, &s, &ref_out);
  free_outputs(r, d, &ref_out);
  argset_free(&s);
}

// ---------------------------------------------------------------- threads

// The CPU kernel, run on the inputs of `in` with 1, 2 and 3 threads, gives
// the same bits in every output.
static inline void check_thread_identity(const plan_roles *r, const gk_op_desc *d, const argset *in) {
  char name[320];
  r->describe(d, CONTIGUOUS, name, sizeof name);
  argset runs[3];
  for (int t = 0; t < 3; t++) {
    gk_set_num_threads(t + 1);
    clone_outputs(r, d, in, CONTIGUOUS, &runs[t]);
    check(run_desc(d, GK_BACKEND_CPU, &runs[t]) == GK_SUCCESS, "threads %d: %s", t + 1, gk_last_error());
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!in->have[k] || !r->is_output(d, k)) continue;
    for (int t = 1; t < 3; t++)
      check(tbits_equal(&runs[0].b[k].t, &runs[t].b[k].t), "%s: output %s with %d threads differs from 1 thread",
            name, gk_arg_name((gk_arg_kind)k), t + 1);
  }
  for (int t = 0; t < 3; t++) free_outputs(r, d, &runs[t]);
}

// ---------------------------------------------------------------- finite differences

// L = sum over `outs` of forward output * its upstream gradient (outputs in
// f, upstream gradients in b). For each element of each input in `pairs`
// that f and b both have, the central difference of L (step 1e-5, forward
// of fwd on backend `be`) against backward's gradient in b. Returns the
// largest relative error |numeric - analytic| / max(|numeric|, |analytic|, 1e-3).
static inline double fd_max_rel_err(const gk_op_desc *fwd, gk_backend be, const argset *f, const argset *b,
                                    const int (*pairs)[2], size_t npairs, const int (*outs)[2], size_t nouts) {
  double worst = 0, h = 1e-5;
  for (size_t p = 0; p < npairs; p++) {
    int in = pairs[p][0], grad = pairs[p][1];
    if (!f->have[in] || !b->have[grad]) continue;
    const gk_tensor *t = &f->b[in].t;
    int64_t n = gk_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
      double x0 = tget(t, i), loss[2];
      for (int side = 0; side < 2; side++) {
        tset(t, i, x0 + (side ? -h : h));
        run_desc(fwd, be, f);
        loss[side] = 0;
        for (size_t q = 0; q < nouts; q++) {
          int o = outs[q][0], u = outs[q][1];
          if (!f->have[o]) continue;
          int64_t no = gk_tensor_numel(&f->b[o].t);
          for (int64_t j = 0; j < no; j++) loss[side] += tget(&f->b[o].t, j) * tget(&b->b[u].t, j);
        }
      }
      tset(t, i, x0);
      double numeric = (loss[0] - loss[1]) / (2 * h), analytic = tget(&b->b[grad].t, i);
      double rel = fabs(numeric - analytic) / fmax(fmax(fabs(numeric), fabs(analytic)), 1e-3);
      if (rel > worst) worst = rel;
    }
  }
  return worst;
}

#endif
