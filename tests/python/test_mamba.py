"""The Mamba ops and the optimizer of gradkern's PyTorch binding against torch.

- causal_conv1d vs F.conv1d on the input padded on the left (by zeros or
  the initial states), + SiLU: widths 1 to 7, L = 1, channel-last inputs,
  final states;
- selective_scan vs a plain PyTorch loop over time (mamba-ssm's
  selective_scan_ref, with an initial state): B and C time-invariant
  (D, N), per batch (B, N, L) and grouped (B, G, N, L), with and without D,
  z, delta_bias, softplus, return_last_state and an initial state; L = 1,
  L not a multiple of the chunk (64, 16), N = 1 and N = 512;
  outputs and every gradient, f64 / f32 / bf16 / f16, both backends, with
  test_parity's tolerances; f32 also against the loop in f64; bf16 / f16
  with f32 A, D, delta_bias and f32 or 16-bit B, C (mamba-ssm's mixed
  precision), gradients in each input's dtype;
- a sequence processed in two pieces, the state carried over, equals it
  processed whole, gradients included;
- gradcheck (f64) of both Functions;
- gradkern.optim.AdamW + gradkern.clip_grad_norm_ against torch.optim.AdamW
  + torch.nn.utils.clip_grad_norm_ over 20 steps; SGD against torch.optim.SGD;
  bf16 / f16 parameters with f32 master weights against the f32 run;
  clipping of a non-finite norm; state_dict round trip;
- bad calls raise gradkern.Error naming the argument.

Run: GRADKERN_LIB=build/libgradkern.so PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/python
"""
import ctypes

import pytest
import torch
import torch.nn.functional as F

import gradkern
from gradkern import _lib
from gradkern._core import lib as clib
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
    check_fn,
    dtype_name,
    leaf,
    make_any,
)


def _w(op, case, dtype, backend):
    return "%s[%s,%s,%s]" % (op, case, dtype_name(dtype), backend)


def _state_dtype(dtype):
    return F64 if dtype == F64 else F32


def _grads_of(inputs, names):
    return [n for t, n in zip(inputs, names) if isinstance(t, torch.Tensor) and t.requires_grad]


# ---------------------------------------------------------------- causal conv1d

def t_conv(x, weight, bias=None, silu=False, init=None, return_final=False):
    """causal_conv1d_ref: F.conv1d over x padded on the left with the
    initial states (zeros without them), groups = D; then SiLU."""
    B, D, L = x.shape
    W = weight.shape[1]
    pad = init if init is not None else x.new_zeros(B, D, W - 1)
    xp = torch.cat([pad, x], -1)
    y = F.conv1d(xp, weight[:, None, :], bias, groups=D)
    if silu:
        y = F.silu(y)
    return (y, xp[..., L:]) if return_final else y


class _MagSilu(torch.autograd.Function):
    """Term sizes through SiLU: y = silu(z) is off by |silu'(z)| <= 1.1 times
    z's error; its derivative silu'(z) = s (1 + z (1 - s)), s = sigmoid(z),
    by |silu''| <= 0.5 times z's error, and it is computed from terms of
    size s (1 + |z| (1 - s)) (silu' is 0 near z = -1.28)."""

    @staticmethod
    def forward(ctx, zmag, z):
        ctx.save_for_backward(zmag, z)
        return 1.1 * zmag + F.silu(z).abs()

    @staticmethod
    def backward(ctx, g):
        zmag, z = ctx.saved_tensors
        s = torch.sigmoid(z)
        return g * (s * (1 + z.abs() * (1 - s)) + 0.5 * zmag), None


def conv_scales(silu, return_final):
    """The convolution on |x|, |w|, |b| (a sum of products), through _MagSilu."""
    def scales(xs, dys):
        x, w, b, init = xs
        diff = [t is not None and t.requires_grad for t in xs]
        ab = [t.detach().abs().requires_grad_(d) if t is not None else None for t, d in zip(xs, diff)]
        with torch.no_grad():
            z = t_conv(x, w, b, False, init)
        zm, fin = t_conv(ab[0], ab[1], ab[2], False, ab[3], True)
        ym = _MagSilu.apply(zm, z) if silu else zm
        outs = [ym, fin] if return_final else [ym]
        wrt = [t for t, d in zip(ab, diff) if d]
        grads = torch.autograd.grad(outs, wrt, [d.abs() for d in dys], allow_unused=True)
        grads = [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)]
        return [o.detach() for o in outs] + list(grads)
    return scales


