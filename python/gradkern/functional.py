"""torch.nn.functional-style ops whose forward and backward both run gradkern.

Each function is a torch.autograd.Function over CPU tensors of dtype float32,
float64, float16 or bfloat16 (all of one dtype, except that the norms take a
float32 weight and bias with float16/bfloat16 x, as autocast training keeps
them; gradients come back in each input's own dtype), contiguous or not
(inputs are passed to the library as they are: transposed, sliced and
broadcast views included; outputs are fresh contiguous tensors). Backward is once-differentiable: the gradient
has no graph of its own, so asking for a second derivative (backward or
torch.autograd.grad with create_graph=True through one of these functions)
raises a RuntimeError naming the function.

Every function takes a keyword-only ``backend=None``: None uses the current
default (gradkern.set_backend / gradkern.use_backend, initially 'auto'),
'ref' forces the scalar reference kernel and 'cpu' the threaded one. The
backend chosen at forward time is used for the backward too.
"""
import torch

from ._core import _gkrun, new_like, new_output, once_differentiable, param_dtype, plan_for, resolve_backend, stat_dtype

__all__ = [
    "relu", "gelu", "silu", "sigmoid", "softplus",
    "glu", "reglu", "swiglu", "geglu",
    "rms_norm", "layer_norm",
]


_GATED = ("glu", "reglu", "swiglu", "geglu")
# Activations whose backward takes the output y (the plan option
# from_output), as torch's autograd saves it: dx = dy y (1 - y) for sigmoid,
# dy (y > 0) for relu. x is not kept.
_FROM_OUTPUT = ("relu", "sigmoid")
_X_Y, _DY_X_DX, _DY_Y_DX = ("x", "y"), ("dy", "x", "dx"), ("dy", "y", "dx")


def _backward_options(op, opts):
    """The backward plan's options: the forward's, with from_output=1 for
    relu and sigmoid (their options are otherwise empty)."""
    return (("from_output", 1),) + opts if op in _FROM_OUTPUT else opts


def _plan(op, direction, x, backend, opts):
    return plan_for(op, direction, x.dtype, x.shape, backend, opts)


# ---------------------------------------------------------------- activations

class UnaryFunction(torch.autograd.Function):
    """One input x -> y; backward (dy, saved x) -> dx, or (dy, saved y) -> dx
    for relu and sigmoid (_FROM_OUTPUT). Serves the activations (y = act(x))
    and the split form of the gated ones (x = a | b along dim,
    y = a * act(b), dx = da | db): the plan knows which."""

    @staticmethod
    def forward(ctx, x, op, opts, backend):
        y = _unary_forward(x, op, opts, backend)
        ctx.save_for_backward(y if op in _FROM_OUTPUT else x)
        ctx.gk = (op, opts, backend)
        ctx.gk_name = op
        return y

    @staticmethod
    @once_differentiable()
    def backward(ctx, dy):
        (saved,) = ctx.saved_tensors   # x, or y (same shape and dtype)
        op, opts, backend = ctx.gk
        dx = None
        if ctx.needs_input_grad[0]:
            plan = _plan(op, "backward", saved, backend, _backward_options(op, opts))
            dx = new_like(saved)
            plan.call(_DY_Y_DX if op in _FROM_OUTPUT else _DY_X_DX, [dy, saved, dx])
        return dx, None, None, None


def _unary_forward(x, op, opts, backend):
    """y = op(x) without autograd (nothing to record)."""
    plan = plan_for(op, "forward", x.dtype, x.shape, backend, opts)
    y = new_output(plan, "y", x.dtype, x) if op in _GATED else new_like(x)
    plan.call(_X_Y, [x, y])
    return y


def _unary(x, op, opts, backend):
    if _gkrun is not None and op not in _GATED:   # the whole call in the compiled module
        forward = plan_for(op, "forward", x.dtype, x.shape, backend, opts)
        backward = (plan_for(op, "backward", x.dtype, x.shape, backend, _backward_options(op, opts))
                    if x.requires_grad and torch.is_grad_enabled() else None)
        y = _gkrun.unary(x, forward, forward._handle_value, backward,
                         backward._handle_value if backward is not None else None, op, op in _FROM_OUTPUT)
        if isinstance(y, int):
            forward._raise(y)
        if y is not None:
            return y
    if x.requires_grad and torch.is_grad_enabled():
        return UnaryFunction.apply(x, op, opts, backend)
    return _unary_forward(x, op, opts, backend)


