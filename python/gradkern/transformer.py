"""The transformer ops, named and called like their torch twins, each a
torch.autograd.Function whose forward and backward run gradkern:

    linear(x, weight, bias=None)                      F.linear
    matmul(a, b)                                      torch.matmul
    softmax(x, dim), log_softmax(x, dim)              F.softmax, F.log_softmax
    cross_entropy(logits, target, ignore_index=-100, reduction='mean',
                  label_smoothing=0.0)                F.cross_entropy
    linear_cross_entropy(hidden, weight, target, ...) F.cross_entropy(F.linear(hidden, weight), target),
                                                      the logits never stored whole
    embedding(idx, weight, padding_idx=None)          F.embedding
    rope(x, theta=10000.0, offset=0, layout='bthd', interleaved=False)
    scaled_dot_product_attention(q, k, v, is_causal=False, scale=None)
                                                      torch 2's F.scaled_dot_product_attention,
                                                      k, v with fewer heads for GQA
    add(a, b, alpha=1), mul(a, b)                     torch.add, torch.mul (broadcasting)

CPU tensors of float32, float64, float16 and bfloat16 (indices int32 or
int64), passed to the library as they are: transposed, sliced and broadcast
(stride 0) views included, no copies. Outputs and gradients are fresh
tensors. Backward is once-differentiable (a second derivative raises, naming
the function). Every function takes a keyword-only
``backend=None`` (see gradkern.functional). Errors from the library raise
gradkern.Error naming the argument.
"""
import math

import torch

from ._core import plan_for, new_output, once_differentiable, param_dtype, resolve_backend, stat_dtype

__all__ = [
    "linear", "matmul", "softmax", "log_softmax", "cross_entropy", "embedding", "rope",
    "scaled_dot_product_attention", "add", "mul", "linear_cross_entropy",
]


def _plan(op, direction, dtype, shape, backend, opts):
    return plan_for(op, direction, dtype, shape, backend, opts)


def _opts(**kw):
    return tuple(sorted(kw.items()))


def _needs(ctx, *grads):
    """Each gradient if autograd asked for it, else None."""
    return tuple(g if n else None for g, n in zip(grads, ctx.needs_input_grad))


# ---------------------------------------------------------------- linear

class LinearFunction(torch.autograd.Function):
    """y = x W^T + b. Backward gives dx, dW (and db) in one gradkern call."""

    @staticmethod
    def forward(ctx, x, weight, bias, opts, backend):
        plan = _plan("linear", "forward", x.dtype, x.shape, backend, opts)
        y = new_output(plan, "y", x.dtype, x)
        plan.run({"x": x, "weight": weight, "bias": bias, "y": y})
        ctx.save_for_backward(x, weight)
        ctx.gk = (opts, backend, None if bias is None else bias.dtype)
        return y

    @staticmethod
    @once_differentiable("linear")
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        opts, backend, bias_dtype = ctx.gk
        dx = dweight = dbias = None
        if any(ctx.needs_input_grad[:3]):
            plan = _plan("linear", "backward", x.dtype, x.shape, backend, opts)
            dx = new_output(plan, "dx", x.dtype, x)
            dweight = new_output(plan, "dweight", x.dtype, x)
            dbias = new_output(plan, "dbias", bias_dtype, x) if bias_dtype is not None else None
            plan.run({"dy": dy, "x": x, "weight": weight, "dx": dx, "dweight": dweight, "dbias": dbias})
        return _needs(ctx, dx, dweight, dbias) + (None, None)


def linear(x, weight, bias=None, *, backend=None):
    """As torch.nn.functional.linear: y = x weight^T + bias for x (..., K),
    weight (N, K), bias (N) or None; y is (..., N). x and weight have one
    dtype; bias has it too, or is float32 with float16/bfloat16 x (as under
    autocast; its gradient then is float32)."""
    n = weight.shape[0] if weight.dim() >= 1 else 0
    opts = _opts(out_features=int(n), has_bias=int(bias is not None),
                 param_dtype=param_dtype(x.dtype, bias))
    return LinearFunction.apply(x, weight, bias, opts, resolve_backend(backend))


# ---------------------------------------------------------------- matmul

def _stored(t):
    """(tensor to pass, trans flag) for a logical (..., R, C) operand: a
    transposed view (unit stride in dim -2 only) is passed as the row-major
    (..., C, R) tensor it is a view of, with the op's trans flag."""
    if t.dim() >= 2 and t.stride(-1) != 1 and t.stride(-2) == 1 and t.shape[-1] > 1:
        return t.transpose(-1, -2), 1
    return t, 0


