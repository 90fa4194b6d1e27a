"""ctypes mirror of include/gradkern.h and the loading of libgradkern.so.

Every struct here is laid out field for field like its C counterpart (ctypes
applies the same natural alignment as the C compiler); the enum values are the
header's. Nothing in this module knows about torch.
"""
import ctypes
import os
import sys

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
DTYPE_SAME = -1   # GK_DTYPE_SAME: desc.param_dtype, scan.b_dtype, scan.c_dtype follow desc.dtype
# gk_device_type
DEVICE_CPU, DEVICE_CUDA = 0, 1

# gk_op: name -> value, read from the library by load() (gk_op_name)
OPS = {}
# gk_direction
FORWARD, BACKWARD = 0, 1
DIRECTIONS = {"forward": FORWARD, "backward": BACKWARD}
# gk_backend: "auto" and the registered backends by name, read by load() (gk_backend_get)
BACKENDS = {}
BACKEND_CUDA = 3
# gk_gelu_approx
GELU_APPROX = {"none": 0, "tanh": 1}
# gk_gated_form
GATED_FORMS = {"split": 0, "two_tensor": 1}
# gk_reduction
REDUCTIONS = {"mean": 0, "sum": 1}
# gk_rope_layout, gk_rope_pairing
ROPE_LAYOUTS = {"bthd": 0, "bhtd": 1}
ROPE_PAIRINGS = {"half": 0, "interleaved": 1}
# gk_scan_layout
SCAN_LAYOUTS = {"shared": 0, "batch": 1, "grouped": 2}
# gk_arg_kind: name -> value and back, read from the library by load() (gk_arg_name)
ARGS = {}
ARG_NAMES = {}


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
        ("from_output", ctypes.c_int),
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


def _options(*fields):
    """A ctypes struct for one nested option group of gk_op_desc."""
    return type("_options", (ctypes.Structure,), {"_fields_": list(fields)})


_i, _d, _i64 = ctypes.c_int, ctypes.c_double, ctypes.c_int64
_linear_options = _options(("out_features", _i64), ("has_bias", _i))
_matmul_options = _options(("n", _i64), ("trans_a", _i), ("trans_b", _i), ("shared_b", _i))
_softmax_options = _options(("dim", _i))
_ce_options = _options(("reduction", _i), ("ignore_index", _i64), ("label_smoothing", _d),
                       ("fused_grad", _i), ("grad_scale", _d))
_embedding_options = _options(("num_embeddings", _i64), ("dim", _i64), ("padding_idx", _i64))
_rope_options = _options(("layout", _i), ("pairing", _i), ("theta", _d), ("offset", _i64))
_attn_options = _options(("kv_heads", _i64), ("causal", _i), ("scale", _d))
_binary_options = _options(("b_rank", _i), ("b_shape", _i64 * GK_MAX_RANK), ("alpha", _d))
_conv_options = _options(("width", _i64), ("channel_last", _i), ("has_bias", _i), ("silu", _i),
                         ("has_initial_state", _i), ("has_final_state", _i))
_scan_options = _options(("d_state", _i64), ("b_layout", _i), ("c_layout", _i), ("groups", _i64),
                         ("has_D", _i), ("has_z", _i), ("has_delta_bias", _i), ("delta_softplus", _i),
                         ("has_initial_state", _i), ("has_final_state", _i), ("chunk_size", _i64),
                         ("b_dtype", _i), ("c_dtype", _i))


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
        ("linear", _linear_options),
        ("matmul", _matmul_options),
        ("softmax", _softmax_options),
        ("index_dtype", ctypes.c_int),
        ("ce", _ce_options),
        ("embedding", _embedding_options),
        ("rope", _rope_options),
        ("attn", _attn_options),
        ("binary", _binary_options),
        ("conv", _conv_options),
        ("scan", _scan_options),
        ("param_dtype", ctypes.c_int),
    ]


class gk_plan_info(ctypes.Structure):
    _fields_ = [
        ("kernel", ctypes.c_char_p),
        ("backend", ctypes.c_int),
        ("isa", ctypes.c_char_p),
        ("math", ctypes.c_char_p),
        ("accumulator", ctypes.c_int),
        ("deterministic", ctypes.c_int),
        ("declined", ctypes.c_char_p),
    ]


class gk_backend_info(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("device", ctypes.c_int),
        ("available", ctypes.c_int),
        ("reason", ctypes.c_char_p),
    ]


class gk_adamw_config(ctypes.Structure):
    _fields_ = [("lr", _d), ("beta1", _d), ("beta2", _d), ("eps", _d), ("weight_decay", _d)]


class gk_sgd_config(ctypes.Structure):
    _fields_ = [("lr", _d), ("momentum", _d), ("dampening", _d), ("weight_decay", _d), ("nesterov", _i)]


