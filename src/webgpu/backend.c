// The WebGPU backend: device buffers (pooled), the arena every kernel runs
// in, the staging that gathers a run's tensors into the arena and scatters
// its outputs back, and the kernel table.
//
// Most kernels bind two things: their parameters (a uniform struct of u32
// and f32 words) and the arena (one storage buffer). Such a run copies its
// inputs into arena slots (a buffer-to-buffer copy when the tensor is
// contiguous, the gather shader when strided or broadcast), dispatches its
// passes on the slots, and copies its outputs back (the scatter shader for
// strided outputs). Shaders therefore see contiguous row-major tensors
// only, need no more bindings than any adapter has, and in-place runs are
// safe by construction, at the cost of one extra read and write of each
// tensor. The bound families (wg_family.bound: all but linear, matmul,
// attention, conv1d and the scan) bind each tensor by itself instead, so a
// contiguous tensor is read and written where it lies (place_bound below);
// only what cannot be bound so goes through the arena, and a run whose
// tensors are over the binding limit runs in pieces (wg_run_kernel; the
// arena families too).
// f16 and bf16 tensors are staged as f32 (stage.wgsl converts them in and,
// rounding to nearest even, back out), unless the family reads and writes
// them in place as words of two elements (wg_family.packed, prepare).
#include "webgpu.h"
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char gk_wgsl_stage[];

// ---------------------------------------------------------------- the device

static uint32_t limits[WG_LIMIT_COUNT];
static char device_text[320];  // the adapter's description and optional features, or why there is no device
static uint32_t next_id = 1;   // buffer and pipeline ids (the host keeps one map for each kind)

// The optional features the device has, after the adapter's description:
// "; optional features: subgroups (8-8 wide), timestamp-query" or "...: none".
static void describe_features(void) {
  size_t at = strlen(device_text);
  uint32_t f = limits[WG_LIMIT_FEATURES];
  at += (size_t)snprintf(device_text + at, sizeof device_text - at, "; optional features:%s", f ? "" : " none");
  if (at < sizeof device_text && (f & WG_FEATURE_SUBGROUPS))
    at += (size_t)snprintf(device_text + at, sizeof device_text - at, " subgroups (%u-%u wide)%s",
                           limits[WG_LIMIT_SUBGROUP_MIN], limits[WG_LIMIT_SUBGROUP_MAX],
                           f & WG_FEATURE_TIMESTAMPS ? "," : "");
  if (at < sizeof device_text && (f & WG_FEATURE_TIMESTAMPS))
    snprintf(device_text + at, sizeof device_text - at, " timestamp-query");
}

static const char *unavailable(void) {
  int ok = gkwg_device_info(device_text, sizeof device_text, limits);
  device_text[sizeof device_text - 1] = 0;
  if (ok) {
    describe_features();
    return NULL;
  }
  return device_text[0] ? device_text : "the host gave no WebGPU device";
}

static const char *device_description(void) { return device_text; }

uint32_t wg_limit(int which) { return limits[which]; }

// maxStorageBufferBindingSize as the backend uses it: the device's, or a
// lower one a test set (gk_webgpu_test_binding_limit), so that the split
// of runs over it is tested without buffers of gigabytes.
static uint32_t binding_limit_for_tests;
static uint32_t binding_limit(void) {
  uint32_t device = limits[WG_LIMIT_STORAGE_BINDING];
  return binding_limit_for_tests && binding_limit_for_tests < device ? binding_limit_for_tests : device;
}
void gk_webgpu_test_binding_limit(uint32_t bytes) { binding_limit_for_tests = bytes; }

static bool plain_reductions_for_tests;
void gk_webgpu_test_plain_reductions(bool plain) { plain_reductions_for_tests = plain; }
bool wg_subgroups(void) { return (limits[WG_LIMIT_FEATURES] & WG_FEATURE_SUBGROUPS) && !plain_reductions_for_tests; }

// The device's error, as a failed status naming what was being done.
static gk_status device_error(const char *what, const char *message) {
  return gk_fail(GK_ERR_INTERNAL, "webgpu: %s: the device reported: %s", what, message);
}

// ---------------------------------------------------------------- buffers

// A device buffer: `capacity` bytes (a power of two, at least 256); the
// library sees the `bytes` it asked for. Freed buffers wait in a pool for
// an allocation of the same capacity, so a training step reuses them.
typedef struct wg_buffer {
  uint32_t id;
  uint32_t capacity;
} wg_buffer;

enum { POOL_MAX = 64 };
static wg_buffer *pool[POOL_MAX];
static int pooled;

static uint32_t capacity_for(size_t bytes) {
  size_t c = 256;
  while (c < bytes) c *= 2;
  if (c > limits[WG_LIMIT_BUFFER_SIZE]) c = (bytes + 3) / 4 * 4;
  return (uint32_t)c;
}