def _matmul_forward(a, b, backend):
    """y = a @ b for a (..., M, K), b (..., K, N) of one batch shape, b of
    rank 2 shared by every batch, or (swap) a of rank 2 shared by the
    batches of b: then gradkern computes y^T = b^T a^T, a shared B operand
    again. Transposed views go in through the trans flags; nothing is
    copied. Returns y and what the backward needs."""
    swap = a.dim() == 2 and b.dim() > 2
    la, lb = (b.transpose(-1, -2), a.t()) if swap else (a, b)   # logical A, B: y' = la @ lb
    sa, ta = _stored(la)
    sb, tb = _stored(lb)
    opts = _opts(n=int(lb.shape[-1]), trans_a=ta, trans_b=tb, shared_b=int(lb.dim() == 2 and la.dim() > 2))
    plan = _plan("matmul", "forward", a.dtype, sa.shape, backend, opts)
    out_shape = tuple(b.shape[:-2] if swap else a.shape[:-2]) + (a.shape[-2], b.shape[-1])
    y = torch.empty(out_shape, dtype=a.dtype)
    plan.run({"A": sa, "B": sb, "y": y.transpose(-1, -2) if swap else y})
    return y, (sa, sb), (opts, backend, swap, ta, tb)


def _matmul_backward(dy, sa, sb, info):
    """Gradients of the logical a and b of _matmul_forward."""
    opts, backend, swap, ta, tb = info
    plan = _plan("matmul", "backward", sa.dtype, sa.shape, backend, opts)
    da = torch.empty(sa.shape, dtype=sa.dtype)
    db = torch.empty(sb.shape, dtype=sb.dtype)
    plan.run({"dy": dy.transpose(-1, -2) if swap else dy, "A": sa, "B": sb, "dA": da, "dB": db})
    dla = da.transpose(-1, -2) if ta else da    # gradients of the logical operands
    dlb = db.transpose(-1, -2) if tb else db
    return (dlb.t(), dla.transpose(-1, -2)) if swap else (dla, dlb)


class MatmulFunction(torch.autograd.Function):
    """y = a @ b, one gradkern matmul forward and one backward (see _matmul_forward)."""

    @staticmethod
    def forward(ctx, a, b, backend):
        y, saved, info = _matmul_forward(a, b, backend)
        ctx.save_for_backward(*saved)
        ctx.gk = info
        return y

    @staticmethod
    @once_differentiable("matmul")
    def backward(ctx, dy):
        if not any(ctx.needs_input_grad[:2]):
            return None, None, None
        ga, gb = _matmul_backward(dy, *ctx.saved_tensors, ctx.gk)
        return _needs(ctx, ga, gb) + (None,)


def _folded_matmul(x, y, summed, backend):
    """sum over the batch dims `summed` of x @ y, x (..., P, Q) and y
    (..., Q, S) of one batch shape: one gradkern matmul whose contraction
    runs over (summed dims, Q) together, so each result is rounded once.
    Returns (kept batch dims..., P, S)."""
    nb = x.dim() - 2
    kept = [i for i in range(nb) if i not in summed]
    e = 1
    for i in summed:
        e *= x.shape[i]
    lead = tuple(x.shape[i] for i in kept)
    xf = x.permute(kept + [nb] + list(summed) + [nb + 1]).reshape(lead + (x.shape[-2], e * x.shape[-1]))
    yf = y.permute(kept + list(summed) + [nb, nb + 1]).reshape(lead + (e * y.shape[-2], y.shape[-1]))
    return matmul(xf, yf, backend=backend)


