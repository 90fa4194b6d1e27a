/* gradkern._gkrun: gk_plan_run called from Python without ctypes.
 *
 * An optional compiled module of the Python binding (the CPython C API, and
 * torch's C++ headers to read tensors): built with the library by CMake when
 * this Python's headers and torch's C++ headers are found, or by setup.py
 * into the pip-installed package. Without it the binding calls gk_plan_run
 * through ctypes (gradkern/_core.py), which does the same work in Python and
 * costs several microseconds more per call.
 *
 *   init(gk_plan_run address, sizeof(gk_arg) in the library, {torch dtype: gk_dtype},
 *        gk_last_error address, (x, y, dy, dx kinds))
 *   run(plan address, (gk_arg_kind, ...), [tensor, ...], workspace bytes) -> gk_status
 *   unary(x, forward plan, forward plan address, backward plan or None,
 *         backward plan address, op name, from_output) -> y, or a gk_status on
 *         failure, or None where x is not a CPU tensor (the caller's Python
 *         path serves it)
 *
 * unary() is the activations' whole call in C++ (y = op(x) into a fresh
 * tensor; with a backward plan, the autograd node that computes dx from dy
 * and the saved x, or with from_output (relu, sigmoid: a backward plan with
 * act.from_output) the saved output y, as torch's own node for these ops
 * saves it), so that a call costs about what torch's own does: in Python,
 * torch.autograd.Function alone costs more than torch's whole op.
 *
 * The module is not linked against libgradkern: init() hands it the address
 * of gk_plan_run in the library the binding loaded (so both use one copy of
 * the library and its thread-local gk_last_error), and the size of gk_arg
 * there, which must equal the size this module was compiled with.
 *
 * run() builds one gk_arg per tensor on the stack from the at::Tensor behind
 * each torch.Tensor (its data pointer, sizes, strides, dtype and device: what
 * _core.to_gk_tensor reads through Python, read here in C++ without a call
 * into Python), allocates the workspace (64-byte aligned) when the plan needs
 * one, then calls gk_plan_run with the GIL released, as ctypes does. The
 * library checks every argument on each run, so nothing here is cached
 * beyond the dtype table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include <ATen/ATen.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <string>

#include "gradkern.h"

typedef gk_status (*plan_run_fn)(const gk_plan *, const gk_arg *, int, void *, size_t);
typedef const char *(*last_error_fn)(void);

static plan_run_fn plan_run;
static last_error_fn last_error;
static gk_arg_kind kind_x, kind_y, kind_dy, kind_dx;
static int scalar_codes[(int)c10::ScalarType::NumOptions];  /* gk_dtype + 1 by at::ScalarType; 0: none */

/* *g as a view of tensor t (no copy, t's own strides), t of rank <= GK_MAX_RANK:
 * CPU, or CUDA with its index (as _core.to_gk_tensor reports it), else a
 * device the library rejects. */
static void fill_gk_tensor(const at::Tensor &t, gk_tensor *g) {
  g->rank = (int)t.dim();
  auto sizes = t.sizes(), strides = t.strides();
  for (int i = 0; i < g->rank; i++) {
    g->shape[i] = sizes[i];
    g->strides[i] = strides[i];
  }
  g->data = t.data_ptr();
  g->dtype = (gk_dtype)(scalar_codes[(int)t.scalar_type()] - 1); /* -1: the library names it */
  if (t.is_cpu()) {
    g->device = GK_DEVICE_CPU;
    g->device_id = 0;
  } else {
    g->device = t.is_cuda() ? GK_DEVICE_CUDA : (gk_device_type)99;
    g->device_id = t.device().has_index() ? t.device().index() : 0;
  }
}

/* Fill *g as a view of the torch tensor t; -1 with a Python error set if t
 * is not a tensor or has too many dimensions. */