static gk_status wg_alloc(size_t bytes, void **handle) {
  if (bytes > limits[WG_LIMIT_BUFFER_SIZE])
    return gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: a buffer of %zu bytes is over the device's maxBufferSize %u", bytes,
                   limits[WG_LIMIT_BUFFER_SIZE]);
  uint32_t cap = capacity_for(bytes);
  for (int i = 0; i < pooled; i++)
    if (pool[i]->capacity == cap) {
      *handle = pool[i];
      pool[i] = pool[--pooled];
      return GK_SUCCESS;
    }
  wg_buffer *b = malloc(sizeof *b);
  if (!b) return gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory for a buffer record");
  b->id = next_id++;
  b->capacity = cap;
  gkwg_buffer_create(b->id, cap);
  *handle = b;
  return GK_SUCCESS;
}

static void wg_free(void *handle) {
  wg_buffer *b = handle;
  if (pooled < POOL_MAX) {
    pool[pooled++] = b;
    return;
  }
  gkwg_buffer_destroy(b->id);
  free(b);
}

uint32_t wg_buffer_id(void *handle) { return ((wg_buffer *)handle)->id; }

static gk_status read_bytes(uint32_t id, size_t offset, void *dst, size_t bytes) {
  char message[512];
  if (gkwg_buffer_read(id, (uint32_t)offset, dst, (uint32_t)bytes, message, sizeof message))
    return device_error("reading a buffer", message);
  return GK_SUCCESS;
}

// WebGPU writes whole 4-byte words: an upload with a ragged start or end
// reads the two edge words first and writes the merged words.
static gk_status wg_upload(void *handle, size_t offset, const void *src, size_t bytes) {
  uint32_t id = wg_buffer_id(handle);
  if (offset % 4 == 0 && bytes % 4 == 0) {
    gkwg_buffer_write(id, (uint32_t)offset, src, (uint32_t)bytes);
    gkwg_submit();
    return GK_SUCCESS;
  }
  size_t lo = offset / 4 * 4, hi = (offset + bytes + 3) / 4 * 4;
  unsigned char *words = malloc(hi - lo);
  if (!words) return gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory to stage %zu bytes", hi - lo);
  gk_status s = read_bytes(id, lo, words, 4);
  if (s == GK_SUCCESS) s = read_bytes(id, hi - 4, words + (hi - lo - 4), 4);
  if (s == GK_SUCCESS) {
    memcpy(words + (offset - lo), src, bytes);
    gkwg_buffer_write(id, (uint32_t)lo, words, (uint32_t)(hi - lo));
    gkwg_submit();
  }
  free(words);
  return s;
}

static gk_status wg_download(void *handle, size_t offset, void *dst, size_t bytes) {
  return read_bytes(wg_buffer_id(handle), offset, dst, bytes);
}

