// The Vulkan backend's device side: instance and device (GK_VULKAN_DEVICE
// picks among several; by default a discrete GPU before others), buffers,
// one command buffer that runs are recorded into and that is submitted in a
// batch (when the host needs results: download, upload, synchronize; or
// when it is full), pipelines made once from the SPIR-V embedded at build
// time, temporaries, and the gather/scatter of tensors that are not
// contiguous f32.
//
// Memory: where the device's memory is host memory (integrated GPUs,
// lavapipe), buffers live there, mapped, and uploads and downloads are
// memcpy after the batch; otherwise (a discrete GPU, or GK_VULKAN_STAGED=1,
// which tests that path on any device; =0 maps where the device can)
// buffers and temporaries are device-local and copies go through a staging
// buffer in host memory.
//
// GK_VULKAN_VALIDATION=1 enables the Khronos validation layer with its
// synchronization validation; every message it reports is kept, and the
// next synchronize (so every download) fails with it.
#include "vulkan_backend.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gk_vk_spirv {
  const char *name;
  const uint32_t *code;
  size_t bytes;
};
extern const struct gk_vk_spirv gk_vk_spirv[];

enum { MAX_PIPELINES = 64, BATCH_DISPATCHES = 512, ARENA_MIN = 16 << 20, STAGE_MIN = 1 << 20 };

// A buffer: the handle the library keeps for each gk_buffer.
typedef struct vk_buf {
  VkBuffer buffer;
  VkDeviceMemory memory;
  void *mapped;  // host address when host-visible, else NULL
  VkDeviceSize size;
} vk_buf;

// Temporaries of one batch, carved from blocks of one kind of memory:
// device-local (mapped only where all buffers are) or host-visible.
typedef struct {
  vk_buf block[32];
  VkDeviceSize used[32];
  int blocks;
  bool host;
} vk_arena;

static struct {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkPhysicalDeviceProperties props;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  PFN_vkCmdPushDescriptorSetKHR push_descriptors;
  uint32_t mem_buffers, mem_host;  // memory types: buffers; temporaries and staging (host-visible)
  bool uma;                        // buffers are host-visible
  uint32_t index;                  // of the device among the instance's
  bool storage16;
  VkSubgroupFeatureFlags subgroup_ops;  // the device's, where the _subgroups builds may run (else 0)
  VkDeviceSize align;              // of temporaries and views' descriptor offsets (at least 256)
  VkDeviceSize bind_align;         // of a tensor bound where it lies: the device's minimum
  pthread_mutex_t lock;
  // The batch being recorded.
  bool recording;
  int dispatches;
  // Temporaries, bump-allocated, freed when the batch ends: the shaders'
  // own, and those the host writes or reads.
  vk_arena temps, host_temps;
  vk_buf stage;   // staging for copies to and from device-local buffers
  vk_buf unused;  // bound to slots a dispatch leaves empty
  // Pipelines, made once per process when a plan first needs them.
  const char *pipeline_name[MAX_PIPELINES];
  VkPipeline pipeline[MAX_PIPELINES];
  int pipelines;
  // Validation messages (GK_VULKAN_VALIDATION=1).
  int messages;
  char first_message[512];
  char reason[512];  // why the backend is unavailable
  char description[768];
} vk = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define VK_TRY(call, what)                                                                        \
  do {                                                                                            \
    VkResult res_ = (call);                                                                       \
    if (res_ != VK_SUCCESS)                                                                       \
      return gk_fail(res_ == VK_ERROR_OUT_OF_DEVICE_MEMORY || res_ == VK_ERROR_OUT_OF_HOST_MEMORY \
                         ? GK_ERR_OUT_OF_MEMORY                                                   \
                         : GK_ERR_INTERNAL,                                                       \
                     "vulkan: %s failed (VkResult %d)", what, (int)res_);                         \
  } while (0)

// ---------------------------------------------------------------- validation

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)type;
  (void)user;
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  fprintf(stderr, "vulkan validation: %s\n", data->pMessage);
  if (vk.messages++ == 0) snprintf(vk.first_message, sizeof vk.first_message, "%s", data->pMessage);
  return VK_FALSE;
}

static bool validation_wanted(void) {
  const char *v = getenv("GK_VULKAN_VALIDATION");
  return v && strcmp(v, "0") != 0;
}

// ---------------------------------------------------------------- shaders

// The embedded SPIR-V module of that name, or NULL.
static const struct gk_vk_spirv *spirv_named(const char *name) {
  for (const struct gk_vk_spirv *m = gk_vk_spirv; m->name; m++)
    if (!strcmp(m->name, name)) return m;
  return NULL;
}

