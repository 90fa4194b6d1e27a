"""Helpers shared by test_transformer.py and test_mamba.py.

The tolerances, the comparison (compare), the input layouts (make) and the
seeding come from test_parity.py unchanged: one TOL dict for every test.
Added here: ops with several outputs, integer inputs and scalar outputs
(check_fn), term sizes of bilinear ops by running them on absolute values
(abs_scales), an allowance for results below the normal range
(subnormal_floor), and a record of the largest errors per op for the
summary at the end of the run (OPSTATS, printed by conftest.py).
"""
import torch

from test_parity import (  # noqa: F401  (re-exported for the test modules)
    BACKENDS,
    BF16,
    DTYPES,
    F16,
    F32,
    F64,
    GRADCHECK,
    TOL,
    _bits,
    _rand,
    _seed,
    compare,
    dtype_name,
    leaf,
    make,
)

# op -> {(dtype name, oracle): stats as in conftest's errstats}
OPSTATS = {}


def make_t(shape, dtype, gen, values="normal"):
    """A (..., R, C) tensor stored as (..., C, R): a .transpose(-1, -2) view,
    as torch gives for w.t() or k.transpose(-2, -1)."""
    shape = tuple(shape)
    base = _rand(shape[:-2] + (shape[-1], shape[-2]), gen, values).to(dtype)
    return base.transpose(-1, -2)


def make_any(shape, layout, dtype, gen, values="normal"):
    """make() plus layout 'T' (last two dims swapped in memory)."""
    if layout == "T":
        return make_t(shape, dtype, gen, values)
    return make(shape, layout, dtype, gen, values)


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _diff(inputs):
    return [isinstance(t, torch.Tensor) and t.requires_grad for t in inputs]


def subnormal_floor(dtype, steps):
    """A scale whose atol allows `steps` steps of the subnormal grid of the
    dtype the op computes in (f32 for f32, f16, bf16; f64 for f64): an f32
    result far below the normal range (softmax of logits 100 apart) is a
    product of already rounded subnormal values, each off by up to half a
    step, so the one step compare() allows is not enough there."""
    step = 2.0 ** -1074 if dtype == F64 else 2.0 ** -149
    return steps * step / TOL[dtype]["atol"]


def run_ref(ref_fn, inputs, dys, compute):
    """Outputs and gradients of ref_fn(*inputs) computed in
    dtype `compute` (floating inputs converted, contiguous; integer inputs
    as they are), for the gradients dys of the outputs."""
    diff = _diff(inputs)
    xs = []
    for t, d in zip(inputs, diff):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            c = t.detach().to(compute).contiguous()
            xs.append(c.requires_grad_() if d else c)
        else:
            xs.append(t)
    outs = _tuple(ref_fn(*xs))
    wrt = [c for c, d in zip(xs, diff) if d]
    grads = torch.autograd.grad(outs, wrt, [g.to(compute).contiguous() for g in dys], allow_unused=True) \
        if wrt else ()
    grads = [torch.zeros_like(c) if g is None else g for c, g in zip(wrt, grads)]
    return [o.detach() for o in outs] + list(grads)


def abs_scales(fn, inputs64, dys64):
    """Term sizes of an op that is a sum of products of its inputs (linear,
    matmul, embedding, add, mul, ...): the op and its gradients computed on
    |inputs| and |dy|, where no term can cancel another."""
    diff = _diff(inputs64)
    xs = [t.detach().abs().requires_grad_(d) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
          for t, d in zip(inputs64, diff)]
    outs = _tuple(fn(*xs))
    wrt = [x for x, d in zip(xs, diff) if d]
    grads = torch.autograd.grad(outs, wrt, [d.abs() for d in dys64], allow_unused=True) if wrt else ()
    grads = [torch.zeros_like(x) if g is None else g for x, g in zip(wrt, grads)]
    return [o.detach() for o in outs] + list(grads)


def check_fn(errstats, op, where, gk_fn, ref_fn, inputs, in_names, out_names, dtype, gen, scales,
             dy_layout="contig", dys=None):
    """Outputs and every gradient of gk_fn(*inputs) against ref_fn.

    inputs: tensors (those requiring grad are differentiated), integer
    tensors or None, named in_names. ref_fn(*inputs) is the torch
    reference. Where the op's backward consumes a tensor its forward saved in
    the op's dtype (softmax's y, attention's output), the reference's
    backward should read the one gradkern returned (the same rounded inputs
    for the backward; the forward output is compared on its own). dys: the gradients of the outputs (else
    random, laid out as dy_layout). scales(inputs64, dys64) gives the term
    sizes for atol, one per output and gradient.

    Oracles, as test_parity.check_op: f64 and f32 against torch in the same
    dtype, f32 also against torch in f64; f16/bf16 against torch in f32 on
    the same rounded inputs with the results rounded once ("torch f32,
    rounded") and against torch in f64. Every comparison uses TOL of the
    result's dtype (a float32 state output of a bf16 op: float32's)."""
    outs = _tuple(gk_fn(*inputs))
    assert len(outs) == len(out_names)
    diff = _diff(inputs)
    wrt = [t for t, d in zip(inputs, diff) if d]
    if dys is None:
        dys = [make(tuple(o.shape), dy_layout, o.dtype, gen) for o in outs]
    grads = torch.autograd.grad(outs, wrt, dys) if wrt else ()
    for t, g in zip(wrt, grads):
        assert g.dtype == t.dtype and g.shape == t.shape
    got = list(outs) + list(grads)
    names = list(out_names) + ["d" + n for n, d in zip(in_names, diff) if d]
    x64 = [t.detach().double().requires_grad_(d) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
           for t, d in zip(inputs, diff)]
    scale = scales(x64, [d.double() for d in dys])
    assert len(scale) == len(got), "%d scales for %d results" % (len(scale), len(got))
    oracles = []
    if dtype in (F64, F32):
        oracles.append(("torch", run_ref(ref_fn, inputs, dys, dtype)))
    else:
        ref = run_ref(ref_fn, inputs, dys, F32)
        oracles.append(("torch f32, rounded", [r.to(g.dtype) for r, g in zip(ref, got)]))
    if dtype != F64:
        oracles.append(("f64 exact", run_ref(ref_fn, inputs, dys, F64)))
    for oracle, ref in oracles:
        for name, g, r, sc in zip(names, got, ref, scale):
            tdt = g.dtype
            compare(OPSTATS.setdefault(op, {}), where, name, g, r, sc, tdt, oracle, check=False)
            compare(errstats, where, name, g, r, sc, tdt, oracle)

