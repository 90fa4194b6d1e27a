// What the WebGPU kernels share: a run's arena slots and passes, and the
// table of op families (kernels.c) that the backend (backend.c) drives.
#ifndef GK_WEBGPU_KERNELS_H
#define GK_WEBGPU_KERNELS_H

#include "../core/internal.h"
#include "webgpu.h"

#include <stdint.h>

enum { WG_PARAM_WORDS = 64, WG_MAX_PASSES = 8, WG_MAX_ENTRIES = 6, WG_MAX_BINDINGS = 6 };
// What a bound family's pass may bind besides the run's tensors (after the
// gk_arg_kind values): the plan's constants (wg_family.constants, bound
// where they lie), the run's scratch (wg_bound_scratch).
enum { WG_ARG_CONSTANTS = GK_ARG_COUNT_, WG_ARG_SCRATCH, WG_KINDS };

// One dispatch: the family's entry point, its workgroups, its parameters
// (the words of the shader's Params struct), and for a family that binds
// tensors by themselves (wg_family.bound) the tensors it binds, in the
// order of the shader's bindings 2, 3, ... A split run (wg_family.split)
// dispatches a pass once a piece, or, marked whole, once for the run, over
// every unit: between the pieces of the passes before it and those after
// it (a sum over all rows of what earlier passes left in the run's scratch).
typedef struct wg_pass_t {
  int entry;
  uint64_t groups;
  uint32_t p[WG_PARAM_WORDS];
  gk_arg_kind bind[WG_MAX_BINDINGS];
  int nbind;
  bool whole;
} wg_pass_t;

// One run: where each tensor is read and written, the arena words it
// takes, the passes. slot[k] is tensor k's first word in what the shader
// reads it through: the arena (binding 1), or, in a bound family, its own
// binding (bind[k]). Tensors with staged[k] live in the arena at stage_at[k]
// for the run, copied in before it and (outputs) out after it.
typedef struct wg_run {
  const gk_plan *plan;
  const gk_tensor *const *t;   // the run's tensors by kind (NULL: absent)
  uint32_t slot[WG_KINDS];
  wg_binding bind[WG_KINDS];   // bound families: each tensor's binding (id 0: its arena range)
  bool staged[GK_ARG_COUNT_];
  uint32_t stage_at[GK_ARG_COUNT_];
  uint64_t words;
  int64_t units;               // split families: the units (wg_family.split) this run covers
  int64_t first_unit;          // ... the first of them among all_units, those of the whole run (a piece of it)
  int64_t all_units;
  int64_t piece, pieces;       // ... which piece of how many (pieces 0: a run in one piece)
  uint32_t run_scratch;        // a split run's buffer for wg_bound_scratch, shared by its pieces (0: the arena)
  bool oversized;              // a tensor's range is over the binding limit
  bool packed;                 // f16/bf16 tensors bound where they lie, two elements a word (wg_family.packed)
  bool partial_outputs;        // a piece keeps, or adds to, what an output holds: staged outputs staged in too
  bool kept[GK_ARG_COUNT_];    // an arena family's split run: outputs kept in the arena from piece to piece
  wg_pass_t pass[WG_MAX_PASSES];
  int npass;
  bool overflow;
} wg_run;

// `words` scratch words in the arena; their slot.
uint32_t wg_scratch(wg_run *r, uint64_t words);
// A bound family's scratch: `words` words of the arena that passes bind as
// WG_ARG_SCRATCH (from its word 0). In a split run, a buffer of its own
// sized by the whole run's plan (wg_run.run_scratch), the same for every
// piece: what one piece's pass leaves there stays for the passes after it.
void wg_bound_scratch(wg_run *r, uint64_t words);
// Append a pass of entry `entry` (an index into the family's entry list)
// over `groups` workgroups; fill the returned parameter words.
uint32_t *wg_pass(wg_run *r, int entry, uint64_t groups);
// The same for a bound family: the pass binds the `nbind` tensors `bind`
// (a kind the run lacks: a word of the arena of its own, for shaders that
// use its binding statically).
uint32_t *wg_pass_bound(wg_run *r, int entry, uint64_t groups, int nbind, const gk_arg_kind *bind);
// The bits of v as an f32 parameter word.
uint32_t wg_f32(double v);

