"""gradkern's PyTorch binding against torch itself.

- parity: every op x dtype (f64, f32, bf16, f16) x backend (cpu, ref): the
  forward output and every gradient, on shapes with size-1 dims, odd sizes,
  transposed / step-sliced / broadcast (stride 0) inputs and gradients, and
  large |x| (+-1e4, +-80) where a naive exp overflows;
- the norms with an f32 weight and bias on bf16 / f16 x (as under autocast),
  each gradient in its input's dtype;
- torch.autograd.gradcheck (central differences, f64) of every Function;
- loss.backward() end to end through a small model;
- bit-identical results for 1, 2 and 3 threads;
- errors: bad calls raise gradkern.Error naming the argument;
- the ctypes structs agree with the C library's own defaults.

Run: GRADKERN_LIB=build/libgradkern.so PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/python
"""
import ctypes
import gc
import math
import zlib

import pytest
import torch
import torch.nn.functional as F

import gradkern
from gradkern import _lib
from gradkern._core import lib as clib

F64, F32, BF16, F16 = torch.float64, torch.float32, torch.bfloat16, torch.float16
DTYPES = [F64, F32, BF16, F16]
BACKENDS = ["cpu", "ref"]

# ---------------------------------------------------------------- tolerances
# The one place tolerances live. An element passes when
#     |gradkern - reference| <= rtol * |reference| + atol * scale
# where `scale` is the size of the terms the element is computed from (for
# an activation y = act(x) it is |x|; for a norm's dx it is rstd times the
# sizes of the three terms of the formula; see the *_scales functions). So
# atol only matters where a result is much smaller than its terms
# (cancellation: gelu(-5), LayerNorm over a single element, dx of a norm):
# there every implementation, torch's included, is only accurate to
# eps * scale.
# f16/bf16: gradkern loads, computes in f32 and rounds once. rtol is about
# one ulp: bf16 keeps 8 significant bits (ulp/|x| <= 2^-7 = 7.8e-3), f16 11
# (ulp/|x| <= 2^-10 = 9.8e-4).
TOL = {
    F64: dict(rtol=1e-10, atol=1e-12),
    F32: dict(rtol=1e-5, atol=1e-6),
    BF16: dict(rtol=1e-2, atol=1e-4),
    F16: dict(rtol=1e-3, atol=1e-5),
}
# gradcheck (central differences in f64): as asked of the C tests, relative 1e-6.
GRADCHECK = dict(eps=1e-6, atol=1e-8, rtol=1e-6)


def dtype_name(dt):
    return str(dt).replace("torch.", "")


SIGNIFICANT_BITS = {F64: 53, F32: 24, BF16: 8, F16: 11}


def _stats(errstats, dtype, oracle):
    return errstats.setdefault((dtype_name(dtype), oracle), dict(ratio=0.0, rel=0.0, ulp=0.0, where="", n=0))


def compare(errstats, where, name, got, ref, scale, dtype, oracle, check=True):
    """Assert got ~ ref within TOL[dtype] (check=False: only record).

    Besides TOL, one step of the dtype's smallest subnormal is always allowed
    (f16: 6e-8), since a correctly rounded result can be that far from the
    exact value. Recorded: the largest error / allowed, and on the
    well-conditioned elements (|ref| >= scale / 10, normal range) the largest
    relative error and the largest error in ulps of the dtype."""
    assert got.shape == ref.shape, "%s: shape %s, torch %s" % (name, tuple(got.shape), tuple(ref.shape))
    tol = TOL[dtype]
    fi = torch.finfo(dtype)
    g, r = got.detach().double(), ref.detach().double()
    scale = scale.double().expand(r.shape)
    same = (g == r) | (torch.isnan(g) & torch.isnan(r))   # equal infs count as exact
    diff = torch.where(same, torch.zeros_like(g), (g - r).abs())
    allowed = tol["rtol"] * r.abs() + tol["atol"] * scale + fi.tiny * fi.eps
    ratio = torch.where(diff > 0, diff / allowed, torch.zeros_like(diff))
    max_ratio = ratio.max().item() if ratio.numel() else 0.0
    good = (r.abs() >= scale / 10) & (r.abs() >= fi.tiny) & torch.isfinite(r)
    if good.any():
        rel = (diff[good] / r[good].abs()).max().item()
        ulp = torch.ldexp(torch.ones(()), torch.frexp(r[good])[1] - SIGNIFICANT_BITS[dtype])
        ulps = (diff[good] / ulp).max().item()
    else:
        rel = ulps = 0.0

    s = _stats(errstats, dtype, oracle)
    s["n"] += 1
    s["rel"] = max(s["rel"], rel)
    s["ulp"] = max(s["ulp"], ulps)
    if max_ratio >= s["ratio"]:
        s["ratio"], s["where"] = max_ratio, "%s %s" % (where, name)
    if check and (not max_ratio <= 1.0 or math.isnan(max_ratio)):
        i = int(torch.nan_to_num(ratio, nan=float("inf")).flatten().argmax())
        pytest.fail("%s %s vs %s: max error %.3g x tolerance (rtol %g, atol %g); worst element %d: "
                    "gradkern %r, reference %r, scale %.3g" % (
                        where, name, oracle, max_ratio, tol["rtol"], tol["atol"], i,
                        g.flatten()[i].item(), r.flatten()[i].item(), scale.flatten()[i].item()))


# ---------------------------------------------------------------- inputs

def _rand(shape, gen, values="normal"):
    x = torch.randn(shape, generator=gen, dtype=F64)
    if values == "large" and x.numel():
        special = torch.tensor([1e4, -1e4, 80.0, -80.0, 30.0, -30.0, 17.0, -17.0, 0.0], dtype=F64)
        pick = torch.rand(shape, generator=gen) < 0.5
        idx = torch.randint(0, len(special), shape, generator=gen)
        x = torch.where(pick, special[idx], x * 10)
    return x


