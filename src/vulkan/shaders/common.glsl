// What every shader of the Vulkan backend sees (src/vulkan/vulkan_backend.h):
// binding 0 is an array of storage buffers of 32-bit words, the "slots",
// each bound per dispatch to one tensor (contiguous f32 as float bits, or
// i32 indices) or a temporary; push constants carry sizes and options.
// Each shader names its slots with #defines; LD/ST read and write f32.
#extension GL_GOOGLE_include_directive : require
#define VK_SLOTS 24
layout(set = 0, binding = 0) buffer Slot { uint v[]; } slot[VK_SLOTS];
#define LD(s, i) uintBitsToFloat(slot[s].v[i])
#define ST(s, i, x) slot[s].v[i] = floatBitsToUint(x)
#define LDI(s, i) int(slot[s].v[i])
// Grid-stride loop over n items (dispatches are capped at 65535 groups).
#define FOR_EACH(i, n) for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
// Rows spread over workgroups: each workgroup takes rows wg, wg + groups, ...
#define FOR_EACH_ROW(r, rows) for (uint r = gl_WorkGroupID.x; r < (rows); r += gl_NumWorkGroups.x)

// Sum (max) over the workgroup (256 invocations), in a fixed order: every
// run adds the same values in the same order. Call in uniform control flow.
// The build with GK_SUBGROUPS (each such shader's `_subgroups` SPIR-V, used
// where the device has subgroup shuffles in compute shaders): a butterfly
// within each subgroup (lane i adds lane i ^ s for s = 1, 2, 4, ...; a + b
// and b + a round alike, so every lane ends with the same sum), then every
// invocation adds the subgroups' sums in subgroup order: two barriers. Else
// a tree over workgroup memory (eight barriers).
shared float red_[256];
#ifdef GK_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
float workgroup_sum(float v) {
  for (uint s = 1; s < gl_SubgroupSize; s <<= 1) v += subgroupShuffleXor(v, s);
  if (gl_SubgroupInvocationID == 0) red_[gl_SubgroupID] = v;
  barrier();
  float r = red_[0];
  for (uint i = 1; i < gl_NumSubgroups; i++) r += red_[i];
  barrier();
  return r;
}
float workgroup_max(float v) {
  for (uint s = 1; s < gl_SubgroupSize; s <<= 1) v = max(v, subgroupShuffleXor(v, s));
  if (gl_SubgroupInvocationID == 0) red_[gl_SubgroupID] = v;
  barrier();
  float r = red_[0];
  for (uint i = 1; i < gl_NumSubgroups; i++) r = max(r, red_[i]);
  barrier();
  return r;
}
#else
float workgroup_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red_[t] = v;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) red_[t] += red_[t + s];
    barrier();
  }
  float r = red_[0];
  barrier();
  return r;
}
float workgroup_max(float v) {
  uint t = gl_LocalInvocationID.x;
  red_[t] = v;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) red_[t] = max(red_[t], red_[t + s]);
    barrier();
  }
  float r = red_[0];
  barrier();
  return r;
}
#endif
#define NEG_INF uintBitsToFloat(0xff800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)