// An op family: one WGSL source, its entry points per direction (the plan
// compiles them at creation), the options it declines, and the passes of
// one run.
typedef struct wg_family {
  const char *name;
  const char *source;
  // The same shader with its row reductions in subgroups (reduce_subgroups.wgsl
  // instead of reduce.wgsl), used where the device has subgroups; NULL: none.
  const char *subgroup_source;
  const char *forward[WG_MAX_ENTRIES];
  const char *backward[WG_MAX_ENTRIES];
  const char *(*decline)(const gk_plan *plan);   // NULL: takes every f32 description
  gk_status (*plan)(const gk_plan *plan, wg_run *r);
  // Plan constants (RoPE's angles): NULL, or fills *data (malloc) and
  // returns its words; uploaded at plan creation into a buffer that the
  // passes of a bound family bind as WG_ARG_CONSTANTS.
  uint32_t (*constants)(const gk_plan *plan, float **data);
  // Values of the shader's override constants, baked into the plan's
  // pipelines ("NAME=value,...", at most `cap` bytes), or NULL for none: a
  // choice made per plan (which activation) is then a constant the shader
  // compiler folds, not a branch on a parameter every invocation takes.
  void (*overrides)(const gk_plan *plan, char *text, size_t cap);
  // true: the shader binds each tensor by itself (bindings 2, ...; passes
  // made with wg_pass_bound), so contiguous tensors are read and written
  // where they lie instead of being copied through the arena.
  bool bound;
  // Families whose run can be split (NULL: it cannot): the units
  // (elements, rows, columns, channels) a run covers, and for each tensor
  // kind the elements of one unit (0: bound whole by every piece) in each
  // of its outer[k] blocks (filled with 1 before: a tensor of outer[k] rows
  // of units x per_unit[k] elements, a piece taking the same columns of
  // every row, a strided view), and per_unit[WG_ARG_SCRATCH] the arena
  // scratch words a unit's passes take (wg_scratch; arrays of WG_KINDS). A
  // run whose tensors' ranges or arena are over
  // maxStorageBufferBindingSize runs in pieces of whole units
  // (wg_run_kernel); plan() then covers r->units units of tensors that
  // start at the piece (r->first_unit of r->all_units).
  int64_t (*split)(const gk_plan *plan, int64_t *per_unit, int64_t *outer);
  // Bound families whose shaders also take f16/bf16 tensors where they lie
  // (NULL: never): whether they do for this description. Each entry point
  // then has a twin "<entry>16" (override HALF: 1 f16, 2 bf16) reading and
  // writing words of two elements (shaders/half.wgsl), parameters as for
  // f32 but the slots in words. A run is packed (wg_run.packed) when every
  // tensor is contiguous, of an even count, starts on a word and can be
  // bound where it lies (so no word holds anything else); plan() then
  // sizes its dispatch by words, one invocation each. Else the 16-bit
  // tensors are staged through the arena as f32.
  bool (*packed)(const gk_plan *plan);
} wg_family;

const wg_family *wg_family_of(const gk_plan *plan);

// The arena outside a plan's run (the optimizers, optim.c), in 4-byte
// words: reserve at least `words` (refused over maxStorageBufferBindingSize,
// before anything is queued); stage tensor t into its slot or back out of
// it (a copy, or the gather/scatter shaders when strided or f16/bf16,
// which are f32 in the slot); dispatch
// `pipeline` on it with the parameter words `params`; queue a write of host
// words into it; read words back (waits for everything queued).
gk_status wg_arena_reserve(uint64_t words);
gk_status wg_stage(const gk_tensor *t, uint32_t slot, bool into_arena);
gk_status wg_arena_dispatch(uint32_t pipeline, const uint32_t *params, uint64_t groups);
void wg_arena_write(uint32_t slot, const void *src, uint32_t words);
gk_status wg_arena_read(uint32_t slot, void *dst, uint32_t words);
// A compute pipeline of entry point `entry` of the WGSL text `wgsl`, with
// the override constants `overrides` ("NAME=value,...", or ""): its id.
uint32_t wg_pipeline_create(const char *wgsl, const char *entry, const char *overrides);
// Name pipeline `id` "family.entry" for the kernel times (gk_webgpu_timing).
void wg_pipeline_label(uint32_t id, const char *family, const char *entry);

// The optimizers' hooks of the backend table (optim.c; see gk_backend_table).
gk_status wg_adamw_step(const gk_adamw_config *c, const gk_adamw_scalars *k, int n, const gk_tensor *params,
                        const gk_tensor *grads, const gk_tensor *exp_avg, const gk_tensor *exp_avg_sq);
gk_status wg_sum_squares(int n, const gk_tensor *grads, double *sum);
gk_status wg_scale(int n, const gk_tensor *grads, double factor);

extern const gk_backend_table gk_webgpu_backend;

#endif
