"""Plans, tensors and errors: the thin layer between torch and libgradkern."""
import collections
import contextlib
import ctypes
import functools
import importlib.machinery
import importlib.util
import os
import threading
import warnings
import weakref
from threading import get_ident

import torch

from . import _lib

lib, library_path = _lib.load()


class Error(RuntimeError):
    """A gradkern call returned a non-zero gk_status.

    Attributes: ``status`` (the int gk_status), ``status_name``
    ("GK_ERR_BAD_SHAPE", ...) and ``message`` (gk_last_error(): names the
    argument and the values that were wrong).
    """

    def __init__(self, status, message, call=""):
        self.status = int(status)
        self.status_name = _lib.STATUS_NAMES.get(self.status, "GK_STATUS_%d" % self.status)
        self.message = message
        self.call = call
        text = "%s failed with %s (%s)" % (call or "gradkern", self.status_name,
                                         _str(lib.gk_status_string(self.status)))
        if message:
            text += ": " + message
        super().__init__(text)


def _str(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def version():
    """The library's version string, "MAJOR.MINOR.PATCH" (gk_version())."""
    return _str(lib.gk_version())


def backends():
    """The registered backends, in the order 'auto' tries them: a list of
    dicts with name, id, device, available and reason (why not, or "")."""
    out, info = [], _lib.gk_backend_info()
    for i in range(lib.gk_backend_count()):
        check(lib.gk_backend_get(i, ctypes.byref(info)), "gk_backend_get")
        out.append({"name": _str(info.name), "id": info.id, "device": info.device,
                    "available": bool(info.available), "reason": _str(info.reason)})
    return out


def once_differentiable(name=None):
    """Decorator for the backward of a gradkern autograd Function.

    The kernels compute the gradient without recording a graph of it, so the
    gradient cannot be differentiated again. Under create_graph=True (grad
    mode is on while backward runs) the backward raises a RuntimeError naming
    the op (`name`, or ctx.gk_name set by the forward) instead of returning a
    gradient without a graph; otherwise it runs as is (grad mode is off)."""
    def wrap(backward):
        @functools.wraps(backward)
        def run(ctx, *grads):
            if torch.is_grad_enabled():
                raise RuntimeError(
                    "gradkern.%s: the backward pass is once-differentiable; a second derivative "
                    "(create_graph=True) is not supported" % (name or ctx.gk_name))
            return backward(ctx, *grads)
        return run
    return wrap


def check(status, call):
    """Raise Error (with gk_last_error()) unless status is GK_SUCCESS."""
    if status != _lib.SUCCESS:
        # gk_last_error is thread-local; ctypes runs the call on this thread.
        raise Error(status, _str(lib.gk_last_error()), call)


# ---------------------------------------------------------------- dtypes

TORCH_TO_GK = {
    torch.float32: _lib.F32,
    torch.float64: _lib.F64,
    torch.float16: _lib.F16,
    torch.bfloat16: _lib.BF16,
    torch.int32: _lib.I32,
    torch.int64: _lib.I64,
}
GK_TO_TORCH = {v: k for k, v in TORCH_TO_GK.items()}
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def gk_dtype(dtype, what="x"):
    if dtype not in FLOAT_DTYPES:
        raise TypeError("gradkern: %s has dtype %s; supported: float32, float64, float16, bfloat16"
                        % (what, dtype))
    return TORCH_TO_GK[dtype]


def param_dtype(x_dtype, *params):
    """The param_dtype option for an op on x_dtype activations whose
    parameters are `params` (None for one not given): float32 when the first
    one given is float32 and x is float16/bfloat16 (the mixed precision of
    autocast and mamba-ssm), else x's dtype, so that a parameter of any other
    dtype is refused by the library naming that argument."""
    p = next((t.dtype for t in params if t is not None), x_dtype)
    return p if p == torch.float32 and x_dtype in (torch.float16, torch.bfloat16) else x_dtype


def stat_dtype(dtype):
    """dtype of the saved norm statistics (mean, rstd) for an op dtype."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def to_gk_tensor(t, out=None):
    """A gk_tensor viewing torch tensor t in place: no copy, t's own strides."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("gradkern: expected a torch.Tensor, got %s" % type(t).__name__)
    if t.dim() > _lib.GK_MAX_RANK:
        raise ValueError("gradkern: tensor has rank %d, more than GK_MAX_RANK = %d"
                         % (t.dim(), _lib.GK_MAX_RANK))
    g = out if out is not None else _lib.gk_tensor()
    g.data = t.data_ptr() or None
    g.dtype = TORCH_TO_GK.get(t.dtype, -1)   # -1: the library names the bad dtype
    if t.device.type == "cpu":
        g.device, g.device_id = _lib.DEVICE_CPU, 0
    else:                                    # let the library reject it by name
        g.device = _lib.DEVICE_CUDA if t.device.type == "cuda" else 99
        g.device_id = t.device.index or 0
    r = t.dim()
    g.rank = r
    if r:
        g.shape[:r] = tuple(t.shape)
        g.strides[:r] = t.stride()
    return g


# ---------------------------------------------------------------- the compiled gk_plan_run caller

# argument kind names -> their gk_arg_kind values, for the compiled module
_KIND_CODES = {}


def _load_extension():
    """gradkern._gkrun, the compiled gk_plan_run caller, initialised for the
    loaded library; None where it is not built, does not load (a warning
    says why) or GRADKERN_BINDING=ctypes.
    It is looked for in the package (pip install) and beside the library
    (CMake builds it into the build directory)."""
    choice = os.environ.get("GRADKERN_BINDING", "")
    if choice not in ("", "ctypes", "extension"):
        raise ImportError("gradkern: GRADKERN_BINDING=%r must be 'ctypes' or 'extension'" % choice)
    if choice == "ctypes":
        return None
    folders = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(library_path))]
    paths = [os.path.join(d, "_gkrun" + suffix) for d in folders for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        if choice == "extension":
            raise ImportError("gradkern: GRADKERN_BINDING=extension but gradkern._gkrun is built in none of %s"
                              % ", ".join(folders))
        return None
    try:
        spec = importlib.util.spec_from_file_location("gradkern._gkrun", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.init(ctypes.cast(lib.gk_plan_run, ctypes.c_void_p).value, ctypes.sizeof(_lib.gk_arg),
                    dict(TORCH_TO_GK), ctypes.cast(lib.gk_last_error, ctypes.c_void_p).value,
                    tuple(_lib.ARGS[k] for k in ("x", "y", "dy", "dx")))
    except ImportError as e:       # built for another Python or another gradkern.h
        if choice == "extension":
            raise
        warnings.warn("gradkern: %s does not load (%s); calling the library through ctypes" % (path, e))
        return None
    return module


_gkrun = _load_extension()


def binding():
    """How gk_plan_run is called: "extension" (the compiled module
    gradkern._gkrun) or "ctypes" (where it is not built, or
    GRADKERN_BINDING=ctypes)."""
    return "ctypes" if _gkrun is None else "extension"


# ---------------------------------------------------------------- backend

_default_backend = "auto"


def set_backend(name):
    """Backend every later call uses by default: 'auto' (fastest), 'ref'
    (the scalar oracle) or 'cpu' (threaded)."""
    global _default_backend
    _backend_code(name)
    _default_backend = name


def get_backend():
    return _default_backend


@contextlib.contextmanager
def use_backend(name):
    """with gradkern.use_backend('ref'): ...  (restores the previous default)."""
    old = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(old)


def _backend_code(name):
    if name not in _lib.BACKENDS:
        raise ValueError("gradkern: backend %r is not one of %s" % (name, sorted(_lib.BACKENDS)))
    return _lib.BACKENDS[name]


def resolve_backend(name):
    if name is None:
        return _default_backend       # checked when it was set
    _backend_code(name)
    return name


# ---------------------------------------------------------------- threads

def set_num_threads(n):
    """Threads used by the CPU kernels (results are bit-identical for any n)."""
    check(lib.gk_set_num_threads(int(n)), "gk_set_num_threads")


def get_num_threads():
    return int(lib.gk_get_num_threads())


def _torch_openmp_library():
    """The OpenMP runtime PyTorch's CPU ops run on, as loaded in this process
    (a path), or None when torch's parallel backend is not OpenMP."""
    if "ATen parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if "/libgomp" in line}
    except OSError:
        return None
    paths = sorted(p for p in paths if os.path.basename(p).startswith("libgomp"))
    return paths[0] if paths else None


def share_torch_threads(share=True):
    """Run the CPU kernels' parallel sections on PyTorch's OpenMP threads
    (share=True; at import with GRADKERN_THREADS=openmp) or on gradkern's own
    pool (share=False, the default). After each parallel region OpenMP keeps
    its threads spinning for a while: in a loop of torch ops (OpenMP) and
    gradkern ops, gradkern's own threads share the cores with those spinning
    threads, where on one team the two take turns. But torch's matrix
    products run on OpenBLAS's own threads, which then meet OpenMP threads
    spinning after gradkern's sections: a model whose time is in its linear
    layers trains slower shared (README, Speed). Results are the same bits
    either way. Returns the OpenMP library used, or None (the pool; also
    where torch does not run on OpenMP)."""
    path = _torch_openmp_library() if share else None
    check(lib.gk_set_openmp_runtime(path.encode() if path else None), "gk_set_openmp_runtime")
    return path


def threads_runtime():
    """Where the CPU kernels' parallel sections run: the OpenMP library
    shared with torch (a path), or None for gradkern's own pool."""
    r = lib.gk_get_openmp_runtime()
    return r.decode() if r else None


if os.environ.get("GRADKERN_THREADS", "") == "openmp":
    try:
        share_torch_threads()
    except Error as e:
        warnings.warn("gradkern: GRADKERN_THREADS=openmp: kernels keep gradkern's own threads: %s" % e)


# ---------------------------------------------------------------- plans

# The ops after the norms keep their options in one nested struct of
# gk_op_desc each; an option of theirs is a field name of that struct.
_OP_GROUP = {
    "linear": "linear", "matmul": "matmul", "softmax": "softmax", "log_softmax": "softmax",
    "cross_entropy": "ce", "embedding": "embedding", "rope": "rope", "attention": "attn",
    "add": "binary", "mul": "binary", "conv1d": "conv", "selective_scan": "scan",
}
# options given by name instead of by enum value
_ENUM_OPTIONS = {
    ("ce", "reduction"): _lib.REDUCTIONS,
    ("rope", "layout"): _lib.ROPE_LAYOUTS,
    ("rope", "pairing"): _lib.ROPE_PAIRINGS,
    ("scan", "b_layout"): _lib.SCAN_LAYOUTS,
    ("scan", "c_layout"): _lib.SCAN_LAYOUTS,
}


# dtype options: a torch floating dtype or a gk_dtype value (DTYPE_SAME: desc.dtype)
_DTYPE_OPTIONS = {("scan", "b_dtype"), ("scan", "c_dtype")}


def _dtype_option(key, value):
    return gk_dtype(value, key) if isinstance(value, torch.dtype) else int(value)


def _set_group_option(desc, op, group, key, value):
    """desc.accumulate, desc.index_dtype (a torch dtype or a gk_dtype),
    desc.param_dtype or desc.<group>.<key>; b_shape (add, mul) is a tuple and
    sets b_rank too."""
    if key == "accumulate":
        desc.accumulate = int(value)
        return
    if key == "index_dtype":
        desc.index_dtype = TORCH_TO_GK.get(value, -1) if isinstance(value, torch.dtype) else int(value)
        return
    if key == "param_dtype":
        desc.param_dtype = _dtype_option(key, value)
        return
    sub = getattr(desc, group)
    fields = dict(sub._fields_)
    if key not in fields:
        raise TypeError("gradkern: unknown plan option %r for op %r (options: accumulate, index_dtype, %s)"
                        % (key, op, ", ".join(fields)))
    if key == "b_shape":
        value = tuple(int(v) for v in value)
        if len(value) > _lib.GK_MAX_RANK:
            raise ValueError("gradkern: %s: b has rank %d, more than GK_MAX_RANK = %d"
                             % (op, len(value), _lib.GK_MAX_RANK))
        sub.b_rank = len(value)
        sub.b_shape[:len(value)] = value
        return
    if (group, key) in _DTYPE_OPTIONS:
        setattr(sub, key, _dtype_option(key, value))
        return
    names = _ENUM_OPTIONS.get((group, key))
    if names is not None and isinstance(value, str):
        if value not in names:
            raise ValueError("gradkern: %s=%r must be one of %s" % (key, value, sorted(names)))
        value = names[value]
    setattr(sub, key, float(value) if fields[key] is ctypes.c_double else int(value))


class Plan:
    """One gk_plan: an op, direction, dtype, shape and options, with its kernel.

    Options (keyword arguments), for the activations, gated ops and norms:
    approximate ('none'|'tanh'), beta, threshold, from_output (0|1: a relu
    or sigmoid backward that takes y instead of x), form ('split'|'two_tensor'),
    dim, normalized_rank, eps, has_weight, has_bias, accumulate, param_dtype
    (a torch dtype or gk_dtype value, any op: the norm weight and bias,
    linear's bias, the scan's A, D and delta_bias may be float32 with 16-bit
    activations). For linear,
    matmul, softmax, log_softmax, cross_entropy, embedding, rope, attention,
    add, mul, conv1d and selective_scan: accumulate, index_dtype (torch.int32
    or torch.int64) and the fields of the op's struct in gk_op_desc by name
    (Plan("linear", "forward", torch.float32, (8, 16), out_features=4,
    has_bias=0); reduction 'mean'|'sum', layout 'bthd'|'bhtd', pairing
    'half'|'interleaved', b_layout/c_layout 'shared'|'batch'|'grouped' by
    name; b_dtype/c_dtype as param_dtype; b_shape a tuple). The C plan is
    destroyed when this object is collected (and at interpreter exit at the
    latest).
    """

    def __init__(self, op, direction, dtype, shape, backend="auto", **options):
        desc = _lib.gk_op_desc()
        shape = tuple(int(s) for s in shape)
        # (a rank over GK_MAX_RANK is passed on: the library names it)
        shape_arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        if op not in _lib.OPS:
            raise ValueError("gradkern: unknown op %r (one of %s)" % (op, sorted(_lib.OPS)))
        if direction not in _lib.DIRECTIONS:
            raise ValueError("gradkern: direction %r is not 'forward' or 'backward'" % (direction,))
        gdtype = gk_dtype(dtype) if isinstance(dtype, torch.dtype) else int(dtype)
        check(lib.gk_op_desc_init(ctypes.byref(desc), _lib.OPS[op], _lib.DIRECTIONS[direction],
                                  gdtype, len(shape), shape_arr), "gk_op_desc_init")
        desc.backend = _backend_code(backend)
        group = _OP_GROUP.get(op)
        for key, value in options.items():
            if group is not None:      # linear .. selective_scan: desc.<group>.<key>
                _set_group_option(desc, op, group, key, value)
            elif key == "approximate":
                if value not in _lib.GELU_APPROX:
                    raise ValueError("gradkern: approximate=%r must be 'none' or 'tanh'" % (value,))
                desc.act.approximate = _lib.GELU_APPROX[value]
            elif key in ("beta", "threshold"):
                setattr(desc.act, key, float(value))
            elif key == "from_output":
                desc.act.from_output = int(value)
            elif key == "form":
                desc.gated.form = _lib.GATED_FORMS[value]
            elif key == "dim":
                desc.gated.dim = int(value)
            elif key == "eps":
                desc.norm.eps = float(value)
            elif key in ("normalized_rank", "has_weight", "has_bias"):
                setattr(desc.norm, key, int(value))
            elif key == "accumulate":
                desc.accumulate = int(value)
            elif key == "param_dtype":
                desc.param_dtype = _dtype_option(key, value)
            else:
                raise TypeError("gradkern: unknown plan option %r" % key)
        handle = ctypes.c_void_p()
        check(lib.gk_plan_create(ctypes.byref(desc), ctypes.byref(handle)), "gk_plan_create")
        self._handle = handle
        self._finalizer = weakref.finalize(self, lib.gk_plan_destroy, handle)
        self.op, self.direction, self.dtype, self.shape = op, direction, dtype, shape
        size = ctypes.c_size_t()
        check(lib.gk_plan_workspace_size(handle, ctypes.byref(size)), "gk_plan_workspace_size")
        self.workspace_size = int(size.value)
        self._arg_shapes = {}
        # layout key -> (int64 view of a gk_arg array (which keeps the array
        # alive), the data pointers' indices in it, its address, its length)
        self._bound = {}
        self._handle_value = handle.value

    def destroy(self):
        """Destroy the C plan now (later calls on this Plan raise)."""
        self._handle_value = None
        self._finalizer()

    @property
    def handle(self):
        if not self._finalizer.alive:
            raise ValueError("gradkern: this plan was destroyed")
        return self._handle

    @property
    def info(self):
        """dict: kernel, backend, isa, math, accumulator, deterministic, declined
        (the kernels tried first that declined the description, with reasons)."""
        i = _lib.gk_plan_info()
        check(lib.gk_plan_get_info(self.handle, ctypes.byref(i)), "gk_plan_get_info")
        return {
            "kernel": _str(i.kernel),
            "backend": _str(lib.gk_backend_name(i.backend)),
            "isa": _str(i.isa),
            "math": _str(i.math),
            "accumulator": _str(lib.gk_dtype_name(i.accumulator)),
            "deterministic": bool(i.deterministic),
            "declined": _str(i.declined),
        }

    @property
    def desc(self):
        """The gk_op_desc as the plan normalised it (a ctypes struct copy)."""
        d = _lib.gk_op_desc()
        check(lib.gk_plan_get_desc(self.handle, ctypes.byref(d)), "gk_plan_get_desc")
        return d

    def arg_shape(self, kind):
        """Shape the plan expects for argument kind ('y', 'rstd', ...), None if unused."""
        if kind not in self._arg_shapes:
            rank = ctypes.c_int()
            shape = (ctypes.c_int64 * _lib.GK_MAX_RANK)()
            check(lib.gk_plan_arg_shape(self.handle, _lib.ARGS[kind], ctypes.byref(rank), shape),
                  "gk_plan_arg_shape")
            self._arg_shapes[kind] = None if rank.value < 0 else tuple(shape[:rank.value])
        return self._arg_shapes[kind]

    @staticmethod
    def _args(tensors):
        items = [(k, t) for k, t in tensors.items() if t is not None]
        arr = (_lib.gk_arg * max(1, len(items)))()
        for i, (kind, t) in enumerate(items):
            arr[i].kind = _lib.ARGS[kind]
            to_gk_tensor(t, arr[i].tensor)
        return arr, len(items)

    def check(self, tensors):
        """gk_plan_check on a dict {kind: tensor}; raises Error."""
        arr, n = self._args(tensors)
        check(lib.gk_plan_check(self.handle, arr, n), "gk_plan_check")

    def run(self, tensors):
        """gk_plan_run on a dict {kind: tensor} (None entries are left out)."""
        items = [(k, t) for k, t in tensors.items() if t is not None]
        self.call(tuple([k for k, _ in items]), [t for _, t in items])

    def _call_extension(self, kinds, ts):
        """gk_plan_run through the compiled module gradkern._gkrun: it reads
        the tensors' pointers, shapes, strides, dtypes and devices in C and
        allocates the workspace there."""
        codes = _KIND_CODES.get(kinds)
        if codes is None:
            codes = _KIND_CODES.setdefault(kinds, tuple([_lib.ARGS[k] for k in kinds]))
        status = _gkrun.run(self._handle_value, codes, ts, self.workspace_size)
        if status != _lib.SUCCESS:
            self._raise(status)

    def _raise(self, status):
        if self._handle_value is None:
            raise ValueError("gradkern: this plan was destroyed")
        check(status, "gk_plan_run")

    def _call_ctypes(self, kinds, ts):
        """gk_plan_run through ctypes. The gk_arg array for one layout of the
        arguments (their kinds, shapes, strides, dtypes and devices, on this
        thread) is built once and kept with the plan; a later call with that
        layout only writes the data pointers into it. The workspace is a
        fresh torch uint8 buffer, 64-byte aligned."""
        try:
            key = (get_ident(), kinds, tuple([(t.shape, t.stride(), t.dtype, t.device) for t in ts]))
        except AttributeError:                 # not a tensor: to_gk_tensor names it
            key = None
        bound = self._bound.get(key) if key is not None else None
        if bound is None:
            bound = self._bind(key, dict(zip(kinds, ts)))
        words, data_words, addr, n = bound
        for w, t in zip(data_words, ts):
            words[w] = t.data_ptr()
        if self.workspace_size:
            ws = torch.empty(self.workspace_size + 64, dtype=torch.uint8)
            base = ws.data_ptr()
            status = _plan_run(self._handle_value, addr, n, base + (-base) % 64, self.workspace_size)
            del ws  # kept alive through the call above
        else:
            status = _plan_run(self._handle_value, addr, n, None, 0)
        if status != _lib.SUCCESS:
            self._raise(status)

    # call(kinds, ts): run() with the argument kinds as a tuple and their
    # tensors as a list in the same order (no None). The library checks
    # every argument on each run.
    call = _call_ctypes if _gkrun is None else _call_extension

    def _bind(self, key, tensors):
        """The gk_arg array for this layout, as kept under `key` in _bound."""
        arr, n = self._args(tensors)
        words = (ctypes.c_int64 * (ctypes.sizeof(arr) // 8)).from_buffer(arr)
        data_words = [(i * ctypes.sizeof(_lib.gk_arg) + _ARG_DATA_OFFSET) // 8 for i in range(n)]
        bound = (words, data_words, ctypes.addressof(arr), n)
        if key is not None:
            if len(self._bound) >= _BOUND_CAPACITY:
                self._bound.clear()
            self._bound[key] = bound
        return bound


# gk_plan_run on addresses: the plan handle, the gk_arg array and the
# workspace as ints (None for NULL).
_plan_run = lib["gk_plan_run"]
_plan_run.restype = ctypes.c_int
_plan_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_ARG_DATA_OFFSET = _lib.gk_arg.tensor.offset + _lib.gk_tensor.data.offset
assert _ARG_DATA_OFFSET % 8 == 0 and ctypes.sizeof(_lib.gk_arg) % 8 == 0
# argument layouts kept per plan (past this many, the plan starts again)
_BOUND_CAPACITY = 64

_CACHE_CAPACITY = 512
_cache = collections.OrderedDict()
_cache_lock = threading.Lock()


def get_plan(op, direction, dtype, shape, backend=None, **options):
    """A cached Plan for this description (least recently used ones are
    dropped, and so destroyed, past a fixed number of entries)."""
    return plan_for(op, direction, dtype, tuple(shape), resolve_backend(backend), tuple(sorted(options.items())))


def plan_for(op, direction, dtype, shape, backend, options):
    """get_plan for callers that hold the description in its key's form:
    shape a tuple (or torch.Size), backend resolved, options a sorted tuple
    of (name, value) pairs. A hit is one dict lookup."""
    key = (op, direction, dtype, shape, backend, options)
    plan = _cache.get(key)
    if plan is not None:
        try:
            _cache.move_to_end(key)
        except KeyError:       # dropped by another thread meanwhile: still a valid plan
            pass
        return plan
    plan = Plan(op, direction, dtype, shape, backend, **dict(options))
    with _cache_lock:
        plan = _cache.setdefault(key, plan)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_CAPACITY:
            _cache.popitem(last=False)
    return plan


def clear_plan_cache():
    """Drop every cached plan (each is destroyed once nothing uses it)."""
    with _cache_lock:
        _cache.clear()


def plan_cache_size():
    return len(_cache)


def new_output(plan, kind, dtype, like):
    """A fresh contiguous output for argument `kind` of plan."""
    return torch.empty(plan.arg_shape(kind), dtype=dtype, device=like.device)


def new_like(x):
    """A fresh contiguous tensor of x's shape and dtype (an output the shape of
    the op's input: cheaper than new_output)."""
    return torch.empty_like(x, memory_format=torch.contiguous_format)
