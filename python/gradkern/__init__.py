"""gradkern for PyTorch: libgradkern.so called through the compiled module
gradkern._gkrun where it is built (CMake builds it beside the library when the
Python headers and torch's C++ headers are found; pip install builds it into
the package), else
through ctypes (gradkern.binding() says which; GRADKERN_BINDING=ctypes
forces ctypes).

    import torch, gradkern
    x = torch.randn(4, 16, requires_grad=True)
    w = torch.ones(16, requires_grad=True)
    y = gradkern.swiglu(gradkern.rms_norm(x, 16, w))   # split form: (4, 8)
    y.sum().backward()                                  # backward runs gradkern too

The library is $GRADKERN_LIB (a path to libgradkern.so) if set, else the one
bundled in the package (pip install ./python), else <repository>/build's,
else the one `make install` put in the environment's prefix or on the dynamic
loader's path (_lib.library_candidates). `python3 -m gradkern info` says which.

Ops (named and called like torch.nn.functional; each is an autograd Function
whose forward and backward run gradkern; CPU tensors of float32, float64,
float16 and bfloat16, any strides):
    relu(x), gelu(x, approximate='none'|'tanh'), silu(x), sigmoid(x),
    softplus(x, beta=1, threshold=20),
    glu(x, dim=-1), reglu(x, dim=-1), swiglu(x, dim=-1),
    geglu(x, dim=-1, approximate='none')      split form: a | b = x, y = a * act(b)
    glu(x, gate), ..., geglu(x, gate, approximate=...)  two-tensor: y = x * act(gate)
    rms_norm(x, normalized_shape, weight=None, eps=1e-6),
    layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5),
    linear(x, weight, bias=None), matmul(a, b), softmax(x, dim), log_softmax(x, dim),
    cross_entropy(logits, target, ignore_index=-100, reduction='mean', label_smoothing=0.0),
    linear_cross_entropy(hidden, weight, target, ignore_index=-100, reduction='mean')
                                              (LM head + loss, the logits never stored whole),
    embedding(idx, weight, padding_idx=None),
    rope(x, theta=10000.0, offset=0, layout='bthd'|'bhtd', interleaved=False),
    scaled_dot_product_attention(q, k, v, is_causal=False, scale=None)   (k, v with fewer heads: GQA),
    add(a, b, alpha=1), mul(a, b)                                          (broadcasting),
    causal_conv1d(x, weight, bias=None, activation=None|'silu')            (causal-conv1d's signature),
    selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                   delta_softplus=False, return_last_state=False)      (mamba-ssm's signature).
Every op takes backend=None|'auto'|'ref'|'cpu' (keyword only). relu and
sigmoid keep their output y for the backward (dx from y, as torch's own
autograd does), the other ops their inputs.

Training: gradkern.optim.AdamW and gradkern.optim.SGD (torch.optim.Optimizer
subclasses, f32 state and f32 master weights for f16/bf16 parameters) and
gradkern.clip_grad_norm_(parameters, max_norm), as torch.nn.utils's.

Backward passes are once-differentiable: the gradients have no graph of their
own, so a second derivative (create_graph=True through a gradkern op) raises a
RuntimeError naming the op.

gradkern.patch(model) runs a PyTorch LLaMA-style model's RMSNorm, SwiGLU MLP,
attention (RoPE + causal attention), LM head fused with the cross-entropy
(given labels, the patched model returns a gradkern.CausalLMOutput: .loss,
.logits None, unpacking as the (loss, logits) tuple) and a Mamba model's
mixers through gradkern, in place, parameters and state_dict unchanged
(gradkern.patch). gradkern.nn has the same modules for building new models
(Linear, RMSNorm, LayerNorm, SwiGLUMLP, RoPEAttention, MambaMixer,
CrossEntropyLoss, LinearCrossEntropyLoss), with torch's and Hugging Face's
parameter names.

Threads: gradkern.set_num_threads(n) (default: the number of processors),
on gradkern's own pool; gradkern.share_torch_threads() (or
GRADKERN_THREADS=openmp at import) runs the kernels' parallel sections on
torch's OpenMP threads instead (gradkern.threads_runtime() names the
library): faster in loops of torch and gradkern elementwise ops, slower in
models whose time is in torch's (OpenBLAS) linear layers. Results are the
same bits either way.

gradkern.__version__ and gradkern.version() give the library's version.

Errors from the library raise gradkern.Error (a RuntimeError) with .status,
.status_name and .message (gk_last_error(): names the bad argument).
"""
from . import _lib  # noqa: F401  (the raw ctypes mirror of gradkern.h)
from ._core import (
    Error,
    Plan,
    backends,
    binding,
    clear_plan_cache,
    get_backend,
    get_num_threads,
    get_plan,
    library_path,
    plan_cache_size,
    set_backend,
    set_num_threads,
    share_torch_threads,
    threads_runtime,
    use_backend,
    version,
)
from .functional import (
    gelu,
    geglu,
    glu,
    layer_norm,
    reglu,
    relu,
    rms_norm,
    sigmoid,
    silu,
    softplus,
    swiglu,
)
from .transformer import (
    add,
    cross_entropy,
    embedding,
    linear,
    linear_cross_entropy,
    log_softmax,
    matmul,
    mul,
    rope,
    scaled_dot_product_attention,
    softmax,
)
from .mamba import causal_conv1d, selective_scan
from . import optim
from .optim import clip_grad_norm_
from .patch import CausalLMOutput, patch, unpatch
from . import nn

