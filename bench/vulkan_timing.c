// Timing of the Vulkan backend's kernels (a timing program, not a test).
// Per op at a training-sized shape: time per call (runs recorded back to
// back into the backend's batches, one synchronize at the end, after one
// warm-up run), the bytes a call must move at least (every argument read or
// written once) and its FLOPs, and for memory-bound ops the fraction of the
// device's copy bandwidth it reaches, the copy measured in the same run with
// vkCmdCopyBuffer on the same device (GK_VULKAN_DEVICE). On a CPU driver
// (lavapipe) the absolute figures are the CPU's; the fractions carry over.
//   vulkan_timing [repeats]   (default 5)
#include "gradkern.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// GB/s of vkCmdCopyBuffer between two device-local buffers of `bytes`
// (read + write counted), best of 5; 0 when it cannot run.
static double copy_bandwidth(size_t bytes) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  VkInstance inst;
  if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS) return 0;
  uint32_t n = 16;
  VkPhysicalDevice pds[16];
  vkEnumeratePhysicalDevices(inst, &n, pds);
  const char *want = getenv("GK_VULKAN_DEVICE");
  uint32_t index = want ? (uint32_t)atoi(want) : 0;
  if (n == 0 || index >= n) return 0;
  VkPhysicalDevice pd = pds[index];
  float prio = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0,
                                .queueCount = 1, .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qi};
  VkDevice dev;
  if (vkCreateDevice(pd, &dci, NULL, &dev) != VK_SUCCESS) return 0;
  VkQueue q;
  vkGetDeviceQueue(dev, 0, 0, &q);
  VkBuffer buf[2];
  VkDeviceMemory mem[2];
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  for (int i = 0; i < 2; i++) {
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    vkCreateBuffer(dev, &bi, NULL, &buf[i]);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buf[i], &req);
    uint32_t type = 0;
    while (type < mp.memoryTypeCount && !((req.memoryTypeBits >> type) & 1 &&
                                          (mp.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
      type++;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = type};
    vkAllocateMemory(dev, &ai, NULL, &mem[i]);
    vkBindBufferMemory(dev, buf[i], mem[i], 0);
  }
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = 0};
  VkCommandPool pool;
  vkCreateCommandPool(dev, &pci, NULL, &pool);
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkCommandBuffer cmd;
  vkAllocateCommandBuffers(dev, &cai, &cmd);
  VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vkBeginCommandBuffer(cmd, &cbi);
  VkBufferCopy region = {0, 0, bytes};
  vkCmdCopyBuffer(cmd, buf[0], buf[1], 1, &region);
  vkEndCommandBuffer(cmd);
  double best = 1e30;
  for (int r = 0; r < 6; r++) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    double t0 = now();
    vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE);
    vkQueueWaitIdle(q);
    if (r) best = fmin(best, now() - t0);  // the first run warms up
  }
  vkDestroyCommandPool(dev, pool, NULL);
  for (int i = 0; i < 2; i++) {
    vkDestroyBuffer(dev, buf[i], NULL);
    vkFreeMemory(dev, mem[i], NULL);
  }
  vkDestroyDevice(dev, NULL);
  vkDestroyInstance(inst, NULL);
  return 2.0 * (double)bytes / best / 1e9;
}

typedef struct row {
  const char *name;
  gk_op_desc d;
  double flops;   // per call
  int memory_bound;
} row;

// Time one description on the vulkan backend: s per call (0 on failure),
// the bytes of its arguments.
static double time_desc(const gk_op_desc *desc, int repeats, double *bytes) {
  gk_op_desc d = *desc;
  d.backend = GK_BACKEND_VULKAN;
  gk_plan *plan;
  if (gk_plan_create(&d, &plan) != GK_SUCCESS) {
    fprintf(stderr, "%s: %s\n", gk_op_name(d.op), gk_last_error());
    return 0;
  }
  gk_arg args[GK_ARG_COUNT_];
  gk_buffer *bufs[GK_ARG_COUNT_];
  int n = 0;
  *bytes = 0;
  for (int k = 0; k < GK_ARG_COUNT_; k++) {
    int rank;
    int64_t shape[GK_MAX_RANK];
    gk_plan_arg_shape(plan, (gk_arg_kind)k, &rank, shape);
    if (rank < 0) continue;
    bool index = k == GK_ARG_TARGET || k == GK_ARG_INDEX;
    gk_dtype dt = index ? GK_I32 : GK_F32;
    gk_tensor t;
    gk_tensor_init(&t, NULL, dt, rank, shape);
    int64_t numel = gk_tensor_numel(&t);
    size_t size = (size_t)(numel ? numel : 1) * 4;
    gk_buffer_alloc(GK_BACKEND_VULKAN, size, &bufs[n]);
    float *host = malloc(size);
    for (int64_t i = 0; i < (numel ? numel : 1); i++) {
      if (index) ((int32_t *)host)[i] = (int32_t)(i % 7);  // valid ids and targets for the shapes below
      else host[i] = (k == GK_ARG_RSTD) ? 1.0f : (float)((i * 7919 % 2001) - 1000) / 1000.0f;
    }
    gk_buffer_upload(bufs[n], 0, host, size);
    free(host);
    t.data = gk_buffer_address(bufs[n]);
    t.device = GK_DEVICE_VULKAN;
    args[n] = (gk_arg){(gk_arg_kind)k, t};
    *bytes += (double)numel * 4;
    n++;
  }
  double per_call = 0;
  if (gk_plan_run(plan, args, n, NULL, 0) == GK_SUCCESS && gk_backend_synchronize(GK_BACKEND_VULKAN) == GK_SUCCESS) {
    double t0 = now();
    for (int r = 0; r < repeats; r++) gk_plan_run(plan, args, n, NULL, 0);
    gk_backend_synchronize(GK_BACKEND_VULKAN);
    per_call = (now() - t0) / repeats;
  } else
    fprintf(stderr, "%s: %s\n", gk_op_name(d.op), gk_last_error());
  for (int i = 0; i < n; i++) gk_buffer_free(bufs[i]);
  gk_plan_destroy(plan);
  return per_call;
}