class BroadcastMatmulFunction(torch.autograd.Function):
    """a (ba..., M, K) @ b (bb..., K, N) with batch dims of one rank that
    broadcast against each other: forward on stride-0 expanded views; the
    gradient of an operand sums over the dims it was broadcast along inside
    the contraction of one gradkern matmul (no rounded partial sums)."""

    @staticmethod
    def forward(ctx, a, b, backend):
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        ae, be = a.expand(batch + tuple(a.shape[-2:])), b.expand(batch + tuple(b.shape[-2:]))
        y, _, _ = _matmul_forward(ae, be, backend)
        ctx.save_for_backward(a, b)
        ctx.gk = (backend, batch)
        return y

    @staticmethod
    @once_differentiable("matmul")
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        backend, batch = ctx.gk
        ae, be = a.expand(batch + tuple(a.shape[-2:])), b.expand(batch + tuple(b.shape[-2:]))
        da = db = None
        with torch.no_grad():
            if ctx.needs_input_grad[0]:
                summed = [i for i, s in enumerate(a.shape[:-2]) if s == 1 and batch[i] != 1]
                da = _folded_matmul(dy, be.transpose(-1, -2), summed, backend).reshape(a.shape)
            if ctx.needs_input_grad[1]:
                summed = [i for i, s in enumerate(b.shape[:-2]) if s == 1 and batch[i] != 1]
                db = _folded_matmul(ae.transpose(-1, -2), dy, summed, backend).reshape(b.shape)
        return da, db, None


def matmul(a, b, *, backend=None):
    """As torch.matmul: 1-D operands are promoted (and the added dim removed
    after), batch dims broadcast. Batches of a with one b of rank 2 (or the
    other way round) run as one gradkern call with a shared operand; other
    broadcast batches run on stride-0 views, and the gradients sum over the
    broadcast dims inside one gradkern matmul."""
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError("gradkern.matmul: both arguments need at least 1 dim, got a %s and b %s"
                         % (list(a.shape), list(b.shape)))
    backend = resolve_backend(backend)
    A = a.unsqueeze(0) if a.dim() == 1 else a
    B = b.unsqueeze(-1) if b.dim() == 1 else b
    ba, bb = tuple(A.shape[:-2]), tuple(B.shape[:-2])
    batch = tuple(torch.broadcast_shapes(ba, bb))
    if all(s == 1 for s in bb):
        if bb:
            B = B.reshape(B.shape[-2:])
        y = MatmulFunction.apply(A, B, backend)
    elif all(s == 1 for s in ba):
        if ba:
            A = A.reshape(A.shape[-2:])
        y = MatmulFunction.apply(A, B, backend)
    elif ba == bb:
        y = MatmulFunction.apply(A, B, backend)
    else:
        nb = len(batch)
        A = A.reshape((1,) * (nb - len(ba)) + tuple(A.shape))
        B = B.reshape((1,) * (nb - len(bb)) + tuple(B.shape))
        y = BroadcastMatmulFunction.apply(A, B, backend)
    if tuple(y.shape[:-2]) != batch:
        y = y.reshape(batch + tuple(y.shape[-2:]))
    if a.dim() == 1:
        y = y.squeeze(-2)
    if b.dim() == 1:
        y = y.squeeze(-1)
    return y


# ---------------------------------------------------------------- softmax

class SoftmaxFunction(torch.autograd.Function):
    """softmax / log_softmax along a dim; backward from the saved output."""

    @staticmethod
    def forward(ctx, x, op, opts, backend):
        plan = _plan(op, "forward", x.dtype, x.shape, backend, opts)
        y = new_output(plan, "y", x.dtype, x)
        plan.run({"x": x, "y": y})
        ctx.save_for_backward(y)
        ctx.gk = (op, opts, backend)
        ctx.gk_name = op
        return y

    @staticmethod
    @once_differentiable()
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        op, opts, backend = ctx.gk
        dx = None
        if ctx.needs_input_grad[0]:
            plan = _plan(op, "backward", y.dtype, y.shape, backend, opts)
            dx = new_output(plan, "dx", y.dtype, y)
            plan.run({"dy": dy, "y": y, "dx": dx})
        return dx, None, None, None


def _softmax_dim(name, dim):
    if dim is None:
        raise ValueError("gradkern.%s: dim is required (torch's implicit dim choice is deprecated)" % name)
    return int(dim)


def _softmax(op, x, dim, backend):
    dim = _softmax_dim(op, dim)
    backend = resolve_backend(backend)
    if x.dim() == 0:
        # As torch: a 0-d tensor is one element along dim 0 (or -1).
        if dim not in (0, -1):
            raise IndexError("gradkern.%s: dim %d is out of range for a 0-d tensor (expected -1 or 0)" % (op, dim))
        return SoftmaxFunction.apply(x.reshape(1), op, _opts(dim=0), backend).reshape(())
    return SoftmaxFunction.apply(x, op, _opts(dim=dim), backend)


def softmax(x, dim, *, backend=None):
    """As torch.nn.functional.softmax(x, dim), computed stably (a 0-d x gives 1)."""
    return _softmax("softmax", x, dim, backend)