static gk_status wg_synchronize(void) {
  char message[512];
  if (gkwg_wait(message, sizeof message)) return device_error("waiting for the queue", message);
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- kernel times

gk_status gk_webgpu_timing(int on) {
  const char *why = unavailable();
  if (why) return gk_fail(GK_ERR_UNSUPPORTED, "webgpu: no device: %s", why);
  if (!(limits[WG_LIMIT_FEATURES] & WG_FEATURE_TIMESTAMPS))
    return gk_fail(GK_ERR_UNSUPPORTED, "webgpu: no timestamp-query on this adapter (%s)", device_text);
  gkwg_timing(on != 0);
  return GK_SUCCESS;
}

gk_status gk_webgpu_kernel_times(gk_webgpu_kernel_time *times, int cap, int *count) {
  *count = 0;
  if (!(limits[WG_LIMIT_FEATURES] & WG_FEATURE_TIMESTAMPS))
    return gk_fail(GK_ERR_UNSUPPORTED, "webgpu: no timestamp-query on this adapter (%s)", device_text);
  char message[512];
  int32_t n = gkwg_kernel_times(times, cap > 0 ? (uint32_t)cap : 0, message, sizeof message);
  if (n < 0) return device_error("reading the kernel times", message);
  *count = n;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- pipelines

uint32_t wg_pipeline_create(const char *wgsl, const char *entry, const char *overrides) {
  uint32_t id = next_id++;
  gkwg_pipeline_create(id, wgsl, (uint32_t)strlen(wgsl), entry, overrides);
  return id;
}

void wg_pipeline_destroy(uint32_t id) { gkwg_pipeline_destroy(id); }

void wg_pipeline_label(uint32_t id, const char *family, const char *entry) {
  char label[64];
  int n = snprintf(label, sizeof label, "%s.%s", family, entry);
  gkwg_pipeline_label(id, label, (uint32_t)(n < (int)sizeof label ? n : (int)sizeof label - 1));
}

// ---------------------------------------------------------------- the arena

static wg_buffer *arena;

gk_status wg_arena_reserve(uint64_t words) {
  uint64_t bytes = words * 4;
  if (bytes > binding_limit())
    return gk_fail(GK_ERR_UNSUPPORTED,
                   "webgpu: the run needs %llu bytes of tensors and scratch, over the device's "
                   "maxStorageBufferBindingSize %u",
                   (unsigned long long)bytes, binding_limit());
  if (arena && arena->capacity >= bytes) return GK_SUCCESS;
  if (arena) {
    gkwg_buffer_destroy(arena->id);
    free(arena);
    arena = NULL;
  }
  void *h;
  gk_status s = wg_alloc(bytes ? bytes : 4, &h);
  if (s == GK_SUCCESS) arena = h;
  return s;
}

// Dispatch `groups` workgroups (split over x and y when over the
// per-dimension limit; shaders take the group index as y * nwg.x + x).
static gk_status dispatch(uint32_t pipeline, const wg_binding *bindings, uint32_t nbindings, const uint32_t *params,
                          uint64_t groups) {
  if (groups == 0) return GK_SUCCESS;
  uint64_t per_dim = limits[WG_LIMIT_GROUPS_PER_DIM];
  uint64_t x = groups < per_dim ? groups : per_dim, y = (groups + x - 1) / x;
  if (y > per_dim)
    return gk_fail(GK_ERR_UNSUPPORTED, "webgpu: %llu workgroups are over the device's %llu x %llu",
                   (unsigned long long)groups, (unsigned long long)per_dim, (unsigned long long)per_dim);
  gkwg_dispatch(pipeline, bindings, nbindings, params, WG_PARAM_WORDS * 4, (uint32_t)x, (uint32_t)y);
  return GK_SUCCESS;
}

gk_status wg_arena_dispatch(uint32_t pipeline, const uint32_t *params, uint64_t groups) {
  const wg_binding whole = {1, arena->id, 0, 0};
  return dispatch(pipeline, &whole, 1, params, groups);
}

void wg_arena_write(uint32_t slot, const void *src, uint32_t words) {
  gkwg_buffer_write(arena->id, slot * 4, src, words * 4);
}

gk_status wg_arena_read(uint32_t slot, void *dst, uint32_t words) {
  return read_bytes(arena->id, (size_t)slot * 4, dst, (size_t)words * 4);
}

// ---------------------------------------------------------------- staging

enum { GATHER, SCATTER, SCATTER16, SCATTER16_WORDS, STAGE_ENTRIES };
static uint32_t stage_pipelines[STAGE_ENTRIES];

static bool is_16bit(gk_dtype dt) { return dt == GK_F16 || dt == GK_BF16; }
// Arena words of an element: f16/bf16 are staged as f32, i64 takes two.
static int slot_words(gk_dtype dt) { return dt == GK_I64 ? 2 : 1; }

// Between tensor t and its arena slot (stage.wgsl): a copy when t is
// contiguous in 4-byte elements, else the gather (into the arena) or a
// scatter (out of it) shader; f16/bf16 always by the shaders, which convert
// (to f32 exactly; back rounded to nearest even), a contiguous output by
// whole words of its buffer, leaving the halves of its edge words that lie
// outside it as they were. Parameters of stage.wgsl: base, count, words per
// element, rank, slot, mode, first word, words; shape and strides (in words,
// or elements for 16-bit) from word 8 and 16.
gk_status wg_stage(const gk_tensor *t, uint32_t slot, bool into_arena) {
  int64_t n = gk_tensor_numel(t);
  if (n == 0) return GK_SUCCESS;
  void *handle;
  size_t offset;
  if (!gk_buffer_resolve(&gk_webgpu_backend, t, &handle, &offset))
    return gk_fail(GK_ERR_BAD_DEVICE, "webgpu: a tensor is not inside one WebGPU buffer");
  bool half = is_16bit(t->dtype), contiguous = gk_tensor_is_contiguous(t);
  int ew = slot_words(t->dtype);
  uint32_t id = wg_buffer_id(handle);
  if (contiguous && !half) {
    uint32_t bytes = (uint32_t)(n * ew * 4);
    if (into_arena) gkwg_buffer_copy(id, (uint32_t)offset, arena->id, slot * 4, bytes);
    else gkwg_buffer_copy(arena->id, slot * 4, id, (uint32_t)offset, bytes);
    return GK_SUCCESS;
  }
  // Contiguous rows in a buffer over the binding limit (a piece's columns
  // of a split run's tensor, wg_run_kernel), which the shaders could not
  // bind: a copy a row.
  if (!half && t->rank == 2 && t->strides[1] == 1 && ((wg_buffer *)handle)->capacity > binding_limit()) {
    uint32_t row_bytes = (uint32_t)(t->shape[1] * ew * 4);
    for (int64_t i = 0; i < t->shape[0]; i++) {
      uint32_t at = (uint32_t)(offset + (size_t)(i * t->strides[0] * ew * 4));
      uint32_t in_slot = slot * 4 + (uint32_t)i * row_bytes;
      if (into_arena) gkwg_buffer_copy(id, at, arena->id, in_slot, row_bytes);
      else gkwg_buffer_copy(arena->id, in_slot, id, at, row_bytes);
    }
    return GK_SUCCESS;
  }
  if (!stage_pipelines[GATHER]) {
    static const char *const entries[STAGE_ENTRIES] = {"gather", "scatter", "scatter16", "scatter16_words"};
    for (int e = 0; e < STAGE_ENTRIES; e++) stage_pipelines[e] = wg_pipeline_create(gk_wgsl_stage, entries[e], "");
  }
  // A contiguous (16-bit) tensor's shader binds its range (from a 256-byte
  // boundary), not its whole buffer, which may be over the binding limit.
  size_t from = contiguous ? offset / 256 * 256 : 0;
  uint32_t range = contiguous ? (uint32_t)((offset + (size_t)n * gk_dtype_size(t->dtype) + 3) / 4 * 4 - from) : 0;
  offset -= from;
  uint32_t base = (uint32_t)(offset / (half ? 2 : 4)), first_word = base / 2;
  uint32_t words = half ? (uint32_t)((base + n - 1) / 2 - first_word + 1) : 0;
  uint32_t p[WG_PARAM_WORDS] = {base, (uint32_t)n, (uint32_t)ew, (uint32_t)t->rank, slot,
                                t->dtype == GK_F16 ? 1u : t->dtype == GK_BF16 ? 2u : 0u, first_word, words};
  for (int d = 0; d < t->rank; d++) {
    p[8 + d] = (uint32_t)t->shape[d];
    p[16 + d] = (uint32_t)(int32_t)(t->strides[d] * ew);
  }
  int entry = into_arena ? GATHER : !half ? SCATTER : contiguous ? SCATTER16_WORDS : SCATTER16;
  const wg_binding bindings[2] = {{1, id, (uint32_t)from, range}, {2, arena->id, 0, 0}};
  uint64_t invocations = entry == SCATTER16_WORDS ? words : (uint64_t)n;
  return dispatch(stage_pipelines[entry], bindings, 2, p, (uint64_t)gk_ceil_div((int64_t)invocations, 64));
}

// ---------------------------------------------------------------- runs

uint32_t wg_scratch(wg_run *r, uint64_t words) {
  uint32_t at = (uint32_t)r->words;
  r->words += (words + 3) / 4 * 4;
  return at;
}

// `words` arena words starting at a multiple of 64 (256 bytes, so that
// they can be bound by themselves): their slot.
static uint32_t bindable_scratch(wg_run *r, uint64_t words) {
  r->words = (r->words + 63) / 64 * 64;
  return wg_scratch(r, words ? words : 1);
}

// Where a bound family's run reads and writes each tensor. A contiguous
// tensor is bound where it lies: its buffer from the 256-byte boundary at
// or below its first byte (every adapter's minStorageBufferOffsetAlignment
// is at most 256) to its end (rounded up to a word), the tensor at word
// slot[k] of that range. WebGPU rejects a dispatch whose writable bindings
// overlap (all bindings are read_write here), so a tensor whose range
// overlaps one placed before it (an in-place run; a neighbour within 256
// bytes), a strided one, or one whose range is over
// maxStorageBufferBindingSize (r->oversized: the run is then split,
// wg_run_kernel) gets a range of the arena of its own instead and is
// staged as in arena runs. f16/bf16 tensors are bound where they lie only
// in a packed run (r->packed: wg_family.packed), and only of an even count
// from a word (whole words, none shared with what lies beside them); else
// they are staged, as f32.
static void place_bound(wg_run *r) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    const gk_tensor *t = r->t[k];
    if (!t) continue;
    uint64_t numel = (uint64_t)gk_tensor_numel(t), words = numel * slot_words(t->dtype);
    uint64_t bytes = (numel * gk_dtype_size(t->dtype) + 3) / 4 * 4;
    wg_binding *b = &r->bind[k];
    void *handle;
    size_t offset;
    bool direct = bytes > 0 && (!is_16bit(t->dtype) || (r->packed && numel % 2 == 0)) &&
                  gk_tensor_is_contiguous(t) && gk_buffer_resolve(&gk_webgpu_backend, t, &handle, &offset) &&
                  offset % 4 == 0;
    if (direct) {
      uint64_t base = offset / 256 * 256, size = offset + bytes - base;
      *b = (wg_binding){0, wg_buffer_id(handle), (uint32_t)base, (uint32_t)size};
      direct = size <= binding_limit();
      r->oversized |= !direct;
      for (int j = 0; j < k && direct; j++)
        if (r->bind[j].id == b->id && r->bind[j].offset < base + size && base < (uint64_t)r->bind[j].offset + r->bind[j].size)
          direct = false;
      r->slot[k] = (uint32_t)((offset - base) / 4);
    }
    if (direct) continue;
    r->staged[k] = true;
    r->stage_at[k] = bindable_scratch(r, words);
    r->bind[k] = (wg_binding){0, 0, r->stage_at[k] * 4, words ? (uint32_t)(words * 4) : 4};
    r->slot[k] = 0;
  }
}

