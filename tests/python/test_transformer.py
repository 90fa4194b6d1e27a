"""The transformer ops of gradkern's PyTorch binding against torch.

- parity, forward and every gradient, each op x dtype (f64, f32, bf16, f16)
  x backend (cpu, ref), tolerances from test_parity.TOL: linear vs F.linear,
  matmul vs torch.matmul, softmax / log_softmax vs F.softmax /
  F.log_softmax, cross_entropy vs F.cross_entropy (all targets ignored,
  label smoothing, logits of +-1e4, V not a multiple of 16), embedding vs
  F.embedding (padding_idx), rope vs a plain-torch RoPE, attention vs a
  plain-torch softmax(q k^T scale + causal mask) v with k, v
  repeat_interleave'd for GQA (torch 1.13 has no
  F.scaled_dot_product_attention): T not a multiple of any tile, T = 1;
  add / mul with broadcasting vs torch; linear with an f32 bias on bf16 /
  f16 x and weight (autocast), dbias in f32;
- torch.autograd.gradcheck (f64) of every Function;
- the fused cross-entropy never writes into the caller's logits;
- bad calls raise gradkern.Error naming the argument;
- bit-identical results for 1 and 2 threads; plans cached.

Run: GRADKERN_LIB=build/libgradkern.so PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/python
"""
import math

import pytest
import torch
import torch.nn.functional as F

import gradkern
from gradkern import _lib
from helpers import (
    _bits,
    BACKENDS,
    BF16,
    DTYPES,
    F16,
    F32,
    F64,
    GRADCHECK,
    TOL,
    _rand,
    _seed,
    abs_scales,
    check_fn,
    dtype_name,
    leaf,
    make_any,
    subnormal_floor,
)


def _w(op, case, dtype, backend):
    return "%s[%s,%s,%s]" % (op, case, dtype_name(dtype), backend)


# ---------------------------------------------------------------- linear

LINEAR_CASES = {  # name: (x shape, N, bias, x layout, weight layout, bias layout, dy layout)
    "2d": ((7, 13), 5, True, "contig", "contig", "contig", "contig"),
    "3d_no_bias": ((2, 3, 17), 9, False, "transposed", "contig", None, "strided"),
    "rank1": ((11,), 4, True, "contig", "contig", "contig", "contig"),
    "weight_T": ((6, 20), 33, True, "contig", "T", "strided", "transposed"),
    "strided": ((5, 2, 19), 7, True, "strided", "strided", "strided", "contig"),
    "tiles": ((67, 130), 45, True, "contig", "contig", "contig", "contig"),
    "K1": ((4, 1), 3, True, "contig", "contig", "contig", "contig"),
    "N1": ((9, 8), 1, True, "T", "contig", "contig", "contig"),
    "broadcast_x": ((6, 8), 5, False, "broadcast", "contig", None, "contig"),
    "empty_rows": ((0, 5), 3, True, "contig", "contig", "contig", "contig"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [BF16, F16], ids=dtype_name)
@pytest.mark.parametrize("case", [c for c, v in LINEAR_CASES.items() if v[2]])
def test_linear_f32_bias(errstats, case, dtype, backend):
    """Autocast's linear: x and weight in bf16/f16, bias in f32 (values f32
    has, not only 16-bit ones); y, dx, dweight in x's dtype, dbias in f32."""
    shape, n, _, xl, wl, bl, dyl = LINEAR_CASES[case]
    gen = _seed("linear_f32_bias", case, str(dtype))
    x = leaf(make_any(shape, xl, dtype, gen))
    w = leaf(make_any((n, shape[-1]), wl, dtype, gen))
    b = leaf(make_any((n,), bl, F32, gen))
    with gradkern.use_backend(backend):
        check_fn(errstats, "linear", _w("linear_f32_bias", case, dtype, backend),
                 lambda x, w, b: gradkern.linear(x, w, b), lambda x, w, b: F.linear(x, w, b),
                 [x, w, b], ["x", "weight", "bias"], ["y"], dtype, gen, linear_scales, dyl)


def linear_scales(xs, dys):
    return abs_scales(lambda x, w, b: F.linear(x, w, b), xs, dys)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(LINEAR_CASES))
def test_linear(errstats, case, dtype, backend):
    shape, n, has_b, xl, wl, bl, dyl = LINEAR_CASES[case]
    gen = _seed("linear", case, str(dtype))
    x = leaf(make_any(shape, xl, dtype, gen))
    w = leaf(make_any((n, shape[-1]), wl, dtype, gen))
    b = leaf(make_any((n,), bl, dtype, gen)) if has_b else None
    with gradkern.use_backend(backend):
        check_fn(errstats, "linear", _w("linear", case, dtype, backend),
                 lambda x, w, b: gradkern.linear(x, w, b), lambda x, w, b: F.linear(x, w, b),
                 [x, w, b], ["x", "weight", "bias"], ["y"], dtype, gen, linear_scales, dyl)


# ---------------------------------------------------------------- matmul

