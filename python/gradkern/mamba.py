"""The Mamba ops with the signatures of causal-conv1d and mamba-ssm, each a
torch.autograd.Function whose forward and backward run gradkern:

    causal_conv1d(x, weight, bias=None, activation=None)
        causal_conv1d_fn: x (B, D, L), weight (D, W), bias (D), activation
        None or 'silu'
    selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                   delta_softplus=False, return_last_state=False)
        selective_scan_fn: u, delta, z (B, D, L); A (D, N); B and C (D, N)
        (time-invariant), (B, N, L) or (B, G, N, L) (grouped); D and
        delta_bias (D). Returns out, or (out, last_state).

CPU tensors of float32, float64, float16 or bfloat16, any strides, all of
one dtype except in mamba-ssm's mixed precision: with float16/bfloat16 u,
delta and z, the scan's A, D and delta_bias (together) and B and C (each on
its own) may be float32; gradients come back in each input's own dtype.
causal_conv1d takes one dtype. Both also take the state of a previous piece
of the sequence (initial_states= / initial_state=) and can return theirs, so
a long sequence can be processed in pieces; gradients flow through those
states too.
Keyword-only ``backend=None`` as everywhere in gradkern.
"""
import torch

from ._core import plan_for, new_output, once_differentiable, param_dtype, resolve_backend, stat_dtype

__all__ = ["causal_conv1d", "selective_scan"]


def _plan(op, direction, dtype, shape, backend, opts):
    return plan_for(op, direction, dtype, shape, backend, opts)


# ---------------------------------------------------------------- causal conv1d

class CausalConv1dFunction(torch.autograd.Function):
    """Forward: x, weight, [bias], [initial_states] -> y, [final_states].

    x is (B, D, L); when it is stored channel-last (a (B, L, D) tensor
    transposed, unit stride along D) it is passed with conv.channel_last and
    y and dx are channel-last too, as causal-conv1d does."""

    @staticmethod
    def forward(ctx, x, weight, bias, initial_states, opts, channel_last, return_final, backend):
        xs = x.transpose(1, 2) if channel_last else x
        plan = _plan("conv1d", "forward", x.dtype, xs.shape, backend, opts)
        ys = new_output(plan, "y", x.dtype, x)
        final = new_output(plan, "final_state", x.dtype, x) if return_final else None
        plan.run({"x": xs, "weight": weight, "bias": bias, "initial_state": initial_states, "y": ys,
                  "final_state": final})
        ctx.save_for_backward(x, weight, bias, initial_states)
        ctx.gk = (opts, channel_last, return_final, backend)
        y = ys.transpose(1, 2) if channel_last else ys
        return (y, final) if return_final else y

    @staticmethod
    @once_differentiable("causal_conv1d")
    def backward(ctx, dy, dfinal=None):
        x, weight, bias, init = ctx.saved_tensors
        opts, channel_last, return_final, backend = ctx.gk
        none = (None,) * 4
        if not any(ctx.needs_input_grad[:4]):
            return (None,) * 4 + none
        xs = x.transpose(1, 2) if channel_last else x
        plan = _plan("conv1d", "backward", x.dtype, xs.shape, backend, opts)
        dxs = new_output(plan, "dx", x.dtype, x)
        dweight = new_output(plan, "dweight", x.dtype, x)
        dbias = new_output(plan, "dbias", x.dtype, x) if bias is not None else None
        dinit = new_output(plan, "dinitial_state", x.dtype, x) if init is not None else None
        plan.run({"dy": dy.transpose(1, 2) if channel_last else dy, "x": xs, "weight": weight,
                  "bias": bias if plan.arg_shape("bias") is not None else None, "initial_state": init,
                  "dfinal_state": dfinal if return_final else None,
                  "dx": dxs, "dweight": dweight, "dbias": dbias, "dinitial_state": dinit})
        dx = dxs.transpose(1, 2) if channel_last else dxs
        grads = (dx, dweight, dbias, dinit)
        return tuple(g if n else None for g, n in zip(grads, ctx.needs_input_grad)) + none


def causal_conv1d(x, weight, bias=None, activation=None, *, initial_states=None, return_final_states=False,
                  backend=None):
    """As causal_conv1d_fn of the causal-conv1d package: a depthwise causal
    convolution of x (B, D, L) with weight (D, W) (any width W >= 1), plus
    bias (D), then SiLU with activation='silu' (or 'swish'):
        y[b, d, t] = act(bias[d] + sum_k weight[d, k] x[b, d, t - (W-1) + k])
    with x[.., t < 0] = initial_states[b, d, W-1 + t] (zeros without them).
    initial_states: (B, D, W-1) or None. return_final_states=True returns
    (y, final_states), final_states (B, D, W-1) the last W-1 inputs: the
    initial_states that continue the sequence."""
    if activation not in (None, "silu", "swish"):
        raise ValueError("gradkern.causal_conv1d: activation=%r must be None, 'silu' or 'swish'" % (activation,))
    width = weight.shape[-1] if weight.dim() >= 1 else 0
    # channel-last storage: unit stride along D, not along L
    channel_last = x.dim() == 3 and x.stride(1) == 1 and x.stride(2) != 1 and x.shape[2] > 1 and x.shape[1] > 1
    opts = tuple(sorted(dict(width=int(width), channel_last=int(channel_last), has_bias=int(bias is not None),
                             silu=int(activation is not None), has_initial_state=int(initial_states is not None),
                             has_final_state=int(bool(return_final_states)), accumulate=0).items()))
    return CausalConv1dFunction.apply(x, weight, bias, initial_states, opts, channel_last,
                                      bool(return_final_states), resolve_backend(backend))