def _activation(op, x, backend, **opts):
    return _unary(x, op, tuple(sorted(opts.items())), resolve_backend(backend))


def relu(x, *, backend=None):
    """max(x, 0) (NaN stays NaN); gradient 1 where x > 0, else 0 (from the
    saved output y: y > 0, as torch's autograd; x is not kept)."""
    return _unary(x, "relu", (), resolve_backend(backend))


def gelu(x, approximate="none", *, backend=None):
    """x * Phi(x); approximate='tanh' for the tanh form (as F.gelu)."""
    return _activation("gelu", x, backend, approximate=approximate)


def silu(x, *, backend=None):
    """x * sigmoid(x)."""
    return _unary(x, "silu", (), resolve_backend(backend))


def sigmoid(x, *, backend=None):
    """1 / (1 + exp(-x)), computed stably. The backward takes the saved
    output y, dx = dy y (1 - y), as torch's autograd (x is not kept; in
    float16/bfloat16 the gradient is that of the rounded y, as torch's)."""
    return _unary(x, "sigmoid", (), resolve_backend(backend))


def softplus(x, beta=1, threshold=20, *, backend=None):
    """log(1 + exp(beta x)) / beta, or x where beta x > threshold (as F.softplus)."""
    return _activation("softplus", x, backend, beta=float(beta), threshold=float(threshold))


# ---------------------------------------------------------------- gated

class GatedTwoTensorFunction(torch.autograd.Function):
    """y = x * act(gate) (same shapes); backward gives dx and dgate."""

    @staticmethod
    def forward(ctx, x, gate, op, opts, backend):
        plan = _plan(op, "forward", x, backend, opts)
        y = new_output(plan, "y", x.dtype, x)
        plan.run({"x": x, "gate": gate, "y": y})
        ctx.save_for_backward(x, gate)
        ctx.gk = (op, opts, backend)
        ctx.gk_name = op
        return y

    @staticmethod
    @once_differentiable()
    def backward(ctx, dy):
        x, gate = ctx.saved_tensors
        op, opts, backend = ctx.gk
        dx = dgate = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            plan = _plan(op, "backward", x, backend, opts)
            dx = new_output(plan, "dx", x.dtype, x)
            dgate = new_output(plan, "dgate", x.dtype, x)
            plan.run({"dy": dy, "x": x, "gate": gate, "dx": dx, "dgate": dgate})
        return (dx if ctx.needs_input_grad[0] else None,
                dgate if ctx.needs_input_grad[1] else None, None, None, None)


def _gated(op, x, dim, gate, backend, **opts):
    if isinstance(dim, torch.Tensor):     # op(x, gate): the two-tensor form
        if gate is not None:
            raise TypeError("gradkern.%s: gate given both positionally and as gate=" % op)
        gate, dim = dim, -1
    backend = resolve_backend(backend)
    if gate is None:
        opts.update(form="split", dim=int(dim))
        return _unary(x, op, tuple(sorted(opts.items())), backend)
    opts.update(form="two_tensor")
    return GatedTwoTensorFunction.apply(x, gate, op, tuple(sorted(opts.items())), backend)


_GATED_DOC = """{name}(x, dim=-1{extra_sig}, *, gate=None, backend=None)

    Split form (gate is None): x is split along `dim` into halves a (first)
    and b (second), y = a * {act}(b); y has x's shape with shape[dim] halved
    (the convention of torch.nn.functional.glu). shape[dim] must be even.

    Two-tensor form: {name}(x, gate) or {name}(x, gate=gate): y = x * {act}(gate),
    x and gate of the same shape; gradients flow to both x and gate.
    {extra_doc}"""


def glu(x, dim=-1, *, gate=None, backend=None):
    return _gated("glu", x, dim, gate, backend)


def reglu(x, dim=-1, *, gate=None, backend=None):
    return _gated("reglu", x, dim, gate, backend)


def swiglu(x, dim=-1, *, gate=None, backend=None):
    return _gated("swiglu", x, dim, gate, backend)


def geglu(x, dim=-1, approximate="none", *, gate=None, backend=None):
    return _gated("geglu", x, dim, gate, backend, approximate=approximate)