// The subgroup operations a module declares: its GroupNonUniform*
// capabilities (61 basic .. 68 quad, in the order of the bits of
// VkSubgroupFeatureFlagBits: capability 61 + b is bit b), from the
// OpCapability instructions that open every module after its 5-word header.
static VkSubgroupFeatureFlags spirv_subgroup_ops(const struct gk_vk_spirv *m) {
  enum { OP_CAPABILITY = 17, GROUP_NON_UNIFORM = 61, GROUP_NON_UNIFORM_QUAD = 68 };
  VkSubgroupFeatureFlags ops = 0;
  size_t words = m->bytes / 4;
  for (size_t i = 5; i + 1 < words && (m->code[i] & 0xffff) == OP_CAPABILITY && m->code[i] >> 16; i += m->code[i] >> 16)
    if (m->code[i + 1] >= GROUP_NON_UNIFORM && m->code[i + 1] <= GROUP_NON_UNIFORM_QUAD)
      ops |= 1u << (m->code[i + 1] - GROUP_NON_UNIFORM);
  return ops;
}

// The build of a shader the device runs: its _subgroups build where there
// is one and the device takes every subgroup operation it declares, else
// the plain one.
static const struct gk_vk_spirv *device_build(const struct gk_vk_spirv *plain) {
  char variant[96];
  snprintf(variant, sizeof variant, "%s_subgroups", plain->name);
  const struct gk_vk_spirv *sg = vk.subgroup_ops ? spirv_named(variant) : NULL;
  return sg && !(spirv_subgroup_ops(sg) & ~vk.subgroup_ops) ? sg : plain;
}

// Whether the device runs shader `name`'s _subgroups build.
static bool takes_subgroups(const char *name) {
  const struct gk_vk_spirv *m = spirv_named(name);
  return m && device_build(m) != m;
}

// ---------------------------------------------------------------- setup

// The first memory type allowed by type_bits with every flag of `want` and
// none of `avoid`, or -1.
static int find_memory(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(vk.physical, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
    VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
    if ((type_bits & (1u << i)) && (f & want) == want && !(f & avoid)) return (int)i;
  }
  return -1;
}

// The size of the heap that memory type `type` draws on.
static VkDeviceSize heap_size(int type) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(vk.physical, &mp);
  return mp.memoryHeaps[mp.memoryTypes[type].heapIndex].size;
}

__attribute__((format(printf, 1, 2))) static const char *fail_setup(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(vk.reason, sizeof vk.reason, fmt, ap);
  va_end(ap);
  return vk.reason;
}

static const char *create_instance(void) {
  bool validate = validation_wanted();
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "gradkern",
                           .apiVersion = VK_API_VERSION_1_1};
  const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                      .enabledValidationFeatureCount = 1, .pEnabledValidationFeatures = enables};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  if (validate) {
    ci.pNext = &features;
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
  }
  VkResult res = vkCreateInstance(&ci, NULL, &vk.instance);
  if (res != VK_SUCCESS)
    return validate ? fail_setup("no Vulkan instance with %s (VkResult %d): is vulkan-validationlayers installed?",
                                 layers[0], (int)res)
                    : fail_setup("no Vulkan instance (VkResult %d): no Vulkan loader or driver installed", (int)res);
  if (validate) {
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message};
    PFN_vkCreateDebugUtilsMessengerEXT create =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vk.instance, "vkCreateDebugUtilsMessengerEXT");
    if (!create || create(vk.instance, &mi, NULL, &vk.messenger) != VK_SUCCESS)
      return fail_setup("GK_VULKAN_VALIDATION: no debug messenger");
  }
  return NULL;
}

static bool has_extension(VkPhysicalDevice pd, const char *name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
  VkExtensionProperties *props = calloc(n ? n : 1, sizeof *props);
  if (!props) return false;
  vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props);
  bool found = false;
  for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(props[i].extensionName, name);
  free(props);
  return found;
}

static const char *pick_device(void) {
  uint32_t n = 0;
  VkResult res = vkEnumeratePhysicalDevices(vk.instance, &n, NULL);
  if (res != VK_SUCCESS || n == 0) return fail_setup("no Vulkan device (VkResult %d)", (int)res);
  VkPhysicalDevice list[16];
  if (n > 16) n = 16;
  vkEnumeratePhysicalDevices(vk.instance, &n, list);
  const char *want = getenv("GK_VULKAN_DEVICE");
  // Unless told, the most capable kind: a discrete GPU, then an integrated
  // one, a virtual one, a CPU driver (loaders do not all order them so).
  static const int rank[] = {[VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU] = 0, [VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU] = 1,
                             [VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU] = 2, [VK_PHYSICAL_DEVICE_TYPE_CPU] = 3,
                             [VK_PHYSICAL_DEVICE_TYPE_OTHER] = 4};
  int index = 0, best = 5;
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(list[i], &p);
    int r = p.deviceType <= VK_PHYSICAL_DEVICE_TYPE_CPU ? rank[p.deviceType] : 4;
    if (r < best) best = r, index = (int)i;
  }
  if (want && *want) {
    char *end;
    long v = strtol(want, &end, 10);
    if (*end || v < 0 || v >= (long)n) return fail_setup("GK_VULKAN_DEVICE = '%s' is not a device index 0..%u", want, n - 1);
    index = (int)v;
  }
  vk.physical = list[index];
  vk.index = (uint32_t)index;
  vkGetPhysicalDeviceProperties(vk.physical, &vk.props);
  if (!has_extension(vk.physical, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
    return fail_setup("Vulkan device '%s' lacks VK_KHR_push_descriptor", vk.props.deviceName);
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical, &nq, NULL);
  VkQueueFamilyProperties qp[16];
  if (nq > 16) nq = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical, &nq, qp);
  vk.queue_family = UINT32_MAX;
  for (uint32_t i = 0; i < nq && vk.queue_family == UINT32_MAX; i++)
    if (qp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) vk.queue_family = i;
  if (vk.queue_family == UINT32_MAX) return fail_setup("Vulkan device '%s' has no compute queue", vk.props.deviceName);
  return NULL;
}

