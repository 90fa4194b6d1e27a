// The C side of gradkern.wasm's JavaScript API (wasm/gradkern.mjs).
//
// The module exports the library's own functions (gk_op_desc_init,
// gk_plan_create, gk_plan_run, gk_last_error, gk_op_name, ...; see
// wasm/CMakeLists.txt) and these helpers, which take and return plain
// numbers, pointers and names, so the ES module never mirrors the layout of
// a C struct (it allocates gk_struct_size() bytes for one):
//   gkjs_desc_set        one field of a gk_op_desc by its C name ("norm.eps", "accumulate")
//   gkjs_desc_set_shape  an array field ("binary.b_shape")
//   gkjs_plan_arg        the shape, dtype and role a plan expects of an argument
//   gkjs_plan_workspace  its workspace bytes
//   gkjs_plan_kernel, gkjs_plan_isa  what gk_plan_get_info reports
//   gkjs_args_new, gkjs_arg_set  a gk_arg array of contiguous tensors
//   gkjs_backend         a registered backend: name, availability, reason, device
//   gkjs_train           `gradkern train` with progress calls into JavaScript
//   gkjs_sample          `gradkern sample`
//   gkjs_chdir           the working directory WASI paths are relative to
//   gkjs_thread_main     a pool thread's loop (gradkern-threads.wasm only;
//                        wasm/thread.mjs calls it)
// Memory is malloc'ed and free'd by the caller (the exported malloc, free).
#include "gradkern.h"
#include "core/internal.h"  // the plan's argument specs (dtype, output or not)
#include "train.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GKJS_EXPORT(name) __attribute__((export_name(#name))) name

// The scalar fields of gk_op_desc a caller may set, by C name.
typedef enum field_kind { F_INT, F_INT64, F_DOUBLE } field_kind;
typedef struct desc_field {
  const char *name;
  size_t offset;
  field_kind kind;
} desc_field;
#define FIELD(path, kind) {#path, offsetof(gk_op_desc, path), kind}
static const desc_field fields[] = {
    FIELD(backend, F_INT),                 FIELD(accumulate, F_INT),
    FIELD(param_dtype, F_INT),             FIELD(index_dtype, F_INT),
    FIELD(act.approximate, F_INT),         FIELD(act.beta, F_DOUBLE),
    FIELD(act.threshold, F_DOUBLE),        FIELD(act.from_output, F_INT),
    FIELD(gated.form, F_INT),              FIELD(gated.dim, F_INT),
    FIELD(norm.normalized_rank, F_INT),    FIELD(norm.eps, F_DOUBLE),
    FIELD(norm.has_weight, F_INT),         FIELD(norm.has_bias, F_INT),
    FIELD(linear.out_features, F_INT64),   FIELD(linear.has_bias, F_INT),
    FIELD(matmul.n, F_INT64),              FIELD(matmul.trans_a, F_INT),
    FIELD(matmul.trans_b, F_INT),          FIELD(matmul.shared_b, F_INT),
    FIELD(softmax.dim, F_INT),             FIELD(ce.reduction, F_INT),
    FIELD(ce.ignore_index, F_INT64),       FIELD(ce.label_smoothing, F_DOUBLE),
    FIELD(ce.fused_grad, F_INT),           FIELD(ce.grad_scale, F_DOUBLE),
    FIELD(embedding.num_embeddings, F_INT64), FIELD(embedding.dim, F_INT64),
    FIELD(embedding.padding_idx, F_INT64), FIELD(rope.layout, F_INT),
    FIELD(rope.pairing, F_INT),            FIELD(rope.theta, F_DOUBLE),
    FIELD(rope.offset, F_INT64),           FIELD(attn.kv_heads, F_INT64),
    FIELD(attn.causal, F_INT),             FIELD(attn.scale, F_DOUBLE),
    FIELD(binary.b_rank, F_INT),           FIELD(binary.alpha, F_DOUBLE),
    FIELD(conv.width, F_INT64),            FIELD(conv.channel_last, F_INT),
    FIELD(conv.has_bias, F_INT),           FIELD(conv.silu, F_INT),
    FIELD(conv.has_initial_state, F_INT),  FIELD(conv.has_final_state, F_INT),
    FIELD(scan.d_state, F_INT64),          FIELD(scan.b_layout, F_INT),
    FIELD(scan.c_layout, F_INT),           FIELD(scan.groups, F_INT64),
    FIELD(scan.has_D, F_INT),              FIELD(scan.has_z, F_INT),
    FIELD(scan.has_delta_bias, F_INT),     FIELD(scan.delta_softplus, F_INT),
    FIELD(scan.has_initial_state, F_INT),  FIELD(scan.has_final_state, F_INT),
    FIELD(scan.chunk_size, F_INT64),       FIELD(scan.b_dtype, F_INT),
    FIELD(scan.c_dtype, F_INT),
};