def library_candidates():
    """Where load() looks for libgradkern.so, in order: $GRADKERN_LIB; the
    library bundled in the package (pip install); the repository's build/
    (running from a checkout with PYTHONPATH=python); the environment's prefix
    (make install PREFIX=$VIRTUAL_ENV). Then load() asks the dynamic loader
    (LD_LIBRARY_PATH, ldconfig's cache: make install into /usr/local)."""
    env = os.environ.get("GRADKERN_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "libgradkern.so"),
            os.path.normpath(os.path.join(here, "..", "..", "build", "libgradkern.so")),
            os.path.join(sys.prefix, "lib", "libgradkern.so")]


class _Dl_info(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _open(path=None):
    """(CDLL, its file): path, else the first of library_candidates() that
    exists, else what the dynamic loader finds for libgradkern.so."""
    if path:
        if not os.path.exists(path):
            raise OSError("gradkern: shared library not found at %r" % path)
        return ctypes.CDLL(path), path
    candidates = library_candidates()
    for candidate in candidates:
        if os.path.exists(candidate):
            return ctypes.CDLL(candidate), candidate
    if os.environ.get("GRADKERN_LIB"):
        raise OSError("gradkern: GRADKERN_LIB=%r does not exist" % candidates[0])
    try:
        lib = ctypes.CDLL("libgradkern.so")
    except OSError:
        raise OSError(
            "gradkern: libgradkern.so not found in %s, nor by the dynamic loader. Install the "
            "package with the library bundled (pip install ./python from the repository), or "
            "install the library (make install; ldconfig), or build it (make) and set "
            "GRADKERN_LIB to its path." % ", ".join(candidates)) from None
    info = _Dl_info()
    ctypes.CDLL(None).dladdr(ctypes.cast(lib.gk_version, ctypes.c_void_p), ctypes.byref(info))
    return lib, info.dli_fname.decode() if info.dli_fname else "libgradkern.so"


def _declare(lib):
    c_int, c_size_t, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    P = ctypes.POINTER
    sigs = {
        "gk_version": (c_char_p, []),
        "gk_status_string": (c_char_p, [c_int]),
        "gk_last_error": (c_char_p, []),
        "gk_dtype_name": (c_char_p, [c_int]),
        "gk_dtype_size": (c_size_t, [c_int]),
        "gk_op_name": (c_char_p, [c_int]),
        "gk_arg_name": (c_char_p, [c_int]),
        "gk_backend_name": (c_char_p, [c_int]),
        "gk_backend_count": (c_int, []),
        "gk_backend_get": (c_int, [c_int, P(gk_backend_info)]),
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
        "gk_set_openmp_runtime": (c_int, [c_char_p]),
        "gk_get_openmp_runtime": (c_char_p, []),
        "gk_struct_size": (c_size_t, [c_char_p]),
        "gk_adamw_config_init": (c_int, [P(gk_adamw_config)]),
        "gk_adamw_step": (c_int, [P(gk_adamw_config), c_int, P(gk_tensor), P(gk_tensor), P(gk_tensor),
                                  P(gk_tensor), P(gk_tensor), ctypes.c_int64]),
        "gk_sgd_config_init": (c_int, [P(gk_sgd_config)]),
        "gk_sgd_step": (c_int, [P(gk_sgd_config), c_int, P(gk_tensor), P(gk_tensor), P(gk_tensor),
                                P(gk_tensor), ctypes.c_int64]),
        "gk_clip_grad_norm": (c_int, [c_int, P(gk_tensor), ctypes.c_double, P(ctypes.c_double)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load(path=None):
    """(the declared library, its path): path, else found as _open() says."""
    lib, path = _open(path)
    lib = _declare(lib)
    for struct in (gk_tensor, gk_arg, gk_op_desc, gk_plan_info, gk_backend_info):
        want = lib.gk_struct_size(struct.__name__.encode())
        if want != ctypes.sizeof(struct):
            raise OSError("gradkern: %s is %d bytes in %s but %d in gradkern/_lib.py: the binding "
                          "does not match the library" % (struct.__name__, want, path, ctypes.sizeof(struct)))
    _read_names(lib)
    return lib, path


def _names(name_of):
    """{name: value} for value = 0, 1, ... until the library answers "?"."""
    names, value = {}, 0
    while True:
        name = name_of(value).decode()
        if name == "?":
            return names
        names[name] = value
        value += 1


def _read_names(lib):
    """The op, argument and backend names, from the library itself."""
    OPS.clear()
    OPS.update(_names(lib.gk_op_name))
    ARGS.clear()
    ARGS.update(_names(lib.gk_arg_name))
    ARG_NAMES.clear()
    ARG_NAMES.update({v: k for k, v in ARGS.items()})
    BACKENDS.clear()
    BACKENDS["auto"] = 0
    info = gk_backend_info()
    for i in range(lib.gk_backend_count()):
        lib.gk_backend_get(i, ctypes.byref(info))
        BACKENDS[info.name.decode()] = info.id
    # GK_BACKEND_CUDA is in the header's enum whether or not it is built; the
    # library answers for it (a build without it refuses with a message).
    BACKENDS.setdefault("cuda", BACKEND_CUDA)
