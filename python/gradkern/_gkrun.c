/* gradkern._gkrun: gk_plan_run called from Python without ctypes.
 *
 * An optional compiled module of the Python binding (plain CPython C API; no
 * torch headers): built with the library by CMake when the Python headers
 * are found, or by setup.py into the pip-installed package. Without it the
 * binding calls gk_plan_run through ctypes (gradkern/_core.py), which does
 * the same work in Python and costs several microseconds more per call.
 *
 *   init(gk_plan_run address, sizeof(gk_arg) in the library, torch.Tensor,
 *        {torch dtype: gk_dtype})
 *   run(plan address, (gk_arg_kind, ...), [tensor, ...], workspace bytes) -> gk_status
 *
 * The module is not linked against libgradkern: init() hands it the address
 * of gk_plan_run in the library the binding loaded (so both use one copy of
 * the library and its thread-local gk_last_error), and the size of gk_arg
 * there, which must equal the size this module was compiled with.
 *
 * run() builds one gk_arg per tensor on the stack from the tensor's
 * data_ptr(), shape, stride(), dtype and device (what _core.to_gk_tensor
 * reads), allocates the workspace (64-byte aligned) when the plan needs one,
 * then calls gk_plan_run with the GIL released, as ctypes does. The library
 * checks every argument on each run, so nothing here is cached beyond the
 * dtype table and the attribute names.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "gradkern.h"

typedef gk_status (*plan_run_fn)(const gk_plan *, const gk_arg *, int, void *, size_t);

static plan_run_fn plan_run;
static PyObject *tensor_type;   /* torch.Tensor */
static PyObject *dtype_codes;   /* {torch.float32: GK_DTYPE_F32, ...} */
static PyObject *name_data_ptr, *name_shape, *name_stride, *name_dtype, *name_is_cpu, *name_device,
    *name_type, *name_index;

/* -1 with an exception set, or 0 with *out filled in. */
static int read_int64_tuple(PyObject *tuple, int64_t *out, int n, const char *what) {
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != n) {
    PyErr_Format(PyExc_TypeError, "gradkern: a tensor's %s is not a tuple of %d ints", what, n);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    out[i] = v;
  }
  return 0;
}

/* The device of a tensor that is not on the CPU, as _core.to_gk_tensor
 * reports it: CUDA with its index, else a device the library rejects. */
static int read_device(PyObject *t, gk_tensor *g) {
  PyObject *device = PyObject_GetAttr(t, name_device);
  if (!device) return -1;
  PyObject *type = PyObject_GetAttr(device, name_type);
  PyObject *index = type ? PyObject_GetAttr(device, name_index) : NULL;
  Py_DECREF(device);
  if (!index) {
    Py_XDECREF(type);
    return -1;
  }
  int is_cuda = PyUnicode_Check(type) && PyUnicode_CompareWithASCIIString(type, "cuda") == 0;
  g->device = is_cuda ? GK_DEVICE_CUDA : (gk_device_type)99;
  g->device_id = index == Py_None ? 0 : (int)PyLong_AsLong(index);
  Py_DECREF(type);
  Py_DECREF(index);
  return PyErr_Occurred() ? -1 : 0;
}

/* Fill *g as a view of torch tensor t (no copy, t's own strides). */
static int to_gk_tensor(PyObject *t, gk_tensor *g) {
  int is_tensor = PyObject_IsInstance(t, tensor_type);
  if (is_tensor <= 0) {
    if (is_tensor == 0)
      PyErr_Format(PyExc_TypeError, "gradkern: expected a torch.Tensor, got %s", Py_TYPE(t)->tp_name);
    return -1;
  }
  PyObject *shape = PyObject_GetAttr(t, name_shape);
  if (!shape) return -1;
  Py_ssize_t rank = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
  if (rank < 0 || rank > GK_MAX_RANK) {
    if (rank < 0)
      PyErr_SetString(PyExc_TypeError, "gradkern: a tensor's shape is not a tuple");
    else
      PyErr_Format(PyExc_ValueError, "gradkern: tensor has rank %zd, more than GK_MAX_RANK = %d", rank,
                   GK_MAX_RANK);
    Py_DECREF(shape);
    return -1;
  }
  g->rank = (int)rank;
  int failed = read_int64_tuple(shape, g->shape, g->rank, "shape");
  Py_DECREF(shape);
  if (failed) return -1;

  PyObject *strides = PyObject_CallMethodNoArgs(t, name_stride);
  if (!strides) return -1;
  failed = read_int64_tuple(strides, g->strides, g->rank, "stride()");
  Py_DECREF(strides);
  if (failed) return -1;

  PyObject *ptr = PyObject_CallMethodNoArgs(t, name_data_ptr);
  if (!ptr) return -1;
  g->data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return -1;

  PyObject *dtype = PyObject_GetAttr(t, name_dtype);
  if (!dtype) return -1;
  PyObject *code = PyDict_GetItemWithError(dtype_codes, dtype);   /* borrowed */
  Py_DECREF(dtype);
  if (!code && PyErr_Occurred()) return -1;
  g->dtype = code ? (gk_dtype)PyLong_AsLong(code) : (gk_dtype)-1;  /* -1: the library names it */

  PyObject *is_cpu = PyObject_GetAttr(t, name_is_cpu);
  if (!is_cpu) return -1;
  int on_cpu = PyObject_IsTrue(is_cpu);
  Py_DECREF(is_cpu);
  if (on_cpu < 0) return -1;
  if (on_cpu) {
    g->device = GK_DEVICE_CPU;
    g->device_id = 0;
    return 0;
  }
  return read_device(t, g);
}