glu.__doc__ = _GATED_DOC.format(name="glu", act="sigmoid", extra_sig="", extra_doc="")
reglu.__doc__ = _GATED_DOC.format(name="reglu", act="relu", extra_sig="", extra_doc="")
swiglu.__doc__ = _GATED_DOC.format(name="swiglu", act="silu", extra_sig="", extra_doc="")
geglu.__doc__ = _GATED_DOC.format(
    name="geglu", act="gelu", extra_sig=", approximate='none'",
    extra_doc="approximate='tanh' selects the tanh form of gelu (as F.gelu); in the\n    "
              "two-tensor form pass it by keyword: geglu(x, gate, approximate='tanh').")


# ---------------------------------------------------------------- norms

class NormFunction(torch.autograd.Function):
    """RMSNorm / LayerNorm over the trailing normalized dims.

    Forward saves the kernel's rstd (and mean) and backward hands them back.
    Parameter gradients are computed with accumulate=0 (overwrite)."""

    @staticmethod
    def forward(ctx, x, weight, bias, op, opts, backend):
        plan = _plan(op, "forward", x, backend, opts)
        y = new_output(plan, "y", x.dtype, x)
        sdt = stat_dtype(x.dtype)
        rstd = new_output(plan, "rstd", sdt, x)
        mean = new_output(plan, "mean", sdt, x) if op == "layernorm" else None
        plan.run({"x": x, "weight": weight, "bias": bias, "y": y, "rstd": rstd, "mean": mean})
        ctx.save_for_backward(x, weight, rstd, mean)
        ctx.gk = (op, opts, backend, None if bias is None else bias.dtype)
        ctx.gk_name = "rms_norm" if op == "rmsnorm" else "layer_norm"
        return y

    @staticmethod
    @once_differentiable()
    def backward(ctx, dy):
        x, weight, rstd, mean = ctx.saved_tensors
        op, opts, backend, bias_dtype = ctx.gk
        dx = dweight = dbias = None
        if any(ctx.needs_input_grad[:3]):
            plan = _plan(op, "backward", x, backend, opts)
            dx = new_output(plan, "dx", x.dtype, x)
            if weight is not None:
                dweight = new_output(plan, "dweight", weight.dtype, x)
            if bias_dtype is not None:
                dbias = new_output(plan, "dbias", bias_dtype, x)
            plan.run({"dy": dy, "x": x, "weight": weight, "rstd": rstd, "mean": mean,
                      "dx": dx, "dweight": dweight, "dbias": dbias})
        needs = ctx.needs_input_grad
        return (dx if needs[0] else None, dweight if needs[1] else None,
                dbias if needs[2] else None, None, None, None)


def _normalized_rank(name, x, normalized_shape):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(int(s) for s in normalized_shape)
    k = len(normalized_shape)
    if k > x.dim() or (k and tuple(x.shape[x.dim() - k:]) != normalized_shape):
        raise ValueError("gradkern.%s: normalized_shape %s does not match the trailing dims of x "
                         "with shape %s" % (name, list(normalized_shape), list(x.shape)))
    return k


def rms_norm(x, normalized_shape, weight=None, eps=1e-6, *, backend=None):
    """y = x / sqrt(mean(x^2 over the normalized dims) + eps) * weight.

    normalized_shape: the trailing dims of x to normalize over (int or tuple);
    weight: None or a tensor of shape normalized_shape, of x's dtype or
    float32 with a float16/bfloat16 x (its gradient then is float32)."""
    k = _normalized_rank("rms_norm", x, normalized_shape)
    opts = dict(normalized_rank=k, eps=float(eps), has_weight=int(weight is not None), has_bias=0,
                accumulate=0, param_dtype=param_dtype(x.dtype, weight))
    return NormFunction.apply(x, weight, None, "rmsnorm", tuple(sorted(opts.items())),
                              resolve_backend(backend))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, backend=None):
    """As torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) * weight + bias
    over the trailing dims normalized_shape (biased variance). weight and
    bias: x's dtype, or both float32 with a float16/bfloat16 x."""
    k = _normalized_rank("layer_norm", x, normalized_shape)
    opts = dict(normalized_rank=k, eps=float(eps), has_weight=int(weight is not None),
                has_bias=int(bias is not None), accumulate=0, param_dtype=param_dtype(x.dtype, weight, bias))
    return NormFunction.apply(x, weight, bias, "layernorm", tuple(sorted(opts.items())),
                              resolve_backend(backend))