MATMUL_CASES = {  # name: (a shape, a layout, b shape, b layout, dy layout)
    "2d": ((7, 9), "contig", (9, 5), "contig", "contig"),
    "batched": ((3, 6, 10), "contig", (3, 10, 4), "contig", "strided"),
    "shared_b": ((2, 3, 5, 8), "contig", (8, 6), "contig", "contig"),
    "shared_b_T": ((4, 5, 8), "strided", (8, 6), "T", "transposed"),
    "shared_a": ((5, 8), "contig", (4, 8, 3), "contig", "contig"),
    "shared_a_T": ((5, 8), "T", (2, 2, 8, 3), "T", "strided"),
    "broadcast_batch": ((2, 1, 4, 6), "contig", (1, 3, 6, 5), "contig", "contig"),
    "b_batch_ones": ((3, 4, 6), "contig", (1, 6, 5), "contig", "contig"),
    "a_T_b_T": ((2, 9, 7), "T", (2, 7, 11), "T", "contig"),
    "vec_mat": ((7,), "contig", (2, 7, 3), "contig", "contig"),
    "mat_vec": ((2, 4, 7), "contig", (7,), "strided", "contig"),
    "vec_vec": ((9,), "contig", (9,), "contig", "contig"),
    "tiles": ((33, 257), "contig", (257, 19), "contig", "contig"),
    "tiles_T": ((2, 70, 65), "T", (2, 65, 67), "contig", "contig"),
    "K1": ((5, 1), "contig", (1, 4), "contig", "contig"),
    "broadcast_a": ((6, 8), "broadcast", (8, 5), "contig", "contig"),
}


def matmul_scales(xs, dys):
    return abs_scales(torch.matmul, xs, dys)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(MATMUL_CASES))
def test_matmul(errstats, case, dtype, backend):
    sa, la, sb, lb, dyl = MATMUL_CASES[case]
    gen = _seed("matmul", case, str(dtype))
    a = leaf(make_any(sa, la, dtype, gen))
    b = leaf(make_any(sb, lb, dtype, gen))
    with gradkern.use_backend(backend):
        check_fn(errstats, "matmul", _w("matmul", case, dtype, backend), gradkern.matmul,
                 lambda a, b: torch.matmul(a, b), [a, b], ["A", "B"], ["y"], dtype, gen, matmul_scales, dyl)


# ---------------------------------------------------------------- softmax, log_softmax

class RefSoftmax(torch.autograd.Function):
    """torch's softmax / log_softmax whose backward, like gradkern's (and
    torch's own), reads the output y as the op stored it: `stored`, the
    output gradkern's forward returned (checked against torch on its own),
    in the op's dtype."""

    @staticmethod
    def forward(ctx, x, dim, log, stored):
        y = F.log_softmax(x, dim) if log else F.softmax(x, dim)
        ctx.save_for_backward(stored.to(y.dtype))
        ctx.dim, ctx.log = dim, log
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        if ctx.log:
            return dy - y.exp() * dy.sum(ctx.dim, keepdim=True), None, None, None
        return y * (dy - (dy * y).sum(ctx.dim, keepdim=True)), None, None, None


def softmax_scales(dim, log, dtype):
    """softmax: y = exp(x - m) / s has relative error ~ eps (1 + |x - m|);
    dx = y (dy - sum(dy y)). log_softmax: y = x - m - log s; dx = dy - exp(y) sum(dy).
    Where y > 0, a few subnormal steps more (see subnormal_floor): y itself
    and its products may lie below the normal range."""
    def scales(xs, dys):
        x, dy = xs[0], dys[0].abs()
        m = x.amax(dim, keepdim=True)
        p = F.softmax(x, dim)
        pc = p * (1 + (x - m).abs()) + (p > 0) * subnormal_floor(dtype, 4)
        if log:
            lse = torch.logsumexp(x, dim, keepdim=True)
            return [x.abs() + m.abs() + (lse - m).abs(), dy + pc * dy.sum(dim, keepdim=True)]
        return [pc, pc * (dy + (dy * p).sum(dim, keepdim=True))]
    return scales