uint32_t *wg_pass(wg_run *r, int entry, uint64_t groups) {
  if (r->npass == WG_MAX_PASSES) {
    r->overflow = true;
    r->npass--;  // reuse the last slot; the run fails before dispatching
  }
  wg_pass_t *ps = &r->pass[r->npass++];
  memset(ps, 0, sizeof *ps);
  ps->entry = entry;
  ps->groups = groups;
  return ps->p;
}

uint32_t *wg_pass_bound(wg_run *r, int entry, uint64_t groups, int nbind, const gk_arg_kind *bind) {
  uint32_t *p = wg_pass(r, entry, groups);
  wg_pass_t *ps = &r->pass[r->npass - 1];
  memcpy(ps->bind, bind, (size_t)nbind * sizeof *bind);
  ps->nbind = nbind;
  // A binding the shader uses statically must be bound even where the
  // plan has no such tensor (LayerNorm's mean in an RMSNorm; an absent
  // weight): a word of the arena of its own, never read.
  for (int j = 0; j < nbind; j++)
    if (bind[j] < GK_ARG_COUNT_ && !r->t[bind[j]] && !r->bind[bind[j]].size) {
      r->bind[bind[j]] = (wg_binding){0, 0, bindable_scratch(r, 1) * 4, 4};
      r->slot[bind[j]] = 0;
    }
  return p;
}