def log_softmax(x, dim, *, backend=None):
    """As torch.nn.functional.log_softmax(x, dim), computed stably (a 0-d x gives 0)."""
    return _softmax("log_softmax", x, dim, backend)


# ---------------------------------------------------------------- cross-entropy

class CrossEntropyFunction(torch.autograd.Function):
    """Loss of logits (..., V) against class indices (...).

    fused (when the logits need a gradient): forward also writes the
    gradient for dloss = 1 into a private buffer (never into the logits,
    which the caller may use elsewhere) and saves only that buffer; backward
    hands it back, multiplied by dloss when dloss != 1. Otherwise forward
    saves the logits and backward runs the op's backward with dloss."""

    @staticmethod
    def forward(ctx, logits, target, opts, fused, backend):
        fused = fused and ctx.needs_input_grad[0]
        fopts = opts + (("fused_grad", int(fused)),)
        plan = _plan("cross_entropy", "forward", logits.dtype, logits.shape, backend, tuple(sorted(fopts)))
        loss = torch.empty((), dtype=stat_dtype(logits.dtype))
        dlogits = torch.empty(logits.shape, dtype=logits.dtype) if fused else None
        plan.run({"logits": logits, "target": target, "loss": loss, "dlogits": dlogits})
        if fused:
            ctx.save_for_backward(dlogits, None)
        else:
            ctx.save_for_backward(logits, target)
        ctx.gk = (opts, backend, fused)
        return loss.to(logits.dtype)

    @staticmethod
    @once_differentiable("cross_entropy")
    def backward(ctx, dloss):
        opts, backend, fused = ctx.gk
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        if fused:
            dlogits, _ = ctx.saved_tensors
            g = float(dloss)
            return (dlogits if g == 1.0 else dlogits * g), None, None, None, None
        logits, target = ctx.saved_tensors
        plan = _plan("cross_entropy", "backward", logits.dtype, logits.shape, backend, opts)
        dl = dloss.detach().to(stat_dtype(logits.dtype)).reshape(())
        dlogits = new_output(plan, "dlogits", logits.dtype, logits)
        plan.run({"dloss": dl, "logits": logits, "target": target, "dlogits": dlogits})
        return dlogits, None, None, None, None


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0, *, fused=True, backend=None):
    """As torch.nn.functional.cross_entropy with class-index targets: input
    (N, C), (C) or (N, C, d1, ...) (the class dim is moved last as a view),
    target (N), () or (N, d1, ...) of int64 or int32; reduction 'mean' or
    'sum'; ignore_index; label_smoothing. The loss has input's dtype (it is
    computed in f32, f64 for f64, and rounded once).

    fused=True (default): the gradient is computed in the forward pass into
    a private buffer (see CrossEntropyFunction). For f16/bf16 logits and a
    dloss that is neither 1 nor a power of two the gradient is then rounded
    twice (at most one more ulp); fused=False rounds it once."""
    if weight is not None or size_average is not None or reduce is not None:
        raise ValueError("gradkern.cross_entropy: weight, size_average and reduce are not supported")
    if reduction not in ("mean", "sum"):
        raise ValueError("gradkern.cross_entropy: reduction=%r must be 'mean' or 'sum'" % (reduction,))
    if input.dim() >= 3:
        input = input.movedim(1, -1)
    opts = _opts(reduction=reduction, ignore_index=int(ignore_index), label_smoothing=float(label_smoothing),
                 index_dtype=target.dtype)
    fused = bool(fused) and torch.is_grad_enabled() and input.requires_grad
    return CrossEntropyFunction.apply(input, target, opts, fused, resolve_backend(backend))


# ---------------------------------------------------------------- LM head fused with the loss

