"""The binding's contract beyond parity: its version is the library's and the
header's; backward passes are once-differentiable, so a second derivative
raises naming the op (rather than handing back a gradient with no graph);
softmax and log_softmax take a 0-d tensor as torch does."""
import os
import re

import pytest
import torch

import gradkern

_REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_version_is_the_headers():
    with open(os.path.join(_REPO, "include", "gradkern.h")) as f:
        header = f.read()
    parts = [re.search(r"^#define GK_VERSION_%s (\d+)$" % p, header, re.M).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert gradkern.version() == ".".join(parts)
    assert gradkern.__version__ == gradkern.version()


def _t(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(len(shape)), requires_grad=True)


# (name in the message, function of its inputs, inputs)
SECOND_DERIVATIVE_CASES = [
    ("silu", lambda x: gradkern.silu(x), lambda: [_t(3, 4)]),
    ("swiglu", lambda x: gradkern.swiglu(x), lambda: [_t(3, 8)]),
    ("rms_norm", lambda x, w: gradkern.rms_norm(x, 4, w), lambda: [_t(3, 4), _t(4)]),
    ("linear", lambda x, w: gradkern.linear(x, w), lambda: [_t(3, 4), _t(5, 4)]),
    ("matmul", lambda a, b: gradkern.matmul(a, b), lambda: [_t(3, 4), _t(4, 2)]),
    ("softmax", lambda x: gradkern.softmax(x, -1), lambda: [_t(3, 4)]),
    ("mul", lambda a, b: gradkern.mul(a, b), lambda: [_t(3, 4), _t(4)]),
    ("scaled_dot_product_attention", lambda q, k, v: gradkern.scaled_dot_product_attention(q, k, v),
     lambda: [_t(1, 2, 3, 4), _t(1, 2, 3, 4), _t(1, 2, 3, 4)]),
    ("causal_conv1d", lambda x, w: gradkern.causal_conv1d(x, w), lambda: [_t(1, 3, 5), _t(3, 2)]),
]


@pytest.mark.parametrize("name,fn,make", SECOND_DERIVATIVE_CASES, ids=[c[0] for c in SECOND_DERIVATIVE_CASES])
def test_second_derivative_raises_naming_the_op(name, fn, make):
    inputs = make()
    # First derivatives work.
    grads = torch.autograd.grad(fn(*inputs).square().sum(), inputs)
    assert all(g is not None and g.shape == x.shape for g, x in zip(grads, inputs))
    # A graph of the gradient (for a second derivative) is refused by name.
    with pytest.raises(RuntimeError, match=r"gradkern\.%s: .*once-differentiable.*second derivative" % name):
        torch.autograd.grad(fn(*inputs).square().sum(), inputs, create_graph=True)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_of_a_0d_tensor(op, dim, dtype):
    x = torch.tensor(1.75, dtype=dtype, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    y = getattr(gradkern, op)(x, dim)
    yr = getattr(torch.nn.functional, op)(xr, dim)
    assert y.shape == yr.shape == torch.Size([])
    assert torch.equal(y.detach(), yr.detach())
    y.backward(torch.tensor(0.5, dtype=dtype))
    yr.backward(torch.tensor(0.5, dtype=dtype))
    assert torch.equal(x.grad, xr.grad)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_a_0d_tensor_refuses_other_dims(op):
    with pytest.raises(IndexError, match=r"gradkern\.%s: dim 1 .*0-d" % op):
        getattr(gradkern, op)(torch.tensor(1.0), 1)
    with pytest.raises(IndexError):  # torch agrees
        getattr(torch.nn.functional, op)(torch.tensor(1.0), 1)
