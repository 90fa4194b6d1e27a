"""ctypes mirror of include/gradkern.h and the loading of libgradkern.so.

Every struct here is laid out field for field like its C counterpart (ctypes
applies the same natural alignment as the C compiler); the enum values are the
header's. Nothing in this module knows about torch.
"""
import ctypes
import os

GK_MAX_RANK = 8

# gk_status
SUCCESS = 0
STATUS_NAMES = {
    0: "GK_SUCCESS", 1: "GK_ERR_NULL_POINTER", 2: "GK_ERR_INVALID_VALUE",
    3: "GK_ERR_BAD_RANK", 4: "GK_ERR_BAD_SHAPE", 5: "GK_ERR_BAD_DTYPE",
    6: "GK_ERR_BAD_STRIDES", 7: "GK_ERR_BAD_ALIGNMENT", 8: "GK_ERR_ALIASING",
    9: "GK_ERR_MISSING_ARGUMENT", 10: "GK_ERR_UNEXPECTED_ARGUMENT",
    11: "GK_ERR_WORKSPACE_TOO_SMALL", 12: "GK_ERR_UNSUPPORTED",
    13: "GK_ERR_BAD_DEVICE", 14: "GK_ERR_OUT_OF_MEMORY", 15: "GK_ERR_INTERNAL",
    16: "GK_ERR_NON_FINITE",
}
for _value, _name in STATUS_NAMES.items():
    globals()[_name[3:]] = _value  # ERR_BAD_SHAPE = 4, ...

# gk_dtype
F32, F64, F16, BF16, I32, I64 = 0, 1, 2, 3, 4, 5
# gk_device_type
DEVICE_CPU, DEVICE_CUDA = 0, 1

# gk_op
OPS = {
    "relu": 0, "gelu": 1, "silu": 2, "sigmoid": 3, "softplus": 4,
    "glu": 5, "reglu": 6, "swiglu": 7, "geglu": 8,
    "rmsnorm": 9, "layernorm": 10,
}
# gk_direction
FORWARD, BACKWARD = 0, 1
DIRECTIONS = {"forward": FORWARD, "backward": BACKWARD}
# gk_backend
BACKENDS = {"auto": 0, "ref": 1, "cpu": 2, "cuda": 3}
# gk_gelu_approx
GELU_APPROX = {"none": 0, "tanh": 1}
# gk_gated_form
GATED_FORMS = {"split": 0, "two_tensor": 1}
# gk_arg_kind
ARGS = {
    "x": 0, "y": 1, "dy": 2, "dx": 3, "gate": 4, "dgate": 5, "weight": 6,
    "dweight": 7, "bias": 8, "dbias": 9, "mean": 10, "rstd": 11,
}
ARG_NAMES = {v: k for k, v in ARGS.items()}


class gk_tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("device", ctypes.c_int),
        ("device_id", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("shape", ctypes.c_int64 * GK_MAX_RANK),
        ("strides", ctypes.c_int64 * GK_MAX_RANK),
    ]


class gk_arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("tensor", gk_tensor)]


class _act_options(ctypes.Structure):
    _fields_ = [
        ("approximate", ctypes.c_int),
        ("beta", ctypes.c_double),
        ("threshold", ctypes.c_double),
    ]


class _gated_options(ctypes.Structure):
    _fields_ = [("form", ctypes.c_int), ("dim", ctypes.c_int)]


class _norm_options(ctypes.Structure):
    _fields_ = [
        ("normalized_rank", ctypes.c_int),
        ("eps", ctypes.c_double),
        ("has_weight", ctypes.c_int),
        ("has_bias", ctypes.c_int),
    ]


class _conv_options(ctypes.Structure):
    _fields_ = [
        ("width", ctypes.c_int64),
        ("channel_last", ctypes.c_int),
        ("has_bias", ctypes.c_int),
        ("silu", ctypes.c_int),
        ("has_initial_state", ctypes.c_int),
        ("has_final_state", ctypes.c_int),
    ]


class _scan_options(ctypes.Structure):
    _fields_ = [
        ("d_state", ctypes.c_int64),
        ("b_layout", ctypes.c_int),
        ("c_layout", ctypes.c_int),
        ("groups", ctypes.c_int64),
        ("has_D", ctypes.c_int),
        ("has_z", ctypes.c_int),
        ("has_delta_bias", ctypes.c_int),
        ("delta_softplus", ctypes.c_int),
        ("has_initial_state", ctypes.c_int),
        ("has_final_state", ctypes.c_int),
        ("chunk_size", ctypes.c_int64),
    ]


class gk_op_desc(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int),
        ("direction", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("backend", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("shape", ctypes.c_int64 * GK_MAX_RANK),
        ("accumulate", ctypes.c_int),
        ("act", _act_options),
        ("gated", _gated_options),
        ("norm", _norm_options),
        ("conv", _conv_options),
        ("scan", _scan_options),
    ]


class gk_plan_info(ctypes.Structure):
    _fields_ = [
        ("kernel", ctypes.c_char_p),
        ("backend", ctypes.c_int),
        ("isa", ctypes.c_char_p),
        ("math", ctypes.c_char_p),
        ("accumulator", ctypes.c_int),
        ("deterministic", ctypes.c_int),
    ]


def default_library_path():
    """$GRADKERN_LIB, else <repo>/build/libgradkern.so (../../build from here)."""
    env = os.environ.get("GRADKERN_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "build", "libgradkern.so"))


def _declare(lib):
    c_int, c_size_t, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    P = ctypes.POINTER
    sigs = {
        "gk_status_string": (c_char_p, [c_int]),
        "gk_last_error": (c_char_p, []),
        "gk_dtype_name": (c_char_p, [c_int]),
        "gk_dtype_size": (c_size_t, [c_int]),
        "gk_op_name": (c_char_p, [c_int]),
        "gk_arg_name": (c_char_p, [c_int]),
        "gk_backend_name": (c_char_p, [c_int]),
        "gk_tensor_init": (c_int, [P(gk_tensor), c_void_p, c_int, c_int, P(ctypes.c_int64)]),
        "gk_tensor_numel": (ctypes.c_int64, [P(gk_tensor)]),
        "gk_op_desc_init": (c_int, [P(gk_op_desc), c_int, c_int, c_int, c_int, P(ctypes.c_int64)]),
        "gk_plan_create": (c_int, [P(gk_op_desc), P(c_void_p)]),
        "gk_plan_destroy": (None, [c_void_p]),
        "gk_plan_get_info": (c_int, [c_void_p, P(gk_plan_info)]),
        "gk_plan_get_desc": (c_int, [c_void_p, P(gk_op_desc)]),
        "gk_plan_workspace_size": (c_int, [c_void_p, P(c_size_t)]),
        "gk_plan_arg_shape": (c_int, [c_void_p, c_int, P(c_int), P(ctypes.c_int64)]),
        "gk_plan_check": (c_int, [c_void_p, P(gk_arg), c_int]),
        "gk_plan_run": (c_int, [c_void_p, P(gk_arg), c_int, c_void_p, c_size_t]),
        "gk_set_num_threads": (c_int, [c_int]),
        "gk_get_num_threads": (c_int, []),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load(path=None):
    path = path or default_library_path()
    if not os.path.exists(path):
        raise OSError(
            "gradkern: shared library not found at %r. Build it with "
            "`cmake -S . -B build && cmake --build build` in the repository, or set "
            "GRADKERN_LIB to the path of libgradkern.so." % path)
    return _declare(ctypes.CDLL(path)), path