static const char *create_device(void) {
  VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
  vkGetPhysicalDeviceFeatures2(vk.physical, &f2);
  vk.storage16 = s16.storageBuffer16BitAccess;
  VkPhysicalDevice16BitStorageFeatures on16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
                                               .storageBuffer16BitAccess = vk.storage16};
  float priority = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = vk.queue_family,
                                .queueCount = 1, .pQueuePriorities = &priority};
  const char *exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &on16, .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi, .enabledExtensionCount = 1, .ppEnabledExtensionNames = exts};
  VkResult res = vkCreateDevice(vk.physical, &ci, NULL, &vk.device);
  if (res != VK_SUCCESS) return fail_setup("vkCreateDevice failed on '%s' (VkResult %d)", vk.props.deviceName, (int)res);
  vkGetDeviceQueue(vk.device, vk.queue_family, 0, &vk.queue);
  vk.push_descriptors = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(vk.device, "vkCmdPushDescriptorSetKHR");
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = vk.queue_family};
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkDescriptorSetLayoutBinding b = {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                    .descriptorCount = VK_SLOTS, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
                                        .bindingCount = 1, .pBindings = &b};
  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
  if (vkCreateCommandPool(vk.device, &pi, NULL, &vk.pool) != VK_SUCCESS) return fail_setup("no command pool");
  ai.commandPool = vk.pool;
  if (vkAllocateCommandBuffers(vk.device, &ai, &vk.cmd) != VK_SUCCESS ||
      vkCreateFence(vk.device, &fi, NULL, &vk.fence) != VK_SUCCESS ||
      vkCreateDescriptorSetLayout(vk.device, &li, NULL, &vk.set_layout) != VK_SUCCESS)
    return fail_setup("vulkan setup failed on '%s'", vk.props.deviceName);
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                    .pSetLayouts = &vk.set_layout, .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pr};
  if (vkCreatePipelineLayout(vk.device, &pli, NULL, &vk.layout) != VK_SUCCESS)
    return fail_setup("no pipeline layout on '%s'", vk.props.deviceName);
  vk.bind_align = vk.props.limits.minStorageBufferOffsetAlignment;
  if (vk.bind_align < 4) vk.bind_align = 4;
  vk.align = vk.bind_align < 256 ? 256 : vk.bind_align;
  return NULL;
}

static gk_status make_buf(size_t bytes, bool host, vk_buf *b);