SOFTMAX_CASES = {  # name: (shape, dim, layout, values, dy layout)
    "last": ((7, 13), -1, "contig", "normal", "contig"),
    "middle": ((5, 6, 4), 1, "contig", "normal", "strided"),
    "first_transposed": ((33, 4), 0, "transposed", "normal", "contig"),
    "size1": ((3, 1), -1, "contig", "normal", "contig"),
    "rank1": ((17,), 0, "contig", "normal", "contig"),
    "large": ((8, 40), -1, "contig", "large", "contig"),
    "large_first": ((24, 5), 0, "strided", "large", "transposed"),
    "strided_rank3": ((2, 3, 17), 2, "strided", "normal", "contig"),
    "long_rows": ((3, 1000), -1, "contig", "normal", "contig"),
    "broadcast": ((6, 9), -1, "broadcast", "normal", "broadcast"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(SOFTMAX_CASES))
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(errstats, op, case, dtype, backend):
    shape, dim, layout, values, dyl = SOFTMAX_CASES[case]
    gen = _seed(op, case, str(dtype))
    x = leaf(make_any(shape, layout, dtype, gen, values))
    log = op == "log_softmax"
    fn = getattr(gradkern, op)
    stored = {}

    def gk(x):
        y = fn(x, dim)
        stored["y"] = y.detach()
        return y

    with gradkern.use_backend(backend):
        check_fn(errstats, op, _w(op, case, dtype, backend), gk,
                 lambda x: RefSoftmax.apply(x, dim, log, stored["y"]), [x], ["x"], ["y"], dtype, gen,
                 softmax_scales(dim, log, dtype), dyl)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_masked(op, backend):
    """-inf entries (a causal or padding mask) get probability 0 (log-prob
    -inf) and no gradient, as torch; a row of only -inf gives NaN, as torch."""
    gen = _seed("masked", op)
    for dtype in (F64, F32, BF16):
        x = _rand((5, 9), gen).to(dtype)
        x[torch.rand(5, 9, generator=gen) < 0.4] = float("-inf")
        x[:, 0] = 0.0
        x = leaf(x)
        dy = _rand((5, 9), gen).to(dtype)
        with gradkern.use_backend(backend):
            y = getattr(gradkern, op)(x, -1)
            (dx,) = torch.autograd.grad(y, x, dy)
        compute = F32 if dtype == BF16 else dtype
        xr = x.detach().to(compute).requires_grad_()
        yr = RefSoftmax.apply(xr, -1, op == "log_softmax", y.detach())   # backward from gradkern's y
        (dxr,) = torch.autograd.grad(yr, xr, dy.to(compute))
        tol = TOL[dtype]
        torch.testing.assert_close(y, yr.to(dtype), rtol=tol["rtol"], atol=tol["atol"])
        torch.testing.assert_close(dx, dxr.to(dtype), rtol=tol["rtol"], atol=tol["atol"])
    with gradkern.use_backend(backend):
        assert getattr(gradkern, op)(torch.full((2, 3), float("-inf")), -1).isnan().all()


# ---------------------------------------------------------------- cross-entropy

# name: (logits shape, V, layout, values, target kind, reduction, label smoothing, fused, dloss)
# target kinds: "rand" (some rows ignored), "none_ignored", "all_ignored"; dloss None: random
CE_CASES = {
    "mean": ((9,), 37, "contig", "normal", "rand", "mean", 0.0, True, 1.0),
    "sum": ((9,), 37, "contig", "normal", "rand", "sum", 0.0, True, 0.25),
    "smoothing": ((6,), 23, "contig", "normal", "rand", "mean", 0.1, True, 1.0),
    "smoothing_sum": ((6,), 23, "strided", "normal", "none_ignored", "sum", 0.3, True, 2.0),
    "all_ignored_mean": ((5,), 16, "contig", "normal", "all_ignored", "mean", 0.0, True, 1.0),
    "all_ignored_sum": ((5,), 16, "contig", "normal", "all_ignored", "sum", 0.2, True, 1.0),
    "large": ((8,), 40, "contig", "large", "rand", "mean", 0.0, True, 1.0),
    "large_smoothing": ((8,), 21, "contig", "large", "none_ignored", "mean", 0.2, True, 1.0),
    "V1": ((4,), 1, "contig", "normal", "none_ignored", "mean", 0.0, True, 1.0),
    "V_big": ((3,), 1001, "contig", "normal", "none_ignored", "mean", 0.0, True, 1.0),
    "spatial": ((2, 5, 3), 7, "contig", "normal", "rand", "mean", 0.0, True, 1.0),
    "unbatched": ((), 13, "contig", "normal", "none_ignored", "mean", 0.0, True, 1.0),
    "transposed": ((11,), 6, "transposed", "normal", "rand", "mean", 0.05, True, 1.0),
    "not_fused": ((9,), 37, "contig", "normal", "rand", "mean", 0.1, False, None),
    "not_fused_large": ((8,), 19, "strided", "large", "rand", "sum", 0.0, False, None),
}


def _ce_target(kind, rows, V, gen, ignore=-100):
    t = torch.randint(0, V, rows, generator=gen)
    if kind == "rand" and t.numel() > 1:
        t.view(-1)[::3] = ignore
    if kind == "all_ignored":
        t.fill_(ignore)
    return t


def _ce_logits(rows, V, layout, dtype, gen, values):
    """(rows..., V), or (N, V, d...) for targets of rank >= 2 (the class dim second, as torch)."""
    if len(rows) >= 2:
        x = make_any((rows[0], V) + tuple(rows[1:]), layout, dtype, gen, values)
    else:
        x = make_any(tuple(rows) + (V,), layout, dtype, gen, values)
    return x


def ce_scales(reduction, ls, dtype, ignore=-100):
    """loss = sum over rows kept of (1 - ls)(lse - x_t) + ls (lse - mean x), / rows kept;
    dlogits = g (softmax - (1 - ls) onehot - ls / V), softmax with relative error eps (1 + |x - lse|),
    and a few subnormal steps where it is not 0 (see subnormal_floor)."""
    def scales(xs, dys):
        x, t = xs[0], xs[1]
        if x.dim() >= 3:
            x = x.movedim(1, -1)
        V = x.shape[-1]
        x2, t2 = x.reshape(-1, V), t.reshape(-1)
        keep = (t2 != ignore).double()
        n = keep.sum().clamp(min=1) if reduction == "mean" else torch.ones((), dtype=F64)
        lse = torch.logsumexp(x2, -1)
        t2 = t2.long()
        xt = x2.gather(1, t2.clamp(0, V - 1)[:, None])[:, 0]
        rows = (1 - ls) * (lse.abs() + xt.abs()) + ls * (lse.abs() + x2.abs().mean(-1)) + x2.abs().amax(-1)
        loss = (rows * keep).sum() / n
        g = dys[0].abs() / n
        p = F.softmax(x2, -1)
        onehot = F.one_hot(t2.clamp(0, V - 1), V).double()
        dx = g * (p * (1 + (x2 - lse[:, None]).abs()) + (p > 0) * subnormal_floor(dtype, 4)
                  + (1 - ls) * onehot + ls / V) * keep[:, None]
        dx = dx.reshape(x.shape)
        if xs[0].dim() >= 3:
            dx = dx.movedim(-1, 1)
        return [loss, dx]
    return scales


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(CE_CASES))
def test_cross_entropy(errstats, case, dtype, backend):
    rows, V, layout, values, tkind, red, ls, fused, dloss = CE_CASES[case]
    gen = _seed("cross_entropy", case, str(dtype))
    x = leaf(_ce_logits(rows, V, layout, dtype, gen, values))
    t = _ce_target(tkind, rows, V, gen)
    if case == "transposed":
        t = t.to(torch.int32)           # i32 targets too
    dl = torch.tensor(dloss if dloss is not None else 0.7 + torch.rand((), generator=gen).item(), dtype=F64)
    x_before = x.detach().clone()
    with gradkern.use_backend(backend):
        check_fn(errstats, "cross_entropy", _w("cross_entropy", case, dtype, backend),
                 lambda x, t: gradkern.cross_entropy(x, t, reduction=red, label_smoothing=ls, fused=fused),
                 lambda x, t: F.cross_entropy(x, t.long(), reduction=red, label_smoothing=ls),
                 [x, t], ["logits", "target"], ["loss"], dtype, gen, ce_scales(red, ls, dtype), dys=[dl.to(dtype)])
    assert torch.equal(x.detach(), x_before)     # the fused gradient went to a private buffer