void wg_bound_scratch(wg_run *r, uint64_t words) {
  uint32_t bytes = (uint32_t)((words ? words : 1) * 4);
  r->bind[WG_ARG_SCRATCH] = r->run_scratch ? (wg_binding){0, r->run_scratch, 0, bytes}
                                           : (wg_binding){0, 0, bindable_scratch(r, words) * 4, bytes};
  r->slot[WG_ARG_SCRATCH] = 0;
}

uint32_t wg_f32(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// A plan whose family reads and writes its f16/bf16 tensors in place as
// words of two elements (wg_family.packed): every tensor of the plan in the
// same 16-bit dtype.
static bool packable(const gk_plan *plan) {
  const wg_family *f = wg_family_of(plan);
  if (!f->packed || !is_16bit(plan->desc.dtype) || !f->packed(plan)) return false;
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (plan->args[k].used && plan->args[k].dtype != plan->desc.dtype) return false;
  return true;
}

typedef struct wg_state {
  uint32_t pipeline[WG_MAX_ENTRIES];
  uint32_t packed[WG_MAX_ENTRIES];  // the "<entry>16" pipelines of a packed family's f16/bf16 plan
  int npipelines;
  bool subgroups;        // built from wg_family.subgroup_source
  wg_buffer *constants;  // wg_family.constants, uploaded at init
  uint32_t constant_words;
} wg_state;

static gk_status wg_init(gk_plan *plan) {
  const wg_family *f = wg_family_of(plan);
  wg_state *st = calloc(1, sizeof *st);
  if (!st) return gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory for the plan's state");
  const char *const *entries = plan->desc.direction == GK_FORWARD ? f->forward : f->backward;
  char overrides[128] = "";
  if (f->overrides) f->overrides(plan, overrides, sizeof overrides);
  st->subgroups = f->subgroup_source && wg_subgroups();
  for (; st->npipelines < WG_MAX_ENTRIES && entries[st->npipelines]; st->npipelines++) {
    const char *entry = entries[st->npipelines];
    st->pipeline[st->npipelines] = wg_pipeline_create(st->subgroups ? f->subgroup_source : f->source, entry, overrides);
    wg_pipeline_label(st->pipeline[st->npipelines], f->name, entry);
  }
  if (packable(plan)) {
    char entry[64], packed_overrides[160];
    snprintf(packed_overrides, sizeof packed_overrides, "%s%sHALF=%d", overrides, overrides[0] ? "," : "",
             plan->desc.dtype == GK_F16 ? 1 : 2);
    for (int i = 0; i < st->npipelines; i++) {
      snprintf(entry, sizeof entry, "%s16", entries[i]);
      st->packed[i] = wg_pipeline_create(f->source, entry, packed_overrides);
      wg_pipeline_label(st->packed[i], f->name, entry);
    }
  }
  if (f->constants) {
    float *data = NULL;
    uint32_t words = f->constants(plan, &data);
    if (words && !data) {
      free(st);
      return gk_fail(GK_ERR_OUT_OF_MEMORY, "webgpu: no memory for the plan's constants");
    }
    if (words) {
      void *h;
      gk_status s = wg_alloc((size_t)words * 4, &h);
      if (s != GK_SUCCESS) {
        free(data);
        free(st);
        return s;
      }
      st->constants = h;
      st->constant_words = words;
      gkwg_buffer_write(st->constants->id, 0, data, words * 4);
    }
    free(data);
  }
  plan->state = st;
  return GK_SUCCESS;
}

static void wg_fini(gk_plan *plan) {
  wg_state *st = plan->state;
  if (!st) return;
  for (int i = 0; i < st->npipelines; i++) {
    wg_pipeline_destroy(st->pipeline[i]);
    if (st->packed[i]) wg_pipeline_destroy(st->packed[i]);
  }
  if (st->constants) wg_free(st->constants);
  free(st);
  plan->state = NULL;
}

// Place the tensors t of a run over `units` units (wg_family.split) from
// unit `first_unit` of `all_units` (piece `piece` of `pieces` of a split
// run, pieces 0 for a run in one piece; its scratch in buffer
// `run_scratch`, or 0: the arena) and plan its passes. A packable
// plan's run is packed when every tensor can be bound where it lies (then
// none is staged); else its tensors are placed again, the f16/bf16 ones
// staged. An arena family's split run (per_unit: wg_family.split's) keeps
// the outputs every piece writes whole (a sum carried from piece to piece:
// linear's dx, matmul's dA, the scan's per-batch dB and dC) in the arena
// from the first piece to the last (wg_run.kept): in f32, rounded to a
// 16-bit dtype once, as in the unsplit run.
static gk_status prepare(const gk_plan *plan, const gk_tensor *const *t, const int64_t *per_unit,
                         int64_t first_unit, int64_t units, int64_t all_units, int64_t piece, int64_t pieces,
                         uint32_t run_scratch, wg_run *r) {
  const wg_family *f = wg_family_of(plan);
  const wg_state *st = plan->state;
  for (int attempt = packable(plan) ? 0 : 1; attempt < 2; attempt++) {
    memset(r, 0, sizeof *r);
    r->plan = plan;
    r->t = t;
    r->units = units;
    r->first_unit = first_unit;
    r->all_units = all_units;
    r->piece = piece;
    r->pieces = pieces;
    r->run_scratch = run_scratch;
    r->packed = attempt == 0;
    if (!f->bound) break;
    place_bound(r);
    bool staged = false;
    for (int k = 0; k < GK_ARG_COUNT_; k++) staged |= r->staged[k];
    if (!r->packed || !staged) break;
  }
  if (!f->bound) {
    for (int k = 0; k < GK_ARG_COUNT_; k++) r->kept[k] = pieces && t[k] && plan->args[k].is_output && !per_unit[k];
    // Kept outputs first: at the same slots in every piece.
    for (int kept = 1; kept >= 0; kept--)
      for (int k = 0; k < GK_ARG_COUNT_; k++)
        if (t[k] && r->kept[k] == kept) {
          r->staged[k] = true;
          r->slot[k] = r->stage_at[k] = wg_scratch(r, (uint64_t)gk_tensor_numel(t[k]) * slot_words(t[k]->dtype));
        }
  }
  if (st->constants) r->bind[WG_ARG_CONSTANTS] = (wg_binding){0, st->constants->id, 0, st->constant_words * 4};
  gk_status s = f->plan(plan, r);
  if (s == GK_SUCCESS && r->overflow) s = gk_fail(GK_ERR_INTERNAL, "webgpu: %s: more than %d passes", f->name, WG_MAX_PASSES);
  return s;
}

// Stage in, dispatch passes [first, end), stage out: the staged tensors
// those passes bind (an arena pass, binding none by itself: every one);
// kept outputs (prepare) in by the first piece, out by the last.
static gk_status execute(const gk_plan *plan, const wg_run *r, int first, int end) {
  const wg_state *st = plan->state;
  const gk_tensor *const *args = r->t;
  if (end > r->npass) end = r->npass;
  bool bound[WG_KINDS] = {0};
  for (int i = first; i < end; i++) {
    if (!r->pass[i].nbind) memset(bound, 1, sizeof bound);
    for (int j = 0; j < r->pass[i].nbind; j++) bound[r->pass[i].bind[j]] = true;
  }
  gk_status s = wg_arena_reserve(r->words);
  if (s != GK_SUCCESS) return s;
  for (int k = 0; k < GK_ARG_COUNT_ && s == GK_SUCCESS; k++)
    if (r->staged[k] && bound[k] && (!plan->args[k].is_output || plan->desc.accumulate || r->partial_outputs) &&
        (!r->kept[k] || r->piece == 0))
      s = wg_stage(args[k], r->stage_at[k], true);
  for (int i = first; i < end && s == GK_SUCCESS; i++) {
    const wg_pass_t *ps = &r->pass[i];
    if (!ps->nbind) {
      s = wg_arena_dispatch(st->pipeline[ps->entry], ps->p, ps->groups);
      continue;
    }
    wg_binding b[WG_MAX_BINDINGS];
    for (int j = 0; j < ps->nbind; j++) {
      b[j] = r->bind[ps->bind[j]];
      b[j].binding = 2 + (uint32_t)j;
      if (!b[j].id) b[j].id = arena->id;
    }
    s = dispatch(r->packed ? st->packed[ps->entry] : st->pipeline[ps->entry], b, (uint32_t)ps->nbind, ps->p,
                 ps->groups);
  }
  for (int k = 0; k < GK_ARG_COUNT_ && s == GK_SUCCESS; k++)
    if (r->staged[k] && bound[k] && plan->args[k].is_output && (!r->kept[k] || r->piece == r->pieces - 1))
      s = wg_stage(args[k], r->stage_at[k], false);
  gkwg_submit();
  return s;
}

// Units of a piece of a split run (*step): as many as keep every piece's
// ranges, all staged at worst (4 bytes an f16/bf16 element: staged as f32),
// with the whole tensors, the stand-ins of absent ones, the arena scratch
// a unit takes (per_unit[WG_ARG_SCRATCH] words) and the 256-byte
// alignments, within the binding limit; 0 where the family splits none of
// the tensors. Refused, naming the tensor: a tensor to be split that is
// strided, tensors bound whole that leave no room, or a unit that does not
// fit.
static gk_status piece_units(const gk_plan *plan, const gk_tensor *const *args, const int64_t *per_unit,
                             const int64_t *outer, int64_t *step) {
  const char *family = wg_family_of(plan)->name;
  // (fixed: the stand-ins of absent tensors, wg_pass_bound, 3 at most)
  uint64_t fixed = 256 * 4, per = (uint64_t)per_unit[WG_ARG_SCRATCH] * 4, widest = 0, largest = 0;
  int widest_kind = 0, largest_kind = 0;
  *step = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    if (!args[k]) continue;
    uint64_t size = (uint64_t)slot_words(args[k]->dtype) * 4, unit = (uint64_t)(outer[k] * per_unit[k]) * size;
    if (per_unit[k] && !gk_tensor_is_contiguous(args[k]))
      return gk_fail(GK_ERR_UNSUPPORTED,
                     "webgpu: %s: the run is over the device's maxStorageBufferBindingSize %u and %s is strided "
                     "(only contiguous tensors are split into pieces)",
                     family, binding_limit(), gk_arg_name((gk_arg_kind)k));
    if (unit > widest) {
      widest = unit;
      widest_kind = k;
    }
    per += unit;
    uint64_t whole = per_unit[k] ? 0 : (uint64_t)gk_tensor_numel(args[k]) * size;
    if (whole > largest) {
      largest = whole;
      largest_kind = k;
    }
    fixed += whole + 256;
  }
  uint64_t limit = binding_limit();
  if (!per) return GK_SUCCESS;
  if (limit <= fixed)
    return gk_fail(GK_ERR_UNSUPPORTED,
                   "webgpu: %s: what every piece of the split run binds whole (%s: %llu bytes; %llu in all) is over "
                   "the device's maxStorageBufferBindingSize %u",
                   family, gk_arg_name((gk_arg_kind)largest_kind), (unsigned long long)largest,
                   (unsigned long long)fixed, binding_limit());
  if ((limit - fixed) / per == 0)
    return gk_fail(GK_ERR_UNSUPPORTED,
                   "webgpu: %s: one unit of the split run (%s: %llu bytes; %llu with the other tensors split) and "
                   "what every piece binds whole (%llu bytes) are over the device's maxStorageBufferBindingSize %u",
                   family, gk_arg_name((gk_arg_kind)widest_kind), (unsigned long long)widest,
                   (unsigned long long)per, (unsigned long long)fixed, binding_limit());
  *step = (int64_t)((limit - fixed) / per);
  return GK_SUCCESS;
}