class LinearCrossEntropyFunction(torch.autograd.Function):
    """loss = cross_entropy(hidden @ weight^T, target), the (N, V) logits never
    stored whole: hidden (N, D), weight (V, D), target (N).

    Forward, per chunk of R rows (hidden_c (R, D), target_c (R)):
        logits_c = hidden_c @ weight^T                 (R, V), torch's matmul
        loss    += sum_r loss_r(logits_c)              gradkern, which also writes
        dlogits_c = s (softmax - onehot ...)           over logits_c in place
        dhidden_c = dlogits_c @ weight                 (R, D)
        dweight  += dlogits_c^T @ hidden_c             (V, D), f32 for 16-bit weights
    with s = 1 / (rows not ignored) for the mean, 1 for the sum. Only dhidden
    and dweight are saved; backward multiplies them by dloss."""

    @staticmethod
    def forward(ctx, hidden, weight, target, opts, reduction, chunk_rows, backend):
        N = hidden.shape[0]
        ignore_index = dict(opts)["ignore_index"]
        count = int((target != ignore_index).sum()) if reduction == "mean" else 1
        scale = 1.0 / count if count > 0 else 0.0           # all rows ignored: loss NaN, gradients 0
        grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        fopts = tuple(sorted(opts + (("fused_grad", int(grad)), ("grad_scale", scale))))
        dhidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        acc_dtype = torch.float32 if weight.dtype in (torch.float16, torch.bfloat16) else weight.dtype
        dweight = torch.zeros(weight.shape, dtype=acc_dtype) if ctx.needs_input_grad[1] else None
        logits_buf = torch.empty((min(chunk_rows, N), weight.shape[0]), dtype=hidden.dtype)
        loss_c = torch.empty((), dtype=stat_dtype(hidden.dtype))
        total = 0.0
        for start in range(0, N, chunk_rows):
            end = min(N, start + chunk_rows)
            h = hidden[start:end]
            logits = logits_buf[:end - start]
            torch.matmul(h, weight.t(), out=logits)
            plan = _plan("cross_entropy", "forward", hidden.dtype, logits.shape, backend, fopts)
            plan.run({"logits": logits, "target": target[start:end], "loss": loss_c,
                      "dlogits": logits if grad else None})
            total += float(loss_c)
            if dhidden is not None:
                torch.matmul(logits, weight, out=dhidden[start:end])
            if dweight is not None:
                dweight.addmm_(logits.t().to(acc_dtype), h.to(acc_dtype))
        loss = total / count if reduction == "mean" and count > 0 else (float("nan") if reduction == "mean" else total)
        if dweight is not None:
            dweight = dweight.to(weight.dtype)
        ctx.save_for_backward(dhidden, dweight)
        return torch.tensor(loss, dtype=hidden.dtype)

    @staticmethod
    @once_differentiable("linear_cross_entropy")
    def backward(ctx, dloss):
        dhidden, dweight = ctx.saved_tensors
        g = float(dloss)
        scaled = [None if t is None else (t if g == 1.0 else t * g) for t in (dhidden, dweight)]
        return scaled[0], scaled[1], None, None, None, None, None


