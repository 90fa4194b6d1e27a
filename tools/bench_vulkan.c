// gradkern bench --device vulkan: copies between two buffers on the Vulkan
// backend's device, for its copy bandwidth (timed in tools/bench.c). Built
// with the Vulkan backend.
#include "bench.h"
#include "vulkan/vulkan_backend.h"

#include <stdlib.h>
#include <vulkan/vulkan.h>

struct gk_bench_copier {
  size_t bytes;
  VkInstance instance;
  VkDevice device;
  VkQueue queue;
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkBuffer buf[2];
  VkDeviceMemory mem[2];
};

void gk_bench_copier_close(gk_bench_copier *c) {
  if (!c) return;
  if (c->device) {
    vkDestroyCommandPool(c->device, c->pool, NULL);
    for (int i = 0; i < 2; i++) {
      vkDestroyBuffer(c->device, c->buf[i], NULL);
      vkFreeMemory(c->device, c->mem[i], NULL);
    }
    vkDestroyDevice(c->device, NULL);
  }
  if (c->instance) vkDestroyInstance(c->instance, NULL);
  free(c);
}

static int memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t type_bits, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((type_bits >> i & 1) && (mp->memoryTypes[i].propertyFlags & want) == want) return (int)i;
  return -1;
}

// The device gradkern's backend picks, its first compute queue, and two
// buffers of `bytes` in the kind of memory the backend puts its buffers in
// (device-local, and host-visible where the backend maps them). NULL, or
// what failed.
static const char *copier_init(gk_bench_copier *c, size_t bytes) {
  c->bytes = bytes;
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "gradkern bench",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  if (vkCreateInstance(&ici, NULL, &c->instance) != VK_SUCCESS) return "no Vulkan instance";
  VkPhysicalDevice pds[16];
  uint32_t n = 16;
  vkEnumeratePhysicalDevices(c->instance, &n, pds);
  uint32_t index;
  bool mapped;
  const char *why = vk_device_choice(&index, &mapped);
  if (why) return why;
  if (index >= n) return "no such device";
  VkPhysicalDevice pd = pds[index];
  VkQueueFamilyProperties qp[16];
  uint32_t nq = 16, family = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qp);
  while (family < nq && !(qp[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) family++;
  if (family == nq) return "no compute queue";
  float prio = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family,
                                .queueCount = 1, .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qi};
  if (vkCreateDevice(pd, &dci, NULL, &c->device) != VK_SUCCESS) return "vkCreateDevice failed";
  vkGetDeviceQueue(c->device, family, 0, &c->queue);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                              host_visible = local | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (int i = 0; i < 2; i++) {
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    if (vkCreateBuffer(c->device, &bi, NULL, &c->buf[i]) != VK_SUCCESS) return "vkCreateBuffer failed";
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(c->device, c->buf[i], &req);
    int type = memory_type(&mp, req.memoryTypeBits, mapped ? host_visible : local);
    if (type < 0) return "no device-local memory";
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type};
    if (vkAllocateMemory(c->device, &ai, NULL, &c->mem[i]) != VK_SUCCESS) return "no device memory for the copy";
    vkBindBufferMemory(c->device, c->buf[i], c->mem[i], 0);
  }
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = family};
  if (vkCreateCommandPool(c->device, &pci, NULL, &c->pool) != VK_SUCCESS) return "no command pool";
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = c->pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  if (vkAllocateCommandBuffers(c->device, &cai, &c->cmd) != VK_SUCCESS) return "no command buffer";
  return NULL;
}

const char *gk_bench_copier_open(size_t bytes, gk_bench_copier **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return "no memory";
  const char *why = copier_init(*out, bytes);
  if (why) {
    gk_bench_copier_close(*out);
    *out = NULL;
  }
  return why;
}

int gk_bench_copier_run(gk_bench_copier *c, int copies, int fill) {
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  VkBufferCopy region = {0, 0, c->bytes};
  if (vkResetCommandBuffer(c->cmd, 0) != VK_SUCCESS || vkBeginCommandBuffer(c->cmd, &begin) != VK_SUCCESS) return 0;
  for (int i = 0; i < 2 && fill; i++) vkCmdFillBuffer(c->cmd, c->buf[i], 0, VK_WHOLE_SIZE, 0x3f800000u + (uint32_t)i);
  for (int i = -fill; i < copies; i++) {
    if (i >= 0) vkCmdCopyBuffer(c->cmd, c->buf[i % 2], c->buf[1 - i % 2], 1, &region);
    vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                         NULL, 0, NULL);
  }
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cmd};
  return vkEndCommandBuffer(c->cmd) == VK_SUCCESS && vkQueueSubmit(c->queue, 1, &si, VK_NULL_HANDLE) == VK_SUCCESS &&
         vkQueueWaitIdle(c->queue) == VK_SUCCESS;
}