static PyObject *gkrun_init(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *address, *tensor, *codes;
  Py_ssize_t arg_size;
  if (!PyArg_ParseTuple(args, "OnOO!:init", &address, &arg_size, &tensor, &PyDict_Type, &codes)) return NULL;
  if (arg_size != (Py_ssize_t)sizeof(gk_arg)) {
    PyErr_Format(PyExc_ImportError,
                 "gradkern._gkrun: gk_arg is %zd bytes in the library but %zu in this module: "
                 "it was built from another gradkern.h",
                 arg_size, sizeof(gk_arg));
    return NULL;
  }
  void *fn = PyLong_AsVoidPtr(address);
  if (!fn) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "gradkern._gkrun.init: gk_plan_run is NULL");
    return NULL;
  }
  plan_run = (plan_run_fn)fn;
  Py_INCREF(tensor);
  Py_XSETREF(tensor_type, tensor);
  Py_INCREF(codes);
  Py_XSETREF(dtype_codes, codes);
  Py_RETURN_NONE;
}

static PyObject *gkrun_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError, "gradkern._gkrun.run takes 4 arguments (%zd given)", nargs);
    return NULL;
  }
  if (!plan_run) {
    PyErr_SetString(PyExc_RuntimeError, "gradkern._gkrun.run called before init");
    return NULL;
  }
  void *plan = args[0] == Py_None ? NULL : PyLong_AsVoidPtr(args[0]);  /* None: destroyed, refused */
  if (!plan && PyErr_Occurred()) return NULL;
  PyObject *kinds = args[1], *tensors = args[2];
  if (!PyTuple_Check(kinds) || !(PyList_Check(tensors) || PyTuple_Check(tensors)) ||
      PySequence_Fast_GET_SIZE(tensors) != PyTuple_GET_SIZE(kinds)) {
    PyErr_SetString(PyExc_TypeError, "gradkern._gkrun.run: kinds must be a tuple and tensors a list "
                                     "of the same length");
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(kinds);
  gk_arg list[32];
  if (n > (Py_ssize_t)(sizeof list / sizeof list[0])) {
    PyErr_Format(PyExc_ValueError, "gradkern._gkrun.run: %zd arguments, more than %zu", n,
                 sizeof list / sizeof list[0]);
    return NULL;
  }
  PyObject **items = PySequence_Fast_ITEMS(tensors);
  for (Py_ssize_t i = 0; i < n; i++) {
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
    if (kind == -1 && PyErr_Occurred()) return NULL;
    list[i].kind = (gk_arg_kind)kind;
    if (to_gk_tensor(items[i], &list[i].tensor)) return NULL;
  }
  size_t workspace_bytes = PyLong_AsSize_t(args[3]);
  if (workspace_bytes == (size_t)-1 && PyErr_Occurred()) return NULL;
  void *workspace = NULL;
  if (workspace_bytes && !(workspace = aligned_alloc(64, (workspace_bytes + 63) / 64 * 64)))
    return PyErr_NoMemory();
  gk_status status;
  Py_BEGIN_ALLOW_THREADS
  status = plan_run((const gk_plan *)plan, list, (int)n, workspace, workspace_bytes);
  Py_END_ALLOW_THREADS
  free(workspace);
  return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"init", gkrun_init, METH_VARARGS,
     "init(gk_plan_run address, sizeof(gk_arg), torch.Tensor, {torch dtype: gk_dtype})"},
    {"run", (PyCFunction)(void (*)(void))gkrun_run, METH_FASTCALL,
     "run(plan address, kinds tuple, tensors list, workspace bytes) -> gk_status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gradkern._gkrun", "gk_plan_run for the Python binding without ctypes.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gkrun(void) {
  static const char *names[] = {"data_ptr", "shape", "stride", "dtype", "is_cpu", "device", "type", "index"};
  PyObject **slots[] = {&name_data_ptr, &name_shape, &name_stride, &name_dtype,
                        &name_is_cpu,   &name_device, &name_type,  &name_index};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (!*slots[i] && !(*slots[i] = PyUnicode_InternFromString(names[i]))) return NULL;
  }
  return PyModule_Create(&module);
}