// The tensors of a piece of a split run: units u0 .. u0 + count of args,
// views in `view` of the tensors split (per_unit: elements a unit; in each
// of outer[k] rows, units x per_unit[k] elements apart: a strided view,
// staged), the others whole.
static void piece_of(const gk_tensor *const *args, const int64_t *per_unit, const int64_t *outer, int64_t units,
                     int64_t u0, int64_t count, gk_tensor *view, const gk_tensor **piece) {
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    piece[k] = args[k];
    if (!args[k] || !per_unit[k]) continue;
    int64_t shape[2] = {outer[k], count * per_unit[k]};
    char *at = (char *)args[k]->data + u0 * per_unit[k] * (int64_t)gk_dtype_size(args[k]->dtype);
    gk_tensor_init(&view[k], at, args[k]->dtype, outer[k] > 1 ? 2 : 1, outer[k] > 1 ? shape : shape + 1);
    if (outer[k] > 1) view[k].strides[0] = units * per_unit[k];
    view[k].device = args[k]->device;
    view[k].device_id = args[k]->device_id;
    piece[k] = &view[k];
  }
}

static gk_status wg_run_kernel(const gk_plan *plan, const gk_kernel_args args, void *workspace) {
  (void)workspace;
  const wg_family *f = wg_family_of(plan);
  int64_t per_unit[WG_KINDS] = {0}, outer[WG_KINDS], step = 0;
  for (int k = 0; k < WG_KINDS; k++) outer[k] = 1;
  int64_t units = f->split ? f->split(plan, per_unit, outer) : 0;
  wg_run r;
  gk_status s = prepare(plan, args, per_unit, 0, units, units, 0, 0, 0, &r);
  if (s == GK_SUCCESS && f->split && (r.oversized || r.words * 4 > binding_limit()))
    s = piece_units(plan, args, per_unit, outer, &step);
  if (s != GK_SUCCESS) return s;
  if (step == 0 || step >= units) return execute(plan, &r, 0, r.npass);
  // Over the binding limit: in pieces of whole units (elements, rows,
  // columns), each a run of its own (placed, staged where it must be); a
  // run of passes after the other over every piece, a whole pass once. The
  // scratch (its size as the first piece plans it) is one buffer for every
  // piece.
  int64_t pieces = gk_ceil_div(units, step);
  gk_tensor view[GK_ARG_COUNT_];
  const gk_tensor *piece[GK_ARG_COUNT_];
  piece_of(args, per_unit, outer, units, 0, step, view, piece);
  s = prepare(plan, piece, per_unit, 0, step, units, 0, pieces, 0, &r);
  if (s != GK_SUCCESS) return s;
  // An arena family's arena as its first piece, the largest, needs it: no
  // later piece reallocates it, losing the outputs kept there (prepare).
  uint64_t arena_words = f->bound ? 0 : r.words;
  if (arena_words) s = wg_arena_reserve(arena_words);
  if (s != GK_SUCCESS) return s;
  wg_buffer *scratch = NULL;
  uint32_t scratch_bytes = r.bind[WG_ARG_SCRATCH].size;
  if (scratch_bytes > binding_limit())
    return gk_fail(GK_ERR_UNSUPPORTED,
                   "webgpu: %s: the split run's scratch (%u bytes) is over the device's maxStorageBufferBindingSize %u",
                   f->name, scratch_bytes, binding_limit());
  if (scratch_bytes) {
    void *h;
    s = wg_alloc(scratch_bytes, &h);
    if (s != GK_SUCCESS) return s;
    scratch = h;
  }
  int npass = r.npass;
  bool whole[WG_MAX_PASSES];
  for (int i = 0; i < npass; i++) whole[i] = r.pass[i].whole;
  for (int first = 0, end; first < npass && s == GK_SUCCESS; first = end) {
    for (end = first + 1; !whole[first] && end < npass && !whole[end];) end++;
    for (int64_t i = 0; i < (whole[first] ? 1 : pieces) && s == GK_SUCCESS; i++) {
      int64_t u0 = i * step, count = units - u0 < step ? units - u0 : step;
      piece_of(args, per_unit, outer, units, u0, count, view, piece);
      s = prepare(plan, piece, per_unit, u0, count, units, i, pieces, scratch ? scratch->id : 0, &r);
      if (s == GK_SUCCESS && arena_words && r.words > arena_words)
        s = gk_fail(GK_ERR_INTERNAL, "webgpu: %s: piece %lld of the split run needs more arena than the first",
                    f->name, (long long)i);
      if (s == GK_SUCCESS) s = execute(plan, &r, first, end);
    }
  }
  if (scratch) wg_free(scratch);
  return s;
}