static const char *setup(void) {
  const char *why = create_instance();
  if (!why) why = pick_device();
  if (!why) why = create_device();
  if (why) return why;
  // Memory types: a probe buffer says which types a storage buffer may use.
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 256,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT};
  VkBuffer probe;
  if (vkCreateBuffer(vk.device, &bi, NULL, &probe) != VK_SUCCESS) return fail_setup("no buffer on '%s'", vk.props.deviceName);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(vk.device, probe, &req);
  vkDestroyBuffer(vk.device, probe, NULL);
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Mapped buffers where device memory is host memory (a CPU driver, an
  // integrated GPU). Not on a discrete GPU, even where all of its memory is
  // host-visible (a resizable BAR): host reads of it cross the bus uncached;
  // there buffers and the shaders' temporaries are device-local, and copies
  // are staged through host memory outside the device's heap (cached, for
  // the host's reads, where there is such).
  // GK_VULKAN_STAGED=1 stages on any device, =0 maps wherever the device
  // has host-visible device-local memory (to compare the two).
  int local = find_memory(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (local < 0) return fail_setup("Vulkan device '%s' has no device-local memory for buffers", vk.props.deviceName);
  const char *staged = getenv("GK_VULKAN_STAGED");
  bool discrete = vk.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  int uma = find_memory(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (uma >= 0 && (staged && *staged ? !strcmp(staged, "1") : discrete || heap_size(uma) < heap_size(local))) uma = -1;
  int host = uma >= 0 ? uma
                     : find_memory(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                   VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (host < 0) host = find_memory(req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (host < 0) host = find_memory(req.memoryTypeBits, hv, 0);
  if (host < 0) return fail_setup("Vulkan device '%s' has no host-visible coherent memory", vk.props.deviceName);
  vk.uma = uma >= 0;
  vk.mem_buffers = (uint32_t)(vk.uma ? uma : local);
  vk.mem_host = (uint32_t)host;
  vk.host_temps.host = true;
  if (make_buf(256, true, &vk.unused) != GK_SUCCESS) return fail_setup("no memory on '%s'", vk.props.deviceName);
  VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sub};
  vkGetPhysicalDeviceProperties2(vk.physical, &p2);
  // The shaders' _subgroups builds (workgroup reductions by subgroup
  // shuffles, products sharing A within quads): where compute shaders have
  // subgroup operations, subgroups of 4..128 (a power of two), and
  // GK_VULKAN_SUBGROUPS is not 0 (which keeps the plain builds); each build
  // where the device has every operation its SPIR-V declares (device_build).
  const char *use = getenv("GK_VULKAN_SUBGROUPS");
  bool off = use && !strcmp(use, "0"), able = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
      sub.subgroupSize >= 4 && sub.subgroupSize <= 128 && !(sub.subgroupSize & (sub.subgroupSize - 1));
  vk.subgroup_ops = able && !off ? sub.supportedOperations : 0;
  char uses[160];
  if (!vk.subgroup_ops)
    snprintf(uses, sizeof uses, "reductions and products in workgroup memory: %s",
             off ? "GK_VULKAN_SUBGROUPS=0" : "no subgroups of 4 to 128 in compute");
  else
    snprintf(uses, sizeof uses, "reductions %s, products %s",
             takes_subgroups("reduce") ? "by subgroup shuffles" : "in workgroup memory: no subgroup shuffles in compute",
             takes_subgroups("gemm") ? "by quad broadcasts" : "in workgroup memory: no quad operations in compute");
  static const char *const types[] = {"other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU"};
  uint32_t v = vk.props.apiVersion;
  snprintf(vk.description, sizeof vk.description,
           "%s (%s, Vulkan %u.%u.%u): subgroups of %u (%s), 16-bit storage %s, %u KiB workgroup memory, "
           "bindings up to %u MiB, %s, cooperative matrix %s",
           vk.props.deviceName, types[vk.props.deviceType <= 4 ? vk.props.deviceType : 0], VK_API_VERSION_MAJOR(v),
           VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v), sub.subgroupSize, uses, vk.storage16 ? "yes" : "no",
           vk.props.limits.maxComputeSharedMemorySize / 1024, vk.props.limits.maxStorageBufferRange >> 20,
           vk.uma ? "buffers host-visible (mapped)" : "buffers device-local (staged copies)",
           has_extension(vk.physical, "VK_KHR_cooperative_matrix") ? "available (unused)" : "no");
  return NULL;
}

// The device and everything made on it live until the process exits (the
// state stays reachable from `vk`; destroying the instance at exit unloads
// the driver, and leak checkers then report what the driver kept).
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static const char *setup_result;
static void setup_once_fn(void) {
  setup_result = setup();
}

// NULL when the backend can run here, else why not (no loader, no driver,
// no device, a device without what the backend needs).
const char *vk_unavailable(void) {
  pthread_once(&setup_once, setup_once_fn);
  return setup_result;
}

bool vk_has_16bit_storage(void) { return vk.storage16; }

const char *vk_device_choice(uint32_t *index, bool *mapped) {
  const char *why = vk_unavailable();
  if (!why) *index = vk.index, *mapped = vk.uma;
  return why;
}

// ---------------------------------------------------------------- buffers

static gk_status make_buf(size_t bytes, bool host, vk_buf *b) {
  memset(b, 0, sizeof *b);
  bytes = (bytes + 3) / 4 * 4;  // whole words: shaders read 32-bit words
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT};
  VK_TRY(vkCreateBuffer(vk.device, &bi, NULL, &b->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(vk.device, b->buffer, &req);
  uint32_t type = host ? vk.mem_host : vk.mem_buffers;
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                             .memoryTypeIndex = type};
  VkResult res = vkAllocateMemory(vk.device, &ai, NULL, &b->memory);
  if (res != VK_SUCCESS) {
    vkDestroyBuffer(vk.device, b->buffer, NULL);
    return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: no device memory for %zu bytes (VkResult %d)", bytes, (int)res);
  }
  vkBindBufferMemory(vk.device, b->buffer, b->memory, 0);
  if (host || vk.uma) VK_TRY(vkMapMemory(vk.device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "vkMapMemory");
  b->size = bytes;
  return GK_SUCCESS;
}

static void free_buf(vk_buf *b) {
  if (!b->buffer) return;
  vkDestroyBuffer(vk.device, b->buffer, NULL);
  vkFreeMemory(vk.device, b->memory, NULL);
  memset(b, 0, sizeof *b);
}

static gk_status flush_locked(void);

gk_status vk_buffer_alloc(size_t bytes, void **handle) {
  vk_buf *b = malloc(sizeof *b);
  if (!b) return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: no host memory for a buffer handle");
  gk_status s = make_buf(bytes, false, b);
  if (s != GK_SUCCESS) {
    free(b);
    return s;
  }
  *handle = b;
  return GK_SUCCESS;
}

vk_binding vk_buffer_binding(void *handle) {
  const vk_buf *b = handle;
  return (vk_binding){b->buffer, 0, b->size};
}

void vk_buffer_free(void *handle) {
  pthread_mutex_lock(&vk.lock);
  flush_locked();  // runs recorded with it finish first
  free_buf(handle);
  pthread_mutex_unlock(&vk.lock);
  free(handle);
}

// Copy between a device-local buffer and host memory through the staging
// buffer (kept, grown to the largest copy yet: allocating device memory per
// copy cost more than the copy), with a command buffer of its own, waited for.
static gk_status staged_copy(vk_buf *b, size_t offset, void *host, size_t bytes, bool upload) {
  if (vk.stage.size < bytes) {
    free_buf(&vk.stage);
    gk_status s = make_buf(bytes > STAGE_MIN ? bytes : STAGE_MIN, true, &vk.stage);
    if (s != GK_SUCCESS) return s;
  }
  vk_buf stage = vk.stage;
  if (upload) memcpy(stage.mapped, host, bytes);
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = vk.pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkCommandBuffer c;
  VK_TRY(vkAllocateCommandBuffers(vk.device, &ai, &c), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  vkBeginCommandBuffer(c, &bi);
  // Earlier batches' shader and copy writes before this copy's read or write.
  VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  VkBufferCopy region = {upload ? 0 : offset, upload ? offset : 0, bytes};
  vkCmdCopyBuffer(c, upload ? stage.buffer : b->buffer, upload ? b->buffer : stage.buffer, 1, &region);
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       0, 1, &mb, 0, NULL, 0, NULL);
  vkEndCommandBuffer(c);
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c};
  VkResult res = vkQueueSubmit(vk.queue, 1, &si, vk.fence);
  if (res == VK_SUCCESS) res = vkWaitForFences(vk.device, 1, &vk.fence, VK_TRUE, UINT64_MAX);
  vkResetFences(vk.device, 1, &vk.fence);
  vkFreeCommandBuffers(vk.device, vk.pool, 1, &c);
  if (res == VK_SUCCESS && !upload) memcpy(host, stage.mapped, bytes);
  return res == VK_SUCCESS ? GK_SUCCESS : gk_fail(GK_ERR_INTERNAL, "vulkan: copy failed (VkResult %d)", (int)res);
}

gk_status vk_buffer_upload(void *handle, size_t offset, const void *src, size_t bytes) {
  vk_buf *b = handle;
  pthread_mutex_lock(&vk.lock);
  gk_status s = flush_locked();  // runs recorded before it read the old bytes
  if (s == GK_SUCCESS && bytes) {
    if (b->mapped) memcpy((char *)b->mapped + offset, src, bytes);
    else s = staged_copy(b, offset, (void *)src, bytes, true);
  }
  pthread_mutex_unlock(&vk.lock);
  return s;
}

gk_status vk_buffer_download(void *handle, size_t offset, void *dst, size_t bytes) {
  vk_buf *b = handle;
  pthread_mutex_lock(&vk.lock);
  gk_status s = flush_locked();
  if (s == GK_SUCCESS && bytes) {
    if (b->mapped) memcpy(dst, (const char *)b->mapped + offset, bytes);
    else s = staged_copy(b, offset, dst, bytes, false);
  }
  pthread_mutex_unlock(&vk.lock);
  return s;
}

// ---------------------------------------------------------------- batches

static gk_status begin_batch(void) {
  if (vk.recording) return GK_SUCCESS;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VK_TRY(vkBeginCommandBuffer(vk.cmd, &bi), "vkBeginCommandBuffer");
  vk.recording = true;
  vk.dispatches = 0;
  return GK_SUCCESS;
}

// After a batch: the arena's temporaries are free again, kept as one block
// the size of all its blocks together.
static void arena_reset(vk_arena *a) {
  VkDeviceSize total = 0;
  for (int i = 0; i < a->blocks; i++) total += a->block[i].size;
  if (a->blocks > 1) {
    for (int i = 0; i < a->blocks; i++) free_buf(&a->block[i]);
    a->blocks = 0;
    if (make_buf(total, a->host, &a->block[0]) == GK_SUCCESS) a->blocks = 1;
  }
  if (a->blocks) a->used[0] = 0;
}

// Submit the batch and wait for it; then copy `bytes` from `temp` (a
// temporary's host address; NULL: nothing) to `dst`, and the temporaries are
// free again.
static gk_status flush_read_locked(const void *temp, void *dst, size_t bytes) {
  gk_status s = GK_SUCCESS;
  if (vk.recording) {
    // The last writes are made visible to the host that reads them next.
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(vk.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
    vk.recording = false;
    VkResult res = vkEndCommandBuffer(vk.cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &vk.cmd};
    if (res == VK_SUCCESS) res = vkQueueSubmit(vk.queue, 1, &si, vk.fence);
    if (res == VK_SUCCESS) res = vkWaitForFences(vk.device, 1, &vk.fence, VK_TRUE, UINT64_MAX);
    vkResetFences(vk.device, 1, &vk.fence);
    vkResetCommandBuffer(vk.cmd, 0);
    if (res != VK_SUCCESS) s = gk_fail(GK_ERR_INTERNAL, "vulkan: the batch failed (VkResult %d)", (int)res);
  }
  if (temp && s == GK_SUCCESS) memcpy(dst, temp, bytes);
  arena_reset(&vk.temps);
  arena_reset(&vk.host_temps);
  if (s == GK_SUCCESS && vk.messages)
    s = gk_fail(GK_ERR_INTERNAL, "vulkan validation reported %d message(s), the first: %s", vk.messages, vk.first_message);
  return s;
}

static gk_status flush_locked(void) { return flush_read_locked(NULL, NULL, 0); }

gk_status vk_synchronize(void) {
  pthread_mutex_lock(&vk.lock);
  gk_status s = flush_locked();
  pthread_mutex_unlock(&vk.lock);
  return s;
}

void vk_record_begin(void) {
  pthread_mutex_lock(&vk.lock);
  if (vk.dispatches >= BATCH_DISPATCHES) flush_locked();
}

void vk_record_end(void) { pthread_mutex_unlock(&vk.lock); }

gk_status vk_flush_read(const void *temp, void *dst, size_t bytes) { return flush_read_locked(temp, dst, bytes); }

void vk_run_begin(vk_run *r, const gk_plan *plan) {
  memset(r, 0, sizeof *r);
  r->plan = plan;
  vk_record_begin();
}

void vk_run_end(vk_run *r) {
  (void)r;
  vk_record_end();
}

gk_status vk_temp(size_t bytes, vk_binding *out, void **host) {
  vk_arena *a = host ? &vk.host_temps : &vk.temps;
  VkDeviceSize size = (bytes + vk.align - 1) / vk.align * vk.align;
  if (size == 0) size = vk.align;
  int i = a->blocks - 1;
  if (i < 0 || a->used[i] + size > a->block[i].size) {
    if (a->blocks == (int)(sizeof a->block / sizeof *a->block))
      return gk_fail(GK_ERR_OUT_OF_MEMORY, "vulkan: too many temporaries in one batch");
    i = a->blocks;
    gk_status s = make_buf(size > ARENA_MIN ? size : ARENA_MIN, a->host, &a->block[i]);
    if (s != GK_SUCCESS) return s;
    a->used[i] = 0;
    a->blocks++;
  }
  *out = (vk_binding){a->block[i].buffer, a->used[i], size};
  if (host) *host = (char *)a->block[i].mapped + a->used[i];
  a->used[i] += size;
  return GK_SUCCESS;
}

vk_binding vk_unused(void) { return (vk_binding){vk.unused.buffer, 0, VK_WHOLE_SIZE}; }

uint32_t vk_groups(int64_t n, int size) {
  int64_t g = gk_ceil_div(n, size);
  int64_t cap = vk.props.limits.maxComputeWorkGroupCount[0];
  if (cap > 65535) cap = 65535;
  return (uint32_t)(g < 1 ? 1 : g > cap ? cap : g);
}

// ---------------------------------------------------------------- pipelines

static int pipeline_index(const char *name) {
  for (int i = 0; i < vk.pipelines; i++)
    if (!strcmp(vk.pipeline_name[i], name)) return i;
  return -1;
}

gk_status vk_pipelines(const char *const *names) {
  pthread_mutex_lock(&vk.lock);
  gk_status s = GK_SUCCESS;
  for (; *names && s == GK_SUCCESS; names++) {
    if (pipeline_index(*names) >= 0) continue;
    const struct gk_vk_spirv *m = spirv_named(*names), *code;
    if (!m) {
      s = gk_fail(GK_ERR_INTERNAL, "vulkan: no shader '%s' built in", *names);
      break;
    }
    code = device_build(m);
    if (vk.pipelines == MAX_PIPELINES) {
      s = gk_fail(GK_ERR_INTERNAL, "vulkan: more than %d pipelines", MAX_PIPELINES);
      break;
    }
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code->bytes,
                                   .pCode = code->code};
    VkShaderModule module;
    VkResult res = vkCreateShaderModule(vk.device, &mi, NULL, &module);
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module, .pName = "main"},
        .layout = vk.layout};
    if (res == VK_SUCCESS) {
      res = vkCreateComputePipelines(vk.device, VK_NULL_HANDLE, 1, &ci, NULL, &vk.pipeline[vk.pipelines]);
      vkDestroyShaderModule(vk.device, module, NULL);
    }
    if (res != VK_SUCCESS) {
      s = gk_fail(GK_ERR_INTERNAL, "vulkan: pipeline of shader '%s' failed (VkResult %d)", *names, (int)res);
      break;
    }
    vk.pipeline_name[vk.pipelines++] = m->name;
  }
  pthread_mutex_unlock(&vk.lock);
  return s;
}

