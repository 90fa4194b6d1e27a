// The row reductions of softmax, norm, cross_entropy and optim, plain form
// (prepended to them after common.wgsl): the 64-wide fixed-order tree of
// common.wgsl's wg_reduce. Their entry points take the invocation's indices
// as `Lanes`, which reduce_subgroups.wgsl, the form used where the device
// has subgroups, extends with the subgroup builtins (WGSL admits those only
// as entry-point inputs). Call from uniform control flow, outside branches.
struct Lanes { @builtin(local_invocation_index) lid: u32 }

fn lanes_sum(v: f32, l: Lanes) -> f32 { return wg_reduce(v, l.lid, false); }
fn lanes_max(v: f32, l: Lanes) -> f32 { return wg_reduce(v, l.lid, true); }