def make(shape, layout, dtype, gen, values="normal"):
    """A tensor of `shape` (values rounded to dtype) laid out as asked:
    contig; transposed (last two dims swapped in memory, or every dim
    reversed for rank > 2); strided (every dim taken with step 2 from offset 1);
    broadcast (stride 0 in the first non-trivial dim)."""
    shape = tuple(shape)
    r = len(shape)
    if layout == "contig" or r == 0:
        return _rand(shape, gen, values).to(dtype)
    if layout == "transposed":
        perm = list(range(r))[::-1] if r > 2 else [1, 0] if r == 2 else [0]
        base = _rand(tuple(shape[p] for p in perm), gen, values).to(dtype)
        inv = [perm.index(i) for i in range(r)]
        return base.permute(inv)
    if layout == "strided":
        base = _rand(tuple(2 * s + 1 for s in shape), gen, values).to(dtype)
        return base[tuple(slice(1, None, 2) for _ in shape)]
    if layout == "broadcast":
        d = next((i for i, s in enumerate(shape) if s > 1), 0)
        one = list(shape)
        one[d] = 1
        return _rand(tuple(one), gen, values).to(dtype).expand(shape)
    raise ValueError(layout)


def leaf(t):
    """t as an autograd leaf with t's own strides (no copy)."""
    return t.detach().requires_grad_()


# ---------------------------------------------------------------- ops
# Torch references. `native_ok` below marks ops torch runs as one native
# kernel (F.gelu, F.glu, F.layer_norm, ...), for the informational bf16
# comparison; composites (a * act(b), the rms_norm formula) are not compared
# in bf16 since torch would round each intermediate.

def t_rms_norm(x, normalized_shape, weight=None, eps=1e-6):
    # torch 1.13 has no F.rms_norm: the plain formula.
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * weight if weight is not None else y


class _SigmoidFromStoredY(torch.autograd.Function):
    """torch.sigmoid whose backward is torch's own, dx = dy y (1 - y), on the
    output y as a tensor of dtype `storage` holds it (rounded once): gradkern's
    sigmoid, like torch's autograd, keeps y for the backward, so in f16/bf16
    its gradient is that of the rounded y (in f32 and f64 this is
    torch.sigmoid itself, to the last bits)."""

    @staticmethod
    def forward(ctx, x, storage):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y.to(storage).to(y.dtype))
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return dy * y * (1 - y), None


def sigmoid_from_stored_y(storage):
    """The torch reference of gradkern.sigmoid on `storage` tensors, run in
    any dtype: torch.sigmoid itself in `storage` (its node keeps y in that
    dtype), else y rounded to `storage` for the backward."""
    return lambda x: torch.sigmoid(x) if x.dtype == storage else _SigmoidFromStoredY.apply(x, storage)


