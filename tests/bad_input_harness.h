// Helpers shared by the bad-input tests (test_bad_input, test_bad_input_mamba,
// test_transformer_bad_input): the expected rejection, and a plan with its
// tensors (a fixture) to break at run time, with the check that a rejected
// call wrote nothing. What differs between the files (argument dtypes, how
// inputs are filled, which arguments are outputs) each gives in a
// fixture_roles named fixture_roles_of_file.
#ifndef GK_TEST_BAD_INPUT_HARNESS_H
#define GK_TEST_BAD_INPUT_HARNESS_H

#include "harness.h"

// Bad inputs checked, for the closing report.
static int cases __attribute__((unused));

// One bad input: the status it must return and a piece of the message.
static inline void expect(gk_status got, gk_status want, const char *needle, const char *what) {
  cases++;
  const char *msg = gk_last_error();
  check(got == want, "%s: status %d (%s), want %d (%s); message: %s", what, got, gk_status_string(got), want,
        gk_status_string(want), msg);
  check(strstr(msg, needle) != NULL, "%s: message \"%s\" does not name \"%s\"", what, msg, needle);
}

// The status of creating a plan for d (the plan, if any, destroyed).
static inline gk_status create(const gk_op_desc *d) {
  gk_plan *p = NULL;
  gk_status s = gk_plan_create(d, &p);
  gk_plan_destroy(p);
  return s;
}

struct fixture;

// The roles of a fixture's arguments, as one bad-input test sees them.
typedef struct fixture_roles {
  gk_dtype (*dtype_of)(const gk_op_desc *d, int k);
  void (*fill)(const gk_op_desc *d, const gk_tensor *t, int k);  // valid values, or nothing for outputs
  bool (*is_output)(struct fixture *f, int k);                    // must stay canaries when rejected
} fixture_roles;

// A plan and its tensors (inputs filled by the roles, outputs left as
// canaries) for run-time checks.
typedef struct fixture {
  const fixture_roles *roles;
  gk_plan *plan;
  gk_direction dir;
  tbuf b[GK_ARG_COUNT_];
  gk_arg args[GK_ARG_COUNT_];
  int nargs;
  void *ws;
  size_t ws_bytes;
} fixture;

static inline void fixture_make(fixture *f, const fixture_roles *r, const gk_op_desc *d) {
  memset(f, 0, sizeof *f);
  f->roles = r;
  f->dir = d->direction;
  if (gk_plan_create(d, &f->plan) != GK_SUCCESS) {
    check(false, "fixture %s: %s", gk_op_name(d->op), gk_last_error());
    return;
  }
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(f->plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    f->b[k] = tbuf_make(r->dtype_of(d, k), rank, shape, CONTIGUOUS);
    r->fill(d, &f->b[k].t, k);
    f->args[f->nargs++] = (gk_arg){(gk_arg_kind)k, f->b[k].t};
  }
  gk_plan_workspace_size(f->plan, &f->ws_bytes);
  f->ws = ws_alloc(f->ws_bytes ? f->ws_bytes : 64);
}

static inline gk_arg *arg_of(fixture *f, gk_arg_kind k) {
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i].kind == k) return &f->args[i];
  return NULL;
}

static inline gk_status run(fixture *f) { return gk_plan_run(f->plan, f->args, f->nargs, f->ws, f->ws_bytes); }

// Nothing was written: every output still holds only canary bytes.
static inline void check_untouched(fixture *f, const char *what) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!f->b[k].alloc || !f->roles->is_output(f, k)) continue;
    bool clean = true;
    for (size_t i = 0; i < f->b[k].bytes + 2 * GUARD; i++) clean &= f->b[k].alloc[i] == CANARY;
    check(clean, "%s: output %s was written by a rejected call", what, gk_arg_name((gk_arg_kind)k));
  }
}

static inline void fixture_free(fixture *f) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (f->b[k].alloc) tbuf_free(&f->b[k]);
  free(f->ws);
  gk_plan_destroy(f->plan);
}

// Run a fixture for d (roles `fixture_roles_of_file`, which the including
// file defines) after `mutate` changed it, expecting a rejection that
// writes nothing.
#define EXPECT_RUN(d, mutate, status, needle, what) \
  do {                                              \
    fixture f;                                      \
    fixture_make(&f, &fixture_roles_of_file, d);    \
    mutate;                                         \
    expect(run(&f), status, needle, what);          \
    check_untouched(&f, what);                      \
    fixture_free(&f);                               \
  } while (0)

#endif