static gk_op_desc make(gk_op op, gk_direction dir, int rank, const int64_t *shape) {
  gk_op_desc d;
  gk_op_desc_init(&d, op, dir, GK_F32, rank, shape);
  return d;
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 5;
  if (repeats < 1) repeats = 1;
  int64_t n1[1] = {1 << 22}, rows[2] = {4096, 1024}, lin[2] = {512, 1024}, ce[2] = {512, 8192};
  int64_t att[4] = {1, 8, 256, 64}, scan[3] = {2, 256, 512}, emb[1] = {4096};
  row list[32];
  int nr = 0;
  double n = (double)n1[0], nrow = 4096.0 * 1024;
  list[nr++] = (row){"relu fwd", make(GK_OP_RELU, GK_FORWARD, 1, n1), n, 1};
  list[nr++] = (row){"silu fwd", make(GK_OP_SILU, GK_FORWARD, 1, n1), 4 * n, 1};
  list[nr++] = (row){"silu bwd", make(GK_OP_SILU, GK_BACKWARD, 1, n1), 6 * n, 1};
  list[nr++] = (row){"add fwd", make(GK_OP_ADD, GK_FORWARD, 1, n1), n, 1};
  list[nr++] = (row){"rmsnorm fwd", make(GK_OP_RMSNORM, GK_FORWARD, 2, rows), 4 * nrow, 1};
  list[nr++] = (row){"rmsnorm bwd", make(GK_OP_RMSNORM, GK_BACKWARD, 2, rows), 8 * nrow, 1};
  list[nr++] = (row){"softmax fwd", make(GK_OP_SOFTMAX, GK_FORWARD, 2, rows), 4 * nrow, 1};
  gk_op_desc dce = make(GK_OP_CROSS_ENTROPY, GK_FORWARD, 2, ce), demb = make(GK_OP_EMBEDDING, GK_FORWARD, 1, emb);
  dce.index_dtype = demb.index_dtype = GK_I32;
  demb.embedding.num_embeddings = 8;
  demb.embedding.dim = 1024;
  list[nr++] = (row){"cross_entropy fwd", dce, 4.0 * 512 * 8192, 1};
  list[nr++] = (row){"embedding fwd", demb, 0, 1};
  list[nr++] = (row){"linear fwd", make(GK_OP_LINEAR, GK_FORWARD, 2, lin), 2.0 * 512 * 1024 * 1024, 0};
  list[nr++] = (row){"linear bwd", make(GK_OP_LINEAR, GK_BACKWARD, 2, lin), 4.0 * 512 * 1024 * 1024, 0};
  list[nr++] = (row){"attention fwd", make(GK_OP_ATTENTION, GK_FORWARD, 4, att), 2.0 * 8 * 256 * 256 * 64, 0};
  list[nr++] = (row){"attention bwd", make(GK_OP_ATTENTION, GK_BACKWARD, 4, att), 5.0 * 8 * 256 * 256 * 64, 0};
  list[nr++] = (row){"scan fwd (N=16)", make(GK_OP_SELECTIVE_SCAN, GK_FORWARD, 3, scan), 2.0 * 2 * 256 * 512 * 16 * 3, 0};

  double copy = copy_bandwidth((size_t)64 << 20);
  printf("vulkan backend: %s\n", gk_backend_device_description(GK_BACKEND_VULKAN));
  printf("copy bandwidth (vkCmdCopyBuffer, 64 MiB, read + write): %.2f GB/s; %d timed runs per row, batched\n\n",
         copy, repeats);
  printf("%-18s %10s %12s %10s %9s %9s %s\n", "op", "ms/call", "MB moved", "MFLOP", "GB/s", "GFLOP/s",
         "of copy bw");
  for (int i = 0; i < nr; i++) {
    double bytes = 0, s = time_desc(&list[i].d, repeats, &bytes);
    if (s <= 0) {
      printf("%-18s failed\n", list[i].name);
      continue;
    }
    double gbs = bytes / s / 1e9;
    printf("%-18s %10.3f %12.2f %10.1f %9.2f %9.2f", list[i].name, s * 1e3, bytes / 1e6, list[i].flops / 1e6, gbs,
           list[i].flops / s / 1e9);
    if (list[i].memory_bound && copy > 0) printf(" %8.0f%%", 100 * gbs / copy);
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