ACTS = {
    "relu": (lambda x: gradkern.relu(x), lambda x: F.relu(x)),
    "gelu": (lambda x: gradkern.gelu(x), lambda x: F.gelu(x)),
    "gelu_tanh": (lambda x: gradkern.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "silu": (lambda x: gradkern.silu(x), lambda x: F.silu(x)),
    "sigmoid": (lambda x: gradkern.sigmoid(x), lambda x: torch.sigmoid(x)),
    "softplus": (lambda x: gradkern.softplus(x), lambda x: F.softplus(x)),
    "softplus_b2_t5": (lambda x: gradkern.softplus(x, beta=2, threshold=5),
                       lambda x: F.softplus(x, beta=2, threshold=5)),
}
# gate activation of each gated op, as a torch function
GATED = {
    "glu": (gradkern.glu, {}, torch.sigmoid),
    "reglu": (gradkern.reglu, {}, F.relu),
    "swiglu": (gradkern.swiglu, {}, F.silu),
    "geglu": (gradkern.geglu, {}, F.gelu),
    "geglu_tanh": (gradkern.geglu, {"approximate": "tanh"}, lambda b: F.gelu(b, approximate="tanh")),
}


def run_torch(fn, inputs, dy, compute):
    """[y, grads...] of torch fn computed in dtype `compute` on the values of
    inputs and dy. torch gets contiguous copies: torch 1.13 itself computes
    garbage for some strided gradients (F.gelu's backward with dy of shape
    (1, 5, 1, 3) and strides (1, 1, 5, 5) returns values like 0 and 4e35),
    and the oracle must not depend on layout; gradkern gets the strided views."""
    xs = [t.detach().to(compute).contiguous().requires_grad_() if t is not None else None for t in inputs]
    y = fn(*xs)
    grads = torch.autograd.grad(y, [t for t in xs if t is not None], dy.to(compute).contiguous())
    return [y.detach()] + list(grads)


def check_op(errstats, where, gk_fn, torch_fn, inputs, names, dtype, native_ok, gen, dy_layout, scales):
    """Forward and backward of gk_fn against torch on the same inputs.

    Oracles, all asserted with TOL of each result's dtype (dtype, or an
    input's own: a float32 weight's gradient of a bf16 op is float32's):
    - f64, f32: torch in the same dtype ("torch"); for f32 also torch in f64
      on the same inputs ("f64 exact").
    - bf16, f16: torch in f32 on the same (already rounded) inputs, the
      results rounded to the dtype once ("torch f32, rounded"): the op
      computed in that dtype the way gradkern defines f16/bf16 (storage
      types, f32 math, one rounding). Also torch in f64 ("f64 exact").
      torch 1.13's own CPU kernels in these dtypes cannot be the oracle at
      1-2 ulp: in f16 every op here raises "not implemented for 'Half'", and
      in bf16 they round intermediates (sigmoid's backward reuses the bf16
      output, layer_norm keeps bf16 partial results): measured against f64,
      torch bf16 is off by up to ~100% of an element on these cases while
      gradkern is within half an ulp. Where torch has a native bf16 kernel
      (native_ok) gradkern is still compared with it, recorded as
      "torch bf16 (not asserted)" in the summary.
    `scales(inputs64, dy64)` gives the term sizes for atol (see TOL)."""
    y = gk_fn(*inputs)
    assert y.is_contiguous() and y.dtype == dtype
    dy = make(tuple(y.shape), dy_layout, dtype, gen)
    diff = [t for t in inputs if t is not None]
    got = [y] + list(torch.autograd.grad(y, diff, dy))
    for t, g in zip(diff, got[1:]):   # each gradient in its input's dtype (f32 norm weights of bf16 x)
        assert g.dtype == t.dtype and g.shape == t.shape
    outs = ["y"] + ["d" + n for n in names]
    x64 = [t.detach().double() if t is not None else None for t in inputs]
    scale = scales(x64, dy.double())
    exact = run_torch(torch_fn, inputs, dy, F64)
    oracles = []
    if dtype in (F64, F32):
        oracles.append(("torch", run_torch(torch_fn, inputs, dy, dtype), True))
    else:
        oracles.append(("torch f32, rounded", [o.to(g.dtype) for o, g in zip(run_torch(torch_fn, inputs, dy, F32),
                                                                           got)], True))
    if dtype != F64:
        oracles.append(("f64 exact", exact, True))
    if dtype == BF16 and native_ok:
        oracles.append(("torch bf16 (not asserted)", run_torch(torch_fn, inputs, dy, BF16), False))
    for oracle, ref, assert_it in oracles:
        for name, g, r, sc in zip(outs, got, ref, scale):
            compare(errstats, where, name, g, r, sc, g.dtype, oracle, assert_it)


# ---------------------------------------------------------------- term sizes for atol

def act_scales(xs, dy):
    (x,) = xs
    return [x.abs(), dy.abs() * (1 + x.abs())]


def gated_split_scales(dim):
    def scales(xs, dy):
        a, b = xs[0].abs().chunk(2, dim)
        return [a * (1 + b), torch.cat([dy.abs() * (1 + b), dy.abs() * a * (1 + b)], dim)]
    return scales


def gated_two_scales(xs, dy):
    a, b = xs[0].abs(), xs[1].abs()
    return [a * (1 + b), dy.abs() * (1 + b), dy.abs() * a * (1 + b)]


def norm_scales(k, layer, eps):
    """y = xhat w + b, xhat = (x - mean) rstd; dx = rstd (g - mean(g) - xhat mean(g xhat)),
    g = dy w; dw = sum dy xhat; db = sum dy: each output's terms, in magnitude."""
    def scales(xs, dy):
        x, w, b = (xs + [None, None])[:3]
        red = tuple(range(x.dim() - k, x.dim()))
        lead = tuple(range(x.dim() - k))
        mean = x.mean(red, keepdim=True) if layer else torch.zeros(())
        rstd = torch.rsqrt((x - mean).pow(2).mean(red, keepdim=True) + eps)
        xh = (x.abs() + mean.abs()) * rstd
        wm = w.abs() if w is not None else torch.ones(())
        g = dy.abs() * wm
        out = [xh * wm + (b.abs() if b is not None else 0),
               rstd * (g + g.mean(red, keepdim=True) + xh * (g * xh).mean(red, keepdim=True))]
        if w is not None:
            out.append((dy.abs() * xh).sum(lead) if lead else dy.abs() * xh)
        if b is not None:
            out.append(dy.abs().sum(lead) if lead else dy.abs())
        return out
    return scales


def _seed(*key):
    """A generator seeded by the test's key (stable across runs and processes)."""
    g = torch.Generator()
    g.manual_seed(zlib.crc32(repr(key).encode()))
    return g


# ---------------------------------------------------------------- parity: activations

ACT_CASES = {  # name: (shape, layout, values, dy layout)
    "contig": ((7, 13), "contig", "normal", "contig"),
    "size1": ((1, 5, 1, 3), "contig", "normal", "transposed"),
    "rank0": ((), "contig", "normal", "contig"),
    "empty": ((0, 3), "contig", "normal", "contig"),
    "transposed": ((9, 11), "transposed", "normal", "strided"),
    "strided_rank5": ((3, 1, 4, 2, 5), "strided", "normal", "transposed"),
    "broadcast": ((6, 7), "broadcast", "normal", "broadcast"),
    "rank8_transposed": ((2, 1, 3, 1, 2, 2, 1, 3), "transposed", "normal", "strided"),
    "large": ((8, 33), "contig", "large", "contig"),
    "large_strided": ((5, 17), "strided", "large", "transposed"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(ACT_CASES))
@pytest.mark.parametrize("op", list(ACTS))
def test_activation(errstats, op, case, dtype, backend):
    shape, layout, values, dy_layout = ACT_CASES[case]
    gen = _seed(op, case, str(dtype))
    x = leaf(make(shape, layout, dtype, gen, values))
    gk, ref = ACTS[op]
    if op == "sigmoid":   # its gradient is one of the stored y (relu's is the same from x or y)
        ref = sigmoid_from_stored_y(dtype)
    with gradkern.use_backend(backend):
        check_op(errstats, "%s[%s,%s,%s]" % (op, case, dtype_name(dtype), backend), gk, ref, [x], ["x"],
                 dtype, True, gen, dy_layout, act_scales)


# ---------------------------------------------------------------- parity: gated, split form

SPLIT_CASES = {  # name: (shape, dim, layout, values, dy layout)
    "last": ((6, 10), -1, "contig", "normal", "contig"),
    "first": ((8, 5), 0, "contig", "normal", "transposed"),
    "middle": ((3, 6, 5), 1, "contig", "normal", "strided"),
    "middle_neg": ((2, 4, 3, 5), -3, "strided", "normal", "contig"),
    "size1_halves": ((1, 2), -1, "contig", "normal", "contig"),
    "odd_halves": ((7, 1, 26), 2, "contig", "normal", "transposed"),
    "transposed_last": ((7, 10), -1, "transposed", "normal", "contig"),
    "transposed_first": ((4, 9), 0, "transposed", "normal", "strided"),
    "strided_first": ((6, 8), 0, "strided", "normal", "transposed"),
    "broadcast": ((4, 6), 1, "broadcast", "normal", "broadcast"),
    "large": ((5, 12), -1, "contig", "large", "contig"),
    "large_first": ((10, 7), 0, "strided", "large", "contig"),
}


def _large_a_normal(x, dim, gen):
    """In the 'large' cases only the gate half b gets the large values (a
    large a times a large act(b) would overflow f16); a stays at scale 1."""
    a, b = x.chunk(2, dim)
    a = torch.randn(a.shape, generator=gen, dtype=F64).to(x.dtype)
    return torch.cat([a, b], dim)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(SPLIT_CASES))
@pytest.mark.parametrize("op", list(GATED))
def test_gated_split(errstats, op, case, dtype, backend):
    shape, dim, layout, values, dy_layout = SPLIT_CASES[case]
    gen = _seed(op, case, str(dtype), "split")
    x = make(shape, layout, dtype, gen, values)
    if values == "large":
        x = _large_a_normal(x, dim, gen)
        if layout == "strided":      # keep the non-contiguous layout after cat
            base = torch.zeros(tuple(2 * s for s in shape), dtype=dtype)
            base[tuple(slice(None, None, 2) for _ in shape)] = x
            x = base[tuple(slice(None, None, 2) for _ in shape)]
    x = leaf(x)
    fn, kw, act = GATED[op]

    def gk(x):
        return fn(x, dim, **kw)

    def ref(x):
        a, b = x.chunk(2, dim)
        return F.glu(x, dim) if op == "glu" else a * act(b)

    with gradkern.use_backend(backend):
        check_op(errstats, "%s[%s,%s,%s]" % (op, case, dtype_name(dtype), backend), gk, ref, [x], ["x"],
                 dtype, op == "glu", gen, dy_layout, gated_split_scales(dim))


# ---------------------------------------------------------------- parity: gated, two tensors

TWO_CASES = {  # name: (shape, x layout, gate layout, values of gate, dy layout)
    "contig": ((5, 6), "contig", "contig", "normal", "contig"),
    "size1": ((1, 1, 3), "contig", "contig", "normal", "contig"),
    "mixed_layouts": ((7, 9), "transposed", "strided", "normal", "transposed"),
    "broadcast_gate": ((4, 5), "contig", "broadcast", "normal", "strided"),
    "rank4_odd": ((3, 1, 5, 7), "strided", "transposed", "normal", "contig"),
    "large_gate": ((6, 11), "contig", "transposed", "large", "contig"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(TWO_CASES))
@pytest.mark.parametrize("op", list(GATED))
def test_gated_two_tensor(errstats, op, case, dtype, backend):
    shape, xl, gl, gvalues, dy_layout = TWO_CASES[case]
    gen = _seed(op, case, str(dtype), "two")
    x = leaf(make(shape, xl, dtype, gen))
    gate = leaf(make(shape, gl, dtype, gen, gvalues))
    fn, kw, act = GATED[op]
    # positional gate for some ops, gate= for the others: both spellings
    if op in ("glu", "geglu"):
        def gk(x, g):
            return fn(x, g, **kw)
    else:
        def gk(x, g):
            return fn(x, gate=g, **kw)

    def ref(x, g):
        return x * act(g)

    with gradkern.use_backend(backend):
        check_op(errstats, "%s_two[%s,%s,%s]" % (op, case, dtype_name(dtype), backend), gk, ref,
                 [x, gate], ["x", "gate"], dtype, False, gen, dy_layout, gated_two_scales)


# ---------------------------------------------------------------- parity: norms

# name: (shape, normalized dims, x layout, weight, bias, values, dy layout, eps or None)
NORM_CASES = {
    "row": ((5, 16), 1, "contig", True, True, "normal", "contig", None),
    "two_dims": ((3, 4, 6), 2, "contig", True, True, "normal", "transposed", None),
    "C1": ((7, 1), 1, "contig", True, True, "normal", "contig", None),
    "odd_one_row": ((1, 33), 1, "contig", True, True, "normal", "strided", None),
    "rank1": ((17,), 1, "contig", True, True, "normal", "contig", None),
    "transposed": ((9, 13), 1, "transposed", True, True, "normal", "contig", None),
    "transposed_two_dims": ((4, 5, 6), 2, "transposed", True, True, "normal", "strided", None),
    "strided_params": ((6, 2, 7), 1, "strided", "strided", "strided", "normal", "transposed", None),
    "no_weight": ((6, 10), 1, "contig", False, False, "normal", "contig", None),
    "weight_only": ((4, 3, 8), 2, "strided", True, False, "normal", "contig", None),
    "bias_only": ((5, 9), 1, "contig", False, True, "normal", "transposed", None),
    "eps_1e-2": ((6, 5), 1, "contig", True, True, "normal", "contig", 1e-2),
    "large": ((8, 24), 1, "contig", True, True, "large", "contig", None),
    "many_rows": ((130, 3), 1, "transposed", True, True, "normal", "contig", None),
    "broadcast_rows": ((6, 10), 1, "broadcast", True, True, "normal", "broadcast", None),
}


def _norm_inputs(case, dtype, gen, layer, param_dtype=None):
    """x of NORM_CASES[case] in dtype; weight and bias in param_dtype (default dtype)."""
    shape, k, xl, w, b, values, dy_layout, eps = NORM_CASES[case]
    x = make(shape, xl, dtype, gen)
    if values == "large":           # rows at scales 1e3, 80, 1, 1e-2 with a few +-1e4
        scales = torch.tensor([1e3, 80.0, 1.0, 1e-2], dtype=F64)[torch.arange(shape[0]) % 4]
        x = (x.double() * scales.reshape((-1,) + (1,) * (len(shape) - 1))).to(dtype)
        x.view(-1)[::7] = 1e4
    ns = tuple(shape[len(shape) - k:])

    def param(kind):
        if not kind:
            return None
        return leaf(make(ns, "strided" if kind == "strided" else "contig", param_dtype or dtype, gen))

    weight = param(w)
    bias = param(b) if layer else None
    return leaf(x), ns, weight, bias, eps, dy_layout


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", [c for c in NORM_CASES if c != "bias_only"])
def test_rms_norm(errstats, case, dtype, backend):
    gen = _seed("rms", case, str(dtype))
    x, ns, w, _, eps, dy_layout = _norm_inputs(case, dtype, gen, False)
    kw = {} if eps is None else {"eps": eps}
    names = ["x"] + (["weight"] if w is not None else [])
    with gradkern.use_backend(backend):
        check_op(errstats, "rms_norm[%s,%s,%s]" % (case, dtype_name(dtype), backend),
                 lambda x, w: gradkern.rms_norm(x, ns, w, **kw),
                 lambda x, w: t_rms_norm(x, ns, w, **kw),
                 [x, w], names, dtype, False, gen, dy_layout, norm_scales(len(ns), False, kw.get("eps", 1e-6)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(NORM_CASES))
def test_layer_norm(errstats, case, dtype, backend):
    gen = _seed("layer", case, str(dtype))
    x, ns, w, b, eps, dy_layout = _norm_inputs(case, dtype, gen, True)
    kw = {} if eps is None else {"eps": eps}
    names = ["x"] + (["weight"] if w is not None else []) + (["bias"] if b is not None else [])
    with gradkern.use_backend(backend):
        check_op(errstats, "layer_norm[%s,%s,%s]" % (case, dtype_name(dtype), backend),
                 lambda x, w, b: gradkern.layer_norm(x, ns, w, b, **kw),
                 lambda x, w, b: F.layer_norm(x, ns, w, b, **kw),
                 [x, w, b], names, dtype, True, gen, dy_layout, norm_scales(len(ns), True, kw.get("eps", 1e-5)))


MIXED_NORM_CASES = ["row", "two_dims", "transposed", "strided_params", "weight_only", "bias_only", "large",
                    "many_rows"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [BF16, F16], ids=dtype_name)
@pytest.mark.parametrize("op,case", [("layer_norm", c) for c in MIXED_NORM_CASES] +
                         [("rms_norm", c) for c in MIXED_NORM_CASES if c != "bias_only"])  # RMSNorm has no bias
def test_norm_f32_params(errstats, case, op, dtype, backend):
    """Autocast's norms: x in bf16/f16, weight and bias in f32 (values f32
    has, not only 16-bit ones). y and dx in x's dtype, dweight and dbias in
    f32, each compared with TOL of its dtype."""
    layer = op == "layer_norm"
    gen = _seed(op + "_f32_params", case, str(dtype))
    x, ns, w, b, eps, dy_layout = _norm_inputs(case, dtype, gen, layer, F32)
    assert all(p is None or p.dtype == F32 for p in (w, b))
    eps = {} if eps is None else {"eps": eps}
    names = ["x"] + (["weight"] if w is not None else []) + (["bias"] if b is not None else [])
    gk = (lambda x, w, b: gradkern.layer_norm(x, ns, w, b, **eps)) if layer else \
        (lambda x, w, b: gradkern.rms_norm(x, ns, w, **eps))
    ref = (lambda x, w, b: F.layer_norm(x, ns, w, b, **eps)) if layer else \
        (lambda x, w, b: t_rms_norm(x, ns, w, **eps))
    with gradkern.use_backend(backend):
        check_op(errstats, "%s_f32_params[%s,%s,%s]" % (op, case, dtype_name(dtype), backend), gk, ref, [x, w, b],
                 names, dtype, False, gen, dy_layout,
                 norm_scales(len(ns), layer, eps.get("eps", 1e-5 if layer else 1e-6)))


def test_norm_saved_statistics():
    """rstd (and mean) are computed by forward and handed back to backward:
    their dtype is f32 (f64 for f64) and their values are torch's."""
    for dtype in DTYPES:
        x = torch.randn(4, 3, 10, dtype=F64).to(dtype).requires_grad_()
        y = gradkern.layer_norm(x, (10,), None, None)
        node = y.grad_fn
        xs, w, rstd, mean = node.saved_tensors
        want = F64 if dtype == F64 else F32
        assert rstd.dtype == want and mean.dtype == want and rstd.shape == (4, 3) and w is None
        xd = x.detach().double()
        tol = TOL[want]   # the statistics are computed and stored in f32 (f64)
        torch.testing.assert_close(mean.double(), xd.mean(-1), rtol=tol["rtol"],
                                   atol=tol["atol"] * xd.abs().mean().item())
        torch.testing.assert_close(rstd.double(), torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5),
                                   rtol=tol["rtol"], atol=0)


# ---------------------------------------------------------------- needs_input_grad

def test_needs_input_grad_combinations():
    torch.manual_seed(0)
    x0 = torch.randn(5, 8, dtype=F64)
    w0, b0 = torch.randn(8, dtype=F64), torch.randn(8, dtype=F64)
    for rx, rw, rb in [(True, False, False), (False, True, False), (False, False, True), (False, True, True),
                       (True, True, True)]:
        x, w, b = x0.clone().requires_grad_(rx), w0.clone().requires_grad_(rw), b0.clone().requires_grad_(rb)
        gradkern.layer_norm(x, 8, w, b).square().sum().backward()
        xr, wr, br = x0.clone().requires_grad_(rx), w0.clone().requires_grad_(rw), b0.clone().requires_grad_(rb)
        F.layer_norm(xr, (8,), wr, br).square().sum().backward()
        for t, r in [(x, xr), (w, wr), (b, br)]:
            assert (t.grad is None) == (r.grad is None)
            if t.grad is not None:
                torch.testing.assert_close(t.grad, r.grad, **TOL[F64])
    # two-tensor gated: only the gate needs a gradient
    x = torch.randn(3, 4, dtype=F64)
    g = torch.randn(3, 4, dtype=F64, requires_grad=True)
    gradkern.swiglu(x, g).sum().backward()
    gr = g.detach().clone().requires_grad_()
    (x * F.silu(gr)).sum().backward()
    torch.testing.assert_close(g.grad, gr.grad, **TOL[F64])
    # no input needs a gradient: plain forward
    with torch.no_grad():
        assert not gradkern.rms_norm(x, 4).requires_grad


# ---------------------------------------------------------------- gradcheck (finite differences, f64)

def _gc_inputs(shapes, layouts=None):
    gen = _seed("gradcheck", str(shapes))
    layouts = layouts or ["contig"] * len(shapes)
    return [leaf(make(s, l, F64, gen)) for s, l in zip(shapes, layouts)]


GRADCHECK_CASES = {
    "relu": (gradkern.relu, [(4, 5)]),
    "gelu": (gradkern.gelu, [(4, 5)]),
    "gelu_tanh": (lambda x: gradkern.gelu(x, "tanh"), [(4, 5)]),
    "silu": (gradkern.silu, [(4, 5)]),
    "sigmoid": (gradkern.sigmoid, [(4, 5)]),
    "softplus": (lambda x: gradkern.softplus(x, beta=1.5, threshold=3), [(4, 5)]),
    "glu_split_last": (lambda x: gradkern.glu(x, -1), [(3, 6)]),
    "reglu_split_first": (lambda x: gradkern.reglu(x, 0), [(4, 3)]),
    "swiglu_split_middle": (lambda x: gradkern.swiglu(x, 1), [(2, 4, 3)]),
    "geglu_split": (lambda x: gradkern.geglu(x, -1), [(3, 4)]),
    "geglu_tanh_split": (lambda x: gradkern.geglu(x, 0, approximate="tanh"), [(4, 3)]),
    "glu_two": (lambda x, g: gradkern.glu(x, g), [(3, 4), (3, 4)]),
    "reglu_two": (lambda x, g: gradkern.reglu(x, g), [(3, 4), (3, 4)]),
    "swiglu_two": (lambda x, g: gradkern.swiglu(x, g), [(3, 4), (3, 4)]),
    "geglu_two": (lambda x, g: gradkern.geglu(x, g), [(3, 4), (3, 4)]),
    "geglu_tanh_two": (lambda x, g: gradkern.geglu(x, g, approximate="tanh"), [(3, 4), (3, 4)]),
    "rms_norm_w": (lambda x, w: gradkern.rms_norm(x, 6, w), [(4, 6), (6,)]),
    "rms_norm_2d": (lambda x, w: gradkern.rms_norm(x, (2, 3), w), [(3, 2, 3), (2, 3)]),
    "rms_norm_no_w": (lambda x: gradkern.rms_norm(x, 5), [(3, 5)]),
    "layer_norm_wb": (lambda x, w, b: gradkern.layer_norm(x, 6, w, b), [(4, 6), (6,), (6,)]),
    "layer_norm_2d": (lambda x, w, b: gradkern.layer_norm(x, (2, 3), w, b), [(3, 2, 3), (2, 3), (2, 3)]),
    "layer_norm_none": (lambda x: gradkern.layer_norm(x, 5), [(3, 5)]),
}


@pytest.mark.parametrize("layout", ["contig", "transposed"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(GRADCHECK_CASES))
def test_gradcheck(case, backend, layout):
    fn, shapes = GRADCHECK_CASES[case]
    inputs = _gc_inputs(shapes, [layout] + ["contig"] * (len(shapes) - 1))
    with gradkern.use_backend(backend):
        assert torch.autograd.gradcheck(fn, inputs, **GRADCHECK)


# ---------------------------------------------------------------- end to end

class TinyModel(torch.nn.Module):
    """linear -> rms_norm -> swiglu (split) -> linear -> layer_norm -> gelu -> linear,
    with a torch twin using the same parameters."""

    def __init__(self, dtype, d=12, h=16):
        super().__init__()
        self.l1 = torch.nn.Linear(d, 2 * h, dtype=dtype)
        self.w_rms = torch.nn.Parameter(torch.randn(2 * h, dtype=dtype))
        self.l2 = torch.nn.Linear(h, d, dtype=dtype)
        self.w_ln = torch.nn.Parameter(torch.randn(d, dtype=dtype))
        self.b_ln = torch.nn.Parameter(torch.randn(d, dtype=dtype))
        self.l3 = torch.nn.Linear(d, 3, dtype=dtype)

    def forward(self, x, use_gradkern):
        g = gradkern if use_gradkern else None
        h = self.l1(x)
        h = g.rms_norm(h, h.shape[-1], self.w_rms) if g else t_rms_norm(h, (h.shape[-1],), self.w_rms)
        h = g.swiglu(h, -1) if g else (lambda a, b: a * F.silu(b))(*h.chunk(2, -1))
        h = self.l2(h)
        h = (g.layer_norm(h, h.shape[-1], self.w_ln, self.b_ln) if g
             else F.layer_norm(h, (h.shape[-1],), self.w_ln, self.b_ln))
        h = g.gelu(h) if g else F.gelu(h)
        return self.l3(h)


@pytest.mark.parametrize("dtype", [F64, F32], ids=dtype_name)
def test_loss_backward_end_to_end(dtype):
    torch.manual_seed(1)
    model = TinyModel(dtype)
    x = torch.randn(10, 12, dtype=dtype)
    target = torch.randint(0, 3, (10,))
    grads = {}
    for use in (True, False):
        model.zero_grad()
        loss = F.cross_entropy(model(x, use), target)
        loss.backward()
        grads[use] = {n: p.grad.clone() for n, p in model.named_parameters()}
    tol = TOL[dtype]
    for n in grads[True]:
        torch.testing.assert_close(grads[True][n], grads[False][n], **tol, msg=lambda m: "%s: %s" % (n, m))
    # micro-batches: param grads overwrite in the kernel, autograd sums them
    model.zero_grad()
    for half in x.chunk(2):
        model(half, True).sum().backward()
    g2 = model.w_rms.grad.clone()
    model.zero_grad()
    for half in x.chunk(2):
        model(half, False).sum().backward()
    torch.testing.assert_close(g2, model.w_rms.grad, **tol)


# ---------------------------------------------------------------- threads: bit-identical

def _bits(t):
    return t.contiguous().view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()])


THREAD_CASES = {
    "gelu": (lambda x: gradkern.gelu(x), (300, 350), None),
    "softplus": (lambda x: gradkern.softplus(x), (350, 300), None),
    "swiglu_split_first": (lambda x: gradkern.swiglu(x, 0), (400, 250), None),
    "geglu_two": (lambda x, g: gradkern.geglu(x, g, approximate="tanh"), (300, 300), (300, 300)),
    "rms_norm_many_rows": (lambda x, w: gradkern.rms_norm(x, 97, w), (1000, 97), (97,)),
    "rms_norm_long_rows": (lambda x, w: gradkern.rms_norm(x, 5000, w), (3, 5000), (5000,)),
    "layer_norm": (lambda x, w, b: gradkern.layer_norm(x, 129, w, b), (700, 129), (129,), (129,)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(THREAD_CASES))
def test_threads_bit_identical(restore_threads, case, dtype):
    fn, *shapes = THREAD_CASES[case]
    gen = _seed("threads", case)
    base = [make(s, "transposed" if i == 0 else "contig", dtype, gen) for i, s in enumerate(shapes) if s]
    results = {}
    for n in (1, 2, 3):
        gradkern.set_num_threads(n)
        assert gradkern.get_num_threads() == n
        inputs = [leaf(t) for t in base]
        y = fn(*inputs)
        dy = make(tuple(y.shape), "contig", dtype, _seed("threads-dy", case))
        grads = torch.autograd.grad(y, inputs, dy)
        results[n] = [_bits(t) for t in (y,) + tuple(grads)]
    for n in (2, 3):
        for i, (a, b) in enumerate(zip(results[1], results[n])):
            assert torch.equal(a, b), "%s %s: output %d differs between 1 and %d threads" % (case, dtype, i, n)


# ---------------------------------------------------------------- errors

def _raises(status, words, fn, *args, **kw):
    with pytest.raises(gradkern.Error) as info:
        fn(*args, **kw)
    e = info.value
    assert e.status == status, "status %s (%s), wanted %d" % (e.status, e.status_name, status)
    for w in words:
        assert w in str(e), "%r not in the message %r" % (w, str(e))
    assert e.message and e.message in str(e)
    return e


def test_error_odd_split():
    e = _raises(_lib.ERR_BAD_SHAPE, ["shape[1] = 5", "split dim", "even"], gradkern.glu, torch.randn(3, 5))
    assert e.status_name == "GK_ERR_BAD_SHAPE"
    _raises(_lib.ERR_BAD_SHAPE, ["shape[0] = 3"], gradkern.swiglu, torch.randn(3, 4), 0)


def test_error_messages_name_the_argument():
    x = torch.randn(4, 6)
    _raises(_lib.ERR_INVALID_VALUE, ["gated.dim = 2"], gradkern.swiglu, x, 2)
    _raises(_lib.ERR_BAD_SHAPE, ["'gate'", "[4, 5]", "[4, 6]"], gradkern.reglu, x, torch.randn(4, 5))
    _raises(_lib.ERR_BAD_DTYPE, ["'gate'", "f64"], gradkern.geglu, x, torch.randn(4, 6, dtype=F64))
    _raises(_lib.ERR_BAD_SHAPE, ["'weight'", "[5]", "[6]"], gradkern.rms_norm, x, 6, torch.randn(5))
    _raises(_lib.ERR_BAD_DTYPE, ["'weight'", "f64", "f32"], gradkern.layer_norm, x, 6, torch.randn(6, dtype=F64))
    _raises(_lib.ERR_BAD_RANK, ["'bias'", "rank 2"], gradkern.layer_norm, x, 6, None, torch.randn(2, 3))
    _raises(_lib.ERR_INVALID_VALUE, ["eps"], gradkern.rms_norm, x, 6, None, 0.0)
    _raises(_lib.ERR_INVALID_VALUE, ["eps"], gradkern.layer_norm, x, 6, None, None, -1e-5)
    _raises(_lib.ERR_INVALID_VALUE, ["beta"], gradkern.softplus, x, 0)
    _raises(_lib.ERR_BAD_RANK, ["rank = 9"], gradkern.relu, torch.randn([1] * 9))
    _raises(_lib.ERR_INVALID_VALUE, ["n = 0"], gradkern.set_num_threads, 0)
    _raises(_lib.ERR_UNSUPPORTED, ["cuda"], gradkern.relu, x, backend="cuda")


def test_error_python_side():
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match="approximate"):
        gradkern.gelu(x, approximate="erf")
    with pytest.raises(ValueError, match="normalized_shape"):
        gradkern.layer_norm(x, (5,))
    with pytest.raises(TypeError, match="int64"):
        gradkern.relu(torch.arange(4))
    with pytest.raises(ValueError, match="backend"):
        gradkern.relu(x, backend="gpu")


def test_rejected_call_writes_nothing():
    """A plan run with a bad argument leaves the outputs untouched."""
    plan = gradkern.Plan("rmsnorm", "forward", F32, (3, 4))
    x, w = torch.randn(3, 4), torch.randn(5)
    y, rstd = torch.full((3, 4), 7.0), torch.full((3,), 7.0)
    with pytest.raises(gradkern.Error, match="'weight'"):
        plan.run({"x": x, "weight": w, "y": y, "rstd": rstd})
    assert (y == 7).all() and (rstd == 7).all()
    with pytest.raises(gradkern.Error, match="'rstd' is missing"):
        plan.run({"x": x, "weight": torch.randn(4), "y": y})
    assert (y == 7).all()


# ---------------------------------------------------------------- the binding itself

def test_struct_layout_matches_the_library():
    """gk_op_desc_init and gk_tensor_init fill our ctypes structs; the fields
    must read back the header's documented defaults."""
    d = _lib.gk_op_desc()
    shape = (ctypes.c_int64 * 3)(2, 3, 4)
    assert clib.gk_op_desc_init(ctypes.byref(d), _lib.OPS["layernorm"], _lib.BACKWARD, _lib.BF16, 3, shape) == 0
    assert (d.op, d.direction, d.dtype, d.backend, d.rank) == (10, 1, _lib.BF16, 0, 3)
    assert list(d.shape[:3]) == [2, 3, 4] and d.accumulate == 0
    assert (d.act.approximate, d.act.beta, d.act.threshold) == (0, 1.0, 20.0)
    assert (d.gated.form, d.gated.dim) == (0, -1)
    assert (d.norm.normalized_rank, d.norm.eps, d.norm.has_weight, d.norm.has_bias) == (1, 1e-5, 1, 1)
    t = _lib.gk_tensor()
    buf = (ctypes.c_float * 24)()
    assert clib.gk_tensor_init(ctypes.byref(t), buf, _lib.F32, 3, shape) == 0
    assert (t.dtype, t.device, t.rank, list(t.shape[:3]), list(t.strides[:3])) == (0, 0, 3, [2, 3, 4], [12, 4, 1])
    assert clib.gk_tensor_numel(ctypes.byref(t)) == 24
    # the plan normalises the split dim
    p = gradkern.Plan("swiglu", "forward", F32, (2, 6, 4), dim=-2)
    assert p.desc.gated.dim == 1 and p.arg_shape("y") == (2, 3, 4) and p.arg_shape("dx") is None


def test_tensor_view_without_copy():
    base = torch.randn(6, 10)
    v = base[1::2, ::3].t()
    g = gradkern._core.to_gk_tensor(v)
    assert g.data == v.data_ptr() and g.rank == 2
    assert list(g.shape[:2]) == [4, 3] and list(g.strides[:2]) == [3, 20]


def test_plan_info_and_backend():
    x = torch.randn(8, 16)
    info = gradkern.plan_info("rms_norm", x, "backward", normalized_rank=1)
    assert info["kernel"].startswith("rmsnorm_bwd") and info["backend"] == "cpu"
    assert info["deterministic"] and info["accumulator"] == "f32"
    assert gradkern.plan_info("swiglu", x, backend="ref")["backend"] == "ref"
    assert gradkern.plan_info("layer_norm", x.double())["accumulator"] == "f64"
    with gradkern.use_backend("ref"):
        assert gradkern.get_backend() == "ref"
    assert gradkern.get_backend() == "auto"


def test_plan_cache_does_not_grow_per_call():
    gradkern.clear_plan_cache()
    x = torch.randn(5, 8, requires_grad=True)
    for _ in range(20):
        gradkern.swiglu(gradkern.rms_norm(x, 8)).sum().backward()
    assert gradkern.plan_cache_size() == 4     # rms fwd/bwd, swiglu fwd/bwd
    gradkern.clear_plan_cache()
    assert gradkern.plan_cache_size() == 0
    p = gradkern.Plan("relu", "forward", F32, (3,))
    fin = p._finalizer
    del p
    gc.collect()
    assert not fin.alive                      # gk_plan_destroy ran


def test_workspace_is_aligned_and_used():
    # rms_norm backward with dweight needs a workspace on both backends
    for backend in BACKENDS:
        p = gradkern.get_plan("rmsnorm", "backward", F32, (64, 32), backend, normalized_rank=1)
        assert p.workspace_size > 0
        x = torch.randn(64, 32, requires_grad=True)
        w = torch.randn(32, requires_grad=True)
        gradkern.rms_norm(x, 32, w, backend=backend).sum().backward()
        assert torch.isfinite(w.grad).all()