gk_status vk_dispatch(const char *name, const vk_binding *slots, int nslots, const void *push, size_t push_bytes,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
  int p = pipeline_index(name);
  if (p < 0) return gk_fail(GK_ERR_INTERNAL, "vulkan: pipeline '%s' was not made for this plan", name);
  gk_status s = begin_batch();
  if (s != GK_SUCCESS) return s;
  VkDescriptorBufferInfo info[VK_SLOTS];
  for (int i = 0; i < VK_SLOTS; i++) {
    vk_binding b = i < nslots && slots[i].buffer ? slots[i] : vk_unused();
    info[i] = (VkDescriptorBufferInfo){b.buffer, b.offset, b.range};
  }
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0, .descriptorCount = VK_SLOTS,
                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = info};
  uint8_t pc[VK_PUSH_BYTES] = {0};
  memcpy(pc, push, push_bytes < VK_PUSH_BYTES ? push_bytes : VK_PUSH_BYTES);
  vkCmdBindPipeline(vk.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk.pipeline[p]);
  vk.push_descriptors(vk.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk.layout, 0, 1, &w);
  vkCmdPushConstants(vk.cmd, vk.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES, pc);
  vkCmdDispatch(vk.cmd, gx, gy, gz);
  // Every dispatch may read what the one before wrote.
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  vkCmdPipelineBarrier(vk.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                       NULL, 0, NULL);
  vk.dispatches++;
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- gather / scatter