CONV_CASES = {  # name: (B, D, L, W, bias, silu, x layout, weight layout, initial states, final states)
    "w4_silu": (2, 3, 9, 4, True, True, "contig", "contig", False, False),
    "w4_plain": (2, 5, 17, 4, True, False, "contig", "contig", False, False),
    "w1": (1, 4, 6, 1, True, True, "contig", "contig", False, False),
    "w2_no_bias": (3, 2, 11, 2, False, True, "strided", "T", False, False),
    "w3_no_bias_plain": (1, 6, 8, 3, False, False, "contig", "strided", False, False),
    "L1": (2, 3, 1, 4, True, True, "contig", "contig", False, True),
    "L_shorter_than_W": (1, 2, 3, 5, True, False, "contig", "contig", True, True),
    "channel_last": (2, 7, 13, 4, True, True, "T", "contig", False, False),
    "channel_last_states": (1, 5, 10, 3, True, True, "T", "contig", True, True),
    "states": (2, 3, 12, 4, True, True, "contig", "contig", True, True),
    "states_no_bias": (1, 4, 7, 4, False, False, "transposed", "contig", True, True),
    "w7_long": (1, 3, 130, 7, True, True, "contig", "contig", False, True),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_causal_conv1d(errstats, case, dtype, backend):
    B, D, L, W, has_b, silu, xl, wl, has_init, ret = CONV_CASES[case]
    gen = _seed("conv1d", case, str(dtype))
    x = leaf(make_any((B, D, L), xl, dtype, gen))
    w = leaf(make_any((D, W), wl, dtype, gen))
    b = leaf(make_any((D,), "contig", dtype, gen)) if has_b else None
    init = leaf(make_any((B, D, W - 1), "contig", dtype, gen)) if has_init else None
    act = "silu" if silu else None
    if xl == "T":
        assert x.stride(1) == 1
    with gradkern.use_backend(backend):
        check_fn(errstats, "causal_conv1d", _w("causal_conv1d", case, dtype, backend),
                 lambda x, w, b, i: gradkern.causal_conv1d(x, w, b, act, initial_states=i, return_final_states=ret),
                 lambda x, w, b, i: t_conv(x, w, b, silu, i, ret),
                 [x, w, b, init], ["x", "weight", "bias", "initial_states"],
                 ["y", "final_states"] if ret else ["y"], dtype, gen, conv_scales(silu, ret))
    if xl == "T":    # channel-last in, channel-last out (as causal-conv1d)
        y = gradkern.causal_conv1d(x.detach(), w.detach(), None if b is None else b.detach(), act)
        assert y.stride(1) == 1


# ---------------------------------------------------------------- selective scan

class _PosExpNeg(torch.autograd.Function):
    """Term sizes of a = exp(dt A) for A <= 0, x = dt |A|: the value
    exp(-x) (1 + x) (a is off by a relative eps x) and a positive derivative,
    so that no term of ddelta or dA cancels another."""

    @staticmethod
    def forward(ctx, x):
        a = torch.exp(-x) * (1 + x)
        ctx.save_for_backward(a)
        return a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * a


class _PosSilu(torch.autograd.Function):
    """|silu(z)|, with the term sizes of its derivative silu'(z) = s (1 +
    z (1 - s)), s = sigmoid(z): s (1 + |z| (1 - s)) (silu' is 0 near z = -1.28)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return F.silu(z).abs()

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        s = torch.sigmoid(z)
        return g * s * (1 + z.abs() * (1 - s))


def _bc_full(X, D):
    """B or C as (batch or 1, D or 1, L or 1, N)."""
    if X.dim() == 2:                                   # (D, N)
        return X[None, :, None, :]
    if X.dim() == 3:                                   # (B, N, L)
        return X.transpose(1, 2)[:, None]
    return X.repeat_interleave(D // X.shape[1], 1).transpose(2, 3)   # (B, G, N, L)


def t_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, return_last_state=False,
           initial_state=None, mag=False):
    """mamba-ssm's selective_scan_ref (a loop over time), with an initial
    state. mag: the term sizes instead (|u|, |B|, |C|, |D| and |h0| given;
    exp and silu through _PosExpNeg and _PosSilu)."""
    dt = delta if delta_bias is None else delta + delta_bias[:, None]
    if delta_softplus:
        dt = F.softplus(dt)
    Dd, L = u.shape[1], u.shape[2]
    x = dt[..., None] * A[None, :, None, :]            # (B, D, L, N)
    dA = _PosExpNeg.apply(-x) if mag else torch.exp(x)
    dBu = dt[..., None] * _bc_full(B, Dd) * u[..., None]
    Cf = _bc_full(C, Dd)
    h = initial_state.to(u.dtype) if initial_state is not None else \
        u.new_zeros(u.shape[0], Dd, A.shape[1])
    ys = []
    for t in range(L):
        h = dA[:, :, t] * h + dBu[:, :, t]
        ys.append((h * Cf[:, :, t if Cf.shape[2] > 1 else 0]).sum(-1))
    y = torch.stack(ys, -1)
    if D is not None:
        y = y + D[:, None] * u
    if z is not None:
        y = y * (_PosSilu.apply(z) if mag else F.silu(z))
    return (y, h) if return_last_state else y


def scan_scales(kw):
    def scales(xs, dys):
        u, delta, A, B, C, D, z, bias, h0 = xs
        diff = [t is not None and t.requires_grad for t in xs]
        pos = [True, False, True, True, True, True, False, False, True]    # inputs taken as |.|
        ins = [None if t is None else (t.detach().abs() if p else t.detach()).requires_grad_(d)
               for t, p, d in zip(xs, pos, diff)]
        if ins[2] is not None:
            ins_A = -ins[2]            # A <= 0 in the tests: _PosExpNeg gets dt |A|
        outs = t_scan(ins[0], ins[1], ins_A, ins[3], ins[4], ins[5], ins[6], ins[7], initial_state=ins[8],
                      mag=True, **kw)
        outs = outs if isinstance(outs, tuple) else (outs,)
        wrt = [t for t, d in zip(ins, diff) if d]
        grads = torch.autograd.grad(outs, wrt, [d.abs() for d in dys], allow_unused=True)
        grads = [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)]
        return [o.detach() for o in outs] + list(grads)
    return scales


# name: (B, D, L, N, B layout, C layout, G, D, z, delta_bias, softplus, last state, initial state,
#        chunk_size, layout of u / delta / z, layout of per-batch B / C)
SCAN_CASES = {
    "batch_all": (2, 4, 37, 8, "batch", "batch", 1, True, True, True, True, True, False, None, "contig", "contig"),
    "shared": (2, 3, 20, 4, "shared", "shared", 1, True, False, False, False, False, False, None, "contig",
               "contig"),
    "grouped": (2, 4, 70, 5, "grouped", "grouped", 2, False, True, False, True, True, False, None, "contig",
                "contig"),
    "shared_B_grouped_C": (1, 6, 33, 3, "shared", "grouped", 3, True, False, True, True, False, False, None,
                           "contig", "strided"),
    "batch_B_shared_C": (2, 2, 15, 6, "batch", "shared", 1, False, False, True, False, True, False, None,
                         "contig", "contig"),
    "L1": (2, 3, 1, 3, "batch", "batch", 1, True, True, True, True, True, False, None, "contig", "contig"),
    "N1": (1, 3, 65, 1, "batch", "batch", 1, True, False, False, True, True, False, None, "contig", "contig"),
    "N512": (1, 2, 5, 512, "batch", "shared", 1, True, True, False, True, True, True, None, "contig", "contig"),
    "L130": (1, 3, 130, 4, "batch", "batch", 1, True, True, True, True, True, True, None, "contig", "contig"),
    "plain": (2, 2, 9, 2, "batch", "batch", 1, False, False, False, False, False, False, None, "contig", "contig"),
    "initial_state": (2, 3, 21, 4, "grouped", "grouped", 3, True, True, False, True, True, True, None, "contig",
                      "contig"),
    "mamba_layout": (2, 5, 47, 6, "batch", "batch", 1, True, True, True, True, False, False, None, "T", "T"),
    "chunk16": (1, 2, 50, 3, "batch", "batch", 1, False, True, False, True, True, True, 16, "strided", "contig"),
    "chunk1": (1, 2, 7, 2, "grouped", "batch", 1, True, False, True, True, True, True, 1, "transposed", "T"),
}


def _scan_inputs(case, dtype, gen, param_dtype=None, b_dtype=None, c_dtype=None):
    """Inputs of SCAN_CASES[case] in dtype; A, D, delta_bias in param_dtype
    and B, C in b_dtype, c_dtype where given (mamba-ssm's mixed precision)."""
    (Bs, Dd, L, N, bl, cl, G, hasD, hasz, hasb, sp, last, hasinit, chunk, ul, bcl) = SCAN_CASES[case]

    def t(shape, layout="contig", f=None, dt=None):
        dt = dt or dtype
        x = make_any(shape, layout, dt, gen)
        if f is not None:     # a transform of the rounded values, rounded again (in place: the layout stays)
            x.copy_(f(x.double()).to(dt))
        return x

    def bc(kind, dt):
        return {"shared": lambda: t((Dd, N), dt=dt), "batch": lambda: t((Bs, N, L), bcl, dt=dt),
                "grouped": lambda: t((Bs, G, N, L), bcl, dt=dt)}[kind]()

    u = t((Bs, Dd, L), ul)
    # delta > 0 without softplus (as after mamba's softplus), any sign with it
    delta = t((Bs, Dd, L), ul, (lambda v: 0.5 * v - 0.5) if sp else (lambda v: 0.05 + 0.3 * v.abs()))
    A = t((Dd, N), "contig", lambda v: -(0.2 + v.abs()), param_dtype)
    B, C = bc(bl, b_dtype), bc(cl, c_dtype)
    D = t((Dd,), dt=param_dtype) if hasD else None
    z = t((Bs, Dd, L), ul) if hasz else None
    bias = t((Dd,), "contig", (lambda v: 0.5 * v) if sp else (lambda v: 0.1 * v.abs()), param_dtype) \
        if hasb else None
    h0 = _rand((Bs, Dd, N), gen).to(_state_dtype(dtype)) if hasinit else None
    inputs = [None if x is None else leaf(x) for x in (u, delta, A, B, C, D, z, bias, h0)]
    return inputs, dict(delta_softplus=sp, return_last_state=last), chunk


SCAN_NAMES = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(SCAN_CASES))
def test_selective_scan(errstats, case, dtype, backend):
    gen = _seed("selective_scan", case, str(dtype))
    inputs, kw, chunk = _scan_inputs(case, dtype, gen)

    def gk(u, delta, A, B, C, D, z, bias, h0):
        return gradkern.selective_scan(u, delta, A, B, C, D, z, bias, initial_state=h0, chunk_size=chunk, **kw)

    def ref(u, delta, A, B, C, D, z, bias, h0):
        return t_scan(u, delta, A, B, C, D, z, bias, initial_state=h0, **kw)

    with gradkern.use_backend(backend):
        check_fn(errstats, "selective_scan", _w("selective_scan", case, dtype, backend), gk, ref, inputs,
                 SCAN_NAMES, ["y", "last_state"] if kw["return_last_state"] else ["y"], dtype, gen,
                 scan_scales(kw))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bc", ["bc_16", "b_f32", "c_f32", "bc_f32"])
@pytest.mark.parametrize("dtype", [BF16, F16], ids=dtype_name)
@pytest.mark.parametrize("case", ["batch_all", "shared", "shared_B_grouped_C", "batch_B_shared_C", "L130",
                                  "mamba_layout"])
def test_selective_scan_mixed(errstats, case, dtype, bc, backend):
    """mamba-ssm's mixed precision: u, delta, z in bf16/f16 with A, D,
    delta_bias in f32 (values f32 has, not only 16-bit ones) and B, C each
    in f32 or u's dtype. Every gradient comes back in its input's dtype and
    is compared with TOL of that dtype: torch on the same inputs in f32
    (16-bit results rounded once) and in f64."""
    gen = _seed("selective_scan_mixed", case, str(dtype), bc)
    b_dtype = F32 if bc in ("b_f32", "bc_f32") else dtype
    c_dtype = F32 if bc in ("c_f32", "bc_f32") else dtype
    inputs, kw, chunk = _scan_inputs(case, dtype, gen, F32, b_dtype, c_dtype)
    assert inputs[2].dtype == F32 and inputs[3].dtype == b_dtype and inputs[4].dtype == c_dtype

    def gk(u, delta, A, B, C, D, z, bias, h0):
        return gradkern.selective_scan(u, delta, A, B, C, D, z, bias, initial_state=h0, chunk_size=chunk, **kw)

    def ref(u, delta, A, B, C, D, z, bias, h0):
        return t_scan(u, delta, A, B, C, D, z, bias, initial_state=h0, **kw)

    with gradkern.use_backend(backend):
        check_fn(errstats, "selective_scan", _w("selective_scan_mixed", case + "," + bc, dtype, backend), gk, ref,
                 inputs, SCAN_NAMES, ["y", "last_state"] if kw["return_last_state"] else ["y"], dtype, gen,
                 scan_scales(kw))


def test_selective_scan_last_state_dtype():
    gen = _seed("scan-state")
    for dtype in DTYPES:
        u = make_any((1, 2, 5), "contig", dtype, gen)
        A = -make_any((2, 3), "contig", dtype, gen).abs()
        B = make_any((1, 3, 5), "contig", dtype, gen)
        out, last = gradkern.selective_scan(u, u.abs(), A, B, B, return_last_state=True)
        assert out.dtype == dtype and out.shape == (1, 2, 5)
        assert last.dtype == _state_dtype(dtype) and last.shape == (1, 2, 3)
        assert not isinstance(gradkern.selective_scan(u, u.abs(), A, B, B), tuple)


# ---------------------------------------------------------------- pieces of a sequence

@pytest.mark.parametrize("dtype", [F64, F32], ids=dtype_name)
def test_scan_in_two_pieces(dtype):
    """Running u[..., :L1] and then u[..., L1:] from the first piece's last
    state equals running u whole: outputs, last state and every gradient
    (the second piece's initial-state gradient flows back into the first)."""
    gen = _seed("scan-pieces", str(dtype))
    inputs, _, _ = _scan_inputs("batch_all", dtype, gen)
    u, delta, A, B, C, D, z, bias, _ = inputs
    L1 = 23
    dy = make_any(tuple(u.shape), "contig", dtype, gen)
    dlast = make_any((u.shape[0], u.shape[1], A.shape[1]), "contig", _state_dtype(dtype), gen)
    params = [u, delta, A, B, C, D, z, bias]
    kw = dict(delta_softplus=True, return_last_state=True)

    y, last = gradkern.selective_scan(u, delta, A, B, C, D, z, bias, **kw)
    whole = [y, last] + list(torch.autograd.grad((y, last), params, (dy, dlast)))

    def part(s):
        return [u[..., s], delta[..., s], A, B[..., s], C[..., s], D, z[..., s], bias]

    y1, h1 = gradkern.selective_scan(*part(slice(0, L1)), **kw)
    y2, h2 = gradkern.selective_scan(*part(slice(L1, None)), initial_state=h1, **kw)
    y12 = torch.cat([y1, y2], -1)
    pieces = [y12, h2] + list(torch.autograd.grad((y12, h2), params, (dy, dlast)))
    names = ["y", "last_state"] + ["d" + n for n in SCAN_NAMES[:8]]
    for name, a, b in zip(names, pieces, whole):
        tol = TOL[a.dtype]
        torch.testing.assert_close(a, b, rtol=tol["rtol"], atol=tol["atol"] * b.abs().max().item(),
                                   msg=lambda m: "%s: %s" % (name, m))


@pytest.mark.parametrize("channel_last", [False, True])
def test_conv_in_two_pieces(channel_last):
    gen = _seed("conv-pieces", channel_last)
    B, D, L, W = 2, 5, 19, 4
    x = leaf(make_any((B, D, L), "T" if channel_last else "contig", F64, gen))
    w, b = leaf(make_any((D, W), "contig", F64, gen)), leaf(make_any((D,), "contig", F64, gen))
    dy = make_any((B, D, L), "contig", F64, gen)
    y = gradkern.causal_conv1d(x, w, b, "silu")
    whole = [y] + list(torch.autograd.grad(y, (x, w, b), dy))
    y1, s1 = gradkern.causal_conv1d(x[..., :8], w, b, "silu", return_final_states=True)
    y2 = gradkern.causal_conv1d(x[..., 8:], w, b, "silu", initial_states=s1)
    y12 = torch.cat([y1, y2], -1)
    pieces = [y12] + list(torch.autograd.grad(y12, (x, w, b), dy))
    for a, r in zip(pieces, whole):
        torch.testing.assert_close(a, r, rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- gradcheck (f64)

def _gc_scan(layout_b, layout_c, G=1, **kw):
    gen = _seed("gc-scan", layout_b, layout_c, G, repr(sorted(kw.items())))
    Bs, Dd, L, N = 2, 4, 6, 3
    shapes = {"shared": (Dd, N), "batch": (Bs, N, L), "grouped": (Bs, G, N, L)}
    u = leaf(_rand((Bs, Dd, L), gen))
    delta = leaf(_rand((Bs, Dd, L), gen).abs() * 0.5 + 0.05)
    A = leaf(-(_rand((Dd, N), gen).abs() + 0.2))
    B, C = leaf(_rand(shapes[layout_b], gen)), leaf(_rand(shapes[layout_c], gen))
    D, z = leaf(_rand((Dd,), gen)), leaf(_rand((Bs, Dd, L), gen))
    bias, h0 = leaf(_rand((Dd,), gen) * 0.1), leaf(_rand((Bs, Dd, N), gen))

    def fn(u, delta, A, B, C, D, z, bias, h0):
        return gradkern.selective_scan(u, delta, A, B, C, D, z, bias, initial_state=h0, chunk_size=4, **kw)
    return fn, [u, delta, A, B, C, D, z, bias, h0]


def _gc_conv(W, silu, init, final, layout="contig"):
    gen = _seed("gc-conv", W, silu, init, final, layout)
    x = leaf(make_any((2, 3, 7), layout, F64, gen))
    w, b = leaf(_rand((3, W), gen)), leaf(_rand((3,), gen))
    i = leaf(_rand((2, 3, W - 1), gen)) if init else None

    def fn(x, w, b, i):
        return gradkern.causal_conv1d(x, w, b, "silu" if silu else None, initial_states=i, return_final_states=final)
    return fn, [x, w, b, i]


GC_CASES = {
    "scan_batch_softplus_last": lambda: _gc_scan("batch", "batch", delta_softplus=True, return_last_state=True),
    "scan_shared": lambda: _gc_scan("shared", "shared"),
    "scan_grouped": lambda: _gc_scan("grouped", "grouped", G=2, delta_softplus=True),
    "scan_shared_grouped_last": lambda: _gc_scan("shared", "grouped", G=4, return_last_state=True),
    "conv_w4_silu": lambda: _gc_conv(4, True, False, False),
    "conv_w1": lambda: _gc_conv(1, False, False, False),
    "conv_states_silu": lambda: _gc_conv(3, True, True, True),
    "conv_channel_last": lambda: _gc_conv(4, True, True, False, "T"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(GC_CASES))
def test_gradcheck(case, backend):
    fn, inputs = GC_CASES[case]()
    with gradkern.use_backend(backend):
        assert torch.autograd.gradcheck(fn, inputs, **GRADCHECK)


# ---------------------------------------------------------------- threads

@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_name)
def test_threads_bit_identical(restore_threads, dtype):
    """Conv and scan (one long sequence: the chunks run in parallel), their
    parameter gradients summed in a fixed order: same bits for 1 and 2 threads."""
    gen = _seed("threads-mamba", str(dtype))
    x = make_any((2, 8, 300), "contig", dtype, gen)
    w, b = make_any((8, 4), "contig", dtype, gen), make_any((8,), "contig", dtype, gen)
    u = make_any((1, 3, 700), "contig", dtype, gen)
    A = -make_any((3, 16), "contig", dtype, gen).abs()
    Bm, Cm = make_any((1, 16, 700), "contig", dtype, gen), make_any((1, 16, 700), "contig", dtype, gen)
    results = {}
    for n in (1, 2):
        gradkern.set_num_threads(n)
        xs = [leaf(t) for t in (x, w, b, u, u.abs() * 0.1, A, Bm, Cm)]
        y1 = gradkern.causal_conv1d(xs[0], xs[1], xs[2], "silu")
        y2, last = gradkern.selective_scan(xs[3], xs[4], xs[5], xs[6], xs[7], return_last_state=True)
        outs = [y1, y2, last]
        loss = sum((o.float() * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum() for o in outs)
        results[n] = [_bits(t) for t in outs + list(torch.autograd.grad(loss, xs))]
    for i, (a, b) in enumerate(zip(results[1], results[2])):
        assert torch.equal(a, b), "result %d differs between 1 and 2 threads" % i


# ---------------------------------------------------------------- optimizer and clipping

# parameters of several shapes and layouts: a vector, a transposed matrix, a
# strided matrix, one over several pieces of the library's work split, and an empty one
_OPT_SHAPES = [((7,), "contig"), ((3, 5), "transposed"), ((33, 64), "strided"), ((3, 3000), "contig"),
               ((0,), "contig")]


def _opt_params(dtype, gen):
    return [make_any(s, l, F32, gen).to(dtype).requires_grad_() if l == "contig" else
            make_any(s, l, dtype, gen).requires_grad_() for s, l in _OPT_SHAPES]


def _rel(a, b):
    """max |a - b| / max(|b|, 1): relative for values of order 1 and above,
    absolute below (the parameters here are of order 1)."""
    return max((((x.detach().double() - y.detach().double()).abs() / y.detach().double().abs().clamp(min=1))
                .max().item() if x.numel() else 0.0) for x, y in zip(a, b))


ADAMW_CASES = {  # name: (lr, betas, eps, weight_decay, max_norm, grad scale)
    "default": (1e-3, (0.9, 0.999), 1e-8, 1e-2, 1e9, 1.0),
    "clipped": (1e-2, (0.9, 0.95), 1e-8, 0.1, 5.0, 3.0),
    "lerp_other_branch": (3e-3, (0.3, 0.95), 1e-6, 0.1, 50.0, 1.0),
    "no_decay_big_eps": (1e-2, (0.8, 0.99), 1e-3, 0.0, 1.0, 0.1),
}


@pytest.mark.parametrize("case", list(ADAMW_CASES))
def test_adamw_and_clip_match_torch(case):
    """20 steps of clip_grad_norm_ + AdamW.step on random gradients equal
    torch's within 1e-6 relative (to max(|p|, 1)) in f32; the norms within
    1e-6 relative too. Two param groups; the second with its own lr."""
    lr, betas, eps, wd, max_norm, gs = ADAMW_CASES[case]
    gen = _seed("adamw", case)
    pg = _opt_params(F32, gen)                     # views with their own layouts
    pt = [p.detach().clone().requires_grad_() for p in pg]
    groups = lambda ps: [{"params": ps[:3]}, {"params": ps[3:], "lr": lr * 0.5}]   # noqa: E731
    og = gradkern.optim.AdamW(groups(pg), lr=lr, betas=betas, eps=eps, weight_decay=wd)
    ot = torch.optim.AdamW(groups(pt), lr=lr, betas=betas, eps=eps, weight_decay=wd)
    for step in range(20):
        for a, b in zip(pg, pt):
            g = _rand(a.shape, gen).float() * gs
            a.grad, b.grad = g.clone(), g.clone()
        ng = gradkern.clip_grad_norm_(pg, max_norm)
        nt = torch.nn.utils.clip_grad_norm_(pt, max_norm)
        assert ng.dtype == nt.dtype == F32
        assert abs(ng.item() - nt.item()) <= 1e-6 * nt.item(), (step, ng.item(), nt.item())
        assert _rel([a.grad for a in pg], [b.grad for b in pt]) <= 1e-6
        og.step()
        ot.step()
        assert _rel(pg, pt) <= 1e-6, (step, _rel(pg, pt))
    for a, b in zip(pg, pt):
        sa, sb = og.state[a], ot.state[b]
        assert sa["exp_avg"].dtype == F32 and sa["step"].item() == sb["step"].item() == 20
        assert _rel([sa["exp_avg"], sa["exp_avg_sq"]], [sb["exp_avg"], sb["exp_avg_sq"]]) <= 1e-6


def test_adamw_f64():
    gen = _seed("adamw-f64")
    pg = _opt_params(F64, gen)
    pt = [p.detach().clone().requires_grad_() for p in pg]
    og, ot = gradkern.optim.AdamW(pg, lr=1e-2, weight_decay=0.1), torch.optim.AdamW(pt, lr=1e-2, weight_decay=0.1)
    for _ in range(20):
        for a, b in zip(pg, pt):
            a.grad = _rand(a.shape, gen)
            b.grad = a.grad.clone()
        gradkern.clip_grad_norm_(pg, 10.0)
        torch.nn.utils.clip_grad_norm_(pt, 10.0)
        og.step()
        ot.step()
    assert _rel(pg, pt) <= 1e-12 and og.state[pg[0]]["exp_avg"].dtype == F64


@pytest.mark.parametrize("dtype", [BF16, F16], ids=dtype_name)
def test_adamw_half_params_track_f32(dtype):
    """f16 / bf16 parameters with f32 master weights:
    - fed the same gradients (rounded to the dtype; no clipping), the f32
      masters equal, bit for bit, a gradkern f32 run given those rounded
      gradients, and every parameter is its master rounded once; that f32
      run matches torch.optim.AdamW within 1e-6;
    - against the f32 run on the unrounded gradients, with clipping, the
      parameters stay within half an ulp of the dtype plus the drift the
      gradient rounding causes: |p - p32| <= 2^-(bits) |p32| + 20 lr (bits =
      8 for bf16, 11 for f16)."""
    gen = _seed("adamw-half", str(dtype))
    lr = 1e-2
    base = _opt_params(F32, gen)
    ph = [p.detach().to(dtype).requires_grad_() for p in base]
    p32 = [p.detach().to(dtype).float().requires_grad_() for p in base]     # the same starting values
    pt = [p.detach().clone().requires_grad_() for p in p32]
    oh = gradkern.optim.AdamW(ph, lr=lr, weight_decay=0.1)
    o32 = gradkern.optim.AdamW(p32, lr=lr, weight_decay=0.1)
    ot = torch.optim.AdamW(pt, lr=lr, weight_decay=0.1)
    for _ in range(20):
        for a, b, c in zip(ph, p32, pt):
            g = _rand(a.shape, gen).to(dtype)
            a.grad, b.grad, c.grad = g, g.float(), g.float()
        oh.step()
        o32.step()
        ot.step()
    for a, b in zip(ph, p32):
        m = oh.state[a]["master"]
        assert m.dtype == F32 and oh.state[a]["exp_avg"].dtype == F32
        assert torch.equal(m, b.detach())
        assert torch.equal(a.detach(), m.to(dtype))
    assert _rel(p32, pt) <= 1e-6

    # against the f32 run on unrounded gradients, clipped
    bits = {BF16: 8, F16: 11}[dtype]
    ph = [p.detach().to(dtype).requires_grad_() for p in base]
    p32 = [p.detach().to(dtype).float().requires_grad_() for p in base]
    oh, o32 = gradkern.optim.AdamW(ph, lr=lr), gradkern.optim.AdamW(p32, lr=lr)
    for _ in range(20):
        for a, b in zip(ph, p32):
            g = _rand(a.shape, gen).float() * 3
            a.grad, b.grad = g.to(dtype), g
        gradkern.clip_grad_norm_(ph, 5.0)
        gradkern.clip_grad_norm_(p32, 5.0)
        oh.step()
        o32.step()
    for a, b in zip(ph, p32):
        bound = 2.0 ** -bits * b.detach().abs() + 20 * lr
        assert ((a.detach().float() - b.detach()).abs() <= bound).all()


SGD_CASES = {  # name: (lr, momentum, dampening, weight_decay, nesterov)
    "plain": (0.1, 0.0, 0.0, 0.0, False),
    "momentum": (0.05, 0.9, 0.0, 1e-2, False),
    "dampening": (0.05, 0.9, 0.3, 0.0, False),
    "nesterov": (0.02, 0.8, 0.0, 1e-3, True),
}


@pytest.mark.parametrize("case", list(SGD_CASES))
def test_sgd_matches_torch(case):
    lr, mom, damp, wd, nest = SGD_CASES[case]
    gen = _seed("sgd", case)
    pg = _opt_params(F32, gen)
    pt = [p.detach().clone().requires_grad_() for p in pg]
    og = gradkern.optim.SGD(pg, lr=lr, momentum=mom, dampening=damp, weight_decay=wd, nesterov=nest)
    ot = torch.optim.SGD(pt, lr=lr, momentum=mom, dampening=damp, weight_decay=wd, nesterov=nest)
    for step in range(20):
        for i, (a, b) in enumerate(zip(pg, pt)):
            # the first parameter has no gradient in the first steps: its momentum buffer starts later
            g = None if (i == 0 and step < 3) else _rand(a.shape, gen).float()
            a.grad, b.grad = (None, None) if g is None else (g.clone(), g.clone())
        og.step()
        ot.step()
        assert _rel(pg, pt) <= 1e-6, (step, _rel(pg, pt))
    if mom:
        assert og.state[pg[0]]["momentum_buffer"].dtype == F32


def test_sgd_bf16_master():
    gen = _seed("sgd-bf16")
    base = _opt_params(F32, gen)
    ph = [p.detach().to(BF16).requires_grad_() for p in base]
    p32 = [p.detach().to(BF16).float().requires_grad_() for p in base]
    oh = gradkern.optim.SGD(ph, lr=0.05, momentum=0.9, weight_decay=1e-2)
    o32 = gradkern.optim.SGD(p32, lr=0.05, momentum=0.9, weight_decay=1e-2)
    for _ in range(20):
        for a, b in zip(ph, p32):
            g = _rand(a.shape, gen).to(BF16)
            a.grad, b.grad = g, g.float()
        oh.step()
        o32.step()
    for a, b in zip(ph, p32):
        assert torch.equal(oh.state[a]["master"], b.detach()) and torch.equal(a.detach(), b.detach().to(BF16))
        assert oh.state[a]["momentum_buffer"].dtype == F32


def test_clip_grad_norm():
    gen = _seed("clip")
    for dtype in (F32, F64, BF16):
        ps = [make_any(s, l, dtype, gen).requires_grad_() for s, l in _OPT_SHAPES[:4]]
        qs = [p.detach().float().clone().requires_grad_() if dtype == BF16 else p.detach().clone().requires_grad_()
              for p in ps]
        for p, q in zip(ps, qs):
            p.grad = make_any(p.shape, "contig", dtype, gen)
            q.grad = p.grad.clone().to(q.dtype)
        before = [p.grad.clone() for p in ps]
        # no scaling when the norm is below max_norm
        rel = 2 ** -8 if dtype == BF16 else 1e-6     # the norm is returned in the gradients' dtype
        n = gradkern.clip_grad_norm_(ps, 1e6)
        assert all(torch.equal(p.grad, b) for p, b in zip(ps, before))
        nt = torch.nn.utils.clip_grad_norm_(qs, 1e6)
        assert n.dtype == dtype and abs(n.item() - nt.item()) <= rel * nt.item()
        n = gradkern.clip_grad_norm_(ps, 2.0)
        torch.nn.utils.clip_grad_norm_(qs, 2.0)
        assert abs(n.item() - nt.item()) <= rel * nt.item()
        for p, q in zip(ps, qs):
            tol = TOL[dtype]
            torch.testing.assert_close(p.grad, q.grad.to(dtype), rtol=tol["rtol"], atol=tol["atol"])
    # one tensor, as torch allows; no gradients: tensor(0.)
    p = torch.zeros(3, requires_grad=True)
    p.grad = torch.tensor([3.0, 4.0, 0.0])
    assert gradkern.clip_grad_norm_(p, 1.0).item() == 5.0
    torch.testing.assert_close(p.grad, torch.tensor([0.6, 0.8, 0.0]), rtol=1e-6, atol=0)
    assert gradkern.clip_grad_norm_([torch.zeros(2, requires_grad=True)], 1.0).item() == 0.0
    with pytest.raises(ValueError, match="norm_type"):
        gradkern.clip_grad_norm_(p, 1.0, norm_type=1)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_clip_non_finite_norm(bad):
    """torch 1.13 (error_if_nonfinite=False) returns the non-finite norm and
    scales by it (gradients become 0 or NaN); gradkern returns the same norm
    and scales nothing. error_if_nonfinite=True raises."""
    ps = [torch.zeros(4, requires_grad=True), torch.zeros(3, requires_grad=True)]
    ps[0].grad = torch.tensor([1.0, bad, 2.0, 3.0])
    ps[1].grad = torch.tensor([1.0, 1.0, 1.0])
    before = [p.grad.clone() for p in ps]
    n = gradkern.clip_grad_norm_(ps, 1.0)
    qs = [torch.zeros_like(p).requires_grad_() for p in ps]
    for p, q in zip(ps, qs):
        q.grad = p.grad.clone()
    nt = torch.nn.utils.clip_grad_norm_(qs, 1.0)
    assert torch.equal(n, nt) or (n.isnan() and nt.isnan())
    for p, b in zip(ps, before):
        assert torch.equal(p.grad.nan_to_num(), b.nan_to_num())
    with pytest.raises(gradkern.Error) as info:
        gradkern.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert info.value.status == _lib.ERR_NON_FINITE and "total norm" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_optimizer_state_dict_keeps_f32_state():
    """torch's load_state_dict casts floating state to the parameter dtype;
    gradkern's optimizers keep their f32 moments and masters, and a loaded
    optimizer continues exactly as the original."""
    gen = _seed("state-dict")
    base = _opt_params(F32, gen)[:3]
    pa = [p.detach().to(BF16).requires_grad_() for p in base]
    oa = gradkern.optim.AdamW(pa, lr=1e-2)
    for _ in range(3):
        for p in pa:
            p.grad = _rand(p.shape, gen).to(BF16)
        oa.step()
    pb = [p.detach().clone().requires_grad_() for p in pa]
    ob = gradkern.optim.AdamW(pb, lr=1.0)
    ob.load_state_dict(oa.state_dict())
    assert ob.param_groups[0]["lr"] == 1e-2
    for p in pb:
        for key in ("exp_avg", "exp_avg_sq", "master"):
            assert ob.state[p][key].dtype == F32
    for _ in range(2):
        for p, q in zip(pa, pb):
            p.grad = _rand(p.shape, gen).to(BF16)
            q.grad = p.grad.clone()
        oa.step()
        ob.step()
    for p, q in zip(pa, pb):
        assert torch.equal(p, q) and torch.equal(oa.state[p]["master"], ob.state[q]["master"])


def test_optimizer_config_structs():
    """The ctypes mirrors of gk_adamw_config and gk_sgd_config read back the
    library's documented defaults (gk_struct_size does not cover them)."""
    a = _lib.gk_adamw_config()
    assert clib.gk_adamw_config_init(ctypes.byref(a)) == 0
    assert (a.lr, a.beta1, a.beta2, a.eps, a.weight_decay) == (1e-3, 0.9, 0.999, 1e-8, 1e-2)
    s = _lib.gk_sgd_config()
    assert clib.gk_sgd_config_init(ctypes.byref(s)) == 0
    assert (s.lr, s.momentum, s.dampening, s.weight_decay, s.nesterov) == (1e-3, 0.0, 0.0, 0.0, 0)
    assert ctypes.sizeof(a) == 40 and ctypes.sizeof(s) == 40


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
    x, w = torch.randn(2, 3, 8), torch.randn(3, 4)
    _raises(_lib.ERR_BAD_SHAPE, ["'weight'"], gradkern.causal_conv1d, x, torch.randn(4, 4))
    _raises(_lib.ERR_BAD_SHAPE, ["'bias'"], gradkern.causal_conv1d, x, w, torch.randn(2))
    _raises(_lib.ERR_BAD_SHAPE, ["'initial_state'"], gradkern.causal_conv1d, x, w, initial_states=torch.randn(2, 3, 2))
    _raises(_lib.ERR_BAD_DTYPE, ["'weight'"], gradkern.causal_conv1d, x, w.double())
    _raises(_lib.ERR_BAD_RANK, ["rank"], gradkern.causal_conv1d, torch.randn(3, 8), w)
    with pytest.raises(ValueError, match="activation"):
        gradkern.causal_conv1d(x, w, activation="relu")
    u = torch.randn(2, 4, 6)
    A = -torch.rand(4, 3)
    Bm = torch.randn(2, 3, 6)
    _raises(_lib.ERR_BAD_SHAPE, ["'A'"], gradkern.selective_scan, u, u, torch.randn(5, 3), Bm, Bm)
    _raises(_lib.ERR_BAD_SHAPE, ["'C'"], gradkern.selective_scan, u, u, A, Bm, torch.randn(2, 3, 5))
    _raises(_lib.ERR_BAD_SHAPE, ["'B'"], gradkern.selective_scan, u, u, A, torch.randn(4, 2), Bm)
    _raises(_lib.ERR_BAD_SHAPE, ["'delta'"], gradkern.selective_scan, u, u[..., :5], A, Bm, Bm)
    _raises(_lib.ERR_BAD_SHAPE, ["'z'"], gradkern.selective_scan, u, u, A, Bm, Bm, z=u[:1])
    _raises(_lib.ERR_BAD_SHAPE, ["'D'"], gradkern.selective_scan, u, u, A, Bm, Bm, torch.randn(3))
    _raises(_lib.ERR_INVALID_VALUE, ["groups = 3"], gradkern.selective_scan, u, u, A, torch.randn(2, 3, 3, 6), Bm)
    _raises(_lib.ERR_BAD_DTYPE, ["'initial_state'"], gradkern.selective_scan, u.double(), u.double(), A.double(),
            Bm.double(), Bm.double(), initial_state=torch.randn(2, 4, 3))
    # f32 A with bf16 u is mamba-ssm's mixed precision (test_selective_scan_mixed); f64 A is not
    _raises(_lib.ERR_BAD_DTYPE, ["'A'", "f64", "bf16"], gradkern.selective_scan, u.bfloat16(), u.bfloat16(),
            A.double(), Bm.bfloat16(), Bm.bfloat16())
    _raises(_lib.ERR_BAD_DTYPE, ["'C'", "bf16", "f16"], gradkern.selective_scan, u.half(), u.half(), A,
            Bm.half(), Bm.bfloat16())
    _raises(_lib.ERR_INVALID_VALUE, ["chunk_size"], gradkern.selective_scan, u, u, A, Bm, Bm, chunk_size=0)
    with pytest.raises(ValueError, match="rank 1"):
        gradkern.selective_scan(u, u, A, torch.randn(3), Bm)
    p = torch.zeros(3, requires_grad=True)
    p.grad = torch.ones(3)
    opt = gradkern.optim.AdamW([p])
    opt.step()
    opt.state[p]["exp_avg_sq"] = torch.zeros(3, dtype=F64)
    _raises(_lib.ERR_BAD_DTYPE, ["exp_avg_sq[0]", "f64"], opt.step)
    opt.state[p]["exp_avg_sq"] = torch.zeros(4)
    _raises(_lib.ERR_BAD_SHAPE, ["exp_avg_sq[0]", "[4]"], opt.step)
    with pytest.raises(ValueError, match="learning rate"):
        gradkern.optim.AdamW([p], lr=-1.0)
    with pytest.raises(ValueError, match="amsgrad"):
        gradkern.optim.AdamW([p], amsgrad=True)
    _raises(_lib.ERR_INVALID_VALUE, ["max_norm"], gradkern.clip_grad_norm_, [p], -1.0)