// f32, f16 and bf16 tensors (and i32/i64 indices); then what the family declines.
static const char *wg_decline(const gk_plan *plan) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (plan->args[k].used && plan->args[k].dtype == GK_F64)
      return "the WebGPU kernels compute in f32 (f16 and bf16 stored; f64 is not written)";
  const wg_family *f = wg_family_of(plan);
  if (!f) return "no WGSL kernel for this op yet";
  return f->decline ? f->decline(plan) : NULL;
}

static void wg_precision(const gk_plan *plan, gk_plan_info *info) {
  const wg_state *st = plan->state;
  info->math = st && st->subgroups
                   ? "f32 math in WGSL (the device's exp/log; f16/bf16 stored, converted without the shader-f16 "
                     "feature, rounded to nearest even), row sums and maxima by subgroupAdd/subgroupMax in "
                     "subgroups, then across them in order; no float atomics"
                   : "f32 math in WGSL (the device's exp/log; f16/bf16 stored, converted without the shader-f16 "
                     "feature, rounded to nearest even), sums in a fixed order, no float atomics";
  info->accumulator = GK_F32;
  info->deterministic = 1;
}

#define WG_KERNEL_(family, dir)                                                                                 \
  static const gk_kernel webgpu_##family##_##dir = {.name = "webgpu", .backend = GK_BACKEND_WEBGPU,             \
                                                    .decline = wg_decline, .run = wg_run_kernel, .init = wg_init, \
                                                    .fini = wg_fini};
#define WG_KERNELS_(family) WG_KERNEL_(family, fwd) WG_KERNEL_(family, bwd)
WG_KERNELS_(activation)
WG_KERNELS_(gated)
WG_KERNELS_(norm)
WG_KERNELS_(linear)
WG_KERNELS_(matmul)
WG_KERNELS_(softmax)
WG_KERNELS_(cross_entropy)
WG_KERNELS_(embedding)
WG_KERNELS_(rope)
WG_KERNELS_(attention)
WG_KERNELS_(binary)
WG_KERNELS_(conv1d)
WG_KERNELS_(scan)

const gk_backend_table gk_webgpu_backend = {
    .name = "webgpu",
    .id = GK_BACKEND_WEBGPU,
    .device = GK_DEVICE_WEBGPU,
    .unavailable = unavailable,
    .device_description = device_description,
    .precision = wg_precision,
    .kernels = GK_KERNELS_PER_FAMILY(webgpu),
    .buffer_alloc = wg_alloc,
    .buffer_free = wg_free,
    .buffer_upload = wg_upload,
    .buffer_download = wg_download,
    .synchronize = wg_synchronize,
    .adamw_step = wg_adamw_step,
    .sum_squares = wg_sum_squares,
    .scale = wg_scale,
};
