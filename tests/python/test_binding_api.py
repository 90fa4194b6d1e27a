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


# ---------------------------------------------------------------- how gk_plan_run is called

def test_the_binding_is_the_one_asked_for():
    """GRADKERN_BINDING=extension|ctypes (as make test sets it for each run)
    is what the binding uses: a compiled module that failed to load cannot
    pass for it."""
    asked = os.environ.get("GRADKERN_BINDING")
    if asked is None:
        pytest.fail("GRADKERN_BINDING is unset: the test run must say which binding it tests "
                    "(make test sets it)")
    assert gradkern.binding() == asked


def _silu_plan():
    return gradkern.Plan("silu", "forward", torch.float32, (2, 3))


def test_plan_run_refuses_what_is_not_a_tensor():
    x = torch.zeros(2, 3)
    with pytest.raises(TypeError, match="expected a torch.Tensor, got list"):
        _silu_plan().run({"x": x, "y": [0.0] * 6})


def test_plan_run_refuses_a_rank_over_the_maximum():
    with pytest.raises(ValueError, match="tensor has rank 9, more than GK_MAX_RANK = 8"):
        _silu_plan().run({"x": torch.zeros([1] * 9), "y": torch.zeros(2, 3)})


@pytest.mark.parametrize("dtype,message", [(torch.int16, "dtype"), (torch.float64, "dtype")])
def test_plan_run_reports_a_bad_dtype_through_the_library(dtype, message):
    with pytest.raises(gradkern.Error, match=message) as e:
        _silu_plan().run({"x": torch.zeros(2, 3, dtype=dtype), "y": torch.zeros(2, 3)})
    assert e.value.status_name == "GK_ERR_BAD_DTYPE" and "x" in e.value.message


def test_plan_run_passes_strides_and_offsets_as_they_are():
    base = torch.randn(4, 7, dtype=torch.float32)
    x = base[1:3, 2:7:2]                       # offset data pointer, strides (7, 2)
    y = torch.full((3, 2), float("nan")).t()   # transposed output
    gradkern.Plan("silu", "forward", torch.float32, (2, 3)).run({"x": x, "y": y})
    torch.testing.assert_close(y, torch.nn.functional.silu(x))


def test_plan_run_with_a_workspace():
    plan = gradkern.Plan("cross_entropy", "forward", torch.float32, (5, 11))
    logits, target = torch.randn(5, 11), torch.randint(0, 11, (5,))
    loss = torch.empty(())
    plan.run({"logits": logits, "target": target, "loss": loss})
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, target))


def test_a_destroyed_plan_raises():
    plan = _silu_plan()
    plan.destroy()
    with pytest.raises(ValueError, match="this plan was destroyed"):
        plan.run({"x": torch.zeros(2, 3), "y": torch.zeros(2, 3)})


# ---------------------------------------------------------------- activations in the compiled module
# With the compiled module an activation's whole call (output, forward run,
# autograd node) is in C++; through ctypes it is a torch.autograd.Function.
# Both must behave the same.

ACTIVATIONS = ["relu", "gelu", "silu", "sigmoid", "softplus"]


@pytest.mark.parametrize("op", ACTIVATIONS)
def test_activation_node_is_the_bindings(op):
    x = _t(3, 5)
    node = getattr(gradkern, op)(x).grad_fn
    if gradkern.binding() == "extension":
        assert node.name() == "gradkern::%s_backward" % op
    else:
        assert type(node).__name__ == "UnaryFunctionBackward"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ACTIVATIONS)