def test_cross_entropy_fused_keeps_user_logits():
    """The logits are used elsewhere in the graph: the fused gradient is
    added to the other path's, and the logits stay as they were; a second
    backward through the retained graph gives the same result."""
    torch.manual_seed(3)
    for dtype in (F64, F32):
        x0 = torch.randn(6, 11, dtype=dtype)
        t = torch.randint(0, 11, (6,))
        grads = []
        for use in (True, False):
            x = x0.clone().requires_grad_()
            h = x * 1.5
            ce = gradkern.cross_entropy(h, t, label_smoothing=0.1) if use else \
                F.cross_entropy(h, t, label_smoothing=0.1)
            loss = ce * 3.0 + (h ** 2).sum() * 0.01
            loss.backward(retain_graph=True)
            g1 = x.grad.clone()
            assert torch.equal(h.detach(), x0 * 1.5)
            x.grad = None
            loss.backward()
            torch.testing.assert_close(x.grad, g1, rtol=0, atol=0)
            grads.append(g1)
        tol = dict(rtol=1e-10, atol=1e-12) if dtype == F64 else dict(rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grads[0], grads[1], **tol)
        # no gradient wanted: plain forward, nothing saved
        with torch.no_grad():
            assert not gradkern.cross_entropy(x0, t).requires_grad


# ---------------------------------------------------------------- embedding

EMB_CASES = {  # name: (index shape, V, D, padding_idx, weight layout, index dtype, dy layout)
    "2d": ((3, 5), 11, 7, None, "contig", torch.int64, "contig"),
    "padding": ((4, 6), 9, 5, 2, "contig", torch.int64, "strided"),
    "padding_negative": ((17,), 6, 3, -1, "T", torch.int32, "contig"),
    "repeats": ((50,), 4, 16, None, "strided", torch.int64, "transposed"),
    "rank0": ((), 5, 4, None, "contig", torch.int64, "contig"),
    "V1": ((3, 2), 1, 6, None, "contig", torch.int32, "contig"),
    "D1": ((8,), 10, 1, 0, "contig", torch.int64, "contig"),
}


def emb_scales(pad):
    return lambda xs, dys: abs_scales(lambda i, w: F.embedding(i, w, padding_idx=pad), xs, dys)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(EMB_CASES))
def test_embedding(errstats, case, dtype, backend):
    ishape, V, D, pad, wl, idt, dyl = EMB_CASES[case]
    gen = _seed("embedding", case, str(dtype))
    w = leaf(make_any((V, D), wl, dtype, gen))
    idx = torch.randint(0, V, ishape, generator=gen).to(idt)
    if pad is not None and idx.numel() > 2:
        idx.view(-1)[::3] = pad % V        # the padding row is used, and gets no gradient
    with gradkern.use_backend(backend):
        check_fn(errstats, "embedding", _w("embedding", case, dtype, backend),
                 lambda i, w: gradkern.embedding(i, w, padding_idx=pad),
                 lambda i, w: F.embedding(i.long(), w, padding_idx=pad),
                 [idx, w], ["index", "weight"], ["y"], dtype, gen, emb_scales(pad), dyl)


# ---------------------------------------------------------------- rope