# ---------------------------------------------------------------- selective scan

_LAYOUTS = {2: "shared", 3: "batch", 4: "grouped"}


class SelectiveScanFunction(torch.autograd.Function):
    """Forward saves the inputs and the state before each chunk of
    scan.chunk_size steps; backward recomputes the states chunk by chunk."""

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias, initial_state, opts, return_last, backend):
        plan = _plan("selective_scan", "forward", u.dtype, u.shape, backend, opts)
        sdt = stat_dtype(u.dtype)
        y = new_output(plan, "y", u.dtype, u)
        chunks = new_output(plan, "chunk_states", sdt, u)
        last = new_output(plan, "final_state", sdt, u) if return_last else None
        plan.run({"u": u, "delta": delta, "A": A, "B": B, "C": C, "D": D, "z": z, "delta_bias": delta_bias,
                  "initial_state": initial_state, "y": y, "chunk_states": chunks, "final_state": last})
        ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, initial_state, chunks)
        ctx.gk = (opts, return_last, backend)
        return (y, last) if return_last else y

    @staticmethod
    @once_differentiable("selective_scan")
    def backward(ctx, dy, dlast=None):
        u, delta, A, B, C, D, z, delta_bias, init, chunks = ctx.saved_tensors
        opts, return_last, backend = ctx.gk
        none = (None,) * 3
        needs = ctx.needs_input_grad[:9]
        if not any(needs):
            return (None,) * 9 + none
        plan = _plan("selective_scan", "backward", u.dtype, u.shape, backend, opts)
        sdt = stat_dtype(u.dtype)

        def out(kind, like, dtype=None):
            # the gradient of input `like` (None: absent), in its dtype
            return new_output(plan, kind, dtype or like.dtype, u) if like is not None else None

        grads = {
            "du": out("du", u), "ddelta": out("ddelta", delta), "dA": out("dA", A), "dB": out("dB", B),
            "dC": out("dC", C), "dD": out("dD", D), "dz": out("dz", z), "ddelta_bias": out("ddelta_bias", delta_bias),
            "dinitial_state": out("dinitial_state", init, sdt),
        }
        plan.run(dict(grads, dy=dy, u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias,
                      initial_state=init, dfinal_state=dlast if return_last else None, chunk_states=chunks))
        order = ["du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias", "dinitial_state"]
        return tuple(grads[k] if n else None for k, n in zip(order, needs)) + none


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, *, initial_state=None, chunk_size=None, backend=None):
    """As mamba-ssm's selective_scan_fn (real A):
        dt = delta + delta_bias[d], softplus(dt) with delta_softplus
        h_t = exp(dt A[d]) h_{t-1} + dt B_t u_t,   h_{-1} = initial_state or 0
        y_t = (C_t . h_t + D[d] u_t) * (silu(z_t) if z is given)
    u, delta, z (B, D, L); A (D, N); B, C each (D, N), (B, N, L) or
    (B, G, N, L) (G groups of D/G channels); D, delta_bias (D). Returns out
    (B, D, L), or (out, last_state) with return_last_state: the state after
    the last step, (B, D, N) in float32 (float64 for float64 inputs), also
    differentiable. initial_state: (B, D, N) of that dtype, or None.
    chunk_size: steps between the states saved for backward (1..128; None:
    gradkern's default, 64). Dtypes as mamba-ssm: u, delta, z of one dtype;
    A, D, delta_bias of A's, which is u's or float32 with float16/bfloat16 u;
    B and C each u's dtype or, then, float32."""
    def layout(name, t):
        if t.dim() not in _LAYOUTS:
            raise ValueError("gradkern.selective_scan: %s has rank %d; it must be (D, N), (B, N, L) or (B, G, N, L)"
                             % (name, t.dim()))
        return _LAYOUTS[t.dim()]

    bl, cl = layout("B", B), layout("C", C)
    groups = B.shape[1] if bl == "grouped" else C.shape[1] if cl == "grouped" else 1
    opts = dict(d_state=int(A.shape[-1]) if A.dim() >= 1 else 0, b_layout=bl, c_layout=cl, groups=int(groups),
                has_D=int(D is not None), has_z=int(z is not None), has_delta_bias=int(delta_bias is not None),
                delta_softplus=int(bool(delta_softplus)), has_initial_state=int(initial_state is not None),
                has_final_state=int(bool(return_last_state)), accumulate=0,
                param_dtype=param_dtype(u.dtype, A), b_dtype=param_dtype(u.dtype, B), c_dtype=param_dtype(u.dtype, C))
    if chunk_size is not None:
        opts["chunk_size"] = int(chunk_size)
    return SelectiveScanFunction.apply(u, delta, A, B, C, D, z, delta_bias, initial_state,
                                       tuple(sorted(opts.items())), bool(return_last_state),
                                       resolve_backend(backend))
