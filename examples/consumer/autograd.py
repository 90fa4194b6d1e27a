"""The installed Python package in use: RMSNorm then SwiGLU through gradkern,
forward and backward, checked against the same computation in torch.

    pip install ./python --no-build-isolation && python3 examples/consumer/autograd.py
"""
import torch

import gradkern

torch.manual_seed(0)
x = torch.randn(4, 16, dtype=torch.float64, requires_grad=True)
w = torch.randn(16, dtype=torch.float64, requires_grad=True)

y = gradkern.swiglu(gradkern.rms_norm(x, 16, w, eps=1e-6), dim=-1)   # a | b = h, y = a * silu(b)
y.sum().backward()

xt, wt = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
h = xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + 1e-6) * wt
a, b = h.chunk(2, dim=-1)
yt = a * torch.nn.functional.silu(b)
yt.sum().backward()

for name, got, want in (("y", y, yt), ("x.grad", x.grad, xt.grad), ("w.grad", w.grad, wt.grad)):
    err = (got - want).abs().max().item()
    assert err < 1e-12, "%s differs from torch by %g" % (name, err)
print("gradkern %s from %s: y, x.grad, w.grad match torch" % (gradkern.version(), gradkern.library_path))