def t_rope(x, theta=10000.0, offset=0, layout="bthd", interleaved=False, mag=False):
    """Plain-torch RoPE (angles in f64, as gradkern). mag: the term sizes
    |x_a| |cos| + |x_b| |sin| instead."""
    xt = x.transpose(1, 2) if layout == "bhtd" else x          # (B, T, H, Dh)
    T, Dh = xt.shape[1], xt.shape[3]
    i = torch.arange(Dh // 2, dtype=F64)
    pos = offset + torch.arange(T, dtype=F64)
    ang = pos[:, None] * theta ** (-2.0 * i / Dh)
    cos, sin = ang.cos().to(x.dtype)[:, None, :], ang.sin().to(x.dtype)[:, None, :]
    if interleaved:
        xa, xb = xt[..., 0::2], xt[..., 1::2]
    else:
        xa, xb = xt[..., :Dh // 2], xt[..., Dh // 2:]
    if mag:
        ya, yb = xa * cos.abs() + xb * sin.abs(), xb * cos.abs() + xa * sin.abs()
    else:
        ya, yb = xa * cos - xb * sin, xb * cos + xa * sin
    y = torch.stack([ya, yb], -1).flatten(-2) if interleaved else torch.cat([ya, yb], -1)
    return y.transpose(1, 2) if layout == "bhtd" else y


ROPE_CASES = {  # name: (shape, layout, interleaved, theta, offset, x layout, dy layout)
    "bthd_half": ((2, 7, 3, 8), "bthd", False, 10000.0, 0, "contig", "contig"),
    "bthd_interleaved": ((2, 7, 3, 8), "bthd", True, 10000.0, 0, "contig", "strided"),
    "bhtd_half": ((1, 4, 9, 16), "bhtd", False, 10000.0, 5, "contig", "contig"),
    "bhtd_interleaved_offset": ((2, 2, 5, 6), "bhtd", True, 500000.0, 1000, "strided", "contig"),
    "T1": ((3, 1, 2, 4), "bthd", False, 10000.0, 17, "contig", "contig"),
    "Dh2": ((1, 6, 2, 2), "bthd", True, 10.0, 0, "transposed", "contig"),
    "long_offset": ((1, 33, 1, 64), "bthd", False, 10000.0, 100000, "contig", "transposed"),
    "qk_view": ((2, 3, 11, 8), "bhtd", False, 10000.0, 0, "T", "contig"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(ROPE_CASES))
def test_rope(errstats, case, dtype, backend):
    shape, layout, inter, theta, offset, xl, dyl = ROPE_CASES[case]
    gen = _seed("rope", case, str(dtype))
    if xl == "T":    # (B, H, T, Dh) as q.transpose(1, 2) of a (B, T, H, Dh) tensor
        x = leaf(make_any((shape[0], shape[2], shape[1], shape[3]), "contig", dtype, gen).transpose(1, 2))
    else:
        x = leaf(make_any(shape, xl, dtype, gen))
    kw = dict(theta=theta, offset=offset, layout=layout, interleaved=inter)
    with gradkern.use_backend(backend):
        check_fn(errstats, "rope", _w("rope", case, dtype, backend), lambda x: gradkern.rope(x, **kw),
                 lambda x: t_rope(x, **kw), [x], ["x"], ["y"], dtype, gen,
                 lambda xs, dys: abs_scales(lambda x: t_rope(x, mag=True, **kw), xs, dys), dyl)


# ---------------------------------------------------------------- attention

def _attn_parts(q, k, v, causal, scale):
    H, Hkv, T = q.shape[1], k.shape[1], q.shape[2]
    kr, vr = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
    s = scale * q @ kr.transpose(-1, -2)
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return s, torch.softmax(s, -1), kr, vr


def _group_sum(t, hkv):
    B, H, T, Dh = t.shape
    return t.reshape(B, hkv, H // hkv, T, Dh).sum(2)


class RefAttention(torch.autograd.Function):
    """softmax(scale q k^T + causal mask) v with k, v repeat_interleave'd
    per group (torch 1.13 has no F.scaled_dot_product_attention). Backward
    by the formulas, with D_i = dO_i . o_i from the output as the op stored
    it (`stored`: the output gradkern's forward returned, checked against
    torch on its own, in the op's dtype), as gradkern's (and flash
    attention's) backward does."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, stored):
        s, p, kr, vr = _attn_parts(q, k, v, causal, scale)
        o = p @ vr
        ctx.save_for_backward(q, kr, vr, p, stored.to(o.dtype))
        ctx.scale, ctx.hkv = scale, k.shape[1]
        return o

    @staticmethod
    def backward(ctx, do):
        q, kr, vr, p, o = ctx.saved_tensors
        dv = p.transpose(-1, -2) @ do
        ds = p * (do @ vr.transpose(-1, -2) - (do * o).sum(-1, keepdim=True))
        dq = ctx.scale * ds @ kr
        dk = ctx.scale * ds.transpose(-1, -2) @ q
        return dq, _group_sum(dk, ctx.hkv), _group_sum(dv, ctx.hkv), None, None, None


def attn_scales(causal, scale):
    """p_ij has relative error ~ eps (1 + |s_ij| + |lse_i|); o = p v;
    ds = p (dO v^T - D), D = dO . o; dq = scale ds k; dk = scale ds^T q; dv = p^T dO."""
    def scales(xs, dys):
        q, k, v = xs
        do = dys[0].abs()
        s, p, kr, vr = _attn_parts(q, k, v, causal, scale)
        hkv = k.shape[1]
        smag = abs(scale) * q.abs() @ kr.abs().transpose(-1, -2)
        lse = torch.logsumexp(s, -1, keepdim=True)
        pc = p * (1 + smag + lse.abs())
        o = p @ vr
        dsm = pc * (do @ vr.abs().transpose(-1, -2) + (do * o.abs()).sum(-1, keepdim=True))
        return [pc @ vr.abs(), abs(scale) * dsm @ kr.abs(),
                _group_sum(abs(scale) * dsm.transpose(-1, -2) @ q.abs(), hkv),
                _group_sum(pc.transpose(-1, -2) @ do, hkv)]
    return scales


ATTN_CASES = {  # name: (B, H, Hkv, T, Dh, causal, scale, layout, values)
    "causal": (2, 4, 4, 37, 16, True, None, "bhtd", 1.0),
    "causal_gqa": (1, 6, 2, 70, 8, True, None, "bthd", 1.0),
    "causal_mqa_T130": (1, 4, 1, 130, 32, True, None, "bthd", 1.0),
    "full": (2, 2, 2, 23, 16, False, None, "bhtd", 1.0),
    "full_gqa_scale": (1, 4, 2, 19, 12, False, 0.3, "bthd", 1.0),
    "T1": (2, 4, 2, 1, 16, True, None, "bhtd", 1.0),
    "T1_full": (1, 2, 1, 1, 8, False, None, "bthd", 1.0),
    "T2_Dh1": (1, 2, 2, 2, 1, True, None, "bhtd", 1.0),
    "Dh64_T65": (1, 2, 2, 65, 64, True, None, "bthd", 1.0),
    "peaky": (1, 2, 1, 29, 16, True, None, "bhtd", 6.0),
}


def _attn_input(B, H, T, Dh, layout, dtype, gen, mult):
    if layout == "bthd":     # as q.transpose(1, 2) of a (B, T, H, Dh) projection
        x = (_rand((B, T, H, Dh), gen) * mult).to(dtype).transpose(1, 2)
    else:
        x = (_rand((B, H, T, Dh), gen) * mult).to(dtype)
    return leaf(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(ATTN_CASES))
def test_attention(errstats, case, dtype, backend):
    B, H, Hkv, T, Dh, causal, scale, layout, mult = ATTN_CASES[case]
    gen = _seed("attention", case, str(dtype))
    q = _attn_input(B, H, T, Dh, layout, dtype, gen, mult)
    k = _attn_input(B, Hkv, T, Dh, layout, dtype, gen, mult)
    v = _attn_input(B, Hkv, T, Dh, layout, dtype, gen, 1.0)
    sc = scale if scale is not None else 1 / math.sqrt(Dh)
    stored = {}

    def gk(q, k, v):
        o = gradkern.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        stored["o"] = o.detach()
        return o

    with gradkern.use_backend(backend):
        check_fn(errstats, "attention", _w("attention", case, dtype, backend), gk,
                 lambda q, k, v: RefAttention.apply(q, k, v, causal, sc, stored["o"]),
                 [q, k, v], ["q", "k", "v"], ["y"], dtype, gen, attn_scales(causal, sc))


# ---------------------------------------------------------------- add, mul

BINARY_CASES = {  # name: (a shape, b shape, alpha, a layout, b layout, dy layout)
    "same": ((5, 7), (5, 7), 1.0, "contig", "contig", "contig"),
    "row": ((6, 9), (9,), 1.0, "contig", "contig", "strided"),
    "col_alpha": ((4, 8), (4, 1), -0.5, "transposed", "contig", "contig"),
    "both_ways": ((3, 1, 5), (1, 4, 1), 2.0, "contig", "strided", "contig"),
    "b_higher_rank": ((6,), (2, 3, 6), 1.5, "contig", "contig", "transposed"),
    "scalar_b": ((3, 4), (), 0.25, "contig", "contig", "contig"),
    "residual": ((2, 11, 16), (2, 11, 16), 1.0, "strided", "transposed", "contig"),
    "gate_bcast": ((2, 3, 1, 8), (3, 5, 1), 1.0, "contig", "contig", "contig"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(BINARY_CASES))
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary(errstats, op, case, dtype, backend):
    sa, sb, alpha, la, lb, dyl = BINARY_CASES[case]
    gen = _seed(op, case, str(dtype))
    a = leaf(make_any(sa, la, dtype, gen))
    b = leaf(make_any(sb, lb, dtype, gen))
    if op == "add":
        gk = lambda a, b: gradkern.add(a, b, alpha=alpha)        # noqa: E731
        ref = lambda a, b: torch.add(a, b, alpha=alpha)   # noqa: E731
        mag = lambda a, b: a + abs(alpha) * b                    # noqa: E731
    else:
        gk = lambda a, b: gradkern.mul(a, b, alpha=alpha)        # noqa: E731
        ref = lambda a, b: alpha * (a * b)                # noqa: E731
        mag = lambda a, b: abs(alpha) * (a * b)                  # noqa: E731
    with gradkern.use_backend(backend):
        check_fn(errstats, op, _w(op, case, dtype, backend), gk, ref, [a, b], ["A", "B"], ["y"], dtype, gen,
                 lambda xs, dys: abs_scales(mag, xs, dys), dyl)


@pytest.mark.parametrize("alpha", [1.0, -1.5])
def test_add_backward_hands_dy_on(alpha):
    """add with nothing broadcast: da is dy itself (no copy), as autograd
    gives it; db too when alpha is 1, else alpha dy."""
    a = torch.randn(4, 6, requires_grad=True)
    b = torch.randn(4, 6, requires_grad=True)
    dy = torch.randn(4, 6)
    da, db = torch.autograd.grad(gradkern.add(a, b, alpha=alpha), (a, b), dy)
    assert da.data_ptr() == dy.data_ptr()
    torch.testing.assert_close(db, alpha * dy, rtol=0, atol=0)
    assert (db.data_ptr() == dy.data_ptr()) == (alpha == 1.0)


def test_binary_python_scalar():
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    y = gradkern.add(x, 2.0)
    torch.testing.assert_close(y, x + 2.0, rtol=0, atol=0)
    y = gradkern.mul(x, 3.0)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 3.0), rtol=0, atol=0)


# ---------------------------------------------------------------- gradcheck (f64)

def _gc(shape, gen, layout="contig", positive=False):
    t = make_any(shape, layout, F64, gen)
    return leaf(t.abs() + 0.1 if positive else t)


def _gc_cases():
    g = _seed("gradcheck-transformer")
    idx = torch.tensor([[0, 3, 3], [5, 1, 0]])
    tgt = torch.tensor([1, -100, 4, 0])
    tgt3 = torch.tensor([[1, 2, -100], [0, 4, 4]])
    return {
        "linear": (lambda x, w, b: gradkern.linear(x, w, b), [_gc((2, 3, 5), g, "transposed"), _gc((4, 5), g),
                                                              _gc((4,), g)]),
        "linear_no_bias": (lambda x, w: gradkern.linear(x, w), [_gc((3, 5), g), _gc((4, 5), g, "T")]),
        "matmul_batched": (gradkern.matmul, [_gc((2, 3, 4), g), _gc((2, 4, 5), g, "T")]),
        "matmul_shared_b": (gradkern.matmul, [_gc((2, 3, 4), g, "T"), _gc((4, 5), g)]),
        "matmul_shared_a": (gradkern.matmul, [_gc((3, 4), g, "T"), _gc((2, 4, 5), g)]),
        "matmul_broadcast": (gradkern.matmul, [_gc((2, 1, 3, 4), g), _gc((3, 4, 2), g)]),
        "matmul_vec": (gradkern.matmul, [_gc((4,), g), _gc((2, 4, 3), g)]),
        "softmax": (lambda x: gradkern.softmax(x, 1), [_gc((3, 5, 2), g, "transposed")]),
        "log_softmax": (lambda x: gradkern.log_softmax(x, -1), [_gc((4, 6), g)]),
        "cross_entropy_fused": (lambda x: gradkern.cross_entropy(x, tgt, label_smoothing=0.1), [_gc((4, 7), g)]),
        "cross_entropy_sum": (lambda x: gradkern.cross_entropy(x, tgt, reduction="sum", fused=False),
                              [_gc((4, 7), g, "T")]),
        "cross_entropy_spatial": (lambda x: gradkern.cross_entropy(x, tgt3), [_gc((2, 5, 3), g)]),
        "embedding": (lambda w: gradkern.embedding(idx, w), [_gc((6, 4), g, "T")]),
        "rope_half": (lambda x: gradkern.rope(x, offset=3), [_gc((2, 3, 2, 4), g)]),
        "rope_interleaved_bhtd": (lambda x: gradkern.rope(x, layout="bhtd", interleaved=True, theta=100.0),
                                  [_gc((1, 2, 3, 6), g, "strided")]),
        "attention_causal_gqa": (lambda q, k, v: gradkern.scaled_dot_product_attention(q, k, v, is_causal=True),
                                 [_gc((1, 4, 5, 3), g), _gc((1, 2, 5, 3), g), _gc((1, 2, 5, 3), g)]),
        "attention_full": (lambda q, k, v: gradkern.scaled_dot_product_attention(q, k, v, scale=0.7),
                           [_gc((2, 1, 4, 2), g, "transposed"), _gc((2, 1, 4, 2), g), _gc((2, 1, 4, 2), g)]),
        "add": (lambda a, b: gradkern.add(a, b, alpha=-1.5), [_gc((3, 1, 4), g), _gc((2, 1), g)]),
        "mul": (lambda a, b: gradkern.mul(a, b, alpha=0.5), [_gc((3, 4), g, "transposed"), _gc((4,), g)]),
    }


GC_NAMES = list(_gc_cases())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", GC_NAMES)
def test_gradcheck(case, backend):
    fn, inputs = _gc_cases()[case]
    with gradkern.use_backend(backend):
        assert torch.autograd.gradcheck(fn, inputs, **GRADCHECK)


# ---------------------------------------------------------------- threads, cache

@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_name)
def test_threads_bit_identical(restore_threads, dtype):
    gen = _seed("threads-transformer", str(dtype))
    x = make_any((64, 96), "contig", dtype, gen)
    w = make_any((80, 96), "contig", dtype, gen)
    q = make_any((1, 4, 100, 32), "contig", dtype, gen)
    kv = make_any((1, 2, 100, 32), "contig", dtype, gen)
    logits = make_any((40, 300), "contig", dtype, gen)
    t = torch.randint(0, 300, (40,), generator=gen)
    results = {}
    for n in (1, 2):
        gradkern.set_num_threads(n)
        xs = [leaf(a) for a in (x, w, q, kv, kv.clone(), logits)]
        outs = [gradkern.linear(xs[0], xs[1]),
                gradkern.scaled_dot_product_attention(xs[2], xs[3], xs[4], is_causal=True),
                gradkern.cross_entropy(xs[5], t, label_smoothing=0.1).reshape(1)]
        loss = sum((o.float() * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum() for o in outs)
        grads = torch.autograd.grad(loss, xs)
        results[n] = [_bits(a) for a in outs + list(grads)]
    for i, (a, b) in enumerate(zip(results[1], results[2])):
        assert torch.equal(a, b), "result %d differs between 1 and 2 threads" % i


def test_plan_cache_does_not_grow_per_call():
    gradkern.clear_plan_cache()
    x = torch.randn(4, 6, requires_grad=True)
    w = torch.randn(5, 6, requires_grad=True)
    t = torch.randint(0, 5, (4,))
    for _ in range(10):
        gradkern.cross_entropy(gradkern.softmax(gradkern.linear(x, w), -1), t).backward()
    assert gradkern.plan_cache_size() == 5   # linear fwd/bwd, softmax fwd/bwd, fused cross-entropy fwd
    info = gradkern.plan_info("linear", x, "backward", out_features=5, has_bias=0)
    assert info["kernel"].startswith("linear_bwd") and info["deterministic"]
    info = gradkern.plan_info("embedding", t, dtype=F32, num_embeddings=5, dim=6, index_dtype=torch.int64)
    assert info["kernel"].startswith("embedding_fwd")


# ---------------------------------------------------------------- errors

def _raises(status, words, fn, *args, **kw):
    with pytest.raises(gradkern.Error) as info:
        fn(*args, **kw)
    e = info.value
    assert e.status == status, "status %s (%s), wanted %d: %s" % (e.status, e.status_name, status, e)
    for w in words:
        assert w in str(e), "%r not in the message %r" % (w, str(e))
    return e


def test_errors_name_the_argument():
    x = torch.randn(4, 6)
    _raises(_lib.ERR_BAD_SHAPE, ["'weight'", "[5, 7]"], gradkern.linear, x, torch.randn(5, 7))
    _raises(_lib.ERR_BAD_SHAPE, ["'bias'"], gradkern.linear, x, torch.randn(5, 6), torch.randn(4))
    _raises(_lib.ERR_BAD_DTYPE, ["'weight'", "f64"], gradkern.linear, x, torch.randn(5, 6, dtype=F64))
    _raises(_lib.ERR_BAD_SHAPE, ["'B'"], gradkern.matmul, torch.randn(2, 3, 4), torch.randn(2, 5, 6))
    _raises(_lib.ERR_INVALID_VALUE, ["softmax.dim = 2"], gradkern.softmax, x, 2)
    _raises(_lib.ERR_INVALID_VALUE, ["target[1] = 6", "ignore_index"], gradkern.cross_entropy, x,
            torch.tensor([0, 6, 1, 2]))
    _raises(_lib.ERR_BAD_SHAPE, ["'target'"], gradkern.cross_entropy, x, torch.tensor([0, 1, 2]))
    _raises(_lib.ERR_BAD_DTYPE, ["index_dtype"], gradkern.cross_entropy, x, torch.zeros(4))
    _raises(_lib.ERR_INVALID_VALUE, ["label_smoothing"], gradkern.cross_entropy, x, torch.zeros(4, dtype=torch.long),
            label_smoothing=1.5)
    _raises(_lib.ERR_INVALID_VALUE, ["index[3] = 9"], gradkern.embedding, torch.tensor([0, 1, 2, 9]), x)
    _raises(_lib.ERR_BAD_DTYPE, ["index_dtype"], gradkern.embedding, torch.tensor([0.0, 1.0]), x)
    _raises(_lib.ERR_BAD_SHAPE, ["Dh", "even"], gradkern.rope, torch.randn(1, 2, 3, 5))
    _raises(_lib.ERR_BAD_RANK, ["rank"], gradkern.rope, torch.randn(2, 3, 4))
    q = torch.randn(1, 6, 5, 8)
    _raises(_lib.ERR_INVALID_VALUE, ["kv_heads = 4", "H = 6"], gradkern.scaled_dot_product_attention, q,
            torch.randn(1, 4, 5, 8), torch.randn(1, 4, 5, 8))
    _raises(_lib.ERR_BAD_SHAPE, ["'v'"], gradkern.scaled_dot_product_attention, q, torch.randn(1, 3, 5, 8),
            torch.randn(1, 3, 4, 8))
    _raises(_lib.ERR_BAD_SHAPE, ["do not broadcast"], gradkern.add, x, torch.randn(5))
    _raises(_lib.ERR_BAD_DTYPE, ["'B'"], gradkern.mul, x, torch.randn(6, dtype=F64))
    _raises(_lib.ERR_UNSUPPORTED, ["cuda"], gradkern.linear, x, torch.randn(5, 6), backend="cuda")
    with pytest.raises(ValueError, match="reduction"):
        gradkern.cross_entropy(x, torch.zeros(4, dtype=torch.long), reduction="none")
    with pytest.raises(ValueError, match="padding_idx"):
        gradkern.embedding(torch.tensor([0]), x, padding_idx=4)
    with pytest.raises(ValueError, match="attn_mask"):
        gradkern.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(5, 5))
    with pytest.raises(ValueError, match="1 dim"):
        gradkern.matmul(torch.tensor(1.0), x)
    with pytest.raises(TypeError, match="int64"):
        gradkern.linear(torch.arange(6).reshape(1, 6), torch.randn(2, 6))