__version__ = version()  # the loaded library's: include/gradkern.h defines it

_OP_OF = {
    "relu": "relu", "gelu": "gelu", "silu": "silu", "sigmoid": "sigmoid", "softplus": "softplus",
    "glu": "glu", "reglu": "reglu", "swiglu": "swiglu", "geglu": "geglu",
    "rms_norm": "rmsnorm", "rmsnorm": "rmsnorm", "layer_norm": "layernorm", "layernorm": "layernorm",
    "linear": "linear", "matmul": "matmul", "softmax": "softmax", "log_softmax": "log_softmax",
    "cross_entropy": "cross_entropy", "embedding": "embedding", "rope": "rope", "attention": "attention",
    "scaled_dot_product_attention": "attention", "add": "add", "mul": "mul", "conv1d": "conv1d",
    "causal_conv1d": "conv1d", "selective_scan": "selective_scan",
}


def plan_info(op, x, direction="forward", backend=None, dtype=None, **options):
    """What kernel gradkern selects for `op` ('swiglu', 'rms_norm', 'linear',
    ...) on a tensor like x (its dtype and shape; x is the op's main input:
    logits, q, u, the index tensor of embedding with dtype= the weight's):
    a dict with kernel, backend, isa, math, accumulator and deterministic.
    Options as for gradkern.Plan (approximate, beta, threshold, from_output, form, dim,
    normalized_rank, eps, has_weight, has_bias, accumulate; the op's desc
    fields for the transformer and Mamba ops)."""
    if op not in _OP_OF:
        raise ValueError("gradkern.plan_info: unknown op %r" % (op,))
    return get_plan(_OP_OF[op], direction, dtype or x.dtype, tuple(x.shape), backend, **options).info


__all__ = [
    "Error", "Plan", "get_plan", "plan_info", "clear_plan_cache", "plan_cache_size",
    "set_backend", "get_backend", "use_backend", "backends", "set_num_threads", "get_num_threads",
    "share_torch_threads", "threads_runtime",
    "library_path", "version", "binding",
    "relu", "gelu", "silu", "sigmoid", "softplus", "glu", "reglu", "swiglu", "geglu",
    "rms_norm", "layer_norm",
    "linear", "matmul", "softmax", "log_softmax", "cross_entropy", "embedding", "rope",
    "scaled_dot_product_attention", "add", "mul", "causal_conv1d", "selective_scan",
    "linear_cross_entropy", "optim", "clip_grad_norm_", "patch", "unpatch", "CausalLMOutput", "nn",
]