def test_activation_gradient_of_views_and_broadcast_dy(op, dtype):
    """A transposed, offset x and a stride-0 dy (y.sum().backward()), in
    every dtype: the same values as a contiguous copy through the same op."""
    base = torch.randn(6, 9, dtype=torch.float32).to(dtype)
    x = base[1:5, 2:8].t().detach().requires_grad_(True)       # offset, strides (1, 9)
    xc = x.detach().contiguous().requires_grad_(True)
    fn = getattr(gradkern, op)
    y, yc = fn(x), fn(xc)
    assert y.is_contiguous() and y.shape == x.shape and y.dtype == dtype
    assert torch.equal(y, yc)
    (g,) = torch.autograd.grad(y.sum(), x)
    (gc,) = torch.autograd.grad(yc, xc, torch.ones_like(yc))
    assert g.dtype == dtype and torch.equal(g, gc)


def test_activation_backward_keeps_its_plan():
    """The node holds its backward plan: dropping every cached plan between
    forward and backward changes nothing."""
    x = _t(4, 6)
    y = gradkern.gelu(x)
    gradkern.clear_plan_cache()
    (g,) = torch.autograd.grad(y.sum(), x)
    (want,) = torch.autograd.grad(torch.nn.functional.gelu(x).sum(), x)
    torch.testing.assert_close(g, want)


def test_activation_input_modified_in_place_is_caught():
    x = _t(4, 6)
    h = x * 1
    y = gradkern.silu(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# relu and sigmoid keep their output y for the backward (a from_output
# plan, dx from dy and y), as torch's own nodes for them do, not x.

@pytest.mark.parametrize("op", ["relu", "sigmoid"])
def test_activation_output_modified_in_place_is_caught(op):
    x = _t(4, 6)
    y = getattr(gradkern, op)(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    z = getattr(torch, op)(x)   # torch catches the same
    z.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("op", ["relu", "sigmoid"])
def test_activation_from_output_does_not_keep_x(op):
    """x changed in place after the forward does not change the gradient
    (x is not saved; torch's nodes for relu and sigmoid do the same)."""
    x = _t(4, 6)
    h = x * 1
    y = getattr(gradkern, op)(h)
    want = getattr(torch, op)(h.detach())
    h.add_(5)
    (g,) = torch.autograd.grad(y, x, torch.full_like(y, 0.5))
    dy = torch.full_like(want, 0.5)
    torch.testing.assert_close(g, dy * want * (1 - want) if op == "sigmoid" else dy * (want > 0), rtol=1e-12, atol=0)


def test_from_output_plan_takes_y():
    y = torch.sigmoid(torch.randn(3, 5, dtype=torch.float64))
    dy, dx = torch.randn(3, 5, dtype=torch.float64), torch.empty(3, 5, dtype=torch.float64)
    plan = gradkern.get_plan("sigmoid", "backward", torch.float64, (3, 5), from_output=1)
    assert plan.desc.act.from_output == 1 and plan.arg_shape("x") is None and plan.arg_shape("y") == (3, 5)
    plan.run({"dy": dy, "y": y, "dx": dx})
    torch.testing.assert_close(dx, dy * y * (1 - y), rtol=1e-15, atol=0)
    with pytest.raises(gradkern.Error, match="argument 'x'.*is not taken") as e:
        plan.run({"dy": dy, "x": y, "dx": dx})
    assert e.value.status_name == "GK_ERR_UNEXPECTED_ARGUMENT"
    with pytest.raises(gradkern.Error, match="gelu: desc.act.from_output = 1") as e:
        gradkern.Plan("gelu", "backward", torch.float32, (3, 5), from_output=1)
    assert e.value.status_name == "GK_ERR_INVALID_VALUE"


def test_activation_without_grad_records_nothing():
    x = _t(4, 6)
    with torch.no_grad():
        y = gradkern.sigmoid(x)
    assert y.grad_fn is None and not y.requires_grad
    assert gradkern.sigmoid(x.detach()).grad_fn is None


def test_activation_bad_input_names_it():
    with pytest.raises(TypeError, match="x has dtype torch.int32"):
        gradkern.relu(torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(gradkern.Error, match="device") as e:    # not a CPU tensor: the library names it
        gradkern.relu(torch.zeros(2, 3, device="meta"))
    assert e.value.status_name == "GK_ERR_BAD_DEVICE"