static int to_gk_tensor(PyObject *t, gk_tensor *g) {
  try {
    if (!THPVariable_Check(t)) {
      PyErr_Format(PyExc_TypeError, "gradkern: expected a torch.Tensor, got %s", Py_TYPE(t)->tp_name);
      return -1;
    }
    const at::Tensor &tensor = THPVariable_Unpack(t);
    if (tensor.dim() > GK_MAX_RANK) {
      PyErr_Format(PyExc_ValueError, "gradkern: tensor has rank %lld, more than GK_MAX_RANK = %d",
                   (long long)tensor.dim(), GK_MAX_RANK);
      return -1;
    }
    fill_gk_tensor(tensor, g);
    return 0;
  } catch (const std::exception &e) { /* torch's own errors (a tensor without storage, ...) */
    PyErr_Format(PyExc_RuntimeError, "gradkern: reading a tensor: %s", e.what());
    return -1;
  }
}

static gk_arg arg_of(gk_arg_kind kind, const at::Tensor &t) {
  gk_arg a;
  a.kind = kind;
  fill_gk_tensor(t, &a.tensor);
  return a;
}

/* Whether fn may run: nargs is `want` and init has run (else a Python error). */
static bool callable(const char *fn, Py_ssize_t nargs, Py_ssize_t want) {
  if (nargs != want) {
    PyErr_Format(PyExc_TypeError, "gradkern._gkrun.%s takes %zd arguments (%zd given)", fn, want, nargs);
    return false;
  }
  if (!plan_run) {
    PyErr_Format(PyExc_RuntimeError, "gradkern._gkrun.%s called before init", fn);
    return false;
  }
  return true;
}

/* The backward of unary(): dx = op'(x) dy through the backward plan, which
 * the node keeps alive (a reference to the Python Plan, given back with the
 * GIL when the node goes), from the saved x, or with from_output from the
 * saved y (the node's own output: saved as one, so its version counter
 * catches an in-place change of y as torch's nodes do). Once-differentiable,
 * as the Python functions: under create_graph=True it raises instead of
 * returning a gradient without a graph. */
struct UnaryBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable saved; /* x, or y with from_output */
  bool from_output = false;
  PyObject *plan = nullptr; /* strong reference */
  const gk_plan *handle = nullptr;
  std::string op;

  std::string name() const override { return "gradkern::" + op + "_backward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list &&grads) override {
    if (at::GradMode::is_enabled())
      throw std::runtime_error("gradkern." + op + ": the backward pass is once-differentiable; a second "
                               "derivative (create_graph=True) is not supported");
    const at::Tensor &dy = grads[0];
    if (!dy.defined() || !should_compute_output(0)) return {at::Tensor()};
    at::Tensor v = saved.unpack(shared_from_this());
    at::Tensor dx = at::empty_like(v, at::MemoryFormat::Contiguous);
    gk_arg list[3] = {arg_of(kind_dy, dy), arg_of(from_output ? kind_y : kind_x, v), arg_of(kind_dx, dx)};
    gk_status status = plan_run(handle, list, 3, NULL, 0);
    if (status != GK_SUCCESS) throw std::runtime_error("gradkern." + op + " backward: " + last_error());
    return {dx};
  }

  void release_variables() override { saved.reset_data(); }

  ~UnaryBackward() override {
    if (plan && Py_IsInitialized()) {
      PyGILState_STATE gil = PyGILState_Ensure();
      Py_DECREF(plan);
      PyGILState_Release(gil);
    }
  }
};