// desc.<field> = value. An integer field takes only an integral value in its
// range; the op's own checks (gk_plan_create) judge the value itself.
int GKJS_EXPORT(gkjs_desc_set)(gk_op_desc *d, const char *field, double value) {
  if (!d || !field) return gk_set_error(GK_ERR_NULL_POINTER, "gkjs_desc_set: desc or field is NULL");
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (strcmp(fields[i].name, field)) continue;
    char *at = (char *)d + fields[i].offset;
    double lo = fields[i].kind == F_INT ? -2147483648.0 : -9223372036854775808.0;
    if (fields[i].kind != F_DOUBLE && !(value == floor(value) && value >= lo && value < -lo)) {
      char msg[160];
      snprintf(msg, sizeof msg, "desc.%s = %g: an integer field takes an integer", field, value);
      return gk_set_error(GK_ERR_INVALID_VALUE, msg);
    }
    switch (fields[i].kind) {
    case F_INT: *(int *)at = (int)value; break;
    case F_INT64: *(int64_t *)at = (int64_t)value; break;
    case F_DOUBLE: *(double *)at = value; break;
    }
    return gk_set_error(GK_SUCCESS, NULL);
  }
  char msg[160];
  snprintf(msg, sizeof msg, "desc.%.60s is not a field of gk_op_desc that can be set", field);
  return gk_set_error(GK_ERR_INVALID_VALUE, msg);
}

// desc.binary.b_shape (the only array field besides desc.shape) = shape[0 .. rank).
int GKJS_EXPORT(gkjs_desc_set_shape)(gk_op_desc *d, const char *field, int rank, const int64_t *shape) {
  if (!d || !field || (rank > 0 && !shape))
    return gk_set_error(GK_ERR_NULL_POINTER, "gkjs_desc_set_shape: desc, field or shape is NULL");
  if (strcmp(field, "binary.b_shape")) {
    char msg[160];
    snprintf(msg, sizeof msg, "desc.%.60s is not a shape field of gk_op_desc (binary.b_shape)", field);
    return gk_set_error(GK_ERR_INVALID_VALUE, msg);
  }
  if (rank < 0 || rank > GK_MAX_RANK) {
    char msg[160];
    snprintf(msg, sizeof msg, "desc.binary.b_rank = %d is outside 0..%d", rank, GK_MAX_RANK);
    return gk_set_error(GK_ERR_BAD_RANK, msg);
  }
  d->binary.b_rank = rank;
  for (int i = 0; i < rank; i++) d->binary.b_shape[i] = shape[i];
  return gk_set_error(GK_SUCCESS, NULL);
}

// The rank the plan expects of argument `kind`, with its shape into
// shape[0 .. GK_MAX_RANK) and role[0] = its dtype, role[1] = 1 for an output
// (written by the run), 0 for an input; -1 when the op does not take it, -2
// on error.
int GKJS_EXPORT(gkjs_plan_arg)(const gk_plan *plan, int kind, int64_t *shape, int *role) {
  int rank;
  if (!role) return gk_set_error(GK_ERR_NULL_POINTER, "gkjs_plan_arg: role is NULL"), -2;
  if (gk_plan_arg_shape(plan, (gk_arg_kind)kind, &rank, shape) != GK_SUCCESS) return -2;
  if (rank >= 0) {
    role[0] = (int)plan->args[kind].dtype;
    role[1] = plan->args[kind].is_output;
  }
  return rank;
}