// Push constants of gather.comp and scatter.comp: n elements of a view
// (rank <= 8, shape, strides in elements) starting at element `offset` of
// the window of its buffer bound to slot 0, to or from the contiguous
// temporary of slot 1.
typedef struct vk_view_push {
  uint32_t n, rank, mode, offset;
  int32_t shape[GK_MAX_RANK], strides[GK_MAX_RANK];
} vk_view_push;
enum { MODE_F32, MODE_F16, MODE_BF16, MODE_I32, MODE_I64 };

// The push constants of a view of t (at byte_offset in buffer b) and the
// window of b its elements lie in (from an aligned byte below the lowest to
// past the highest, whole 32-bit words).
static gk_status view_push(const gk_tensor *t, const vk_buf *b, size_t byte_offset, vk_view_push *p,
                           vk_binding *window) {
  int64_t es = (int64_t)gk_dtype_size(t->dtype), n = gk_tensor_numel(t), lo = 0, hi = 0;
  *p = (vk_view_push){.n = (uint32_t)n, .rank = (uint32_t)t->rank};
  p->mode = t->dtype == GK_F16 ? MODE_F16 : t->dtype == GK_BF16 ? MODE_BF16 : t->dtype == GK_I32 ? MODE_I32
          : t->dtype == GK_I64 ? MODE_I64 : MODE_F32;
  for (int k = 0; k < t->rank; k++) {
    p->shape[k] = (int32_t)t->shape[k];
    p->strides[k] = (int32_t)t->strides[k];
    int64_t reach = (t->shape[k] - 1) * t->strides[k];
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  int64_t first = (int64_t)byte_offset + lo * es, end = (int64_t)byte_offset + (hi + 1) * es;
  int64_t start = first / (int64_t)vk.align * (int64_t)vk.align, range = (end + 3) / 4 * 4 - start;
  int64_t offset = ((int64_t)byte_offset - start) / es;
  if (n > INT32_MAX || range > (int64_t)vk.props.limits.maxStorageBufferRange || offset + hi > INT32_MAX)
    return gk_fail(GK_ERR_UNSUPPORTED, "vulkan: a tensor of %lld elements spanning %lld bytes of its buffer is past "
                   "what one binding of device '%s' reaches (%u bytes)", (long long)n, (long long)range,
                   vk.props.deviceName, vk.props.limits.maxStorageBufferRange);
  p->offset = (uint32_t)offset;
  *window = (vk_binding){b->buffer, (VkDeviceSize)start, (VkDeviceSize)range};
  return GK_SUCCESS;
}

static gk_status resolve(const gk_tensor *t, vk_buf **b, size_t *offset) {
  void *h;
  if (!gk_buffer_resolve(gk_backend_find(GK_BACKEND_VULKAN), t, &h, offset))
    return gk_fail(GK_ERR_BAD_DEVICE, "vulkan: a tensor is not in one buffer of the vulkan backend");
  *b = h;
  return GK_SUCCESS;
}

gk_status vk_gather(const gk_tensor *view, vk_binding *out) {
  int64_t n = gk_tensor_numel(view);
  gk_status s = vk_temp((size_t)(n ? n : 1) * 4, out, NULL);
  if (s != GK_SUCCESS || n == 0) return s;
  vk_buf *b = NULL;
  size_t offset = 0;
  vk_view_push p;
  vk_binding slots[2] = {{0}, *out};
  if ((s = resolve(view, &b, &offset)) != GK_SUCCESS || (s = view_push(view, b, offset, &p, &slots[0])) != GK_SUCCESS)
    return s;
  return vk_dispatch("gather", slots, 2, &p, sizeof p, vk_groups(n, 256), 1, 1);
}

// A tensor kernels can bind where it lies: contiguous f32 or i32 at an
// offset a descriptor can take.
static bool bindable(const gk_tensor *t, size_t offset) {
  return (t->dtype == GK_F32 || t->dtype == GK_I32) && gk_tensor_is_contiguous(t) && offset % vk.bind_align == 0 &&
         (uint64_t)gk_tensor_numel(t) * 4 <= vk.props.limits.maxStorageBufferRange;
}

gk_status vk_bind(const gk_tensor *t, bool output, bool load, vk_binding *out, bool *temp) {
  vk_buf *b = NULL;
  size_t offset = 0;
  int64_t n = gk_tensor_numel(t);
  *temp = false;
  gk_status s = resolve(t, &b, &offset);
  if (s != GK_SUCCESS) return s;
  if (n == 0) {
    *out = vk_unused();
    return GK_SUCCESS;
  }
  if (bindable(t, offset)) {
    *out = (vk_binding){b->buffer, offset, (VkDeviceSize)n * 4};
    return GK_SUCCESS;
  }
  if (output && (t->dtype == GK_F16 || t->dtype == GK_BF16) && !vk.storage16)
    return gk_fail(GK_ERR_UNSUPPORTED, "vulkan: device '%s' cannot store 16-bit values (no storageBuffer16BitAccess)",
                   vk.props.deviceName);
  *temp = true;
  if (!output || load) return vk_gather(t, out);
  return vk_temp((size_t)n * 4, out, NULL);
}

bool vk_bind_words16(const gk_tensor *t, vk_binding *out) {
  vk_buf *b = NULL;
  size_t offset = 0;
  uint64_t words = ((uint64_t)gk_tensor_numel(t) + 1) / 2;
  if ((t->dtype != GK_F16 && t->dtype != GK_BF16) || !gk_tensor_is_contiguous(t) || words == 0 ||
      words * 4 > vk.props.limits.maxStorageBufferRange || resolve(t, &b, &offset) != GK_SUCCESS ||
      offset % vk.bind_align != 0 || offset + words * 4 > b->size)
    return false;
  *out = (vk_binding){b->buffer, offset, words * 4};
  return true;
}

static gk_status bind_arg(vk_run *r, gk_arg_kind k, const gk_tensor *t, bool output, bool load) {
  bool temp;
  gk_status s = vk_bind(t, output, load, &r->arg[k], &temp);
  if (s != GK_SUCCESS) return s;
  r->have[k] = true;
  r->numel[k] = gk_tensor_numel(t);
  if (output && temp) r->scatter_to[k] = t;
  return GK_SUCCESS;
}

gk_status vk_bind_input(vk_run *r, gk_arg_kind k, const gk_tensor *t) { return bind_arg(r, k, t, false, true); }

gk_status vk_bind_output(vk_run *r, gk_arg_kind k, const gk_tensor *t, bool accumulates) {
  return bind_arg(r, k, t, true, accumulates);
}

gk_status vk_scatter(const gk_tensor *t, vk_binding from) {
  vk_buf *b = NULL;
  size_t offset = 0;
  vk_view_push p;
  vk_binding slots[2] = {{0}, from};
  gk_status s = resolve(t, &b, &offset);
  if (s == GK_SUCCESS) s = view_push(t, b, offset, &p, &slots[0]);
  if (s != GK_SUCCESS) return s;
  return vk_dispatch(p.mode == MODE_F32 ? "scatter" : "scatter16", slots, 2, &p, sizeof p, vk_groups(p.n, 256), 1, 1);
}

gk_status vk_scatter_outputs(vk_run *r) {
  for (int k = 0; k < GK_ARG_COUNT_; k++)
    if (r->scatter_to[k]) {
      gk_status s = vk_scatter(r->scatter_to[k], r->arg[k]);
      if (s != GK_SUCCESS) return s;
    }
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- the backend

const char *vk_device_description(void) { return vk.description; }
