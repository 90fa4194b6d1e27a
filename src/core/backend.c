// The backend registry: the backends built in (which exist is decided at
// build time, GK_WITH_CPU) and any added at run time, in preference order.
// Plan creation walks it; `gradkern info` lists it.
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>

extern const gk_backend_table gk_ref_backend;
#ifdef GK_WITH_CPU
extern const gk_backend_table gk_cpu_backend;
#endif
#ifdef GK_WITH_VULKAN
extern const gk_backend_table gk_vulkan_backend;
#endif
#ifdef GK_WITH_WEBGPU
extern const gk_backend_table gk_webgpu_backend;
#endif

enum { MAX_BACKENDS = 16 };
static const gk_backend_table *registry[MAX_BACKENDS];
static const char *unavailable[MAX_BACKENDS];  // the backend's reason, or NULL
static atomic_int registered;                  // entries [0, registered) are complete
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static gk_status add(const gk_backend_table *b) {
  if (!b || !b->name) return gk_fail(GK_ERR_NULL_POINTER, "gk_backend_register: argument 'backend' or its name is NULL");
  if (b->id == GK_BACKEND_AUTO)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_backend_register: backend '%s' has id 0 (GK_BACKEND_AUTO)", b->name);
  pthread_mutex_lock(&register_lock);
  int n = atomic_load(&registered);
  gk_status s = GK_SUCCESS;
  for (int i = 0; i < n && s == GK_SUCCESS; i++)
    if (registry[i]->id == b->id)
      s = gk_fail(GK_ERR_INVALID_VALUE, "gk_backend_register: backend '%s' has id %d, already taken by '%s'",
                  b->name, (int)b->id, registry[i]->name);
  if (s == GK_SUCCESS && n == MAX_BACKENDS)
    s = gk_fail(GK_ERR_INVALID_VALUE, "gk_backend_register: backend '%s': %d backends are registered already",
                b->name, MAX_BACKENDS);
  if (s == GK_SUCCESS) {
    registry[n] = b;
    unavailable[n] = b->unavailable ? b->unavailable() : NULL;
    atomic_store(&registered, n + 1);
  }
  pthread_mutex_unlock(&register_lock);
  return s;
}

static void register_builtin(void) {
#ifdef GK_WITH_CPU
  add(&gk_cpu_backend);
#endif
  add(&gk_ref_backend);
#ifdef GK_WITH_VULKAN
  add(&gk_vulkan_backend);  // after ref: its tensors live on its device, never chosen for host tensors
#endif
#ifdef GK_WITH_WEBGPU  // after ref: its tensors live on the host's GPU, never chosen for host tensors
  add(&gk_webgpu_backend);
#endif
}

int gk_backends(const gk_backend_table *const **list) {
  pthread_once(&builtin_once, register_builtin);
  *list = registry;
  return atomic_load(&registered);
}

gk_status gk_backend_register(const gk_backend_table *backend) {
  pthread_once(&builtin_once, register_builtin);
  return add(backend);
}

const gk_backend_table *gk_backend_find(gk_backend id) {
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  for (int i = 0; i < n; i++)
    if (list[i]->id == id) return list[i];
  return NULL;
}

const char *gk_backend_unavailable_reason(const gk_backend_table *backend) {
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  for (int i = 0; i < n; i++)
    if (list[i] == backend) return unavailable[i];
  return "not registered";
}

const char *gk_backend_name(gk_backend backend) {
  if (backend == GK_BACKEND_AUTO) return "auto";
  const gk_backend_table *b = gk_backend_find(backend);
  if (b) return b->name;
  switch (backend) {  // built-in backends this library was built without
  case GK_BACKEND_CUDA: return "cuda";
  case GK_BACKEND_VULKAN: return "vulkan";
  case GK_BACKEND_WEBGPU: return "webgpu";
  default: return "?";
  }
}

int gk_backend_count(void) {
  const gk_backend_table *const *list;
  return gk_backends(&list);
}

gk_status gk_backend_get(int index, gk_backend_info *info) {
  if (!info) return gk_fail(GK_ERR_NULL_POINTER, "gk_backend_get: argument 'info' is NULL");
  const gk_backend_table *const *list;
  int n = gk_backends(&list);
  if (index < 0 || index >= n)
    return gk_fail(GK_ERR_INVALID_VALUE, "gk_backend_get: index = %d is outside 0..%d", index, n - 1);
  const char *why = unavailable[index];
  *info = (gk_backend_info){list[index]->id, list[index]->name, list[index]->device, why == NULL, why ? why : ""};
  gk_clear_error();
  return GK_SUCCESS;
}

const char *gk_backend_device_description(gk_backend backend) {
  const gk_backend_table *b = gk_backend_find(backend);
  if (!b || !b->device_description || gk_backend_unavailable_reason(b)) return "";
  return b->device_description();
}