// Workspace bytes, or -1 on error.
double GKJS_EXPORT(gkjs_plan_workspace)(const gk_plan *plan) {
  size_t bytes;
  return gk_plan_workspace_size(plan, &bytes) == GK_SUCCESS ? (double)bytes : -1;
}

const char *GKJS_EXPORT(gkjs_plan_kernel)(const gk_plan *plan) {
  gk_plan_info info;
  return gk_plan_get_info(plan, &info) == GK_SUCCESS ? info.kernel : "";
}

const char *GKJS_EXPORT(gkjs_plan_isa)(const gk_plan *plan) {
  gk_plan_info info;
  return gk_plan_get_info(plan, &info) == GK_SUCCESS ? info.isa : "";
}

// The CPU backend's instruction-set level, one per module: "simd128-relaxed", "simd128" or "scalar".
const char *GKJS_EXPORT(gkjs_isa)(void) { return gk_isa_name(gk_isa_level()); }

gk_arg *GKJS_EXPORT(gkjs_args_new)(int n) { return n > 0 ? calloc((size_t)n, sizeof(gk_arg)) : NULL; }

// args[i] = a contiguous tensor of `kind` at data.
int GKJS_EXPORT(gkjs_arg_set)(gk_arg *args, int i, int kind, void *data, int dtype, int rank, const int64_t *shape) {
  if (!args) return gk_set_error(GK_ERR_NULL_POINTER, "gkjs_arg_set: args is NULL");
  args[i].kind = (gk_arg_kind)kind;
  return gk_tensor_init(&args[i].tensor, data, (gk_dtype)dtype, rank, shape);
}

// Backend `index` (gk_backend_get): its name, or NULL past the last;
// available[0] = 1 when it can run here, texts[0] = why not ("" when it
// can), texts[1] = its device's description ("" for host backends).
const char *GKJS_EXPORT(gkjs_backend)(int index, int *available, const char **texts) {
  gk_backend_info info;
  if (!available || !texts || gk_backend_get(index, &info) != GK_SUCCESS) return NULL;
  available[0] = info.available;
  texts[0] = info.reason ? info.reason : "";
  texts[1] = gk_backend_device_description(info.id);
  return info.name;
}

// ---------------------------------------------------------------- training

// Imported from JavaScript (module "gradkern"): the trainer's progress.
__attribute__((import_module("gradkern"), import_name("train_step"))) int js_train_step(double step, double steps,
                                                                                         double loss, double lr);
__attribute__((import_module("gradkern"), import_name("train_eval"))) void js_train_eval(double step, double loss,
                                                                                          double accuracy);

static int on_step(void *ctx, int64_t step, int64_t steps, double loss, double lr) {
  (void)ctx;
  return js_train_step((double)step, (double)steps, loss, lr);
}

static void on_eval(void *ctx, int64_t step, double loss, double accuracy) {
  (void)ctx;
  js_train_eval((double)step, loss, accuracy);
}

// `gradkern train argv[0] .. argv[argc-1]`: the exit status. Output goes to
// WASI's stdout and stderr, flushed before returning.
int GKJS_EXPORT(gkjs_train)(int argc, char **argv) {
  gk_train_hooks hooks = {on_step, on_eval, NULL};
  int rc = gk_train_run(argc, argv, &hooks);
  fflush(NULL);
  return rc;
}

// `gradkern sample argv[0] .. argv[argc-1]`: the exit status; the text on
// WASI's stdout, flushed before returning.
int GKJS_EXPORT(gkjs_sample)(int argc, char **argv) {
  int rc = gk_cmd_sample(argc, argv);
  fflush(NULL);
  return rc;
}

int GKJS_EXPORT(gkjs_chdir)(const char *path) { return chdir(path); }

#ifdef GK_WASM_THREADS
void GKJS_EXPORT(gkjs_thread_main)(void) { gk_wasm_thread_main(); }
#endif