def linear_cross_entropy(hidden, weight, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                         chunk_rows=None, backend=None):
    """cross_entropy(hidden @ weight.T, target) (an LM head without bias, then
    the loss) without storing the (tokens, V) logits: hidden (..., D), weight
    (V, D), target (...) int64 or int32; reduction 'mean' or 'sum'. The
    tokens are processed chunk_rows at a time (default: about N D / V rows,
    so that one chunk's logits are the size of hidden); the gradients of
    hidden and weight are computed in the forward pass and kept instead of
    the logits (see LinearCrossEntropyFunction). The loss is computed in f32
    (f64 for f64) per chunk and summed in double."""
    if reduction not in ("mean", "sum"):
        raise ValueError("gradkern.linear_cross_entropy: reduction=%r must be 'mean' or 'sum'" % (reduction,))
    if weight.dim() != 2 or hidden.dim() < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError("gradkern.linear_cross_entropy: hidden %s and weight %s: weight must be (V, D) with D = "
                         "hidden's last dim" % (tuple(hidden.shape), tuple(weight.shape)))
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError("gradkern.linear_cross_entropy: target %s must have hidden's shape %s without its last dim"
                         % (tuple(target.shape), tuple(hidden.shape)))
    hidden2 = hidden.reshape(-1, hidden.shape[-1])
    target2 = target.reshape(-1)
    N, D = hidden2.shape
    V = weight.shape[0]
    if chunk_rows is None:
        chunk_rows = max(1, -(-N // max(1, -(-V // max(1, D)))))
    if int(chunk_rows) < 1:
        raise ValueError("gradkern.linear_cross_entropy: chunk_rows=%r must be >= 1" % (chunk_rows,))
    opts = _opts(reduction="sum", ignore_index=int(ignore_index), label_smoothing=float(label_smoothing),
                 index_dtype=target.dtype)
    return LinearCrossEntropyFunction.apply(hidden2, weight, target2, opts, reduction, int(chunk_rows),
                                            resolve_backend(backend))


# ---------------------------------------------------------------- embedding

class EmbeddingFunction(torch.autograd.Function):
    """y[p] = weight[idx[p]]; backward sums dy per row of weight, deterministically."""

    @staticmethod
    def forward(ctx, idx, weight, opts, backend):
        plan = _plan("embedding", "forward", weight.dtype, idx.shape, backend, opts)
        y = new_output(plan, "y", weight.dtype, weight)
        plan.run({"weight": weight, "index": idx, "y": y})
        ctx.save_for_backward(idx)
        ctx.gk = (opts, backend, weight.dtype)
        return y

    @staticmethod
    @once_differentiable("embedding")
    def backward(ctx, dy):
        (idx,) = ctx.saved_tensors
        opts, backend, dtype = ctx.gk
        dweight = None
        if ctx.needs_input_grad[1]:
            plan = _plan("embedding", "backward", dtype, idx.shape, backend, opts)
            dweight = new_output(plan, "dweight", dtype, dy)
            plan.run({"dy": dy, "index": idx, "dweight": dweight})
        return None, dweight, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False, *, backend=None):
    """As torch.nn.functional.embedding: rows of weight (V, D) gathered by
    input (any shape, int64 or int32); the row padding_idx (negative counts
    from V) gets no gradient. An index outside 0..V-1 raises gradkern.Error."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise ValueError("gradkern.embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    V = weight.shape[0] if weight.dim() >= 1 else 0
    D = weight.shape[1] if weight.dim() >= 2 else 0
    pad = -1
    if padding_idx is not None:
        pad = int(padding_idx)
        if not -V <= pad < V:
            raise ValueError("gradkern.embedding: padding_idx = %d must be within num_embeddings = %d"
                             % (pad, V))
        pad = pad + V if pad < 0 else pad
    opts = _opts(num_embeddings=int(V), dim=int(D), padding_idx=pad, index_dtype=input.dtype, accumulate=0)
    return EmbeddingFunction.apply(input, weight, opts, resolve_backend(backend))


# ---------------------------------------------------------------- rope

class RopeFunction(torch.autograd.Function):
    """Rotary position embedding; backward is the inverse rotation."""

    @staticmethod
    def forward(ctx, x, opts, backend):
        plan = _plan("rope", "forward", x.dtype, x.shape, backend, opts)
        y = new_output(plan, "y", x.dtype, x)
        plan.run({"x": x, "y": y})
        ctx.gk = (opts, backend, x.dtype, tuple(x.shape))
        return y

    @staticmethod
    @once_differentiable("rope")
    def backward(ctx, dy):
        opts, backend, dtype, shape = ctx.gk
        dx = None
        if ctx.needs_input_grad[0]:
            plan = _plan("rope", "backward", dtype, shape, backend, opts)
            dx = new_output(plan, "dx", dtype, dy)
            plan.run({"dy": dy, "dx": dx})
        return dx, None, None


def rope(x, theta=10000.0, offset=0, layout="bthd", interleaved=False, *, backend=None):
    """Rotary position embedding of x (B, T, H, Dh) (layout='bthd') or
    (B, H, T, Dh) (layout='bhtd'), Dh even: position p = offset + t turns
    pair i by p theta^(-2i/Dh). Pairs (i, i + Dh/2) (rotate-half, LLaMA/HF)
    or, with interleaved=True, (2i, 2i + 1) (GPT-J):
    (y_a, y_b) = (x_a cos - x_b sin, x_b cos + x_a sin)."""
    opts = _opts(theta=float(theta), offset=int(offset), layout=layout,
                 pairing="interleaved" if interleaved else "half")
    return RopeFunction.apply(x, opts, resolve_backend(backend))


# ---------------------------------------------------------------- attention

class AttentionFunction(torch.autograd.Function):
    """Flash-style attention: forward saves the output and the row
    log-sum-exp only; backward recomputes the scores tile by tile."""

    @staticmethod
    def forward(ctx, q, k, v, opts, backend):
        plan = _plan("attention", "forward", q.dtype, q.shape, backend, opts)
        y = new_output(plan, "y", q.dtype, q)
        lse = new_output(plan, "lse", stat_dtype(q.dtype), q)
        plan.run({"q": q, "k": k, "v": v, "y": y, "lse": lse})
        ctx.save_for_backward(q, k, v, y, lse)
        ctx.gk = (opts, backend)
        return y

    @staticmethod
    @once_differentiable("scaled_dot_product_attention")
    def backward(ctx, dy):
        q, k, v, y, lse = ctx.saved_tensors
        opts, backend = ctx.gk
        dq = dk = dv = None
        if any(ctx.needs_input_grad[:3]):
            plan = _plan("attention", "backward", q.dtype, q.shape, backend, opts)
            dq = new_output(plan, "dq", q.dtype, q)
            dk = new_output(plan, "dk", q.dtype, q)
            dv = new_output(plan, "dv", q.dtype, q)
            plan.run({"dy": dy, "q": q, "k": k, "v": v, "y": y, "lse": lse, "dq": dq, "dk": dk, "dv": dv})
        return _needs(ctx, dq, dk, dv) + (None, None)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=True, *, backend=None):
    """As torch 2's F.scaled_dot_product_attention for q (B, H, T, Dh),
    k and v (B, Hkv, T, Dh): softmax(q k^T scale (+ causal mask)) v, scale
    = 1/sqrt(Dh) by default. Hkv < H (dividing it) is grouped-query
    attention: query head h reads kv head h // (H / Hkv), as torch with
    k, v repeat_interleave'd along dim 1. No attn_mask, no dropout; the
    sequence lengths of q and k must agree."""
    if attn_mask is not None or dropout_p != 0.0:
        raise ValueError("gradkern.scaled_dot_product_attention: attn_mask and dropout_p are not supported")
    if scale is not None and (float(scale) == 0.0 or not math.isfinite(float(scale))):
        raise ValueError("gradkern.scaled_dot_product_attention: scale = %r must be finite and non-zero" % (scale,))
    opts = _opts(kv_heads=int(key.shape[1]) if key.dim() == 4 else 0, causal=int(bool(is_causal)),
                 scale=0.0 if scale is None else float(scale))
    return AttentionFunction.apply(query, key, value, opts, resolve_backend(backend))


# ---------------------------------------------------------------- add, mul

class BinaryFunction(torch.autograd.Function):
    """add: y = a + alpha b; mul: y = alpha a b; numpy broadcasting. Backward
    sums each operand's gradient over the dims it was broadcast along; add
    with nothing broadcast hands dy on as da (and as db when alpha is 1)
    without a copy, as autograd does."""

    @staticmethod
    def forward(ctx, a, b, op, opts, backend):
        plan = _plan(op, "forward", a.dtype, a.shape, backend, opts)
        y = new_output(plan, "y", a.dtype, a)
        plan.run({"A": a, "B": b, "y": y})
        if op == "mul":
            ctx.save_for_backward(a, b)
        ctx.gk = (op, opts, backend, a.dtype, tuple(a.shape), tuple(b.shape))
        ctx.gk_name = op
        return y

    @staticmethod
    @once_differentiable()
    def backward(ctx, dy):
        op, opts, backend, dtype, a_shape, b_shape = ctx.gk
        if not any(ctx.needs_input_grad[:2]):
            return None, None, None, None, None
        alpha = dict(opts)["alpha"]
        if op == "add" and a_shape == b_shape:
            return _needs(ctx, dy, dy if alpha == 1.0 else dy * alpha) + (None, None, None)
        plan = _plan(op, "backward", dtype, a_shape, backend, opts)
        da = torch.empty(a_shape, dtype=dtype)
        db = torch.empty(b_shape, dtype=dtype)
        args = {"dy": dy, "dA": da, "dB": db}
        if op == "mul":
            args["A"], args["B"] = ctx.saved_tensors
        plan.run(args)
        return _needs(ctx, da, db) + (None, None, None)


def _binary(op, a, b, alpha, backend):
    if not isinstance(b, torch.Tensor):
        b = torch.tensor(b, dtype=a.dtype)
    opts = _opts(b_shape=tuple(b.shape), alpha=float(alpha))
    return BinaryFunction.apply(a, b, op, opts, resolve_backend(backend))


def add(input, other, *, alpha=1, backend=None):
    """As torch.add(input, other, alpha=alpha): input + alpha other, with
    broadcasting (no dtype promotion: both in one dtype; a Python number is
    taken in input's dtype)."""
    return _binary("add", input, other, alpha, backend)


def mul(input, other, *, alpha=1, backend=None):
    """As torch.mul(input, other), with broadcasting, times a scalar alpha."""
    return _binary("mul", input, other, alpha, backend)
