enable subgroups;
// The row reductions of softmax, norm, cross_entropy and optim in subgroups
// (put before common.wgsl where the device has the feature `subgroups`):
// subgroupAdd / subgroupMax of the subgroup's values (the hardware's fixed
// order), each subgroup's result into workgroup memory by its first lane,
// then the count = ceil(64 / size) results folded in subgroup order by
// every invocation: two barriers instead of the tree's seven. Subgroup k
// holds invocations k size .. (k + 1) size - 1 (local_invocation_index), as
// on every adapter the tests run; sizes 4..128 (a subgroup wider than the
// workgroup: one subgroup).
struct Lanes {
  @builtin(local_invocation_index) lid: u32,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) size: u32,
}

var<workgroup> subgroup_results: array<f32, 16>;

fn across_subgroups(part: f32, l: Lanes, is_max: bool) -> f32 {
  workgroupBarrier();
  if (l.lane == 0u) { subgroup_results[l.lid / l.size] = part; }
  workgroupBarrier();
  let count = (WG + l.size - 1u) / l.size;
  var r = subgroup_results[0];
  for (var k = 1u; k < count; k++) {
    r = select(r + subgroup_results[k], max(r, subgroup_results[k]), is_max);
  }
  return r;
}
fn lanes_sum(v: f32, l: Lanes) -> f32 { return across_subgroups(subgroupAdd(v), l, false); }
fn lanes_max(v: f32, l: Lanes) -> f32 { return across_subgroups(subgroupMax(v), l, true); }
