"""What autograd hands a backward is often not a contiguous dy: y.sum()
gives a scalar expanded to y's shape (every stride 0), a weighting by one
row a row expanded down the rows, a transposed loss a transposed dy. Each gives the
same gradients, bit for bit, as the same dy made contiguous."""
import pytest
import torch

import gradkern

torch.manual_seed(0)
X = torch.randn(96, 1030)        # more elements than one task of the threaded kernels
W = torch.rand(1030) + 0.5
B = torch.randn(1030)
G = torch.randn(96, 1030)

OPS = {
    "silu": (lambda x: gradkern.silu(x), [X]),
    "gelu": (lambda x: gradkern.gelu(x), [X]),
    "softplus": (lambda x: gradkern.softplus(x), [X]),
    "swiglu_split": (lambda x: gradkern.swiglu(x, dim=-1), [X]),
    "swiglu_two": (lambda x, g: gradkern.swiglu(x, gate=g), [X, G]),
    "rms_norm": (lambda x, w: gradkern.rms_norm(x, 1030, w), [X, W]),
    "layer_norm": (lambda x, w, b: gradkern.layer_norm(x, 1030, w, b), [X, W, B]),
    "softmax": (lambda x: gradkern.softmax(x, -1), [X]),
    "mul": (lambda a, b: gradkern.mul(a, b), [X, G]),
}

# dy as autograd makes it from a reduction of y, and the same dy as a
# contiguous tensor.
DYS = {
    "sum": lambda y: y.sum(),
    "scaled_sum": lambda y: y.sum() * 0.75,
    "sum_of_rows_times_a_row": lambda y: (y * torch.arange(y.shape[-1], dtype=y.dtype)).sum(),
    "transposed": None,
}


@pytest.mark.parametrize("dy_kind", sorted(DYS))
@pytest.mark.parametrize("op", sorted(OPS))
def test_dy_layouts_give_the_gradients_of_a_contiguous_dy(op, dy_kind):
    fn, inputs = OPS[op]
    xs = [t.detach().clone().requires_grad_(True) for t in inputs]
    y = fn(*xs)
    if dy_kind == "transposed":
        dy = torch.randn(y.shape[::-1], generator=torch.Generator().manual_seed(3)).t()
    else:
        yy = y.detach().requires_grad_(True)
        (dy,) = torch.autograd.grad(DYS[dy_kind](yy), [yy])   # what autograd hands the op's backward
        if dy_kind == "sum_of_rows_times_a_row":
            dy = dy[:1].expand(dy.shape)     # autograd's is dense here; the same values as one row expanded
        assert all(s == 0 for s in dy.stride()[:-1]), "expected a broadcast dy, strides %s" % (dy.stride(),)
    assert not dy.is_contiguous()
    grads = torch.autograd.grad(y, xs, dy)
    xs2 = [t.detach().clone().requires_grad_(True) for t in inputs]
    grads_dense = torch.autograd.grad(fn(*xs2), xs2, dy.contiguous())
    for i, (g, gd) in enumerate(zip(grads, grads_dense)):
        assert torch.equal(g, gd), "%s, dy %s: gradient %d differs" % (op, dy_kind, i)