static PyObject *gkrun_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (!callable("unary", nargs, 7)) return NULL;
  try {
    if (!THPVariable_Check(args[0])) Py_RETURN_NONE;
    const at::Tensor &x = THPVariable_Unpack(args[0]);
    if (!x.is_cpu() || x.dim() > GK_MAX_RANK) Py_RETURN_NONE;
    const gk_plan *forward = (const gk_plan *)PyLong_AsVoidPtr(args[2]);
    if (!forward && PyErr_Occurred()) return NULL;
    PyObject *backward = args[3];
    const gk_plan *backward_handle = NULL;
    if (backward != Py_None && !(backward_handle = (const gk_plan *)PyLong_AsVoidPtr(args[4]))) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "gradkern._gkrun.unary: the backward plan is NULL");
      return NULL;
    }
    Py_ssize_t op_len;
    const char *op = PyUnicode_AsUTF8AndSize(args[5], &op_len);
    if (!op) return NULL;
    int from_output = PyObject_IsTrue(args[6]);
    if (from_output < 0) return NULL;
    at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
    gk_arg list[2] = {arg_of(kind_x, x), arg_of(kind_y, y)};
    gk_status status;
    Py_BEGIN_ALLOW_THREADS
    status = plan_run(forward, list, 2, NULL, 0);
    Py_END_ALLOW_THREADS
    if (status != GK_SUCCESS) return PyLong_FromLong(status);
    if (backward_handle && x.requires_grad() && at::GradMode::is_enabled()) {
      auto node = std::shared_ptr<UnaryBackward>(new UnaryBackward(), torch::autograd::deleteNode);
      node->set_next_edges(torch::autograd::collect_next_edges(x));
      Py_INCREF(backward);
      node->plan = backward;
      node->handle = backward_handle;
      node->op.assign(op, (size_t)op_len);
      node->from_output = from_output;
      torch::autograd::set_history(y, node);
      /* y is saved as the node's output once it has its history (as torch's
       * generated code saves a result) */
      node->saved = from_output ? torch::autograd::SavedVariable(y, true) : torch::autograd::SavedVariable(x, false);
    }
    return THPVariable_Wrap(y);
  } catch (const std::exception &e) {
    PyErr_Format(PyExc_RuntimeError, "gradkern: %s", e.what());
    return NULL;
  }
}

static PyObject *gkrun_init(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *address, *codes, *error_address;
  Py_ssize_t arg_size;
  int kx, ky, kdy, kdx;
  if (!PyArg_ParseTuple(args, "OnO!O(iiii):init", &address, &arg_size, &PyDict_Type, &codes, &error_address,
                        &kx, &ky, &kdy, &kdx))
    return NULL;
  last_error_fn error_fn = (last_error_fn)PyLong_AsVoidPtr(error_address);
  if (!error_fn) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "gradkern._gkrun.init: gk_last_error is NULL");
    return NULL;
  }
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
  /* gk_dtype + 1 by the at::ScalarType of each torch dtype in the table */
  int table[(int)c10::ScalarType::NumOptions] = {0};
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(codes, &pos, &key, &value)) {
    if (!THPDtype_Check(key)) {
      PyErr_SetString(PyExc_TypeError, "gradkern._gkrun.init: the dtype table's keys must be torch dtypes");
      return NULL;
    }
    long code = PyLong_AsLong(value);
    if (code == -1 && PyErr_Occurred()) return NULL;
    table[(int)((THPDtype *)key)->scalar_type] = (int)code + 1;
  }
  last_error = error_fn;
  kind_x = (gk_arg_kind)kx;
  kind_y = (gk_arg_kind)ky;
  kind_dy = (gk_arg_kind)kdy;
  kind_dx = (gk_arg_kind)kdx;
  plan_run = (plan_run_fn)fn;
  for (int i = 0; i < (int)c10::ScalarType::NumOptions; i++) scalar_codes[i] = table[i];
  Py_RETURN_NONE;
}

static PyObject *gkrun_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (!callable("run", nargs, 4)) return NULL;
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
     "init(gk_plan_run address, sizeof(gk_arg), {torch dtype: gk_dtype}, gk_last_error address, "
     "(x, y, dy, dx kinds))"},
    {"run", (PyCFunction)(void (*)(void))gkrun_run, METH_FASTCALL,
     "run(plan address, kinds tuple, tensors list, workspace bytes) -> gk_status"},
    {"unary", (PyCFunction)(void (*)(void))gkrun_unary, METH_FASTCALL,
     "unary(x, forward plan, its address, backward plan or None, its address, op name, from_output) -> y, "
     "a gk_status or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gradkern._gkrun", "gk_plan_run for the Python binding without ctypes.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gkrun(void) { return PyModule_Create(&module); }
